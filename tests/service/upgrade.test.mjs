// The upgrade to lease secrets, on a store written by the previous version
// (tests/service/fixtures/store-v0: the registry and two minters as the service at
// 590b7f7 wrote them, with its times moved to now by tests/support/fixture.mjs).
// Its grants have no secret: nobody can renew, release or reclaim them; the
// nodes that held them lease again (another ID while theirs is live); the
// minters reclaim theirs by generation, so snowflakes keep flowing; and a
// legacy grant's worker ID, once free, is fenced at its expiry + MAX_SKEW_MS.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EdgeleafClient } from 'edgeleaf';
import { start, ADMIN } from '../support/service.mjs';
import { openStoreV0 } from '../support/fixture.mjs';

// As the fixture was written (defaults otherwise: TTL 60 s, grace 10 s, skew 2 s),
// before rights to mint: with them the registry would reserve the legacy
// grants' worker IDs 2 and 3 for the minters' rights holders (the same
// fence applies to their grants; minters-grow.test.mjs moves a node off such an ID).
const VARS = { SNOWFLAKE_MINTERS: '2', SNOWFLAKE_RIGHTS: '0' };
const SKEW = 2000;
const GRACE = 10_000;

async function expectError(res, status, code) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.equal(JSON.parse(text).error.code, code, text);
}

const post = (body) => ({ method: 'POST', body: JSON.stringify(body) });

test('live grants from before secrets: refused to everyone, their nodes lease again, minters keep serving', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-upgrade-'));
  const v0 = await openStoreV0(dir, { shiftToMs: Date.now() });
  const svc = await start({ persist: dir, vars: VARS });
  try {
    const { workers } = await (await svc.admin('/v1/workers')).json();
    const legacy = Object.fromEntries(workers.map((w) => [w.nodeKey, w]));
    for (const key of ['legacy-a', 'legacy-b', 'legacy-c']) {
      assert.equal(legacy[key]?.status, 'live', `${key}: ${JSON.stringify(legacy[key])}`);
    }
    const a = legacy['legacy-a'];
    // No secret, a guessed one: renew and release refused, nothing changes.
    for (const secret of [undefined, 'cd'.repeat(16)]) {
      await expectError(await svc.admin(`/v1/workers/${a.workerId}/renew`, post({ generation: a.generation, secret, nodeTime: Date.now() })), 403, 'not_lease_holder');
      await expectError(await svc.admin(`/v1/workers/${a.workerId}`, { method: 'DELETE', body: JSON.stringify({ generation: a.generation, secret, lastTimestamp: 0 }) }), 403, 'not_lease_holder');
    }
    // Its node, restarting with its old cache (no secret), gets another ID.
    const again = await (await svc.admin('/v1/workers/lease', post({ nodeKey: 'legacy-a', nodeTime: Date.now(), previous: { workerId: a.workerId, generation: a.generation } }))).json();
    assert.notEqual(again.workerId, a.workerId, JSON.stringify(again));
    assert.match(again.secret, /^[0-9a-f]{32}$/);
    const aAfter = (await (await svc.admin('/v1/workers')).json()).workers.find((w) => w.workerId === a.workerId);
    assert.equal(aAfter.generation, a.generation, 'the legacy grant is untouched');
    // The npm client restarted from its legacy store: another ID, IDs after its saved ones.
    const store = { state: v0.client, load: async () => store.state, save: async (s) => { store.state = s; } };
    const client = new EdgeleafClient({ url: 'http://localhost', token: ADMIN, fetch: (url, init) => svc.mf.dispatchFetch(url, init) });
    const sf = await client.snowflake({ nodeKey: 'legacy-c', store });
    assert.notEqual(sf.workerId, v0.client.workerId);
    const first = await sf.next();
    const { timestamp } = await (await svc.fetch(`/v1/snowflake/${first}`)).json();
    assert.ok(timestamp > v0.client.lastTimestamp, `${timestamp} after the saved ${v0.client.lastTimestamp}`);
    assert.match(store.state.secret, /^[0-9a-f]{32}$/, 'the store now holds the new grant\'s secret');
    await sf.close();
    // Snowflakes keep flowing: the minters reclaim their grants by generation.
    const minters = workers.filter((w) => w.nodeKey.startsWith('minter:'));
    assert.equal(minters.length, 2);
    let drawn = 0;
    for (const deadline = Date.now() + 10_000; drawn < 500 && Date.now() < deadline;) {
      const res = await svc.fetch('/v1/snowflake?count=100');
      if (res.status === 503) { await res.arrayBuffer(); continue; } // waiting out a saved reservation
      assert.equal(res.status, 200, await res.clone().text());
      drawn += (await res.json()).ids.length;
    }
    assert.equal(drawn, 500, 'snowflakes drawn through the upgrade');
    const after = (await (await svc.admin('/v1/workers')).json()).workers;
    // A minter that served reclaimed its own worker ID under a new grant
    // (a minter no request reached still has its legacy grant).
    const reclaimed = after.filter((w) => w.nodeKey.startsWith('minter:')
      && w.generation > minters.find((o) => o.workerId === w.workerId).generation);
    assert.ok(reclaimed.length >= 1, JSON.stringify(after));
    for (const m of reclaimed) assert.equal(m.nodeKey, `minter:${m.workerId}`);
  } finally {
    await svc.dispose();
  }
});

test('a legacy grant\'s worker ID, once free, is fenced at its expiry + MAX_SKEW_MS', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-upgrade-'));
  // Granted long enough ago that the legacy leases ended (expiry + skew + grace).
  const v0 = await openStoreV0(dir, { shiftToMs: Date.now() - 60_000 - SKEW - GRACE - 1_000 });
  const svc = await start({ persist: dir, vars: VARS });
  try {
    const slots = Object.fromEntries(v0.leases.map((l) => [l.worker_id, l]));
    const wanted = new Set(['legacy-a', 'legacy-b', 'legacy-c'].map((k) => v0.leases.find((l) => l.node_key === k).worker_id));
    const got = new Map();
    for (let n = 0; n < 8 && got.size < wanted.size; n++) {
      const l = await (await svc.admin('/v1/workers/lease', post({ nodeKey: `new-${n}`, nodeTime: Date.now() }))).json();
      if (wanted.has(l.workerId)) got.set(l.workerId, l);
    }
    assert.equal(got.size, wanted.size, 'every legacy worker ID is reused');
    for (const [id, l] of got) {
      const fence = Number(slots[id].expires_at) + SKEW;
      assert.ok(l.issueAfterMs >= fence, `worker ${id}: issues after ${l.issueAfterMs}, fence ${fence}`);
    }
  } finally {
    await svc.dispose();
  }
});
