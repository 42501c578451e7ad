// Durability: the service runs in a child process (Miniflare + workerd) on a
// 127.0.0.1 port; clients draw IDs over HTTP; the whole process group is
// killed with SIGKILL mid-stream and restarted on the same state directory.
// No ID may be issued twice, and max_id may only grow.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN, CLIENT, spawnService, killHard } from '../support/service.mjs';

// One minter, so the one killed mid-batch is the one that serves after the restart.
const launch = (persist) => spawnService(persist, { SNOWFLAKE_MINTERS: '1' });

/** Resolves once `check()` holds (polled every 20 ms), or fails after `ms`. */
async function until(check, what, ms = 20_000) {
  for (const end = Date.now() + ms; !check();) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('kill -9 while clients draw IDs, restart on the same state: nothing issued twice, max_id only grew', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-kill-'));
  let { child, url: base } = await launch(persist);
  let stop = false;
  const get = (path, token = CLIENT, init = {}) =>
    fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}` } });
  try {
    assert.equal((await get('/v1/tags/kill', ADMIN, { method: 'PUT', body: JSON.stringify({ step: 50 }) })).status, 200);
    const segment = new Set();
    const snowflake = new Set();
    const afterRestart = [];
    const snowflakeBefore = [];
    const snowflakeAfter = [];
    let restarted = false;
    let dups = 0;
    const add = (set, id) => { if (set.has(id)) dups++; set.add(id); };
    // Clients draw until told to stop, through the kill and the restart.
    const draw = async (c) => {
      while (!stop) {
        try {
          const path = c % 2 ? '/v1/segment/kill?count=37' : '/v1/snowflake?count=50';
          const was = restarted;
          const res = await get(path);
          if (res.status !== 200) continue;
          for (const id of (await res.json()).ids) {
            add(c % 2 ? segment : snowflake, id);
            if (was) (c % 2 ? afterRestart : snowflakeAfter).push(BigInt(id));
            else if (!(c % 2)) snowflakeBefore.push(BigInt(id));
          }
        } catch {
          // connection refused / reset while the process is dead
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, c) => draw(c));
    await until(() => segment.size >= 2000 && snowflake.size >= 2000, 'IDs before the kill');
    const maxBefore = BigInt((await (await get('/v1/tags/kill', ADMIN)).json()).maxId);
    await killHard(child);
    const killedWith = segment.size;
    ({ child, url: base } = await launch(persist));
    restarted = true;
    await until(() => afterRestart.length >= 2000 && snowflakeAfter.length >= 2000, 'IDs after the restart');
    stop = true;
    await Promise.all(clients);

    const maxAfter = BigInt((await (await get('/v1/tags/kill', ADMIN)).json()).maxId);
    assert.ok(segment.size > killedWith, `drew IDs before (${killedWith}) and after (${segment.size}) the kill`);
    // Every segment the restarted service handed out lies above every ID
    // handed out before the kill: the regional allocator (the default; this
    // colo is Miniflare's DFW → wnam) kept its state and serves on above the
    // highest ID it handed on, and the root kept its max_id (a store that
    // lost either would start again lower). The isolates' cached ranges die
    // with them; the allocator's block does not: it continues within what
    // the root had granted before the kill (IDs stay dense).
    const lowest = afterRestart.reduce((a, b) => (b < a ? b : a));
    const after = new Set(afterRestart);
    const highestSegmentBefore = [...segment].map(BigInt).filter((id) => !after.has(id)).reduce((a, b) => (b > a ? b : a));
    assert.ok(lowest > highestSegmentBefore, `after the restart: lowest ID ${lowest}, highest before the kill ${highestSegmentBefore}`);
    assert.ok(lowest <= maxBefore, `the allocator continued its block: lowest ID after ${lowest}, max_id before the kill ${maxBefore}`);
    assert.ok(maxAfter > maxBefore, `max_id only grew: ${maxBefore} → ${maxAfter}`);
    assert.equal(dups, 0, 'no ID issued twice across the kill');
    // Snowflakes came from the one minter (worker ID 0), which was minting
    // when killed, or from a right to mint it lent (its rights holder's
    // worker ID, 1); restarted, it kept its worker IDs and resumed after its
    // saved reservations: every ID after the restart is above every ID before.
    const workerOf = (id) => Number((id >> 12n) & 0x3ffn);
    assert.ok([...snowflakeBefore, ...snowflakeAfter].every((id) => [0, 1].includes(workerOf(id))), 'minted under the minter\'s worker IDs');
    const highestBefore = snowflakeBefore.reduce((a, b) => (b > a ? b : a));
    const lowestAfter = snowflakeAfter.reduce((a, b) => (b < a ? b : a));
    assert.ok(lowestAfter > highestBefore, `snowflakes after the restart (${lowestAfter}) above those before (${highestBefore})`);
  } finally {
    stop = true; // the clients end with the test, whatever failed
    await killHard(child);
  }
});
