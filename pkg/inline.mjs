// The .wasm as the default entry carries it: deflated and base64-encoded in a
// JS module (web/edgeleaf_inline.js, made by `make pkg`), decoded
// synchronously. Node, Deno and Bun decode with their zlib (reached through
// process.getBuiltinModule, so that no bundler sees a Node import);
// browsers and the rest with inflate.mjs.
import { size, deflated } from './web/edgeleaf_inline.js';
import { inflateRaw, fromBase64 } from './inflate.mjs';

/** The .wasm's bytes. */
export function wasmBytes() {
  const buffer = builtin('node:buffer');
  const zlib = buffer && builtin('node:zlib');
  if (zlib) return zlib.inflateRawSync(buffer.Buffer.from(deflated, 'base64'));
  return inflateRaw(fromBase64(deflated), size);
}

// A Node built-in module, or undefined where there is none. Next.js's edge
// runtime has a `process` whose every Node function throws when called.
function builtin(name) {
  try {
    return globalThis.process?.getBuiltinModule?.(name);
  } catch {
    return undefined;
  }
}
