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
          // Coded errors (ours, or the service's through EdgeleafClient) say what happened; keep them.
          if (step === undefined || typeof cause?.code === 'string') throw cause;
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


  /** Turns an HTTP error answer of the service into a coded Error. */
  async function httpError(res, what) {
    let code = 'http_error';
    let message = `${what}: the service answered ${res.status}`;
    try {
      const body = await res.json();
      if (body?.error?.code) ({ code, message } = body.error);
    } catch { /* not JSON */ }
    const retry = Number(res.headers.get('retry-after'));
    return codedError(code, message, { status: res.status, ...(retry > 0 ? { retryAfterMs: retry * 1000 } : {}) });
  }

  function randomHex(bytes) {
    const b = new Uint8Array(bytes);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  /**
   * A Snowflake under a worker ID leased from the service's registry. It
   * renews the lease when half its TTL has passed and stops issuing (throws
   * `lease_expired` / `lease_lost`) the moment the lease is gone.
   */
  class LeasedSnowflake {
    #client;
    #store;
    #now;
    #nodeKey;
    #lease;
    #gen;
    #lost = null;
    #timer = null;
    #closed = false;

    constructor(client, nodeKey, lease, gen, store, now) {
      this.#client = client;
      this.#nodeKey = nodeKey;
      this.#lease = lease;
      this.#gen = gen;
      this.#store = store;
      this.#now = now;
      this.#schedule();
    }

    static async open(client, opts) {
      const { nodeKey, store, now = Date.now } = options('snowflake options', opts, '{ nodeKey: "host-1:8080", store }');
      const key = nodeKey ?? `node-${randomHex(8)}`;
      wasm.checkTag(key);
      if (store !== undefined && (typeof store?.load !== 'function' || typeof store?.save !== 'function')) {
        throw codedError('invalid_option', 'store: expected { load(): Promise<state | undefined>, save(state): Promise<void> }');
      }
      const cached = store ? await store.load() : undefined;
      const clock = now();
      // Leaf's local cache, with the fix: the last timestamp is kept and checked.
      if (cached && clock < cached.lastTimestamp) {
        throw codedError('clock_behind_last_report', `clock: expected at least ${cached.lastTimestamp} (last issued, from the store), found ${clock}`);
      }
      let lease;
      try {
        lease = await client.request('POST', '/v1/workers/lease', {
          nodeKey: key,
          nodeTime: clock,
          ...(cached?.workerId !== undefined ? { previous: { workerId: cached.workerId, generation: cached.generation } } : {}),
        });
      } catch (e) {
        // The registry is unreachable: a cached lease that has not lapsed is still ours.
        if (e.code !== 'registry_unreachable' || !cached || !(clock < cached.expiresAtMs) || !cached.layout) throw e;
        lease = { ...cached, issueAfterMs: cached.lastTimestamp };
      }
      const l = lease.layout;
      const gen = new Snowflake({
        workerId: lease.workerId,
        layout: { timestampBits: l.timestampBits, workerBits: l.workerBits, sequenceBits: l.sequenceBits, epoch: l.epoch, unitMs: l.unitMs },
        // Taking back a worker ID this node held: its previous incarnation may
        // have issued up to now (the store is written at renewals, not per ID).
        resumeAfter: Math.max(lease.issueAfterMs ?? 0, cached?.lastTimestamp ?? 0, l.epoch,
          cached?.workerId === lease.workerId ? now() : 0),
        now,
      });
      const leased = new LeasedSnowflake(client, key, lease, gen, store, now);
      await leased.#save();
      return leased;
    }

    #check() {
      if (this.#lost) throw this.#lost;
      if (!(this.#now() < this.#lease.expiresAtMs)) {
        this.#lost = codedError('lease_expired', `lease of worker ${this.#lease.workerId}: expected a renewal by ${this.#lease.expiresAtMs}, found none; open a new snowflake()`);
        throw this.#lost;
      }
    }

    #schedule() {
      if (this.#closed) return;
      const delay = Math.max(0, this.#lease.expiresAtMs - this.#lease.ttlMs / 2 - this.#now());
      this.#timer = setTimeout(() => { this.renew().catch(() => {}); }, Math.min(delay, this.#lease.ttlMs));
      this.#timer.unref?.();
    }

    async #save() {
      if (!this.#store) return;
      const { workerId, generation, expiresAtMs, ttlMs, layout } = this.#lease;
      await this.#store.save({
        nodeKey: this.#nodeKey, workerId, generation, expiresAtMs, ttlMs, layout,
        lastTimestamp: this.#gen.state().lastMs,
      });
    }

    /** Renews the lease now (done on a timer at half the TTL). */
    async renew() {
      if (this.#closed || this.#lost) return;
      try {
        const lease = await this.#client.request('POST', `/v1/workers/${this.#lease.workerId}/renew`, {
          generation: this.#lease.generation, nodeTime: this.#now(), lastTimestamp: this.#gen.state().lastMs,
        });
        this.#lease = { ...this.#lease, ...lease };
        await this.#save();
      } catch (e) {
        if (e.status === 409 || e.status === 410) {
          this.#lost = codedError('lease_lost', `lease of worker ${this.#lease.workerId}: ${e.message}`, { cause: e });
        }
        // Unreachable: retried on the next timer; the lease still lapses on time.
      } finally {
        this.#schedule();
      }
    }

    nextId() { this.#check(); return this.#gen.nextId(); }
    nextIdString() { return this.nextId().toString(); }
    nextIds(n) { this.#check(); return this.#gen.nextIds(n); }
    async next() { this.#check(); const id = await this.#gen.next(); this.#check(); return id; }
    decompose(id) { return this.#gen.decompose(id); }
    get workerId() { return this.#lease.workerId; }
    get layout() { return this.#gen.layout; }
    /** `{ workerId, generation, expiresAtMs, ttlMs, nodeKey }`. */
    get lease() { return { ...this.#lease, nodeKey: this.#nodeKey }; }

    /** Stops renewing and gives the worker ID back. */
    async close() {
      if (this.#closed) return;
      this.#closed = true;
      clearTimeout(this.#timer);
      await this.#save();
      if (!this.#lost) {
        await this.#client.request('DELETE', `/v1/workers/${this.#lease.workerId}`, {
          generation: this.#lease.generation, lastTimestamp: this.#gen.state().lastMs,
        }).catch(() => {});
      }
      this.#lost = codedError('lease_lost', 'snowflake: closed');
    }
  }

  /** A client of the edgeleaf service (the Worker). */
  class EdgeleafClient {
    #url;
    #token;
    #fetch;

    constructor(opts) {
      const { url, token, fetch: fetchFn } = options('EdgeleafClient options', opts ?? null, '{ url: "http://127.0.0.1:8787", token }');
      let parsed;
      try { parsed = new URL(url); } catch { parsed = null; }
      if (!parsed || !/^https?:$/.test(parsed.protocol)) {
        throw codedError('invalid_option', `url: expected an http(s) URL, found ${describe(url)}`);
      }
      if (token !== undefined && typeof token !== 'string') throw codedError('invalid_option', `token: expected a string, found ${describe(token)}`);
      this.#url = parsed.href.replace(/\/$/, '');
      this.#token = token;
      this.#fetch = fetchFn === undefined ? globalThis.fetch.bind(globalThis) : fn('fetch', fetchFn);
    }

    /** One JSON request; throws coded Errors (`registry_unreachable` / `service_unreachable` when no answer). */
    async request(method, path, body) {
      let res;
      try {
        res = await this.#fetch(`${this.#url}${path}`, {
          method,
          headers: { 'content-type': 'application/json', ...(this.#token ? { authorization: `Bearer ${this.#token}` } : {}) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      } catch (cause) {
        const code = path.startsWith('/v1/workers') ? 'registry_unreachable' : 'service_unreachable';
        throw codedError(code, `${method} ${path}: no answer from ${this.#url}: ${cause?.message ?? cause}`, { cause });
      }
      if (!res.ok) throw await httpError(res, `${method} ${path}`);
      return res.json();
    }

    /**
     * A SegmentGenerator for `tag` fed by the service's segment leases: IDs are
     * generated in this process. Each lease carries a request ID, so a retry
     * after a lost answer gets the same range (nothing burnt, nothing twice).
     */
    segment(tag, opts) {
      const o = options('segment options', opts, '{ step: 1000 }');
      return new SegmentGenerator({
        ...o,
        tag,
        fetchSegment: async (t, step) => {
          const requestId = `${t}-${randomHex(12)}`;
          let last;
          for (let attempt = 0; attempt < 3; attempt++) {
            try {
              return await this.request('POST', `/v1/segment/${t}/lease`, { step, requestId });
            } catch (e) {
              last = e;
              if (e.code !== 'service_unreachable' && !(e.status >= 500)) throw e;
              await sleep(Math.min(1000, e.retryAfterMs ?? 50 * 2 ** attempt));
            }
          }
          throw last;
        },
      });
    }

    /**
     * A Snowflake under a worker ID leased from the registry (needs the admin
     * token). `store` keeps the last lease and timestamp across restarts.
     */
    snowflake(opts) {
      return LeasedSnowflake.open(this, opts);
    }
  }

  return { Snowflake, SegmentGenerator, EdgeleafClient, layoutInfo, codedError, MAX_BATCH };
}
