// The chaos run's short form (tests/chaos/chaos.mjs; `make chaos` runs it longer).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runChaos } from '../chaos/chaos.mjs';

test('chaos, short: kill -9, pauses past the TTL and clock steps while every kind of client draws; nothing issued twice', async () => {
  const stats = await runChaos({ seconds: Number(process.env.CHAOS_SECONDS ?? 40), seed: Number(process.env.CHAOS_SEED ?? 20261122) });
  console.log(`chaos: ${stats.idsChecked} IDs checked, faults ${JSON.stringify(stats.faults)}, ${stats.duplicates} duplicates`);
  assert.deepEqual(stats.violations, []);
  assert.equal(stats.duplicates, 0);
  // It proved something: IDs of every kind, and faults of the kinds that matter.
  assert.ok(stats.segmentIds > 10_000 && stats.snowflakes > 10_000 && stats.leaseRanges > 10, JSON.stringify(stats));
  assert.ok(stats.faults.kill >= 1 && stats.faults.pause + stats.faults.clockBack + stats.faults.clockBackLarge + stats.faults.clockForward >= 1, JSON.stringify(stats.faults));
});
