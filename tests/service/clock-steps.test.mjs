// Issue 18 item 2, short form: the service's own clock stepped under load
// (back 5 ms, 3 s, 60 s; forward 2 s; kill -9 and a restart with the clock
// behind the minters' reservations). The driver and the rules it checks are
// in tests/service/clock-steps.mjs (the chaos run can reuse it with a longer plan).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runClockSteps, highWater, BOUND_MS } from './clock-steps.mjs';

test('the timestamp rule: the service\'s highest clock keeps a forward step until the real clock passes it', () => {
  // 0 until 1,000; +2,000 from 990 to 3,000; 0 from 2,995.
  const offsets = [{ from: -Infinity, ms: 0, to: 1_000 }, { from: 990, ms: 2_000, to: 3_000 }, { from: 2_995, ms: 0 }];
  assert.equal(highWater(offsets, 500), 500);
  assert.equal(highWater(offsets, 2_000), 4_000);
  assert.equal(highWater(offsets, 4_000), 5_000);
  assert.equal(highWater(offsets, 6_000), 6_000);
  // A step back lowers nothing.
  assert.equal(highWater([{ from: -Infinity, ms: 0, to: 1_000 }, { from: 990, ms: -60_000 }], 2_000), 1_000);
});

test(`clock steps under load: every request answered within ${BOUND_MS} ms (IDs or a typed 503 with Retry-After), no ID twice, none ahead of the service's clock, IDs again once it is restored`, async () => {
  const r = await runClockSteps({ clients: Number(process.env.CLOCK_STEPS_CLIENTS ?? 8) });
  console.log(r.table);
  console.log(`clock steps: ${r.ids.snowflake} snowflakes, ${r.ids.segment} segment IDs, duplicates ${JSON.stringify(r.duplicates)}`);
  assert.deepEqual(r.duplicates, { segment: 0, snowflake: 0 });
  assert.deepEqual(r.violations, []);
  // It proved something: IDs of both kinds, and every phase under load.
  assert.ok(r.ids.snowflake > 1_000 && r.ids.segment > 1_000, JSON.stringify(r.ids));
  for (const p of r.phases) assert.ok(p.requests >= 10, `${p.name}: only ${p.requests} requests`);
});
