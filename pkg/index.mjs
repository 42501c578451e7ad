// Node, `import`: the nodejs build of the wasm (loaded synchronously from disk).
import wasm from './node/edgeleaf.js';
import { makeApi } from './api.mjs';

export const { Snowflake, SegmentGenerator, OpaqueIds, EdgeleafClient, layoutInfo, codedError, MAX_IDS_PER_CALL } = makeApi(wasm);
