// Segment leases' request IDs (issue 24, item 2): a request ID belongs to a
// credential of the caller's own, an API key. Without one (no token while
// CLIENT_TOKEN is unset, the shared CLIENT_TOKEN, the one ADMIN_TOKEN) two
// unrelated callers could send the same ID and be answered the same range:
// such a lease is refused (400 request_id_needs_key), never answered twice.
// Two API keys sending the same ID get ranges of their own. The npm client
// sends a request ID only with an API key, and works either way. No view
// shows a request ID.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeleafClient } from 'edgeleaf';
import { start, ADMIN, CLIENT } from '../support/service.mjs';

// CLIENT_TOKEN unset (the default, like Leaf): the ID routes are open.
let open;
let guarded;
before(async () => {
  open = await start({ vars: { CLIENT_TOKEN: '' } });
  guarded = await start();
  for (const svc of [open, guarded]) {
    assert.equal((await svc.admin('/v1/tags/rid', { method: 'PUT', body: JSON.stringify({ step: 100 }) })).status, 200);
  }
});
after(async () => { await open?.dispose(); await guarded?.dispose(); });

const lease = (svc, body, token) =>
  svc.fetch('/v1/segment/rid/lease', { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }, token);

const key = async (svc, name) => (await (await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name, scopes: ['ids'] }) })).json()).token;

async function refused(res) {
  const text = await res.text();
  assert.equal(res.status, 400, text);
  const { error } = JSON.parse(text);
  assert.equal(error.code, 'request_id_needs_key', text);
  assert.match(error.message, /API key/, 'it says what to do');
  return error;
}

const range = async (res) => {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const { start: s, end } = JSON.parse(text);
  return [BigInt(s), BigInt(end)];
};

test('two anonymous callers sending the same requestId: refused (400 request_id_needs_key), never the same range', async () => {
  const first = lease(open, { step: 100, requestId: 'job-1' }, null);
  const second = lease(open, { step: 100, requestId: 'job-1' }, null);
  for (const res of await Promise.all([first, second])) await refused(res);
  // Without a request ID each gets a range of its own.
  const [a, b] = await Promise.all([range(await lease(open, { step: 100 }, null)), range(await lease(open, { step: 100 }, null))]);
  assert.ok(a[1] < b[0] || b[1] < a[0], `${a} overlaps ${b}`);
});

test('the shared CLIENT_TOKEN and the ADMIN_TOKEN may not send a requestId either', async () => {
  await refused(await lease(guarded, { step: 100, requestId: 'job-1' }, CLIENT));
  await refused(await lease(guarded, { step: 100, requestId: 'job-1' }, ADMIN));
  // Refused before its length is looked at: one rule for any request ID.
  await refused(await lease(guarded, { requestId: '' }, CLIENT));
  await range(await lease(guarded, { step: 100 }, CLIENT));
});

test('two API keys sending the same requestId get ranges of their own; each retry gets its own again', async () => {
  for (const svc of [open, guarded]) {
    const [k1, k2] = [await key(svc, 'job runner 1'), await key(svc, 'job runner 2')];
    const one = await range(await lease(svc, { step: 100, requestId: 'job-1' }, k1));
    const two = await range(await lease(svc, { step: 100, requestId: 'job-1' }, k2));
    assert.ok(one[1] < two[0], `${one} and ${two}: another key's range`);
    assert.deepEqual(await range(await lease(svc, { step: 100, requestId: 'job-1' }, k1)), one, 'a retry: the same range');
    assert.deepEqual(await range(await lease(svc, { step: 100, requestId: 'job-1' }, k2)), two);
    // The request ID's own rules still hold for a key.
    const res = await lease(svc, { requestId: 'x'.repeat(129) }, k1);
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error.code, 'invalid_request_id');
  }
});

test('EdgeleafClient.segment() sends a requestId with an API key only, and serves IDs either way', async () => {
  const k = await key(guarded, 'npm client');
  const runs = [];
  for (const [svc, token] of [[guarded, k], [guarded, CLIENT], [open, undefined]]) {
    const bodies = [];
    const client = new EdgeleafClient({
      url: 'http://localhost',
      token,
      fetch: (url, init) => { bodies.push(JSON.parse(init.body)); return svc.mf.dispatchFetch(url, init); },
    });
    const g = client.segment('rid', { step: 100 });
    const ids = await g.nextIds(250);
    assert.equal(new Set(ids).size, 250);
    runs.push({ token, bodies, ids });
  }
  assert.ok(runs[0].bodies.every((b) => typeof b.requestId === 'string' && b.requestId.length > 0), JSON.stringify(runs[0].bodies));
  for (const r of runs.slice(1)) assert.ok(r.bodies.every((b) => !('requestId' in b)), JSON.stringify(r.bodies));
});

test('with an API key, a lease retried after a lost answer gets the same range; without, the next one (the lost range skipped)', async () => {
  const k = await key(guarded, 'flaky network');
  for (const token of [k, CLIENT]) {
    let calls = 0;
    const answers = [];
    const flaky = async (url, init) => {
      const res = await guarded.mf.dispatchFetch(url, init);
      answers.push(await res.clone().json());
      if (++calls === 1) throw new Error('connection reset'); // the answer is lost
      return res;
    };
    const g = new EdgeleafClient({ url: 'http://localhost', token, fetch: flaky }).segment('rid', { step: 100 });
    const first = await g.next();
    assert.equal(calls, 2);
    assert.equal(first, BigInt(answers[1].start), 'served from the answer that came');
    if (token === k) assert.deepEqual(answers[1], answers[0], 'the same range again');
    else assert.ok(BigInt(answers[1].start) > BigInt(answers[0].end), 'the next range: the lost one skipped, never twice');
  }
});

test('no view shows a request ID', async () => {
  const k = await key(guarded, 'private ids');
  const secret = 'request-id-nobody-else-should-see';
  await range(await lease(guarded, { step: 100, requestId: secret }, k));
  const views = ['/v1/tags', '/v1/tags/rid', '/v1/tags/rid/history', '/v1/monitor', '/metrics', '/v1/workers', '/v1/workers/events', '/v1/keys', '/'];
  for (const path of views) {
    const res = await guarded.admin(path);
    const text = await res.text();
    assert.equal(res.status, 200, `${path}: ${text.slice(0, 200)}`);
    assert.ok(!text.includes(secret), `${path} shows the request ID`);
  }
});
