// The tag object's memory of leases under request IDs (its `lease` table) is
// pruned on every keyed lease (rows older than REQUEST_ID_TTL_MS): that
// prune must read only the rows it deletes, by the index on `created`, or one
// key sending new request IDs makes its tag slow for everyone (1M rows: a
// full scan per lease; tests/bench/lease-prune.bench.mjs measures both).
// Checked on the object's own SQLite file, as workerd persisted it: SQLite
// plans the prune through the index, for a tag made by this release and for
// one made before the index existed (dropped here, as 0.1.0 wrote it), whose
// object makes it again at its next request; and the leases were answered.
// And one key's memory is capped (the core's MAX_REMEMBERED_PER_CALLER,
// 1,000, pruned past it by REMEMBERED_PRUNE_MARGIN, 100): a key sending new
// request IDs has its oldest forgotten, never another key's, and a forgotten
// request ID sent again is answered a new segment (never one handed out
// before). Counted (TEST_COUNT_CALLS): a keyed lease reads a few rows, not
// the key's memory, but once to prune it in every 100 of its leases.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start } from '../support/service.mjs';
import { objectFiles, tableNames } from '../support/fixture.mjs';
import { parseCost } from '../bench/bill.mjs';

/** The TagStore SQLite files of `persist` that hold a lease table. */
function leaseTables(persist) {
  return objectFiles(persist, 'TagStore').filter((f) => tableNames(f).includes('lease'));
}

/** How SQLite runs the prune on `file`. */
function prunePlan(file) {
  const db = new DatabaseSync(file, { readOnly: true });
  const plan = db.prepare('EXPLAIN QUERY PLAN DELETE FROM lease WHERE created < 0').all().map((r) => r.detail).join('; ');
  const rows = db.prepare('SELECT COUNT(*) AS n FROM lease').get().n;
  db.close();
  return { plan, rows };
}

async function keyedLeases(svc, tag, token, n, prefix) {
  for (let i = 0; i < n; i++) {
    const res = await svc.fetch(`/v1/segment/${tag}/lease`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ step: 10, requestId: `${prefix}-${i}` }),
    }, token);
    assert.equal(res.status, 200, await res.text());
  }
}

test('the lease prune reads by the index on created, for new tags and for tags made before it', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-lease-table-'));
  try {
    let svc = await start({ persist });
    let token;
    try {
      assert.ok([200, 201].includes((await svc.admin('/v1/tags/pruned', { method: 'PUT', body: JSON.stringify({ step: 10 }) })).status));
      const key = await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'leases', scopes: ['ids'] }) });
      token = (await key.json()).token;
      await keyedLeases(svc, 'pruned', token, 5, 'a');
    } finally {
      await svc.dispose();
    }
    const [file] = leaseTables(persist);
    assert.ok(file, 'the tag object has its lease table');
    let { plan, rows } = prunePlan(file);
    assert.equal(rows, 5, 'five leases remembered');
    assert.match(plan, /USING (COVERING )?INDEX lease_created/, `the prune's plan: ${plan}`);

    // A tag object as the release before this index left it.
    const db = new DatabaseSync(file);
    db.exec('DROP INDEX lease_created');
    db.close();
    ({ plan } = prunePlan(file));
    assert.doesNotMatch(plan, /lease_created/, `dropped: ${plan}`);
    svc = await start({ persist });
    try {
      await keyedLeases(svc, 'pruned', token, 2, 'b');
    } finally {
      await svc.dispose();
    }
    ({ plan, rows } = prunePlan(file));
    assert.equal(rows, 7);
    assert.match(plan, /USING (COVERING )?INDEX lease_created/, `made again at the next request: ${plan}`);
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
});

/** The lease rows of `file`, by the key that leased them (the name's caller part). */
function leaseRowsByKey(file) {
  const db = new DatabaseSync(file, { readOnly: true });
  const rows = db.prepare('SELECT request_id FROM lease').all().map((r) => r.request_id);
  db.close();
  const by = {};
  for (const id of rows) {
    const [len, rest] = [Number(id.split(':')[0]), id.slice(id.indexOf(':') + 1)];
    const key = rest.slice(0, len);
    by[key] = (by[key] ?? 0) + 1;
  }
  return by;
}

test("one key's remembered request IDs are capped at 1,000 (pruned past 1,100) on its tag: its oldest forgotten, another key's kept, a few rows read a lease", async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-lease-cap-'));
  const CAP = 1000; // MAX_REMEMBERED_PER_CALLER
  const MARGIN = 100; // REMEMBERED_PRUNE_MARGIN
  // The rows a keyed lease reads but when it prunes (or first counts) its
  // key's memory. Measured: 10 (the tag's row, its key's credits and
  // remembered lease, the history's bound, the hour's prune).
  const COMMON_READ = 20;
  try {
    const svc = await start({ persist, vars: { TEST_COUNT_CALLS: '1' } });
    const costs = [];
    const lease = async (token, requestId) => {
      const res = await svc.fetch('/v1/segment/capped/lease', {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ step: 10, requestId }),
      }, token);
      const text = await res.text();
      assert.equal(res.status, 200, text);
      costs.push(parseCost(res.headers.get('edgeleaf-test-cost')));
      const { start: s, end } = JSON.parse(text);
      return `${s}..${end}`;
    };
    const tokens = [];
    try {
      assert.ok([200, 201].includes((await svc.admin('/v1/tags/capped', { method: 'PUT', body: JSON.stringify({ step: 10 }) })).status));
      for (const name of ['busy', 'quiet']) {
        const key = await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name, scopes: ['ids'] }) });
        tokens.push((await key.json()).token);
      }
      const [busy, quiet] = tokens;
      const other = await lease(quiet, 'q-0');
      // Past the cap and the margin: the 1,101st lease prunes to the newest 1,000.
      costs.length = 0;
      const got = [];
      for (let i = 0; i <= CAP + MARGIN; i++) got.push(await lease(busy, `b-${i}`));
      const read = costs.map((c) => c.rowsRead);
      const sorted = [...read].sort((a, b) => a - b);
      const heavy = read.map((n, i) => [i, n]).filter(([, n]) => n > COMMON_READ);
      const total = (k) => costs.reduce((a, c) => a + c[k], 0);
      console.log(`${read.length} keyed leases of one key: rows read a lease ${sorted[0]}..${sorted.at(-1)} `
        + `(median ${sorted[read.length >> 1]}, ${(total('rowsRead') / read.length).toFixed(1)} on average), `
        + `rows written ${(total('rowsWritten') / read.length).toFixed(1)} on average; over ${COMMON_READ} read: `
        + `${heavy.length} (${heavy.slice(0, 5).map(([i, n]) => `lease ${i}: ${n}`).join(', ')}${heavy.length > 5 ? ', …' : ''})`);
      // A keyed lease reads a few rows: the key's memory only to prune it,
      // once past the margin (and the lease that prunes reads it all).
      assert.ok(heavy.length <= 1, `leases reading more than ${COMMON_READ} rows: ${heavy.length} (${heavy.slice(0, 5).map(([i, n]) => `lease ${i}: ${n}`).join(', ')}…)`);
      assert.ok(read[CAP + MARGIN] > CAP, `the 1,101st lease prunes, reading the key's ${CAP + MARGIN + 1} leases: ${read[CAP + MARGIN]} rows`);
      // Within the cap: a retry is answered its segment, up to the oldest kept.
      assert.equal(await lease(busy, `b-${CAP + MARGIN}`), got[CAP + MARGIN], 'the newest request ID is remembered');
      assert.equal(await lease(busy, `b-${MARGIN + 1}`), got[MARGIN + 1], 'the 1,000th newest request ID is remembered');
      assert.equal(await lease(quiet, 'q-0'), other, "the other key's request ID is remembered");
      // Beyond it: a new ask, a new segment (after every one handed out).
      for (const i of [0, MARGIN]) {
        const again = await lease(busy, `b-${i}`);
        assert.notEqual(again, got[i], `request ID b-${i} was forgotten`);
        assert.ok(BigInt(again.split('..')[0]) > BigInt(got.at(-1).split('..')[1]), `a new segment: ${again} after ${got.at(-1)}`);
      }
    } finally {
      await svc.dispose();
    }
    const [file] = leaseTables(persist);
    const by = leaseRowsByKey(file);
    const counts = Object.values(by).sort((a, b) => a - b);
    // The 1,000 kept and the two asked again; the other key's one.
    assert.deepEqual(counts, [1, CAP + 2], `rows by key: ${JSON.stringify(by)}`);
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
});

// The object counts each key's remembered leases in memory (so a lease need
// not read them): a new instance — after a restart, an eviction, a deploy —
// counts them again from its table before it counts on, so the cap holds
// across instances (a count started at 0 would let a key hold 1,050 more).
test("the cap holds across a restart of the tag's object: its new instance counts the key's memory again", async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-lease-recount-'));
  const CAP = 1000; // MAX_REMEMBERED_PER_CALLER
  const MARGIN = 100; // REMEMBERED_PRUNE_MARGIN
  try {
    let svc = await start({ persist });
    let token;
    try {
      assert.ok([200, 201].includes((await svc.admin('/v1/tags/recounted', { method: 'PUT', body: JSON.stringify({ step: 10 }) })).status));
      const key = await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'recounted', scopes: ['ids'] }) });
      token = (await key.json()).token;
      await keyedLeases(svc, 'recounted', token, CAP + 50, 'a');
    } finally {
      await svc.dispose();
    }
    const [file] = leaseTables(persist);
    assert.deepEqual(Object.values(leaseRowsByKey(file)), [CAP + 50], 'within the margin: nothing pruned yet');
    svc = await start({ persist });
    try {
      // The 1,101st of the key's leases prunes it to its newest 1,000.
      await keyedLeases(svc, 'recounted', token, MARGIN - 50 + 1, 'b');
    } finally {
      await svc.dispose();
    }
    assert.deepEqual(Object.values(leaseRowsByKey(file)), [CAP], 'pruned by the new instance, at the 1,101st');
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
});
