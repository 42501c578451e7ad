// `SegmentGenerator`: segment-mode IDs generated in this process from ranges
// fetched by the caller. The core's driver decides when to load and with
// which step; this file runs the fetches and the one wait loop.
import { codedError, describe } from './errors.mjs';
import { count, toId } from './args.mjs';

const LOAD = 1n << 63n;

export function makeSegmentGenerator(wasm) {
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
      // The bindings check every option (tag, fetchSegment and now included).
      this.#core = new wasm.SegmentCore(opts ?? null);
      this.#tag = opts.tag;
      this.#fetch = opts.fetchSegment;
      this.#now = opts.now ?? Date.now;
    }

    get tag() {
      return this.#tag;
    }

    /** An ID if one is in memory, else `undefined` (and a load is under way). Never waits. */
    tryNext() {
      const r = this.#core.nextId(this.#now());
      if (r < LOAD && r !== 0n) return r;
      if (r > LOAD) {
        this.#load(this.#core.loadStep);
        return r - LOAD;
      }
      if (r === 0n) this.#load(this.#core.loadStep);
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
        const ids = this.#core.take(this.#now(), n - filled);
        out.set(ids, filled);
        filled += ids.length;
        const step = this.#core.loadStep;
        if (step > 0) this.#load(step);
        if (filled === n) return out;
        await this.#inflight;
      }
    }

    /** Loads the first segment before anyone asks (Leaf's first request waited for the store). */
    async warmUp() {
      const step = this.#core.warmUp(this.#now());
      if (step > 0) this.#load(step);
      await this.#inflight;
    }

    /** Leaf's cache view: initialized, currentPos, nextReady, loading, step, segments[{ value, max, step }]. */
    snapshot() {
      return this.#core.snapshot();
    }

    // The driver asked for a load with `step`; every waiter awaits the
    // latest one.
    #load(step) {
      const load = (async () => {
        let range;
        try {
          range = segmentOf(this.#tag, step, await this.#fetch(this.#tag, step));
        } catch (cause) {
          this.#core.loadFailed();
          // Coded errors (ours, or the service's through EdgeleafClient) say what happened; keep them.
          if (typeof cause?.code === 'string') throw cause;
          throw codedError('segment_fetch_failed', `fetchSegment(${this.#tag}, ${step}) failed: ${cause?.message ?? cause}`, { cause });
        }
        this.#core.loaded(range[0], range[1], this.#now());
      })();
      this.#inflight = load;
      load.then(
        () => { if (this.#inflight === load) this.#inflight = null; },
        () => { if (this.#inflight === load) this.#inflight = null; },
      );
    }
  }

  return { SegmentGenerator };
}
