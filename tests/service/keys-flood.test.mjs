// A flood of made-up API keys against the real Worker in workerd: anyone,
// with no credential, can send `Authorization: Bearer elk_<12 hex>_<64 hex>`
// with a new key ID on every request. Each is answered 403 quickly; each
// costs one call to a Durable Object of that key ID alone (a throwaway
// object: no storage is made for an unknown key), none to the index of keys;
// the keys in use stay in the isolate's cache (a flood of unknown IDs cannot
// push them out); a malformed token and a repeated unknown ID cost no call
// at all (once its first answer is cached). Counted isolate-side, by `/metrics`'
// `edgeleaf_isolate_key_lookups_total{object="index"|"key"}`.
// FLOOD_TOKENS=<n> sets the flood's size.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { start, ADMIN } from '../support/service.mjs';

const N = Number(process.env.FLOOD_TOKENS ?? 1000);
// KEY_CACHE_MS (worker/rules/src/access.rs): how long a lookup is trusted.
const KEY_CACHE_MS = 10_000;

let svc;
const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-keys-flood-'));
before(async () => {
  svc = await start({ persist });
});
after(async () => { await svc?.dispose(); });

const randomToken = () => `elk_${randomBytes(6).toString('hex')}_${randomBytes(32).toString('hex')}`;
const as = (token, path = '/v1/snowflake') => svc.fetch(path, {}, token);

/** This isolate's key lookups so far, by object called. */
async function lookups() {
  const text = await (await svc.admin('/metrics')).text();
  const n = { index: 0, key: 0 };
  for (const m of text.matchAll(/^edgeleaf_isolate_key_lookups_total\{[^}]*object="(\w+)"[^}]*\} (\d+)/gm)) n[m[1]] += Number(m[2]);
  return n;
}

async function makeKey(spec) {
  const res = await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify(spec) });
  const key = await res.json();
  assert.equal(res.status, 201, JSON.stringify(key));
  return key;
}

/** Sends each token once, `width` at a time; resolves every latency (ms). */
async function flood(tokens, width = 50) {
  const took = [];
  const wrong = [];
  for (let i = 0; i < tokens.length; i += width) {
    await Promise.all(tokens.slice(i, i + width).map(async (token) => {
      const t0 = performance.now();
      const res = await as(token);
      const text = await res.text();
      took.push(performance.now() - t0);
      if (res.status !== 403 || JSON.parse(text).error?.code !== 'forbidden') wrong.push(`${res.status} ${text.slice(0, 120)}`);
    }));
  }
  assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${tokens.length} made-up tokens not refused with 403 forbidden`);
  return took.sort((a, b) => a - b);
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];

test(`a flood of ${N} made-up keys: each refused at the cost of one call to its own throwaway object; keys in use stay cached`, async () => {
  const keys = [
    await makeKey({ name: 'flood ids', scopes: ['ids'] }),
    await makeKey({ name: 'flood monitor', scopes: ['monitor', 'ids'] }),
    await makeKey({ name: 'flood limited', scopes: ['ids'], tags: 'fl*' }),
  ];
  // This isolate's first unknown key: its one question to the index (whether
  // keys from before each key had its own object remain; none here).
  assert.equal((await as(randomToken())).status, 403);
  // Each key in use, used between rounds of the flood: `fetchedAt` is when
  // its lookup last reached its object (a use that cost a call). A lookup is
  // trusted for KEY_CACHE_MS: a key fetched again sooner was pushed out.
  const fetchedAt = new Map();
  const pushedOut = [];
  let useCalls = 0;
  const useKeys = async () => {
    for (const k of keys) {
      const before = await lookups();
      const t0 = Date.now();
      assert.equal((await as(k.token)).status, 200);
      const after = await lookups();
      if (after.key + after.index > before.key + before.index) {
        useCalls += after.key + after.index - before.key - before.index;
        const since = fetchedAt.has(k.id) ? Date.now() - fetchedAt.get(k.id) : Infinity;
        if (since < KEY_CACHE_MS - 100) pushedOut.push(`${k.name}: fetched again ${since} ms after its lookup`);
        fetchedAt.set(k.id, t0);
      }
    }
  };
  await useKeys();
  const start = await lookups();
  const floodCallsBefore = useCalls;
  // Rounds of 300 made-up keys (more than the whole cache held before keys
  // had objects of their own), the keys in use used after each.
  const took = [];
  const t0 = Date.now();
  for (let sent = 0; sent < N; sent += 300) {
    took.push(...await flood(Array.from({ length: Math.min(300, N - sent) }, randomToken)));
    await useKeys();
  }
  const elapsed = Date.now() - t0;
  const end = await lookups();
  took.sort((a, b) => a - b);
  const keyCalls = useCalls - floodCallsBefore;
  console.log(`flood of ${N} made-up keys: ${elapsed} ms (${(elapsed / N).toFixed(2)} ms each); latency at 50 in flight p50 ${pct(took, 50).toFixed(1)} ms, p99 ${pct(took, 99).toFixed(1)} ms, max ${took.at(-1).toFixed(1)} ms; ` +
    `calls to key objects ${end.key - start.key}, to the index ${end.index - start.index}; the keys in use cost ${keyCalls} calls meanwhile`);
  // One call per made-up key ID, to that ID's own object; none to the index
  // of keys; the keys in use fetched again only when their lookup was stale.
  assert.deepEqual(
    { keyObjects: end.key - start.key - keyCalls, index: end.index - start.index, pushedOut },
    { keyObjects: N, index: 0, pushedOut: [] },
  );
  // Every answer within the bound (queued behind 49 others).
  assert.ok(took.at(-1) < 5000, `the slowest answer took ${took.at(-1)} ms`);
});

test('the same made-up key again costs no call, nor does a malformed token; one made-up key sent concurrently costs at most one call per request in flight', async () => {
  const tokens = Array.from({ length: 200 }, randomToken);
  await flood(tokens);
  const first = await lookups();
  await flood(tokens); // repeated within KEY_CACHE_MS: the "no such key" answers are cached
  const malformed = ['elk_', 'elk_abc_def', `elk_${'0'.repeat(12)}`, `elk_${'G'.repeat(12)}_${'0'.repeat(64)}`, `elk_${'0'.repeat(12)}_${'0'.repeat(63)}`,
    `elk_${'0'.repeat(11)}_${'0'.repeat(65)}`, `elk_${'A'.repeat(12)}_${'0'.repeat(64)}`, 'x'.repeat(4000)];
  await flood(malformed);
  const second = await lookups();
  assert.deepEqual({ key: second.key - first.key, index: second.index - first.index }, { key: 0, index: 0 });
  // One made-up key, 100 requests at a time, three times: the requests in
  // flight before the first answer was cached each ask (workerd lets no
  // request share another's I/O), none after.
  const hot = randomToken();
  await flood(Array(100).fill(hot), 100);
  const third = await lookups();
  await flood(Array(200).fill(hot), 100);
  const fourth = await lookups();
  console.log(`one made-up key, 100 concurrent requests: ${third.key - second.key} calls; 200 more: ${fourth.key - third.key}`);
  assert.ok(third.key - second.key >= 1 && third.key - second.key <= 100, JSON.stringify({ second, third }));
  assert.deepEqual({ key: fourth.key - third.key, index: fourth.index - second.index }, { key: 0, index: 0 });
});

test('the objects of made-up keys hold nothing: only the real keys\' objects have storage', async () => {
  await svc.dispose();
  svc = undefined;
  // Miniflare keeps each object's SQLite file in do/-ApiKey/; an object that
  // never wrote has a file with no table at all.
  const dir = join(persist, 'do', '-ApiKey');
  const files = readdirSync(dir).filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite');
  const written = files.filter((f) => {
    const db = new DatabaseSync(join(dir, f));
    try {
      return db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get().n > 0;
    } finally {
      db.close();
    }
  });
  console.log(`${files.length} key objects were asked; ${written.length} hold anything`);
  assert.ok(files.length > N, `only ${files.length} key objects were asked`);
  assert.equal(written.length, 3, 'the three real keys, and nothing for any made-up key');
});
