// A regional allocator's retirement alarm, run (issue 34): an allocator that
// holds a block sets an alarm for when the core says the block is due to
// retire (RETIRE_AFTER_MS, 30 minutes after it was leased: before the root
// forgets the block's request ID), and the alarm hands the unused tail back.
// No test hook shortens that time, so workerd's own wall clock is moved
// (tests/support/clockshift.c's LD_PRELOAD shim): 31 minutes forward, and
// the service restarted on the same state, as after an eviction, so that
// workerd schedules the stored alarm again by the clock it now reads. The
// effect checked: the tail back (the tag's maxId down to the highest ID the
// allocator handed on, its runway 0), and IDs dense after it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clockShift } from '../support/clock.mjs';
import { ADMIN, CLIENT, spawnService, killHard } from '../support/service.mjs';

const REGIONAL = { REGIONAL_ALLOCATORS: '1', TEST_COLO_HEADER: '1', SNOWFLAKE_MINTERS: '0' };
// src/block/hand_back.rs RETIRE_AFTER_MS (REQUEST_ID_TTL_MS / 2), and a minute more.
const PAST_RETIREMENT_MS = 31 * 60_000;

test('the allocator\'s retirement alarm runs once its block is due: the tail goes back, maxId down to the highest ID handed on, the next range right after it', async (t) => {
  const clock = await clockShift();
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-alarm-'));
  let svc = await spawnService(persist, REGIONAL, { env: clock.env });
  const ask = async (path, { colo, token = CLIENT, method = 'GET', body } = {}) => {
    const headers = { authorization: `Bearer ${token}`, ...(colo ? { 'edgeleaf-test-colo': colo } : {}) };
    const res = await fetch(`${svc.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    assert.equal(res.status, res.ok ? res.status : 200, `${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  const weur = async () => (await ask('/v1/tags/retire/allocators', { token: ADMIN })).allocators.find((a) => a.region === 'weur');
  const maxId = async () => BigInt((await ask('/v1/tags/retire', { token: ADMIN })).maxId);
  try {
    await ask('/v1/tags/retire', { token: ADMIN, method: 'PUT', body: { step: 10, maxStep: 10 } });
    const first = await ask('/v1/segment/retire?count=1', { colo: 'LHR' });
    // weur's blocks in, its prefetch done.
    let held;
    for (const end = Date.now() + 30_000; ;) {
      held = await weur();
      if (held && !held.leasing && held.blocksLeased > 0) break;
      assert.ok(Date.now() < end, `weur's allocator never held a block: ${JSON.stringify(held)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const handedOn = BigInt(held.servedHigh);
    const maxHeld = await maxId();
    t.diagnostic(`first ID ${first.ids[0]}; weur holds ${held.runway} IDs, handed on up to ${handedOn}; maxId ${maxHeld}`);
    assert.ok(held.runway > 0 && maxHeld > handedOn, `weur holds unserved IDs: ${JSON.stringify(held)}`);
    // Not retired before its time: a restart alone changes nothing.
    await killHard(svc.child);
    svc = await spawnService(persist, REGIONAL, { env: clock.env });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(await maxId(), maxHeld, 'nothing handed back before the block is due');

    // 31 minutes later by workerd's clock, after a restart.
    await killHard(svc.child);
    await clock.setOffsetMs(PAST_RETIREMENT_MS);
    svc = await spawnService(persist, REGIONAL, { env: clock.env });
    let after;
    for (const end = Date.now() + 30_000; ;) {
      after = await weur();
      if (after.runway === 0 && BigInt(after.handedBack) > 0n) break;
      assert.ok(Date.now() < end, `the alarm did not retire weur's blocks within 30 s: ${JSON.stringify(after)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    t.diagnostic(`after the alarm: ${JSON.stringify(after)}`);
    assert.equal(BigInt(after.handedBack), maxHeld - handedOn, 'every unserved ID went back');
    assert.equal(await maxId(), handedOn, 'maxId back to the highest ID handed on');
    const next = await ask('/v1/segment/retire?count=1', { colo: 'NRT' });
    assert.equal(BigInt(next.ids[0]), handedOn + 1n, 'IDs stay dense: apac\'s first range follows');
  } finally {
    await killHard(svc.child);
    rmSync(persist, { recursive: true, force: true });
    clock.dispose();
  }
});
