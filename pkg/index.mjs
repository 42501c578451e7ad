// The default entry: Node (import), Deno, Bun, browsers and every bundler.
// The wasm is inlined in the JS (inline.mjs) and compiled synchronously at
// import: no fetch, no file read, no top-level await, no asset for a bundler
// to copy or a server build to lose. (workerd: workerd.mjs; serving the .wasm
// yourself: slim.mjs.)
import * as wasm from './web/edgeleaf.js';
import { wasmBytes } from './inline.mjs';
import { makeApi } from './api.mjs';
import { codedError as coded } from './errors.mjs';

let module;
try {
  module = new WebAssembly.Module(wasmBytes());
} catch (e) {
  // Chromium before 114 (2023) compiles at most 4 KB synchronously on a page's main thread.
  if (!(e instanceof RangeError)) throw e;
  throw coded('sync_compile_refused', `edgeleaf: this runtime refuses to compile WebAssembly synchronously here (${e.message}); ` +
    "import from 'edgeleaf/slim' and `await init(url of edgeleaf/edgeleaf.wasm)` instead", { cause: e });
}
wasm.initSync({ module });

export const { Snowflake, SegmentGenerator, OpaqueIds, EdgeleafClient, layoutInfo, continueAfterLeaf, codedError, MAX_IDS_PER_CALL } = makeApi(wasm);
