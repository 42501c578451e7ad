// The tag object's memory of leases under request IDs (its `lease` table) is
// pruned on every keyed lease (rows older than REQUEST_ID_TTL_MS): that
// prune must read only the rows it deletes, by the index on `created`, or one
// key sending new request IDs makes its tag slow for everyone (1M rows: a
// full scan per lease; tests/bench/lease-prune.bench.mjs measures both).
// Checked on the object's own SQLite file, as workerd persisted it: SQLite
// plans the prune through the index, for a tag made by this release and for
// one made before the index existed (dropped here, as 0.1.0 wrote it), whose
// object makes it again at its next request; and the leases were answered.
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
