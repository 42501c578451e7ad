// The npm package's Snowflake in Node, imported as an ES module by name (so
// package.json `exports` routes it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Snowflake, layoutInfo, MAX_IDS_PER_CALL } from 'edgeleaf';

const T0 = 1_735_689_600_000;

function assertIncreasing(ids) {
  for (let i = 1; i < ids.length; i++) {
    if (!(ids[i] > ids[i - 1])) assert.fail(`not increasing at ${i}: ${ids[i - 1]} then ${ids[i]}`);
  }
}

test('1,000,000 IDs from next() are unique and increasing', async () => {
  const s = new Snowflake({ workerId: 7 });
  const ids = new BigUint64Array(1_000_000);
  for (let i = 0; i < ids.length; i++) ids[i] = await s.next();
  assertIncreasing(ids);
  assert.equal(new Set(ids).size, ids.length);
  assert.equal(s.decompose(ids[999_999]).workerId, 7);
});

test('1,000,000 IDs from nextIdsAsync() and nextIds() are unique and increasing', async () => {
  const s = new Snowflake({ workerId: 1 });
  const ids = await s.nextIdsAsync(1_000_000);
  assert.equal(ids.length, 1_000_000);
  assertIncreasing(ids);
  const more = s.nextIds(100);
  assert.ok(more[0] > ids[ids.length - 1]);
});

test('a frozen clock makes generation wait or fail, never repeat', async () => {
  let now = T0;
  const s = new Snowflake({ workerId: 2, now: () => now, maxBorrowMs: 0 });
  const ids = [];
  let err;
  try {
    for (;;) ids.push(s.nextId());
  } catch (e) {
    err = e;
  }
  assert.equal(err.code, 'sequence_exhausted');
  assert.equal(err.retryAfterMs, 1);
  assert.ok(ids.length <= 4096 && ids.length >= 3996, `${ids.length} IDs in one ms`);
  assertIncreasing(ids);
  // The async call waits for the clock, which never moves: it stays pending.
  const pending = s.next();
  const raced = await Promise.race([pending, new Promise((r) => setTimeout(() => r('pending'), 50))]);
  assert.equal(raced, 'pending');
  now = T0 + 1;
  const late = await pending;
  assert.ok(late > ids.at(-1));
  assert.equal(s.decompose(late).timestamp, T0 + 1);
  // nextIds hands back what it generated on the error, nothing is lost.
  const t = new Snowflake({ workerId: 2, now: () => T0, sequenceStartBound: 0, maxBorrowMs: 0 });
  assert.throws(() => t.nextIds(5000), (e) => e.code === 'sequence_exhausted' && e.ids.length === 4096);
});

test('by default a generator borrows at most 2 ms ahead of a frozen clock, then waits', () => {
  const s = new Snowflake({ workerId: 2, now: () => T0, sequenceStartBound: 0 });
  let err;
  try { s.nextIds(4 * 4096); } catch (e) { err = e; }
  assert.equal(err.code, 'sequence_exhausted');
  assert.equal(err.ids.length, 3 * 4096, 'the clock\'s unit and 2 borrowed');
  assertIncreasing(err.ids);
  assert.equal(s.decompose(err.ids.at(-1)).timestamp, T0 + 2);
  assert.equal(err.retryAfterMs, 1);
});

test('borrowing runs ahead a bounded amount, then waits', () => {
  const s = new Snowflake({ workerId: 2, now: () => T0, sequenceStartBound: 0, maxBorrowMs: 2 });
  const ids = s.nextIds(3 * 4096);
  assertIncreasing(ids);
  assert.equal(s.decompose(ids[ids.length - 1]).timestamp, T0 + 2);
  assert.throws(() => s.nextId(), { code: 'sequence_exhausted' });
});

test('a clock that went back: a little waits, a lot fails', async () => {
  let now = T0;
  const s = new Snowflake({ workerId: 3, now: () => now, maxBorrowMs: 0 });
  const first = s.nextId();
  now = T0 - 3;
  assert.throws(() => s.nextId(), (e) => e.code === 'clock_behind' && e.retryAfterMs === 3);
  setTimeout(() => { now = T0 + 1; }, 5);
  const after = await s.next();
  assert.ok(after > first);
  now = T0 - 3_600_000;
  assert.throws(() => s.nextId(), { code: 'clock_moved_backwards' });
  await assert.rejects(s.next(), { code: 'clock_moved_backwards' });
});

test('decompose and compose round-trip under a custom epoch and layout', () => {
  const epoch = new Date('2020-01-01T00:00:00Z');
  const s = new Snowflake({ workerId: 1023, epoch, now: () => T0 + 123 });
  const id = s.nextId();
  const parts = s.decompose(id);
  assert.equal(parts.timestamp, T0 + 123);
  assert.equal(parts.date.getTime(), T0 + 123);
  assert.equal(parts.workerId, 1023);
  assert.deepEqual(JSON.parse(JSON.stringify(parts)), {
    timestamp: T0 + 123, date: new Date(T0 + 123).toISOString(), workerId: 1023, sequence: parts.sequence,
  });
  // Each decompose reads its own parts (the core keeps only the last ID's).
  const other = s.decompose(Snowflake.compose({ timestamp: T0 + 5, workerId: 7, sequence: 9 }, { epoch }));
  assert.deepEqual([other.workerId, other.sequence, parts.workerId], [7, 9, 1023]);
  assert.equal(Snowflake.compose(parts, { epoch }), id);
  assert.deepEqual(Snowflake.decompose(id.toString(), { epoch }), parts);
  // The same bits under Leaf's own epoch mean another time.
  assert.notEqual(Snowflake.decompose(id).timestamp, parts.timestamp);

  const layout = { timestampBits: 40, workerBits: 8, sequenceBits: 10, epoch: 1_600_000_000_000, unitMs: 10 };
  const c = new Snowflake({ workerId: 200, layout, now: () => T0 + 19 });
  const cid = c.nextId();
  assert.deepEqual(
    { ...c.decompose(cid), date: undefined },
    { timestamp: T0 + 10, workerId: 200, sequence: c.decompose(cid).sequence, date: undefined },
  );
  assert.equal(Snowflake.compose(c.decompose(cid), { layout }), cid);
});

test('layouts: Leaf by default, jsSafe below 2^53, expiry reported and enforced', () => {
  const leaf = layoutInfo();
  assert.equal(leaf.expiresAt, 3_487_858_230_208);
  assert.equal(leaf.maxId, (1n << 63n) - 1n);
  const safe = new Snowflake({ workerId: 127, layout: 'jsSafe' });
  const id = safe.nextId();
  assert.ok(id < 2n ** 53n);
  assert.ok(Number.isSafeInteger(Number(id)));
  assert.equal(safe.layout.maxId, 2n ** 53n - 1n);
  const late = new Snowflake({ workerId: 1, now: () => leaf.expiresAt + 1 });
  assert.throws(() => late.nextId(), { code: 'layout_expired' });
  const early = new Snowflake({ workerId: 1, now: () => 1000 });
  assert.throws(() => early.nextId(), { code: 'clock_before_epoch' });
});

test('state() gives the last timestamp to persist', () => {
  const s = new Snowflake({ workerId: 1, now: () => T0 });
  s.nextId();
  assert.deepEqual(Object.keys(s.state()), ['lastMs', 'sequence']);
  assert.equal(s.state().lastMs, T0);
});

test('bad options and arguments throw Errors with a code', () => {
  const cases = [
    [() => new Snowflake(), 'invalid_option'],
    [() => new Snowflake(7), 'invalid_option'],
    [() => new Snowflake({}), 'invalid_option'],
    [() => new Snowflake({ workerId: 1024 }), 'out_of_range'],
    [() => new Snowflake({ workerId: -1 }), 'invalid_option'],
    [() => new Snowflake({ workerId: 1.5 }), 'invalid_option'],
    [() => new Snowflake({ workerId: '1' }), 'invalid_option'],
    [() => new Snowflake({ workerID: 1 }), 'invalid_option'],
    [() => new Snowflake({ workerId: 1, typo: true }), 'invalid_option'],
    [() => new Snowflake({ workerId: 1, now: 5 }), 'invalid_option'],
    [() => new Snowflake({ workerId: 1, layout: 'twitter' }), 'invalid_option'],
    [() => new Snowflake({ workerId: 1, layout: { timestampBits: 41, workerBits: 10, sequenceBits: 13 } }), 'layout_too_wide'],
    [() => new Snowflake({ workerId: 1, layout: { timestampBits: 41, workerBits: 10 } }), 'invalid_option'],
    [() => new Snowflake({ workerId: 1, maxBackwardMs: 60_001 }), 'out_of_range'],
    [() => new Snowflake({ workerId: 1, sequenceStartBound: 5000 }), 'out_of_range'],
    [() => new Snowflake({ workerId: 1, now: () => 'soon' }).nextId(), 'invalid_clock'],
    [() => new Snowflake({ workerId: 1 }).nextIds(0), 'out_of_range'],
    [() => new Snowflake({ workerId: 1 }).nextIds(MAX_IDS_PER_CALL + 1), 'out_of_range'],
    [() => new Snowflake({ workerId: 1 }).nextIds('10'), 'out_of_range'],
    [() => new Snowflake({ workerId: 1 }).decompose(-1n), 'invalid_id'],
    [() => new Snowflake({ workerId: 1 }).decompose('12ab'), 'invalid_id'],
    [() => new Snowflake({ workerId: 1 }).decompose(2n ** 64n), 'invalid_id'],
    [() => new Snowflake({ workerId: 1, layout: 'jsSafe' }).decompose(2n ** 53n), 'id_out_of_layout'],
    [() => Snowflake.compose({ timestamp: T0, workerId: 1024, sequence: 0 }), 'out_of_range'],
    [() => Snowflake.compose({ timestamp: T0, workerId: 1, sequence: 4096 }), 'out_of_range'],
    [() => Snowflake.compose({ timestamp: T0, workerId: 1.5, sequence: 0 }), 'invalid_argument'],
    [() => Snowflake.compose({ timestamp: 5, workerId: 1, sequence: 0 }), 'clock_before_epoch'],
    [() => Snowflake.compose({ timestamp: T0, workerId: 1, sequence: 0 }, { layot: 'leaf' }), 'invalid_option'],
  ];
  for (const [fn, code] of cases) {
    assert.throws(fn, (e) => {
      assert.ok(e instanceof Error, `${fn}: not an Error`);
      assert.equal(e.code, code, `${fn}: ${e.message}`);
      assert.ok(e.message.length > 10);
      return true;
    }, `${fn} did not throw`);
  }
});

test('nextIdString gives the decimal form', () => {
  const s = new Snowflake({ workerId: 9, now: () => T0 });
  const a = s.nextIdString();
  assert.match(a, /^[0-9]+$/);
  assert.equal(BigInt(a) + 1n, s.nextId());
});
