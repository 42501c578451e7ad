// The dashboard (www/index.html, served by the Worker at /) in headless
// Chromium against the Worker listening on 127.0.0.1: a person types the
// token, creates tags, draws IDs and sees them charted from the stores'
// histories, opens one tag's detail (its allocators) by clicking its name —
// the page asks no tag's own routes until then —, watches worker-ID leases
// count down, reads a snowflake's bit fields, creates and revokes an API
// key; then the same on a phone's width.
// No console errors anywhere. Screenshots land in the temp directory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch } from '../support/chromium.mjs';
import { spawnService, killHard, ADMIN } from '../support/service.mjs';

const SERIES = [[0x2e, 0x6f, 0xd8], [0x1f, 0x7a, 0x4d]];

/** Pixels of a chart's canvas drawn in the first two series' colours. */
const seriesPixels = (page, id) => page.evaluate(([id, colors]) => {
  const canvas = document.querySelector(`#${id} canvas`);
  if (!canvas) return 0;
  const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
  let n = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (data[i + 3] > 200 && colors.some(([r, g, b]) => Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 40)) n++;
  }
  return n;
}, [id, SERIES]);

test('the dashboard: charts from real history, leases counting down, bit fields, keys, phone width', async () => {
  const { child, url } = await spawnService(mkdtempSync(join(tmpdir(), 'edgeleaf-ui-')));
  const call = (path, init = {}, token = ADMIN) => fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
  let browser;
  try {
    browser = await launch();
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('dialog', (d) => d.accept());
    // What the page asks the service, in order.
    const asked = [];
    page.on('request', (r) => asked.push(new URL(r.url()).pathname));
    await page.goto(`${url}/`);
    // Without a token the page says what to do (and asks nothing it would be refused).
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
    assert.deepEqual(JSON.parse(await page.textContent('#output')).ids.slice(0, 3), ['1', '2', '3']);
    // More traffic on two tags, as other clients would make it.
    await call('/v1/tags/ui-billing', { method: 'PUT', body: JSON.stringify({ step: 500 }) });
    for (let i = 0; i < 4; i++) {
      await call('/v1/segment/ui-orders?count=1000');
      await call('/v1/segment/ui-billing?count=700');
    }
    // The charts draw both tags' series from the stores' histories.
    await page.waitForFunction(() => document.querySelectorAll('#chart-ids .u-series').length >= 3, null, { timeout: 15_000 });
    const legend = await page.textContent('#chart-ids .u-legend');
    assert.ok(legend.includes('ui-orders') && legend.includes('ui-billing'), legend);
    await page.waitForFunction(() => document.getElementById('tags').textContent.match(/ui-orders.*?> 1,000 years/));
    assert.ok(await seriesPixels(page, 'chart-ids') > 100, 'IDs per minute drawn');
    assert.ok(await seriesPixels(page, 'chart-step') > 20, 'step over time drawn');

    // One tag's detail, on click: loading and refreshing the page asked no
    // tag's own route (its history, its allocators); the click asks that
    // tag's, and the panel shows its regional allocators' blocks.
    const perTag = () => asked.filter((p) => /^\/v1\/tags\/[^/]+\/(history|allocators)$/.test(p));
    assert.deepEqual(perTag(), [], 'the page asked per-tag routes before any click');
    await page.click('#tags td.link:text-is("ui-orders")');
    await page.waitForFunction(() => document.getElementById('detail-name').textContent === 'ui-orders'
      && [...document.querySelectorAll('#allocators tr')].some((r) => /^\d+ … \d+$/.test(r.children[1]?.textContent ?? '')), null, { timeout: 10_000 });
    assert.deepEqual([...new Set(perTag())].sort(), ['/v1/tags/ui-orders/allocators', '/v1/tags/ui-orders/history']);
    const regions = await page.$$eval('#allocators tr', (rows) => rows.map((r) => r.children[0].textContent));
    const view = await (await call('/v1/tags/ui-orders/allocators')).json();
    assert.deepEqual(regions.sort(), view.allocators.filter((a) => a.blocksLeased > 0 || a.blocks.length > 0).map((a) => a.region).sort());
    const maxId = await page.$eval('#detail-tiles', (t) => t.textContent);
    assert.ok(maxId.includes('max_id'), maxId);
    assert.ok(await page.$eval('#tags tr.picked', (r) => r.textContent.includes('ui-orders')), 'the picked tag marked');

    // A snowflake, drawn as its fields: the worker field holds what the API decodes.
    await page.click('#decode-new');
    await page.waitForFunction(() => document.querySelectorAll('#bits > div').length === 3);
    const id = await page.inputValue('#decode-id');
    const decoded = await (await call(`/v1/snowflake/${id}`)).json();
    const fields = await page.$$eval('#bits > div b', (bs) => bs.map((b) => b.textContent));
    assert.deepEqual(fields, [String(decoded.timestamp), String(decoded.workerId), String(decoded.sequence)]);
    assert.equal((await page.textContent('#bitstring')).length, 63);

    // A lease, on the occupancy grid, counting down.
    const lease = await (await call('/v1/workers/lease', { method: 'POST', body: JSON.stringify({ nodeKey: 'ui-node', nodeTime: Date.now() }) })).json();
    await page.waitForFunction(() => document.getElementById('leases').textContent.includes('ui-node'), null, { timeout: 10_000 });
    const countdown = () => page.$$eval('#leases tr', (rows) => rows.find((r) => r.textContent.includes('ui-node')).lastChild.textContent);
    const first = await countdown();
    await page.waitForTimeout(2100);
    assert.notEqual(await countdown(), first, 'the expiry counts down');
    assert.match(first, /^\d+ s$/);
    assert.equal(await page.$eval(`#occupancy i:nth-child(${lease.workerId + 1})`, (c) => c.className), 'live');

    // An API key: made from the form, its secret shown once, revoked from the table.
    await page.fill('#key-name', 'ui-key');
    await page.click('#key-form button');
    await page.waitForSelector('#secret code');
    const secret = await page.textContent('#secret code');
    assert.match(secret, /^elk_[0-9a-f]{12}_[0-9a-f]{64}$/);
    assert.equal((await call('/v1/segment/ui-orders', {}, secret)).status, 200);
    await page.click('#secret button');
    await page.waitForFunction(() => document.getElementById('keys').textContent.includes('ui-key'));
    assert.ok(!(await page.textContent('body')).includes(secret), 'the secret is gone from the page');
    await page.click('#keys tr:has-text("ui-key") button');
    await page.waitForFunction(() => !document.getElementById('keys').textContent.includes('ui-key'));
    assert.equal((await call('/v1/segment/ui-orders', {}, secret)).status, 403);

    // An opaque tag: created, listed as such, its IDs revealed.
    await page.fill('#tag-name', 'ui-secret');
    await page.fill('#tag-step', '');
    await page.fill('#tag-desc', '');
    await page.selectOption('#tag-opaque', 'digits:12');
    await page.click('#tag-form button');
    await page.waitForFunction(() => document.getElementById('tags').textContent.includes('opaque 12 digits'));
    await page.fill('#seg-tag', 'ui-secret');
    await page.fill('#seg-count', '3');
    await page.click('#segment-form button');
    await page.waitForFunction(() => document.getElementById('output').textContent.includes('"ids"'));
    const opaqueId = JSON.parse(await page.textContent('#output')).ids[0];
    await page.fill('#reveal-tag', 'ui-secret');
    await page.fill('#reveal-id', opaqueId);
    await page.click('#reveal-form button');
    await page.waitForFunction(() => document.getElementById('output').textContent.includes('belongs'));
    assert.equal(JSON.parse(await page.textContent('#output')).belongs, true);
    assert.match(await page.textContent('#layout'), /layout 41\/10\/12/);
    await page.screenshot({ path: join(tmpdir(), 'edgeleaf-dashboard.png'), fullPage: true });

    // A phone's width: everything fits, the charts draw.
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    phone.on('pageerror', (e) => errors.push(`phone: ${e.message}`));
    phone.on('console', (m) => { if (m.type() === 'error') errors.push(`phone: ${m.text()}`); });
    await phone.goto(`${url}/`);
    await phone.fill('#token', ADMIN);
    await phone.dispatchEvent('#token', 'change');
    await phone.waitForFunction(() => document.querySelectorAll('#chart-ids .u-series').length >= 3, null, { timeout: 15_000 });
    assert.ok(await seriesPixels(phone, 'chart-ids') > 50, 'IDs per minute drawn on a phone');
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than the phone`);
    await phone.screenshot({ path: join(tmpdir(), 'edgeleaf-dashboard-phone.png'), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    await browser?.close();
    await killHard(child);
  }
});

test('a page on another origin calls the service when CORS_ORIGINS lists it (preflight, Authorization), and only then', async () => {
  const { createServer } = await import('node:http');
  // The other origin: a page that draws IDs from the service with a token.
  const site = createServer((req, res) => { res.setHeader('content-type', 'text/html'); res.end('<!doctype html><title>app</title>'); });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const sitePort = site.address().port;
  const allowed = `http://127.0.0.1:${sitePort}`;
  const { child, url } = await spawnService(mkdtempSync(join(tmpdir(), 'edgeleaf-cors-')), { CORS_ORIGINS: allowed });
  let browser;
  try {
    browser = await launch();
    const draw = async (origin) => {
      const page = await browser.newPage();
      await page.goto(`${origin}/`);
      const result = await page.evaluate(async ([service, token]) => {
        try {
          const res = await fetch(`${service}/v1/segment/cors-app?count=3`, { headers: { authorization: `Bearer ${token}` } });
          return { status: res.status, body: await res.json(), cache: res.headers.get('cache-control') };
        } catch (e) {
          return { failed: String(e) };
        }
      }, [url, ADMIN]);
      await page.close();
      return result;
    };
    await fetch(`${url}/v1/tags/cors-app`, { method: 'PUT', body: '{}', headers: { authorization: `Bearer ${ADMIN}` } });
    const ok = await draw(allowed);
    assert.equal(ok.status, 200, JSON.stringify(ok));
    assert.deepEqual(ok.body.ids, ['1', '2', '3']);
    assert.equal(ok.cache, 'no-store');
    // The same page from an origin not listed: the browser refuses the answer.
    const refused = await draw(`http://localhost:${sitePort}`);
    assert.match(refused.failed ?? '', /TypeError|Failed to fetch/, JSON.stringify(refused));
  } finally {
    await browser?.close();
    await killHard(child);
    site.close();
  }
});

test('no other page may frame the dashboard: frame-ancestors \'none\' and X-Frame-Options DENY, and Chromium refuses the frame', async () => {
  const { createServer } = await import('node:http');
  const { child, url } = await spawnService(mkdtempSync(join(tmpdir(), 'edgeleaf-frame-')));
  // Another origin's page that frames the dashboard.
  const site = createServer((req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(`<!doctype html><title>framer</title><iframe id="f" src="${url}/" width="800" height="600"></iframe>`);
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  let browser;
  try {
    for (const path of ['/', '/index.html']) {
      const res = await fetch(`${url}${path}`);
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      const csp = res.headers.get('content-security-policy') ?? '';
      assert.ok(csp.split(';').map((d) => d.trim()).includes("frame-ancestors 'none'"), `${path}: Content-Security-Policy ${JSON.stringify(csp)}`);
      assert.equal(res.headers.get('x-frame-options'), 'DENY', path);
    }
    browser = await launch();
    const page = await browser.newPage();
    const messages = [];
    page.on('console', (m) => messages.push(m.text()));
    await page.goto(`http://127.0.0.1:${site.address().port}/`);
    await page.waitForTimeout(1000);
    const frame = page.frames().find((f) => f !== page.mainFrame());
    const token = frame ? await frame.$('#token').catch(() => null) : null;
    assert.equal(token, null, 'the dashboard loaded inside another origin\'s frame');
    assert.ok(messages.some((m) => /frame-ancestors|X-Frame-Options/.test(m)), `Chromium did not say why: ${JSON.stringify(messages)}`);
  } finally {
    await browser?.close();
    await killHard(child);
    site.close();
  }
});
