// The JS API of edgeleaf, over the wasm engine. One factory, bound once per
// runtime by the entry files (index.mjs, index.cjs, browser.mjs, workerd.mjs).
// The clock is read here, in JS: passing it into wasm costs less than reading
// it from inside. Waiting happens here too (timers, promises); the Rust core
// only ever says how long.

const LOAD = 1n << 63n;
const MAX_ID = (1n << 63n) - 1n;
/** Most IDs one batch call returns. */
export const MAX_BATCH = 1_000_000;

/** An `Error` with a machine-readable `code` (and extra fields). */
export function codedError(code, message, fields) {
  const err = new Error(message);
  err.code = code;
  if (fields) Object.assign(err, fields);
  return err;
}

function describe(value) {
  if (value === null) return 'null';
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function options(what, value, example) {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw codedError('invalid_option', `${what}: expected an object such as ${example}, found ${describe(value)}`);
  }
  return value;
}

function fn(what, value) {
  if (typeof value !== 'function') {
    throw codedError('invalid_option', `${what}: expected a function, found ${describe(value)}`);
  }
  return value;
}

function ms(what, value) {
  if (value instanceof Date) return value.getTime();
  return value;
}

/** An ID from a bigint, a safe integer or a decimal string, checked to be 0..2^63-1. */
export function toId(value, what = 'id') {
  let id;
  if (typeof value === 'bigint') id = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) id = BigInt(value);
  else if (typeof value === 'string' && /^[0-9]{1,19}$/.test(value)) id = BigInt(value);
  if (id === undefined || id < 0n || id > MAX_ID) {
    throw codedError('invalid_id', `${what}: expected a bigint or decimal string in 0..=${MAX_ID}, found ${describe(value)}`);
  }
  return id;
}

function count(n) {
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_BATCH) {
    throw codedError('out_of_range', `count: expected 1..=${MAX_BATCH}, found ${describe(n)}`);
  }
  return n;
}

const sleep = (delay) => new Promise((resolve) => setTimeout(resolve, delay));

export function makeApi(wasm) {
  function withDate(parts) {
    parts.date = new Date(parts.timestamp);
    return parts;
  }

  function layoutArgs(opts) {
    const o = options('layout options', opts, '{ layout: "leaf", epoch: 1288834974657 }');
    for (const key of Object.keys(o)) {
      if (key !== 'layout' && key !== 'epoch') {
        throw codedError('invalid_option', `layout options: expected only layout and epoch, found ${JSON.stringify(key)}`);
      }
    }
    return [o.layout, ms('epoch', o.epoch)];
  }

  /** Snowflake IDs (bigint) for one worker ID. */
  class Snowflake {
    #core;
    #now;

    constructor(opts) {
      const { now, ...rest } = options('Snowflake options', opts ?? null, '{ workerId: 1 }');
      this.#now = now === undefined ? Date.now : fn('now', now);
      if (rest.epoch instanceof Date) rest.epoch = rest.epoch.getTime();
      this.#core = new wasm.SnowflakeCore(rest);
    }

    /** The next ID. Throws `sequence_exhausted` / `clock_behind` (with `retryAfterMs`) rather than wait. */
    nextId() {
      const id = this.#core.nextId(this.#now());
      if (id !== 0n) return id;
      throw this.#core.failure();
    }

    /** The next ID as a decimal string (for JSON). */
    nextIdString() {
      return this.nextId().toString();
    }

    /** `n` IDs in one call. Throws like `nextId()` when they can't all be had now; the error's `ids` holds those that were. */
    nextIds(n) {
      const ids = this.#core.nextIds(this.#now(), count(n));
      if (ids.length === n) return ids;
      const err = this.#core.failure();
      err.ids = ids;
      throw err;
    }

    /** The next ID, awaiting a timer when the sequence ran out or the clock went back a little. */
    async next() {
      for (;;) {
        const id = this.#core.nextId(this.#now());
        if (id !== 0n) return id;
        const wait = this.#core.retryAfterMs();
        if (wait === 0) throw this.#core.failure();
        await sleep(wait);
      }
    }

    /** `n` IDs, awaiting across time units as needed. */
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

    /** `{ timestamp, date, workerId, sequence }` of an ID under this generator's layout. */
    decompose(id) {
      return withDate(this.#core.decompose(toId(id)));
    }

    /** `{ timestampBits, workerBits, sequenceBits, epoch, unitMs, expiresAt, maxWorkerId, maxSequence, maxId }`. */
    get layout() {
      return this.#core.layout();
    }

    get workerId() {
      return this.#core.workerId;
    }

    /** `{ lastMs, sequence }` of the last issued ID: persist `lastMs` to restart safely. */
    state() {
      return this.#core.state();
    }

    /** An ID from `{ timestamp, workerId, sequence }` under a layout (default Leaf's). */
    static compose(parts, layoutOptions) {
      const p = options('parts', parts ?? null, '{ timestamp: Date.now(), workerId: 1, sequence: 0 }');
      const [layout, epoch] = layoutArgs(layoutOptions);
      return wasm.compose(layout, epoch, ms('timestamp', p.timestamp), p.workerId, p.sequence);
    }

    /** `{ timestamp, date, workerId, sequence }` of an ID under a layout (default Leaf's). */
    static decompose(id, layoutOptions) {
      const [layout, epoch] = layoutArgs(layoutOptions);
      return withDate(wasm.decompose(layout, epoch, toId(id)));
    }
  }

  /** The layout's facts, as `Snowflake#layout` gives them. */
  function layoutInfo(layoutOptions) {
    const [layout, epoch] = layoutArgs(layoutOptions);
    return wasm.layoutInfo(layout, epoch);
  }

  function segmentOf(tag, step, value) {
    if (value === null || typeof value !== 'object') {
      throw codedError('invalid_segment', `fetchSegment(${tag}, ${step}): expected { start, end }, found ${describe(value)}`);
    }
    return [toId(value.start, 'segment start'), toId(value.end, 'segment end')];
  }

  /**
   * Segment-mode IDs generated in this process from ranges fetched through
   * `fetchSegment(tag, step) => Promise<{ start, end }>` (inclusive bounds).
   */
  class SegmentGenerator {
    #core;
    #tag;
    #fetch;
    #now;
    #inflight = null;

    constructor(opts) {
      const { tag, fetchSegment, now, ...rest } = options(
        'SegmentGenerator options',
        opts ?? null,
        '{ tag: "order", fetchSegment: async (tag, step) => ({ start, end }) }',
      );
      if (typeof tag !== 'string') {
        throw codedError('invalid_key', `biz_tag: expected a string, found ${describe(tag)}`);
      }
      wasm.checkTag(tag);
      this.#tag = tag;
      this.#fetch = fn('fetchSegment', fetchSegment);
      this.#now = now === undefined ? Date.now : fn('now', now);
      this.#core = new wasm.SegmentCore(rest);
    }

    get tag() {
      return this.#tag;
    }

    /** An ID if one is in memory, else `undefined` (and a load is under way). Never waits. */
    tryNext() {
      const r = this.#core.nextId();
      if (r < LOAD && r !== 0n) return r;
      if (r > LOAD) {
        this.#load();
        return r - LOAD;
      }
      if (r === 0n) this.#load();
      return undefined;
    }

    /** The next ID, awaiting the store only when both buffers are empty. */
    async next() {
      for (;;) {
        const id = this.tryNext();
        if (id !== undefined) return id;
        await this.#inflight;
      }
    }

    /** `n` IDs (across segments), as a BigUint64Array. */
    async nextIds(n) {
      const out = new BigUint64Array(count(n));
      let filled = 0;
      for (;;) {
        const ids = this.#core.take(n - filled);
        out.set(ids, filled);
        filled += ids.length;
        if (this.#core.loadRequested) this.#load();
        if (filled === n) return out;
        await this.#inflight;
      }
    }

    /** Loads the first segment before anyone asks (Leaf's first request waited for the store). */
    async warmUp() {
      if (this.#core.beginLoad()) this.#load();
      await this.#inflight;
    }

    /** Leaf's cache view: initialized, currentPos, nextReady, loading, step, segments[{ value, max, step }]. */
    snapshot() {
      return this.#core.snapshot();
    }

    // The core has marked a load in flight; exactly one runs at a time, and
    // every waiter awaits the same promise.
    #load() {
      const load = (async () => {
        let step;
        let range;
        try {
          step = this.#core.stepForNextLoad(this.#now());
          range = segmentOf(this.#tag, step, await this.#fetch(this.#tag, step));
        } catch (cause) {
          this.#core.loadFailed();
          if (step === undefined || cause?.code === 'invalid_segment' || cause?.code === 'invalid_id') throw cause;
          throw codedError('segment_fetch_failed', `fetchSegment(${this.#tag}, ${step}) failed: ${cause?.message ?? cause}`, { cause });
        }
        this.#core.load(range[0], range[1], this.#now());
      })();
      this.#inflight = load;
      load.then(
        () => { if (this.#inflight === load) this.#inflight = null; },
        () => { if (this.#inflight === load) this.#inflight = null; },
      );
    }
  }

  return { Snowflake, SegmentGenerator, layoutInfo, codedError, MAX_BATCH };
}
