// Every request answers within a bound, whatever its Durable Objects do:
// the Worker in workerd with every object made slow on purpose
// (TEST_OBJECT_DELAY_MS, a test-only setting the Worker applies only to
// requests on a loopback host, so never when deployed). Every route is
// asked, not only the ID routes: segment, snowflake, leases, workers, tags,
// keys, views.
//
// - Objects that take 100 ms: every route does its work (IDs, a lease, a
//   key, a tag) within the budget.
// - Objects that take 3 s: every route that needs one answers 503
//   `store_unavailable` with `Retry-After` within the budget (the core's
//   MAX_WAIT_MS, 1 s) and a small margin — one request at a time, and 20 at
//   once waiting on one another's segment load; the routes that need no
//   object still answer 200. The same Worker asked on another host ignores
//   the setting and answers IDs.
// - Snowflakes without minters (each isolate leases its own worker ID): the
//   registry's slowness is bounded the same way.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, ADMIN, CLIENT } from '../support/service.mjs';

/** The core's MAX_WAIT_MS: one request's budget, its objects' answers included. */
const BUDGET_MS = 1000;
/** What a request may take beyond its budget: the Worker's own work and Miniflare's dispatch. */
const MARGIN_MS = 300;
const SHORT_MS = 100;
const LONG_MS = 3000;

const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-slow-'));
const services = [];
/** What the first test's answers gave (a lease, a key, IDs), for the second to ask with. */
const state = {};
after(async () => {
  for (const s of services) await s.dispose();
  rmSync(persist, { recursive: true, force: true });
});

async function service(vars) {
  const svc = await start({ persist, vars });
  services.push(svc);
  return svc;
}

/** Sends one request and times it; `host` other than localhost to leave the loopback. */
async function ask(svc, { method = 'GET', path, body, token = ADMIN, host = 'localhost' }) {
  const init = {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  };
  const t0 = performance.now();
  const res = await svc.mf.dispatchFetch(`http://${host}${path}`, init);
  const text = await res.text();
  const ms = performance.now() - t0;
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, retryAfter: res.headers.get('retry-after'), text, json, ms };
}

const within = (r, what) =>
  assert.ok(r.ms <= BUDGET_MS + MARGIN_MS, `${what}: answered after ${Math.round(r.ms)} ms (budget ${BUDGET_MS} + ${MARGIN_MS})`);

/** Every route; `s` holds what earlier answers gave (a lease, a key, IDs). */
function routes(s) {
  const lease = s.lease ?? { workerId: 1, generation: 1, secret: '0'.repeat(32) };
  return [
    // IDs
    { name: 'segment', path: '/v1/segment/slow?count=10', token: CLIENT, object: true, ok: (r) => r.json.ids.length === 10 },
    { name: 'segment (Leaf)', path: '/api/segment/get/slow', token: CLIENT, object: true, ok: (r) => /^\d+$/.test(r.text) },
    { name: 'segment lease', method: 'POST', path: '/v1/segment/slow/lease', body: {}, token: CLIENT, object: true, ok: (r) => BigInt(r.json.end) > BigInt(r.json.start) },
    { name: 'opaque segment', path: '/v1/segment/slow-opaque?count=1', token: CLIENT, object: true, ok: (r) => { s.opaqueId = r.json.ids[0]; return true; } },
    { name: 'snowflake', path: '/v1/snowflake?count=5', token: CLIENT, object: true, ok: (r) => { s.snowflake = r.json.ids[0]; return r.json.ids.length === 5; } },
    { name: 'snowflake (Leaf)', path: '/api/snowflake/get/x', token: CLIENT, object: true, ok: (r) => /^\d+$/.test(r.text) },
    { name: 'decode', path: () => `/v1/snowflake/${s.snowflake ?? '1'}`, object: false, ok: (r) => r.json.workerId !== undefined },
    // Worker-ID leases and the registry's views
    { name: 'lease', method: 'POST', path: '/v1/workers/lease', body: () => ({ nodeKey: 'slow-node', nodeTime: Date.now() }), object: true, ok: (r) => { s.lease = r.json; return r.json.secret.length === 32; } },
    { name: 'renew', method: 'POST', path: () => `/v1/workers/${(s.lease ?? lease).workerId}/renew`, body: () => ({ generation: (s.lease ?? lease).generation, secret: (s.lease ?? lease).secret, nodeTime: Date.now(), lastTimestamp: Date.now() - 1 }), object: true, ok: (r) => r.json.workerId === s.lease.workerId },
    { name: 'workers', path: '/v1/workers', object: true, ok: (r) => Array.isArray(r.json.workers) },
    { name: 'events', path: '/v1/workers/events', object: true, ok: (r) => r.json !== undefined },
    { name: 'release', method: 'DELETE', path: () => `/v1/workers/${(s.lease ?? lease).workerId}`, body: () => ({ generation: (s.lease ?? lease).generation, secret: (s.lease ?? lease).secret, lastTimestamp: Date.now() }), object: true, ok: () => true },
    { name: 'lease to evict', method: 'POST', path: '/v1/workers/lease', body: () => ({ nodeKey: 'slow-evicted', nodeTime: Date.now() }), object: true, ok: (r) => { s.evicted = r.json.workerId; return true; } },
    { name: 'evict', method: 'POST', path: () => `/v1/workers/${s.evicted ?? 1}/evict`, object: true, ok: () => true },
    // Tags
    { name: 'put tag', method: 'PUT', path: '/v1/tags/slow-gone', body: { step: 100 }, object: true, ok: (r) => r.json.bizTag === 'slow-gone' },
    { name: 'tags', path: '/v1/tags', object: true, ok: (r) => r.json.tags.length >= 2 },
    { name: 'tag', path: '/v1/tags/slow', object: true, ok: (r) => r.json.bizTag === 'slow' },
    { name: 'reveal', method: 'POST', path: '/v1/tags/slow-opaque/reveal', body: () => ({ id: s.opaqueId ?? '1' }), object: true, ok: () => true },
    { name: 'history', path: '/v1/tags/slow/history', object: true, ok: () => true },
    { name: 'delete tag', method: 'DELETE', path: '/v1/tags/slow-gone', object: true, ok: (r) => r.json.deleted.bizTag === 'slow-gone' },
    // Keys
    { name: 'create key', method: 'POST', path: '/v1/keys', body: { name: 'slow monitor', scopes: ['monitor'] }, object: true, status: 201, ok: (r) => { s.key = r.json; return r.json.token.startsWith('elk_'); } },
    { name: 'keys', path: '/v1/keys', object: true, ok: (r) => r.json.keys.length >= 1 },
    { name: 'a key looked up', path: '/v1/monitor', token: () => s.key?.token ?? `elk_${'0'.repeat(12)}_${'0'.repeat(32)}`, object: true, ok: () => true },
    { name: 'revoke key', method: 'DELETE', path: () => `/v1/keys/${s.key?.id ?? '000000000000'}`, object: true, ok: () => true },
    // Views
    { name: 'metrics', path: '/metrics', object: true, ok: (r) => r.text.includes('edgeleaf_') },
    { name: 'monitor', path: '/v1/monitor', object: false, ok: () => true },
    { name: 'health', path: '/v1/health', object: false, ok: (r) => r.json.ok === true },
    { name: 'ping', path: '/v1/ping', object: false, ok: () => true },
    { name: 'dashboard', path: '/', object: false, ok: (r) => r.text.includes('<html') },
  ];
}

const value = (v) => (typeof v === 'function' ? v() : v);

async function askRoute(svc, r) {
  return ask(svc, { method: r.method, path: value(r.path), body: value(r.body), token: value(r.token) ?? ADMIN });
}

test('objects that take 100 ms: every route does its work within the budget', async () => {
  const svc = await service({ TEST_OBJECT_DELAY_MS: String(SHORT_MS) });
  for (const [tag, body] of [['slow', { step: 1000 }], ['slow-opaque', { step: 1000, opaque: { bits: 53 } }]]) {
    const r = await ask(svc, { method: 'PUT', path: `/v1/tags/${tag}`, body });
    assert.equal(r.status, 200, r.text);
    within(r, `PUT /v1/tags/${tag}`);
    assert.ok(r.ms >= 2 * SHORT_MS, `PUT /v1/tags/${tag} (two objects) took ${Math.round(r.ms)} ms: the delay is applied`);
  }
  for (const route of routes(state)) {
    const r = await askRoute(svc, route);
    assert.equal(r.status, route.status ?? 200, `${route.name}: ${r.text}`);
    within(r, route.name);
    assert.ok(route.ok(r), `${route.name}: ${r.text}`);
  }
});

test('objects that take 3 s: every route answers 503 + Retry-After within the budget, or 200 without them', async (t) => {
  const svc = await service({ TEST_OBJECT_DELAY_MS: String(LONG_MS) });
  // Every route is asked (with what the first test's answers gave); the
  // failures are listed together.
  const wrong = [];
  let slowest = { ms: 0 };
  for (const route of routes(state)) {
    const r = await askRoute(svc, route);
    if (r.ms > slowest.ms) slowest = { ms: r.ms, name: route.name };
    const failed = (what) => wrong.push(`${route.name}: ${what} after ${Math.round(r.ms)} ms (${r.status} ${r.text.slice(0, 120)})`);
    if (r.ms > BUDGET_MS + MARGIN_MS) failed('over the bound');
    else if (!route.object && r.status !== 200) failed('not 200');
    else if (route.object && (r.status !== 503 || r.json?.error?.code !== 'store_unavailable')) failed('not 503 store_unavailable');
    else if (route.object && !(Number(r.retryAfter) >= 1)) failed(`Retry-After ${r.retryAfter}`);
  }
  assert.deepEqual(wrong, []);
  t.diagnostic(`slowest route: ${slowest.name}, ${Math.round(slowest.ms)} ms`);
  // 20 requests at once for one tag: one loads, the others wait for its
  // load; each answers within its own budget.
  const burst = await Promise.all(Array.from({ length: 20 }, () => ask(svc, { path: '/v1/segment/slow?count=1', token: CLIENT })));
  t.diagnostic(`burst: slowest ${Math.round(Math.max(...burst.map((r) => r.ms)))} ms`);
  for (const r of burst) {
    within(r, 'a segment request of a burst');
    assert.equal(r.status, 503, r.text);
    assert.ok(Number(r.retryAfter) >= 1);
  }
  // The same Worker on a host that is not a loopback one (as every request
  // to a deployed Worker) ignores the setting.
  const elsewhere = await ask(svc, { path: '/v1/segment/slow?count=3', token: CLIENT, host: 'edgeleaf.example.com' });
  assert.equal(elsewhere.status, 200, elsewhere.text);
  assert.equal(elsewhere.json.ids.length, 3);
  assert.ok(elsewhere.ms < LONG_MS, `not delayed: ${Math.round(elsewhere.ms)} ms`);
});

test('snowflakes without minters: a slow registry is bounded too', async () => {
  const svc = await service({ TEST_OBJECT_DELAY_MS: String(LONG_MS), SNOWFLAKE_MINTERS: '0' });
  const r = await ask(svc, { path: '/v1/snowflake?count=3', token: CLIENT });
  within(r, 'GET /v1/snowflake');
  assert.equal(r.status, 503, r.text);
  assert.equal(r.json.error.code, 'store_unavailable', r.text);
  assert.ok(Number(r.retryAfter) >= 1);
});
