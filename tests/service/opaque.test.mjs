// Opaque tags in the service (real workerd through Miniflare): IDs that
// reveal neither order nor volume, unique across concurrent clients, inside
// the tag's domain, revealable by the admin only; the key never leaves.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { start } from '../support/service.mjs';

let svc;
before(async () => { svc = await start(); });
after(async () => { await svc?.dispose(); });

const put = (value) => ({ method: 'PUT', body: JSON.stringify(value) });
const post = (value) => ({ method: 'POST', body: JSON.stringify(value) });

async function expectError(res, status, code) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.equal(JSON.parse(text).error.code, code, text);
}

test('an opaque tag: 100,000 IDs from 10 concurrent clients, unique, in the domain, unordered, revealable', async () => {
  const created = await (await svc.admin('/v1/tags/opaque-53', put({ step: 1000, opaque: { bits: 53 } }))).json();
  assert.deepEqual(created.opaque, { bits: 53 });
  const batches = [];
  await Promise.all(Array.from({ length: 10 }, async () => {
    for (let i = 0; i < 10; i++) {
      const { ids } = await (await svc.fetch('/v1/segment/opaque-53?count=1000')).json();
      batches.push(ids.map(BigInt));
    }
  }));
  const all = batches.flat();
  assert.equal(all.length, 100_000);
  assert.equal(new Set(all).size, 100_000, 'unique');
  assert.ok(all.every((id) => id >= 1n && id < 2n ** 53n), 'inside 1..2^53');
  // Not increasing: within batches, consecutive IDs go up about half the time.
  let ups = 0;
  let steps = 0;
  for (const b of batches) for (let i = 1; i < b.length; i++) { steps++; if (b[i] > b[i - 1]) ups++; }
  assert.ok(Math.abs(ups / steps - 0.5) < 0.02, `${ups} of ${steps} steps go up`);
  // The Leaf route answers opaque IDs too.
  const leaf = BigInt(await (await svc.fetch('/api/segment/get/opaque-53')).text());
  assert.ok(!all.includes(leaf) && leaf < 2n ** 53n);
  // The admin reveals the counters: distinct, all handed out by the tag.
  const counters = new Set();
  for (const id of [...all.slice(0, 20), leaf]) {
    const r = await (await svc.admin('/v1/tags/opaque-53/reveal', post({ id: id.toString() }))).json();
    assert.equal(r.belongs, true, JSON.stringify(r));
    counters.add(r.counter);
  }
  assert.equal(counters.size, 21);
  const stranger = await (await svc.admin('/v1/tags/opaque-53/reveal', post({ id: '12345' }))).json();
  assert.equal(typeof stranger.belongs, 'boolean');
  // ... and only the admin.
  await expectError(await svc.fetch('/v1/tags/opaque-53/reveal', post({ id: all[0].toString() })), 403, 'forbidden');
  // The key never leaves: not in the tag's views, not in a lease.
  const views = JSON.stringify([await (await svc.admin('/v1/tags/opaque-53')).json(), await (await svc.admin('/v1/tags')).json()]);
  assert.ok(!/key/i.test(views), views.slice(0, 200));
  await expectError(await svc.fetch('/v1/segment/opaque-53/lease', post({ step: 10 })), 409, 'opaque_tag');
  await expectError(await svc.fetch('/v1/segment/opaque-53/lease', post({ step: 10, forIsolate: true })), 400, 'invalid_json');
});

test('a 12-digit opaque tag answers order numbers of at most 12 digits, and ends at its domain', async () => {
  await svc.admin('/v1/tags/orders-12', put({ step: 100, opaque: { digits: 12 } }));
  const { ids } = await (await svc.fetch('/v1/segment/orders-12?count=500')).json();
  assert.ok(ids.every((id) => /^[0-9]{1,12}$/.test(id) && id !== '0'));
  assert.equal(new Set(ids).size, 500);
  // Near the end of the domain: the last segment is the counters left
  // (tests/service/exhaustion.test.mjs), then tag_exhausted, never a wrap.
  await svc.admin('/v1/tags/orders-end', put({ step: 10, opaque: { digits: 6 }, maxId: '999980' }));
  const last = await (await svc.fetch('/v1/segment/orders-end?count=19')).json();
  assert.equal(new Set(last.ids).size, 19);
  assert.ok(last.ids.every((id) => BigInt(id) <= 999_999n));
  await expectError(await svc.fetch('/v1/segment/orders-end?count=1'), 409, 'tag_exhausted');
  assert.equal((await (await svc.admin('/v1/tags/orders-end')).json()).maxId, '999999');
});

test('opaque settings are checked and fixed at creation', async () => {
  await expectError(await svc.admin('/v1/tags/o-bad', put({ opaque: { bits: 31 } })), 400, 'out_of_range');
  await expectError(await svc.admin('/v1/tags/o-bad', put({ opaque: { digits: 19 } })), 400, 'out_of_range');
  await expectError(await svc.admin('/v1/tags/o-bad', put({ opaque: { bits: 40, digits: 12 } })), 400, 'invalid_json');
  await expectError(await svc.admin('/v1/tags/o-bad', put({ opaque: { bits: 40 }, monotonic: true })), 409, 'opaque_tag');
  await svc.admin('/v1/tags/o-fixed', put({ opaque: { bits: 40 } }));
  await expectError(await svc.admin('/v1/tags/o-fixed', put({ opaque: { bits: 41 } })), 409, 'opaque_immutable');
  assert.deepEqual((await (await svc.admin('/v1/tags/o-fixed', put({ step: 50 }))).json()).opaque, { bits: 40 });
  await svc.admin('/v1/tags/o-plain', put({}));
  await expectError(await svc.admin('/v1/tags/o-plain', put({ opaque: { bits: 40 } })), 409, 'opaque_immutable');
  await expectError(await svc.admin('/v1/tags/o-plain/reveal', post({ id: '1' })), 409, 'not_opaque');
  await expectError(await svc.admin('/v1/tags/o-fixed/reveal', post({ id: 'x1' })), 400, 'invalid_id');
  // A body within the public limit whose ID, quoted again for the tag's
  // object, grows past it: still invalid_id, not a 413 of the service's own.
  const escaped = JSON.stringify({ id: '"'.repeat(2000) });
  assert.ok(escaped.length <= 4096);
  await expectError(await svc.admin('/v1/tags/o-fixed/reveal', { method: 'POST', body: escaped }), 400, 'invalid_id');
});
