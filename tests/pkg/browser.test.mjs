// The package in real headless Chromium (Debian's), through a page that
// imports it with no bundler.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from '../support/chromium.mjs';
import { serve } from '../support/serve.mjs';

test('a page imports the package and generates IDs in Chromium', async () => {
  const server = await serve();
  let browser;
  try {
    browser = await launch();
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/tests/pkg/browser/index.html`);
    await page.waitForFunction(() => window.__result, null, { timeout: 60_000 });
    const r = await page.evaluate(() => window.__result);
    assert.deepEqual(errors, []);
    assert.equal(r.error, undefined);
    assert.equal(r.ok, true);
    assert.equal(r.count, 200_000);
    assert.equal(r.unique, 200_000);
    assert.equal(r.increasing, true);
    assert.equal(r.workerId, 42);
    assert.equal(r.typeofId, 'bigint');
    assert.match(r.idString, /^[0-9]{18,19}$/);
    assert.equal(r.jsSafe, true);
    assert.equal(r.expiresAt, 3_487_858_230_208);
    assert.equal(r.badOptionCode, 'out_of_range');
    assert.equal(r.badClockCode, 'clock_before_epoch');
    assert.equal(r.segmentUnique, 1000);
  } finally {
    server.close();
    await browser?.close();
  }
});
