// Cloudflare Workers / workerd (the `workerd` condition): workerd compiles no
// wasm from bytes, so the .wasm is imported as a module (wrangler and
// Miniflare upload it as one), and nothing at module scope draws randomness,
// sets timers or does I/O.
import * as wasm from './web/edgeleaf.js';
import module from './web/edgeleaf_bg.wasm';
import { makeApi } from './api.mjs';

wasm.initSync({ module });

export const { Snowflake, SegmentGenerator, OpaqueIds, EdgeleafClient, layoutInfo, continueAfterLeaf, codedError, MAX_IDS_PER_CALL } = makeApi(wasm);
