// `EdgeleafClient`: the service's HTTP API, segment generators fed by its
// leases, and snowflakes under worker IDs leased from its registry. The
// holder's rules are the core's (`HolderCore`); this file carries requests
// and answers, saves what the holder asks to save, and sets the timers.
import { Minter } from './snowflake.mjs';
import { codedError, describe } from './errors.mjs';
import { fn, options } from './args.mjs';
import { sleep } from './timers.mjs';

/** Turns an HTTP error answer of the service into a coded Error. */
async function httpError(res, what) {
  let code = 'http_error';
  let message = `${what}: the service answered ${res.status}`;
  try {
    const body = await res.json();
    if (body?.error?.code) ({ code, message } = body.error);
  } catch { /* not JSON */ }
  // Seconds (an HTTP date, or anything else, is not kept): whole ms, at
  // most a day — past any wait the client would make.
  const retry = Number(res.headers.get('retry-after'));
  const retryAfterMs = retry > 0 ? Math.min(Math.ceil(retry * 1000), 86_400_000) : 0;
  return codedError(code, message, { status: res.status, ...(retryAfterMs > 0 ? { retryAfterMs } : {}) });
}

function randomHex(bytes) {
  const b = new Uint8Array(bytes);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// The registry's answer as the holder reads it (the layout without
// expiresAt; a grant's secret, which a renewal's answer does not repeat).
function grantOf(lease) {
  const l = lease.layout;
  return {
    workerId: lease.workerId, generation: lease.generation, expiresAtMs: lease.expiresAtMs,
    issueAfterMs: lease.issueAfterMs, ttlMs: lease.ttlMs,
    layout: { timestampBits: l.timestampBits, workerBits: l.workerBits, sequenceBits: l.sequenceBits, epoch: l.epoch, unitMs: l.unitMs },
    ...(lease.secret === undefined ? {} : { secret: lease.secret }),
  };
}

// No answer at all is not a refusal: the holder decides what each means.
const causeOf = (e) => (e.code === 'registry_unreachable' ? undefined : e.code);

// The service binding's method (the `Ids` entrypoint, worker/entry.mjs) for
// each request this client sends; it answers what the route would.
const BINDING_CALLS = [
  ['GET', /^\/v1\/segment\/([^/?]+)(?:\?count=(\d+))?$/, (b, m) => b.segment(m[1], Number(m[2] ?? 1))],
  ['GET', /^\/v1\/snowflake(?:\?count=(\d+))?$/, (b, m) => b.snowflake(Number(m[1] ?? 1))],
  ['GET', /^\/v1\/snowflake\/([^/?]+)$/, (b, m) => b.decode(m[1])],
  ['POST', /^\/v1\/segment\/([^/]+)\/lease$/, (b, m, body) => b.segmentLease(m[1], body ?? {})],
  ['POST', /^\/v1\/segment\/([^/]+)\/lease\/return$/, (b, m, body) => b.segmentReturn(m[1], body)],
  ['POST', /^\/v1\/tags\/([^/]+)\/reveal$/, (b, m, body) => b.reveal(m[1], body?.id)],
  ['POST', /^\/v1\/workers\/lease$/, (b, m, body) => b.workerLease(body)],
  ['POST', /^\/v1\/workers\/(\d+)\/renew$/, (b, m, body) => b.workerRenew(Number(m[1]), body)],
  ['DELETE', /^\/v1\/workers\/(\d+)$/, (b, m, body) => b.workerRelease(Number(m[1]), body)],
];

function bindingCall(binding, method, path, body) {
  for (const [verb, pattern, call] of BINDING_CALLS) {
    const m = verb === method ? pattern.exec(path) : null;
    if (m) return () => call(binding, m, body);
  }
  throw codedError('invalid_argument', `${method} ${path}: expected an ID operation of the service binding (segment, snowflake, leases, decode, reveal), found another`);
}

export function makeClient(wasm, { SegmentGenerator, fenceOf }) {
  /**
   * A Snowflake under a worker ID leased from the service's registry. It
   * renews the lease when half its TTL has passed and stops issuing (throws
   * `lease_expired` / `lease_lost`) the moment the lease is gone.
   */
  class LeasedSnowflake {
    #client;
    #core;
    #mint;
    #store;
    #now;
    #nodeKey;
    #timer = null;
    #saveTimer = null;
    #saving = null;

    constructor(client, nodeKey, core, store, now) {
      this.#client = client;
      this.#nodeKey = nodeKey;
      this.#core = core;
      this.#mint = new Minter(wasm, core, now);
      this.#store = store;
      this.#now = now;
      this.#schedule();
    }

    static async open(client, opts) {
      const { nodeKey, store, now = Date.now } = options('snowflake options', opts, '{ nodeKey: "host-1:8080", store }');
      fn('now', now);
      const key = nodeKey ?? `node-${randomHex(8)}`;
      wasm.checkNodeKey(key);
      if (store !== undefined && (typeof store?.load !== 'function' || typeof store?.save !== 'function')) {
        throw codedError('invalid_option', `store: expected { load(): Promise<state | undefined>, save(state): Promise<void> }, found ${describe(store)}`);
      }
      try {
        return await LeasedSnowflake.#open(client, key, store, now);
      } catch (e) {
        // Not opened: the store lets go of what load() took (a file store's
        // lock), so that a retry in this process may open it.
        if (typeof store?.close === 'function') {
          try { await store.close(); } catch { /* the open's error is the one to report */ }
        }
        throw e;
      }
    }

    static async #open(client, key, store, now) {
      const cached = store ? await store.load() : undefined;
      let saved;
      if (cached !== undefined && cached !== null) {
        const { nodeKey: _savedKey, ...state } = cached;
        saved = state;
      }
      // Restarting from the store applies the restart rules (a clock behind
      // the saved last timestamp is refused).
      const core = new wasm.HolderCore(saved, now(), store !== undefined);
      const ask = core.leaseAsk(now());
      // Only a grant the registry answered is minted under: a saved lease
      // is proof, not a lease (another process may share the store). An
      // unreachable registry throws `registry_unreachable`.
      const lease = await client.request('POST', '/v1/workers/lease', { nodeKey: key, ...ask });
      core.granted(grantOf(lease), now());
      const leased = new LeasedSnowflake(client, key, core, store, now);
      try {
        await leased.#save();
      } catch (e) {
        // Not saved: nothing may be minted, and the worker ID goes back.
        await leased.close().catch(() => {});
        throw e;
      }
      leased.#scheduleSave();
      return leased;
    }

    #schedule() {
      const due = this.#core.renewDueIn(this.#now());
      if (due < 0) return;
      this.#timer = setTimeout(() => { this.#renew(false).catch(() => {}); }, due);
      this.#timer.unref?.();
    }

    // Saves what the holder asks (one save at a time); a failure is the
    // holder's to know, and is thrown to whoever awaited it.
    #save() {
      if (!this.#store) return Promise.resolve();
      if (this.#saving) return this.#saving.catch(() => {}).then(() => this.#save());
      const state = this.#core.saveRequest(this.#now());
      if (state === null) return Promise.resolve();
      this.#saving = (async () => {
        try {
          await this.#store.save({ nodeKey: this.#nodeKey, ...state });
          this.#core.saved();
        } catch (e) {
          this.#core.saveFailed();
          throw e;
        } finally {
          this.#saving = null;
        }
      })();
      return this.#saving;
    }

    // Keeps the reservation ahead of the clock while the lease is held.
    #scheduleSave() {
      clearTimeout(this.#saveTimer);
      const due = this.#core.saveDueIn(this.#now());
      if (due < 0) return;
      this.#saveTimer = setTimeout(() => {
        this.#save().catch(() => {}).finally(() => this.#scheduleSave());
      }, due);
      this.#saveTimer.unref?.();
    }

    async #renew(force) {
      clearTimeout(this.#timer);
      const r = this.#core.takeRenewal(this.#now(), force);
      if (r === null) return this.#schedule();
      const { workerId, ...body } = r;
      try {
        const lease = await this.#client.request('POST', `/v1/workers/${workerId}/renew`, body);
        this.#core.renewed(grantOf(lease), this.#now());
        await this.#save();
      } catch (e) {
        this.#core.renewalFailed(r.generation, causeOf(e), this.#now());
      } finally {
        this.#schedule();
      }
    }

    /** Renews the lease now (done on a timer at half the TTL). */
    renew() { return this.#renew(true); }

    nextId() { return this.#mint.nextId(); }
    nextIdString() { return this.#mint.nextId().toString(); }
    nextIds(n) { return this.#mint.nextIds(n); }
    next() { return this.#mint.next(); }
    decompose(id) { return this.#mint.decompose(id); }
    get workerId() { return this.#core.state().workerId; }
    get layout() { return this.#core.layout(); }
    /** `{ workerId, generation, expiresAtMs, ttlMs, nodeKey }` (never the lease's secret). */
    get lease() {
      const { workerId, generation, expiresAtMs, ttlMs } = this.#core.state();
      return { workerId, generation, expiresAtMs, ttlMs, nodeKey: this.#nodeKey };
    }

    /**
     * Stops renewing, gives the worker ID back, then saves the exact last
     * timestamp (the release first: a store that fails or hangs keeps the
     * worker ID from no one, and its saved reservation already covers every ID).
     */
    async close() {
      clearTimeout(this.#timer);
      clearTimeout(this.#saveTimer);
      const release = this.#core.close(this.#now());
      if (release !== null) {
        const { workerId, generation, secret, lastTimestamp } = release;
        await this.#client.request('DELETE', `/v1/workers/${workerId}`, { generation, secret, lastTimestamp }).catch(() => {});
      }
      await this.#save();
    }
  }

  /** A client of the edgeleaf service (the Worker). */
  class EdgeleafClient {
    #url;
    #token;
    #fetch;
    #binding;

    constructor(opts) {
      const { url, token, fetch: fetchFn, binding } = options('EdgeleafClient options', opts ?? null, '{ url: "http://127.0.0.1:8787", token } or { binding: env.IDS }');
      if (binding !== undefined || Object.hasOwn(opts, 'binding')) {
        // A service binding to the Worker's `Ids` entrypoint: no URL, no
        // token (the account's own; shared by every Worker bound to it).
        if (typeof binding?.segmentLease !== 'function' || url !== undefined || token !== undefined || fetchFn !== undefined) {
          throw codedError('invalid_option', `binding: expected a service binding to edgeleaf's "Ids" entrypoint, alone (no url, token or fetch), found ${describe(binding)}${url !== undefined || token !== undefined || fetchFn !== undefined ? ' with url, token or fetch' : ''}`);
        }
        this.#binding = binding;
        this.#url = 'the service binding';
        return;
      }
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
      const unreachable = (cause, what) => {
        const code = path.startsWith('/v1/workers') ? 'registry_unreachable' : 'service_unreachable';
        return codedError(code, `${method} ${path}: ${what} from ${this.#url}: ${cause?.message ?? cause}`, { cause });
      };
      if (this.#binding) {
        const call = bindingCall(this.#binding, method, path, body);
        let out;
        try {
          out = await call();
        } catch (cause) {
          throw unreachable(cause, 'no answer');
        }
        if (out?.error?.code) {
          const { code, message } = out.error;
          throw codedError(code, message, { status: out.status, ...(out.retryAfterMs > 0 ? { retryAfterMs: out.retryAfterMs } : {}) });
        }
        return out;
      }
      let res;
      try {
        res = await this.#fetch(`${this.#url}${path}`, {
          method,
          headers: { 'content-type': 'application/json', ...(this.#token ? { authorization: `Bearer ${this.#token}` } : {}) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      } catch (cause) {
        throw unreachable(cause, 'no answer');
      }
      if (!res.ok) throw await httpError(res, `${method} ${path}`);
      // An answer cut off mid-body (the service killed, undici's
      // "TypeError: terminated") is no answer either: a coded error, never
      // a bare TypeError (found by the chaos run).
      try {
        return await res.json();
      } catch (cause) {
        throw unreachable(cause, 'an answer cut off');
      }
    }

    /**
     * A SegmentGenerator for `tag` fed by the service's segment leases: IDs are
     * generated in this process. With an API key (`elk_…`), each lease
     * carries a request ID, so a retry after a lost answer gets the same range (nothing
     * burnt, nothing twice). A request ID belongs to a credential of the
     * caller's own, so with the client token, the admin token, none or a
     * service binding the service refuses one (`request_id_needs_key`) and none is sent: a retry
     * after a lost answer then gets the next range, and the lost one's IDs are
     * skipped, never handed out twice. With an API key, `close()` hands each
     * range's unused tail back under its lease's request ID: a credit of the
     * key, which the key's next lease answers first (no gap for the key;
     * another key never gets those IDs).
     */
    segment(tag, opts) {
      // The service binding is shared by every bound Worker of the account,
      // as the client token is by its holders: no request IDs. Which
      // credential owns its request IDs is the service's rule (an API key:
      // worker/rules/src/access.rs, through the bindings).
      const ownKey = typeof this.#token === 'string' && wasm.isKeyToken(this.#token);
      // Each lease's request ID by its range's end (the buffer holds two
      // ranges at most: the last few are kept).
      const leases = new Map();
      let generator;
      const fetchSegment = async (t, step) => {
        // The generator's fence (the core's): the key's credits (tails
        // handed back by its other clients) at or below it are left for
        // them, since this generator never loads there.
        const after = ownKey ? fenceOf(generator) : 0n;
        const body = ownKey ? { step, requestId: `${t}-${randomHex(12)}`, ...(after > 0n ? { after: String(after) } : {}) } : { step };
        const range = await this.#retried(() => this.request('POST', `/v1/segment/${t}/lease`, body));
        if (ownKey) {
          leases.set(String(range?.end), body.requestId);
          if (leases.size > 4) leases.delete(leases.keys().next().value);
        }
        return range;
      };
      const returnSegment = async (t, { start, end }) => {
        const requestId = leases.get(String(end));
        if (requestId === undefined) return { taken: false };
        leases.delete(String(end));
        return this.request('POST', `/v1/segment/${t}/lease/return`, { requestId, start: String(start), end: String(end) });
      };
      // Not an object: handed on as is, for the bindings to refuse.
      const o = opts === undefined ? {} : opts;
      generator = new SegmentGenerator(o !== null && typeof o === 'object'
        ? { ...o, tag, fetchSegment, returnSegment: ownKey ? returnSegment : undefined }
        : o);
      return generator;
    }

    // The one wait loop of a call to the service that may be made again
    // (a segment lease): when and how often is the core's
    // (`wait::after_call_failed`, through the bindings' `CallBudget`).
    // No answer, or a 5xx, may mend; anything else is the caller's to see.
    // A 503 that says when to ask again is asked again no sooner.
    async #retried(call) {
      const budget = new wasm.CallBudget(Date.now());
      for (let attempts = 1; ; attempts++) {
        try {
          return await call();
        } catch (e) {
          const retryable = e.code === 'service_unreachable' || e.status >= 500;
          let wait = -1;
          try {
            wait = budget.afterFailed(retryable, attempts, Date.now(), e.retryAfterMs);
          } catch {
            // A Retry-After the bindings refuse: the service's error stands.
          }
          if (wait < 0) throw e;
          await sleep(wait);
        }
      }
    }

    /**
     * A Snowflake under a worker ID leased from the registry (needs a key
     * with the `registry` scope). `store` keeps the last lease (with its
     * secret: keep it private) and timestamp across restarts.
     */
    snowflake(opts) {
      return LeasedSnowflake.open(this, opts);
    }
  }

  return { EdgeleafClient };
}
