// The CLI (`npx edgeleaf`, pkg/cli/) in Node, its local commands: decode,
// id, opaque, the exit codes and --json shapes, and import-leaf's reading of
// dumps (a dry run without a service: parse and plan only). Against the
// service: tests/service/cli.test.mjs and tests/service/import-leaf.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mysqldump, leafCsv, LEAF_ROWS } from '../support/leafdump.mjs';

const PKG = fileURLToPath(new URL('../../pkg/', import.meta.url));
const CLI = join(PKG, 'cli/edgeleaf.mjs');
const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-cli-'));

/** Runs the CLI: `{ code, stdout, stderr }`, with no EDGELEAF_* from the caller's environment. */
function cli(args, { env = {}, input } = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('EDGELEAF_')));
  const r = spawnSync(process.execPath, [CLI, ...args], { env: { ...clean, ...env }, input, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout.trimEnd(), stderr: r.stderr.trimEnd() };
}

const file = (name, text) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

// An ID built here from its parts, with the layout's arithmetic written out
// (not through the package): Leaf's 41/10/12 bits from 1288834974657.
const T = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
const LEAF_ID = ((BigInt(T) - 1288834974657n) << 22n) | (513n << 12n) | 4001n;

test('decode prints the time (ISO and ms), worker and sequence of an ID', () => {
  const r = cli(['decode', LEAF_ID.toString()]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^id\s+\d+$/m);
  assert.match(r.stdout, new RegExp(`^time\\s+2025-01-02T03:04:05\\.678Z \\(${T} ms\\)$`, 'm'));
  assert.match(r.stdout, /^worker\s+513$/m);
  assert.match(r.stdout, /^sequence\s+4001$/m);
  assert.match(r.stdout, /^layout\s+leaf: 41\/10\/12 bits/m);
});

test('decode --json: the shape of GET /v1/snowflake/{id}', () => {
  const r = cli(['decode', LEAF_ID.toString(), '--json']);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), {
    id: LEAF_ID.toString(), timestamp: T, date: '2025-01-02T03:04:05.678Z', workerId: 513, sequence: 4001,
  });
});

test('decode --layout jsSafe and --epoch', () => {
  // jsSafe: 38/7/8 bits of 10 ms units from 2024-01-01.
  const js = ((BigInt(T) - 1704067200000n) / 10n << 15n) | (100n << 8n) | 200n;
  const r = JSON.parse(cli(['decode', js.toString(), '--layout', 'jsSafe', '--json']).stdout);
  assert.deepEqual([r.timestamp, r.workerId, r.sequence], [T - (T % 10), 100, 200]);
  // Another epoch shifts the time by the difference, in ms or as a date.
  const ms = JSON.parse(cli(['decode', LEAF_ID.toString(), '--epoch', '1288834975657', '--json']).stdout);
  assert.equal(ms.timestamp, T + 1000);
  const date = JSON.parse(cli(['decode', LEAF_ID.toString(), '--epoch', '2010-11-04T01:42:55.657Z', '--json']).stdout);
  assert.equal(date.timestamp, T + 1000);
});

test('id makes distinct, increasing IDs under the worker ID asked', () => {
  const r = cli(['id', '-n', '1000', '--worker-id', '77', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const { ids } = JSON.parse(r.stdout);
  assert.equal(ids.length, 1000);
  assert.ok(ids.every((s) => /^[0-9]+$/.test(s)), 'decimal strings');
  const big = ids.map(BigInt);
  for (let i = 1; i < big.length; i++) assert.ok(big[i] > big[i - 1]);
  assert.equal(Number((big[999] >> 12n) & 1023n), 77);
  const plain = cli(['id', '-n', '3', '--worker-id', '5']);
  assert.equal(plain.stdout.split('\n').length, 3);
  const one = JSON.parse(cli(['decode', plain.stdout.split('\n')[0], '--json']).stdout);
  assert.ok(Math.abs(one.timestamp - Date.now()) < 60_000, 'minted now');
});

test('opaque key, encode and decode round-trip; the key comes only from EDGELEAF_OPAQUE_KEY', () => {
  const key = cli(['opaque', 'key']).stdout;
  assert.match(key, /^[0-9a-f]{32}$/);
  const env = { EDGELEAF_OPAQUE_KEY: key };
  const enc = cli(['opaque', 'encode', '42', '--digits', '12', '--json'], { env });
  assert.equal(enc.code, 0, enc.stderr);
  const { id } = JSON.parse(enc.stdout);
  assert.ok(id.length <= 12 && id !== '42');
  assert.equal(cli(['opaque', 'decode', id, '--digits', '12'], { env }).stdout, '42');
  assert.deepEqual(JSON.parse(cli(['opaque', 'decode', id, '--digits', '12', '--json'], { env }).stdout), { id, counter: '42' });
  const noKey = cli(['opaque', 'encode', '42', '--digits', '12']);
  assert.equal(noKey.code, 2);
  assert.match(noKey.stderr, /^invalid_argument: EDGELEAF_OPAQUE_KEY/);
  assert.equal(cli(['opaque', 'encode', '42', '--key', key, '--digits', '12'], { env }).code, 2, 'no --key flag');
});

test('bad input: exit 2 and `code: message` on stderr (JSON with --json)', () => {
  const cases = [
    [['decode', 'abc'], 'invalid_id'],
    [['decode', '-1'], 'invalid_argument'],
    [['decode', (1n << 63n).toString()], 'invalid_id'],
    [['decode', '123', '--layout', 'nope'], 'invalid_option'],
    [['decode', '123', '--epoch', 'yesterday'], 'invalid_argument'],
    [['decode'], 'invalid_argument'],
    [['decode', '1', '2'], 'invalid_argument'],
    [['id', '--worker-id', '1024'], 'out_of_range'],
    [['id', '-n', '0', '--worker-id', '5'], 'out_of_range'],
    [['id', '-n', '3'], 'invalid_argument'],
    [['id', '-n', 'lots'], 'invalid_argument'],
    [['frobnicate'], 'invalid_argument'],
    [['keys', 'burn'], 'invalid_argument'],
    [['tags', '--token', 'x'], 'invalid_argument'],
    [['tags'], 'invalid_argument'],
    [['tag', 'put', 'a/b', '--url', 'http://127.0.0.1:1'], 'invalid_key'],
    [['tags', '--url', 'ftp://x'], 'invalid_option'],
  ];
  for (const [args, code] of cases) {
    const r = cli(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '', args.join(' '));
    assert.ok(r.stderr.startsWith(`${code}: `), `${args.join(' ')}: ${r.stderr}`);
    const j = cli([...args, '--json']);
    assert.equal(j.code, 2);
    assert.equal(JSON.parse(j.stderr).error.code, code, args.join(' '));
  }
});

test('no answer from the service: exit 4, service_unreachable', () => {
  // Port 1 on the loopback: nothing listens, the connection is refused at once.
  const r = cli(['tags', '--json'], { env: { EDGELEAF_URL: 'http://127.0.0.1:1', EDGELEAF_TOKEN: 't' } });
  assert.equal(r.code, 4, r.stderr);
  assert.equal(JSON.parse(r.stderr).error.code, 'service_unreachable');
});

test('--help for the CLI and for each command; no command is a usage error', () => {
  const top = cli(['--help']);
  assert.equal(top.code, 0);
  for (const c of ['decode', 'id', 'opaque key', 'opaque encode', 'tags', 'tag put', 'keys create', 'keys list', 'keys revoke', 'history', 'import-leaf']) {
    assert.ok(top.stdout.includes(`  ${c}`), c);
    const h = cli([...c.split(' '), '--help']);
    assert.equal(h.code, 0, c);
    assert.ok(h.stdout.startsWith(`usage: edgeleaf ${c}`), h.stdout);
    assert.match(h.stdout, /Exit codes: 0 done/);
  }
  assert.match(cli(['tags', '--help']).stdout, /EDGELEAF_TOKEN/);
  assert.equal(cli(['help', 'decode']).stdout, cli(['decode', '--help']).stdout);
  assert.equal(cli([]).code, 2);
  assert.match(cli(['--version']).stdout, /^[0-9]+\.[0-9]+\.[0-9]+/);
});

test('installed from the packed tarball, `edgeleaf` is on the PATH of npm scripts and runs', () => {
  const app = mkdtempSync(join(tmpdir(), 'edgeleaf-cli-app-'));
  const npm = (args, cwd) => {
    const r = spawnSync('npm', [...args, '--loglevel=error', '--no-audit', '--no-fund'], { cwd, encoding: 'utf8' });
    assert.equal(r.status, 0, `npm ${args.join(' ')}: ${r.stderr}`);
    return r.stdout.trim();
  };
  const tgz = npm(['pack', '--pack-destination', app], PKG).split('\n').pop();
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, scripts: { ids: 'edgeleaf decode' } }));
  npm(['install', `./${tgz}`], app);
  const r = spawnSync('npm', ['run', '--silent', 'ids', '--', LEAF_ID.toString(), '--json'], { cwd: app, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { id: LEAF_ID.toString(), timestamp: T, date: '2025-01-02T03:04:05.678Z', workerId: 513, sequence: 4001 });
  const bad = spawnSync('npm', ['run', '--silent', 'ids', '--', 'nope'], { cwd: app, encoding: 'utf8' });
  assert.equal(bad.status, 2, 'the exit code comes through');
});

test('the package ships the CLI as its bin', () => {
  const pkg = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
  const bin = pkg.bin.edgeleaf.replace(/^\.\//, '');
  assert.ok(pkg.files.includes(bin), `${bin} in files`);
  for (const f of ['cli/leaf-dump.mjs', 'cli/import-leaf.mjs']) assert.ok(pkg.files.includes(f), f);
  assert.ok(readFileSync(join(PKG, bin), 'utf8').startsWith('#!/usr/bin/env node\n'));
});

// ------------------------------------------------------------ import-leaf, offline

const planOf = (args, opts) => {
  const r = cli(['import-leaf', ...args, '--dry-run', '--json'], opts);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
};
const MARGIN = (step) => 2n * BigInt(Math.max(step, 1_000_000));

test('import-leaf reads a mysqldump: every row, strings unescaped, the plan above Leaf\'s max_id', () => {
  const dump = file('leaf.sql', mysqldump(LEAF_ROWS, { perInsert: 2 }));
  const p = planOf([dump]);
  assert.equal(p.dryRun, true);
  assert.deepEqual(p.tags.map((t) => t.tag), LEAF_ROWS.map((r) => r.bizTag));
  for (const [i, r] of LEAF_ROWS.entries()) {
    const t = p.tags[i];
    assert.equal(t.leafMaxId, String(r.maxId));
    assert.equal(t.step, r.step);
    assert.equal(t.description, r.description ?? '');
    assert.equal(t.margin, MARGIN(r.step).toString());
    assert.equal(t.newMaxId, (BigInt(r.maxId) + MARGIN(r.step)).toString());
    assert.equal(t.action, 'create?');
    assert.equal(t.serviceMaxId, null);
  }
  // Three INSERT statements of two rows: each row carries its statement's line.
  const text = readFileSync(dump, 'utf8').split('\n');
  assert.ok(text[p.tags[0].line - 1].startsWith('INSERT INTO `leaf_alloc` VALUES (\'leaf-segment-test\''));
  assert.equal(p.tags[1].line, p.tags[0].line);
  assert.equal(p.tags[2].line, p.tags[0].line + 1);
  assert.deepEqual(planOf([dump, '--margin', '0']).tags.map((t) => t.newMaxId), LEAF_ROWS.map((r) => String(r.maxId)));
  // The human plan: one row per tag, the columns named.
  const human = cli(['import-leaf', dump, '--dry-run']);
  assert.match(human.stdout, /^tag\s+Leaf max_id\s+step\s+service maxId\s+new maxId\s+action$/m);
  assert.match(human.stdout, /^order\s+987654321\s+5000\s+\?\s+989654321\s+create\?$/m);
  assert.match(human.stdout, /4 tags from .*: 4 create\? \(dry run: nothing changed\)/);
});

test('import-leaf reads what mysqldump may write: column lists, one row per INSERT, other tables, no CREATE TABLE, _charset, DELIMITER, stdin', () => {
  const rowsOf = (text, args = []) => {
    const p = file('x.sql', text);
    return planOf([p, ...args]).tags.map((t) => [t.tag, t.leafMaxId, t.step]);
  };
  const expect = LEAF_ROWS.map((r) => [r.bizTag, String(r.maxId), r.step]);
  assert.deepEqual(rowsOf(mysqldump(LEAF_ROWS, { completeInsert: true })), expect);
  assert.deepEqual(rowsOf(mysqldump(LEAF_ROWS, { perInsert: 1 })), expect);
  // A whole database: another table's rows (with ; and ' inside strings) are skipped.
  const other = "CREATE TABLE `t` (`a` text);\nINSERT INTO `t` VALUES ('x;y'),('it''s; INSERT INTO leaf_alloc VALUES (1)');\n";
  assert.deepEqual(rowsOf(other + mysqldump(LEAF_ROWS)), expect);
  // Without CREATE TABLE: Leaf's column order; a qualified name, INSERT IGNORE, REPLACE, an introducer.
  const bare = "# a comment\nINSERT IGNORE INTO `leaf`.`leaf_alloc` VALUES ('a',10,100,_utf8mb4'd','2024-01-01 00:00:00');\n"
    + "REPLACE INTO leaf_alloc VALUES ('b',20,200,NULL,'2024-01-01 00:00:00');\n"
    + "DELIMITER ;;\nCREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW BEGIN SET @a = 1; END ;;\nDELIMITER ;\n"
    + "INSERT INTO leaf_alloc (step, biz_tag, max_id) VALUES (300, 'c', 30) ON DUPLICATE KEY UPDATE step = 300;\n";
  assert.deepEqual(rowsOf(bare), [['a', '10', 100], ['b', '20', 200], ['c', '30', 300]]);
  // A CSV, with and without its header, quoted fields holding commas, quotes and a line break.
  const csv = file('leaf.csv', leafCsv(LEAF_ROWS));
  assert.deepEqual(planOf([csv]).tags.map((t) => [t.tag, t.leafMaxId, t.step, t.description]), LEAF_ROWS.map((r) => [r.bizTag, String(r.maxId), r.step, r.description ?? '']));
  const noHeader = file('leaf2.txt', leafCsv(LEAF_ROWS, { header: false }));
  assert.deepEqual(planOf([noHeader, '--format', 'csv']).tags.map((t) => [t.tag, t.leafMaxId, t.step]), expect);
  // From stdin.
  assert.deepEqual(planOf(['-'], { input: mysqldump(LEAF_ROWS) }).tags.map((t) => t.tag), LEAF_ROWS.map((r) => r.bizTag));
});

test('import-leaf refuses what it cannot read, naming the line (exit 2, nothing asked of any service)', () => {
  const good = mysqldump(LEAF_ROWS);
  const lines = good.split('\n');
  const insertAt = lines.findIndex((l) => l.startsWith('INSERT INTO')) + 1;
  const cases = [
    // An INSERT cut short: its string never ends (where it opened).
    [good.slice(0, good.indexOf('Test leaf') + 4), insertAt, /string that never ends/],
    // A value that is not a number.
    [good.replace('2001,2000', 'abc,2000'), insertAt, /expected a value/],
    [good.replace('2001,2000', "'x',2000"), insertAt, /max_id: expected a whole number/],
    [good.replace('2001,2000', '-5,2000'), insertAt, /max_id: expected a whole number/],
    [good.replace('2001,2000', '9223372036854775808,2000'), insertAt, /max_id: expected 0\.\.=9223372036854775807/],
    // A row with a value missing.
    [good.replace(",2000,'Test leaf", ",'Test leaf"), insertAt, /expected 5 values/],
    // A tag the core refuses.
    [good.replace("'order'", "'or der'"), insertAt, /invalid_key: .*biz_tag/],
    // The same tag twice.
    [good.replace("'order'", "'user.v2'"), insertAt, /"user.v2" twice/],
    // No rows at all.
    [lines.slice(0, insertAt - 1).join('\n'), 1, /no rows of `leaf_alloc`/],
  ];
  for (const [text, line, message] of cases) {
    const p = file('bad.sql', text);
    const r = cli(['import-leaf', p, '--dry-run', '--url', 'http://127.0.0.1:1']);
    assert.equal(r.code, 2, `${message}: ${r.stderr}`);
    assert.ok(r.stderr.includes(`${p}:${line}: `), `line ${line} named: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
  // A line further down: the third line of a CSV, its quote never closed.
  const csv = file('bad.csv', 'biz_tag,max_id,step\na,1,10\nb,"2,20\n');
  const r = cli(['import-leaf', csv, '--dry-run']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^invalid_dump: .*bad\.csv:3: a quoted field that never ends/);
  // Leaf's step above the service's largest: refused, unless the new tags get another.
  const big = file('big.csv', 'coupon,3000000,2000000,big\n');
  const refused = cli(['import-leaf', big, '--dry-run']);
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /^out_of_range: .*big\.csv:1: step: .*--step N/);
  const t = planOf([big, '--step', '1000000']).tags[0];
  assert.equal(t.newMaxId, String(3_000_000 + 4_000_000), "the margin counts Leaf's step");
  assert.equal(cli(['import-leaf', join(dir, 'missing.sql'), '--dry-run']).code, 2);
  assert.equal(cli(['import-leaf', big, '--margin', '-1', '--dry-run']).code, 2);
});
