// HTTP load on 127.0.0.1: the Worker in workerd through Miniflare's own
// listener (the fastest honest local path: wrangler dev adds a proxy), wrk
// with 64 connections. ROUNDS rounds, each running every route for DURATION
// seconds in turn, so drift over time hits all routes alike; figures are the
// medians over rounds, against a no-op route of the same Worker. Needs wrk
// (Debian) and the Worker built (scripts/worker.sh). Run by `make bench`.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, ADMIN, CLIENT } from '../tests/js/service.mjs';

const DURATION = Number(process.env.DURATION ?? 10);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const srv = createServer();
await new Promise((r) => srv.listen(0, '127.0.0.1', r));
const { port } = srv.address();
await new Promise((r) => srv.close(r));
const base = `http://127.0.0.1:${port}`;

const child = spawn(process.execPath, [join(ROOT, 'tests/js/service.mjs'), mkdtempSync(join(tmpdir(), 'edgeleaf-bench-')), String(port)], {
  detached: true, stdio: ['ignore', 'pipe', 'inherit'],
});
await new Promise((resolve) => child.stdout.on('data', (d) => String(d).includes('ready') && resolve()));
const call = (path, init = {}, token = CLIENT) => fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}` } });
const view = async () => (await (await call('/v1/monitor', {}, ADMIN)).json());
const monitor = async () => (await view()).counters;

try {
  await call('/v1/tags/bench', { method: 'PUT', body: JSON.stringify({ step: 1000 }) }, ADMIN);
  await call('/v1/tags/opaque', { method: 'PUT', body: JSON.stringify({ step: 1000, opaque: { bits: 53 } }) }, ADMIN);
  // A plain tag whose IDs are as long as 53-bit opaque ones (16 digits), so
  // that the JSON each answer formats is the same size.
  await call('/v1/tags/bench16', { method: 'PUT', body: JSON.stringify({ step: 1000, maxId: String(2 ** 52) }) }, ADMIN);
  // Warm up: first segment and worker-ID lease, so steady state is measured.
  for (const p of ['/api/segment/get/bench', '/api/snowflake/get/bench', '/v1/segment/bench?count=100', '/v1/segment/opaque?count=1000', '/v1/segment/bench16?count=1000']) await call(p);

  // ONLY=<text>: just the routes whose name contains it (and the no-op).
  const routes = [
    ['no-op GET /v1/ping', '/v1/ping', 0],
    ['GET /api/segment/get/bench', '/api/segment/get/bench', 1],
    ['GET /api/snowflake/get/bench', '/api/snowflake/get/bench', 1],
    ['GET /v1/snowflake?count=100', '/v1/snowflake?count=100', 100],
    ['GET /v1/segment/bench?count=100', '/v1/segment/bench?count=100', 100],
    ['GET /api/segment/get/opaque', '/api/segment/get/opaque', 1],
    ['GET /v1/segment/bench?count=1000', '/v1/segment/bench?count=1000', 1000],
    ['GET /v1/segment/bench16?count=1000', '/v1/segment/bench16?count=1000', 1000],
    ['GET /v1/segment/opaque?count=1000', '/v1/segment/opaque?count=1000', 1000],
  ].filter(([name], i) => i === 0 || !process.env.ONLY || name.includes(process.env.ONLY));
  const runs = routes.map(() => []);
  for (let round = 0; round < ROUNDS; round++) for (const [k, [name, path, idsPerReq]] of routes.entries()) {
    const before = await monitor();
    const out = execFileSync('wrk', ['-t2', '-c64', `-d${DURATION}s`, '--latency', '-H', `Authorization: Bearer ${CLIENT}`, `${base}${path}`], { encoding: 'utf8' });
    const after = await monitor();
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]);
    const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out);
    const p99ms = Number(p99[1]) * { us: 0.001, ms: 1, s: 1000 }[p99[2]];
    const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
    const ids = (after.segmentIds - before.segmentIds) + (after.snowflakeIds - before.snowflakeIds);
    runs[k].push({
      name, rps, p99ms, non2xx, idsPerReq, ids,
      blocked: after.refillsThatBlocked - before.refillsThatBlocked,
      // Durable Object calls of any kind: tag stores, registry, minters.
      storeCalls: after.storeCalls - before.storeCalls + after.minterCalls - before.minterCalls,
    });
  }
  const rows = runs.map((rs) => {
    const ids = rs.reduce((a, r) => a + r.ids, 0);
    return {
      name: rs[0].name, rps: median(rs.map((r) => r.rps)), p99ms: median(rs.map((r) => r.p99ms)),
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0), blocked: rs.reduce((a, r) => a + r.blocked, 0),
      storeCallsPer1000: ids ? (rs.reduce((a, r) => a + r.storeCalls, 0) * 1000) / ids : 0,
    };
  });
  const [noop] = rows;
  console.log(`\nwrk -t2 -c64 -d${DURATION}s per route × ${ROUNDS} rounds (medians), Miniflare's listener (workerd), same run`);
  console.log('route'.padEnd(34), 'req/s'.padStart(8), 'vs no-op'.padStart(9), 'p99 ms'.padStart(8), 'p99 vs'.padStart(7), 'non-2xx'.padStart(8), 'blocking refills'.padStart(17), 'DO calls/1000 IDs'.padStart(18));
  for (const r of rows) {
    console.log(r.name.padEnd(34), r.rps.toFixed(0).padStart(8), `${((100 * r.rps) / noop.rps).toFixed(0)}%`.padStart(9),
      r.p99ms.toFixed(1).padStart(8), `${(r.p99ms / noop.p99ms).toFixed(2)}×`.padStart(7), String(r.non2xx).padStart(8),
      String(r.blocked).padStart(17), r.storeCallsPer1000.toFixed(2).padStart(18));
  }
  const minted = (await view()).minted;
  if (minted) {
    const s = minted.stalenessMs;
    console.log(`snowflakes from minters: ${minted.served} served, staleness p50 ${s.p50} ms / p99 ${s.p99} ms / max ${s.max} ms, ${minted.dropped} dropped stale, batch ${minted.batch}`);
  }
  const row = (name) => rows.find((r) => r.name === name);
  const opaque = row('GET /v1/segment/opaque?count=1000');
  for (const plain of [row('GET /v1/segment/bench?count=1000'), row('GET /v1/segment/bench16?count=1000')]) {
    if (plain && opaque) {
      console.log(`opaque ?count=1000 vs ${plain.name}: ${((100 * opaque.rps) / plain.rps).toFixed(0)}% of its req/s (target >= 80%)`);
    }
  }
} finally {
  try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
}
