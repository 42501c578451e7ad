// The Worker's entry module (build/index.js; scripts/worker.sh puts it
// there, beside worker-build's output, renamed build/edgeleaf.js). It only
// carries calls: the HTTP API and the Durable Objects are worker-build's
// exports as they are, and `Ids` is the RPC entrypoint a service binding
// names (`entrypoint = "Ids"`): each method hands its arguments to the Rust
// handlers (worker/src/binding.rs) and returns their answer, which is the
// HTTP route's JSON body or `{ error: { code, message }, status, retryAfterMs }`.
// `BindingCalls` is imported, never exported: no request and no other
// entrypoint reaches it.
import { WorkerEntrypoint } from 'cloudflare:workers';
import { BindingCalls } from './edgeleaf.js';

export {
  default, ApiKey, Catalog, KeyStore, RegionalAllocator, SnowflakeMinter, TagStore, WorkerRegistry,
} from './edgeleaf.js';

// A BigInt (an ID a caller holds as one) goes as its decimal string.
const decimal = (_, v) => (typeof v === 'bigint' ? String(v) : v);

export class Ids extends WorkerEntrypoint {
  // The arguments go as a JSON array (one left out: null, refused by the
  // handlers as the route refuses a missing value).
  async #call(op, ...args) {
    return JSON.parse(await BindingCalls.answer(this.env, this.ctx, op, JSON.stringify(args, decimal)));
  }

  /** `count` IDs of `tag`'s segments: `{ ids: string[] }`. */
  segment(tag, count = 1) { return this.#call('segment', tag, count); }

  /** `count` snowflake IDs: `{ ids: string[] }`. */
  snowflake(count = 1) { return this.#call('snowflake', count); }

  /** A whole segment of `tag` for a client to serve (`{ step?, requestId?, after? }`). */
  segmentLease(tag, body = {}) { return this.#call('segmentLease', tag, body); }

  /** The unused tail of a leased segment handed back (`{ requestId, start, end }`). */
  segmentReturn(tag, body) { return this.#call('segmentReturn', tag, body); }

  /** The parts of a snowflake ID. */
  decode(id) { return this.#call('decode', String(id)); }

  /** The counter of an opaque tag's ID (only for tags in `RPC_REVEAL`). */
  reveal(tag, id) { return this.#call('reveal', tag, id); }

  /** A snowflake worker ID leased for a node (`{ nodeKey, nodeTime, previous? }`). */
  workerLease(body) { return this.#call('workerLease', body); }

  /** Renews a worker-ID lease (`{ generation, secret, nodeTime, lastTimestamp }`). */
  workerRenew(id, body) { return this.#call('workerRenew', id, body); }

  /** Releases a worker-ID lease. */
  workerRelease(id, body) { return this.#call('workerRelease', id, body); }
}
