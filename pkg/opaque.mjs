// `OpaqueIds`: the core's keyed permutation of an ID domain, for users who
// keep the key in their own process (the service keeps its own).
import { toId } from './args.mjs';

/**
 * The length of a key, bytes: the core's `opaque::OPAQUE_KEY_BYTES`, written
 * here because `generateKey()` works before the wasm is loaded
 * (edgeleaf/slim). tests/pkg/opaque.test.mjs compares it with the core's
 * (the bindings' `opaqueKeyBytes()`); a wrong length would be refused by the
 * core when the key is used.
 */
export const OPAQUE_KEY_BYTES = 16;

export function makeOpaque(wasm) {
  /** IDs that reveal neither order nor volume: `encode(counter)` / `decode(id)`, both bigint. */
  class OpaqueIds {
    #core;

    constructor(opts) {
      this.#core = new wasm.OpaqueCore(opts ?? null);
    }

    /** The ID of counter `n` (1..=maxId). */
    encode(n) { return this.#core.encode(toId(n, 'counter')); }
    /** The counter of `id`. */
    decode(id) { return this.#core.decode(toId(id)); }
    /** The largest ID (and counter) of the domain. */
    get maxId() { return this.#core.maxId; }

    /** A new 128-bit key from crypto.getRandomValues. */
    static generateKey() {
      const key = new Uint8Array(OPAQUE_KEY_BYTES);
      crypto.getRandomValues(key);
      return key;
    }
  }

  return { OpaqueIds };
}
