// What `npm publish` would ship: every file the exports map names and every
// module the shipped JS imports is in the tarball; package.json says what an
// npm page and a bundler need.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join, normalize } from 'node:path';

const PKG = fileURLToPath(new URL('../../pkg', import.meta.url));
const manifest = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
const [report] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], { cwd: PKG }));
const files = new Set(report.files.map((f) => f.path));

// Every target of the exports map, with the conditions that lead to it.
function targets(node, path = []) {
  if (typeof node === 'string') return [[path, node]];
  return Object.entries(node).flatMap(([k, v]) => targets(v, [...path, k]));
}

test('every file the exports map names is in the tarball', () => {
  const all = targets(manifest.exports);
  assert.ok(all.length >= 10);
  for (const [path, target] of all) assert.ok(files.has(normalize(target)), `${path.join(' → ')}: ${target} missing from the tarball`);
  for (const f of [manifest.main, manifest.module, manifest.types]) assert.ok(files.has(normalize(f)), `${f} missing`);
});

test('every JS condition comes with its types, first', () => {
  for (const [subpath, node] of Object.entries(manifest.exports)) {
    if (typeof node === 'string') continue;
    // Each object whose `default` is a JS file names `types` before it.
    (function walk(n, where) {
      if (typeof n !== 'object') return;
      if (typeof n.default === 'string') {
        assert.equal(Object.keys(n)[0], 'types', `${where}: types must come first`);
        assert.ok(n.types.endsWith(n.default.endsWith('.cjs') ? '.d.cts' : '.d.ts'), `${where}: ${n.types} for ${n.default}`);
      }
      for (const [k, v] of Object.entries(n)) walk(v, `${where} → ${k}`);
    })(node, subpath);
  }
  const conditions = Object.keys(manifest.exports['.']);
  for (const c of ['workerd', 'node', 'browser', 'import', 'require', 'default']) assert.ok(conditions.includes(c), `no ${c} condition`);
  assert.equal(conditions.at(-1), 'default');
  assert.equal(manifest.exports['./edgeleaf.wasm'], './web/edgeleaf_bg.wasm');
});

test('every module the shipped JS imports is shipped too', () => {
  for (const f of files) {
    if (!/\.(mjs|js)$/.test(f)) continue;
    const text = readFileSync(join(PKG, f), 'utf8');
    for (const [, spec] of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+['"](\.[^'"]+)['"]/gm)) {
      const to = normalize(join(dirname(f), spec));
      assert.ok(files.has(to), `${f} imports ${spec}, which is not in the tarball`);
    }
  }
});

test('package.json: the npm page and bundlers', () => {
  assert.equal(manifest.type, 'module');
  assert.equal(manifest.sideEffects, false);
  assert.ok(manifest.repository?.url, 'repository');
  assert.ok(manifest.homepage, 'homepage');
  assert.ok(files.has('README.md'));
  assert.ok(![...files].some((f) => f.endsWith('.d.ts') && !['index.d.ts', 'slim.d.ts', 'file-store.d.ts'].includes(f)), 'only the hand-written types ship');
});
