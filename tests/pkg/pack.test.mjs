// What `npm publish` would ship: every file the exports map and the entries
// load is in the tarball.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const PKG = fileURLToPath(new URL('../../pkg', import.meta.url));

test('the tarball holds every entry, the wasm for both targets and the types', () => {
  const [report] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], { cwd: PKG }));
  const files = new Set(report.files.map((f) => f.path));
  for (const f of ['package.json', 'README.md', 'index.d.ts', 'api.mjs', 'api.cjs', 'errors.mjs', 'snowflake.mjs',
    'segment.mjs', 'opaque.mjs', 'client.mjs', 'index.mjs', 'index.cjs',
    'browser.mjs', 'workerd.mjs', 'node/edgeleaf.js', 'node/edgeleaf_bg.wasm', 'web/edgeleaf.js',
    'web/edgeleaf_bg.wasm', 'web/package.json']) {
    assert.ok(files.has(f), `${f} missing from the tarball`);
  }
  assert.ok(![...files].some((f) => f.endsWith('.d.ts') && f !== 'index.d.ts'), 'only the hand-written types ship');
});
