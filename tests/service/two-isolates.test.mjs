// Two isolates at once (issue 18, item 5): two Workers in one workerd, with
// isolates and caches of their own, over the same Durable Objects (the second
// binds the first's classes, as in keys.test.mjs's revocation test), both
// drawing segments of one tag and snowflakes concurrently, with a kill -9 of
// the whole service in the middle and a restart on the same persisted state.
// Checked: no ID issued twice, across the isolates and the restart; the tag's
// max_id (a decimal string) never falls, read through either isolate, and
// bounds every segment ID issued before it was read; IDs issued after the
// restart. An opaque tag drawn the same way: its IDs unique across the
// isolates and the restart, and every one revealable afterwards (the tag's
// object reloaded its key, the new isolates got the same). A monotonic tag:
// an answer received before another was sent holds only smaller IDs, across
// the isolates and the restart. Once with the service's minters
// (SNOWFLAKE_MINTERS=16), once with each isolate leasing its own worker ID
// (SNOWFLAKE_MINTERS=0).
//
// `node tests/service/two-isolates.test.mjs serve <persist-dir> <vars-json>` is the
// service itself: both Workers behind one 127.0.0.1 port, /a/... to the first
// and /b/... to the second.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { v4Options, killHard, ADMIN, CLIENT } from '../support/service.mjs';

const TAG = 'two-isolates';
const OPAQUE = 'two-opaque';
const MONO = 'two-mono';
const KINDS = ['segment', 'snowflake', 'opaque'];
const ISOLATES = ['a', 'b'];
const SELF = fileURLToPath(import.meta.url);

async function serve(persist, vars) {
  const { resourcePersistencePath, cf, ...first } = { ...v4Options({ persist, vars }), name: 'edgeleaf' };
  const durableObjects = Object.fromEntries(Object.entries(first.durableObjects).map(([k, { className }]) => [k, { className, scriptName: 'edgeleaf' }]));
  const mf = new Miniflare(convertV4MiniflareOptions({ cf, resourcePersistencePath, workers: [first, { ...first, name: 'second', durableObjects }] }));
  await mf.ready;
  const second = await mf.getWorker('second');
  const server = http.createServer(async (req, res) => {
    try {
      const m = /^\/([ab])(\/.*)$/.exec(req.url);
      if (!m) { res.writeHead(404).end(); return; }
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const init = {
        method: req.method,
        headers: Object.fromEntries(Object.entries(req.headers).filter(([k]) => k === 'authorization' || k === 'content-type')),
        ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      };
      const url = `http://localhost${m[2]}`;
      const answer = m[1] === 'a' ? await mf.dispatchFetch(url, init) : await second.fetch(url, init);
      const body = Buffer.from(await answer.arrayBuffer());
      const headers = Object.fromEntries([...answer.headers].filter(([k]) => k === 'content-type' || k === 'retry-after'));
      res.writeHead(answer.status, headers).end(body);
    } catch (e) {
      res.writeHead(599, { 'content-type': 'text/plain' }).end(String(e?.stack ?? e));
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  console.log(`ready http://127.0.0.1:${server.address().port}`);
}

/** The two-isolate service in a process group of its own; resolves `{ child, url }`. */
async function spawnTwo(persist, vars) {
  const child = spawn(process.execPath, [SELF, 'serve', persist, JSON.stringify(vars)], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('service did not start in 60 s')), 60_000);
    child.stdout.on('data', (d) => {
      const m = /ready (\S+)/.exec(String(d));
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.on('exit', (code) => reject(new Error(`service exited with ${code}`)));
  });
  return { child, url };
}

/**
 * The checks, on what the run recorded: `ids` (every ID answered, as
 * `{ id: BigInt, kind: 'segment' | 'snowflake' | 'opaque', isolate, epoch }`,
 * epoch 0 before the kill and 1 after), `maxIds` (every max_id read, as `{ maxId:
 * string, segMaxBefore: BigInt, isolate, sent, answered }`: the largest
 * segment ID answered before it was sent, and when it was sent and answered,
 * performance.now()), `mono` (each answer of the monotonic tag, as `{ ids:
 * [BigInt], isolate, epoch, sent, answered }`) and `revealed` (opaque IDs
 * revealed after the run: `{ id, belongs, counter }`). Returns the failures.
 */
export function check({ ids, maxIds, mono = [], revealed = [] }) {
  const failures = [];
  for (const kind of KINDS) {
    const seen = new Map();
    for (const r of ids.filter((x) => x.kind === kind)) {
      const first = seen.get(r.id);
      if (first) failures.push(`${kind} ${r.id} issued twice: isolate ${first.isolate} (epoch ${first.epoch}), isolate ${r.isolate} (epoch ${r.epoch})`);
      else seen.set(r.id, r);
    }
  }
  // Reads through the two isolates overlap: one that was answered before
  // another was sent must not show a larger max_id.
  const reads = [];
  for (const r of maxIds) {
    if (typeof r.maxId !== 'string' || !/^[0-9]+$/.test(r.maxId)) { failures.push(`maxId ${JSON.stringify(r.maxId)}: expected a decimal string`); continue; }
    const v = BigInt(r.maxId);
    if (r.segMaxBefore > v) failures.push(`segment ID ${r.segMaxBefore} issued above the max_id ${v} read after it`);
    reads.push({ ...r, v });
  }
  for (const later of reads) {
    const fell = reads.find((earlier) => earlier.answered < later.sent && earlier.v > later.v);
    if (fell) failures.push(`max_id fell: ${fell.v} (via ${fell.isolate}) → ${later.v} (via ${later.isolate}, read after)`);
  }
  for (const isolate of ISOLATES) {
    for (const kind of [...KINDS, 'monotonic']) {
      for (const epoch of [0, 1]) {
        const some = kind === 'monotonic'
          ? mono.some((r) => r.isolate === isolate && r.epoch === epoch)
          : ids.some((r) => r.isolate === isolate && r.kind === kind && r.epoch === epoch);
        if (!some) failures.push(`isolate ${isolate}: no ${kind} IDs ${epoch ? 'after' : 'before'} the restart`);
      }
    }
  }
  // The monotonic tag: increasing within an answer, and an answer received
  // before another was sent holds only smaller IDs (sorted by sending, a
  // running maximum of the answers received before each).
  for (const r of mono) {
    for (let i = 1; i < r.ids.length; i++) {
      if (r.ids[i] <= r.ids[i - 1]) failures.push(`monotonic: ${r.ids[i]} after ${r.ids[i - 1]} in one answer (via ${r.isolate})`);
    }
  }
  const byAnswer = [...mono].sort((a, b) => a.answered - b.answered);
  const bySent = [...mono].sort((a, b) => a.sent - b.sent);
  let k = 0;
  let highest = null;
  for (const later of bySent) {
    while (k < byAnswer.length && byAnswer[k].answered < later.sent) {
      const top = byAnswer[k].ids.at(-1);
      if (highest === null || top > highest.top) highest = { top, r: byAnswer[k] };
      k++;
    }
    if (highest && later.ids[0] <= highest.top) {
      failures.push(`monotonic: ${later.ids[0]} (via ${later.isolate}, epoch ${later.epoch}) answered after ${highest.top} (via ${highest.r.isolate}, epoch ${highest.r.epoch}) was received`);
    }
  }
  // Every opaque ID revealed after the run is the tag's, each its own counter.
  const counters = new Map();
  for (const r of revealed) {
    if (r.belongs !== true) failures.push(`opaque ${r.id}: not revealed as the tag's (belongs ${r.belongs}, counter ${r.counter})`);
    const other = counters.get(r.counter);
    if (other !== undefined && other !== r.id) failures.push(`opaque ${r.id} and ${other}: one counter ${r.counter}`);
    counters.set(r.counter, r.id);
  }
  return failures;
}

const runs = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function twoIsolates(vars) {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-two-'));
  let service = await spawnTwo(persist, vars);
  const ids = [];
  const maxIds = [];
  const mono = [];
  const refusals = {};
  let epoch = 0;
  let up = true;
  let segMax = 0n;
  const call = async (isolate, path, init = {}, token = CLIENT) => {
    const { url } = service;
    try {
      const res = await fetch(`${url}/${isolate}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
      const text = await res.text();
      if (res.ok) return JSON.parse(text);
      const code = JSON.parse(text)?.error?.code;
      assert.ok(res.status < 500 || (res.status === 503 && res.headers.get('retry-after')), `${path} via ${isolate}: ${res.status} ${text}`);
      refusals[code] = (refusals[code] ?? 0) + 1;
    } catch (e) {
      if (up && url === service.url) throw e; // only the kill may leave a request unanswered
    }
    return null;
  };
  try {
    assert.ok(await call('a', `/v1/tags/${TAG}`, { method: 'PUT', body: JSON.stringify({ step: 20 }) }, ADMIN), JSON.stringify(refusals));
    assert.ok(await call('b', `/v1/tags/${OPAQUE}`, { method: 'PUT', body: JSON.stringify({ step: 20, opaque: { bits: 40 } }) }, ADMIN), JSON.stringify(refusals));
    assert.ok(await call('a', `/v1/tags/${MONO}`, { method: 'PUT', body: JSON.stringify({ step: 20, monotonic: true }) }, ADMIN), JSON.stringify(refusals));
    let stopping = false;
    const drawers = ISOLATES.flatMap((isolate) => [
      (async () => {
        while (!stopping) {
          const at = epoch;
          const a = await call(isolate, `/v1/segment/${TAG}?count=${1 + Math.floor(Math.random() * 50)}`);
          for (const id of a?.ids ?? []) {
            const v = BigInt(id);
            ids.push({ id: v, kind: 'segment', isolate, epoch: at });
            if (v > segMax) segMax = v;
          }
          if (!a) await sleep(20);
        }
      })(),
      (async () => {
        while (!stopping) {
          const at = epoch;
          const a = await call(isolate, `/v1/segment/${OPAQUE}?count=${1 + Math.floor(Math.random() * 50)}`);
          for (const id of a?.ids ?? []) ids.push({ id: BigInt(id), kind: 'opaque', isolate, epoch: at });
          if (!a) await sleep(20);
        }
      })(),
      (async () => {
        while (!stopping) {
          const at = epoch;
          const sent = performance.now();
          const a = await call(isolate, `/v1/segment/${MONO}?count=${1 + Math.floor(Math.random() * 20)}`);
          if (a) mono.push({ ids: a.ids.map(BigInt), isolate, epoch: at, sent, answered: performance.now() });
          else await sleep(20);
        }
      })(),
      (async () => {
        while (!stopping) {
          const at = epoch;
          const a = await call(isolate, `/v1/snowflake?count=${1 + Math.floor(Math.random() * 50)}`);
          for (const id of a?.ids ?? []) ids.push({ id: BigInt(id), kind: 'snowflake', isolate, epoch: at });
          if (!a) await sleep(20);
        }
      })(),
      (async () => {
        while (!stopping) {
          const segMaxBefore = segMax;
          const sent = performance.now();
          const a = await call(isolate, `/v1/tags/${TAG}`, {}, ADMIN);
          if (a) maxIds.push({ maxId: a.maxId, segMaxBefore, isolate, sent, answered: performance.now() });
          await sleep(100);
        }
      })(),
    ]);
    const monitors = async () => Promise.all(ISOLATES.map((i) => call(i, '/v1/monitor', {}, ADMIN)));
    await sleep(3000);
    const before = await monitors();
    up = false;
    await killHard(service.child);
    const killedAt = ids.length;
    service = await spawnTwo(persist, vars);
    epoch = 1;
    up = true;
    await sleep(3000);
    const after = await monitors();
    stopping = true;
    await Promise.all(drawers);
    // Opaque IDs from each isolate, before and after the restart, revealed
    // by the tag's object as it is now (its key reloaded from storage).
    const revealed = [];
    for (const isolate of ISOLATES) {
      for (const at of [0, 1]) {
        const sample = ids.filter((r) => r.kind === 'opaque' && r.isolate === isolate && r.epoch === at).slice(-25);
        for (const r of sample) {
          const v = await call(at ? 'a' : 'b', `/v1/tags/${OPAQUE}/reveal`, { method: 'POST', body: JSON.stringify({ id: r.id.toString() }) }, ADMIN);
          revealed.push({ id: r.id, belongs: v?.belongs, counter: v?.counter });
        }
      }
    }
    const counts = Object.fromEntries(ISOLATES.flatMap((i) => KINDS.flatMap((k) => [0, 1].map((e) => [
      `${i} ${k} ${e ? 'after' : 'before'}`, ids.filter((r) => r.isolate === i && r.kind === k && r.epoch === e).length]))));
    return { ids, maxIds, mono, revealed, refusals, before, after, killedAt, counts };
  } finally {
    await killHard(service.child);
    rmSync(persist, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'serve') {
  await serve(process.argv[3], JSON.parse(process.argv[4] ?? '{}'));
} else {
  for (const minters of ['16', '0']) {
    test(`two isolates over the same Durable Objects (SNOWFLAKE_MINTERS=${minters}), kill -9 of the service in the middle: nothing issued twice, max_id only grows, IDs after the restart`, async () => {
      const run = await twoIsolates({ SNOWFLAKE_MINTERS: minters });
      runs[minters] = run;
      console.log(`SNOWFLAKE_MINTERS=${minters}: ${run.ids.length} IDs (${JSON.stringify(run.counts)}), ${run.mono.length} monotonic answers, ${run.revealed.length} opaque IDs revealed, ${run.maxIds.length} max_id reads, refusals ${JSON.stringify(run.refusals)}`);
      // Two isolates indeed: with minters 0 each leased a worker ID of its own.
      if (minters === '0') {
        for (const m of [run.before, run.after]) {
          assert.ok(m[0]?.snowflake && m[1]?.snowflake, JSON.stringify(m));
          assert.notEqual(m[0].snowflake.workerId, m[1].snowflake.workerId, JSON.stringify(m));
        }
      }
      assert.deepEqual(check(run), []);
      const afterRestart = run.ids.filter((r) => r.epoch === 1).length;
      assert.ok(afterRestart > 0, 'IDs issued after the restart');
      assert.ok(run.maxIds.length > 10 && run.maxIds.some((m) => m.isolate === 'b'));
      assert.ok(run.revealed.length >= 40, `${run.revealed.length} opaque IDs revealed`);
    });
  }

  test('the check fails on a planted duplicate, a falling max_id, an ID above max_id, no IDs after the restart, a monotonic answer out of order, an opaque ID not revealed', () => {
    const run = runs['0'] ?? runs['16'];
    assert.ok(run, 'needs a run above');
    const seg = run.ids.find((r) => r.kind === 'segment' && r.isolate === 'a');
    const flake = run.ids.find((r) => r.kind === 'snowflake' && r.isolate === 'a' && r.epoch === 0);
    const opaque = run.ids.find((r) => r.kind === 'opaque' && r.isolate === 'b' && r.epoch === 0);
    const planted = (change) => {
      const copy = { ids: [...run.ids], maxIds: [...run.maxIds], mono: [...run.mono], revealed: [...run.revealed] };
      change(copy);
      return check(copy);
    };
    assert.deepEqual(planted(() => {}), []);
    assert.match(planted((c) => c.ids.push({ ...opaque, isolate: 'a', epoch: 1 })).join('\n'), /opaque \d+ issued twice/);
    const first = run.mono[0];
    assert.match(planted((c) => c.mono.push({ ...first, isolate: 'b', epoch: 1, sent: Infinity, answered: Infinity })).join('\n'), /monotonic: \d+ \(via b, epoch 1\) answered after/);
    assert.match(planted((c) => c.mono.push({ ...first, ids: [first.ids[0] + 2n, first.ids[0] + 1n] })).join('\n'), /in one answer/);
    assert.match(planted((c) => { c.revealed[0] = { ...c.revealed[0], belongs: false }; }).join('\n'), /not revealed as the tag's/);
    assert.match(planted((c) => c.revealed.push({ ...c.revealed[1], id: c.revealed[0].id })).join('\n'), /one counter/);
    assert.match(planted((c) => c.ids.push({ ...seg, isolate: 'b', epoch: 1 })).join('\n'), /segment \d+ issued twice: isolate a/);
    assert.match(planted((c) => c.ids.push({ ...flake, isolate: 'b', epoch: 1 })).join('\n'), /snowflake \d+ issued twice/);
    const late = { segMaxBefore: 0n, isolate: 'b', sent: Infinity, answered: Infinity };
    assert.match(planted((c) => c.maxIds.push({ ...late, maxId: '1' })).join('\n'), /max_id fell/);
    assert.match(planted((c) => c.maxIds.push({ ...late, maxId: Number.MAX_SAFE_INTEGER })).join('\n'), /expected a decimal string/);
    assert.match(planted((c) => c.maxIds.push({ ...late, maxId: c.maxIds.at(-1).maxId, segMaxBefore: BigInt(c.maxIds.at(-1).maxId) + 1n })).join('\n'), /above the max_id/);
    assert.match(planted((c) => { c.ids = c.ids.filter((r) => !(r.isolate === 'b' && r.epoch === 1)); }).join('\n'), /isolate b: no segment IDs after the restart/);
  });
}
