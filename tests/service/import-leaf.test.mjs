// `edgeleaf import-leaf` against the real Worker in workerd: a Leaf
// installation's `leaf_alloc` table, dumped as mysqldump writes it, becomes
// tags that continue strictly above Leaf's max_id — plus the margin for
// segments Leaf nodes may still take — idempotently. IDs drawn afterwards
// through every route (Leaf's `/api/segment/get/{tag}`, `/v1/segment`, a
// client's segment lease) are all above them. An opaque tag is refused; each
// write is conditional on what the plan read (a tag drawn from or made in
// between is refused with 409 tag_changed, never raised over IDs it handed
// out); a row that would leave a tag past 2^62 is refused unless --force.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../support/cli.mjs';
import { start, ADMIN, CLIENT } from '../support/service.mjs';
import { mysqldump, leafCsv, LEAF_ROWS } from '../support/leafdump.mjs';
import { plan, apply } from '../../pkg/cli/import-leaf.mjs';

const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-import-'));
let svc;
let url;

before(async () => {
  // Root-only (REGIONAL_ALLOCATORS = "0"): the exact maxId figures below are
  // the tag's own; a regional allocator would add its next block in the
  // background, by timing. The allocators' own
  // figures are tested in regions.test.mjs.
  svc = await start({ port: 0, vars: { REGIONAL_ALLOCATORS: '0' } });
  url = String(await svc.mf.ready).replace(/\/$/, '');
});
after(async () => { await svc?.dispose(); });

/** The CLI against the service with the admin token from the environment: `{ code, stdout, stderr }`. */
const cli = (args, env = {}) => runCli(args, { EDGELEAF_URL: url, EDGELEAF_TOKEN: ADMIN, ...env });

const file = (name, text) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

const tagView = async (tag) => {
  const res = await svc.admin(`/v1/tags/${tag}`);
  return res.status === 404 ? (await res.arrayBuffer(), null) : res.json();
};

// Leaf's largest dynamic step is 1,000,000: the default margin is two such segments.
const MARGIN = (step) => 2n * BigInt(Math.max(step, 1_000_000));

// Several tags, more than one INSERT (two rows each, as a small
// --net-buffer-length splits them), descriptions needing every escape.
const ROWS = [
  ...LEAF_ROWS,
  { bizTag: 'invoice', maxId: 77, step: 10, description: 'NUL\0 and ^Z\x1a and \\n literally' },
  { bizTag: 'ship-2', maxId: 1_000_000_000_000, step: 50_000, description: "''" },
];

/** IDs of `tag` through each route a caller may use: Leaf's, /v1's batch, a segment lease. */
async function drawIds(tag) {
  const ids = [];
  for (let i = 0; i < 5; i++) {
    const res = await svc.fetch(`/api/segment/get/${tag}`);
    assert.equal(res.status, 200, `${tag}: ${await res.clone().text()}`);
    ids.push(BigInt(await res.text()));
  }
  const batch = await (await svc.fetch(`/v1/segment/${tag}?count=100`)).json();
  ids.push(...batch.ids.map(BigInt));
  const lease = await (await svc.fetch(`/v1/segment/${tag}/lease`, { method: 'POST', body: JSON.stringify({ step: 10 }) })).json();
  ids.push(BigInt(lease.start), BigInt(lease.end));
  return ids;
}

test('a mysqldump of leaf_alloc: dry run changes nothing; the import creates each tag above Leaf\'s max_id; a second run changes nothing', async () => {
  const dump = file('leaf_alloc.sql', mysqldump(ROWS, { perInsert: 2 }));

  // The plan: every tag to create, at Leaf's max_id + margin; nothing changes.
  const dry = await cli(['import-leaf', dump, '--dry-run', '--json']);
  assert.equal(dry.code, 0, dry.stderr);
  const plan = JSON.parse(dry.stdout);
  assert.equal(plan.dryRun, true);
  assert.deepEqual(plan.counts, { create: ROWS.length });
  for (const [i, r] of ROWS.entries()) {
    assert.equal(plan.tags[i].newMaxId, (BigInt(r.maxId) + MARGIN(r.step)).toString());
  }
  for (const r of ROWS) assert.equal(await tagView(r.bizTag), null, `${r.bizTag}: a dry run created nothing`);
  assert.deepEqual((await (await svc.admin('/v1/tags')).json()).tags, []);

  // The import.
  const run = await cli(['import-leaf', dump]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, new RegExp(`${ROWS.length} tags from .*: ${ROWS.length} created`));
  assert.match(run.stdout, /^order\s+987654321\s+5000\s+—\s+989654321\s+created$/m);
  const views = {};
  for (const r of ROWS) {
    const v = await tagView(r.bizTag);
    views[r.bizTag] = v;
    assert.equal(v.maxId, (BigInt(r.maxId) + MARGIN(r.step)).toString(), r.bizTag);
    assert.equal(v.step, r.step);
    assert.equal(v.description, r.description ?? '', `${r.bizTag}: the description as Leaf held it`);
    assert.equal(v.monotonic, false);
  }

  // Again: nothing changes, not even a tag's update time.
  const again = await cli(['import-leaf', dump, '--json']);
  assert.equal(again.code, 0, again.stderr);
  const second = JSON.parse(again.stdout);
  assert.deepEqual(second.counts, { unchanged: ROWS.length });
  assert.ok(second.tags.every((t) => t.action === 'unchanged' && t.serviceMaxId === t.newMaxId));
  for (const r of ROWS) assert.deepEqual(await tagView(r.bizTag), views[r.bizTag], `${r.bizTag} unchanged`);
  assert.match((await cli(['import-leaf', dump])).stdout, new RegExp(`${ROWS.length} unchanged`));

  // Every ID drawn now, by any route, is above Leaf's max_id and the margin;
  // the first continues right after the margin.
  for (const r of ROWS) {
    const floor = BigInt(r.maxId) + MARGIN(r.step);
    const ids = await drawIds(r.bizTag);
    assert.equal(ids[0], floor + 1n, `${r.bizTag}: the first ID continues at Leaf's max_id + margin + 1`);
    for (const id of ids) assert.ok(id > floor, `${r.bizTag}: ${id} > ${floor}`);
    assert.equal(new Set(ids).size, ids.length);
  }

  // Once IDs were drawn the service's maxId is past the import's: still unchanged.
  const third = JSON.parse((await cli(['import-leaf', dump, '--json'])).stdout);
  assert.deepEqual(third.counts, { unchanged: ROWS.length });
  assert.ok(third.tags.every((t) => BigInt(t.serviceMaxId) > BigInt(t.newMaxId) - 1n));
});

test('a CSV with --margin 0 (a table frozen before the dump): IDs start right after Leaf\'s max_id', async () => {
  const rows = [
    { bizTag: 'csv-a', maxId: 5000, step: 1000, description: 'a, "quoted"\nline' },
    { bizTag: 'csv-b', maxId: 1, step: 100, description: null },
  ];
  const csv = file('leaf_alloc.csv', leafCsv(rows));
  const r = await cli(['import-leaf', csv, '--margin', '0']);
  assert.equal(r.code, 0, r.stderr);
  for (const row of rows) {
    const ids = await drawIds(row.bizTag);
    assert.equal(ids[0], BigInt(row.maxId) + 1n);
    for (const id of ids) assert.ok(id > BigInt(row.maxId));
  }
  assert.equal((await tagView('csv-a')).description, rows[0].description);
});

test('a tag the service already has: raised if it never handed out an ID, refused if it handed out IDs Leaf may have', async () => {
  // `idle` exists but never allocated (maxId 0): raised. `busy` handed out IDs 1..: refused.
  await svc.admin('/v1/tags/idle', { method: 'PUT', body: JSON.stringify({ step: 10 }) });
  await svc.admin('/v1/tags/busy', { method: 'PUT', body: JSON.stringify({ step: 10 }) });
  assert.equal(await (await svc.fetch('/api/segment/get/busy')).text(), '1');
  const rows = [
    { bizTag: 'idle', maxId: 4000, step: 100, description: 'x' },
    { bizTag: 'busy', maxId: 4000, step: 100, description: 'x' },
    { bizTag: 'later', maxId: 4000, step: 100, description: 'x' },
  ];
  const dump = file('conflict.sql', mysqldump(rows));
  const refused = await cli(['import-leaf', dump]);
  assert.equal(refused.code, 3, refused.stderr);
  assert.match(refused.stderr, /^import_conflict: nothing changed: busy already allotted IDs up to 10 on the service, below Leaf's max_id 4000 \+ the margin 2000000/);
  assert.match(refused.stdout, /^busy\s+4000\s+100\s+10\s+—\s+conflict$/m);
  assert.equal(await tagView('later'), null, 'nothing changed');
  assert.equal((await tagView('idle')).maxId, '0');

  // Without the conflicting row: `idle` raised, `later` created.
  const ok = await cli(['import-leaf', file('ok.sql', mysqldump([rows[0], rows[2]])), '--json']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.deepEqual(JSON.parse(ok.stdout).tags.map((t) => [t.tag, t.action]), [['idle', 'raised'], ['later', 'created']]);
  assert.equal((await tagView('idle')).maxId, '2004000');
  assert.equal((await tagView('idle')).step, 10, 'a tag that exists keeps its step');
  const ids = await drawIds('idle');
  assert.ok(ids.every((id) => id > 2_004_000n));
});

test('a malformed dump is refused with its line, and nothing is created', async () => {
  const good = mysqldump([{ bizTag: 'never', maxId: 10, step: 10, description: 'x' }, { bizTag: 'never2', maxId: 10, step: 10, description: 'y' }]);
  const lines = good.split('\n');
  const at = lines.findIndex((l) => l.startsWith('INSERT')) + 1;
  const bad = file('bad.sql', good.replace("'y'", "'y"));
  const r = await cli(['import-leaf', bad]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, new RegExp(`^invalid_dump: ${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${at}: a string that never ends`));
  assert.equal(r.stdout, '');
  assert.equal(await tagView('never'), null);
});

test('a row the service refuses stops the import with the tag named; run again once mended, it continues', async () => {
  const rows = [
    { bizTag: 'first', maxId: 10, step: 10, description: 'ok' },
    { bizTag: 'wordy', maxId: 10, step: 10, description: 'é'.repeat(200) }, // 200 characters, 400 bytes: over the service's 256
    { bizTag: 'third', maxId: 10, step: 10, description: 'ok' },
  ];
  const r = await cli(['import-leaf', file('wordy.sql', mysqldump(rows))]);
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /^out_of_range: wordy \(.*wordy\.sql:\d+\): description.*\(1 tag written before this; the import is idempotent/);
  assert.equal((await tagView('first')).maxId, '2000010');
  assert.equal(await tagView('third'), null);
  rows[1].description = 'shorter';
  const again = await cli(['import-leaf', file('wordy.sql', mysqldump(rows)), '--json']);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(JSON.parse(again.stdout).tags.map((t) => t.action), ['unchanged', 'created', 'created']);
});

test('import-leaf needs the admin scope: a monitor key may plan, not import', async () => {
  const key = await (await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'ops', scopes: ['monitor'] }) })).json();
  const dump = file('scoped.sql', mysqldump([{ bizTag: 'scoped', maxId: 10, step: 10, description: '' }]));
  const dry = await cli(['import-leaf', dump, '--dry-run'], { EDGELEAF_TOKEN: key.token });
  assert.equal(dry.code, 0, dry.stderr);
  const run = await cli(['import-leaf', dump, '--json'], { EDGELEAF_TOKEN: key.token });
  assert.equal(run.code, 3);
  assert.equal(JSON.parse(run.stderr).error.code, 'forbidden');
  assert.equal(JSON.parse(run.stderr).error.status, 403);
  assert.equal(await tagView('scoped'), null);
});

test('an opaque tag on the service: refused by the CLI (exit 3), and by the service if it became opaque after the plan', async () => {
  await svc.admin('/v1/tags/leaf-opaque', { method: 'PUT', body: JSON.stringify({ step: 10, opaque: { digits: 9 } }) });
  const before = await tagView('leaf-opaque');
  const dump = file('opaque.sql', mysqldump([{ bizTag: 'leaf-opaque', maxId: 5000, step: 100, description: 'x' }]));
  const r = await cli(['import-leaf', dump, '--json']);
  assert.equal(r.code, 3, r.stderr);
  assert.equal(JSON.parse(r.stderr).error.code, 'import_conflict');
  assert.match(JSON.parse(r.stderr).error.message, /leaf-opaque is an opaque tag on the service/);
  assert.deepEqual(JSON.parse(r.stdout).tags.map((t) => t.action), ['conflict']);
  assert.deepEqual(await tagView('leaf-opaque'), before, 'unchanged');
  // --force does not make an opaque tag's permutation continue above Leaf's IDs.
  assert.equal((await cli(['import-leaf', dump, '--force'])).code, 3);

  // The plan saw no tag; before its write the tag is made opaque: the
  // write (create, conditional on no tag) is refused.
  const rows = [{ bizTag: 'late-opaque', maxId: 5000n, step: 100, description: '', line: 1 }];
  const getTag = async (t) => { const v = await tagView(t); return v; };
  const putTag = async (t, body) => {
    const res = await svc.admin(`/v1/tags/${t}`, { method: 'PUT', body: JSON.stringify(body) });
    const json = await res.json();
    if (!res.ok) throw Object.assign(new Error(json.error.message), { code: json.error.code, status: res.status });
    return json;
  };
  const entries = await plan(rows, { getTag });
  assert.deepEqual(entries.map((e) => e.action), ['create']);
  await svc.admin('/v1/tags/late-opaque', { method: 'PUT', body: JSON.stringify({ step: 10, opaque: { bits: 40 } }) });
  await assert.rejects(apply(entries, { putTag }), { code: 'tag_changed', status: 409 });
  assert.equal((await tagView('late-opaque')).maxId, '0', 'not raised');
});

test('a tag drawn from between the plan and the write: the write is refused (409 tag_changed), never raised over the IDs drawn', async () => {
  const getTag = async (t) => tagView(t);
  const written = [];
  const putTag = async (t, body) => {
    written.push(body);
    const res = await svc.admin(`/v1/tags/${t}`, { method: 'PUT', body: JSON.stringify(body) });
    const json = await res.json();
    if (!res.ok) throw Object.assign(new Error(json.error.message), { code: json.error.code, status: res.status });
    return json;
  };
  // A tag that never allotted an ID: the plan raises it.
  await svc.admin('/v1/tags/race-raise', { method: 'PUT', body: JSON.stringify({ step: 10 }) });
  const raise = await plan([{ bizTag: 'race-raise', maxId: 4000n, step: 100, description: '', line: 1 }], { getTag });
  assert.deepEqual(raise.map((e) => e.action), ['raise']);
  // In between, a client draws an ID (1): raising the tag now would hide it below the target.
  assert.equal(await (await svc.fetch('/api/segment/get/race-raise')).text(), '1');
  await assert.rejects(apply(raise, { putTag }), (e) => {
    assert.equal(e.code, 'tag_changed');
    assert.equal(e.status, 409);
    assert.match(e.message, /expected the tag at max_id 0 .*found the tag at max_id \d+/);
    return true;
  });
  assert.deepEqual(written.at(-1), { maxId: '2004000', expectMaxId: '0' }, 'the write carried what the plan read');
  const kept = BigInt((await tagView('race-raise')).maxId);
  assert.ok(kept > 0n && kept < 2_004_000n, `not raised: ${kept}`);
  // Run again, the plan sees the IDs drawn: a conflict, exit 3.
  const again = await cli(['import-leaf', file('race.sql', mysqldump([{ bizTag: 'race-raise', maxId: 4000, step: 100, description: '' }]))]);
  assert.equal(again.code, 3, again.stderr);
  assert.match(again.stderr, /race-raise already allotted IDs/);

  // No tag at plan time; in between it is made and drawn from: the create is refused.
  const create = await plan([{ bizTag: 'race-create', maxId: 4000n, step: 100, description: '', line: 1 }], { getTag });
  assert.deepEqual(create.map((e) => e.action), ['create']);
  await svc.admin('/v1/tags/race-create', { method: 'PUT', body: JSON.stringify({ step: 10 }) });
  assert.equal(await (await svc.fetch('/api/segment/get/race-create')).text(), '1');
  await assert.rejects(apply(create, { putTag }), { code: 'tag_changed', status: 409 });
  assert.ok(BigInt((await tagView('race-create')).maxId) < 2_004_000n, 'not raised');
});

test('a row that would leave a tag past 2^62 (a short runway): refused, nothing created; --force imports it', async () => {
  const MAX = 2n ** 63n - 1n;
  const rows = [
    { bizTag: 'runway-ok', maxId: 2n ** 62n - 2_000_000n, step: 100, description: '' },
    { bizTag: 'runway-end', maxId: MAX - 2_000_000n, step: 100, description: 'hostile' },
  ];
  const dump = file('runway.sql', mysqldump(rows));
  const refused = await cli(['import-leaf', dump]);
  assert.equal(refused.code, 3, refused.stderr);
  assert.match(refused.stderr, /^import_conflict: nothing changed: runway-end: Leaf's max_id 9223372036852775807 \+ the margin 2000000 passes 2\^62.*--force/);
  assert.equal(await tagView('runway-ok'), null, 'nothing changed');
  assert.equal(await tagView('runway-end'), null);
  // The first alone ends exactly at 2^62: accepted.
  const ok = await cli(['import-leaf', file('runway-ok.sql', mysqldump([rows[0]]))]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal((await tagView('runway-ok')).maxId, (2n ** 62n).toString());
  // Forced, the last row is imported as it says (the tag then has no ID left).
  const forced = await cli(['import-leaf', dump, '--force', '--json']);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal((await tagView('runway-end')).maxId, MAX.toString());
  const res = await svc.fetch('/v1/segment/runway-end?count=1');
  assert.equal(res.status, 409);
  assert.equal((await res.json()).error.code, 'tag_exhausted');
});
