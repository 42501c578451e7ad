// The chaos run's short form (tests/chaos/chaos.mjs; `make chaos` runs it longer).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runChaos, faultSchedule, phaseTable, chaosSeed, FAULT_KINDS } from './chaos.mjs';

// A fixed seed in make test; CHAOS_SEED=<n> replays one, CHAOS_SEED=random draws one.
const SEED = chaosSeed(process.env.CHAOS_SEED, 20261122);
console.log(`chaos (short form): seed ${SEED} (replay: CHAOS_SEED=${SEED} node --test tests/chaos/chaos.test.mjs)`);

test('the fault schedule comes from the seed alone, and starts with one fault of each kind', () => {
  const kinds = [...FAULT_KINDS, 'serviceClock'];
  const take = (seed, n) => { const it = faultSchedule(seed, kinds); return Array.from({ length: n }, () => it.next().value); };
  assert.deepEqual(take(SEED, 30), take(SEED, 30));
  assert.notDeepEqual(take(SEED, 30), take(SEED + 1, 30));
  for (const seed of [SEED, 1, 2, 3, 0xffffffff]) {
    assert.deepEqual(take(seed, kinds.length).map((f) => f.kind).sort(), [...kinds].sort(), `seed ${seed}`);
  }
});

test('chaos, short: kill -9, pauses past the TTL, client and service clock steps, a hostile key, two processes sharing a store, callers without a key reusing request IDs, a key poisoning and squatting worker IDs, while every kind of client draws; nothing issued twice, every victim served, and the service recovers after every fault', async () => {
  const stats = await runChaos({ seconds: Number(process.env.CHAOS_SECONDS ?? 40), seed: SEED });
  console.log(phaseTable(stats));
  console.log(`chaos: ${stats.idsChecked} IDs checked (${stats.snowflakes} snowflakes, ${stats.underRights} of them minted under rights to mint), faults ${JSON.stringify(stats.faults)}, ${stats.workerIdsReused} worker IDs reused, ` +
    `hostile ${JSON.stringify(stats.hostile)}, request IDs ${JSON.stringify(stats.requestIds)}, poison ${JSON.stringify(stats.poison)}, ` +
    `allocators ${JSON.stringify(stats.allocators)}, clock_skew judged ${JSON.stringify(stats.skews)}, faults added to exercise a check ${JSON.stringify(stats.extraFaults)}, ` +
    `${stats.duplicates} duplicates, seed ${SEED}`);
  assert.deepEqual(stats.failures, []);
  // It proved something: IDs of every kind, and faults of every kind.
  assert.ok(stats.segmentIds > 10_000 && stats.snowflakes > 10_000 && stats.leaseRanges > 10, JSON.stringify(stats));
  for (const kind of [...FAULT_KINDS, 'serviceClock']) assert.ok(stats.faults[kind] >= 1, `no ${kind}: ${JSON.stringify(stats.faults)}`);
  assert.ok(stats.phases.length > FAULT_KINDS.length + 1);
});
