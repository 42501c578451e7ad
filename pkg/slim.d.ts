// Types of edgeleaf/slim: the API of edgeleaf (index.d.ts), once `init` has
// instantiated the wasm the caller serves (the file is `edgeleaf/edgeleaf.wasm`).
export * from './index.js';

/** Where `init` finds the wasm: a URL to fetch, a Response (or its promise), the bytes, or a compiled module. */
export type WasmSource = WebAssembly.Module | BufferSource | URL | string | Request | Response | PromiseLike<Response>;

/**
 * Instantiates the wasm; call (and await) it once before using the API, whose
 * constructors throw `not_initialized` until then. Later calls do nothing.
 */
export declare function init(wasm: WasmSource): Promise<void>;

/** `init` without waiting: the bytes or a compiled module (a page's main thread may refuse to compile large modules synchronously). */
export declare function initSync(wasm: WebAssembly.Module | BufferSource): void;
