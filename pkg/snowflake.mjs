// Snowflake IDs: the `Snowflake` class, and the one wait loop every minting
// core (a plain generator, or a leased holder) runs under.
import { codedError } from './errors.mjs';
import { count, options, toId } from './args.mjs';
import { sleep } from './timers.mjs';

/**
 * An ID's parts. The core decomposes (returning the timestamp, keeping the
 * other two parts for two reads) and the object is built here, in JS: built
 * from inside wasm it cost ~2.5 µs. `date` is made when read (a Date costs
 * more than the rest of the decoding); `toJSON` includes it.
 */
class DecomposedId {
  constructor(timestamp, workerId, sequence) {
    this.timestamp = timestamp;
    this.workerId = workerId;
    this.sequence = sequence;
  }

  get date() { return new Date(this.timestamp); }

  toJSON() {
    return { timestamp: this.timestamp, date: this.date, workerId: this.workerId, sequence: this.sequence };
  }
}

const partsOf = (wasm, timestamp) => new DecomposedId(timestamp, wasm.decomposedWorkerId(), wasm.decomposedSequence());

/**
 * Minting over a core with `nextId(now)`, `nextIds(now, n)`, `retryAfterMs()`
 * and `failure()`: answers now, or awaits the timer the core asks for.
 */
export class Minter {
  #core;
  #now;

  #wasm;

  constructor(wasm, core, now) {
    this.#wasm = wasm;
    this.#core = core;
    this.#now = now;
  }

  nextId() {
    const id = this.#core.nextId(this.#now());
    if (id !== 0n) return id;
    throw this.#core.failure();
  }

  nextIds(n) {
    const ids = this.#core.nextIds(this.#now(), count(n));
    if (ids.length === n) return ids;
    const err = this.#core.failure();
    err.ids = ids;
    throw err;
  }

  async next() {
    for (;;) {
      const id = this.#core.nextId(this.#now());
      if (id !== 0n) return id;
      const wait = this.#core.retryAfterMs();
      if (wait === 0) throw this.#core.failure();
      await sleep(wait);
    }
  }

  async nextIdsAsync(n) {
    const out = new BigUint64Array(count(n));
    let filled = 0;
    for (;;) {
      const ids = this.#core.nextIds(this.#now(), n - filled);
      out.set(ids, filled);
      filled += ids.length;
      if (filled === n) return out;
      const wait = this.#core.retryAfterMs();
      if (wait === 0) throw this.#core.failure();
      await sleep(wait);
    }
  }

  decompose(id) {
    return partsOf(this.#wasm, this.#core.decompose(toId(id)));
  }
}

export function makeSnowflake(wasm) {
  // Layout options travel as two values (a name or object, and an epoch):
  // this is the one place the `{ layout, epoch }` object is read.
  function layoutArgs(opts) {
    const o = options('layout options', opts, '{ layout: "leaf", epoch: 1288834974657 }');
    for (const key of Object.keys(o)) {
      if (key !== 'layout' && key !== 'epoch') {
        throw codedError('invalid_option', `layout options: expected only layout and epoch, found ${JSON.stringify(key)}`);
      }
    }
    return [o.layout, o.epoch instanceof Date ? o.epoch.getTime() : o.epoch];
  }

  /**
   * Snowflake IDs (bigint) for one worker ID. A Minter itself, so that
   * `nextId()` is the Minter's own method, one call from the core's: a
   * wrapper method calling a Minter held in a field cost ~2% of the call.
   */
  class Snowflake extends Minter {
    #core;

    constructor(opts) {
      // The bindings check every option, `now` included.
      const core = new wasm.SnowflakeCore(opts ?? null);
      super(wasm, core, opts.now ?? Date.now);
      this.#core = core;
    }

    // nextId(), nextIds(n), next(), nextIdsAsync(n), decompose(id): the Minter's.
    /** The next ID as a decimal string (for JSON). */
    nextIdString() { return this.nextId().toString(); }
    /** `{ timestampBits, workerBits, sequenceBits, epoch, unitMs, expiresAt, maxWorkerId, maxSequence, maxId }`. */
    get layout() { return this.#core.layout(); }
    get workerId() { return this.#core.workerId; }
    /** `{ lastMs, sequence }` of the last issued ID: persist `lastMs` to restart safely. */
    state() { return this.#core.state(); }

    /** An ID from `{ timestamp, workerId, sequence }` under a layout (default Leaf's). */
    static compose(parts, layoutOptions) {
      const p = options('parts', parts ?? null, '{ timestamp: Date.now(), workerId: 1, sequence: 0 }');
      const [layout, epoch] = layoutArgs(layoutOptions);
      const timestamp = p.timestamp instanceof Date ? p.timestamp.getTime() : p.timestamp;
      return wasm.compose(layout, epoch, timestamp, p.workerId, p.sequence);
    }

    /** `{ timestamp, date, workerId, sequence }` of an ID under a layout (default Leaf's). */
    static decompose(id, layoutOptions) {
      const [layout, epoch] = layoutArgs(layoutOptions);
      return partsOf(wasm, wasm.decompose(layout, epoch, toId(id)));
    }
  }

  /** The layout's facts, as `Snowflake#layout` gives them. */
  function layoutInfo(layoutOptions) {
    const [layout, epoch] = layoutArgs(layoutOptions);
    return wasm.layoutInfo(layout, epoch);
  }

  return { Snowflake, layoutInfo };
}
