// Steps of the service's own clock under load (issue 18 item 2), and what
// every request gets meanwhile. `runClockSteps()` starts the service in
// workerd under the clock shim (tests/support/clock.mjs), keeps `clients`
// concurrent clients on the Leaf routes (/api/snowflake/get/x,
// /api/segment/get/{tag}) and the JSON routes (/v1/snowflake?count=N,
// /v1/segment/{tag}?count=N), walks the plan of clock steps (back 5 ms, 3 s,
// 60 s; forward 2 s; a kill -9 with the clock behind the minters' saved
// reservations and a restart with it still behind), and resolves the figures
// per phase and every violation found. tests/service/clock-steps.test.mjs is the
// short form for `make test`; the chaos run can take a longer plan.
//
// The rules checked (violations name the phase):
// - every request is answered within BOUND_MS, measured by the client, whose
//   own timeout (CLIENT_TIMEOUT_MS) is far above it, so a hang is measured,
//   not hidden; only requests in flight when the service is killed may go
//   unanswered;
// - every answer is 200 with the IDs asked for, or a typed 503: a JSON body
//   `{ error: { code } }` with a code of REFUSALS and a Retry-After of whole
//   seconds in 1..=MAX_RETRY_AFTER_S;
// - no segment ID twice (the one tag), no snowflake twice (all minters),
//   across the whole run, restart included;
// - no snowflake's timestamp ahead of the highest clock the service could
//   have read by then (the real clock plus the largest offset in force so
//   far: a forward step stays in force in a Durable Object, whose Date.now()
//   never goes back) by more than the borrow, BORROW_MS;
// - once the clock is restored, IDs flow again: > 0 snowflakes and > 0
//   segment IDs in each step's recovery window; and segment IDs, which need
//   no clock, flow in every phase.
//
// The bound, BOUND_MS = 1.5 s: a request may wait at most 1 s for anything
// the clock governs — the isolate's MAX_WAIT_MS (worker/src/isolate.rs) for
// the sequence or a clock slightly behind, a minter's MINT_WAIT_MS
// (src/minted.rs) for the first ID of a batch — and past that it answers
// 503 with Retry-After; the other 0.5 s is for the I/O around that wait
// (Durable Object calls, a SQLite write, HTTP on a loaded 2-core machine:
// the slowest answer without a clock step is well under it, see the warm-up
// row of the table).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { clockShift } from '../support/clock.mjs';
import { spawnService, killHard, ADMIN, CLIENT } from '../support/service.mjs';

/** Longest a request may take, answered either way (see above). */
export const BOUND_MS = 1_500;
/** The clients' own timeout: far above the bound, so a hang shows as one. */
export const CLIENT_TIMEOUT_MS = 10_000;
/**
 * The refusals accepted, all 503 with Retry-After: the service's own clock
 * or stores are not ready, and waiting mends it.
 * - clock_moved_backwards: the clock is behind the last ID minted, beyond
 *   MAX_BACKWARD_MS; Retry-After is how far.
 * - clock_behind_last_report / clock_skew: the same, as the registry sees a
 *   minter's clock (behind what it reported, or off the registry's own) —
 *   accepted only as a 503 with Retry-After: the caller did nothing wrong.
 * - sequence_exhausted: no ID could be minted within the wait (a clock that
 *   stands still, as a Durable Object's does after a step back).
 * - store_unavailable: no batch or segment came within the wait.
 */
export const REFUSALS = ['clock_moved_backwards', 'clock_behind_last_report', 'clock_skew', 'sequence_exhausted', 'store_unavailable'];
/** The largest Retry-After accepted: the largest step back, 60 s, and then some. */
export const MAX_RETRY_AFTER_S = 65;
/**
 * How far ahead of its clock the service may mint: its minters borrow
 * `MINTER_BORROW_MS` (src/minted.rs), so that one batch may run 3 time units
 * past the current one; an isolate's own holder borrows nothing (the npm
 * package's 2 ms is the JS generator's, not the service's).
 */
export const BORROW_MS = 3;
/** Our reading of the real clock vs. the service's: both are whole ms, taken apart. */
const TIMESTAMP_SLACK_MS = 5;

/**
 * The short plan. Each step: set the offset, hold it `holdMs`, set it back
 * to 0, watch `recoverMs`. `kill`: hold the offset `beforeKillMs` first,
 * kill -9 the service, restart it on the same state with the clock still
 * behind, then hold `holdMs` and restore. A forward step's recovery is at
 * least its size: the minters' clocks stand at its maximum until the wall
 * clock catches up.
 */
export const SHORT_PLAN = [
  { name: 'back 5 ms', offsetMs: -5, holdMs: 1_500, recoverMs: 2_000 },
  { name: 'back 3 s', offsetMs: -3_000, holdMs: 2_000, recoverMs: 2_500 },
  // Held 10 s: longer than any wait the service may take, so a request that
  // waits for the wall clock to come back shows as a hang, not as a slow
  // answer released by the restore.
  { name: 'back 60 s', offsetMs: -60_000, holdMs: 10_000, recoverMs: 2_500 },
  { name: 'forward 2 s', offsetMs: 2_000, holdMs: 2_000, recoverMs: 4_000 },
  // 10 s: behind the minters' reservations (DEFAULT_RESERVE_MS, 3 s ahead of
  // their clocks) and the registry's MAX_SKEW_MS (2 s) alike.
  { name: 'kill -9, 10 s back', offsetMs: -10_000, kill: true, beforeKillMs: 1_000, holdMs: 4_000, recoverMs: 4_000 },
];

const ROUTES = [
  { name: 'leaf snowflake', kind: 'snowflake', path: () => '/api/snowflake/get/x' },
  { name: 'leaf segment', kind: 'segment', path: (tag) => `/api/segment/get/${tag}` },
  { name: 'json snowflake', kind: 'snowflake', path: (_, n) => `/v1/snowflake?count=${n}`, json: true },
  { name: 'json segment', kind: 'segment', path: (tag, n) => `/v1/segment/${tag}?count=${n}`, json: true },
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The highest clock the service could have read by real time `t`: over the
 * offsets set so far, each one's last instant plus itself.
 */
export function highWater(offsets, t) {
  let best = -Infinity;
  for (let i = 0; i < offsets.length && offsets[i].from <= t; i++) {
    const until = Math.min(t, offsets[i].to ?? t);
    best = Math.max(best, until + offsets[i].ms);
  }
  return best;
}

/**
 * One request: `{ status, ms, retryAfter, text, body }` (body: the JSON, if
 * it is), or `{ status: 'timeout' | 'network', ms, error }`.
 */
async function request(url, path, timeoutMs) {
  const t0 = performance.now();
  try {
    const res = await fetch(url + path, {
      headers: { authorization: `Bearer ${CLIENT}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    const r = { status: res.status, ms: performance.now() - t0, retryAfter: res.headers.get('retry-after'), text };
    try { r.body = JSON.parse(text); } catch { /* a Leaf text answer */ }
    return r;
  } catch (e) {
    const timeout = e?.name === 'TimeoutError';
    return { status: timeout ? 'timeout' : 'network', ms: performance.now() - t0, error: String(e?.cause?.code ?? e?.message ?? e) };
  }
}

/**
 * Runs the plan; resolves `{ phases, violations, ids, table }`. `phases`: per
 * phase `{ name, requests, withIds, refused, other, timeouts, cut, maxMs,
 * snowflakes, segmentIds }`; `violations`: strings, grouped by phase and
 * rule (empty: everything held).
 *
 * `minters`: SNOWFLAKE_MINTERS, 1 by default. An isolate asks its one home
 * minter, drawn at random, and moves on only when that one fails; with one
 * minter every snowflake comes through a minter with saved reservations,
 * so the kill step surely restarts one behind them (with 16, the restarted
 * isolate's home is most often a minter never used, and the step proves
 * nothing).
 */
export async function runClockSteps({
  plan = SHORT_PLAN,
  clients = 8,
  count = 50,
  warmupMs = 2_000,
  boundMs = BOUND_MS,
  clientTimeoutMs = CLIENT_TIMEOUT_MS,
  minters = 1,
  vars = {},
  tag = 'steps',
  log = () => {},
} = {}) {
  const clock = await clockShift();
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-clock-steps-'));
  // Real time (ours, never shifted) at which each offset took effect.
  const offsets = [{ from: -Infinity, ms: 0 }];
  const setOffset = async (ms) => {
    // Recorded before the write (workerd may read it at once), and the old
    // offset closed only after workerd has surely read the new one: while
    // both are open, both count as in force.
    const prev = offsets[offsets.length - 1];
    offsets.push({ from: Date.now(), ms });
    await clock.setOffsetMs(ms);
    prev.to = Date.now();
  };

  const phases = [];
  const byName = new Map();
  const problems = new Map(); // "phase: rule" → { n, examples }
  const problem = (phase, rule, example) => {
    const key = `${phase}: ${rule}`;
    const p = problems.get(key) ?? { n: 0, examples: [] };
    p.n++;
    if (p.examples.length < 3) p.examples.push(example);
    problems.set(key, p);
  };
  let current;
  const phase = (name, { recovery = false } = {}) => {
    current = { name, recovery, requests: 0, withIds: 0, refused: 0, other: 0, timeouts: 0, cut: 0, maxMs: 0, snowflakes: 0, segmentIds: 0, refusals: {} };
    phases.push(current);
    byName.set(name, current);
    log(`clock-steps: ${name}`);
  };

  const seen = { segment: new Set(), snowflake: new Set() };
  const duplicates = { segment: 0, snowflake: 0 };
  let layout;
  let svc;
  let down = null; // a promise while the service is being killed and restarted
  let up = () => {};
  let killedAt = Infinity;
  let stopping = false;

  const check = (ph, route, r, sentAt) => {
    const where = `${route.name} ${route.path(tag, count)}`;
    if (r.status === 'network' && sentAt <= killedAt && Date.now() >= killedAt) {
      ph.cut++;
      return;
    }
    ph.requests++;
    ph.maxMs = Math.max(ph.maxMs, r.ms);
    if (r.status === 'timeout') {
      ph.timeouts++;
      problem(ph.name, `no answer within the client's ${clientTimeoutMs} ms`, where);
      return;
    }
    if (r.status === 'network') {
      ph.other++;
      problem(ph.name, 'connection failed (the service was not being killed)', `${where}: ${r.error}`);
      return;
    }
    const desc = `${where}: ${[r.status, r.body?.error?.code].filter(Boolean).join(' ')} in ${Math.round(r.ms)} ms`;
    if (r.ms > boundMs) problem(ph.name, `answered after more than ${boundMs} ms`, desc);
    if (r.status === 503) {
      const code = r.body?.error?.code;
      const ra = r.retryAfter;
      if (REFUSALS.includes(code) && /^[0-9]+$/.test(ra ?? '') && Number(ra) >= 1 && Number(ra) <= MAX_RETRY_AFTER_S) {
        ph.refused++;
        ph.refusals[code] = (ph.refusals[code] ?? 0) + 1;
        return;
      }
      ph.other++;
      problem(ph.name, `503 without a listed code and a Retry-After of 1..${MAX_RETRY_AFTER_S} s`, `${desc}, Retry-After ${ra}`);
      return;
    }
    if (r.status !== 200) {
      ph.other++;
      problem(ph.name, 'neither IDs nor a typed 503', `${desc}, Retry-After ${r.retryAfter}: ${r.text.slice(0, 160)}`);
      return;
    }
    let ids;
    try {
      ids = (route.json ? r.body.ids : [r.text.trim()]).map((s) => BigInt(s));
    } catch {
      ids = null;
    }
    const want = route.json ? count : 1;
    if (!ids || ids.length !== want) {
      ph.other++;
      problem(ph.name, `200 without the ${want} ID(s) asked for`, `${desc}: ${r.text.slice(0, 160)}`);
      return;
    }
    ph.withIds++;
    const now = Date.now();
    const set = seen[route.kind];
    for (const id of ids) {
      if (set.has(id)) {
        duplicates[route.kind]++;
        problem(ph.name, `${route.kind} issued twice`, `${where}: ${id}`);
      }
      set.add(id);
    }
    if (route.kind === 'segment') {
      ph.segmentIds += ids.length;
      return;
    }
    ph.snowflakes += ids.length;
    const shift = BigInt(layout.workerBits + layout.sequenceBits);
    const limit = highWater(offsets, now) + BORROW_MS + TIMESTAMP_SLACK_MS;
    for (const id of ids) {
      const ts = layout.epoch + Number(id >> shift) * layout.unitMs;
      if (ts > limit) {
        problem(ph.name, `snowflake ahead of the service's highest clock by more than the borrow (${BORROW_MS} ms)`,
          `${id}: ${ts - (limit - TIMESTAMP_SLACK_MS - BORROW_MS)} ms ahead`);
      }
    }
  };

  const client = async (c) => {
    for (let i = c; !stopping; i++) {
      if (down) await down;
      if (stopping) break;
      const route = ROUTES[i % ROUTES.length];
      const ph = current;
      const sentAt = Date.now();
      const r = await request(svc.url, route.path(tag, count), clientTimeoutMs);
      check(ph, route, r, sentAt);
    }
  };

  const start = async () => {
    svc = await spawnService(persist, { SNOWFLAKE_MINTERS: String(minters), ...vars }, { env: clock.env, capture: true });
    return svc;
  };

  let load = [];
  try {
    await start();
    const admin = (path, init = {}) => fetch(svc.url + path, { ...init, headers: { authorization: `Bearer ${ADMIN}` } });
    const put = await admin(`/v1/tags/${tag}`, { method: 'PUT', body: JSON.stringify({ step: 100 }) });
    if (put.status !== 200) throw new Error(`PUT /v1/tags/${tag}: ${put.status} ${await put.text()}`);
    layout = (await (await admin('/v1/health')).json()).layout;
    // Every isolate, minter and store touched once before anything is measured.
    for (const route of ROUTES) await request(svc.url, route.path(tag, count), clientTimeoutMs);

    phase('warm-up');
    load = Array.from({ length: clients }, (_, c) => client(c));
    await sleep(warmupMs);
    for (const step of plan) {
      if (step.kill) {
        phase(`${step.name}: before the kill`);
        await setOffset(step.offsetMs);
        await sleep(step.beforeKillMs ?? 1_000);
        down = new Promise((r) => { up = r; });
        killedAt = Date.now();
        await killHard(svc.child);
        phase(`${step.name}: restarted behind`);
        await start();
        down = null;
        up();
        await sleep(step.holdMs);
      } else {
        phase(`${step.name}: held`);
        await setOffset(step.offsetMs);
        await sleep(step.holdMs);
      }
      phase(`${step.name}: restored`, { recovery: true });
      await setOffset(0);
      await sleep(step.recoverMs);
    }
    stopping = true;
    await Promise.all(load);
  } finally {
    stopping = true;
    down = null;
    up();
    await clock.setOffsetMs(0).catch(() => {});
    if (svc) await killHard(svc.child);
    await Promise.allSettled(load);
    clock.dispose();
    rmSync(persist, { recursive: true, force: true });
  }

  for (const ph of phases) {
    if (ph.segmentIds === 0) problem(ph.name, 'no segment ID in the phase (segment IDs need no clock)', `${ph.requests} requests`);
    if (ph.recovery && ph.snowflakes === 0) problem(ph.name, 'no snowflake once the clock was restored', `${ph.requests} requests`);
  }
  const violations = [...problems].map(([k, p]) => `${k}: ${p.n}× (e.g. ${p.examples.join('; ')})`);
  return { phases, violations, duplicates, ids: { segment: seen.segment.size, snowflake: seen.snowflake.size }, table: table(phases, clients), boundMs };
}

/** The figures per phase, as a text table. */
export function table(phases, clients) {
  const head = ['phase', 'requests', 'with IDs', 'typed 503', 'other', 'timeouts', 'cut by kill', 'max ms', 'snowflakes', 'segment IDs'];
  const rows = phases.map((p) => [
    p.name, p.requests, p.withIds, p.refused, p.other, p.timeouts, p.cut, Math.round(p.maxMs), p.snowflakes, p.segmentIds,
  ].map(String));
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r) => r.map((c, i) => (i ? c.padStart(width[i]) : c.padEnd(width[i]))).join('  ');
  const refusals = phases.filter((p) => Object.keys(p.refusals).length)
    .map((p) => `  ${p.name}: ${Object.entries(p.refusals).map(([c, n]) => `${c} ${n}`).join(', ')}`);
  return [`clock steps, ${clients} clients:`, line(head), ...rows.map(line), ...(refusals.length ? ['typed 503s by code:', ...refusals] : [])].join('\n');
}

// `node tests/service/clock-steps.mjs [clients]`: the short plan, the table, exit 1 on a violation.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const r = await runClockSteps({ clients: Number(process.argv[2] ?? 8), log: console.log });
  console.log(r.table);
  for (const v of r.violations) console.log(`VIOLATION ${v}`);
  process.exitCode = r.violations.length ? 1 : 0;
}
