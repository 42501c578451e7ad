// The chaos run: every kind of client at once against the service in real
// workerd on 127.0.0.1, while faults are injected, and every ID issued kept
// and checked. `runChaos({ seconds })` resolves the figures; `node
// tests/chaos/chaos.mjs` (make chaos; CHAOS_SECONDS, CHAOS_SEED) prints them
// and exits 1 on any violation.
//
// Clients: the Leaf routes, the JSON batch routes, segment leases (some
// retried with the same requestId), and Node processes running the npm
// package's EdgeleafClient (segments, a long-lived leased snowflake, a churn
// of short-lived ones). They reach the service through a front door (a TCP
// relay on a fixed port) so its restarts are invisible to their URL.
//
// Faults: SIGKILL of the service's process group and a restart on the same
// state after a random pause (up to twice the lease TTL, so leases lapse);
// SIGSTOP of a client process past its lease's TTL + grace (its worker ID is
// recycled while it sleeps); the client processes' clocks stepped back (small
// and large) and forward.
//
// Checks: no ID issued twice (segment IDs per tag, snowflakes across minters
// and leased nodes); every segment ID at most the max_id the store reported
// after it was issued; max_id never falls; under each worker ID, the IDs of a
// later lease generation all come after those of an earlier one (nothing
// minted under a lapsed lease); every snowflake of the service from a minter's
// reserved worker ID; under jsSafe every ID below 2^53; every refusal a typed
// error (4xx, or 503 with Retry-After; never another 5xx).
import net from 'node:net';
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADMIN, CLIENT, spawnService, killHard } from '../js/service.mjs';

const TAG = 'chaos';
const TTL_MS = 2000;
const GRACE_MS = 1000;
const MINTERS = 16;
// Short leases, so pauses and outages make them lapse; jsSafe, so the 112
// worker IDs left to nodes are recycled often (lowest free first).
const VARS = {
  LAYOUT: 'jsSafe',
  LEASE_TTL_MS: String(TTL_MS),
  LEASE_GRACE_MS: String(GRACE_MS),
  MAX_SKEW_MS: '500',
  SNOWFLAKE_MINTERS: String(MINTERS),
  DEFAULT_STEP: '50',
};
const JS_SAFE = 1n << 53n;

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A Set of BigInt IDs without the engine's 2^24 entries per Set limit. */
class IdSet {
  #shards = Array.from({ length: 64 }, () => new Set());
  size = 0;
  /** Adds `id`; false if it was already there. */
  add(id) {
    const shard = this.#shards[Number(id & 63n)];
    if (shard.has(id)) return false;
    shard.add(id);
    this.size++;
    return true;
  }
}

/** A TCP relay on a fixed 127.0.0.1 port to whichever service is up. */
async function frontDoor() {
  let backend = null;
  const open = new Set();
  const server = net.createServer((sock) => {
    if (!backend) return sock.destroy();
    const up = net.connect(backend.port, backend.hostname);
    const pair = [sock, up];
    open.add(pair);
    const end = () => { sock.destroy(); up.destroy(); open.delete(pair); };
    for (const s of pair) { s.on('error', end); s.on('close', end); }
    sock.pipe(up).pipe(sock);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    to(url) {
      backend = url ? new URL(url) : null;
      if (!url) for (const [a, b] of open) { a.destroy(); b.destroy(); }
    },
    close: () => new Promise((r) => { for (const [a, b] of open) { a.destroy(); b.destroy(); } server.close(r); }),
  };
}

export async function runChaos({ seconds = 30, seed = 1, log = () => {} } = {}) {
  const random = rng(seed);
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-chaos-'));
  const front = await frontDoor();
  const stats = {
    seconds, seed, idsChecked: 0, segmentIds: 0, snowflakes: 0, leaseRanges: 0,
    answers: 0, refusals: {}, noAnswer: 0, faults: { kill: 0, pause: 0, clockBack: 0, clockBackLarge: 0, clockForward: 0 },
    duplicates: 0, violations: [], workerIdsReused: 0, maxIdPolls: 0,
  };
  const violation = (what) => { if (stats.violations.length < 50) stats.violations.push(what); };
  const segIds = new IdSet();
  const snowflakes = new IdSet();
  let layout;
  // Per worker ID: generation → [lowest, highest] timestamp (in the layout's units).
  const generations = new Map();
  let segMaxSeen = 0n;

  const segmentId = (id, where) => {
    stats.idsChecked++;
    stats.segmentIds++;
    if (id < 1n || id >= JS_SAFE) violation(`${where}: segment ID ${id} out of range`);
    if (!segIds.add(id)) { stats.duplicates++; violation(`${where}: segment ID ${id} issued twice`); }
    if (id > segMaxSeen) segMaxSeen = id;
  };
  const parts = (id) => {
    const seq = BigInt(layout.sequenceBits);
    const worker = Number((id >> seq) & ((1n << BigInt(layout.workerBits)) - 1n));
    return { worker, ts: id >> (seq + BigInt(layout.workerBits)) };
  };
  const snowflake = (id, where, lease) => {
    stats.idsChecked++;
    stats.snowflakes++;
    if (id < 1n || id >= JS_SAFE) violation(`${where}: snowflake ${id} out of range`);
    if (!snowflakes.add(id)) { stats.duplicates++; violation(`${where}: snowflake ${id} issued twice`); }
    const { worker, ts } = parts(id);
    if (!lease) {
      if (worker >= MINTERS) violation(`${where}: snowflake ${id} from worker ID ${worker}, not a minter's`);
      return;
    }
    if (worker !== lease.workerId) violation(`${where}: snowflake ${id} has worker ID ${worker}, leased ${lease.workerId}`);
    if (worker < MINTERS) violation(`${where}: a node minted under the reserved worker ID ${worker}`);
    const gens = generations.get(worker) ?? new Map();
    generations.set(worker, gens);
    const span = gens.get(lease.generation) ?? [ts, ts];
    gens.set(lease.generation, [ts < span[0] ? ts : span[0], ts > span[1] ? ts : span[1]]);
  };

  // One answer of the service: the body of a 200, or a refusal checked for its shape.
  const refusal = (code) => { stats.refusals[code] = (stats.refusals[code] ?? 0) + 1; };
  const call = async (path, init = {}, token = CLIENT) => {
    let res;
    try {
      res = await fetch(`${front.url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
    } catch {
      stats.noAnswer++; // the service is down: try again shortly
      await sleep(20);
      return null;
    }
    let text;
    try { text = await res.text(); } catch { stats.noAnswer++; return null; }
    stats.answers++;
    if (res.ok) return { status: res.status, text };
    let body;
    try { body = JSON.parse(text); } catch { /* checked below */ }
    const code = body?.error?.code;
    if (typeof code !== 'string' || typeof body.error.message !== 'string') violation(`${path}: ${res.status} without the error shape: ${text.slice(0, 200)}`);
    else refusal(code);
    if (res.status >= 500 && !(res.status === 503 && res.headers.get('retry-after'))) violation(`${path}: ${res.status} ${text.slice(0, 200)}`);
    return null;
  };

  let service = await spawnService(persist, VARS);
  front.to(service.url);
  layout = JSON.parse((await call('/v1/health')).text).layout;
  if ((await call(`/v1/tags/${TAG}`, { method: 'PUT', body: JSON.stringify({ step: 50 }) }, ADMIN)) === null) {
    throw new Error('could not create the tag');
  }

  let stopping = false;
  const loop = async (body) => { while (!stopping) { await body(); await sleep(2); } };
  const clients = [
    loop(async () => {
      const a = await call(`/api/segment/get/${TAG}`);
      if (a) segmentId(BigInt(a.text), 'Leaf segment route');
    }),
    loop(async () => {
      const a = await call(`/api/snowflake/get/${TAG}`);
      if (a) snowflake(BigInt(a.text), 'Leaf snowflake route');
    }),
    loop(async () => {
      const a = await call(`/v1/segment/${TAG}?count=${1 + Math.floor(random() * 200)}`);
      if (a) for (const id of JSON.parse(a.text).ids) segmentId(BigInt(id), 'segment batch route');
    }),
    loop(async () => {
      const a = await call(`/v1/snowflake?count=${1 + Math.floor(random() * 200)}`);
      if (a) for (const id of JSON.parse(a.text).ids) snowflake(BigInt(id), 'snowflake batch route');
    }),
    loop(async () => {
      const body = JSON.stringify({ step: 10 + Math.floor(random() * 190), requestId: `chaos-${random().toString(36).slice(2)}` });
      const a = await call(`/v1/segment/${TAG}/lease`, { method: 'POST', body });
      if (!a) return;
      const { start, end } = JSON.parse(a.text);
      stats.leaseRanges++;
      for (let id = BigInt(start); id <= BigInt(end); id++) segmentId(id, 'segment lease');
      // The answer "lost": the same request again must answer the same range.
      if (random() < 0.2) {
        const again = await call(`/v1/segment/${TAG}/lease`, { method: 'POST', body });
        if (again && again.text !== a.text) violation(`lease retried with its requestId: ${a.text} then ${again.text}`);
      }
    }),
    // max_id never falls, and bounds every segment ID issued before it was read.
    (async () => {
      let last = 0n;
      while (!stopping) {
        const seen = segMaxSeen;
        const a = await call(`/v1/tags/${TAG}`, {}, ADMIN);
        if (a) {
          const maxId = BigInt(JSON.parse(a.text).maxId);
          stats.maxIdPolls++;
          if (maxId < last) violation(`max_id fell: ${last} → ${maxId}`);
          if (seen > maxId) violation(`segment ID ${seen} issued above max_id ${maxId}`);
          last = maxId > last ? maxId : last;
        }
        await sleep(250);
      }
    })(),
  ];

  // Node processes running the npm package.
  const procs = [0, 1].map(() => {
    const child = fork(fileURLToPath(new URL('./client.mjs', import.meta.url)), [front.url, ADMIN, TAG], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.on('message', (m) => {
      for (const id of m.seg) segmentId(BigInt(id), 'EdgeleafClient segment');
      for (const [key, ids] of m.sf) {
        const [workerId, generation] = key.split(':').map(Number);
        for (const id of ids) snowflake(BigInt(id), 'EdgeleafClient snowflake', { workerId, generation });
      }
      for (const [code, n] of Object.entries(m.refusals)) stats.refusals[code] = (stats.refusals[code] ?? 0) + n;
      for (const u of m.untyped) violation(`EdgeleafClient threw an error without a code: ${u}`);
    });
    return { child, exited: new Promise((r) => child.once('exit', r)) };
  });

  // The faults, one at a time, until the end.
  const end = Date.now() + seconds * 1000;
  const faults = (async () => {
    while (Date.now() < end - 3000) {
      await sleep(1000 + random() * 2500);
      const r = random();
      if (r < 0.3) {
        stats.faults.kill++;
        front.to(null);
        await killHard(service.child);
        await sleep(random() * 2 * TTL_MS);
        service = await spawnService(persist, VARS);
        front.to(service.url);
        log(`kill -9 and restart (${stats.idsChecked} IDs so far)`);
      } else if (r < 0.5) {
        stats.faults.pause++;
        const { child } = procs[Math.floor(random() * procs.length)];
        child.kill('SIGSTOP');
        await sleep(TTL_MS + GRACE_MS + 500);
        child.kill('SIGCONT');
      } else {
        const step = r < 0.7 ? -(1 + Math.floor(random() * 50)) : r < 0.85 ? -3000 : 300 + Math.floor(random() * 2000);
        stats.faults[step >= 0 ? 'clockForward' : step > -100 ? 'clockBack' : 'clockBackLarge']++;
        const { child } = procs[Math.floor(random() * procs.length)];
        child.send({ t: 'clock', offset: step });
        await sleep(500 + random() * 1500);
        child.send({ t: 'clock', offset: 0 });
      }
    }
  })();
  await faults;
  await sleep(Math.max(0, end - Date.now()));
  stopping = true;
  for (const { child } of procs) child.send({ t: 'stop' });
  await Promise.all([...clients, ...procs.map((p) => p.exited)]);
  await killHard(service.child);
  await front.close();
  rmSync(persist, { recursive: true, force: true });

  // Fencing: under each worker ID, generations in grant order own disjoint,
  // ordered spans of time.
  for (const [worker, gens] of generations) {
    const order = [...gens].sort((a, b) => a[0] - b[0]);
    if (order.length > 1) stats.workerIdsReused++;
    for (let i = 1; i < order.length; i++) {
      const [g0, [, hi]] = order[i - 1];
      const [g1, [lo]] = order[i];
      if (lo <= hi) violation(`worker ID ${worker}: generation ${g1} minted at ${lo}, not after generation ${g0}'s ${hi}`);
    }
  }
  return stats;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const seconds = Number(process.env.CHAOS_SECONDS ?? 60);
  const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 2 ** 31);
  const t0 = Date.now();
  const stats = await runChaos({ seconds, seed, log: (l) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0)} s] ${l}`) });
  console.log(JSON.stringify(stats, null, 2));
  const f = stats.faults;
  console.log(`chaos: ${seconds} s, seed ${seed}: ${stats.idsChecked} IDs checked (${stats.segmentIds} segment, ${stats.snowflakes} snowflake), ` +
    `faults ${f.kill} kill -9, ${f.pause} pauses past the TTL, ${f.clockBack + f.clockBackLarge + f.clockForward} clock steps; ` +
    `${stats.duplicates} duplicates, ${stats.violations.length} violations`);
  process.exit(stats.violations.length || stats.duplicates ? 1 : 0);
}
