// Minters near their isolates (issue 25, item 3): two Workers in one workerd
// (isolates of their own, the same Durable Objects), one for a colo in
// western Europe (LHR → weur), one for a colo in eastern North America (ORD →
// enam), set by the test colo header (TEST_COLO_HEADER = "1", loopback only).
// With 16 minters, split over the six regions where objects live by their
// shares (enam 0..2, weur 2..5, apac 5..12, wnam 12..13, eeur 13..15, oc
// 15..16: MinterPools::over_regions), each isolate is served by its own region's
// minters: every ID's worker ID lies in its region's slice (or, under a
// right to mint, in the slice of its minters' rights holders, 16 above; the
// isolate that strayed may finish a right another region's minter lent it). With enam's
// minters unavailable (their worker IDs held by ordinary nodes that leased
// them before the IDs were reserved: a minter without proof waits for such
// a grant to end), the ORD isolate still gets IDs, every request, from
// another region's minters; once the nodes give the IDs back, it comes back
// to its own region's. No ID twice, across both isolates and all phases.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { v4Options, ADMIN, CLIENT } from '../support/service.mjs';

const COLOS = { a: 'LHR', b: 'ORD' };
// Worker IDs of each region's minters (16 minters over the six regions).
const SLICE = { a: [2, 5], b: [0, 2] };
const ROUNDS = 12;
const PARALLEL = 4;
const COUNT = 100;

/** The worker ID of a Leaf-layout ID (41 bits of time, 10 of worker, 12 of sequence). */
const workerId = (id) => Number((BigInt(id) >> 12n) & 0x3ffn);
const inSlice = (w, [lo, hi]) => w >= lo && w < hi;
/**
 * Whether worker ID `w` is its region's: a batch of one of the region's
 * minters, or a right to mint (SNOWFLAKE_RIGHTS, on by default: minter i
 * lends under MINTERS + i) lent by one of them. An isolate that asked other
 * regions' minters while its own were down (`strayed`) may hold a right one
 * of them lent until it ends: a right is minted where it is held, at no
 * call to its lender, so only its batches come home at once.
 */
const MINTERS = 16;
const inRegion = (w, slice, strayed = false) => {
  if (w < MINTERS) return inSlice(w, slice);
  return strayed ? w < 2 * MINTERS : inSlice(w - MINTERS, slice);
};

/** Two Workers over one store: `call(isolate, path, init)` with its colo header. */
async function serveTwo(persist, vars) {
  const { resourcePersistencePath, cf, ...first } = { ...v4Options({ persist, vars }), name: 'edgeleaf' };
  const durableObjects = Object.fromEntries(Object.entries(first.durableObjects).map(([k, { className }]) => [k, { className, scriptName: 'edgeleaf' }]));
  const mf = new Miniflare(convertV4MiniflareOptions({ cf, resourcePersistencePath, workers: [first, { ...first, name: 'second', durableObjects }] }));
  await mf.ready;
  const second = await mf.getWorker('second');
  const call = (isolate, path, init = {}, token = CLIENT) => {
    const headers = { authorization: `Bearer ${token}`, 'edgeleaf-test-colo': COLOS[isolate], ...(init.headers ?? {}) };
    const url = `http://localhost${path}`;
    return isolate === 'a' ? mf.dispatchFetch(url, { ...init, headers }) : second.fetch(url, { ...init, headers });
  };
  return { call, dispose: () => mf.dispose() };
}

/** `ROUNDS` rounds of `PARALLEL` concurrent snowflake batches through `isolate`. */
async function draw(svc, isolate, record) {
  for (let r = 0; r < ROUNDS; r++) {
    await Promise.all(Array.from({ length: PARALLEL }, async () => {
      const res = await svc.call(isolate, `/v1/snowflake?count=${COUNT}`);
      const text = await res.text();
      record.push({ isolate, status: res.status, text, ids: res.status === 200 ? JSON.parse(text).ids : [] });
    }));
  }
}

/** Every answer of 200 holds the COUNT IDs asked; no ID twice. Returns the distinct IDs. */
function checkUnique(all, failures) {
  const seen = new Map();
  for (const r of all) {
    if (r.status === 200 && r.ids.length !== COUNT) failures.push(`isolate ${r.isolate}: ${r.ids.length} IDs for count=${COUNT}`);
    for (const id of r.ids) {
      if (seen.has(id)) failures.push(`${id} issued twice (isolates ${seen.get(id)} and ${r.isolate})`);
      else seen.set(id, r.isolate);
    }
  }
  return seen.size;
}

test('each colo is served by its own region\'s minters; a region down, by another\'s; no ID twice', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-minters-regions-'));
  const failures = [];
  const all = [];
  try {
    // Before minters: ordinary nodes lease worker IDs 0 and 1, which then
    // become enam's minters' (reserved, but held until released).
    const before = await serveTwo(dir, { SNOWFLAKE_MINTERS: '0' });
    const held = [];
    try {
      for (let k = 0; k < SLICE.b[1]; k++) {
        const res = await before.call('a', '/v1/workers/lease', { method: 'POST', body: JSON.stringify({ nodeKey: `holder-${k}`, nodeTime: Date.now() }) }, ADMIN);
        const lease = await res.json();
        assert.equal(res.status, 200, JSON.stringify(lease));
        held.push(lease);
      }
    } finally {
      await before.dispose();
    }
    assert.deepEqual(held.map((l) => l.workerId), [0, 1]);

    const svc = await serveTwo(dir, { SNOWFLAKE_MINTERS: String(MINTERS), TEST_COLO_HEADER: '1' });
    try {
      // Enam's minters down: both colos draw at once.
      const down = [];
      await Promise.all([draw(svc, 'a', down), draw(svc, 'b', down)]);
      for (const r of down) {
        if (r.status !== 200) { failures.push(`enam down: isolate ${r.isolate}: ${r.status} ${r.text}`); continue; }
        for (const id of r.ids) {
          const w = workerId(id);
          if (r.isolate === 'a' && !inRegion(w, SLICE.a)) failures.push(`enam down: LHR got ${id} of worker ID ${w}, expected weur's ${SLICE.a}`);
          if (r.isolate === 'b' && inSlice(w, SLICE.b)) failures.push(`enam down: ORD got ${id} of worker ID ${w}, one of enam's held ${SLICE.b}`);
        }
      }
      all.push(...down);
      const served = down.filter((r) => r.isolate === 'b' && r.status === 200).length;
      assert.equal(served, ROUNDS * PARALLEL, `ORD served every request with enam's minters down: ${failures.slice(0, 5).join('; ')}`);

      // The nodes give enam's worker IDs back.
      for (const l of held) {
        const res = await svc.call('a', `/v1/workers/${l.workerId}`, { method: 'DELETE', body: JSON.stringify({ generation: l.generation, secret: l.secret, lastTimestamp: Date.now() }) }, ADMIN);
        assert.equal(res.status, 200, await res.text());
      }
      // ORD's isolate comes back to its region's minters (within
      // RETURN_HOME_MS = 10 s of leaving them).
      let home = false;
      for (const deadline = Date.now() + 30_000; !home && Date.now() < deadline;) {
        const back = [];
        await draw({ call: svc.call }, 'b', back).catch(() => {});
        all.push(...back);
        home = back.slice(-PARALLEL).every((r) => r.status === 200 && r.ids.every((id) => inRegion(workerId(id), SLICE.b, true)));
        if (!home) await new Promise((r) => setTimeout(r, 500));
      }
      assert.ok(home, 'ORD back on enam\'s minters within 30 s of their return');

      // Both regions up: each colo from its own region's minters.
      const up = [];
      await Promise.all([draw(svc, 'a', up), draw(svc, 'b', up)]);
      for (const r of up) {
        if (r.status !== 200) { failures.push(`both up: isolate ${r.isolate}: ${r.status} ${r.text}`); continue; }
        for (const id of r.ids) {
          const w = workerId(id);
          if (!inRegion(w, SLICE[r.isolate], r.isolate === 'b')) failures.push(`both up: ${COLOS[r.isolate]} got ${id} of worker ID ${w}, expected ${SLICE[r.isolate]}`);
        }
      }
      all.push(...up);
      assert.ok(up.filter((r) => r.status === 200).length === 2 * ROUNDS * PARALLEL, 'every request served');
    } finally {
      await svc.dispose();
    }
    const distinct = checkUnique(all, failures);
    const ids = all.reduce((n, r) => n + r.ids.length, 0);
    const answered = all.filter((r) => r.status === 200).length;
    console.log(`minters-regions: ${ids} IDs (${distinct} distinct) in ${answered} answers through LHR and ORD, ${failures.length} failures`);
    assert.deepEqual(failures.slice(0, 10), []);
    // The IDs themselves counted, not only the answers: every answer whole,
    // every ID once.
    assert.equal(ids, answered * COUNT, `${ids} IDs in ${answered} answers of ${COUNT}`);
    assert.equal(distinct, ids, `${ids - distinct} IDs issued twice`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
