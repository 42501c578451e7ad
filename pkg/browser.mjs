// Browsers, `<script type="module">` without a bundler: fetches the .wasm next
// to this file once, at import.
import init, * as wasm from './web/edgeleaf.js';
import { makeApi } from './api.mjs';

await init({ module_or_path: new URL('./web/edgeleaf_bg.wasm', import.meta.url) });

export const { Snowflake, SegmentGenerator, OpaqueIds, EdgeleafClient, layoutInfo, codedError, MAX_IDS_PER_CALL } = makeApi(wasm);
