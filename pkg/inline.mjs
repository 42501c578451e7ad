// The .wasm as the default entry carries it: deflated and base64-encoded in a
// JS module (web/edgeleaf_inline.js, made by `make pkg`), decoded
// synchronously. Node, Deno and Bun decode with their zlib (reached through
// process.getBuiltinModule, so that no bundler sees a Node import);
// browsers and the rest with inflate.mjs.
import { size, deflated } from './web/edgeleaf_inline.js';
import { inflateRaw, fromBase64 } from './inflate.mjs';

/** The .wasm's bytes. */
export function wasmBytes() {
  const node = globalThis.process;
  if (typeof node?.getBuiltinModule === 'function') {
    const { Buffer } = node.getBuiltinModule('node:buffer');
    return node.getBuiltinModule('node:zlib').inflateRawSync(Buffer.from(deflated, 'base64'));
  }
  return inflateRaw(fromBase64(deflated), size);
}
