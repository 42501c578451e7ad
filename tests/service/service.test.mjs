// The service (worker/) in real workerd through Miniflare: every route, bad
// input, uniqueness under concurrent clients, restarts. Durable Objects are
// real (SQLite-backed), never mocked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, ADMIN, wranglerVars } from '../support/service.mjs';

let svc;
const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-svc-'));
before(async () => { svc = await start({ persist }); });
after(async () => { await svc?.dispose(); });

const body = (value) => ({ method: 'POST', body: JSON.stringify(value), headers: { 'content-type': 'application/json' } });
/** A new API key's token with `scopes`: a credential of its own (request IDs are a key's). */
const apiKey = async (name, scopes = ['ids']) =>
  (await (await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name, scopes }) })).json()).token;
const put = (value) => ({ method: 'PUT', body: JSON.stringify(value) });

async function expectError(res, status, code) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  const parsed = JSON.parse(text);
  assert.equal(parsed.error.code, code, text);
  assert.ok(parsed.error.message.length > 5);
  return res;
}

test('admin: create, read, list, update and delete tags', async () => {
  let res = await svc.admin('/v1/tags/admin-a', put({ step: 50, description: 'a' }));
  assert.equal(res.status, 200);
  assert.deepEqual(
    (({ bizTag, maxId, step, description, monotonic }) => ({ bizTag, maxId, step, description, monotonic }))(await res.json()),
    { bizTag: 'admin-a', maxId: '0', step: 50, description: 'a', monotonic: false },
  );
  await svc.admin('/v1/tags/admin-b', put({ maxId: '9007199254740993' }));
  const b = await (await svc.admin('/v1/tags/admin-b')).json();
  assert.equal(b.maxId, '9007199254740993', 'max_id above 2^53 kept exactly');
  assert.equal(b.step, 1000, 'DEFAULT_STEP');
  const list = await (await svc.admin('/v1/tags')).json();
  assert.deepEqual(list.tags.map((t) => t.bizTag).filter((t) => t.startsWith('admin-')), ['admin-a', 'admin-b']);
  // IDs above 2^53 come back exact.
  assert.equal(await (await svc.fetch('/api/segment/get/admin-b')).text(), '9007199254740994');
  // An update may raise max_id, never lower it.
  await expectError(await svc.admin('/v1/tags/admin-b', put({ maxId: '5' })), 400, 'out_of_range');
  res = await svc.admin('/v1/tags/admin-a', put({ step: 70 }));
  assert.equal((await res.json()).step, 70);
  // Delete, then re-create: the tag continues after every ID it handed out,
  // the rest of the isolate's segments included (past the old max_id).
  const before = await (await svc.fetch('/v1/segment/admin-a?count=5')).json();
  const oldMax = BigInt((await (await svc.admin('/v1/tags/admin-a')).json()).maxId);
  assert.ok(oldMax >= BigInt(before.ids[4]));
  assert.equal((await svc.admin('/v1/tags/admin-a', { method: 'DELETE' })).status, 200);
  await expectError(await svc.admin('/v1/tags/admin-a'), 404, 'not_found');
  await expectError(await svc.fetch('/api/segment/get/admin-a'), 404, 'not_found');
  await svc.admin('/v1/tags/admin-a', put({ step: 10 }));
  const again = await (await svc.fetch('/v1/segment/admin-a?count=5')).json();
  assert.ok(BigInt(again.ids[0]) > oldMax, `${again.ids[0]} after the old max_id ${oldMax}`);
});

test('ID routes: Leaf text, JSON batches with string IDs, decode, leases', async () => {
  await svc.admin('/v1/tags/routes', put({ step: 100 }));
  let res = await svc.fetch('/api/segment/get/routes');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/plain/);
  assert.equal(await res.text(), '1');
  const batch = await (await svc.fetch('/v1/segment/routes?count=1000')).json();
  assert.equal(batch.ids.length, 1000);
  assert.ok(batch.ids.every((id) => typeof id === 'string'));
  res = await svc.fetch('/api/snowflake/get/orders');
  const sf = await res.text();
  assert.match(sf, /^[0-9]{18,19}$/);
  const sfs = await (await svc.fetch('/v1/snowflake?count=1000')).json();
  assert.equal(new Set(sfs.ids).size, 1000);
  const parts = await (await svc.fetch(`/v1/snowflake/${sf}`)).json();
  assert.equal(parts.id, sf);
  assert.ok(Math.abs(parts.timestamp - Date.now()) < 60_000);
  assert.equal(new Date(parts.date).getTime(), parts.timestamp);
  // Request IDs are an API key's.
  const key = await apiKey('routes');
  const lease = await (await svc.fetch('/v1/segment/routes/lease', body({ step: 5000, requestId: 'lease-1' }), key)).json();
  assert.equal(BigInt(lease.end) - BigInt(lease.start) + 1n, 5000n);
  // A retry under the same request ID returns the same range: nothing burnt, nothing twice.
  const retry = await (await svc.fetch('/v1/segment/routes/lease', body({ step: 5000, requestId: 'lease-1' }), key)).json();
  assert.deepEqual(retry, lease);
  const small = await (await svc.fetch('/v1/segment/routes/lease', body({ step: 1 }))).json();
  assert.equal(small.step, 100, 'never below the tag step');
  assert.ok(BigInt(small.start) > BigInt(lease.end));
  const health = await (await svc.fetch('/v1/health', {}, null)).json();
  assert.equal(health.ok, true);
  const monitor = await (await svc.admin('/v1/monitor')).json();
  assert.ok(monitor.buffers.routes.buffer.initialized);
  assert.ok(monitor.counters.segmentIds >= 1001);
  // Snowflakes came from the minters' batches (wrangler.toml sets
  // SNOWFLAKE_MINTERS), none served older than the staleness bound.
  assert.equal(monitor.snowflake, null, 'the isolate leased no worker ID of its own');
  assert.ok(monitor.minted.served >= 1001, JSON.stringify(monitor.minted));
  assert.ok(monitor.minted.stalenessMs.max <= 1000, JSON.stringify(monitor.minted));
  assert.ok(monitor.counters.minterCalls >= 1);
});

test('bad input answers the documented 4xx with a JSON error', async () => {
  await svc.admin('/v1/tags/bad', put({}));
  const cases = [
    [svc.fetch('/api/segment/get/no-such-tag'), 404, 'not_found'],
    [svc.fetch('/api/segment/get/bad%20tag'), 400, 'invalid_key'],
    [svc.fetch(`/v1/segment/${'x'.repeat(129)}`), 400, 'invalid_key'],
    [svc.fetch('/v1/segment/bad?count=0'), 400, 'out_of_range'],
    [svc.fetch('/v1/segment/bad?count=1001'), 400, 'out_of_range'],
    [svc.fetch('/v1/segment/bad?count=x'), 400, 'out_of_range'],
    [svc.fetch('/v1/snowflake?count=-1'), 400, 'out_of_range'],
    [svc.fetch('/v1/snowflake/12ab'), 400, 'invalid_id'],
    [svc.fetch('/v1/snowflake/99999999999999999999'), 400, 'invalid_id'],
    [svc.fetch('/v1/segment/bad/lease', { method: 'POST', body: '{not json' }), 400, 'invalid_json'],
    [svc.fetch('/v1/segment/bad/lease', body({ step: 'big' })), 400, 'invalid_json'],
    [svc.fetch('/v1/segment/bad/lease', body({ unknown: 1 })), 400, 'invalid_json'],
    [svc.fetch('/v1/segment/bad/lease', { method: 'POST', body: 'x'.repeat(100_000) }), 413, 'body_too_large'],
    [svc.fetch('/v1/segment/bad/lease', body({ requestId: 'r' })), 400, 'request_id_needs_key'],
    [svc.admin('/v1/tags/bad', put({ step: 0 })), 400, 'out_of_range'],
    [svc.admin('/v1/tags/bad', put({ step: 1_000_001 })), 400, 'out_of_range'],
    [svc.admin('/v1/tags/bad', put({ maxId: 'ten' })), 400, 'out_of_range'],
    [svc.admin('/v1/tags/bad', put({ maxId: '9223372036854775808' })), 400, 'out_of_range'],
    [svc.admin('/v1/tags/bad', put({ stepp: 5 })), 400, 'invalid_json'],
    [svc.admin('/v1/tags/bad', put({ monotonic: true })), 409, 'monotonic_immutable'],
    [svc.fetch('/v1/segment/bad', {}, 'wrong-token'), 403, 'forbidden'],
    [svc.fetch('/v1/segment/bad', {}, null), 401, 'unauthorized'],
    [svc.fetch('/v1/tags'), 403, 'forbidden'],
    [svc.fetch('/v1/tags', {}, null), 401, 'unauthorized'],
    [svc.fetch('/v1/workers/lease', body({ nodeKey: 'n', nodeTime: Date.now() })), 403, 'forbidden'],
    [svc.fetch('/v1/nothing-here'), 404, 'not_found'],
    [svc.fetch('/index.htm'), 404, 'not_found'],
    [svc.fetch('/v1/segment/bad', { method: 'POST' }), 405, 'method_not_allowed'],
    [svc.admin('/v1/tags', { method: 'DELETE' }), 405, 'method_not_allowed'],
    // A method worker::Method does not name (it reads those as GET).
    [svc.admin('/v1/tags', { method: 'QUERY' }), 405, 'method_not_allowed'],
    [svc.fetch('/v1/snowflake', { method: 'QUERY' }), 405, 'method_not_allowed'],
    [svc.admin('/v1/workers/lease', body({ nodeKey: 'bad key', nodeTime: Date.now() })), 400, 'invalid_key'],
    [svc.admin('/v1/workers/lease', body({ nodeKey: 'n1' })), 400, 'invalid_json'],
    [svc.admin('/v1/workers/x/renew', body({ generation: 1 })), 400, 'out_of_range'],
  ];
  for (const [pending, status, code] of cases) await expectError(await pending, status, code);
  const res = await svc.fetch('/v1/segment/bad', { method: 'PUT' });
  assert.equal(res.headers.get('allow'), 'GET');
});

test('as worker/openapi.yaml reads them: a percent-encoded tag, a whole number written 10.0, lengths in characters', async () => {
  // encodeURIComponent writes the tag `enc:oded` as `enc%3Aoded`: the same tag.
  const res = await svc.admin(`/v1/tags/${encodeURIComponent('enc:oded')}`, { method: 'PUT', body: '{"step":10.0,"maxStep":1e1}' });
  assert.equal(res.status, 200, await res.clone().text());
  assert.deepEqual([(await res.json()).bizTag, (await (await svc.admin('/v1/tags/enc:oded')).json()).step], ['enc:oded', 10]);
  const [a] = (await (await svc.fetch('/v1/segment/enc%3Aoded')).json()).ids;
  const [b] = (await (await svc.fetch('/v1/segment/enc:oded')).json()).ids;
  assert.ok(BigInt(b) > BigInt(a), `${a} then ${b}: one tag`);
  await expectError(await svc.admin('/v1/tags/enc%2Foded'), 400, 'invalid_key');
  await expectError(await svc.admin('/v1/tags/enc', { method: 'PUT', body: '{"step":10.5}' }), 400, 'invalid_json');
  // 100 characters of two bytes each is a name of 100.
  const key = (name) => svc.admin('/v1/keys', body({ name, scopes: ['ids'] }));
  assert.equal((await key('é'.repeat(100))).status, 201);
  await expectError(await key('é'.repeat(101)), 400, 'invalid_key_spec');
});

test('16 concurrent clients, 200,000+ IDs across Leaf routes, JSON batches and leases: no duplicates', async () => {
  await svc.admin('/v1/tags/load', put({ step: 500 }));
  const key = await apiKey('load');
  const segment = new Set();
  const snowflake = new Set();
  let dup = 0;
  const add = (set, id) => { if (set.has(id)) dup++; set.add(id); };
  const client = async (c) => {
    let lastBatch = 0n;
    let lastLease = 0n;
    for (let i = 0; i < 40; i++) {
      switch ((c + i) % 4) {
        case 0: {
          add(segment, await (await svc.fetch('/api/segment/get/load')).text());
          add(snowflake, await (await svc.fetch('/api/snowflake/get/load')).text());
          break;
        }
        case 1: {
          const { ids } = await (await svc.fetch('/v1/segment/load?count=1000')).json();
          for (const id of ids) add(segment, id);
          const first = BigInt(ids[0]);
          assert.ok(first > lastBatch, `client ${c}: batches increase`);
          for (let k = 1; k < ids.length; k++) assert.ok(BigInt(ids[k]) > BigInt(ids[k - 1]));
          lastBatch = BigInt(ids.at(-1));
          break;
        }
        case 2: {
          const { ids } = await (await svc.fetch('/v1/snowflake?count=1000')).json();
          for (const id of ids) add(snowflake, id);
          break;
        }
        default: {
          const lease = await (await svc.fetch('/v1/segment/load/lease', body({ step: 2000, requestId: `c${c}-${i}` }), key)).json();
          const start = BigInt(lease.start);
          assert.ok(start > lastLease, `client ${c}: leases increase`);
          lastLease = BigInt(lease.end);
          for (let id = start; id <= lastLease; id++) add(segment, id.toString());
        }
      }
    }
  };
  const errorsBefore = (await (await svc.admin('/v1/monitor')).json()).counters.errors;
  await Promise.all(Array.from({ length: 16 }, (_, c) => client(c)));
  assert.equal(dup, 0);
  assert.ok(segment.size + snowflake.size >= 200_000, `${segment.size} + ${snowflake.size} IDs`);
  const monitor = await (await svc.admin('/v1/monitor')).json();
  assert.equal(monitor.counters.errors, errorsBefore, 'no request of the load answered an error');
});

test('a monotonic tag is served by its Durable Object: every ID above every earlier one', async () => {
  await svc.admin('/v1/tags/mono', put({ step: 20, monotonic: true }));
  const got = [];
  await Promise.all(Array.from({ length: 8 }, async () => {
    // Each client asks after its previous answer came: every ID it sees is
    // above every one it saw before (above every ID issued before, in fact).
    let last = 0n;
    const see = (id) => { assert.ok(id > last, `${id} after ${last}`); last = id; got.push(id); };
    for (let i = 0; i < 10; i++) {
      const { ids } = await (await svc.fetch('/v1/segment/mono?count=7')).json();
      ids.map(BigInt).forEach(see);
      see(BigInt(await (await svc.fetch('/api/segment/get/mono')).text()));
    }
  }));
  assert.equal(new Set(got).size, got.length);
  // Across clients the IDs are one run from 1 with no gaps: the object
  // serves them all itself, in order.
  const sorted = [...got].sort((a, b) => (a < b ? -1 : 1));
  assert.deepEqual(sorted, sorted.map((_, i) => BigInt(i + 1)));
  // Served by the object: this isolate holds no buffer for the tag.
  const { buffers } = await (await svc.admin('/v1/monitor')).json();
  assert.deepEqual(buffers.mono, { monotonic: true, buffer: null });
  await expectError(await svc.fetch('/v1/segment/mono/lease', body({})), 409, 'monotonic_tag');
});

test('registry: no shared worker IDs, fencing, clock checks, release', async () => {
  const lease = (nodeKey, extra = {}) => svc.admin('/v1/workers/lease', body({ nodeKey, nodeTime: Date.now(), ...extra }));
  const a = await (await lease('node-a')).json();
  const b = await (await lease('node-b')).json();
  assert.notEqual(a.workerId, b.workerId);
  assert.equal(a.layout.workerBits, 10);
  // node-a asks again without proof: its ID is live, so it gets another.
  const a2 = await (await lease('node-a')).json();
  assert.notEqual(a2.workerId, a.workerId);
  assert.match(a.secret, /^[0-9a-f]{32}$/, 'a grant carries its secret');
  assert.notEqual(a.secret, b.secret);
  // Without its secret, naming the live grant is refused, and changes nothing.
  await expectError(await lease('node-a', { previous: { workerId: a.workerId, generation: a.generation } }), 403, 'not_lease_holder');
  // With proof, while its grant is live, it gets another worker ID (the
  // proof may be a copy held by a second process), under a new secret; the
  // proved grant stays its holder's.
  const a3 = await (await lease('node-a', { previous: { workerId: a.workerId, generation: a.generation, secret: a.secret } })).json();
  assert.notEqual(a3.workerId, a.workerId);
  assert.notEqual(a3.secret, a.secret);
  // A generation that does not hold the ID is fenced off.
  await expectError(await svc.admin(`/v1/workers/${a.workerId}/renew`, body({ generation: a.generation + 1000, secret: a.secret, nodeTime: Date.now(), lastTimestamp: Date.now() })), 409, 'lease_not_held');
  // The right generation with another grant's secret, or none: refused.
  for (const secret of [a3.secret, undefined]) {
    await expectError(await svc.admin(`/v1/workers/${a.workerId}/renew`, body({ generation: a.generation, secret, nodeTime: Date.now(), lastTimestamp: Date.now() })), 403, 'not_lease_holder');
  }
  await new Promise((r) => setTimeout(r, 5));
  const renewed = await (await svc.admin(`/v1/workers/${a.workerId}/renew`, body({ generation: a.generation, secret: a.secret, nodeTime: Date.now(), lastTimestamp: Date.now() - 1 }))).json();
  assert.ok(renewed.expiresAtMs > a.expiresAtMs, 'a renewal extends the lease');
  assert.equal(renewed.generation, a.generation);
  assert.equal(renewed.secret, undefined, 'a renewal does not repeat the secret');
  // A node whose clock went back past its last report is refused.
  await expectError(await svc.admin(`/v1/workers/${a.workerId}/renew`, body({ generation: a.generation, secret: a.secret, nodeTime: Date.now() - 1500, lastTimestamp: 0 })), 409, 'clock_behind_last_report');
  // A node whose clock is off from the registry's is refused.
  await expectError(await lease('node-skewed', { nodeTime: Date.now() + 60_000 }), 409, 'clock_skew');
  const list = await (await svc.admin('/v1/workers')).json();
  const live = list.workers.filter((w) => w.status === 'live').map((w) => w.workerId);
  assert.equal(new Set(live).size, live.length);
  const shown = JSON.stringify(list);
  for (const secret of [a.secret, a3.secret, b.secret]) assert.ok(!shown.includes(secret), 'the list never shows a secret');
  await expectError(await svc.admin(`/v1/workers/${b.workerId}`, { method: 'DELETE', body: JSON.stringify({ generation: b.generation, lastTimestamp: Date.now() }) }), 403, 'not_lease_holder');
  assert.equal((await svc.admin(`/v1/workers/${b.workerId}`, { method: 'DELETE', body: JSON.stringify({ generation: b.generation, secret: b.secret, lastTimestamp: Date.now() }) })).status, 200);
  await expectError(await svc.admin(`/v1/workers/${b.workerId}`, { method: 'DELETE', body: JSON.stringify({ generation: b.generation, secret: b.secret }) }), 409, 'lease_not_held');
});

test('a restart on the same state continues every sequence', async () => {
  await svc.admin('/v1/tags/restart', put({ step: 10 }));
  const before = (await (await svc.fetch('/v1/segment/restart?count=15')).json()).ids.map(BigInt);
  const sf = BigInt(await (await svc.fetch('/api/snowflake/get/x')).text());
  const sfWorker = (await (await svc.fetch(`/v1/snowflake/${sf}`)).json()).workerId;
  const slot = async () => (await (await svc.admin('/v1/workers')).json()).workers.find((w) => w.workerId === sfWorker);
  const leaseBefore = await slot();
  assert.equal(leaseBefore.nodeKey, `minter:${sfWorker}`, 'snowflakes come from a minter, under its reserved worker ID');
  // Regional allocators (the default): this isolate's colo is Miniflare's
  // own (DFW → wnam); its allocator holds a block beyond what it handed on.
  const wnam = async () => {
    await new Promise((r) => setTimeout(r, 300)); // the prefetches done
    const all = (await (await svc.admin('/v1/tags/restart/allocators')).json()).allocators;
    return all.find((a) => a.region === 'wnam');
  };
  const held = await wnam();
  assert.ok(held && !held.leasing && held.runway > 0, `wnam's allocator holds a block: ${JSON.stringify(held)}`);
  const maxBefore = BigInt((await (await svc.admin('/v1/tags/restart')).json()).maxId);
  await svc.dispose();
  svc = await start({ persist });
  const afterIds = (await (await svc.fetch('/v1/segment/restart?count=15')).json()).ids.map(BigInt);
  assert.ok(afterIds[0] > before.at(-1), `continues: ${afterIds[0]} after ${before.at(-1)}`);
  // The isolate's cached ranges are lost with it; the allocator continues
  // its block after the highest ID it handed on, past at most what its last
  // write reserved (`RESERVE_RANGES`, 16 ranges of the last range's length —
  // here the tag's step, 10: its one write was at its first range — and never
  // past the blocks held: the gap a restart leaves), never reissuing one.
  const handedOn = BigInt(held.servedHigh);
  assert.ok(afterIds[0] > handedOn && afterIds[0] <= handedOn + 16n * 10n + 1n,
    `the allocator continues its block after ${handedOn}, past at most its reservation: ${afterIds[0]}`);
  assert.ok(afterIds[0] <= maxBefore, `within the block the root granted before the restart (max_id ${maxBefore})`);
  // The registry kept the minter's lease across the restart (it is live
  // until it lapses, and the same minter proves it and keeps it).
  const leaseAfter = await slot();
  assert.equal(leaseAfter.status, 'live');
  assert.equal(leaseAfter.nodeKey, leaseBefore.nodeKey);
  assert.ok(leaseAfter.generation >= leaseBefore.generation);
  // Every snowflake after the restart is later than the one before (any
  // minter: the restarted ones resume after their saved reservation).
  let checked = 0;
  for (const deadline = Date.now() + 10_000; checked < 500 && Date.now() < deadline;) {
    const res = await svc.fetch('/v1/snowflake?count=100');
    if (res.status === 503) { await res.arrayBuffer(); continue; } // a restarted minter waiting out its reservation
    for (const id of (await res.json()).ids) { assert.ok(BigInt(id) > sf); checked++; }
  }
  assert.equal(checked, 500, 'snowflakes drawn after the restart');
  const tags = (await (await svc.admin('/v1/tags')).json()).tags.map((t) => t.bizTag);
  assert.ok(tags.includes('restart'));

  // Root-only (REGIONAL_ALLOCATORS = "0"): a restart skips the unused rest
  // of the cached segments, never reissues them (Leaf's behaviour).
  await svc.dispose();
  svc = await start({ persist, vars: { REGIONAL_ALLOCATORS: '0' } });
  await svc.admin('/v1/tags/rootonly', put({ step: 10 }));
  const rootBefore = (await (await svc.fetch('/v1/segment/rootonly?count=15')).json()).ids.map(BigInt);
  await new Promise((r) => setTimeout(r, 300)); // the prefetch done
  const rootMax = BigInt((await (await svc.admin('/v1/tags/rootonly')).json()).maxId);
  assert.ok(rootMax > rootBefore.at(-1), 'the isolate holds IDs beyond those drawn');
  await svc.dispose();
  svc = await start({ persist, vars: { REGIONAL_ALLOCATORS: '0' } });
  const rootAfter = (await (await svc.fetch('/v1/segment/rootonly?count=15')).json()).ids.map(BigInt);
  assert.ok(rootAfter[0] > rootMax, `root-only: the unused rest of cached segments is skipped (${rootAfter[0]} after max_id ${rootMax})`);
  const noAllocator = (await (await svc.admin('/v1/tags/rootonly/allocators')).json()).allocators;
  assert.ok(noAllocator.every((a) => a.blocksLeased === 0), 'no allocator leased a block for it');
  await svc.dispose();
  svc = await start({ persist });
});

test('worker/openapi.yaml documents exactly the routes of the Worker', async () => {
  const { readFileSync } = await import('node:fs');
  const { ROOT } = await import('../support/service.mjs');
  const yaml = readFileSync(join(ROOT, 'worker/openapi.yaml'), 'utf8');
  const paths = yaml.slice(yaml.indexOf('\npaths:'));
  const found = [];
  let current;
  for (const line of paths.split('\n')) {
    const p = /^ {2}(\/\S*):$/.exec(line);
    if (p) current = p[1];
    const m = /^ {4}(get|put|post|delete):$/.exec(line);
    if (m && current) found.push(`${m[1].toUpperCase()} ${current}`);
  }
  // The Worker's route table, as /v1/health lists it.
  const { routes } = await (await svc.fetch('/v1/health', {}, null)).json();
  assert.deepEqual([...found].sort(), [...routes].sort());
  for (const route of routes) {
    const [method, path] = route.split(' ');
    const url = path.replace('{tag}', 'openapi-check').replace('{id}', '1');
    const res = await svc.admin(url, { method, ...(method === 'GET' ? {} : { body: '{}' }) });
    const text = await res.text();
    assert.ok(!(res.status === 404 && text.includes('route:')) && res.status !== 405, `${route}: ${res.status} ${text.slice(0, 120)}`);
  }
});

test('registry in workerd: a lapsed lease is refused on renew and recycled only after TTL + grace', async () => {
  // A grace long enough that the steps between the lease's end and the
  // "within the grace period" check fit in it on a loaded 2-core machine.
  const GRACE_MS = 4000;
  const short = await start({ vars: { LEASE_TTL_MS: '1000', LEASE_GRACE_MS: String(GRACE_MS), MAX_SKEW_MS: '500', LAYOUT: 'jsSafe', MAX_WORKERS_PER_KEY: '128' } });
  try {
    const lease = async (nodeKey) => short.admin('/v1/workers/lease', body({ nodeKey, nodeTime: Date.now() }));
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    // Worker IDs 0..M are the minters' (SNOWFLAKE_MINTERS in wrangler.toml):
    // others fill the rest of the jsSafe layout's 128; node-0 holds M.
    const M = Number(wranglerVars().SNOWFLAKE_MINTERS);
    const first = await (await lease('node-0')).json();
    assert.equal(first.workerId, M);
    for (let n = 1; n < 128 - M; n++) assert.equal((await lease(`node-${n}`)).status, 200);
    await expectError(await lease('late'), 503, 'no_free_worker_id');
    await expectError(await lease('minter:0'), 400, 'reserved_node_key');
    // The snowflake routes do not care: their IDs come from the minters.
    const { ids } = await (await short.fetch('/v1/snowflake?count=100')).json();
    assert.equal(new Set(ids).size, 100);
    for (const id of [ids[0], ids.at(-1)]) {
      const { workerId } = await (await short.fetch(`/v1/snowflake/${id}`)).json();
      assert.ok(workerId < M, `minted under reserved worker ID ${workerId}`);
    }
    await sleep(first.expiresAtMs - Date.now() + 50);
    // Lapsed: renewal refused, the node must stop.
    await expectError(await short.admin(`/v1/workers/${M}/renew`, body({ generation: first.generation, secret: first.secret, nodeTime: Date.now() })), 409, 'lease_expired');
    // Within the grace period nobody gets it.
    await expectError(await lease('late'), 503, 'no_free_worker_id');
    await sleep(first.expiresAtMs + GRACE_MS - Date.now() + 50);
    const recycled = await (await lease('late')).json();
    assert.equal(recycled.workerId, M, 'the lapsed worker ID is the one recycled');
    assert.ok(recycled.generation > first.generation);
    assert.ok(recycled.issueAfterMs >= first.expiresAtMs, 'the new holder issues after the old lease ended');
  } finally {
    await short.dispose();
  }
});

test('without minters (SNOWFLAKE_MINTERS=0) each isolate leases its own worker ID, and a full pool stops the snowflake route', async () => {
  const solo = await start({ vars: { SNOWFLAKE_MINTERS: '0', LAYOUT: 'jsSafe', MAX_WORKERS_PER_KEY: '128' } });
  try {
    for (let n = 0; n < 128; n++) {
      assert.equal((await solo.admin('/v1/workers/lease', body({ nodeKey: `node-${n}`, nodeTime: Date.now() }))).status, 200);
    }
    await expectError(await solo.fetch('/v1/snowflake?count=1'), 503, 'no_free_worker_id');
    const monitor = await (await solo.admin('/v1/monitor')).json();
    assert.equal(monitor.minted, null);
  } finally {
    await solo.dispose();
  }
});

test('SNOWFLAKE_MINTERS and SNOWFLAKE_STALENESS_MS are checked', async () => {
  for (const vars of [{ SNOWFLAKE_MINTERS: '65', LAYOUT: 'jsSafe' }, { SNOWFLAKE_MINTERS: 'x' }, { SNOWFLAKE_STALENESS_MS: '5' }]) {
    const bad = await start({ vars });
    try {
      await expectError(await bad.fetch('/v1/snowflake'), 503, 'config_invalid');
    } finally {
      await bad.dispose();
    }
  }
});

test('no answer may be cached: Cache-Control: no-store on IDs, ranges, leases and errors', async () => {
  await svc.admin('/v1/tags/nostore', put({ step: 10 }));
  const answers = [
    await svc.fetch('/api/segment/get/nostore'),
    await svc.fetch('/v1/segment/nostore?count=3'),
    await svc.fetch('/api/snowflake/get/x'),
    await svc.fetch('/v1/snowflake?count=3'),
    await svc.fetch('/v1/segment/nostore/lease', body({ step: 10 })),
    await svc.admin('/v1/workers/lease', body({ nodeKey: 'nostore', nodeTime: Date.now() })),
    await svc.fetch('/v1/segment/no-such-tag'),
  ];
  for (const res of answers) {
    assert.equal(res.headers.get('cache-control'), 'no-store', `${res.url} ${res.status}`);
    await res.arrayBuffer();
  }
});

test('CORS: only origins in CORS_ORIGINS get preflights and Access-Control-Allow-Origin', async () => {
  const app = 'https://app.example';
  const preflight = (s, origin) => s.fetch('/v1/segment/cors', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } }, null);
  // None by default: a page on another origin cannot call the service.
  await expectError(await preflight(svc, app), 403, 'forbidden');
  const plain = await svc.fetch('/v1/ping', { headers: { origin: app } });
  assert.equal(plain.headers.get('access-control-allow-origin'), null);
  await plain.arrayBuffer();
  const cors = await start({ vars: { CORS_ORIGINS: `${app}, https://other.example:8443` } });
  try {
    await cors.admin('/v1/tags/cors', put({}));
    const ok = await preflight(cors, app);
    assert.equal(ok.status, 204);
    assert.equal(ok.headers.get('access-control-allow-origin'), app);
    assert.equal(ok.headers.get('access-control-allow-methods'), 'GET');
    assert.match(ok.headers.get('access-control-allow-headers'), /Authorization/);
    const lease = await cors.fetch('/v1/segment/cors/lease', { method: 'OPTIONS', headers: { origin: 'https://other.example:8443' } }, null);
    assert.equal(lease.headers.get('access-control-allow-methods'), 'POST');
    await expectError(await preflight(cors, 'https://evil.example'), 403, 'forbidden');
    await expectError(await cors.fetch('/v1/nowhere', { method: 'OPTIONS', headers: { origin: app } }, null), 404, 'not_found');
    // The call itself, and its errors, carry the header for allowed origins only.
    const ids = await cors.fetch('/v1/segment/cors?count=2', { headers: { origin: app } });
    assert.equal(ids.status, 200);
    assert.equal(ids.headers.get('access-control-allow-origin'), app);
    assert.match(ids.headers.get('vary'), /Origin/);
    await ids.arrayBuffer();
    const denied = await cors.fetch('/v1/segment/cors', { headers: { origin: app } }, 'wrong');
    assert.equal(denied.status, 403);
    assert.equal(denied.headers.get('access-control-allow-origin'), app);
    await denied.arrayBuffer();
    const evil = await cors.fetch('/v1/segment/cors', { headers: { origin: 'https://evil.example' } });
    assert.equal(evil.headers.get('access-control-allow-origin'), null);
    await evil.arrayBuffer();
  } finally {
    await cors.dispose();
  }
  const bad = await start({ vars: { CORS_ORIGINS: 'app.example' } });
  try {
    await expectError(await bad.fetch('/v1/segment/x'), 503, 'config_invalid');
  } finally {
    await bad.dispose();
  }
});

test('a tag whose max_id is near 2^63 - 1 answers tag_exhausted, never a wrapped ID', async () => {
  await svc.admin('/v1/tags/edge', put({ step: 10, maxId: '9223372036854775797' }));
  const { ids } = await (await svc.fetch('/v1/segment/edge?count=10')).json();
  assert.deepEqual(ids.at(-1), '9223372036854775807');
  await expectError(await svc.fetch('/v1/segment/edge?count=1'), 409, 'tag_exhausted');
  await expectError(await svc.fetch('/api/segment/get/edge'), 409, 'tag_exhausted');
});

test('a step changed by the admin while buffers are loaded: IDs stay unique and increasing, the next loads use it', async () => {
  await svc.admin('/v1/tags/restep', put({ step: 10 }));
  const seen = [];
  const take = async (n) => seen.push(...(await (await svc.fetch(`/v1/segment/restep?count=${n}`)).json()).ids.map(BigInt));
  await take(15);
  assert.equal((await (await svc.admin('/v1/tags/restep', put({ step: 500 }))).json()).step, 500);
  for (let i = 0; i < 5; i++) await take(300);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `${seen[i]} after ${seen[i - 1]}`);
  const { buffers } = await (await svc.admin('/v1/monitor')).json();
  assert.ok(buffers.restep.buffer.step >= 500, `step ${buffers.restep.buffer.step}`);
});

test('maxStep pins a tag\'s segments: the dynamic step never grants more', async () => {
  const view = await (await svc.admin('/v1/tags/pinned', put({ step: 10, maxStep: 10 }))).json();
  assert.equal(view.maxStep, 10);
  assert.equal((await (await svc.admin('/v1/tags/unpinned', put({ step: 10 }))).json()).maxStep, 1_000_000, 'unset: Leaf\'s cap');
  // A lease asking for more gets the pinned step.
  const lease = await (await svc.fetch('/v1/segment/pinned/lease', body({ step: 5000 }))).json();
  assert.equal([lease.step, BigInt(lease.end) - BigInt(lease.start) + 1n].join(), '10,10');
  // The isolate's buffer doubles its step as segments go fast, and the store
  // holds it at 10: 500 IDs drawn leave max_id at most 3 segments beyond.
  const ids = [];
  for (let i = 0; i < 10; i++) ids.push(...(await (await svc.fetch('/v1/segment/pinned?count=50')).json()).ids);
  assert.equal(new Set(ids).size, 500);
  const { maxId } = await (await svc.admin('/v1/tags/pinned')).json();
  assert.ok(BigInt(maxId) <= 10n + 500n + 30n, `max_id ${maxId}: segments grew past the pinned step`);
  // Kept when the tag is updated without it; refused below the step.
  assert.equal((await (await svc.admin('/v1/tags/pinned', put({ description: 'x' }))).json()).maxStep, 10);
  await expectError(await svc.admin('/v1/tags/pinned', put({ maxStep: 5 })), 400, 'out_of_range');
  await expectError(await svc.admin('/v1/tags/pinned', put({ maxStep: 1_000_001 })), 400, 'out_of_range');
  assert.equal((await (await svc.admin('/v1/tags/pinned', put({ step: 20, maxStep: 40 }))).json()).maxStep, 40);
});

test('a lease requestId is one request: another body under it is a conflict; over 128 characters is refused', async () => {
  await svc.admin('/v1/tags/reqid', put({ step: 100 }));
  const [a, b] = [await apiKey('reqid a'), await apiKey('reqid b')];
  const lease = (value, token) => svc.fetch('/v1/segment/reqid/lease', body(value), token);
  const first = await (await lease({ step: 200, requestId: 'r-1' }, a)).json();
  assert.deepEqual(await (await lease({ step: 200, requestId: 'r-1' }, a)).json(), first);
  await expectError(await lease({ step: 5000, requestId: 'r-1' }, a), 409, 'request_id_reused');
  await expectError(await lease({ requestId: 'x'.repeat(129) }, a), 400, 'invalid_request_id');
  await expectError(await lease({ requestId: '' }, a), 400, 'invalid_request_id');
  assert.equal((await lease({ requestId: 'x'.repeat(128) }, a)).status, 200);
  // A request ID is its caller's own: another key naming it gets a segment
  // of its own, never the first caller's.
  const other = await (await lease({ step: 200, requestId: 'r-1' }, b)).json();
  assert.ok(BigInt(other.start) > BigInt(first.end), `${JSON.stringify(other)} overlaps ${JSON.stringify(first)}`);
  assert.deepEqual(await (await lease({ step: 200, requestId: 'r-1' }, b)).json(), other);
  // A credential others share (the client token, the admin token) may send none.
  await expectError(await lease({ step: 200, requestId: 'r-1' }), 400, 'request_id_needs_key');
  await expectError(await svc.admin('/v1/segment/reqid/lease', body({ step: 200, requestId: 'r-1' })), 400, 'request_id_needs_key');
});

test('under LAYOUT=jsSafe every snowflake ID over HTTP is exact as a JS number', async () => {
  const js = await start({ vars: { LAYOUT: 'jsSafe' } });
  try {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(...(await (await js.fetch('/v1/snowflake?count=1000')).json()).ids);
    ids.push(await (await js.fetch('/api/snowflake/get/x')).text());
    assert.equal(new Set(ids).size, 5001);
    assert.ok(ids.every((id) => BigInt(id) < 2n ** 53n && Number.isSafeInteger(Number(id))), ids[0]);
    assert.equal((await (await js.fetch('/v1/health', {}, null)).json()).layout.workerBits, 7);
  } finally {
    await js.dispose();
  }
});
