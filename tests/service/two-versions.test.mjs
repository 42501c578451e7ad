// Two releases at once (docs/design.md, "Two releases at once"): during every
// deploy, and through a gradual one, Cloudflare runs the new version beside
// the one before it; each Durable Object runs one of them, and isolates of
// either call objects of either. Here the previous release's Worker (the
// newest in CHANGELOG.md, built from its commit by scripts/release-worker.sh)
// and the Worker in the tree run in one workerd, under load from isolates of
// both, in each arrangement of who hosts which object:
//   - old isolates and new ones, every object new;
//   - old isolates and new ones, every object old;
//   - a tag's root, the catalog and the keys on one version, its regional
//     allocators, the registry and the minters on the other (both ways);
//   - the old release alone under load, then its storage taken over by the
//     new one (old isolates still calling), mid-load;
//   - rolling back: this release alone under load (tags, keyed leases and
//     tails handed back, a key, minters, regional allocators, summaries in
//     the catalog), then its storage taken over by the old one (isolates of
//     this release still calling), mid-load.
// Checked: no ID twice (segment IDs of a plain, a monotonic and an opaque tag,
// keyed leases, handed-back tails, snowflakes), a monotonic tag never answers
// backwards to one caller, and no route fails for more than 1% of either
// version's requests (any answer but 200 counts); work was done on every
// route by both versions; and the views that list tags (`GET /v1/tags`, its
// pages, `/metrics`) list every tag on both, and this release's
// `GET /v1/fleet` charts the loaded tags within 2 + `top` object calls.
//
// Miniflare hosts a class in one Worker (`className`) and binds it by script
// name in the other (`scriptName`), so all objects of a class run one version:
// the mixes within a class that a gradual deploy makes are the arrangements'
// sum, not each one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { ROOT, ADMIN, CLIENT, v4Options } from '../support/service.mjs';

const SECONDS = Number(process.env.TWO_VERSIONS_SECONDS ?? 6);
const LIMIT = 0.01; // the error rate a route may reach for one version
const COLOS = ['LHR', 'IAD', 'NRT'];
// SNOWFLAKE_MINTERS: each version's own, as shipped (the new one may run more
// minters, split otherwise: an isolate of one version calls objects the other
// does not; the registry fences a worker ID that moved region).
// TEST_COUNT_CALLS: this release's answers count their object calls (the
// previous release ignores the variable).
const VARS = { TEST_COLO_HEADER: '1', REGIONAL_ALLOCATORS: '1', TEST_COUNT_CALLS: '1' };
const BINDINGS = {
  TAGS: 'TagStore', CATALOG: 'Catalog', REGISTRY: 'WorkerRegistry', MINTERS: 'SnowflakeMinter',
  KEYS: 'KeyStore', API_KEYS: 'ApiKey', ALLOCATORS: 'RegionalAllocator',
};
const ROOT_SIDE = ['TAGS', 'CATALOG', 'KEYS', 'API_KEYS'];

/** The previous release's build (scripts/release-worker.sh builds it once). */
function previousRelease() {
  const build = execFileSync(join(ROOT, 'scripts/release-worker.sh'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  const version = /releases\/([^/]+)\/worker\/build$/.exec(build)[1];
  return { version, build, toml: join(build, '../wrangler.toml') };
}

/** `[vars]` of a wrangler.toml (`KEY = "value"` lines). */
function varsOf(toml) {
  const text = readFileSync(toml, 'utf8');
  const section = text.slice(text.indexOf('\n[vars]\n') + 1).split(/\n\[/)[0];
  return Object.fromEntries(section.split('\n').map((l) => /^([A-Z_]+)\s*=\s*"([^"]*)"/.exec(l)).filter(Boolean).map((m) => [m[1], m[2]]));
}

/**
 * One Worker's options: `build` its modules, `hosts` the bindings whose
 * class it runs itself; the others bound to `other` by script name.
 */
function worker(name, build, toml, hosts, other) {
  const base = v4Options({ vars: { ...varsOf(toml), ...VARS } });
  const durableObjects = Object.fromEntries(Object.entries(BINDINGS).map(([b, className]) => [
    b, hosts.includes(b) ? { className, useSQLite: true } : { className, useSQLite: true, scriptName: other },
  ]));
  const { cf, resourcePersistencePath, ...rest } = base;
  return {
    ...rest,
    name,
    modulesRoot: build,
    modules: [
      { type: 'ESModule', path: join(build, 'index.js') },
      // The entry module's import (a build with the service binding's entry).
      ...(existsSync(join(build, 'edgeleaf.js')) ? [{ type: 'ESModule', path: join(build, 'edgeleaf.js') }] : []),
      { type: 'CompiledWasm', path: join(build, 'index_bg.wasm') },
    ],
    compatibilityDate: /^compatibility_date = "([0-9-]+)"/m.exec(readFileSync(toml, 'utf8'))[1],
    durableObjects,
  };
}

async function open(persist, workers) {
  const mf = new Miniflare(convertV4MiniflareOptions({ cf: false, resourcePersistencePath: persist, workers }));
  await mf.ready;
  return mf;
}

/** Every ID once, per kind of ID. */
function ledger() {
  const seen = new Map();
  const dups = [];
  return {
    add(kind, ids) {
      let set = seen.get(kind);
      if (!set) seen.set(kind, (set = new Set()));
      for (const id of ids) {
        if (set.has(id)) dups.push(`${kind} ${id}`);
        set.add(id);
      }
    },
    dups,
    size: (kind) => seen.get(kind)?.size ?? 0,
  };
}

/**
 * Load on `fronts` ({ old, new } → a fetch), for `seconds`: each version's
 * isolates draw from every ID route from several colos. Counts answers by
 * version and route; every ID into `ids`.
 */
async function load(fronts, ids, counts, { seconds, token, tags, label }) {
  const end = Date.now() + seconds * 1000;
  let serial = 0;
  const call = async (version, route, path, init = {}, auth = CLIENT) => {
    const colo = COLOS[serial++ % COLOS.length];
    const headers = { 'edgeleaf-test-colo': colo, ...(auth ? { authorization: `Bearer ${auth}` } : {}), ...(init.body ? { 'content-type': 'application/json' } : {}) };
    const key = `${version} ${route}`;
    const c = (counts[key] ??= { ok: 0, failed: 0, codes: {} });
    let res;
    try {
      res = await fronts[version](`http://localhost${path}`, { ...init, headers });
    } catch (e) {
      c.failed++;
      c.codes.threw = (c.codes.threw ?? 0) + 1;
      return null;
    }
    const text = await res.text();
    if (res.status !== 200) {
      c.failed++;
      let code = String(res.status);
      try { code += ` ${JSON.parse(text).error.code}`; } catch { /* a text route */ }
      c.codes[code] = (c.codes[code] ?? 0) + 1;
      if (c.failed <= 3) console.log(`${label}: ${key} ${res.status} ${text.slice(0, 200)}`);
      return null;
    }
    c.ok++;
    return text;
  };
  const loops = [];
  for (const version of Object.keys(fronts)) {
    // Segments of each kind of tag; the monotonic tag's answers to one caller
    // never go back.
    for (const [kind, tag] of Object.entries(tags)) {
      loops.push((async () => {
        let last = -1n;
        while (Date.now() < end) {
          const text = await call(version, `segment ${kind}`, `/v1/segment/${tag}?count=7`);
          if (!text) continue;
          const got = JSON.parse(text).ids.map(BigInt);
          ids.add(`segment ${tag}`, got);
          if (kind === 'monotonic') {
            assert.ok(got[0] > last, `${label}: ${version} monotonic ${got[0]} after ${last}`);
            last = got[got.length - 1];
          }
        }
      })());
    }
    // Leaf's text route on the plain tag.
    loops.push((async () => {
      while (Date.now() < end) {
        const text = await call(version, 'leaf segment', `/api/segment/get/${tags.plain}`);
        if (text) ids.add(`segment ${tags.plain}`, [BigInt(text)]);
      }
    })());
    // Snowflakes, batches and Leaf's text route.
    loops.push((async () => {
      while (Date.now() < end) {
        const text = await call(version, 'snowflake', '/v1/snowflake?count=20');
        if (text) ids.add('snowflake', JSON.parse(text).ids.map(BigInt));
        const one = await call(version, 'leaf snowflake', '/api/snowflake/get/x');
        if (one) ids.add('snowflake', [BigInt(one)]);
      }
    })());
    // Keyed leases of the plain tag under request IDs (one retried under the
    // same ID must answer the same range), their tails handed back.
    loops.push((async () => {
      let n = 0;
      while (Date.now() < end) {
        const requestId = `${label}-${version}-${n++}`;
        const body = JSON.stringify({ step: 20, requestId });
        const text = await call(version, 'lease', `/v1/segment/${tags.plain}/lease`, { method: 'POST', body }, token);
        if (!text) continue;
        const { start, end: last } = JSON.parse(text);
        const again = await call(version, 'lease again', `/v1/segment/${tags.plain}/lease`, { method: 'POST', body }, token);
        if (again) assert.deepEqual([JSON.parse(again).start, JSON.parse(again).end], [start, last], `${label}: ${requestId} asked again`);
        // Use the first five IDs; hand the rest back.
        const used = [];
        for (let id = BigInt(start); id < BigInt(start) + 5n && id <= BigInt(last); id++) used.push(id);
        ids.add(`segment ${tags.plain}`, used);
        if (BigInt(start) + 5n <= BigInt(last)) {
          await call(version, 'lease return', `/v1/segment/${tags.plain}/lease/return`, {
            method: 'POST', body: JSON.stringify({ requestId, start: String(BigInt(start) + 5n), end: last }),
          }, token);
        }
      }
    })());
  }
  await Promise.all(loops);
}

/** Fails on a duplicate, on a route above LIMIT for a version, or on a route that did no work. */
function verdict(label, ids, counts, versions) {
  const lines = Object.entries(counts).sort().map(([k, c]) =>
    `${k}: ${c.ok} ok, ${c.failed} failed${c.failed ? ` ${JSON.stringify(c.codes)}` : ''}`);
  console.log(`${label}:\n  ${lines.join('\n  ')}\n  IDs: ${['segment two-plain', 'segment two-mono', 'segment two-opaque', 'snowflake'].map((k) => `${k} ${ids.size(k)}`).join(', ')}`);
  assert.deepEqual(ids.dups.slice(0, 10), [], `${label}: IDs issued twice`);
  for (const [key, c] of Object.entries(counts)) {
    const rate = c.failed / (c.ok + c.failed);
    assert.ok(rate <= LIMIT, `${label}: ${key} failed ${c.failed} of ${c.ok + c.failed} (${(rate * 100).toFixed(1)}%) ${JSON.stringify(c.codes)}`);
  }
  for (const version of versions) {
    for (const route of ['segment plain', 'segment monotonic', 'segment opaque', 'leaf segment', 'snowflake', 'leaf snowflake', 'lease', 'lease return']) {
      assert.ok(counts[`${version} ${route}`]?.ok > 0, `${label}: ${version} ${route} answered nothing`);
    }
  }
}

/** Tags and a key, made through `admin` (a fetch of one version). */
async function setUp(admin) {
  const put = async (tag, body) => {
    const res = await admin(`http://localhost/v1/tags/${tag}`, { method: 'PUT', headers: { authorization: `Bearer ${ADMIN}` }, body: JSON.stringify(body) });
    assert.ok([200, 201].includes(res.status), await res.text());
  };
  const tags = { plain: 'two-plain', monotonic: 'two-mono', opaque: 'two-opaque' };
  await put(tags.plain, { step: 50 });
  await put(tags.monotonic, { step: 50, monotonic: true });
  await put(tags.opaque, { step: 50, opaque: { bits: 48 } });
  const res = await admin('http://localhost/v1/keys', { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` }, body: JSON.stringify({ name: 'two-versions', scopes: ['ids'] }) });
  assert.equal(res.status, 201, await res.clone().text());
  return { tags, token: (await res.json()).token };
}

/** The views that list tags answer on both versions, each listing every tag
 *  of `tags` and `more` (a new isolate on an old catalog lists as before; a
 *  page of the new one — cut short after the 32 tags it read of those
 *  without a summary — follows `next` either way), and `/metrics` the
 *  loaded `tags`. */
async function views(fronts, tags, label, more = []) {
  const names = [...Object.values(tags), ...more].sort();
  for (const [version, front] of Object.entries(fronts)) {
    const get = async (path) => {
      const res = await front(`http://localhost${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
      const text = await res.text();
      assert.equal(res.status, 200, `${label}: ${version} ${path}: ${text.slice(0, 200)}`);
      return text;
    };
    const every = async (limit) => {
      const listed = [];
      for (let next = '', pages = 0; next !== undefined; pages++) {
        assert.ok(pages < 100, `${label}: ${version}: pages without end`);
        const page = JSON.parse(await get(`/v1/tags?limit=${limit}${next ? `&cursor=${next}` : ''}`));
        listed.push(...page.tags.map((t) => t.bizTag));
        next = page.next;
      }
      return listed.sort();
    };
    assert.deepEqual(await every(100), names, `${label}: ${version} GET /v1/tags`);
    // A scrape reads at most 32 tags without stats from their objects and
    // keeps what it read (docs/service.md, "Many tags"): over a store of the
    // old release, a loaded tag no request changed since (e.g. an opaque tag
    // served from its allocators' blocks) may come after those 32 by name,
    // and shows in the next scrape.
    let metrics = '';
    const shown = () => Object.values(tags).every((tag) => new RegExp(`^edgeleaf_tag_max_id\\{tag="${tag}"\\}`, 'm').test(metrics));
    for (let scrape = 0; scrape < 3 && !shown(); scrape++) metrics = await get('/metrics');
    for (const tag of Object.values(tags)) assert.match(metrics, new RegExp(`^edgeleaf_tag_max_id\\{tag="${tag}"\\}`, 'm'), `${label}: ${version} /metrics`);
    if (version === 'new') {
      assert.deepEqual(await every(2), names, `${label}: new, two at a time`);
      await fleet(front, tags, names.length, label);
    }
  }
}

/** `GET /v1/fleet` on this release (0.1.0 has no such route), beside either
 *  catalog: over the old one, which keeps no summaries, the first tags by
 *  name, each from its history (docs/service.md, "Many tags"). Either way
 *  bounded by `top` — the catalog's page (refused by the old one), its
 *  names, then one history per tag charted — and showing the loaded `tags`
 *  (named to come first) with the IDs they handed out. */
async function fleet(front, tags, total, label) {
  const get = async (path) => {
    const res = await front(`http://localhost${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    const text = await res.text();
    assert.equal(res.status, 200, `${label}: new ${path}: ${text.slice(0, 200)}`);
    assert.ok(res.headers.has('edgeleaf-test-object-calls'), `${label}: ${path}: no call count`);
    return { calls: Number(res.headers.get('edgeleaf-test-object-calls')), body: JSON.parse(text) };
  };
  for (const top of [8, 2]) {
    const { calls, body } = await get(`/v1/fleet?top=${top}`);
    const charted = body.tags.map((t) => t.bizTag);
    console.log(`${label}: new /v1/fleet?top=${top}: ${calls} object calls, ${charted.join(' ')}`);
    assert.ok(calls <= 2 + top, `${label}: /v1/fleet?top=${top}: ${calls} object calls`);
    assert.ok(charted.length <= top, `${label}: /v1/fleet?top=${top} charted ${charted.length}`);
    assert.equal(body.total, total, `${label}: /v1/fleet total`);
    assert.deepEqual(body.unavailable, [], `${label}: /v1/fleet unavailable`);
    if (top < Object.keys(tags).length) continue;
    for (const tag of Object.values(tags)) {
      const t = body.tags.find((x) => x.bizTag === tag);
      assert.ok(t, `${label}: /v1/fleet charts no ${tag}: ${charted.join(' ')}`);
      assert.ok(t.ids.reduce((a, b) => a + b, 0) > 0, `${label}: /v1/fleet ${tag} handed out no IDs: ${JSON.stringify(t)}`);
    }
  }
}

const fetchOf = (mf, name) => async (url, init) => (await mf.getWorker(name)).fetch(url, init);

const built = existsSync(join(ROOT, 'worker/build/index_bg.wasm'));

test('the previous release and this one, side by side in every arrangement: no ID twice, no route failing for either', { skip: !built && 'worker/build missing: scripts/worker.sh' }, async (t) => {
  const prev = previousRelease();
  const now = { build: process.env.EDGELEAF_WORKER_BUILD ?? join(ROOT, 'worker/build'), toml: join(ROOT, 'worker/wrangler.toml') };
  console.log(`previous release ${prev.version} (${prev.build}) beside the tree's Worker`);
  const arrangements = [
    ['every object new', []],
    ['every object old', Object.keys(BINDINGS)],
    ['root, catalog and keys old; allocators, registry and minters new', ROOT_SIDE],
    ['root, catalog and keys new; allocators, registry and minters old', Object.keys(BINDINGS).filter((b) => !ROOT_SIDE.includes(b))],
  ];
  for (const [label, onOld] of arrangements) {
    await t.test(label, async () => {
      const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-two-versions-'));
      const onNew = Object.keys(BINDINGS).filter((b) => !onOld.includes(b));
      const mf = await open(persist, [
        worker('new', now.build, now.toml, onNew, 'old'),
        worker('old', prev.build, prev.toml, onOld, 'new'),
      ]);
      try {
        const fronts = { old: fetchOf(mf, 'old'), new: fetchOf(mf, 'new') };
        const { tags, token } = await setUp(fronts.old);
        const ids = ledger();
        const counts = {};
        await load(fronts, ids, counts, { seconds: SECONDS, token, tags, label });
        verdict(label, ids, counts, ['old', 'new']);
        await views(fronts, tags, label);
      } finally {
        await mf.dispose();
        rmSync(persist, { recursive: true, force: true });
      }
    });
  }

  await t.test('the old release\'s storage taken over mid-load', async () => {
    const label = 'taken over';
    const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-two-versions-'));
    const all = Object.keys(BINDINGS);
    const ids = ledger();
    const counts = {};
    const older = Array.from({ length: 40 }, (_, i) => `older-${String(i).padStart(2, '0')}`);
    // The old release alone: its objects hold blocks, leases and segments.
    let mf = await open(persist, [worker('edgeleaf', prev.build, prev.toml, all, 'edgeleaf')]);
    let setup;
    try {
      setup = await setUp(fetchOf(mf, 'edgeleaf'));
      // More tags than a page reads from their objects, none with a summary.
      for (const tag of older) {
        const res = await fetchOf(mf, 'edgeleaf')(`http://localhost/v1/tags/${tag}`, { method: 'PUT', headers: { authorization: `Bearer ${ADMIN}` }, body: '{"step":10}' });
        assert.equal(res.status, 200, await res.text());
      }
      await load({ old: fetchOf(mf, 'edgeleaf') }, ids, counts, { seconds: SECONDS / 2, ...setup, label: `${label} (before)` });
    } finally {
      await mf.dispose();
    }
    // The deploy: every object now runs the new release on the old one's
    // storage; isolates of the old release still call them.
    mf = await open(persist, [
      worker('edgeleaf', now.build, now.toml, all, 'edgeleaf'),
      worker('old', prev.build, prev.toml, [], 'edgeleaf'),
    ]);
    try {
      await load({ old: fetchOf(mf, 'old'), new: fetchOf(mf, 'edgeleaf') }, ids, counts, { seconds: SECONDS, ...setup, label });
      verdict(label, ids, counts, ['old', 'new']);
      await views({ old: fetchOf(mf, 'old'), new: fetchOf(mf, 'edgeleaf') }, setup.tags, label, older);
    } finally {
      await mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    }
  });

  // A rollback is a deploy of the previous release: its objects read what
  // this one wrote (design.md's rule 3, storage goes forward and back).
  await t.test('rolling back: this release\'s storage taken over by the old one mid-load', async () => {
    const label = 'rolled back';
    const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-two-versions-'));
    const all = Object.keys(BINDINGS);
    const ids = ledger();
    const counts = {};
    // Named after the loaded tags, so that a new isolate's /metrics beside
    // the old catalog (the first 32 tags by name) still shows those.
    const newer = Array.from({ length: 40 }, (_, i) => `u-newer-${String(i).padStart(2, '0')}`);
    const late = Array.from({ length: 4 }, (_, i) => `u-late-${i}`);
    const put = async (mf, tag) => {
      const res = await fetchOf(mf, 'edgeleaf')(`http://localhost/v1/tags/${tag}`, { method: 'PUT', headers: { authorization: `Bearer ${ADMIN}` }, body: '{"step":10}' });
      assert.equal(res.status, 200, await res.text());
    };
    // This release alone: its objects hold blocks, leases, tails, minted
    // state and summaries written in its own forms.
    let mf = await open(persist, [worker('edgeleaf', now.build, now.toml, all, 'edgeleaf')]);
    let setup;
    try {
      setup = await setUp(fetchOf(mf, 'edgeleaf'));
      for (const tag of newer) await put(mf, tag);
      await load({ new: fetchOf(mf, 'edgeleaf') }, ids, counts, { seconds: SECONDS / 2, ...setup, label: `${label} (before)` });
      // The summaries' reports (2 s after a change) reach the catalog.
      await new Promise((r) => setTimeout(r, 2500));
      await views({ new: fetchOf(mf, 'edgeleaf') }, setup.tags, `${label} (before)`, newer);
      // Tags made last, whose objects' first reports (timers 2 s after the
      // change, in the objects' memory) would come due after the rollback:
      // the timers end with this runtime, and nothing of them is left in
      // storage for the old release's objects (an alarm would be, and fire
      // on 0.1.0's `TagStore`, which has no alarm handler).
      for (const tag of late) await put(mf, tag);
    } finally {
      await mf.dispose();
    }
    // The rollback: every object now runs the old release on this one's
    // storage; isolates of this release still call them.
    mf = await open(persist, [
      worker('edgeleaf', prev.build, prev.toml, all, 'edgeleaf'),
      worker('new', now.build, now.toml, [], 'edgeleaf'),
    ]);
    try {
      await load({ old: fetchOf(mf, 'edgeleaf'), new: fetchOf(mf, 'new') }, ids, counts, { seconds: SECONDS, ...setup, label });
      verdict(label, ids, counts, ['old', 'new']);
      await views({ old: fetchOf(mf, 'edgeleaf'), new: fetchOf(mf, 'new') }, setup.tags, label, [...newer, ...late]);
    } finally {
      await mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    }
  });
});
