// Rights to mint (docs/design.md, "Rights to mint"; issue 33, the bill): a
// minter lends an isolate a slice of its rights holder's worker ID
// (SNOWFLAKE_MINTERS + i) for up to 5 minutes, and the isolate mints under it
// at its own clock. So an isolate serving a request every second or so —
// each past the staleness bound (SNOWFLAKE_STALENESS_MS, 1 s) of the batch
// before — calls a minter once a window, not once a request; and its IDs are
// fresh, stamped at the request's time.
//   (a) rights on (the default): requests spaced > 1 s from one isolate cost
//       at most 2 minter calls in all; every ID has a rights worker ID
//       (N..2N: the minter lends first, and the right alone answers an ask
//       it serves, with no batch beside it), and each
//       ID's timestamp lies within 1 s of its request; the right held
//       spans minutes (over 60 s: the rights holder's lease is a lender's,
//       6 minutes, and its reservation 5 minutes ahead);
//   (b) several clients at once, from two isolates over the same objects
//       and one minter (two rights, two slices of its one rights worker ID):
//       no ID twice, and each isolate minted under a right;
//   (c) SNOWFLAKE_RIGHTS = "0": the behaviour before rights — a minter call
//       per request spaced > 1 s, every ID under a batch worker ID (0..N);
//   (d) the service restarted 12 s after its minters lent: a rights holder
//       resumes after the reservation it saved (5 minutes ahead) and its
//       lease's expiry (its worker ID's floor at the registry), and lends
//       nothing until the clock nears them — no ID stamped ahead of the
//       clock, none twice across the restart.
// The isolate's minter calls and rights are its `/v1/monitor` counters.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { start, v4Options, wranglerVars, ADMIN, CLIENT } from '../support/service.mjs';

const N = Number(wranglerVars().SNOWFLAKE_MINTERS);
const REQUESTS = 6;
const SPACING_MS = 1200;
/** How far an ID's time may be from its request's (the staleness bound). */
const FRESH_MS = 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The time and worker ID of a Leaf-layout ID (epoch 2010-11-04, as Twitter's). */
function parts(id) {
  const n = BigInt(id);
  return { ms: Number(n >> 22n) + 1288834974657, workerId: Number((n >> 12n) & 0x3ffn) };
}

const dirs = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'edgeleaf-minter-rights-'));
  dirs.push(d);
  return d;
};
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** This isolate's minted-buffer view and counters (`GET /v1/monitor`). */
async function monitor(admin) {
  const res = await admin('/v1/monitor');
  assert.equal(res.status, 200);
  return res.json();
}

/** `requests` requests of `count` IDs, `SPACING_MS` apart: each request's
 *  send and answer times, and its IDs' parts. */
async function spaced(svc, count, requests = REQUESTS) {
  const answers = [];
  for (let n = 0; n < requests; n++) {
    if (n > 0) await sleep(SPACING_MS);
    const sent = Date.now();
    const res = await svc.fetch(`/v1/snowflake?count=${count}`);
    const text = await res.text();
    const done = Date.now();
    assert.equal(res.status, 200, text);
    answers.push({ sent, done, ids: JSON.parse(text).ids, parts: JSON.parse(text).ids.map(parts) });
  }
  return answers;
}

/** Each ID's time within FRESH_MS of its request's. */
function fresh(answers, label) {
  for (const a of answers) {
    for (const p of a.parts) {
      assert.ok(p.ms >= a.sent - FRESH_MS && p.ms <= a.done + FRESH_MS,
        `${label}: an ID at ${p.ms - a.sent} ms from its request (worker ID ${p.workerId})`);
    }
  }
}

test('(a) rights on: requests spaced past the staleness bound cost at most 2 minter calls, IDs under a rights worker ID, fresh', async () => {
  const svc = await start({ persist: tmp() });
  try {
    const answers = await spaced(svc, 5);
    const m = await monitor(svc.admin);
    const calls = m.counters.minterCalls;
    const workers = answers.map((a) => [...new Set(a.parts.map((p) => p.workerId))].join('/'));
    console.log(`# rights on: ${REQUESTS} requests ${SPACING_MS} ms apart, ${calls} minter calls; worker IDs by request: ${workers.join(' ')}; minted ${JSON.stringify({ rights: m.minted.rights, rightMinted: m.minted.rightMinted, fetches: m.minted.fetches, right: m.minted.right })}`);
    assert.ok(calls <= 2, `${calls} minter calls for ${REQUESTS} requests (worker IDs ${workers.join(' ')})`);
    assert.ok(m.minted.rights >= 1, 'no right received');
    const right = m.minted.right;
    assert.ok(right && right.untilMs - right.fromMs > 60_000, `a right of minutes: ${JSON.stringify(right)}`);
    for (const a of answers) {
      for (const p of a.parts) assert.ok(p.workerId >= N && p.workerId < 2 * N, `worker ID ${p.workerId}: not a rights worker ID (${N}..${2 * N})`);
    }
    fresh(answers, 'rights on');
    const ids = answers.flatMap((a) => a.ids);
    assert.equal(new Set(ids).size, ids.length, 'an ID twice');
    // The rights holder leased its worker ID from the registry under the
    // node key of that ID's minter (`minter:{N + i}`), as a batch holder does.
    const w = answers.at(-1).parts[0].workerId;
    const { workers: slots } = await (await svc.admin('/v1/workers')).json();
    assert.equal(slots.find((s) => s.workerId === w)?.nodeKey, `minter:${w}`);
  } finally {
    await svc.dispose();
  }
});

/** Two Workers (isolates of their own) over one store and the same objects. */
async function serveTwo(persist, vars = {}) {
  const { resourcePersistencePath, cf, ...first } = { ...v4Options({ persist, vars }), name: 'edgeleaf' };
  const durableObjects = Object.fromEntries(Object.entries(first.durableObjects).map(([k, { className }]) => [k, { className, scriptName: 'edgeleaf' }]));
  const mf = new Miniflare(convertV4MiniflareOptions({ cf, resourcePersistencePath, workers: [first, { ...first, name: 'second', durableObjects }] }));
  await mf.ready;
  const second = await mf.getWorker('second');
  const call = (isolate, path, token = CLIENT) => {
    const init = { headers: { authorization: `Bearer ${token}` } };
    const url = `http://localhost${path}`;
    return isolate === 'a' ? mf.dispatchFetch(url, init) : second.fetch(url, init);
  };
  return { call, dispose: () => mf.dispose() };
}

test('(b) rights on, several clients on two isolates at once: no ID twice, both isolates minted under rights', async () => {
  // One minter: both isolates' rights are slices of its one rights worker
  // ID (1), lent by its one ledger.
  const svc = await serveTwo(tmp(), { SNOWFLAKE_MINTERS: '1' });
  const seen = new Map();
  const dups = [];
  let failed = 0;
  const failures = [];
  try {
    // The minter's first request takes its predecessor's state over
    // (`minter-0`, of before regions), and its first batch leases its
    // batch holder (a right alone needs none): a request beside either
    // answers a typed 503 at once (a minter never waits; with more than one
    // minter the isolate asks the next; minters-upgrade and minter-hang
    // test those). Each isolate is served a burst first, so that what
    // follows measures the rights and batches alone.
    for (const isolate of ['a', 'b']) {
      let res;
      for (let k = 0; k < 20; k++) {
        res = await svc.call(isolate, '/v1/snowflake?count=300');
        const text = await res.text();
        if (res.status === 200) {
          for (const id of JSON.parse(text).ids) seen.set(id, isolate);
          break;
        }
        await sleep(100);
      }
      assert.equal(res.status, 200, `isolate ${isolate}: no first snowflake`);
    }
    const end = Date.now() + 4000;
    await Promise.all(['a', 'b'].flatMap((isolate) => Array.from({ length: 4 }, async (_, c) => {
      // Small and large counts: a right mints 4 a unit at the clock, 16 at
      // one clock reading; a larger ask is served from a batch too.
      const count = [1, 7, 40, 300][c];
      while (Date.now() < end) {
        const res = await svc.call(isolate, `/v1/snowflake?count=${count}`);
        const text = await res.text();
        if (res.status !== 200) {
          failed++;
          failures.push(`${res.status} ${text.slice(0, 200)}`);
          continue;
        }
        for (const id of JSON.parse(text).ids) {
          if (seen.has(id)) dups.push(`${id} (isolates ${seen.get(id)} and ${isolate})`);
          else seen.set(id, isolate);
        }
        await sleep(c * 20);
      }
    })));
    const rights = {};
    for (const isolate of ['a', 'b']) {
      const m = await (await svc.call(isolate, '/v1/monitor', ADMIN)).json();
      rights[isolate] = { rights: m.minted.rights, rightMinted: m.minted.rightMinted, minterCalls: m.counters.minterCalls, right: m.minted.right };
    }
    const underRights = [...seen.keys()].filter((id) => parts(id).workerId === 1).length;
    console.log(`# two isolates, 8 clients, 4 s: ${seen.size} IDs (${underRights} under rights), ${failed} failed, ${dups.length} twice; ${JSON.stringify(rights)}`);
    assert.deepEqual(dups.slice(0, 10), [], 'IDs issued twice');
    assert.equal(failed, 0, `a request failed: ${failures.slice(0, 3).join('; ')}`);
    for (const isolate of ['a', 'b']) assert.ok(rights[isolate].rightMinted > 0, `isolate ${isolate} minted nothing under a right`);
  } finally {
    await svc.dispose();
  }
});

test('(d) rights on, the service restarted: the minters lend only after their saved reservations, IDs fresh, none twice', async () => {
  const persist = tmp();
  // One minter: both runs ask the same one (minter 0, rights worker ID 1).
  const vars = { SNOWFLAKE_MINTERS: '1' };
  let svc = await start({ persist, vars });
  let before;
  try {
    before = await spaced(svc, 5, 2);
    assert.ok(before[1].parts.every((p) => p.workerId === 1), `before: worker IDs ${before[1].parts.map((p) => p.workerId)}`);
    // The rights holder saved its reservation (5 minutes ahead) when it
    // leased; restarted 12 s later, it resumes after that reservation.
    await sleep(12_000);
  } finally {
    await svc.dispose();
  }
  svc = await start({ persist, vars });
  try {
    const answers = await spaced(svc, 5);
    const m = await monitor(svc.admin);
    const workers = answers.map((a) => [...new Set(a.parts.map((p) => p.workerId))].join('/'));
    console.log(`# restarted: worker IDs by request ${workers.join(' ')}; ${m.counters.minterCalls} minter calls; minted ${JSON.stringify({ rights: m.minted.rights, right: m.minted.right })}`);
    fresh([...before, ...answers], 'restarted');
    const ids = [...before, ...answers].flatMap((a) => a.ids);
    assert.equal(new Set(ids).size, ids.length, 'an ID twice');
  } finally {
    await svc.dispose();
  }
});

test('(c) SNOWFLAKE_RIGHTS = "0": a minter call per request spaced past the staleness bound, batch worker IDs only', async () => {
  const svc = await start({ persist: tmp(), vars: { SNOWFLAKE_RIGHTS: '0' } });
  try {
    const answers = await spaced(svc, 5);
    const m = await monitor(svc.admin);
    const calls = m.counters.minterCalls;
    console.log(`# rights off: ${REQUESTS} requests ${SPACING_MS} ms apart, ${calls} minter calls; rights ${m.minted.rights}`);
    assert.ok(calls >= REQUESTS, `${calls} minter calls for ${REQUESTS} requests`);
    assert.equal(m.minted.rights, 0);
    for (const a of answers) for (const p of a.parts) assert.ok(p.workerId < N, `worker ID ${p.workerId}: not a batch worker ID (0..${N})`);
    fresh(answers, 'rights off');
  } finally {
    await svc.dispose();
  }
});
