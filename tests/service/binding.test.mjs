// The service binding (issue 35): a user's Worker (tests/service/binding/,
// bundled by wrangler as `wrangler deploy` would; tests/support/binding.mjs) and edgeleaf in one workerd,
// the user's bound to edgeleaf's RPC entrypoint `Ids`. Checked: the user's
// Worker draws segment IDs over RPC under load (concurrent calls, and
// `new EdgeleafClient({ binding })` leasing and handing back segments) while
// the public HTTP API draws from the same tags: no ID twice; snowflakes the
// same, minted (RPC, HTTP) and under a worker ID the client leased over RPC;
// refusals and errors arrive typed, as the HTTP routes answer them; the calls
// are counted in the same metrics; nothing is allowed by default
// (`RPC_TAGS` unset); a Worker without the binding cannot call (no public
// route reaches the RPC operations, and the default entrypoint has none).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { ADMIN, CLIENT } from '../support/service.mjs';
import { bundleUserWorker, startBound } from '../support/binding.mjs';

const LOAD = 'rpc-load';
const OPAQUE = 'rpc-opaque';
// What the tests' edgeleaf allows its binding: the rpc-* tags, and revealing
// the opaque one. Unset (the default), it allows nothing.
const ALLOWED = { RPC_TAGS: 'rpc-*', RPC_REVEAL: OPAQUE };

const rpc = (op, ...args) => `/rpc?op=${op}&args=${encodeURIComponent(JSON.stringify(args))}`;

let out;
let s;

before(async () => {
  out = bundleUserWorker();
  s = await startBound(out, { vars: ALLOWED });
  for (const [tag, body] of [[LOAD, { step: 200 }], ['rpc-other', { step: 10 }], ['outside', {}], [OPAQUE, { opaque: { bits: 40 } }]]) {
    const r = await s.http(`/v1/tags/${tag}`, { method: 'PUT', body: JSON.stringify(body) }, ADMIN);
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
});

after(async () => {
  await s?.mf.dispose();
  if (out) rmSync(out, { recursive: true, force: true });
});

test('over RPC and over HTTP at once, from the same tag: no ID twice', async () => {
  const seen = new Map();
  const add = (ids, how) => {
    for (const id of ids) {
      assert.ok(!seen.has(id), `${id} from ${how} was already issued by ${seen.get(id)}`);
      seen.set(id, how);
    }
  };
  for (let round = 0; round < 6; round++) {
    const work = [];
    for (let i = 0; i < 4; i++) {
      work.push(s.call(`/rpc-many?tag=${LOAD}&count=37&calls=10`).then((r) => { assert.equal(r.status, 200, JSON.stringify(r.body)); add(r.body.ids, 'rpc'); }));
      work.push(s.http(`/v1/segment/${LOAD}?count=41`).then((r) => { assert.equal(r.status, 200, JSON.stringify(r.body)); add(r.body.ids, 'http'); }));
      work.push(s.call(`/client?tag=${LOAD}&n=150`).then((r) => { assert.equal(r.status, 200, JSON.stringify(r.body)); add(r.body.ids, 'client over rpc'); }));
    }
    await Promise.all(work);
  }
  assert.equal(seen.size, 6 * 4 * (370 + 41 + 150));
  for (const id of seen.keys()) assert.match(id, /^[1-9][0-9]*$/);

  const flakes = new Map();
  const addFlakes = (ids, how) => {
    for (const id of ids) {
      assert.ok(!flakes.has(id), `snowflake ${id} from ${how} was already issued by ${flakes.get(id)}`);
      flakes.set(id, how);
    }
  };
  const work = [];
  for (let i = 0; i < 8; i++) {
    work.push(s.call(rpc('snowflake', 500)).then((r) => addFlakes(r.body.ids, 'rpc')));
    work.push(s.http('/v1/snowflake?count=500').then((r) => addFlakes(r.body.ids, 'http')));
  }
  work.push(s.call('/client-snowflake?n=2000').then((r) => {
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(r.body.workerId >= 16, `a worker ID outside the minters' (${r.body.workerId})`);
    addFlakes(r.body.ids, 'client over rpc');
  }));
  await Promise.all(work);
  assert.equal(flakes.size, 16 * 500 + 2000);
});

test('answers and errors arrive as the HTTP routes give them, typed', async () => {
  // The same values: a decode, a reveal.
  const id = (await s.call(rpc('snowflake', 1))).body.ids[0];
  assert.deepEqual((await s.call(rpc('decode', id))).body, (await s.http(`/v1/snowflake/${id}`)).body);
  const opaqueId = (await s.call(rpc('segment', OPAQUE, 1))).body.ids[0];
  const revealed = (await s.call(rpc('reveal', OPAQUE, opaqueId))).body;
  const byAdmin = (await s.http(`/v1/tags/${OPAQUE}/reveal`, { method: 'POST', body: JSON.stringify({ id: opaqueId }) }, ADMIN)).body;
  assert.deepEqual(revealed, byAdmin);
  assert.equal(revealed.belongs, true);

  // The same errors: { error: { code, message } }, with the route's status.
  const same = async (op, args, path, init) => {
    const r = (await s.call(rpc(op, ...args))).body;
    const h = await s.http(path, init);
    assert.deepEqual(r.error, h.body.error, `${op}(${JSON.stringify(args)}) as ${path}`);
    assert.equal(r.status, h.status);
    return r;
  };
  await same('segment', [LOAD, 0], `/v1/segment/${LOAD}?count=0`);
  await same('segment', [LOAD, 1001], `/v1/segment/${LOAD}?count=1001`);
  await same('segment', ['rpc-missing', 1], '/v1/segment/rpc-missing');
  await same('decode', ['12x'], '/v1/snowflake/12x');
  await same('reveal', [OPAQUE, 'nope'], `/v1/tags/${OPAQUE}/reveal`, { method: 'POST', body: JSON.stringify({ id: 'nope' }), headers: { authorization: `Bearer ${ADMIN}` } });
  const unknownField = (await s.call(rpc('segmentLease', LOAD, { step: 5, bogus: 1 }))).body;
  assert.equal(unknownField.error.code, 'invalid_json');
  // Arguments past a route's body bound: refused before they are read.
  const large = (await s.call(rpc('segment', `${LOAD}${' '.repeat(5000)}`, 1))).body;
  assert.equal(large.error?.code, 'body_too_large', JSON.stringify(large).slice(0, 200));

  // The operator's limits: a tag outside RPC_TAGS, a reveal outside RPC_REVEAL.
  const outside = (await s.call(rpc('segment', 'outside', 1))).body;
  assert.equal(outside.error.code, 'forbidden');
  assert.equal(outside.status, 403);
  assert.equal((await s.call(rpc('segmentLease', 'outside'))).body.error.code, 'forbidden');
  assert.equal((await s.call(rpc('reveal', LOAD, '1'))).body.error.code, 'forbidden');
  // Through the package: a coded Error, as over HTTP.
  const viaClient = (await s.call('/client-error?tag=outside')).body;
  assert.equal(viaClient.code, 'forbidden', JSON.stringify(viaClient));

  // A lease, as the shared credential every bound Worker of the account
  // holds: no request ID (another bound Worker sending the same one would be
  // answered the same range), so none of its tails comes back either.
  const lease = (await s.call(rpc('segmentLease', 'rpc-other', { step: 10 }))).body;
  assert.equal(BigInt(lease.end) - BigInt(lease.start), 9n, JSON.stringify(lease));
  const keyed = (await s.call(rpc('segmentLease', 'rpc-other', { step: 10, requestId: 'rpc-lease-1' }))).body;
  assert.equal(keyed.error?.code, 'request_id_needs_key', JSON.stringify(keyed));
  assert.equal(keyed.status, 400);
  const back = (await s.call(rpc('segmentReturn', 'rpc-other', { requestId: 'rpc-lease-1', start: String(BigInt(lease.start) + 4n), end: lease.end }))).body;
  assert.ok(back.error?.code === 'request_id_needs_key' || back.taken === false, JSON.stringify(back));
});

test('binding calls count in the same metrics', async () => {
  const metric = async (name) => {
    const res = await s.mf.dispatchFetch('http://localhost/metrics', { headers: { authorization: `Bearer ${ADMIN}` } });
    const m = new RegExp(`^${name}\\{[^}]*\\} ([0-9.e+]+)$`, 'm').exec(await res.text());
    return Number(m[1]);
  };
  const ids = await metric('edgeleaf_isolate_segment_ids_total');
  const errors = await metric('edgeleaf_isolate_errors_total');
  assert.equal((await s.call(rpc('segment', LOAD, 250))).body.ids.length, 250);
  assert.equal((await s.call(rpc('segment', 'outside', 1))).body.error.code, 'forbidden');
  assert.equal(await metric('edgeleaf_isolate_segment_ids_total'), ids + 250);
  assert.equal(await metric('edgeleaf_isolate_errors_total'), errors + 1);
});

test('only a bound Worker can call: no public route, no method on the default entrypoint', async () => {
  // A Worker without the binding has nothing to call it through.
  assert.deepEqual(await (await s.stranger.fetch('http://stranger/')).json(), []);
  // The public API (what an unbound caller reaches) has no RPC operation.
  const health = (await s.http('/v1/health')).body;
  assert.ok(!health.routes.some((r) => /rpc|binding|Ids/i.test(r)), health.routes.join('\n'));
  for (const path of ['/Ids/segment', '/rpc/segment', '/binding', '/BindingCalls/answer']) {
    assert.equal((await s.http(path, { method: 'POST' })).status, 404, path);
  }
  // A binding to the default (public) entrypoint: fetch only.
  for (const op of ['segment', 'snowflake', 'answer', 'segmentLease']) {
    const r = (await s.call(`/public?op=${op}`)).body;
    assert.equal(r.answer, undefined, `${op} answered through the default entrypoint`);
    assert.ok(r.thrown, op);
  }
  const viaFetch = await s.call(`/fetch?path=/v1/segment/${LOAD}`, { headers: { authorization: `Bearer ${CLIENT}` } });
  assert.equal(viaFetch.status, 200);
  assert.equal(viaFetch.body.ids.length, 1);
});

test('by default (RPC_TAGS unset) the binding may do nothing', async () => {
  const d = await startBound(out);
  try {
    await d.http(`/v1/tags/${LOAD}`, { method: 'PUT', body: '{}' }, ADMIN);
    for (const [op, args] of [['segment', [LOAD, 1]], ['snowflake', [1]], ['decode', ['1']], ['segmentLease', [LOAD]], ['workerLease', [{ nodeKey: 'n', nodeTime: Date.now() }]]]) {
      const r = (await d.call(rpc(op, ...args))).body;
      assert.equal(r.error?.code, 'forbidden', `${op}: ${JSON.stringify(r)}`);
      assert.match(r.error.message, /RPC_TAGS/);
    }
  } finally {
    await d.mf.dispose();
  }
});
