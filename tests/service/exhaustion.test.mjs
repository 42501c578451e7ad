// A tag's end, and names that are not tags (issue 24, item 9), in real
// workerd: a segment asked with a step larger than the IDs left is the
// tag's last, shorter segment (a grown dynamic step no longer meets
// tag_exhausted early), and only then is the tag exhausted, through every
// route; a request naming a tag that does not exist is answered not_found
// without making the tag's tables (random names cost no storage).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start } from '../support/service.mjs';
import { objectFiles, tableNames } from '../support/fixture.mjs';

const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-exhaustion-'));
let svc;
before(async () => { svc = await start({ persist }); });
after(async () => { await svc?.dispose(); });

const MAX = 2n ** 63n - 1n;
const put = (value) => ({ method: 'PUT', body: JSON.stringify(value) });

async function expectError(res, status, code) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.equal(JSON.parse(text).error.code, code, text);
}

const ids = async (path) => {
  const res = await svc.fetch(path);
  const text = await res.text();
  assert.equal(res.status, 200, `${path}: ${text}`);
  return JSON.parse(text).ids.map(BigInt);
};

test('an opaque digits:6 tag near its end: a grown step gets the IDs left, then tag_exhausted', async () => {
  // 19 counters left; the first segment is 10, the prefetch asks 20 (the
  // dynamic step doubled): it gets the last 9.
  await svc.admin('/v1/tags/end-6', put({ step: 10, opaque: { digits: 6 }, maxId: '999980' }));
  const all = [...await ids('/v1/segment/end-6?count=10'), ...await ids('/v1/segment/end-6?count=9')];
  assert.equal(new Set(all).size, 19);
  assert.ok(all.every((id) => id >= 1n && id <= 999_999n));
  await expectError(await svc.fetch('/v1/segment/end-6?count=1'), 409, 'tag_exhausted');
  await expectError(await svc.fetch('/api/segment/get/end-6'), 409, 'tag_exhausted');
  assert.equal((await (await svc.admin('/v1/tags/end-6')).json()).maxId, '999999');
  // Every counter of the tail was handed out, each once.
  const counters = new Set();
  for (const id of all) {
    const r = await (await svc.admin('/v1/tags/end-6/reveal', { method: 'POST', body: JSON.stringify({ id: id.toString() }) })).json();
    assert.equal(r.belongs, true);
    counters.add(BigInt(r.counter));
  }
  assert.deepEqual([...counters].sort((a, b) => (a < b ? -1 : 1)), Array.from({ length: 19 }, (_, i) => 999_981n + BigInt(i)));
});

test('a plain tag near 2^63 − 1: the batch route and a client lease get the last IDs, then tag_exhausted', async () => {
  await svc.admin('/v1/tags/end-63', put({ step: 10, maxId: (MAX - 15n).toString() }));
  const batch = [...await ids('/v1/segment/end-63?count=10'), ...await ids('/v1/segment/end-63?count=5')];
  assert.deepEqual(batch, Array.from({ length: 15 }, (_, i) => MAX - 14n + BigInt(i)));
  await expectError(await svc.fetch('/v1/segment/end-63?count=1'), 409, 'tag_exhausted');

  await svc.admin('/v1/tags/lease-63', put({ step: 100, maxId: (MAX - 30n).toString() }));
  const res = await svc.fetch('/v1/segment/lease-63/lease', { method: 'POST', body: JSON.stringify({ step: 1000 }) });
  const lease = await res.json();
  assert.equal(res.status, 200, JSON.stringify(lease));
  assert.deepEqual([BigInt(lease.start), BigInt(lease.end), lease.step], [MAX - 29n, MAX, 30]);
  await expectError(await svc.fetch('/v1/segment/lease-63/lease', { method: 'POST', body: '{}' }), 409, 'tag_exhausted');
});

test('a monotonic tag near its end: a prefetch that finds no ID left does not fail the answer; then tag_exhausted', async () => {
  await svc.admin('/v1/tags/end-mono', put({ step: 10, monotonic: true, maxId: (MAX - 15n).toString() }));
  const got = [];
  for (const n of [10, 2, 3]) got.push(...await ids(`/v1/segment/end-mono?count=${n}`));
  assert.deepEqual(got, Array.from({ length: 15 }, (_, i) => MAX - 14n + BigInt(i)));
  await expectError(await svc.fetch('/v1/segment/end-mono?count=1'), 409, 'tag_exhausted');
});

test('a name that is not a tag: not_found through every route, and no tables made for it', async () => {
  await svc.admin('/v1/tags/real-one', put({ step: 10 }));
  const names = Array.from({ length: 8 }, (_, i) => `no-such-tag-${i}-${Math.random().toString(36).slice(2)}`);
  for (const name of names) {
    await expectError(await svc.fetch(`/v1/segment/${name}?count=1`), 404, 'not_found');
    await expectError(await svc.fetch(`/api/segment/get/${name}`), 404, 'not_found');
    await expectError(await svc.fetch(`/v1/segment/${name}/lease`, { method: 'POST', body: '{}' }), 404, 'not_found');
    await expectError(await svc.admin(`/v1/tags/${name}`), 404, 'not_found');
    await expectError(await svc.admin(`/v1/tags/${name}/history`), 404, 'not_found');
    await expectError(await svc.admin(`/v1/tags/${name}/reveal`, { method: 'POST', body: JSON.stringify({ id: '1' }) }), 404, 'not_found');
    await expectError(await svc.admin(`/v1/tags/${name}`, { method: 'DELETE' }), 404, 'not_found');
    // A PUT the tag refuses makes nothing either.
    await expectError(await svc.admin(`/v1/tags/${name}`, put({ step: 0 })), 400, 'out_of_range');
    await expectError(await svc.admin(`/v1/tags/${name}`, put({ expectMaxId: '5' })), 409, 'tag_changed');
  }
  await svc.dispose();
  svc = null;
  // Each tag object's database: only the tags created have tables.
  const files = objectFiles(persist, 'TagStore');
  const objects = files.length;
  const withTables = files.map(tableNames).filter((tables) => tables.length);
  assert.ok(objects >= names.length, `the names reached ${objects} objects`);
  const created = ['end-6', 'end-63', 'lease-63', 'end-mono', 'real-one'];
  assert.equal(withTables.length, created.length, `${withTables.length} objects with tables, ${created.length} tags created`);
  for (const tables of withTables) assert.ok(tables.includes('tag') && tables.includes('issued'), tables.join());
});
