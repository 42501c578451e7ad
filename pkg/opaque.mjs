// `OpaqueIds`: the core's keyed permutation of an ID domain, for users who
// keep the key in their own process (the service keeps its own).
import { toId } from './args.mjs';

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
      // The core's OPAQUE_KEY_BYTES, written here: generateKey works before
      // the wasm is loaded (edgeleaf/slim), and a wrong length is refused by
      // the core when the key is used.
      const key = new Uint8Array(16);
      crypto.getRandomValues(key);
      return key;
    }
  }

  return { OpaqueIds };
}
