// A leased snowflake (EdgeleafClient#snowflake) and its store, against a
// stand-in registry (./fake-registry.mjs, with no floor of its own): the
// client never mints past a reservation the store has not saved, whether a
// save fails, hangs or is slow; and a restart from the store, on a clock the
// test holds behind the saved reservation, mints only after it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeleafClient, Snowflake } from 'edgeleaf';
import { fakeRegistry } from './fake-registry.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tsOf = (id) => Snowflake.decompose(id).timestamp;
const clientOf = (reg) => new EdgeleafClient({ url: 'http://registry.test', token: 't', fetch: reg.fetch });

/**
 * A store whose saves go through `behave(n)` (n: the save's number from 1):
 * 'ok', 'reject', 'hang', or a delay in ms. `saved` is the last reservation
 * a save confirmed, set the moment it resolves (before the client hears it).
 */
function flakyStore(behave) {
  const s = { state: undefined, saved: -Infinity, saves: 0, failed: 0 };
  s.load = async () => s.state;
  s.save = async (state) => {
    const how = behave(++s.saves);
    if (how === 'reject') { s.failed++; throw new Error('disk full'); }
    if (how === 'hang') return new Promise(() => {});
    if (typeof how === 'number') await sleep(how);
    s.state = structuredClone(state);
    s.saved = Math.max(s.saved, state.lastTimestamp);
  };
  return s;
}

/**
 * Mints for `ms` (real time) in small batches, checking each ID against the
 * reservation the store had confirmed when it was minted. Returns counts.
 */
async function mintAgainst(sf, store, ms) {
  const out = { ids: 0, pending: 0, maxTs: 0, other: [] };
  const until = Date.now() + ms;
  while (Date.now() < until) {
    let ids;
    try {
      ids = sf.nextIds(20);
    } catch (e) {
      ids = e.ids ?? [];
      if (e.code === 'save_pending') out.pending++;
      else if (e.code !== 'sequence_exhausted' && e.code !== 'clock_behind') out.other.push(e.code);
    }
    for (const id of ids) {
      const ts = tsOf(id);
      assert.ok(ts <= store.saved, `minted at ${ts}, past the saved reservation ${store.saved} (${ts - store.saved} ms)`);
      out.maxTs = Math.max(out.maxTs, ts);
    }
    out.ids += ids.length;
    await sleep(2);
  }
  return out;
}

test('a store whose saves start failing: minting stops at the last reservation saved, and never passes it', { concurrency: true }, async (t) => {
  await Promise.all([
    ['rejects', (n) => (n <= 2 ? 'ok' : 'reject')],
    ['hangs', (n) => (n <= 2 ? 'ok' : 'hang')],
  ].map(([name, behave]) =>
    t.test(`a save that ${name}`, async () => {
      const reg = fakeRegistry();
      const store = flakyStore(behave);
      const sf = await clientOf(reg).snowflake({ nodeKey: `flaky-${name}`, store });
      // Open saves once; the timer saves again about a second later, then the
      // store fails: the reservation it last saved is about 3 s past that.
      const r = await mintAgainst(sf, store, 5_500);
      assert.ok(store.saves >= 3, `the client tried ${store.saves} saves`);
      assert.ok(r.ids > 10_000, `only ${r.ids} IDs minted before the failure`);
      assert.ok(r.pending > 0, 'it stopped minting (save_pending) once the reservation ran out');
      assert.ok(r.maxTs > store.saved - 1000, `it minted up to near the reservation (${store.saved - r.maxTs} ms short)`);
      assert.deepEqual(r.other, []);
      if (name === 'rejects') assert.ok(store.failed >= 1);
      // A store that keeps failing is asked again after a growing pause (the
      // core's save_due_in), not on every 2 ms timer: 1,812 tries before.
      if (name === 'rejects') assert.ok(store.saves <= 30, `a failing store was asked ${store.saves} times in 5.5 s`);
      console.log(`a save that ${name}: ${r.ids} IDs, ${store.saves} saves tried, ${r.pending} save_pending`);
      // close() gives the worker ID back even when the store cannot save.
      const closed = sf.close().catch(() => {});
      await sleep(50);
      assert.equal(reg.releases.length, 1, 'released');
      if (name === 'rejects') await closed;
    })));
});

test('a slow store (each save 1.5 s): IDs pause while a reservation is unsaved, and never pass the saved one', async () => {
  const reg = fakeRegistry();
  const store = flakyStore((n) => (n === 1 ? 'ok' : 1500));
  const sf = await clientOf(reg).snowflake({ nodeKey: 'slow', store });
  const r = await mintAgainst(sf, store, 6_000);
  assert.ok(r.ids > 10_000, `only ${r.ids} IDs`);
  assert.ok(store.saves >= 3, `${store.saves} saves`);
  assert.deepEqual(r.other, []);
  await sf.close();
});

test('a store whose first save fails: snowflake() rejects, and the lease it got is given back', async () => {
  const reg = fakeRegistry();
  const store = flakyStore(() => 'reject');
  await assert.rejects(clientOf(reg).snowflake({ nodeKey: 'no-save', store }), /disk full/);
  assert.equal(reg.asks.length, 1);
  assert.equal(reg.releases.length, 1, 'the worker ID was released, not left to renew itself');
  await sleep(50);
  assert.equal(reg.renewals.length, 0);
});

/** A saved state of node `nodeKey`, lease `reg`'s, reserved up to `lastTimestamp`. */
function savedBy(reg, lastTimestamp) {
  return { nodeKey: 'restart', lastTimestamp, workerId: 7, generation: reg.generation, expiresAtMs: lastTimestamp + 50_000, ttlMs: 60_000, secret: 'ab'.repeat(16) };
}

test('restart with the clock behind the saved reservation (within 3 s): the first ID comes after it', async () => {
  const L = Date.now() + 10_000; // the saved reservation: the test's clock is set around it
  let t = L - 2_000;
  const now = () => t;
  const reg = fakeRegistry({ now });
  const store = flakyStore(() => 'ok');
  store.state = savedBy(reg, L);
  const sf = await clientOf(reg).snowflake({ nodeKey: 'restart', store, now });
  assert.deepEqual(reg.asks[0].previous, { workerId: 7, generation: 0, secret: 'ab'.repeat(16) }, 'it offered the saved grant');
  assert.equal(reg.asks[0].nodeTime, L - 2_000);
  // Behind the floor: it waits (clock_behind), it does not mint.
  assert.throws(() => sf.nextId(), (e) => e.code === 'clock_behind' && e.retryAfterMs > 0 && e.retryAfterMs <= 2_001);
  t = L;
  assert.throws(() => sf.nextId(), { code: 'clock_behind' }, 'not in the unit of the floor either');
  t = L + 1;
  const id = sf.nextId();
  assert.ok(tsOf(id) > L, `the first ID at ${tsOf(id)}, after the saved ${L}`);
  assert.ok(store.state.lastTimestamp > L, 'and the store holds a reservation past it');
  await sf.close();
  assert.equal(store.state.lastTimestamp, tsOf(id), 'close saves the exact last timestamp');
});

test('restart with the clock further behind the saved reservation than 3 s: refused before leasing', async () => {
  const L = Date.now() + 10_000;
  const now = () => L - 3_001;
  const reg = fakeRegistry({ now });
  const store = flakyStore(() => 'ok');
  store.state = savedBy(reg, L);
  await assert.rejects(clientOf(reg).snowflake({ nodeKey: 'restart', store, now }), { code: 'clock_behind_last_report' });
  assert.equal(reg.asks.length, 0, 'nothing asked of the registry');
  // Just inside the bound it starts (and waits for the floor).
  const inside = () => L - 3_000;
  const sf = await clientOf(fakeRegistry({ now: inside })).snowflake({ nodeKey: 'restart', store, now: inside });
  assert.throws(() => sf.nextId(), { code: 'clock_behind' });
  await sf.close();
});

test('a snowflake() that fails closes its store, if the store has close(): at a refused clock, an unreachable registry, a failed first save', async () => {
  const closing = (behave) => Object.assign(flakyStore(behave), { closes: 0, async close() { this.closes++; } });
  // The clock refused (before leasing).
  const L = Date.now() + 10_000;
  const reg = fakeRegistry();
  const behind = closing(() => 'ok');
  behind.state = savedBy(reg, L);
  await assert.rejects(clientOf(reg).snowflake({ nodeKey: 'restart', store: behind, now: () => L - 3_001 }), { code: 'clock_behind_last_report' });
  assert.equal(behind.closes, 1);
  // The registry unreachable.
  const down = fakeRegistry();
  down.down = true;
  const unreached = closing(() => 'ok');
  await assert.rejects(clientOf(down).snowflake({ nodeKey: 'down', store: unreached }), { code: 'registry_unreachable' });
  assert.equal(unreached.closes, 1);
  // The first save failing (the worker ID goes back, then the store is closed).
  const up = fakeRegistry();
  const failing = closing(() => 'reject');
  await assert.rejects(clientOf(up).snowflake({ nodeKey: 'failing', store: failing }), /disk full/);
  assert.equal(failing.closes, 1);
  assert.equal(up.releases.length, 1, 'the worker ID went back');
  // A store whose close() fails: the open's own error is what is thrown.
  const bad = Object.assign(flakyStore(() => 'ok'), { async close() { throw new Error('close failed'); } });
  await assert.rejects(clientOf(down).snowflake({ nodeKey: 'down', store: bad }), { code: 'registry_unreachable' });
  // An open that succeeds does not close it.
  const fine = closing(() => 'ok');
  const sf = await clientOf(up).snowflake({ nodeKey: 'fine', store: fine });
  assert.equal(fine.closes, 0);
  await sf.close();
});

test('an answer cut off mid-body is a coded registry_unreachable / service_unreachable, never a bare TypeError', async () => {
  // The body stream fails as undici's does when the service dies mid-answer.
  const cut = async () => new Response(new ReadableStream({
    start(c) { c.enqueue(new TextEncoder().encode('{"workerId":')); c.error(new TypeError('terminated')); },
  }), { status: 200, headers: { 'content-type': 'application/json' } });
  const client = new EdgeleafClient({ url: 'http://registry.test', token: 't', fetch: cut });
  await assert.rejects(client.snowflake({ nodeKey: 'cut-1' }), { code: 'registry_unreachable' });
  await assert.rejects(client.request('GET', '/v1/tags'), { code: 'service_unreachable' });
});
