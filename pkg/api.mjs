// The JS API of edgeleaf, over the wasm engine. One factory, bound once per
// runtime by the entry files (index.mjs, slim.mjs, workerd.mjs; index.cjs and
// slim.cjs are their CommonJS bundles, made by `make pkg`).
// The clock is read here, in JS: passing it into wasm costs less than reading
// it from inside. Waiting happens here too (timers, promises); the Rust core
// decides everything else and says how long to wait.
//
//   errors.mjs     coded errors, ID and count checks
//   snowflake.mjs  Snowflake, layoutInfo, the minting wait loop
//   segment.mjs    SegmentGenerator
//   opaque.mjs     OpaqueIds (the keyed permutation of opaque IDs)
//   client.mjs     EdgeleafClient (HTTP, leased snowflakes, segment leases)
//   leaf.mjs       continueAfterLeaf (where a tag moved from Leaf continues)
import { codedError } from './errors.mjs';
import { MAX_IDS_PER_CALL } from './args.mjs';
import { makeSnowflake } from './snowflake.mjs';
import { makeSegmentGenerator } from './segment.mjs';
import { makeOpaque } from './opaque.mjs';
import { makeClient } from './client.mjs';
import { makeLeaf } from './leaf.mjs';

export { codedError, MAX_IDS_PER_CALL };

export function makeApi(wasm) {
  const { Snowflake, layoutInfo } = makeSnowflake(wasm);
  const { SegmentGenerator, fenceOf } = makeSegmentGenerator(wasm);
  const { OpaqueIds } = makeOpaque(wasm);
  const { EdgeleafClient } = makeClient(wasm, { SegmentGenerator, fenceOf });
  const { continueAfterLeaf } = makeLeaf(wasm);
  return { Snowflake, SegmentGenerator, OpaqueIds, EdgeleafClient, layoutInfo, continueAfterLeaf, codedError, MAX_IDS_PER_CALL };
}
