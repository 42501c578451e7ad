// The tag object's lease prune and insert (the statements of
// worker/src/objects/tag_store/schema.rs, remember_lease), on a lease table of
// N rows none of which is due, without and with the index on `created`: what
// one keyed lease costs its tag once a key has sent N new request IDs within
// an hour. SQLite as Node ships it (the engine workerd's storage also runs),
// in memory: the ratio is the figure, not the milliseconds.
// `node tests/bench/lease-prune.bench.mjs [N]` (default 1,000,000).
import { DatabaseSync } from 'node:sqlite';

const N = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = 50;
const ms = {};
for (const index of [false, true]) {
  const db = new DatabaseSync(':memory:');
  db.exec('CREATE TABLE lease(request_id TEXT PRIMARY KEY, start TEXT NOT NULL, end TEXT NOT NULL, step INTEGER NOT NULL, created INTEGER NOT NULL)');
  if (index) db.exec('CREATE INDEX lease_created ON lease(created)');
  const now = Date.now();
  const insert = db.prepare('INSERT INTO lease(request_id, start, end, step, created) VALUES (?, ?, ?, ?, ?)');
  db.exec('BEGIN');
  for (let i = 0; i < N; i++) insert.run(`lease:k:${i}`, String(i * 10 + 1), String(i * 10 + 10), 10, now - 1000 + (i % 1000));
  db.exec('COMMIT');
  const prune = db.prepare('DELETE FROM lease WHERE created < ?');
  const t0 = performance.now();
  for (let r = 0; r < ROUNDS; r++) {
    prune.run(now - 3_600_000);
    insert.run(`lease:k:new-${r}`, '1', '10', 10, now);
  }
  ms[index] = (performance.now() - t0) / ROUNDS;
  db.close();
}
console.log(`lease prune at ${N.toLocaleString('en')} rows: ${ms[false].toFixed(3)} ms a lease without the index, ${ms[true].toFixed(3)} ms with it (${Math.round(ms[false] / ms[true]).toLocaleString('en')}x)`);
