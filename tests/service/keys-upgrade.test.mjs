// The upgrade to one Durable Object per API key, on keys kept by the
// previous version (tests/service/fixtures/keys-v1: every key, its hash
// included, in the one `KeyStore` object; see its README.md). Every key opens
// what it opened and nothing more, the revoked one stays refused, the
// listing is unchanged; the first lookup that finds no object of its key
// asks the index, which copies the old keys out to their own objects and
// drops their hashes; from then on lookups never reach the index, across a
// restart too; old keys are revoked and new ones made as before.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DatabaseSync } from 'node:sqlite';
import { spawnService, killHard, ADMIN } from '../support/service.mjs';
import { objectFiles } from '../support/fixture.mjs';

const FIXTURE = fileURLToPath(new URL('./fixtures/keys-v1/', import.meta.url));
const made = JSON.parse(readFileSync(join(FIXTURE, 'made.json'), 'utf8'));

/** The index's rows, read from its SQLite file (the service stopped). */
function indexRows(persist) {
  const [file] = objectFiles(persist, 'KeyStore');
  const db = new DatabaseSync(file);
  try {
    return db.prepare('SELECT id, hash FROM keys ORDER BY id').all();
  } finally {
    db.close();
  }
}

test('keys kept in the single KeyStore: they open what they opened, are copied out to their own objects, and the index stops being asked', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-keys-upgrade-'));
  cpSync(FIXTURE, persist, { recursive: true });
  const before = indexRows(persist);
  assert.equal(before.length, 3, JSON.stringify(before));
  assert.ok(before.every((r) => /^[0-9a-f]{64}$/.test(r.hash)), 'the fixture keeps each hash in the index');

  let svc = await spawnService(persist);
  const call = async (path, { method = 'GET', body, token = ADMIN } = {}) => {
    const res = await fetch(`${svc.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, code: res.status >= 400 ? JSON.parse(text).error?.code : undefined, text };
  };
  const lookups = async () => {
    const text = (await call('/metrics')).text;
    const n = { index: 0, key: 0 };
    for (const m of text.matchAll(/^edgeleaf_isolate_key_lookups_total\{[^}]*object="(\w+)"[^}]*\} (\d+)/gm)) n[m[1]] += Number(m[2]);
    return n;
  };
  const { ids, limited, admin, revoked } = made.keys;
  // What each old credential may do: [what, request, expected status].
  const expectations = () => [
    ['ids key', () => call('/v1/snowflake', { token: ids.token }), 200],
    ['ids key, a monitor route', () => call('/v1/tags', { token: ids.token }), 403],
    ['limited key, its tags', () => call('/v1/tags/legacy-x', { token: limited.token }), 404],
    ['limited key, another tag', () => call('/v1/tags/other', { token: limited.token }), 403],
    ['admin key', () => call('/v1/keys', { token: admin.token }), 200],
    ['revoked key', () => call('/v1/snowflake', { token: revoked.token }), 403],
    ['ids key, a wrong secret', () => call('/v1/snowflake', { token: `${ids.token.slice(0, -1)}${ids.token.endsWith('0') ? '1' : '0'}` }), 403],
  ];
  const check = async (when) => {
    const wrong = [];
    for (const [what, request, status] of expectations()) {
      const res = await request();
      if (res.status !== status) wrong.push(`${when}, ${what}: expected ${status}, found ${res.status} ${res.text.slice(0, 160)}`);
    }
    return wrong;
  };
  try {
    const start = await lookups();
    assert.deepEqual(await check('after the upgrade'), []);
    const first = await lookups();
    // One question to the index (the first miss), which copied every old key
    // out; every other lookup went to a key's own object.
    assert.equal(first.index - start.index, 1, JSON.stringify({ start, first }));
    // The listing is the one the previous version answered.
    const listed = JSON.parse((await call('/v1/keys')).text).keys;
    const strip = (k) => ({ id: k.id, name: k.name, scopes: k.scopes, tags: k.tags, createdMs: k.createdMs });
    assert.deepEqual(listed.map(strip), made.listed.map(strip));
    // The last use the old store recorded is kept (or newer).
    const usedBefore = made.listed.find((k) => k.id === ids.id).lastUsedMs;
    assert.ok(usedBefore > 0 && listed.find((k) => k.id === ids.id).lastUsedMs >= usedBefore, JSON.stringify(listed));

    // A made-up key now costs its own object only.
    const made0 = await lookups();
    assert.equal((await call('/v1/snowflake', { token: `elk_${'ab'.repeat(6)}_${'cd'.repeat(32)}` })).status, 403);
    const made1 = await lookups();
    assert.deepEqual({ index: made1.index - made0.index, key: made1.key - made0.key }, { index: 0, key: 1 });

    // Restarted: a fresh isolate, the keys still open what they opened, from
    // their own objects; the index kept no hash.
    await killHard(svc.child);
    const after = indexRows(persist);
    assert.deepEqual(after.map((r) => r.id), before.map((r) => r.id));
    assert.ok(after.every((r) => r.hash === ''), `the index still holds hashes: ${JSON.stringify(after)}`);
    svc = await spawnService(persist);
    assert.deepEqual(await check('after a restart'), []);
    const restarted = await lookups();
    // One question to the index (this isolate's first miss: it answers that no old keys remain).
    assert.ok(restarted.index <= 1, JSON.stringify(restarted));

    // Old keys are revoked, new keys made, as before.
    assert.equal((await call(`/v1/keys/${ids.id}`, { method: 'DELETE' })).status, 200);
    const gone = await call('/v1/snowflake', { token: ids.token });
    assert.deepEqual([gone.status, gone.code], [403, 'forbidden']);
    const fresh = await call('/v1/keys', { method: 'POST', body: { name: 'after the upgrade', scopes: ['ids'] } });
    assert.equal(fresh.status, 201, fresh.text);
    assert.equal((await call('/v1/snowflake', { token: JSON.parse(fresh.text).token })).status, 200);
    const ids2 = JSON.parse((await call('/v1/keys')).text).keys.map((k) => k.id);
    assert.ok(!ids2.includes(ids.id) && ids2.includes(JSON.parse(fresh.text).id), JSON.stringify(ids2));
  } finally {
    await killHard(svc.child);
  }
});

test('a flood of made-up keys during the upgrade: the index is asked only until it says no old keys remain; the old keys still open', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-keys-upgrade-flood-'));
  cpSync(FIXTURE, persist, { recursive: true });
  const svc = await spawnService(persist);
  try {
    const as = async (token, path = '/v1/snowflake') => {
      const res = await fetch(`${svc.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      const text = await res.text();
      return { status: res.status, retryAfter: res.headers.get('retry-after'), text };
    };
    const lookups = async () => {
      const text = await (await fetch(`${svc.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text();
      const n = { index: 0, key: 0 };
      for (const m of text.matchAll(/^edgeleaf_isolate_key_lookups_total\{[^}]*object="(\w+)"[^}]*\} (\d+)/gm)) n[m[1]] += Number(m[2]);
      return n;
    };
    const hex = (n) => Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');
    const { ids, limited, admin } = made.keys;
    // 400 made-up keys, 50 at a time, the old keys among the first. An old
    // key may be refused for load once, in the first fifty only (a typed 503
    // `store_unavailable` with Retry-After: its first lookup copies it out
    // of the index while the flood's first fifty ask the same index, on two
    // busy cores; seen at load 7); a client asks again, so it is sent again
    // in the next fifty, where it must be served. Refused again, or later,
    // or otherwise, it is the flood costing a real key: red.
    const old = [[ids.token], [limited.token, '/v1/tags'], [admin.token, '/v1/keys']];
    const madeUp = Array.from({ length: 400 }, () => [`elk_${hex(12)}_${hex(64)}`]);
    let waiting = old;
    let oldAsks = 0;
    const refusedForLoad = [];
    for (let i = 0; i < madeUp.length; i += 50) {
      const batch = [...waiting, ...madeUp.slice(i, i + 50)];
      const answers = await Promise.all(batch.map(([t, path]) => as(t, path)));
      oldAsks += waiting.length;
      const again = [];
      answers.slice(0, waiting.length).forEach((a, j) => {
        if (a.status === 200) return;
        const [token, path = '/v1/snowflake'] = waiting[j];
        const which = `the old key ${token.slice(0, 16)}… on ${path}`;
        assert.equal(i, 0, `${which} refused after the first fifty: ${a.status} ${a.text}`);
        assert.equal(a.status, 503, `${which} refused: ${a.status} ${a.text}`);
        assert.equal(JSON.parse(a.text).error.code, 'store_unavailable', `${which}: ${a.text}`);
        assert.ok(Number(a.retryAfter) >= 1, `${which}: a 503 without Retry-After: ${a.text}`);
        refusedForLoad.push(`${path} ${a.text}`);
        again.push(waiting[j]);
      });
      for (const a of answers.slice(waiting.length)) assert.equal(a.status, 403, a.text);
      waiting = again;
    }
    assert.deepEqual(waiting, [], `old keys never served during the flood (refused: ${refusedForLoad})`);
    if (refusedForLoad.length) console.log(`old keys refused for load in the first fifty, then served: ${refusedForLoad.join('; ')}`);
    const n = await lookups();
    console.log(`upgrade under a flood: ${madeUp.length} made-up keys, ${oldAsks} asks of old ones, calls to the index ${n.index}, to key objects ${n.key}`);
    // At most the first fifty (and the old keys) in flight asked the index (its first answers said none remain).
    assert.ok(n.index <= 50 + old.length, JSON.stringify(n));
    // Each made-up key's object asked once; an old key's each time it was
    // not yet cached (at most once per ask).
    assert.ok(n.key >= madeUp.length + old.length && n.key <= madeUp.length + oldAsks, JSON.stringify(n));
    assert.equal((await as(admin.token, '/v1/keys')).status, 200);
  } finally {
    await killHard(svc.child);
  }
  assert.ok(indexRows(persist).every((r) => r.hash === ''));
});
