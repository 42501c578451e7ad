// The CLI's service commands (`edgeleaf tags`, `tag put`, `keys …`,
// `history`) against the real Worker in workerd, the token from the
// environment only; the exit codes of refusals (3) and of a service that
// cannot answer (4).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { runCli } from '../support/cli.mjs';
import { start, ADMIN } from '../support/service.mjs';

let svc;
let url;

before(async () => {
  // Root-only (REGIONAL_ALLOCATORS = "0"): the exact maxId figures below are
  // the tag's own; a regional allocator would add its next block in the
  // background (maxId 5050 or 5550, by timing). The allocators' own
  // figures are tested in regions.test.mjs.
  svc = await start({ port: 0, vars: { REGIONAL_ALLOCATORS: '0' } });
  url = String(await svc.mf.ready).replace(/\/$/, '');
});
after(async () => { await svc?.dispose(); });

/** The CLI with `EDGELEAF_URL` and `EDGELEAF_TOKEN` (the admin token unless `env` says otherwise). */
const cli = (args, env = {}) => runCli(args, { EDGELEAF_URL: url, EDGELEAF_TOKEN: ADMIN, ...env });

const json = async (args, env) => {
  const r = await cli([...args, '--json'], env);
  assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};

const error = (r) => JSON.parse(r.stderr).error;

test('tag put creates and changes a tag; tags lists it; maxId never goes back (exit 3)', async () => {
  const made = await json(['tag', 'put', 'cli-order', '--step', '50', '--description', 'from the CLI']);
  assert.deepEqual(Object.keys(made).sort(), ['bizTag', 'description', 'maxId', 'maxStep', 'monotonic', 'opaque', 'step', 'updateTime']);
  assert.deepEqual([made.bizTag, made.maxId, made.step, made.description, made.monotonic], ['cli-order', '0', 50, 'from the CLI', false]);
  const raised = await json(['tag', 'put', 'cli-order', '--max-id', '5000']);
  assert.deepEqual([raised.maxId, raised.step, raised.description], ['5000', 50, 'from the CLI']);
  assert.equal(await (await svc.fetch('/api/segment/get/cli-order')).text(), '5001');

  const back = await cli(['tag', 'put', 'cli-order', '--max-id', '10']);
  assert.equal(back.code, 3, back.stderr);
  assert.match(back.stderr, /^out_of_range: .*max_id/);

  const human = await cli(['tags']);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, /^tag\s+maxId\s+step\s+maxStep\s+kind\s+updated\s+description$/m);
  assert.match(human.stdout, /^cli-order\s+5050\s+50\s+1000000\s+plain\s+\d{4}-\d\d-\d\dT[0-9:.]+Z\s+from the CLI$/m);
  const listed = await json(['tags']);
  assert.ok(listed.tags.some((t) => t.bizTag === 'cli-order' && t.maxId === '5050'));

  const kinds = await json(['tag', 'put', 'cli-opaque', '--opaque', 'digits:12']);
  assert.deepEqual(kinds.opaque, { digits: 12 });
  assert.match((await cli(['tags'])).stdout, /^cli-opaque\s.*opaque digits:12/m);
  assert.equal((await cli(['tag', 'put', 'cli-x', '--opaque', 'digits:99'])).code, 3, 'the service checks the domain');
  assert.equal((await cli(['tag', 'put', 'cli-x', '--step', '0'])).code, 3, 'and the step');
});

test('history shows a tag\'s allocations and runway', async () => {
  await json(['tag', 'put', 'cli-hist', '--step', '20']);
  for (let i = 0; i < 3; i++) await (await svc.fetch('/v1/segment/cli-hist?count=20')).arrayBuffer();
  const h = await json(['history', 'cli-hist', '--minutes', '5']);
  assert.equal(h.bizTag, 'cli-hist');
  assert.equal(h.minutes.length, 5);
  assert.ok(h.allocations >= 3);
  const human = await cli(['history', 'cli-hist']);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, /^tag\s+cli-hist$/m);
  assert.match(human.stdout, /^at\s+start\s+end\s+ids\s+by$/m);
  assert.match(human.stdout, /\s1\s+20\s+20\s+isolate:/);
  const missing = await cli(['history', 'no-such-tag', '--json']);
  assert.equal(missing.code, 3);
  assert.deepEqual([error(missing).code, error(missing).status], ['not_found', 404]);
  assert.equal((await cli(['history', 'cli-hist', '--minutes', '0'])).code, 3, 'the service checks minutes');
});

test('keys create, list, revoke; the token only from EDGELEAF_TOKEN', async () => {
  const key = await json(['keys', 'create', '--name', 'reader', '--scopes', 'monitor', '--tags', 'cli-*']);
  assert.match(key.token, /^elk_[0-9a-f]+_[0-9a-f]{64}$/);
  assert.deepEqual([key.name, key.scopes, key.tags], ['reader', ['monitor'], 'cli-*']);

  const list = await cli(['keys', 'list']);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, new RegExp(`^${key.id}\\s+reader\\s+monitor\\s+cli-\\*\\s`, 'm'));
  assert.ok(!list.stdout.includes(key.token.slice(-64)), 'never a token');
  assert.ok(!(await cli(['keys', 'list', '--json'])).stdout.includes(key.token.slice(-64)));

  // The key as the caller's token: it sees its tags only, and may not change them.
  const seen = await json(['tags'], { EDGELEAF_TOKEN: key.token });
  assert.ok(seen.tags.length > 0 && seen.tags.every((t) => t.bizTag.startsWith('cli-')));
  const refused = await cli(['tag', 'put', 'cli-order', '--step', '60', '--json'], { EDGELEAF_TOKEN: key.token });
  assert.equal(refused.code, 3);
  assert.deepEqual([error(refused).code, error(refused).status], ['forbidden', 403]);

  const revoked = await cli(['keys', 'revoke', key.id]);
  assert.equal(revoked.code, 0, revoked.stderr);
  assert.equal(revoked.stdout.trim(), `revoked ${key.id} (reader)`);
  const after = await cli(['tags', '--json'], { EDGELEAF_TOKEN: key.token });
  assert.equal(after.code, 3);
  assert.equal(error(after).code, 'forbidden');

  const none = await cli(['tags', '--json'], { EDGELEAF_TOKEN: undefined });
  assert.equal(none.code, 3);
  assert.equal(error(none).code, 'unauthorized');
  assert.equal((await cli(['keys', 'create', '--name', 'x', '--scopes', 'root'])).code, 3, 'the service checks scopes');
  assert.equal((await cli(['keys', 'create', '--name', 'x'])).code, 2, '--scopes is needed');
});

test('a service that answers 5xx: exit 4 with its code', async () => {
  // A bad setting makes every route that reads the configuration answer 503 config_invalid.
  const bad = await start({ port: 0, vars: { DEFAULT_STEP: 'x' } });
  try {
    const badUrl = String(await bad.mf.ready).replace(/\/$/, '');
    const r = await cli(['tag', 'put', 'cli-5xx', '--json'], { EDGELEAF_URL: badUrl });
    assert.equal(r.code, 4, r.stderr);
    assert.deepEqual([error(r).code, error(r).status], ['config_invalid', 503]);
  } finally {
    await bad.dispose();
  }
});

test('control characters in what the service or a dump says are printed escaped: C0, DEL and C1 (U+0080..U+009F)', async () => {
  // U+009B is CSI: a terminal reads "\x9b31m" as "\x1b[31m".
  const description = 'red\x1b[31m csi\x9b31m nel\x85 del\x7f tab\tend';
  await json(['tag', 'put', 'cli-ctl', '--description', description]);
  const raw = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;
  for (const args of [['tags'], ['tag', 'put', 'cli-ctl', '--description', description]]) {
    const r = await cli(args);
    assert.equal(r.code, 0, r.stderr);
    const line = r.stdout.split('\n').find((l) => l.startsWith('cli-ctl'));
    assert.ok(line, r.stdout);
    assert.ok(!raw.test(line), `raw control characters: ${JSON.stringify(line)}`);
    assert.ok(line.endsWith('red\\u001b[31m csi\\u009b31m nel\\u0085 del\\u007f tab\\tend'), line);
  }
  // --json keeps the text as it is (JSON escapes what it must).
  assert.equal((await json(['tags'])).tags.find((t) => t.bizTag === 'cli-ctl').description, description);
  // An error message quoting a dump's bytes.
  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const csv = join(mkdtempSync(join(tmpdir(), 'edgeleaf-ctl-')), 'c1.csv');
  writeFileSync(csv, 'order,1\x9b[2J,10,x\n');
  const bad = await cli(['import-leaf', csv, '--dry-run']);
  assert.equal(bad.code, 2, bad.stderr);
  assert.ok(!raw.test(bad.stderr.replace(/\n/g, '')), JSON.stringify(bad.stderr));
  assert.match(bad.stderr, /found "1\\u009b\[2J"/);
});
