// A worker-ID lease belongs to its holder, against the real Worker in
// workerd: two applications with their own `registry` keys, where the
// second (a bug, or a leaked key) tries every public way to take the
// first's lease — renew, release, reclaim with `previous`, and even the
// first's real secret under its own key. Every step is refused, the first
// keeps its lease, and both mint side by side without a duplicate. Then the
// operator's eviction (root only) and its fence, and a restart's reclaim
// with and without the saved secret: a second process started from the same
// store while the grant is live gets another worker ID.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeleafClient } from 'edgeleaf';
import { start, ADMIN as TEST_ADMIN } from '../support/service.mjs';

// A short TTL so that eviction's fence (expiry + MAX_SKEW_MS + grace) is
// seconds, not minutes.
const TTL = 2000;
const GRACE = 1500;
const SKEW = 500;
// EDGELEAF_URL (with EDGELEAF_ADMIN_TOKEN) runs the first test against a
// running service instead, e.g. `make dev`:
//   EDGELEAF_URL=http://127.0.0.1:8787 EDGELEAF_ADMIN_TOKEN=dev-admin-token \
//     node --test --test-name-pattern="another credential" tests/service/leases.test.mjs
const REMOTE = process.env.EDGELEAF_URL;
const ADMIN = REMOTE ? process.env.EDGELEAF_ADMIN_TOKEN : TEST_ADMIN;
let svc;
before(async () => {
  if (!REMOTE) svc = await start({ vars: { LEASE_TTL_MS: String(TTL), LEASE_GRACE_MS: String(GRACE), MAX_SKEW_MS: String(SKEW) } });
});
after(async () => { await svc?.dispose(); });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const base = REMOTE ?? 'http://localhost';
const send = (url, init) => (REMOTE ? fetch(url, init) : svc.mf.dispatchFetch(url, init));
const call = (path, { method = 'GET', body, token }) =>
  send(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
const client = (token) => new EdgeleafClient({ url: base, token, fetch: send });
/** A process that can die without releasing: `kill()` cuts it off the service. */
function mortal(token) {
  let dead = false;
  const fetchFn = (url, init) => (dead ? Promise.reject(new Error('ECONNREFUSED')) : send(url, init));
  return { client: new EdgeleafClient({ url: base, token, fetch: fetchFn }), kill: () => { dead = true; } };
}

function memoryStore() {
  const s = { state: undefined };
  s.load = async () => s.state;
  s.save = async (state) => { s.state = structuredClone(state); };
  return s;
}

async function expectError(res, status, code) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.equal(JSON.parse(text).error.code, code, text);
}

async function makeKey(name, scopes) {
  const res = await call('/v1/keys', { method: 'POST', body: { name, scopes }, token: ADMIN });
  const key = await res.json();
  assert.equal(res.status, 201, JSON.stringify(key));
  return key;
}

const slotOf = async (token, workerId) =>
  (await (await call('/v1/workers', { token })).json()).workers.find((w) => w.workerId === workerId);

/** Draws IDs from each minter for `ms`, as fast as each allows. */
async function mintSideBySide(minters, ms) {
  const out = minters.map(() => []);
  const until = Date.now() + ms;
  await Promise.all(minters.map(async (m, i) => {
    while (Date.now() < until) {
      out[i].push(...await m.nextIds(500));
      await sleep(0);
    }
  }));
  return out;
}

test('another credential can neither renew, release nor reclaim a lease; both mint, 0 duplicates', async (t) => {
  const keyA = await makeKey('app-a', ['registry']);
  const keyB = await makeKey('app-b', ['registry']);
  const monitor = await makeKey('dashboard', ['monitor']);
  const storeA = memoryStore();
  const a = await client(keyA.token).snowflake({ nodeKey: 'app-a-1', store: storeA });
  const before = await a.nextIds(100);
  // What B can see: worker ID, node key, owner and generation — no secret.
  const seen = await slotOf(monitor.token, a.workerId);
  assert.equal(seen.owner, keyA.id);
  assert.equal(seen.nodeKey, 'app-a-1');
  assert.equal(seen.generation, a.lease.generation);
  const listing = await (await call('/v1/workers', { token: monitor.token })).text();
  assert.ok(!listing.includes(storeA.state.secret), 'the view never shows the secret');
  const { workerId, generation } = seen;
  const guessed = 'ab'.repeat(16);
  const leaked = storeA.state.secret;
  // Every step of the takeover, with no secret, a guessed one, and A's real
  // secret (leaked) under B's key: refused with its own code.
  for (const secret of [undefined, guessed, leaked]) {
    await expectError(await call(`/v1/workers/${workerId}/renew`, { method: 'POST', token: keyB.token, body: { generation, secret, nodeTime: Date.now() } }), 403, 'not_lease_holder');
    await expectError(await call('/v1/workers/lease', { method: 'POST', token: keyB.token, body: { nodeKey: 'app-a-1', nodeTime: Date.now(), previous: { workerId, generation, secret } } }), 403, 'not_lease_holder');
    await expectError(await call(`/v1/workers/${workerId}`, { method: 'DELETE', token: keyB.token, body: { generation, secret, lastTimestamp: 0 } }), 403, 'not_lease_holder');
  }
  // Nor may a registry key evict (root's tool).
  await expectError(await call(`/v1/workers/${workerId}/evict`, { method: 'POST', token: keyB.token }), 403, 'forbidden');
  // A keeps its lease: same generation, renews, mints.
  const after = await slotOf(monitor.token, workerId);
  assert.equal(after.generation, generation);
  assert.equal(after.status, 'live');
  await a.renew();
  assert.equal(a.lease.generation, generation);
  // B's own client gets another worker ID; both mint for 5 s.
  const b = await client(keyB.token).snowflake({ nodeKey: 'app-b-1' });
  assert.notEqual(b.workerId, a.workerId);
  const [idsA, idsB] = await mintSideBySide([a, b], 5000);
  assert.ok(idsA.length > 10_000 && idsB.length > 10_000, `minted ${idsA.length} and ${idsB.length}`);
  const all = new Set([...before, ...idsA, ...idsB]);
  assert.equal(all.size, before.length + idsA.length + idsB.length, 'duplicates');
  t.diagnostic(`A minted ${idsA.length} under worker ${a.workerId}, B ${idsB.length} under ${b.workerId}: 0 duplicates`);
  await a.close();
  await b.close();
});

test('root evicts a live lease: the holder stops at its next renewal, the ID is fenced past expiry + skew', async () => {
  const key = await makeKey('stuck', ['registry']);
  const sf = await client(key.token).snowflake({ nodeKey: 'stuck-1' });
  const last = (await sf.nextIds(10)).at(-1);
  const { workerId, expiresAtMs } = sf.lease;
  const res = await call(`/v1/workers/${workerId}/evict`, { method: 'POST', token: ADMIN });
  const evicted = await res.json();
  assert.equal(res.status, 200, JSON.stringify(evicted));
  const slot = await slotOf(ADMIN, workerId);
  assert.ok(slot.evicted && slot.status === 'lapsed', JSON.stringify(slot));
  assert.ok(evicted.issueAfterMs >= expiresAtMs + SKEW, `fence ${evicted.issueAfterMs} vs expiry ${expiresAtMs}`);
  await expectError(await call(`/v1/workers/${workerId}/evict`, { method: 'POST', token: ADMIN }), 409, 'lease_not_held');
  // The holder learns at its next renewal and stops.
  await sf.renew();
  assert.throws(() => sf.nextId(), { code: 'lease_lost' });
  // Nobody gets the ID until expiry + skew + grace; then its next holder
  // issues only after expiry + skew.
  const lease = (nodeKey) => call('/v1/workers/lease', { method: 'POST', token: ADMIN, body: { nodeKey, nodeTime: Date.now() } });
  const during = await (await lease('during')).json();
  assert.notEqual(during.workerId, workerId);
  let next;
  for (const deadline = evicted.issueAfterMs + GRACE + 3000; Date.now() < deadline && !next;) {
    // Lease (and release at once) until the evicted ID comes round again.
    const l = await (await lease(`after-${Date.now()}`)).json();
    if (l.workerId === workerId) next = l;
    else await call(`/v1/workers/${l.workerId}`, { method: 'DELETE', token: ADMIN, body: { generation: l.generation, secret: l.secret, lastTimestamp: 0 } });
    await sleep(100);
  }
  assert.ok(next, 'the evicted ID is reused after its fence');
  assert.ok(Date.now() >= evicted.issueAfterMs + GRACE - SKEW, 'not reused before expiry + skew + grace');
  assert.ok(next.issueAfterMs >= evicted.issueAfterMs, `next holder issues after ${next.issueAfterMs}, fence ${evicted.issueAfterMs}`);
  assert.ok(BigInt(last) > 0n);
});

test('a restart while its grant is live gets another worker ID; after the lapse it reclaims its own with the saved secret, and is refused without it', async () => {
  const key = await makeKey('restarts', ['registry']);
  const store = memoryStore();
  const p1 = mortal(key.token);
  const p2 = mortal(key.token);
  const first = await p1.client.snowflake({ nodeKey: 'host-r', store });
  const lastBefore = (await first.nextIds(10)).at(-1);
  // A second process starts from the same store while the first still
  // holds its grant (one config, one store file): another worker ID, and
  // both mint without a duplicate.
  const second = await p2.client.snowflake({ nodeKey: 'host-r', store });
  assert.notEqual(second.workerId, first.workerId, 'a live grant is not taken over');
  // (The second resumes after the reservation the first saved, ~3 s ahead:
  // `next()` waits for it.)
  const drawn = async (sf, n) => { const out = []; for (let i = 0; i < n; i++) out.push(await sf.next()); return out; };
  const [idsA, idsB] = await Promise.all([drawn(first, 3000), drawn(second, 3000)]);
  const all = new Set([lastBefore, ...idsA, ...idsB]);
  assert.equal(all.size, 1 + idsA.length + idsB.length, 'duplicates');
  // The store lost the secret (or another process copied only the numbers):
  // naming the live grant without it is refused.
  const { secret: _secret, ...withoutSecret } = store.state;
  const bare = memoryStore();
  bare.state = withoutSecret;
  await assert.rejects(client(key.token).snowflake({ nodeKey: 'host-r', store: bare }), { code: 'not_lease_holder' });
  // The holder was not disturbed.
  assert.ok((await second.next()) > 0n);
  // Both processes die without releasing; once the last saved grant has
  // lapsed (TTL), a restart proves it and takes its worker ID back.
  p1.kill();
  p2.kill();
  await sleep(TTL + 200);
  // (Both saved into the store until their leases lapsed: it holds one of them.)
  const saved = store.state;
  const again = await client(key.token).snowflake({ nodeKey: 'host-r', store });
  assert.equal(again.workerId, saved.workerId, 'reclaimed with its saved secret');
  assert.ok(again.lease.generation > saved.generation);
  assert.ok((await again.next()) > idsA.concat(idsB).reduce((m, x) => (x > m ? x : m), 0n));
  await again.close();
});
