// SegmentGenerator with an in-process store (a fake fetcher standing in for
// the service): no duplicates under concurrency, across refills and failures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SegmentGenerator } from 'edgeleaf';

/** A store like a tag's Durable Object: hands out (max, max+step], records calls. */
function store({ delay, failOn = new Set() } = {}) {
  const s = { max: 0n, calls: 0, concurrent: 0, peak: 0, ranges: [] };
  s.fetch = async (tag, step) => {
    s.calls++;
    s.concurrent++;
    s.peak = Math.max(s.peak, s.concurrent);
    try {
      // Without a delay the range arrives in the same macrotask (no timer).
      if (delay) await new Promise((r) => setTimeout(r, delay()));
      if (failOn.has(s.calls)) throw new Error('store unavailable');
      const start = s.max + 1n;
      s.max += BigInt(step);
      s.ranges.push([start, s.max]);
      return { start, end: s.max };
    } finally {
      s.concurrent--;
    }
  };
  s.contains = (id) => s.ranges.some(([a, b]) => id >= a && id <= b);
  return s;
}

test('1,000 concurrent next() across refills: unique, inside fetched ranges, one fetch at a time', async () => {
  const st = store({ delay: () => Math.floor(Math.random() * 3) });
  const g = new SegmentGenerator({ tag: 'order', step: 10, maxStep: 40, fetchSegment: st.fetch });
  const ids = await Promise.all(Array.from({ length: 1000 }, () => g.next()));
  assert.equal(new Set(ids).size, 1000);
  for (const id of ids) assert.ok(st.contains(id), `${id} outside fetched ranges`);
  assert.equal(st.peak, 1, 'fetches never overlap');
  assert.ok(st.calls >= 25, `${st.calls} fetches for 1000 IDs with steps of 10..40`);
});

test('waves of next(), tryNext() and nextIds() never repeat', async () => {
  const st = store({ delay: () => Math.floor(Math.random() * 2) });
  const g = new SegmentGenerator({ tag: 'mixed', step: 7, fetchSegment: st.fetch });
  const seen = new Set();
  const add = (id) => {
    assert.ok(!seen.has(id), `duplicate ${id}`);
    seen.add(id);
  };
  for (let wave = 0; wave < 20; wave++) {
    const batch = [];
    for (let i = 0; i < 30; i++) batch.push(g.next());
    batch.push(g.nextIds(25).then((a) => Array.from(a)));
    for (let i = 0; i < 10; i++) {
      const id = g.tryNext();
      if (id !== undefined) add(id);
    }
    for (const r of await Promise.all(batch)) (Array.isArray(r) ? r : [r]).forEach(add);
  }
  assert.equal(seen.size >= 20 * 55, true);
  for (const id of seen) assert.ok(st.contains(id));
});

test('a failed fetch rejects the waiting calls; the next call fetches again', async () => {
  const st = store({ failOn: new Set([2]) });
  const g = new SegmentGenerator({ tag: 'flaky', step: 5, prefetchPercent: 100, fetchSegment: st.fetch });
  const first = await Promise.all([g.next(), g.next(), g.next(), g.next(), g.next()]);
  assert.deepEqual(first, [1n, 2n, 3n, 4n, 5n]);
  await assert.rejects(g.next(), (e) => e.code === 'segment_fetch_failed' && e.cause.message === 'store unavailable');
  assert.equal(await g.next(), 6n);
});

test('tryNext never waits; warmUp loads ahead of the first request', async () => {
  const st = store();
  const g = new SegmentGenerator({ tag: 'warm', step: 100, fetchSegment: st.fetch });
  assert.equal(g.tryNext(), undefined);
  assert.equal(g.snapshot().loading, true);
  await g.next();
  const h = new SegmentGenerator({ tag: 'warm2', step: 100, fetchSegment: store().fetch });
  await h.warmUp();
  assert.equal(h.tryNext(), 1n);
  const snap = h.snapshot();
  assert.equal(snap.initialized, true);
  assert.deepEqual(snap.segments[0], { value: 2n, max: 100n, step: 100 });
});

test('the dynamic step grows while segments last under the target duration', async () => {
  let now = 0;
  const steps = [];
  const st = store();
  const g = new SegmentGenerator({
    tag: 'dyn', step: 100, segmentDurationMs: 1000, now: () => now,
    fetchSegment: (tag, step) => { steps.push(step); return st.fetch(tag, step); },
  });
  for (let i = 0; i < 2000; i++) { await g.next(); now += 1; }
  assert.deepEqual(steps.slice(0, 4), [100, 200, 400, 800]);
  now += 10_000; // the current segment has lasted far longer than twice the target
  for (let i = 0; i < 3000; i++) await g.next();
  assert.ok(steps.at(-1) < Math.max(...steps), `step halves after a slow segment: ${steps}`);
});

test('bad segments from the store are refused, never served', async () => {
  const cases = [
    [{ start: 10n, end: 5n }, 'invalid_segment'],
    [{ start: -1, end: 5 }, 'invalid_id'],
    [{ start: '1', end: 'ten' }, 'invalid_id'],
    [null, 'invalid_segment'],
    [{ start: 0n, end: 5n }, 'invalid_segment'],
  ];
  for (const [range, code] of cases) {
    const g = new SegmentGenerator({ tag: 'bad', step: 5, fetchSegment: async () => range });
    await assert.rejects(g.next(), { code }, JSON.stringify(range, (k, v) => (typeof v === 'bigint' ? `${v}n` : v)));
  }
  // A store that went back: the overlapping range is refused.
  let calls = 0;
  const g = new SegmentGenerator({
    tag: 'back', step: 5, prefetchPercent: 100,
    fetchSegment: async () => (++calls === 1 ? { start: 11n, end: 15n } : { start: 13n, end: 17n }),
  });
  for (let i = 0; i < 5; i++) await g.next();
  await assert.rejects(g.next(), { code: 'segment_overlap' });
});

test('bad options throw with a code', () => {
  const f = async () => ({ start: 1n, end: 2n });
  const cases = [
    [() => new SegmentGenerator(), 'invalid_option'],
    [() => new SegmentGenerator({ fetchSegment: f }), 'invalid_key'],
    [() => new SegmentGenerator({ tag: 'a/b', fetchSegment: f }), 'invalid_key'],
    [() => new SegmentGenerator({ tag: 'x'.repeat(129), fetchSegment: f }), 'invalid_key'],
    [() => new SegmentGenerator({ tag: 'ok' }), 'invalid_option'],
    [() => new SegmentGenerator({ tag: 'ok', fetchSegment: f, step: 0 }), 'out_of_range'],
    [() => new SegmentGenerator({ tag: 'ok', fetchSegment: f, step: 1_000_001 }), 'out_of_range'],
    [() => new SegmentGenerator({ tag: 'ok', fetchSegment: f, prefetchPercent: 101 }), 'out_of_range'],
    [() => new SegmentGenerator({ tag: 'ok', fetchSegment: f, stepp: 5 }), 'invalid_option'],
  ];
  for (const [fn, code] of cases) assert.throws(fn, { code }, String(fn));
});

/** A store that takes a tail back as a tag's root does: only its last range's end, nothing after it. */
function returningStore(opts) {
  const s = store(opts);
  s.returned = [];
  s.returnSegment = async (tag, { start, end }) => {
    s.returned.push([start, end]);
    if (end !== s.max) return { taken: false };
    s.max = start - 1n;
    return { taken: true };
  };
  return s;
}

test('close(): stops issuing, hands each unused tail back last first (the load in flight landing first), once', async () => {
  const st = returningStore({ delay: () => 2 });
  const g = new SegmentGenerator({ tag: 'close', step: 100, prefetchPercent: 10, fetchSegment: st.fetch, returnSegment: st.returnSegment });
  const ids = await g.nextIds(27); // 1..=27; the prefetch of 101..=300 is in flight
  assert.equal(ids[26], 27n);
  const waiting = g.next(); // served from memory before close
  assert.equal(g.closed, false);
  const closing = g.close();
  assert.equal(g.closed, true);
  assert.equal(g.close(), closing, 'idempotent: the same promise');
  assert.throws(() => g.tryNext(), { code: 'generator_closed' });
  await assert.rejects(g.next(), { code: 'generator_closed' });
  await assert.rejects(g.nextIds(3), { code: 'generator_closed' });
  await assert.rejects(g.warmUp(), { code: 'generator_closed' });
  assert.equal(await waiting, 28n);
  const offered = await closing;
  assert.deepEqual(offered, [
    { start: 101n, end: 300n, taken: true },
    { start: 29n, end: 100n, taken: true },
  ]);
  assert.deepEqual(st.returned, [[101n, 300n], [29n, 100n]]);
  assert.equal(st.max, 28n, 'the store goes on right after the last ID handed out');
  assert.equal(await g.close(), offered);
  assert.equal(st.returned.length, 2, 'nothing handed back twice');
  assert.equal(st.calls, 2, 'no load after close');
});

test('close(): an answer that says nothing ends the hand-back, as a lost one does (the core\'s rule)', async () => {
  // Changed on purpose (issue 32): a `returnSegment` that answered nothing
  // (no `{ taken }`) used to count as "not taken" and the generator went on
  // offering the range before it. The order and the stopping rule are now
  // the core's one rule (`SegmentDriver::hand_back`, the `HandBack` the
  // service's regional allocators follow): an answer that says nothing is
  // a lost one (the store may have taken the tail or not), and ends the
  // hand-back; the ranges before it stay a gap, never an ID twice.
  for (const answer of [undefined, {}, { taken: 'yes' }, null]) {
    const two = returningStore();
    const sent = [];
    const h = new SegmentGenerator({
      tag: 'void', step: 10, prefetchPercent: 0, fetchSegment: two.fetch,
      returnSegment: async (tag, tail) => { sent.push(tail); return answer; },
    });
    await h.next(); // prefetches at once: 11..=30
    await h.warmUp(); // waits for it
    assert.deepEqual(await h.close(), [{ start: 11n, end: 30n, taken: false }, { start: 2n, end: 10n, taken: false }], String(answer));
    assert.deepEqual(sent, [{ start: 11n, end: 30n }], `after ${JSON.stringify(answer)} the earlier range is not offered`);
  }
});

test('close(): a tail not taken stops the ones before it; without returnSegment nothing is sent; a throwing one is a gap', async () => {
  const st = returningStore();
  const g = new SegmentGenerator({ tag: 'gap', step: 10, prefetchPercent: 100, fetchSegment: st.fetch, returnSegment: st.returnSegment });
  assert.equal(await g.next(), 1n);
  st.max += 50n; // another client leased after it
  assert.deepEqual(await g.close(), [{ start: 2n, end: 10n, taken: false }]);
  assert.equal(st.max, 60n);
  // Two ranges, the last not taken: the first is not offered.
  const two = returningStore();
  const h = new SegmentGenerator({ tag: 'gap', step: 10, prefetchPercent: 0, fetchSegment: two.fetch, returnSegment: two.returnSegment });
  await h.next(); // prefetches at once: 11..=30 (the dynamic step doubled)
  await h.warmUp(); // waits for it
  two.max += 1n;
  assert.deepEqual(await h.close(), [{ start: 11n, end: 30n, taken: false }, { start: 2n, end: 10n, taken: false }]);
  assert.equal(two.returned.length, 1);
  // No returnSegment: the unused ranges, none taken.
  const plain = new SegmentGenerator({ tag: 'gap', step: 10, fetchSegment: store().fetch });
  await plain.next();
  assert.deepEqual(await plain.close(), [{ start: 2n, end: 10n, taken: false }]);
  // A returnSegment that throws: close() still resolves (a gap, never an error).
  const boom = new SegmentGenerator({ tag: 'gap', step: 10, fetchSegment: store().fetch, returnSegment: async () => { throw new Error('down'); } });
  await boom.next();
  assert.deepEqual(await boom.close(), [{ start: 2n, end: 10n, taken: false }]);
  // A nextIds() waiting for a load when the generator closes: rejected with the IDs it took (handed out, not handed back).
  const slow = returningStore({ delay: () => 5 });
  const w = new SegmentGenerator({ tag: 'gap', step: 10, prefetchPercent: 100, fetchSegment: slow.fetch, returnSegment: slow.returnSegment });
  await w.next();
  const waiting = w.nextIds(15);
  const offered = w.close();
  const err = await waiting.then(() => null, (e) => e);
  assert.equal(err?.code, 'generator_closed');
  assert.deepEqual([...err.ids], [2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n]);
  assert.deepEqual(await offered, [{ start: 11n, end: 30n, taken: true }]);
  assert.equal(slow.max, 10n);
  // Never loaded: nothing to hand back.
  assert.deepEqual(await new SegmentGenerator({ tag: 'gap', fetchSegment: store().fetch }).close(), []);
  assert.throws(() => new SegmentGenerator({ tag: 'gap', fetchSegment: store().fetch, returnSegment: 5 }), { code: 'invalid_option' });
});
