// The fleet-wide view in real workerd: a tag's allocation history from its
// store (every isolate and client together), the registry's lease events,
// and GET /metrics read by a real Prometheus text-format parser.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { start, ADMIN } from '../support/service.mjs';

let svc;
before(async () => {
  svc = await start({ vars: { LAYOUT: 'jsSafe', LEASE_TTL_MS: '1000', LEASE_GRACE_MS: '1500', MAX_SKEW_MS: '500' } });
});
after(async () => { await svc?.dispose(); });

const post = (value) => ({ method: 'POST', body: JSON.stringify(value), headers: { 'content-type': 'application/json' } });
const put = (value) => ({ method: 'PUT', body: JSON.stringify(value) });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('a tag\'s history adds up every allocation, whoever made it, and bounds what it keeps', async () => {
  await svc.admin('/v1/tags/hist', put({ step: 10, maxStep: 10 }));
  const key = await (await svc.admin('/v1/keys', post({ name: 'app', scopes: ['ids'] }))).json();
  for (let i = 0; i < 5; i++) await svc.fetch('/v1/segment/hist?count=50');
  for (let i = 0; i < 3; i++) await svc.fetch('/v1/segment/hist/lease', post({ step: 10 }), key.token);
  const h = await (await svc.admin('/v1/tags/hist/history?minutes=5')).json();
  assert.equal(h.bizTag, 'hist');
  assert.equal(h.domainMax, '9223372036854775807', 'jsSafe too: the runway runs to where allocation stops, 2^63 - 1');
  // Every ID up to max_id came from a remembered allocation, and the
  // minutes hold them all.
  const sum = h.recent.reduce((n, e) => n + e.ids, 0);
  assert.equal(String(sum), h.maxId);
  assert.equal(h.minutes.reduce((n, m) => n + m.ids, 0), sum);
  assert.equal(h.minutes.length, 5);
  assert.equal(h.minutes.at(-1).maxStep, 10, 'the step over time');
  assert.equal(h.allocations, h.recent.length);
  const by = new Set(h.recent.map((e) => e.by.split(':')[0]));
  // Isolates load through their region's allocator (the default), whose
  // blocks are marked with its region: Miniflare's colo is DFW → wnam.
  assert.deepEqual([...by].sort(), ['allocator', 'lease']);
  assert.ok(h.recent.some((e) => e.by === 'allocator:wnam'), 'a block names the allocator that asked');
  assert.ok(h.recent.some((e) => e.by === `lease:${key.id}`), 'a lease names the key that asked');
  // The runway: the last hour's rate against what is left.
  assert.equal(BigInt(h.runway.remaining), 2n ** 63n - 1n - BigInt(h.maxId));
  assert.ok(h.runway.idsPerHour > 0);
  assert.ok(h.runway.exhaustedAtMs > h.nowMs);
  // Bounded: past 1,000 allocations the oldest go.
  await svc.admin('/v1/tags/many', put({ step: 1, maxStep: 1 }));
  await Promise.all(Array.from({ length: 1010 }, () => svc.fetch('/v1/segment/many/lease', post({}))));
  const many = await (await svc.admin('/v1/tags/many/history')).json();
  assert.equal(many.allocations, 1010);
  assert.equal(many.remembered, 1000);
  assert.equal(many.minutes.length, 60);
  await assert.equal((await svc.admin('/v1/tags/many/history?minutes=0')).status, 400);
  assert.equal((await svc.admin('/v1/tags/nope/history')).status, 404);
});

test('the registry records grants, renewals, releases and lapses', async () => {
  const lease = async (nodeKey) => (await svc.admin('/v1/workers/lease', post({ nodeKey, nodeTime: Date.now() }))).json();
  const a = await lease('ev-a');
  await svc.admin(`/v1/workers/${a.workerId}/renew`, post({ generation: a.generation, secret: a.secret, nodeTime: Date.now() }));
  const b = await lease('ev-b');
  await svc.admin(`/v1/workers/${b.workerId}`, { method: 'DELETE', body: JSON.stringify({ generation: b.generation, secret: b.secret }) });
  // a lapses (TTL 1 s + grace 1.5 s), then its ID goes to c.
  await sleep(2700);
  const c = await lease('ev-c');
  assert.equal(c.workerId, a.workerId, 'the lapsed ID is recycled');
  const { events } = await (await svc.admin('/v1/workers/events')).json();
  const mine = events.filter((e) => e.nodeKey.startsWith('ev-')).reverse().map((e) => `${e.kind} ${e.nodeKey}`);
  assert.deepEqual(mine, ['granted ev-a', 'renewed ev-a', 'granted ev-b', 'released ev-b', 'lapsed ev-a', 'granted ev-c']);
  // The lapse is recorded against the grant that lapsed, at its expiry.
  const lapsed = events.find((e) => e.kind === 'lapsed' && e.generation === a.generation);
  assert.ok(lapsed, JSON.stringify(events.slice(0, 6)));
  assert.ok(lapsed.atMs >= a.expiresAtMs && lapsed.atMs <= a.expiresAtMs + 1000, `${lapsed.atMs} vs ${a.expiresAtMs}`);
  assert.ok(events.every((e) => e.owner === 'root' || e.nodeKey.startsWith('minter:')));
});

test('GET /metrics is valid Prometheus text: tags, worker IDs, this isolate\'s counters', async () => {
  await svc.admin('/v1/tags/metered', put({ step: 100 }));
  await svc.fetch('/v1/segment/metered?count=150');
  await svc.fetch('/v1/snowflake?count=10');
  const res = await svc.admin('/metrics');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const families = parsePrometheusTextFormat(await res.text());
  const family = (name) => {
    const f = families.find((x) => x.name === name);
    assert.ok(f, `${name} missing`);
    return f;
  };
  const value = (name, labels) => {
    const m = family(name).metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
    assert.ok(m, `${name}${JSON.stringify(labels)} missing`);
    return Number(m.value);
  };
  const tag = await (await svc.admin('/v1/tags/metered')).json();
  assert.ok(value('edgeleaf_tag_max_id', { tag: 'metered' }) <= Number(tag.maxId));
  assert.ok(value('edgeleaf_tag_max_id', { tag: 'metered' }) >= 150);
  assert.equal(value('edgeleaf_tag_step', { tag: 'metered' }), 100);
  // (A prefetch may still land after the scrape: at most what the store says now.)
  const { allocations } = await (await svc.admin('/v1/tags/metered/history')).json();
  const scraped = value('edgeleaf_tag_allocations_total', { tag: 'metered' });
  assert.ok(scraped >= 2 && scraped <= allocations, `${scraped} of ${allocations}`);
  assert.equal(family('edgeleaf_tag_allocations_total').type, 'COUNTER');
  assert.ok(value('edgeleaf_tag_runway_seconds', { tag: 'metered' }) > 0);
  const workers = await (await svc.admin('/v1/workers')).json();
  assert.equal(value('edgeleaf_workers', { status: 'live' }), workers.live);
  const total = ['live', 'lapsed', 'free'].reduce((n, s) => n + value('edgeleaf_workers', { status: s }), 0);
  assert.equal(total, workers.capacity);
  const isolate = family('edgeleaf_isolate_segment_ids_total').metrics[0].labels.isolate;
  assert.match(isolate, /^[0-9a-f]{8}$/);
  assert.ok(value('edgeleaf_isolate_segment_ids_total', { isolate }) >= 150);
  assert.ok(value('edgeleaf_isolate_snowflake_ids_total', { isolate }) >= 10);
  for (const f of families) assert.ok(f.help && f.type, `${f.name}: HELP and TYPE`);
  // The monitor scope opens it; ids does not.
  const monitor = await (await svc.admin('/v1/keys', post({ name: 'prometheus', scopes: ['monitor'] }))).json();
  assert.equal((await svc.fetch('/metrics', {}, monitor.token)).status, 200);
  assert.equal((await svc.fetch('/metrics', {}, ADMIN.replace('admin', 'x'))).status, 403);
});
