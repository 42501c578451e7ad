// HTTP load on 127.0.0.1: the Worker in workerd through Miniflare's own
// listener (the fastest honest local path: wrangler dev adds a proxy), wrk
// with 64 connections. ROUNDS rounds, each running every route for DURATION
// seconds in turn, so drift over time hits all routes alike. Each figure is
// a ratio within one round — a route against the no-op route of the same
// Worker, a batch route against its same-bytes floor (a test-only route of
// the same Worker answering a prebuilt body of the same size and shape,
// worker/src/routes/floor.rs) — given as the median over rounds and the
// spread (lowest–highest) beside it. The last line is the one to quote.
// Needs wrk (Debian) and the Worker built (scripts/worker.sh). Run by
// `make bench`; ONLY=<text> runs the routes whose name contains it.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as MF from 'miniflare';
import { ROOT, ADMIN, CLIENT } from '../support/service.mjs';
import { saveRows } from './rows.mjs';

const DURATION = Number(process.env.DURATION ?? 10);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const srv = createServer();
await new Promise((r) => srv.listen(0, '127.0.0.1', r));
const { port } = srv.address();
await new Promise((r) => srv.close(r));
const base = `http://127.0.0.1:${port}`;

// TEST_BENCH_FLOOR: the same-bytes floor (answered on loopback hosts alone).
const child = spawn(process.execPath, [join(ROOT, 'tests/support/service.mjs'), mkdtempSync(join(tmpdir(), 'edgeleaf-bench-')), String(port), JSON.stringify({ TEST_BENCH_FLOOR: '1' })], {
  detached: true, stdio: ['ignore', 'pipe', 'inherit'],
});
await new Promise((resolve) => child.stdout.on('data', (d) => String(d).includes('ready') && resolve()));
const call = (path, init = {}, token = CLIENT) => fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}` } });
const view = async () => (await (await call('/v1/monitor', {}, ADMIN)).json());
const monitor = async () => (await view()).counters;

// The naive alternative (tests/bench/naive-worker.mjs) in its own workerd.
let naive;
try {
  const naiveOptions = {
    modules: true,
    scriptPath: fileURLToPath(new URL('./naive-worker.mjs', import.meta.url)),
    compatibilityDate: '2025-01-01',
    durableObjects: { COUNTER: { className: 'Counter', useSQLite: true } },
    host: '127.0.0.1',
    port: 0,
  };
  naive = new MF.Miniflare(MF.convertV4MiniflareOptions ? MF.convertV4MiniflareOptions(naiveOptions) : naiveOptions);
  const naiveBase = String(await naive.ready).replace(/\/$/, '');
  await call('/v1/tags/bench', { method: 'PUT', body: JSON.stringify({ step: 1000 }) }, ADMIN);
  // Segments of 100 IDs, pinned: at this load a segment lasts ~20 ms, so the
  // buffers switch every few dozen requests (Leaf's TP999 spike was there).
  await call('/v1/tags/small', { method: 'PUT', body: JSON.stringify({ step: 100, maxStep: 100 }) }, ADMIN);
  await call('/v1/tags/opaque', { method: 'PUT', body: JSON.stringify({ step: 1000, opaque: { bits: 53 } }) }, ADMIN);
  // A plain tag whose IDs are as long as 53-bit opaque ones (16 digits), so
  // that the JSON each answer formats is the same size.
  await call('/v1/tags/bench16', { method: 'PUT', body: JSON.stringify({ step: 1000, maxId: String(2 ** 52) }) }, ADMIN);
  // Warm up: first segment and worker-ID lease, so steady state is measured.
  for (const p of ['/api/segment/get/small', '/api/segment/get/bench', '/api/snowflake/get/bench', '/v1/segment/bench?count=100', '/v1/segment/opaque?count=1000', '/v1/segment/bench16?count=1000']) await call(p);

  // ONLY=<text>: just the routes whose name contains it (and the no-op, and
  // each batch route's floor). A floor row names its batch route: its body
  // has that route's count of IDs and byte length, measured in its round.
  const idRoutes = [
    ['GET /api/segment/get/bench', '/api/segment/get/bench', 1],
    ['GET /api/segment/get/small (step 100)', '/api/segment/get/small', 1],
    ['naive: DO counter per request', '/naive', 1, naiveBase],
    ['GET /api/snowflake/get/bench', '/api/snowflake/get/bench', 1],
    ['GET /v1/snowflake?count=100', '/v1/snowflake?count=100', 100],
    ['GET /v1/segment/bench?count=100', '/v1/segment/bench?count=100', 100],
    ['GET /api/segment/get/opaque', '/api/segment/get/opaque', 1],
    ['GET /v1/segment/bench?count=1000', '/v1/segment/bench?count=1000', 1000],
    ['GET /v1/segment/bench16?count=1000', '/v1/segment/bench16?count=1000', 1000],
    ['GET /v1/segment/opaque?count=1000', '/v1/segment/opaque?count=1000', 1000],
  ].filter(([name]) => !process.env.ONLY || name.includes(process.env.ONLY));
  const floorName = (name) => `floor: same bytes as ${name.replace('GET ', '')}`;
  // The control: the no-op again, as if it were a route. Its ratios to the
  // no-op are what this machine's noise alone gives every ratio.
  const CONTROL = 'control: the no-op again';
  const routes = [['no-op GET /v1/ping', '/v1/ping', 0], [CONTROL, '/v1/ping', 0]];
  // A single-ID route of this Worker runs right after a no-op of its own
  // (as a batch route after its floor): the machine drifts within a round,
  // and a route measured minutes after the round's first no-op carries it.
  const neighbourName = (name) => `no-op before ${name.replace('GET ', '')}`;
  for (const r of idRoutes) {
    if (r[2] > 1) routes.push([floorName(r[0]), null, 0, base, r[1]]);
    else if (r[3] === undefined) routes.push([neighbourName(r[0]), '/v1/ping', 0]);
    routes.push(r);
  }
  const runs = routes.map(() => []);
  const lua = fileURLToPath(new URL('./latency.lua', import.meta.url));
  for (let round = 0; round < ROUNDS; round++) for (const [k, [name, fixedPath, idsPerReq, at = base, like]] of routes.entries()) {
    let path = fixedPath;
    if (like) {
      // The floor of `like`: as many IDs, as many bytes, as its answer now.
      const body = await (await call(like)).text();
      path = `/test/floor?count=${JSON.parse(body).ids.length}&bytes=${Buffer.byteLength(body)}`;
      const floor = await call(path);
      if (!floor.ok || Buffer.byteLength(await floor.text()) !== Buffer.byteLength(body)) throw new Error(`${path}: the floor's body is not of the batch's size (TEST_BENCH_FLOOR set? the Worker rebuilt?)`);
    }
    const before = await monitor();
    const out = execFileSync('wrk', ['-t2', '-c64', `-d${DURATION}s`, '--latency', '-s', lua, '-H', `Authorization: Bearer ${CLIENT}`, `${at}${path}`], { encoding: 'utf8' });
    const after = await monitor();
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]);
    const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out);
    const p99ms = Number(p99[1]) * { us: 0.001, ms: 1, s: 1000 }[p99[2]];
    const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
    const ids = (after.segmentIds - before.segmentIds) + (after.snowflakeIds - before.snowflakeIds);
    const p999ms = Number(/p999_us (\d+)/.exec(out)[1]) / 1000;
    runs[k].push({
      name, rps, p99ms, p999ms, non2xx, idsPerReq, ids: at === base ? ids : rps * DURATION,
      blocked: after.refillsThatBlocked - before.refillsThatBlocked,
      // Durable Object calls of any kind: tag stores, registry, minters.
      storeCalls: at === base ? after.storeCalls - before.storeCalls + after.minterCalls - before.minterCalls : rps * DURATION,
    });
  }
  // Same-round ratios: `of(k, base, q)` is round r's value of route k over
  // round r's of route `base`, for each round.
  const ratios = (k, b, q = 'rps') => runs[k].map((r, i) => r[q] / runs[b][i][q]);
  const spread = (xs) => ({ mid: median(xs), lo: Math.min(...xs), hi: Math.max(...xs) });
  const rows = runs.map((rs, k) => {
    const ids = rs.reduce((a, r) => a + r.ids, 0);
    const like = routes[k][4];
    const floorOf = routes.findIndex((r) => r[4] === routes[k][1] && r[4]);
    const own = routes.findIndex((r) => r[0] === neighbourName(routes[k][0]));
    const noopOf = own >= 0 ? own : 0;
    return {
      name: rs[0].name, rps: median(rs.map((r) => r.rps)), p99ms: median(rs.map((r) => r.p99ms)), p999ms: median(rs.map((r) => r.p999ms)),
      rpsSpread: spread(rs.map((r) => r.rps)),
      vsNoop: spread(ratios(k, noopOf)), p99VsNoop: spread(ratios(k, noopOf, 'p99ms')),
      isNeighbour: routes[k][0].startsWith('no-op before '),
      vsFloor: floorOf >= 0 ? spread(ratios(k, floorOf)) : undefined,
      isFloor: Boolean(like), idsPerReq: routes[k][2],
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0), blocked: rs.reduce((a, r) => a + r.blocked, 0),
      storeCallsPer1000: ids ? (rs.reduce((a, r) => a + r.storeCalls, 0) * 1000) / ids : 0,
    };
  });
  const [noop] = rows;
  const pc = (x) => `${(100 * x).toFixed(0)}%`;
  const range = (s, f) => `${f(s.mid)} (${f(s.lo)}–${f(s.hi)})`;
  const times = (x) => `${x.toFixed(2)}×`;
  console.log(`\nwrk -t2 -c64 -d${DURATION}s per route × ${ROUNDS} rounds, Miniflare's listener (workerd); ratios within each round: median (lowest–highest)`);
  console.log('route'.padEnd(50), 'req/s (spread)'.padStart(15), 'vs no-op'.padStart(16), 'vs floor'.padStart(16), 'p99 ms'.padStart(7), 'p99 vs no-op'.padStart(20), 'p999 ms'.padStart(8), 'non-2xx'.padStart(8), 'blocking refills'.padStart(17), 'DO calls/1000 IDs'.padStart(18));
  for (const r of rows) {
    const rpsSpread = `${r.rps.toFixed(0)} ±${((50 * (r.rpsSpread.hi - r.rpsSpread.lo)) / r.rps).toFixed(0)}%`;
    console.log(r.name.padEnd(50), rpsSpread.padStart(15), range(r.vsNoop, pc).padStart(16), (r.vsFloor ? range(r.vsFloor, pc) : '').padStart(16),
      r.p99ms.toFixed(1).padStart(7), range(r.p99VsNoop, times).padStart(20), r.p999ms.toFixed(1).padStart(8), String(r.non2xx).padStart(8),
      String(r.blocked).padStart(17), r.storeCallsPer1000.toFixed(2).padStart(18));
  }
  const minted = (await view()).minted;
  if (minted) {
    const s = minted.stalenessMs;
    console.log(`snowflakes from minters: ${minted.served} served, staleness p50 ${s.p50} ms / p99 ${s.p99} ms / max ${s.max} ms, ${minted.dropped} dropped stale, batch ${minted.batch}`);
  }
  const row = (name) => rows.find((r) => r.name === name);
  const idx = (name) => rows.findIndex((r) => r.name === name);
  // The opaque batch against the plain one of the same size (16-digit IDs),
  // and against the short-ID plain one.
  const opaqueVs = {};
  for (const plain of ['GET /v1/segment/bench16?count=1000', 'GET /v1/segment/bench?count=1000']) {
    const o = idx('GET /v1/segment/opaque?count=1000');
    if (o >= 0 && idx(plain) >= 0) {
      opaqueVs[plain] = spread(ratios(o, idx(plain)));
      console.log(`opaque ?count=1000 vs ${plain}: ${range(opaqueVs[plain], pc)} of its req/s (target ≥ 80%)`);
    }
  }
  const report = [];
  const isId = (r) => !r.isFloor && !r.isNeighbour && r !== noop && r.name !== CONTROL && !r.name.startsWith('naive');
  // The step-100 tag is a stress case (a segment load per 100 IDs, by
  // design), not a single-ID route's cost: its own rows below.
  const single = rows.filter((r) => isId(r) && r.idsPerReq === 1 && !r.name.includes('step 100'));
  // Opaque batches have their own target (against plain ones).
  const batch = rows.filter((r) => isId(r) && r.idsPerReq > 1 && !r.name.includes('opaque'));
  const spreadText = (s, f) => `${f(s.lo)}–${f(s.hi)}`;
  for (const r of rows.slice(1)) {
    const base0 = rows.find((x) => x.name === neighbourName(r.name)) ?? noop;
    report.push({
      name: `${r.name}: req/s`, value: r.rps, unit: 'req/s', baseline: { name: base0.name, value: base0.rps }, ratio: r.vsNoop.mid, spread: spreadText(r.vsNoop, pc),
      ...(single.includes(r) ? { target: '≥ 95%', met: r.vsNoop.mid >= 0.95 } : {}),
    });
    if (r.vsFloor) {
      const f = rows.find((x) => x.name === floorName(r.name));
      report.push({ name: `${r.name}: req/s vs its floor`, value: r.rps, unit: 'req/s', baseline: { name: f.name, value: f.rps }, ratio: r.vsFloor.mid, spread: spreadText(r.vsFloor, pc), target: '≥ 90%', met: r.vsFloor.mid >= 0.9 });
    }
    if (!r.isFloor) {
      report.push({
        name: `${r.name}: p99`, value: r.p99ms, unit: 'ms', baseline: { name: base0.name, value: base0.p99ms }, ratio: r.p99VsNoop.mid, spread: spreadText(r.p99VsNoop, times),
        ...(isId(r) ? { target: '≤ 1.2×', met: r.p99VsNoop.mid <= 1.2 } : {}),
      });
    }
  }
  const plain16 = opaqueVs['GET /v1/segment/bench16?count=1000'];
  if (plain16) {
    const o = row('GET /v1/segment/opaque?count=1000');
    const p = row('GET /v1/segment/bench16?count=1000');
    report.push({ name: 'opaque ?count=1000 vs plain of the same size', value: o.rps, unit: 'req/s', baseline: { name: p.name, value: p.rps }, ratio: plain16.mid, spread: spreadText(plain16, pc), target: '≥ 80%', met: plain16.mid >= 0.8 });
  }
  const small = row('GET /api/segment/get/small (step 100)');
  const large = row('GET /api/segment/get/bench');
  if (small && large) {
    for (const q of ['p99ms', 'p999ms']) {
      const ratio = small[q] / large[q];
      report.push({ name: `small step (100): ${q.replace('ms', '')}`, value: small[q], unit: 'ms', baseline: { name: 'the same route, step 1000 (dynamic)', value: large[q] }, target: '≤ 1.2×', met: ratio <= 1.2 });
    }
    report.push({ name: 'small step (100): refills that blocked', value: small.blocked, unit: '', target: '0', met: small.blocked === 0 });
  }
  const naiveRow = row('naive: DO counter per request');
  if (naiveRow && large) {
    report.push({ name: 'naive DO counter: req/s', value: naiveRow.rps, unit: 'req/s', baseline: { name: 'segment route', value: large.rps } });
    report.push({ name: 'naive DO counter: p99', value: naiveRow.p99ms, unit: 'ms', baseline: { name: 'segment route', value: large.p99ms } });
  }
  if (minted) {
    report.push({ name: 'minted snowflakes: staleness p50 / p99', value: `${minted.stalenessMs.p50} / ${minted.stalenessMs.p99}`, unit: 'ms', target: `≤ ${1000} (the bound)`, met: minted.stalenessMs.max <= 1000 });
  }
  const wasm = execFileSync('wc', ['-c', join(ROOT, 'worker/build/index_bg.wasm')], { encoding: 'utf8' }).trim().split(/\s+/)[0];
  report.push({ name: 'the Worker\'s .wasm', value: Number(wasm), unit: 'bytes' });
  // The line to quote: the worst single-ID route, the worst p99 of any ID
  // route (both against the no-op), the worst batch route against its floor,
  // the opaque batch against the plain one of the same size (each the
  // median over rounds of a same-round ratio).
  const worst = (rs, f, pick) => (rs.length ? rs.map(f).reduce((x, y) => pick(x, y)) : NaN);
  const a = worst(single, (r) => r.vsNoop.mid, Math.min);
  const b = worst(rows.filter(isId), (r) => r.p99VsNoop.mid, Math.max);
  const c = worst(batch, (r) => r.vsFloor.mid, Math.min);
  const d = plain16?.mid ?? NaN;
  const control = row(CONTROL);
  if (control) {
    console.log(`${CONTROL} (the noise in every ratio): ${range(control.vsNoop, pc)} of its req/s, p99 ${range(control.p99VsNoop, times)}`);
  }
  const quote = `http: single-ID ${(100 * a).toFixed(0)}% of no-op (p99 ${b.toFixed(2)}x), batch ${(100 * c).toFixed(0)}% of same-bytes floor, opaque ${(100 * d).toFixed(0)}% of plain`;
  console.log(`\n${quote}`);
  saveRows('http', `HTTP: wrk -t2 -c64 -d${DURATION}s × ${ROUNDS} rounds, workerd on 127.0.0.1 (ratios within a round: median, spread lowest–highest)`, report, { quote });
} finally {
  try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
  await naive?.dispose();
}
