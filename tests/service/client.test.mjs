// EdgeleafClient (the npm package) against the real local Worker in workerd.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeleafClient } from 'edgeleaf';
import { start, ADMIN, CLIENT } from '../support/service.mjs';

let svc;
before(async () => {
  svc = await start();
  await svc.admin('/v1/tags/client', { method: 'PUT', body: JSON.stringify({ step: 50 }) });
});
after(async () => { await svc?.dispose(); });

const client = (token = CLIENT, fetchFn) =>
  new EdgeleafClient({ url: 'http://localhost', token, fetch: fetchFn ?? ((url, init) => svc.mf.dispatchFetch(url, init)) });

/** A store that keeps state in memory, standing in for a file. */
function memoryStore() {
  const s = { state: undefined, saves: 0 };
  s.load = async () => s.state;
  s.save = async (state) => { s.state = structuredClone(state); s.saves++; };
  return s;
}

test('segment(): IDs generated locally from leased ranges, unique across clients', async () => {
  const a = client().segment('client');
  const b = client().segment('client');
  const ids = await Promise.all(Array.from({ length: 3000 }, (_, i) => (i % 2 ? a : b).next()));
  assert.equal(new Set(ids).size, 3000);
  for (const g of [a, b]) {
    const mine = await g.nextIds(500);
    for (let i = 1; i < mine.length; i++) assert.ok(mine[i] > mine[i - 1]);
  }
  const snap = a.snapshot();
  assert.ok(snap.initialized && snap.step >= 50);
});

test('segment(): a lease retried after a lost answer gets the same range', async () => {
  let calls = 0;
  const bodies = [];
  const answers = [];
  const flaky = async (url, init) => {
    bodies.push(init.body);
    const res = await svc.mf.dispatchFetch(url, init);
    answers.push(await res.clone().json());
    if (++calls === 1) throw new Error('connection reset'); // the answer is lost
    return res;
  };
  const g = client(CLIENT, flaky).segment('client', { step: 50 });
  const first = await g.next();
  assert.equal(calls, 2);
  assert.equal(bodies[0], bodies[1], 'the retry repeats the request ID');
  assert.deepEqual(answers[1], answers[0], 'the store answered the same range twice');
  assert.equal(first, BigInt(answers[0].start), 'and the client serves from it');
});

test('snowflake(): leased worker IDs, unique IDs, release and re-lease with the store', async () => {
  const store = memoryStore();
  const admin = client(ADMIN);
  const one = await admin.snowflake({ nodeKey: 'host-1', store });
  const two = await admin.snowflake({ nodeKey: 'host-2' });
  assert.notEqual(one.workerId, two.workerId);
  const ids = new Set();
  for (let i = 0; i < 5000; i++) {
    ids.add(await one.next());
    ids.add(await two.next());
  }
  assert.equal(ids.size, 10_000);
  assert.equal(one.decompose(await one.next()).workerId, one.workerId);
  const last = await one.next();
  await one.close();
  await assert.rejects(async () => one.nextId(), { code: 'lease_lost' });
  assert.equal(store.state.workerId, one.workerId);
  // A restart with the store gets its worker ID back and issues after the last ID.
  const again = await admin.snowflake({ nodeKey: 'host-1', store });
  assert.equal(again.workerId, store.state.workerId);
  assert.ok((await again.next()) > last);
  await again.close();
  await two.close();
});

test('snowflake(): stops issuing the moment the lease is lost', async () => {
  const admin = client(ADMIN);
  const store = memoryStore();
  const sf = await admin.snowflake({ nodeKey: 'host-3', store });
  sf.nextId();
  assert.equal(sf.lease.secret, undefined, 'the lease view never shows the secret');
  // Without the grant's secret, naming it is refused and changes nothing.
  const { workerId, generation } = sf.lease;
  const take = (previous) => svc.admin('/v1/workers/lease', {
    method: 'POST', body: JSON.stringify({ nodeKey: 'host-3', nodeTime: Date.now(), previous }),
  });
  const refused = await take({ workerId, generation });
  assert.equal(refused.status, 403);
  assert.equal((await refused.json()).error.code, 'not_lease_holder');
  await sf.renew();
  assert.ok(sf.nextId() > 0n, 'a refused stranger does not stop the holder');
  // Another incarnation of host-3, with the secret from the node's own
  // store, proves the live grant: it gets another worker ID (it may be a
  // second process sharing the store), and this holder keeps minting.
  assert.match(store.state.secret, /^[0-9a-f]{32}$/);
  const res = await take({ workerId, generation, secret: store.state.secret });
  assert.equal(res.status, 200);
  assert.notEqual((await res.json()).workerId, workerId);
  await sf.renew();
  assert.ok(sf.nextId() > 0n);
  // Evicted by root: the holder stops at its next renewal.
  assert.equal((await svc.admin(`/v1/workers/${workerId}/evict`, { method: 'POST' })).status, 200);
  await sf.renew();
  assert.throws(() => sf.nextId(), { code: 'lease_lost' });
  await sf.close();
});

test('snowflake(): a lapsed lease is never used; a clock behind the store is refused', async () => {
  let now = Date.now();
  const admin = client(ADMIN);
  const sf = await admin.snowflake({ nodeKey: 'host-4', now: () => now });
  sf.nextId();
  now += 61_000; // past the 60 s TTL without a renewal
  assert.throws(() => sf.nextId(), { code: 'lease_expired' });
  await sf.close();
  const store = memoryStore();
  store.state = { workerId: 5, generation: 1, lastTimestamp: Date.now() + 3_600_000, expiresAtMs: 0 };
  await assert.rejects(admin.snowflake({ nodeKey: 'host-5', store }), { code: 'clock_behind_last_report' });
});

test('snowflake(): registry down, a cached unexpired lease does not start (another process may hold it)', async () => {
  const store = memoryStore();
  const admin = client(ADMIN);
  const sf = await admin.snowflake({ nodeKey: 'host-6', store });
  await sf.next();
  // A second process starts from the same store; the registry is unreachable.
  const down = client(ADMIN, async () => { throw new Error('ECONNREFUSED'); });
  await assert.rejects(down.snowflake({ nodeKey: 'host-6', store }), { code: 'registry_unreachable' });
  await assert.rejects(down.snowflake({ nodeKey: 'host-7' }), { code: 'registry_unreachable' });
  // The first process was not disturbed.
  assert.ok((await sf.next()) > 0n);
  await sf.close();
});

test('errors from the service arrive as coded Errors', async () => {
  await assert.rejects(client().segment('no-such-tag').next(), { code: 'not_found' });
  await assert.rejects(client('wrong').segment('client').next(), { code: 'forbidden' });
  await assert.rejects(client(CLIENT).snowflake(), { code: 'forbidden' }); // the registry needs the admin token
  assert.throws(() => new EdgeleafClient({ url: 'ftp://x' }), { code: 'invalid_option' });
  assert.throws(() => new EdgeleafClient({ url: 'http://x', token: 5 }), { code: 'invalid_option' });
  assert.throws(() => client().segment('bad tag'), { code: 'invalid_key' });
  await assert.rejects(client(ADMIN).snowflake({ nodeKey: 'bad key' }), { code: 'invalid_key' });
});

test('snowflake(): the store holds a reservation ahead of every ID, and the exact last timestamp after close', async () => {
  const store = memoryStore();
  const sf = await client(ADMIN).snowflake({ nodeKey: 'host-8', store });
  const reserved = store.state.lastTimestamp;
  assert.ok(reserved >= Date.now() + 2000, `reserved ${reserved - Date.now()} ms ahead`);
  const id = await sf.next();
  assert.ok(sf.decompose(id).timestamp <= reserved, 'no ID past the saved reservation');
  await sf.close();
  assert.equal(store.state.lastTimestamp, sf.decompose(id).timestamp);
  // A restart right after a clean close need not wait out a reservation.
  const started = Date.now();
  const again = await client(ADMIN).snowflake({ nodeKey: 'host-8', store });
  assert.ok((await again.next()) > id);
  assert.ok(Date.now() - started < 2000);
  await again.close();
});
