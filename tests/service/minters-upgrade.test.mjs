// The upgrade to regional minters (issue 25, item 3), on a store written by
// the version before regions (tests/service/fixtures/store-v1: the registry
// and minters `minter-0`, `minter-1` as the service at f5072ee wrote them,
// SNOWFLAKE_MINTERS=2; its times moved so that its grants are live now and
// its saved reservations a few seconds ahead). The new minters are new objects
// (`minter-enam-0`, `minter-weur-1`) with no state of their own: each takes
// its predecessor's saved state over at its first request (the old object
// retires), proves the live grant and mints after the saved reservation.
// Without the hand-over it would have no proof, and the registry would keep
// its worker ID from it until the old grant is free (TTL + grace: 70 s).
// Checked, for a colo of each region: snowflakes of its region's worker ID
// within seconds (while its minter waits out the saved reservation, the
// isolate may be served by the other region's), every ID later than the
// saved reservation of the old minter of its worker ID, none twice; the
// minters' grants reclaimed (same worker ID, newer generation) while the old
// ones were live. IDs under a right to mint (worker IDs 2 and 3: the minters'
// rights holders', new with this release) count as their lender's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DatabaseSync } from 'node:sqlite';
import { start } from '../support/service.mjs';

const STORE_V1 = fileURLToPath(new URL('fixtures/store-v1/', import.meta.url));
const MINTERS = 2;
const VARS = { SNOWFLAKE_MINTERS: String(MINTERS), TEST_COLO_HEADER: '1' };
// Two minters over the regions: enam hosts 0, weur 1 (MinterPools::over_regions).
const COLOS = [{ colo: 'ORD', workerId: 0 }, { colo: 'LHR', workerId: 1 }];
const WANT = 500;
// Well within the old grants' life (TTL 60 s) + grace: only a hand-over gets
// the new minters minting by then. An isolate served by the other region's
// minter comes back to its own within RETURN_HOME_MS (10 s).
const LIMIT_MS = 25_000;

const sqliteFiles = (d) => readdirSync(d).filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite');
function withDb(path, f) {
  const db = new DatabaseSync(path);
  try { return f(db); } finally { db.close(); }
}

/** store-v1 copied to `dir`, its times moved so that its latest grant is now. */
function openStoreV1(dir) {
  cpSync(STORE_V1, dir, { recursive: true });
  const registry = join(dir, 'do/-WorkerRegistry', sqliteFiles(join(dir, 'do/-WorkerRegistry'))[0]);
  const grantedAtMs = withDb(registry, (db) => db.prepare('SELECT MAX(reported_at) AS t FROM slots').get().t);
  const d = Date.now() - grantedAtMs;
  const slots = withDb(registry, (db) => {
    db.prepare(`UPDATE slots SET expires_at = expires_at + :d, reported_at = reported_at + :d,
        reported_clock = reported_clock + :d,
        last_timestamp = CASE last_timestamp WHEN 0 THEN 0 ELSE last_timestamp + :d END`).run({ d });
    db.prepare('UPDATE events SET at = at + :d').run({ d });
    return db.prepare('SELECT * FROM slots ORDER BY worker_id').all();
  });
  const minters = sqliteFiles(join(dir, 'do/-SnowflakeMinter')).map((f) => withDb(join(dir, 'do/-SnowflakeMinter', f), (db) => {
    const state = JSON.parse(db.prepare("SELECT v FROM state WHERE k = 'holder'").get().v);
    state.lastTimestampMs += d;
    state.lease.expiresAtMs += d;
    db.prepare("UPDATE state SET v = ? WHERE k = 'holder'").run(JSON.stringify(state));
    return state;
  }));
  return { slots, minters };
}

/** The time and worker ID of a Leaf-layout ID (epoch 2010-11-04, as Twitter's). */
function parts(id) {
  const n = BigInt(id);
  return { ms: Number(n >> 22n) + 1288834974657, workerId: Number((n >> 12n) & 0x3ffn) };
}

test('regional minters take the old minters\' state over: snowflakes within seconds, after the old reservations', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-minters-upgrade-'));
  try {
    const made = JSON.parse(readFileSync(join(STORE_V1, 'made.json'), 'utf8'));
    const { slots, minters } = openStoreV1(dir);
    for (const s of slots) assert.ok(s.expires_at > Date.now() + 30_000, `old grant of worker ID ${s.worker_id} live`);
    const seen = new Set();
    const reserved = Object.fromEntries(minters.map((m) => [m.lease.workerId, m.lastTimestampMs]));
    for (const { colo, workerId } of COLOS) {
      const svc = await start({ persist: dir, vars: VARS });
      try {
        const started = Date.now();
        let drawn = 0;
        let others = 0;
        const statuses = new Map();
        while (drawn < WANT && Date.now() - started < LIMIT_MS) {
          const res = await svc.fetch('/v1/snowflake?count=100', { headers: { 'edgeleaf-test-colo': colo } });
          const text = await res.text();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 503) { await new Promise((r) => setTimeout(r, 100)); continue; } // waiting out the saved reservation
          assert.equal(res.status, 200, text);
          for (const id of JSON.parse(text).ids) {
            const p = parts(id);
            // Under a right to mint (SNOWFLAKE_RIGHTS, on by default): minter
            // i's rights holder's worker ID, MINTERS + i, which no minter of
            // before rights ever held. A right is lent only with a batch its
            // minter minted, so it counts as that minter's.
            const lender = p.workerId >= MINTERS && p.workerId < 2 * MINTERS ? p.workerId - MINTERS : null;
            assert.ok(p.workerId in reserved || lender !== null, `${colo}: ${id} under worker ID ${p.workerId}, not a minter's`);
            if (lender === null) assert.ok(p.ms > reserved[p.workerId], `${colo}: ${id} at ${p.ms}, not after the old minter's reservation ${reserved[p.workerId]}`);
            assert.ok(!seen.has(id), `${id} twice`);
            seen.add(id);
            if ((lender ?? p.workerId) === workerId) drawn++;
            else others++;
          }
        }
        const took = Date.now() - started;
        console.log(`${colo}: ${drawn} IDs of its region's minter (and ${others} of the other's) in ${took} ms after the upgrade (answers ${JSON.stringify([...statuses])})`);
        assert.ok(drawn >= WANT, `${colo}: its region's minter minting within ${LIMIT_MS} ms of the upgrade (the old grant is live for a minute more)`);
        // Reclaimed by proof while live: the same worker ID, a newer grant.
        const { workers } = await (await svc.admin('/v1/workers')).json();
        const now = workers.find((w) => w.workerId === workerId);
        const before = made.workers.find((w) => w.workerId === workerId);
        assert.equal(now.nodeKey, `minter:${workerId}`);
        assert.ok(now.generation > before.generation, JSON.stringify({ now, before }));
      } finally {
        await svc.dispose();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
