// The package inside workerd: tests/pkg/workerd/worker.mjs is bundled by wrangler
// (as `wrangler deploy` would; this proves the `workerd` export and the .wasm
// module import) and run by Miniflare. Needs Node 22 (wrangler's floor).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as MF from 'miniflare';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

test('the package works in workerd, imported by name', async () => {
  const out = mkdtempSync(join(tmpdir(), 'edgeleaf-workerd-'));
  execFileSync(join(ROOT, 'node_modules/.bin/wrangler'), ['deploy', '--dry-run', '--outdir', out], {
    cwd: join(ROOT, 'tests/pkg/workerd'),
    env: {
      ...process.env,
      // wrangler's launcher runs `node` from PATH: Node 22 from node_modules.
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      WRANGLER_SEND_METRICS: 'false', CI: '1', NO_UPDATE_NOTIFIER: '1',
    },
    stdio: 'pipe',
  });
  const wasm = readdirSync(out).filter((f) => f.endsWith('.wasm'));
  assert.equal(wasm.length, 1, 'the .wasm is a module of its own, not fetched');
  const options = {
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: join(out, 'worker.js') },
      { type: 'CompiledWasm', path: join(out, wasm[0]) },
    ],
    compatibilityDate: '2026-04-01',
    cf: false,
  };
  const mf = new MF.Miniflare(MF.convertV4MiniflareOptions ? MF.convertV4MiniflareOptions(options) : options);
  try {
    const res = await mf.dispatchFetch('http://localhost/?n=20000');
    assert.equal(res.status, 200);
    const r = await res.json();
    assert.equal(r.count, 20_000);
    assert.equal(r.unique, 20_000);
    assert.equal(r.increasing, true);
    assert.equal(r.workerId, 11);
    assert.match(r.first, /^[0-9]{18,19}$/);
    assert.equal(r.segmentUnique, 500);
    assert.equal(r.badOptionCode, 'invalid_option');
  } finally {
    await mf.dispose();
  }
});
