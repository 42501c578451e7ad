// `SegmentGenerator`: segment-mode IDs generated in this process from ranges
// fetched by the caller. The core's driver decides when to load and with
// which step; this file runs the fetches and the one wait loop.
import { codedError, describe } from './errors.mjs';
import { count, toId } from './args.mjs';

const LOAD = 1n << 63n;

export function makeSegmentGenerator(wasm) {
  // Each generator's core, for the client that feeds it (its fence).
  const cores = new WeakMap();

  function segmentOf(tag, step, value) {
    if (value === null || typeof value !== 'object') {
      throw codedError('invalid_segment', `fetchSegment(${tag}, ${step}): expected { start, end }, found ${describe(value)}`);
    }
    return [toId(value.start, 'segment start'), toId(value.end, 'segment end')];
  }

  /**
   * Segment-mode IDs generated in this process from ranges fetched through
   * `fetchSegment(tag, step) => Promise<{ start, end }>` (inclusive bounds).
   * `close()` hands each range's unused tail back through the optional
   * `returnSegment(tag, { start, end }) => Promise<{ taken } | void>`.
   */
  class SegmentGenerator {
    #core;
    #tag;
    #fetch;
    #return;
    #now;
    #inflight = null;
    #closing = null;

    constructor(opts) {
      // The bindings check every option (tag, fetchSegment, returnSegment and now included).
      this.#core = new wasm.SegmentCore(opts ?? null);
      cores.set(this, this.#core);
      this.#tag = opts.tag;
      this.#fetch = opts.fetchSegment;
      this.#return = opts.returnSegment;
      this.#now = opts.now ?? Date.now;
    }

    get tag() {
      return this.#tag;
    }

    /** Whether `close()` was called. */
    get closed() {
      return this.#closing !== null;
    }

    // `ids`: what a nextIds() took before the close (handed out: never handed back).
    #open(ids) {
      if (this.#closing) throw codedError('generator_closed', `SegmentGenerator(${this.#tag}): expected an open generator, found it closed (its unused IDs were handed back)`, ids?.length ? { ids } : undefined);
    }

    /** An ID if one is in memory, else `undefined` (and a load is under way). Never waits. */
    tryNext() {
      this.#open();
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
        this.#open(out.subarray(0, filled));
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
      this.#open();
      const step = this.#core.warmUp(this.#now());
      if (step > 0) this.#load(step);
      await this.#inflight;
    }

    /**
     * Stops issuing (every later call throws `generator_closed`) and hands
     * the unused tail of each loaded range back through `returnSegment`, in
     * the core's order and by its rule (`SegmentDriver::hand_back`, the
     * one a regional allocator follows): last first (a store takes a tail
     * back only if nothing was leased after it; the one before it, only
     * then), ending at the first answer that is not `{ taken: true }` — a
     * refusal, a throw or an answer that says nothing. A load in flight
     * lands first (its range is the last). Resolves to the unused ranges,
     * `[{ start, end, taken }]`; a tail not taken stays a gap, never an ID
     * twice. Idempotent: every call answers the first one's promise.
     */
    close() {
      if (this.#closing) return this.#closing;
      this.#closing = (async () => {
        await this.#inflight?.catch(() => {});
        this.#core.handBack();
        for (let tail; this.#return && (tail = this.#core.tailToSend()) !== undefined;) {
          let answer;
          try {
            answer = await this.#return(this.#tag, tail);
          } catch {
            // No answer: it says nothing, as a lost one (the core ends the hand-back).
          }
          this.#core.tailAnswered(answer);
        }
        return this.#core.handedBack();
      })();
      return this.#closing;
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

  /**
   * The fence of `generator` (the core's `SegmentDriver::fence`): the end
   * of the last range it loaded, 0n for none. It never loads at or below
   * it. For `EdgeleafClient`, whose leases tell the service (`after`).
   */
  const fenceOf = (generator) => cores.get(generator)?.fence ?? 0n;

  return { SegmentGenerator, fenceOf };
}
