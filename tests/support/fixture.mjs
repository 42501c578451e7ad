// Stores written by earlier versions of the service, reopened by tests.
//
// `openStoreV0(dir, { shiftToMs })` copies tests/service/fixtures/store-v0/ (a store
// written at commit 590b7f7, before leases carried a secret; see its
// README.md) to `dir`, a Miniflare persist dir (`resourcePersistencePath`,
// or spawnService's first argument), and moves every stored time by the same
// amount, so that the fixture's latest grant looks made at `shiftToMs`
// (default: now) and its leases are live for their TTL from then.
//
// Uses node:sqlite: unflagged in the Node of node_modules/.bin (22.x ≥ 22.13;
// it prints an ExperimentalWarning); Node 20 would need --experimental-sqlite.
import { cpSync, readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DatabaseSync } from 'node:sqlite';

export const STORE_V0 = fileURLToPath(new URL('../service/fixtures/store-v0/', import.meta.url));

const REGISTRY = 'do/-WorkerRegistry';
const MINTERS = 'do/-SnowflakeMinter';
const sqliteFiles = (d) => readdirSync(d).filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite');

/** The SQLite files of the objects of class `className` in the persist dir
 * `persist` (Miniflare's `do/<script>-<class>/`), one per object. */
export function objectFiles(persist, className) {
  const dir = join(persist, 'do', readdirSync(join(persist, 'do')).find((d) => d.endsWith(`-${className}`)));
  return sqliteFiles(dir).map((f) => join(dir, f));
}

/** The names of the tables an object's SQLite file holds (none for an
 * object that never wrote). */
export function tableNames(file) {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r) => r.name);
  } finally {
    db.close();
  }
}

/** Runs `f(db)` on each named SQLite file, closing it (which folds its WAL in). */
function withDb(path, f) {
  const db = new DatabaseSync(path);
  try {
    return f(db);
  } finally {
    db.close();
  }
}

/**
 * Copies store-v0 to `dir` with its times moved so that its latest grant is
 * at `shiftToMs`. Resolves `{ dir, shiftMs, grantedAtMs, leases, minters, client }`:
 * the registry's rows and the minters' saved states after the shift, and
 * `client`, the legacy-c client store's JSON (also written to
 * `dir/client-legacy-c.json`, shifted), ready to hand to a `store.load()`.
 */
export async function openStoreV0(dir, { shiftToMs = Date.now() } = {}) {
  cpSync(STORE_V0, dir, { recursive: true });
  const registry = join(dir, REGISTRY, sqliteFiles(join(dir, REGISTRY))[0]);
  // The fixture's "now": its latest grant (every lease was granted within a
  // second or two of it).
  const grantedAtMs = withDb(registry, (db) => db.prepare('SELECT MAX(reported_at) AS t FROM slots').get().t);
  const shiftMs = shiftToMs - grantedAtMs;
  // 0 means "none" (no timestamp reported yet): it stays 0.
  const moved = (t) => (t === 0 ? 0 : t + shiftMs);
  const leases = withDb(registry, (db) => {
    db.prepare(`UPDATE slots SET
        expires_at = expires_at + :d,
        reported_at = reported_at + :d,
        reported_clock = reported_clock + :d,
        last_timestamp = CASE last_timestamp WHEN 0 THEN 0 ELSE last_timestamp + :d END`).run({ d: shiftMs });
    db.prepare('UPDATE events SET at = at + :d').run({ d: shiftMs });
    return db.prepare('SELECT * FROM slots ORDER BY worker_id').all();
  });
  const minters = sqliteFiles(join(dir, MINTERS)).map((f) =>
    withDb(join(dir, MINTERS, f), (db) => {
      const state = JSON.parse(db.prepare("SELECT v FROM state WHERE k = 'holder'").get().v);
      state.lastTimestampMs = moved(state.lastTimestampMs);
      if (state.lease) state.lease.expiresAtMs += shiftMs;
      db.prepare("UPDATE state SET v = ? WHERE k = 'holder'").run(JSON.stringify(state));
      return { file: f, state };
    }),
  );
  const client = JSON.parse(readFileSync(join(STORE_V0, 'client-legacy-c.json'), 'utf8'));
  client.lastTimestamp = moved(client.lastTimestamp);
  client.expiresAtMs += shiftMs;
  writeFileSync(join(dir, 'client-legacy-c.json'), JSON.stringify(client, null, 2) + '\n');
  return { dir, shiftMs, grantedAtMs, leases, minters, client };
}
