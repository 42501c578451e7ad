// Thousands of tags (issue 33, part 2): every view answers with a bounded
// number of object calls whatever the number of tags — at most 50, the
// Free plan's subrequests per request — and within 1 s. The Worker counts
// its object calls in `Edgeleaf-Test-Object-Calls` (TEST_COUNT_CALLS, on a
// loopback host only). EDGELEAF_MANY_TAGS sets the number of tags (5,000
// by default; 10,000 for the issue's timings).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnService, killHard, ADMIN } from '../support/service.mjs';

const N = Number(process.env.EDGELEAF_MANY_TAGS ?? 5000);
const MAX_CALLS = 50;
const name = (i) => `t${String(i).padStart(5, '0')}`;

test(`${N} tags: GET /v1/tags, /metrics and /v1/monitor make at most ${MAX_CALLS} object calls`, async () => {
  const { child, url } = await spawnService(mkdtempSync(join(tmpdir(), 'edgeleaf-many-')), { TEST_COUNT_CALLS: '1' });
  const call = (path, init = {}, token = ADMIN) => fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });
  try {
    const made = Date.now();
    let next = 0;
    const maker = async () => {
      while (next < N) {
        const i = next++;
        let res;
        // A new object's first answer may miss the 1 s budget under this
        // load (503, Retry-After): the same PUT again.
        for (let attempt = 0; attempt < 5; attempt++) {
          res = await call(`/v1/tags/${name(i)}`, { method: 'PUT', body: JSON.stringify({ step: 100, description: `tag ${i}` }) });
          if (res.status !== 503) break;
          await res.arrayBuffer();
        }
        assert.ok(res.status === 201 || res.status === 200, `PUT ${name(i)}: ${res.status} ${await res.text()}`);
      }
    };
    await Promise.all(Array.from({ length: 16 }, maker));
    console.log(`created ${N} tags in ${Date.now() - made} ms`);
    // A few tags hand out IDs, so that summaries have rates to rank.
    for (const i of [0, 7, N - 1]) assert.equal((await call(`/v1/segment/${name(i)}?count=5`)).status, 200);

    const measure = async (path) => {
      const t0 = Date.now();
      const res = await call(path);
      const ms = Date.now() - t0;
      const body = await res.text();
      assert.equal(res.status, 200, `${path}: ${body.slice(0, 300)}`);
      const calls = Number(res.headers.get('edgeleaf-test-object-calls'));
      assert.ok(res.headers.has('edgeleaf-test-object-calls'), `${path}: no call count`);
      console.log(`${path}: ${calls} object calls, ${ms} ms, ${body.length} bytes`);
      return { calls, ms, body };
    };
    // Every page is bounded, and the pages together list every tag once.
    const seen = new Set();
    let cursor = '';
    let pages = 0;
    for (;;) {
      const { calls, body } = await measure(`/v1/tags${cursor ? `?cursor=${encodeURIComponent(cursor)}&limit=1000` : '?limit=1000'}`);
      assert.ok(calls <= MAX_CALLS, `GET /v1/tags: ${calls} object calls`);
      const page = JSON.parse(body);
      assert.deepEqual(page.unavailable ?? [], []);
      for (const t of page.tags) {
        assert.ok(!seen.has(t.bizTag), `${t.bizTag} listed twice`);
        seen.add(t.bizTag);
      }
      pages++;
      if (!page.next) break;
      cursor = page.next;
    }
    assert.equal(seen.size, N, `${pages} pages listed ${seen.size} tags`);
    // Now that every tag has a summary: one page, the views.
    const timed = [];
    for (const path of ['/v1/tags', '/metrics', '/v1/monitor', '/v1/tags?q=t0000', `/v1/tags/${name(7)}/history`]) {
      const { calls, ms, body } = await measure(path);
      assert.ok(calls <= MAX_CALLS, `${path}: ${calls} object calls`);
      timed.push([path, ms]);
      if (path === '/metrics') {
        const series = body.split('\n').filter((l) => l.startsWith('edgeleaf_tag_max_id{')).length;
        assert.ok(series <= 100, `/metrics: ${series} per-tag series`);
        assert.match(body, new RegExp(`^edgeleaf_tags ${N}$`, 'm'));
      }
      if (path === '/v1/tags?q=t0000') assert.deepEqual(JSON.parse(body).tags.map((t) => t.bizTag), Array.from({ length: 10 }, (_, i) => name(i)));
    }
    if (process.env.EDGELEAF_MANY_TAGS_TIMED) for (const [path, ms] of timed) assert.ok(ms < 1000, `${path}: ${ms} ms`);
  } finally {
    killHard(child);
  }
});
