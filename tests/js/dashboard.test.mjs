// The dashboard (www/index.html, served by the Worker at /) in headless
// Chromium against the Worker listening on 127.0.0.1: a person types the
// token, creates a tag, draws IDs and sees the buffers and the registry.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch } from './chromium.mjs';
import { ROOT, ADMIN } from './service.mjs';

test('the dashboard manages tags and shows buffers, counters and leases', async () => {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  const child = spawn(process.execPath, [join(ROOT, 'tests/js/service.mjs'), mkdtempSync(join(tmpdir(), 'edgeleaf-ui-')), String(port)], {
    detached: true, stdio: ['ignore', 'pipe', 'inherit'],
  });
  let browser;
  try {
    await new Promise((resolve) => child.stdout.on('data', (d) => String(d).includes('ready') && resolve()));
    browser = await launch();
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`http://127.0.0.1:${port}/`);
    // Without a token the page says what to do.
    await page.waitForFunction(() => document.getElementById('status').textContent.includes('token'));
    await page.fill('#token', ADMIN);
    await page.dispatchEvent('#token', 'change');
    await page.fill('#tag-name', 'ui-orders');
    await page.fill('#tag-step', '100');
    await page.fill('#tag-desc', 'created from the dashboard');
    await page.click('#tag-form button');
    await page.waitForFunction(() => document.getElementById('tags').textContent.includes('ui-orders'));
    await page.fill('#seg-tag', 'ui-orders');
    await page.fill('#seg-count', '30');
    await page.click('#segment-form button');
    await page.waitForFunction(() => document.getElementById('output').textContent.includes('"ids"'));
    const ids = JSON.parse(await page.textContent('#output')).ids;
    assert.deepEqual(ids.slice(0, 3), ['1', '2', '3']);
    await page.click('#snowflake-form button');
    await page.waitForFunction(() => /"ids"/.test(document.getElementById('output').textContent));
    const sf = JSON.parse(await page.textContent('#output')).ids[0];
    await page.fill('#decode-id', sf);
    await page.click('#decode-form button');
    await page.waitForFunction(() => document.getElementById('output').textContent.includes('workerId'));
    await page.waitForFunction(() => document.getElementById('buffers').textContent.includes('ui-orders')
      && document.getElementById('workers').textContent.includes('live'));
    assert.match(await page.textContent('#layout'), /layout 41\/10\/12/);
    // An opaque tag: created, listed as such, its IDs revealed.
    await page.fill('#tag-name', 'ui-secret');
    await page.fill('#tag-step', '');
    await page.fill('#tag-desc', '');
    await page.selectOption('#tag-opaque', 'digits:12');
    await page.click('#tag-form button');
    await page.waitForFunction(() => document.getElementById('tags').textContent.includes('opaque, 12 digits'));
    await page.fill('#seg-tag', 'ui-secret');
    await page.fill('#seg-count', '3');
    await page.click('#segment-form button');
    await page.waitForFunction(() => document.getElementById('output').textContent.includes('"ids"'));
    const secret = JSON.parse(await page.textContent('#output')).ids[0];
    await page.fill('#reveal-tag', 'ui-secret');
    await page.fill('#reveal-id', secret);
    await page.click('#reveal-form button');
    await page.waitForFunction(() => document.getElementById('output').textContent.includes('belongs'));
    const revealed = JSON.parse(await page.textContent('#output'));
    assert.equal(revealed.belongs, true);
    await page.screenshot({ path: join(tmpdir(), 'edgeleaf-dashboard.png'), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    await browser?.close();
    try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
  }
});
