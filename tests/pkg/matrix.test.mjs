// The packaging matrix: the npm package as its users get it, in every
// toolchain they have. pkg/ is packed once (`npm pack`, what `npm publish`
// would upload), the tarball installed into each app of tests/pkg/matrix/
// (one small app per tool, the tool pinned by the app's own lockfile, default
// settings), and each app's check.mjs builds/runs it and draws IDs: in Node,
// Deno, Bun and workerd directly, in headless Chromium for browser builds.
// Every app must hand back at least 3 IDs, all distinct, each a decimal string
// of a valid snowflake in Leaf's layout made during this run, with no console
// error on any page it opened. One line per app says the tool, its version,
// what was checked and how long it took.
//
// MATRIX=esbuild,rollup runs only those apps. Needs the package built
// (scripts/pkg.sh); installs the apps' tools itself (scripts/setup.sh matrix).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Snowflake } from 'edgeleaf';
import { ROOT, harness, closeBrowser } from './matrix/lib.mjs';

const MATRIX = join(ROOT, 'tests/pkg/matrix');
const only = process.env.MATRIX ? new Set(process.env.MATRIX.split(',')) : null;
const apps = readdirSync(MATRIX, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(MATRIX, d.name, 'check.mjs')))
  .map((d) => d.name)
  .filter((a) => !only || only.has(a))
  .sort();
const CONCURRENCY = 2; // the machine's cores
const started = Date.now();
const lines = [];

function sh(cmd, args, opts = {}) {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', fail);
    child.on('close', (code) => (code === 0 ? ok(out) : fail(new Error(`${cmd} ${args.join(' ')} (in ${opts.cwd ?? '.'}): exit ${code}\n${out.slice(-4000)}`))));
  });
}

/** Runs `fn` over `items`, `n` at a time. */
async function pool(items, n, fn) {
  const queue = [...items];
  await Promise.all(Array.from({ length: Math.min(n, queue.length) }, async () => {
    while (queue.length) await fn(queue.shift());
  }));
}

// The IDs an app drew: decimal strings of Leaf-layout snowflakes of this run.
function checkIds(app, ids) {
  assert.ok(Array.isArray(ids), `${app}: ids is not an array`);
  assert.ok(ids.length >= 3, `${app}: only ${ids.length} IDs`);
  assert.equal(new Set(ids).size, ids.length, `${app}: duplicate IDs ${JSON.stringify(ids)}`);
  const now = Date.now();
  for (const id of ids) {
    assert.ok(typeof id === 'string' && /^[1-9][0-9]*$/.test(id), `${app}: ${JSON.stringify(id)} is not a decimal string`);
    const parts = Snowflake.decompose(id);
    assert.ok(parts.timestamp >= started - 60_000 && parts.timestamp <= now + 60_000,
      `${app}: ${id} was made at ${parts.date.toISOString()}, not during this run`);
    assert.equal(Snowflake.compose(parts), BigInt(id), `${app}: ${id} does not round-trip`);
  }
}

// The tool's version as installed in the app (its package.json), or the
// runtime's for the Node apps.
function versionOf(app, tool) {
  const file = join(MATRIX, app, 'node_modules', tool, 'package.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')).version;
  return tool === 'node' ? '20+22' : '?';
}

function toolOf(app, mod) {
  if (mod.tool) return mod.tool;
  const pkg = JSON.parse(readFileSync(join(MATRIX, app, 'package.json'), 'utf8'));
  return Object.keys({ ...pkg.dependencies, ...pkg.devDependencies })[0] ?? 'node';
}

let tarball;
const packDir = mkdtempSync(join(tmpdir(), 'edgeleaf-matrix-'));
after(async () => {
  await closeBrowser();
  rmSync(packDir, { recursive: true, force: true });
  const total = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`\nmatrix: ${apps.length} apps in ${total} s (checks ${CONCURRENCY} at a time)\n${lines.join('\n')}`);
});

// A matrix of no app proves nothing: an empty folder, or MATRIX naming apps
// that are not there, fails.
test('the matrix has apps to check', () => {
  assert.ok(apps.length > 0, `no app in ${MATRIX}${only ? ` named by MATRIX=${process.env.MATRIX}` : ' (a folder with a check.mjs)'}`);
  if (only) assert.deepEqual([...only].filter((a) => !apps.includes(a)), [], 'MATRIX names apps that are not in tests/pkg/matrix/');
});

// A fresh machine downloads every app's tools here (scripts/test.sh installs
// them before, as setup): minutes, not the 5 the other tests get.
test('pack the package and install it into every app', { timeout: 1_800_000 }, async () => {
  assert.ok(existsSync(join(ROOT, 'pkg/web/edgeleaf_bg.wasm')), 'the package is not built: run scripts/pkg.sh');
  const t0 = Date.now();
  await sh(join(ROOT, 'scripts/setup.sh'), ['matrix'], { cwd: ROOT });
  const [report] = JSON.parse(execFileSync('npm', ['pack', '--json', '--loglevel=error', '--pack-destination', packDir],
    { cwd: join(ROOT, 'pkg'), encoding: 'utf8' }));
  tarball = join(packDir, report.filename);
  const t1 = Date.now();
  // npm waits on the disk more than on the CPU: more at once than there are cores.
  await pool(apps, 4, (app) => sh('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error', tarball],
    { cwd: join(MATRIX, app) }));
  lines.push(`  (tools installed or checked in ${((t1 - t0) / 1000).toFixed(1)} s; ${report.filename} ` +
    `(${report.size} bytes packed) installed into ${apps.length} apps in ${((Date.now() - t1) / 1000).toFixed(1)} s)`);
});

test('every app draws IDs from the packed package', { concurrency: CONCURRENCY }, async (t) => {
  assert.ok(tarball, 'not packed');
  await Promise.all(apps.map((app) => t.test(app, { timeout: 600_000 }, async () => {
    const t0 = Date.now();
    const mod = await import(join(MATRIX, app, 'check.mjs'));
    const tool = toolOf(app, mod);
    const h = harness(join(MATRIX, app));
    let line = `  ${app}: ${tool}@${versionOf(app, tool)}`;
    try {
      const { ids, note } = await mod.default(h);
      checkIds(app, ids);
      assert.deepEqual(h.consoleErrors, [], `${app}: console errors`);
      line += ` — ${note} (${ids.length} IDs) — ${((Date.now() - t0) / 1000).toFixed(1)} s`;
    } catch (e) {
      line += ` — FAILED after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${String(e.message).split('\n')[0]}`;
      throw e;
    } finally {
      lines.push(line);
      await h.close();
    }
  })));
});
