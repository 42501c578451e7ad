// A flood of made-up API keys against the real Worker in workerd: anyone,
// with no credential, can send `Authorization: Bearer elk_<12 hex>_<64 hex>`
// with a new key ID on every request. Each is answered 403 quickly; each
// costs one call to a Durable Object of that key ID alone (a throwaway
// object: no storage is made for an unknown key), none to the index of keys;
// the keys in use stay in the isolate's cache (a flood of unknown IDs cannot
// push them out); a malformed token and a repeated unknown ID cost no call
// at all. Counted isolate-side, by `/metrics`'
// `edgeleaf_isolate_key_lookups_total{object="index"|"key"}`.
// FLOOD_TOKENS=<n> sets the flood's size.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, ADMIN } from '../support/service.mjs';

const N = Number(process.env.FLOOD_TOKENS ?? 1500);
// KEY_CACHE_MS (worker/rules/src/access.rs): how long a lookup is trusted.
const KEY_CACHE_MS = 10_000;

let svc;
before(async () => {
  svc = await start({ persist: mkdtempSync(join(tmpdir(), 'edgeleaf-keys-flood-')) });
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
  // Each real key used once: its lookup is now in the cache.
  for (const k of keys) assert.equal((await as(k.token)).status, 200);
  const cachedAt = Date.now();
  const start = await lookups();

  const tokens = Array.from({ length: N }, randomToken);
  const took = await flood(tokens);
  const flooded = await lookups();
  // The keys in use: still answered from the cache (no call), while their lookups are younger than KEY_CACHE_MS.
  for (const k of keys) assert.equal((await as(k.token)).status, 200);
  const used = await lookups();
  const elapsed = Date.now() - cachedAt;
  console.log(`flood of ${N} made-up keys: ${elapsed} ms; latency p50 ${pct(took, 50).toFixed(1)} ms, p99 ${pct(took, 99).toFixed(1)} ms, max ${took.at(-1).toFixed(1)} ms; ` +
    `calls to key objects ${flooded.key - start.key}, to the index ${flooded.index - start.index}; after, the keys in use cost ${used.key + used.index - flooded.key - flooded.index} calls`);
  assert.ok(elapsed < KEY_CACHE_MS, `the flood took ${elapsed} ms: the cached lookups expired before they could be checked (lower FLOOD_TOKENS)`);
  // One call per made-up key ID, to that ID's own object; none to the index
  // of keys; none for the keys in use (not pushed out of the cache).
  assert.deepEqual(
    { keyObjects: flooded.key - start.key, index: flooded.index - start.index, keysInUse: used.key + used.index - flooded.key - flooded.index },
    { keyObjects: N, index: 0, keysInUse: 0 },
  );
  assert.ok(pct(took, 99) < 1000, `p99 ${pct(took, 99)} ms`);
});

test('the same made-up key again, at once or many times concurrently, and malformed tokens cost no call', async () => {
  const tokens = Array.from({ length: 200 }, randomToken);
  await flood(tokens);
  const first = await lookups();
  await flood(tokens); // repeated within KEY_CACHE_MS: the negative answers are cached
  const hot = randomToken();
  await flood(Array(300).fill(hot), 100); // one unknown ID, 100 at a time: one call
  const malformed = ['elk_', 'elk_abc_def', `elk_${'0'.repeat(12)}`, `elk_${'G'.repeat(12)}_${'0'.repeat(64)}`, `elk_${'0'.repeat(12)}_${'0'.repeat(63)}`,
    `elk_${'0'.repeat(11)}_${'0'.repeat(65)}`, `elk_${'A'.repeat(12)}_${'0'.repeat(64)}`, 'x'.repeat(4000)];
  await flood(malformed);
  const second = await lookups();
  assert.deepEqual({ key: second.key - first.key, index: second.index - first.index }, { key: 1, index: 0 });
});
