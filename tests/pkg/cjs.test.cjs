// The same package through require(): the CommonJS entry.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Snowflake, SegmentGenerator, layoutInfo } = require('edgeleaf');

test('require() gives the same API, with bigint IDs', async () => {
  const s = new Snowflake({ workerId: 5 });
  const ids = await s.nextIdsAsync(100_000);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1]);
  assert.equal(typeof s.nextId(), 'bigint');
  assert.equal(s.decompose(ids[0]).workerId, 5);
  assert.equal(layoutInfo({ layout: 'jsSafe' }).unitMs, 10);
  assert.throws(() => new Snowflake({ workerId: 5000 }), { code: 'out_of_range' });
  let max = 0n;
  const g = new SegmentGenerator({
    tag: 'cjs', step: 3,
    fetchSegment: async (tag, step) => { const start = max + 1n; max += BigInt(step); return { start, end: max }; },
  });
  const got = await Promise.all(Array.from({ length: 50 }, () => g.next()));
  assert.equal(new Set(got).size, 50);
});
