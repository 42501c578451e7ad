// edgeleaf/slim: the same API without the inlined wasm, for those who serve the
// .wasm themselves (it is `edgeleaf/edgeleaf.wasm`): `await init(source)`
// once, with a URL, a Response, the bytes or a compiled WebAssembly.Module;
// or `initSync(bytes or module)`. Before that, every constructor throws
// `not_initialized`.
import init_, { initSync as initSync_ } from './web/edgeleaf.js';
import * as wasm from './web/edgeleaf.js';
import { makeApi } from './api.mjs';
import { codedError, describe } from './errors.mjs';

const api = makeApi(wasm);
let ready = false;

function check() {
  if (!ready) {
    throw codedError('not_initialized', "edgeleaf/slim: `await init(wasm)` first (the .wasm is 'edgeleaf/edgeleaf.wasm')");
  }
}

function source(what, value, sync) {
  const ok = value instanceof WebAssembly.Module || value instanceof ArrayBuffer || ArrayBuffer.isView(value) ||
    (!sync && (typeof value === 'string' || value instanceof URL || (typeof Request === 'function' && value instanceof Request) ||
      (typeof Response === 'function' && value instanceof Response) || typeof value?.then === 'function'));
  if (!ok) {
    const expected = sync ? 'the bytes of edgeleaf.wasm or a WebAssembly.Module' : 'a URL, a Response, the bytes of edgeleaf.wasm or a WebAssembly.Module';
    throw codedError('invalid_argument', `${what}: expected ${expected}, found ${describe(value)}`);
  }
  return value;
}

/** Instantiates the wasm from a URL (fetched), a Response (or its promise), bytes or a WebAssembly.Module. */
export async function init(wasmSource) {
  if (ready) return;
  await init_({ module_or_path: source('init', wasmSource, false) });
  ready = true;
}

/** Instantiates the wasm from bytes or a WebAssembly.Module, synchronously. */
export function initSync(wasmSource) {
  if (ready) return;
  initSync_({ module: source('initSync', wasmSource, true) });
  ready = true;
}

export class Snowflake extends api.Snowflake {
  constructor(opts) { check(); super(opts); }
  static compose(parts, layoutOptions) { check(); return super.compose(parts, layoutOptions); }
  static decompose(id, layoutOptions) { check(); return super.decompose(id, layoutOptions); }
}

export class SegmentGenerator extends api.SegmentGenerator {
  constructor(opts) { check(); super(opts); }
}

export class OpaqueIds extends api.OpaqueIds {
  constructor(opts) { check(); super(opts); }
}

export class EdgeleafClient extends api.EdgeleafClient {
  constructor(opts) { check(); super(opts); }
}

export function layoutInfo(layoutOptions) {
  check();
  return api.layoutInfo(layoutOptions);
}

export function continueAfterLeaf(leafMaxId, leafStep, options) {
  check();
  return api.continueAfterLeaf(leafMaxId, leafStep, options);
}

export const { MAX_IDS_PER_CALL } = api;
export { codedError };
