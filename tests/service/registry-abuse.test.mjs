// What one `registry` key can cost another at the worker-ID registry, in the
// real Worker in workerd (issue 24), at small scale: 64 worker IDs to lease
// (jsSafe's 128, half reserved for minters) and MAX_WORKERS_PER_KEY = 8.
//
// - Poisoning: a key leases and releases in a loop with the largest
//   `lastTimestamp` a release accepts, under a new node key each round. It
//   keeps at most its own 8 worker IDs from the others (then 429
//   `worker_id_limit`), and the victim's leases succeed throughout.
// - Squatting: the same key leases under the victim's node key and releases
//   it with a floor ahead; the victim's fresh lease is still granted.
// - The clock vote: one key's leases at +1.9 s (within the 2 s bound) do not
//   move the clock another key's node is checked against; its own nodes are
//   still checked against its own fleet.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeleafClient } from 'edgeleaf';
import { start, ADMIN } from '../support/service.mjs';

const SKEW = 2000;
const PER_KEY = 8;
let svc;
before(async () => {
  svc = await start({ vars: { LAYOUT: 'jsSafe', SNOWFLAKE_MINTERS: '64', MAX_SKEW_MS: String(SKEW), MAX_WORKERS_PER_KEY: String(PER_KEY) } });
});
after(async () => { await svc?.dispose(); });

const base = 'http://localhost';
const send = (url, init) => svc.mf.dispatchFetch(url, init);
const call = (path, { method = 'GET', body, token }) =>
  send(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function makeKey(name) {
  const res = await call('/v1/keys', { method: 'POST', body: { name, scopes: ['registry'] }, token: ADMIN });
  const key = await res.json();
  assert.equal(res.status, 201, JSON.stringify(key));
  return key.token;
}

const lease = (token, nodeKey, nodeTime = Date.now()) =>
  call('/v1/workers/lease', { method: 'POST', token, body: { nodeKey, nodeTime } });
const release = (token, l, lastTimestamp) =>
  call(`/v1/workers/${l.workerId}`, { method: 'DELETE', token, body: { generation: l.generation, secret: l.secret, lastTimestamp } });

/** Releases `l` with the largest last timestamp the registry accepts. */
async function releaseFarAhead(token, l) {
  const now = Date.now();
  for (const last of [l.expiresAtMs + SKEW + 60_000, now + SKEW + 60_000 - 500, now + 60_000, now + SKEW]) {
    const res = await release(token, l, last);
    if (res.status === 200) return last;
    assert.equal(res.status, 400, await res.text());
  }
  throw new Error('no release accepted');
}

async function json(res, status = 200) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  return JSON.parse(text);
}

test('a key poisoning and squatting worker IDs keeps at most its share; the victim is served throughout', async (t) => {
  const hostile = await makeKey('hostile');
  const victim = await makeKey('victim');
  // The victim's node ran once and released its ID (under its node key).
  await json(await release(victim, await json(await lease(victim, 'victim-1')), Date.now()));
  let poisoned = 0;
  let capped = 0;
  for (let round = 0; round < 80; round++) {
    // Every fourth round the hostile key squats the victim's node key.
    const key = round % 4 === 0 ? 'victim-1' : `hostile-${round}`;
    const res = await lease(hostile, key);
    if (res.status === 429) {
      assert.equal((await res.json()).error.code, 'worker_id_limit');
      capped++;
    } else if (res.status === 409) {
      // Its own earlier ID under that key, poisoned by itself: its clock is
      // "behind" its own floor.
      assert.equal((await res.json()).error.code, 'clock_behind_last_report');
    } else {
      const l = await json(res);
      const last = await releaseFarAhead(hostile, l);
      assert.ok(last <= Date.now() + SKEW + 60_000, `a floor ${last - Date.now()} ms ahead`);
      poisoned++;
    }
    // The victim's node restarts: granted (it may wait up to the skew bound
    // for the ID's floor), then gives the ID back.
    const v = await json(await lease(victim, 'victim-1'));
    assert.ok(v.issueAfterMs <= Date.now() + SKEW, `the victim waits ${v.issueAfterMs - Date.now()} ms`);
    await json(await release(victim, v, Date.now()));
  }
  assert.ok(poisoned <= PER_KEY, `the hostile key poisoned ${poisoned} worker IDs`);
  assert.ok(capped > 0, 'the hostile key was capped');
  // Every ID the hostile key keeps from the others, by the registry's view.
  const { workers } = await json(await call('/v1/workers', { token: ADMIN }));
  const now = Date.now();
  const withheld = workers.filter((w) => w.status !== 'free' || w.lastTimestampMs > now + SKEW);
  const byOwner = Object.groupBy(withheld, (w) => w.owner);
  for (const [owner, ws] of Object.entries(byOwner)) assert.ok(ws.length <= PER_KEY, `${owner} withholds ${ws.length}`);
  // The victim's application still starts and mints.
  const sf = await new EdgeleafClient({ url: base, token: victim, fetch: send }).snowflake({ nodeKey: 'victim-app' });
  const ids = [];
  for (let i = 0; i < 300; i++) ids.push(await sf.next());
  assert.equal(new Set(ids).size, 300);
  await sf.close();
  t.diagnostic(`80 rounds: ${poisoned} worker IDs poisoned, ${capped} leases capped (429); the victim leased 80 times and minted`);
});

test("one key's clocks do not move the clock vote another key's node is checked against", async () => {
  const fast = await makeKey('fast-clocks');
  const other = await makeKey('other');
  // The fast key's fleet, each within the bound: +1.9 s.
  for (let i = 0; i < PER_KEY; i++) await json(await lease(fast, `fast-${i}`, Date.now() + 1_900));
  // Another key's node lagging 300 ms: 2.2 s from the fast fleet, 0.3 s
  // from the registry's clock — accepted.
  const lagging = await json(await lease(other, 'lagging-1', Date.now() - 300));
  assert.ok(lagging.workerId >= 64);
  // The fast key's own node lagging 300 ms is still checked against its fleet.
  const res = await lease(fast, 'fast-late', Date.now() - 300);
  const body = await json(res, 409);
  assert.equal(body.error.code, 'clock_skew');
  assert.match(body.error.message, /live nodes/);
});
