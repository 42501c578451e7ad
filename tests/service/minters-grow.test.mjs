// Raising SNOWFLAKE_MINTERS over worker IDs that nodes hold (0.1.0 ran 16
// minters, this release 36: IDs 16..35 were the first the registry gave
// outside nodes). Small scale, one store, two deploys: under 1 minter a node
// leases worker ID 1 and renews it; after the deploy with 2 minters its next
// renewal is refused (409 `lease_not_held`), its lease again (naming its
// grant) gets an ID above the range, and minter 1 holds worker ID 1 within
// the grant's TTL + grace, minting only after the node's grant ended.
// Without the refusal the node renews for ever and minter 1 never starts.
// The deploy also turns rights to mint on (SNOWFLAKE_RIGHTS, off in the
// first to model 0.1.0): a second node, on worker ID 2 — minter 0's rights
// holder's after it — is refused and moves above the 4 reserved IDs too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, ADMIN } from '../support/service.mjs';

const TTL = 3000;
const GRACE = 1500;
const SKEW = 500;
const VARS = { LEASE_TTL_MS: String(TTL), LEASE_GRACE_MS: String(GRACE), MAX_SKEW_MS: String(SKEW), TEST_COLO_HEADER: '1' };
// Two minters over the regions: enam hosts 0, weur 1 (MinterPools::over_regions).
const WEUR = { 'edgeleaf-test-colo': 'LHR' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The time and worker ID of a Leaf-layout ID (epoch 2010-11-04, as Twitter's). */
function parts(id) {
  const n = BigInt(id);
  return { ms: Number(n >> 22n) + 1288834974657, workerId: Number((n >> 12n) & 0x3ffn) };
}

async function post(svc, path, body) {
  const res = await svc.admin(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: JSON.parse(await res.text()) };
}

test('a node on a worker ID the minters grew over is refused its renewal, moves above the range, and the minter gets the ID', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-minters-grow-'));
  try {
    // 0.1.0's arrangement, scaled down: 1 minter (and no rights to mint,
    // whose holders' worker IDs the registry would reserve too), the node
    // gets worker ID 1.
    let svc = await start({ persist: dir, vars: { ...VARS, SNOWFLAKE_MINTERS: '1', SNOWFLAKE_RIGHTS: '0' } });
    let node;
    let nodeB;
    try {
      const leased = await post(svc, '/v1/workers/lease', { nodeKey: 'node-a', nodeTime: Date.now() });
      assert.equal(leased.status, 200, JSON.stringify(leased.body));
      node = leased.body;
      assert.equal(node.workerId, 1);
      const renewed = await post(svc, `/v1/workers/1/renew`, { generation: node.generation, secret: node.secret, nodeTime: Date.now(), lastTimestamp: Date.now() });
      assert.equal(renewed.status, 200, JSON.stringify(renewed.body));
      node = { ...node, ...renewed.body };
      // A second node gets worker ID 2: after the deploy, the ID of minter
      // 0's rights holder (the registry reserves 2 × 2 IDs with rights on).
      const b = await post(svc, '/v1/workers/lease', { nodeKey: 'node-b', nodeTime: Date.now() });
      assert.equal(b.body.workerId, 2, JSON.stringify(b.body));
      nodeB = b.body;
    } finally {
      await svc.dispose();
    }
    // The deploy that raises the count.
    svc = await start({ persist: dir, vars: { ...VARS, SNOWFLAKE_MINTERS: '2' } });
    try {
      const refused = await post(svc, `/v1/workers/1/renew`, { generation: node.generation, secret: node.secret, nodeTime: Date.now(), lastTimestamp: Date.now() });
      assert.equal(refused.status, 409, JSON.stringify(refused.body));
      assert.equal(refused.body.error.code, 'lease_not_held');
      // The node stops minting and leases again, naming its grant.
      const previous = { workerId: 1, generation: node.generation, secret: node.secret };
      const moved = await post(svc, '/v1/workers/lease', { nodeKey: 'node-a', nodeTime: Date.now(), previous });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      assert.ok(moved.body.workerId >= 4, `moved to worker ID ${moved.body.workerId}, above the minters' and their rights holders'`);
      // So does the node on a rights holder's ID (the same rule: the
      // reserved range grew over it).
      const refusedB = await post(svc, `/v1/workers/2/renew`, { generation: nodeB.generation, secret: nodeB.secret, nodeTime: Date.now(), lastTimestamp: Date.now() });
      assert.equal(refusedB.status, 409, JSON.stringify(refusedB.body));
      const movedB = await post(svc, '/v1/workers/lease', { nodeKey: 'node-b', nodeTime: Date.now(), previous: { workerId: 2, generation: nodeB.generation, secret: nodeB.secret } });
      assert.ok(movedB.body.workerId >= 4, `node-b moved to worker ID ${movedB.body.workerId}`);
      // Minter 1 (weur's) holds worker ID 1 once the grant's TTL + grace
      // passed; meanwhile enam's minter serves the isolate, which comes back
      // to its region's within RETURN_HOME_MS (10 s).
      const deadline = node.expiresAtMs + GRACE + 10_000 + 10_000;
      const started = Date.now();
      let mine = [];
      while (mine.length === 0) {
        assert.ok(Date.now() < deadline, `minter 1 never minted under worker ID 1 (${Date.now() - started} ms after the deploy)`);
        const res = await svc.fetch('/v1/snowflake?count=100', { headers: WEUR });
        const text = await res.text();
        if (res.status === 200) mine = JSON.parse(text).ids.map(parts).filter((p) => p.workerId === 1);
        else assert.equal(res.status, 503, text);
        if (mine.length === 0) await sleep(200);
      }
      for (const p of mine) assert.ok(p.ms >= node.expiresAtMs, `an ID at ${p.ms}, within the node's grant (to ${node.expiresAtMs})`);
      const { workers } = await (await svc.admin('/v1/workers')).json();
      assert.equal(workers.find((w) => w.workerId === 1).nodeKey, 'minter:1');
      console.log(`minter 1 minting under worker ID 1 ${Date.now() - started} ms after the deploy (the node's grant ran to ${node.expiresAtMs - started} ms after it); the node moved to worker ID ${moved.body.workerId}`);
    } finally {
      await svc.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
