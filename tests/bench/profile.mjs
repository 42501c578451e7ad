// Where a route's time goes in workerd: V8's CPU profile of the Worker's
// isolate (the inspector Miniflare opens) while wrk loads one route. Shares
// of a profile stay meaningful on a loaded machine, where req/s do not.
//
//   tests/bench/profile-build.sh /tmp/prof      # the Worker with wasm names
//   EDGELEAF_WORKER_BUILD=/tmp/prof node tests/bench/profile.mjs '/v1/segment/bench?count=1000' …
//
// For each path: the .cpuprofile (target/bench-profile/, opens in Chrome's
// DevTools), the top functions by self time, and the inclusive share of the
// steps a batch answer takes (GROUPS below). DURATION=5 seconds per path.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as MF from 'miniflare';
import { ADMIN, CLIENT, ROOT, v4Options } from '../support/service.mjs';

const DURATION = Number(process.env.DURATION ?? 5);
const TOP = Number(process.env.TOP ?? 25);
const paths = process.argv.slice(2);
if (!paths.length) paths.push('/v1/segment/bench?count=1000');

const freePort = async () => {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
};
const inspectorPort = await freePort();
const v4 = { ...v4Options({ persist: mkdtempSync(join(tmpdir(), 'edgeleaf-prof-')), port: 0, vars: { TEST_BENCH_FLOOR: '1' } }), inspectorPort };
const mf = new MF.Miniflare(MF.convertV4MiniflareOptions ? MF.convertV4MiniflareOptions(v4) : v4);
const base = String(await mf.ready).replace(/\/$/, '');
const call = (path, init = {}, token = CLIENT) => fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}` } });

// The bench's tags (tests/bench/http.bench.mjs).
await call('/v1/tags/bench', { method: 'PUT', body: JSON.stringify({ step: 1000 }) }, ADMIN);
await call('/v1/tags/opaque', { method: 'PUT', body: JSON.stringify({ step: 1000, opaque: { bits: 53 } }) }, ADMIN);
await call('/v1/tags/bench16', { method: 'PUT', body: JSON.stringify({ step: 1000, maxId: String(2 ** 52) }) }, ADMIN);
for (const p of paths) await (await call(p)).arrayBuffer();

// The Worker's isolate among the inspector's targets.
const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
const target = targets.find((t) => !/^miniflare|^core:/i.test(t.title)) ?? targets[0];
const ws = new WebSocket(target.webSocketDebuggerUrl);
await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
let nextId = 1;
const pending = new Map();
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
};
const send = (method, params = {}) => new Promise((resolve) => {
  const id = nextId++;
  pending.set(id, resolve);
  ws.send(JSON.stringify({ id, method, params }));
});

// Inclusive shares: a sample counts for a group when any frame on its stack
// matches. Names are the wasm name section's (demangled Rust paths).
const GROUPS = [
  ['the fetch handler, all of it (wasm)', /edgeleaf_worker::fetch|__wbg_adapter|fetch::\{\{closure/],
  ['JSON of the ID list (IdList + serde_json)', /IdList|serde_json::ser|serde::ser::Serialize/],
  ['u64 → decimal (core::fmt)', /core::fmt::num|fmt::u64|to_string|itoa/],
  ['opaque permutation (encode_all)', /opaque|Opaque|encode_all|feistel|Feistel/],
  ['Response to JS (copy of the body, headers)', /From<worker::response::Response>|Uint8Array|copy_from|ResponseBuilder|new_with_opt_buffer/],
  ['URL parsing (url crate)', /url::parser|url::Url|Url::parse/],
  ['allocator (dlmalloc)', /dlmalloc|__rust_alloc|__rust_dealloc|__rust_realloc|alloc::raw_vec/],
  ['route table (routes::route, captures)', /routes::captures|routes::segments|routes::route/],
  ['auth (authorize)', /auth::authorize|auth::identify|constant_time_eq/],
  ['config (Config::cached)', /Config::cached|config::Config/],
  ['segment buffer (isolate)', /isolate::segments|SegmentDriver|isolate::run/],
  ['(garbage collector)', /^\(garbage collector\)$/],
  ['(program) / (idle)', /^\((program|idle)\)$/],
];

mkdirSync(join(ROOT, 'target/bench-profile'), { recursive: true });
await send('Profiler.enable');
await send('Profiler.setSamplingInterval', { interval: 50 });
for (const path of paths) {
  await send('Profiler.start');
  execFileSync('wrk', ['-t2', '-c64', `-d${DURATION}s`, '-H', `Authorization: Bearer ${CLIENT}`, `${base}${path}`], { encoding: 'utf8' });
  const { result: { profile } } = await send('Profiler.stop');
  const file = join(ROOT, 'target/bench-profile', `${path.replace(/[^a-z0-9]+/gi, '_').replace(/^_|_$/g, '')}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));
  summarize(path, profile, file);
}
ws.close();
await mf.dispose();

function summarize(path, profile, file) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (n) => n.callFrame.functionName || `(anonymous ${n.callFrame.url.split('/').pop()}:${n.callFrame.lineNumber})`;
  const self = new Map();
  const incl = GROUPS.map(() => 0);
  const idle = new Set(['(idle)', '(program)']);
  let total = 0;
  let busy = 0;
  for (const s of profile.samples) {
    const n = byId.get(s);
    total++;
    const nm = name(n);
    self.set(nm, (self.get(nm) ?? 0) + 1);
    if (!idle.has(nm)) busy++;
    const stack = [];
    for (let id = s; id !== undefined; id = parent.get(id)) stack.push(name(byId.get(id)));
    GROUPS.forEach(([, re], i) => { if (stack.some((f) => re.test(f))) incl[i]++; });
  }
  console.log(`\n${path}: ${total} samples, ${(100 * busy / total).toFixed(0)}% busy (not idle/program); ${file}`);
  console.log('  inclusive, % of busy samples:');
  GROUPS.forEach(([label], i) => console.log(`    ${label.padEnd(48)} ${(100 * incl[i] / busy).toFixed(1).padStart(6)}%`));
  console.log(`  top ${TOP} by self time, % of busy samples:`);
  const top = [...self].filter(([nm]) => !idle.has(nm)).sort((a, b) => b[1] - a[1]).slice(0, TOP);
  for (const [nm, n] of top) console.log(`    ${(100 * n / busy).toFixed(1).padStart(6)}%  ${nm.slice(0, 140)}`);
}
