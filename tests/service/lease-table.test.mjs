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
// 1,000): a key sending new request IDs has its oldest forgotten, never
// another key's, and a forgotten request ID sent again is answered a new
// segment (never one handed out before).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start } from '../support/service.mjs';

/** The TagStore SQLite files of `persist` that hold a lease table. */
function leaseTables(persist) {
  const dir = join(persist, 'do', readdirSync(join(persist, 'do')).find((d) => d.endsWith('TagStore')));
  return readdirSync(dir)
    .filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite')
    .map((f) => join(dir, f))
    .filter((f) => {
      const db = new DatabaseSync(f, { readOnly: true });
      const n = db.prepare("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'lease'").get().n;
      db.close();
      return n > 0;
    });
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

test("one key's remembered request IDs are capped at 1,000 on its tag: its oldest forgotten, another key's kept", async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-lease-cap-'));
  const CAP = 1000;
  try {
    const svc = await start({ persist });
    const lease = async (token, requestId) => {
      const res = await svc.fetch('/v1/segment/capped/lease', {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ step: 10, requestId }),
      }, token);
      const text = await res.text();
      assert.equal(res.status, 200, text);
      const { start: s, end } = JSON.parse(text);
      return `${s}..${end}`;
    };
    let first, other, last;
    const tokens = [];
    try {
      assert.ok([200, 201].includes((await svc.admin('/v1/tags/capped', { method: 'PUT', body: JSON.stringify({ step: 10 }) })).status));
      for (const name of ['busy', 'quiet']) {
        const key = await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name, scopes: ['ids'] }) });
        tokens.push((await key.json()).token);
      }
      const [busy, quiet] = tokens;
      other = await lease(quiet, 'q-0');
      first = await lease(busy, 'b-0');
      for (let i = 1; i < CAP + 20; i++) last = await lease(busy, `b-${i}`);
      // Within the cap: a retry is answered its segment.
      assert.equal(await lease(busy, `b-${CAP + 19}`), last, 'the newest request ID is remembered');
      assert.equal(await lease(quiet, 'q-0'), other, "the other key's request ID is remembered");
      // Beyond it: a new ask, a new segment (after every one handed out).
      const again = await lease(busy, 'b-0');
      assert.notEqual(again, first, 'the oldest request ID was forgotten');
      assert.ok(BigInt(again.split('..')[0]) > BigInt(last.split('..')[1]), `a new segment: ${again} after ${last}`);
    } finally {
      await svc.dispose();
    }
    const [file] = leaseTables(persist);
    const by = leaseRowsByKey(file);
    const counts = Object.values(by).sort((a, b) => a - b);
    assert.deepEqual(counts, [1, CAP], `rows by key: ${JSON.stringify(by)}`);
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
});
