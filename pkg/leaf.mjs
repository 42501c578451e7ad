// continueAfterLeaf: where a tag moved from Leaf's leaf_alloc table continues
// on the service, decided by the core (src/leaf.rs); this converts and checks
// arguments. The command line's import-leaf is its caller.
import { codedError, describe } from './errors.mjs';
import { toId } from './args.mjs';

export function makeLeaf(wasm) {
  /**
   * `{ action: 'create' | 'raise' | 'unchanged' | 'conflict', margin,
   * targetMaxId?, conflict? }` for Leaf's row (`leafMaxId`, `leafStep`) and
   * the service's tag (`service`: `{ maxId, opaque }`, or null for none).
   * `force`: a target past 2^62 (a short runway) is accepted.
   */
  function continueAfterLeaf(leafMaxId, leafStep, { margin, service = null, force = false } = {}) {
    if (!Number.isSafeInteger(leafStep) || leafStep < 1) {
      throw codedError('out_of_range', `leaf step: expected a whole number of at least 1, found ${describe(leafStep)}`);
    }
    return wasm.leafContinuation(
      toId(leafMaxId, 'leaf max_id'),
      BigInt(leafStep),
      margin === undefined ? undefined : toId(margin, 'margin'),
      service ? toId(service.maxId, 'service maxId') : undefined,
      Boolean(service?.opaque),
      Boolean(force),
    );
  }
  return { continueAfterLeaf };
}
