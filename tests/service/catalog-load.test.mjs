// Is one catalog a hot spot? (issue 33, part 2: "sharded if one catalog
// would be a hot spot".) Each busy tag reports its summary at most once a
// minute, so N busy tags send the one `Catalog` object N/60 reports a second
// (10,000: 167/s), and a Durable Object's soft limit is about 1,000 requests
// a second. This test holds a catalog of N tags (EDGELEAF_CATALOG_TAGS,
// 10,000 by default) and measures the object's own work per report: every
// tag's summary sent in batches (one in flight), less what a one-summary
// call costs through this harness (Miniflare's proxy from Node, which is
// the harness's, not the object's: from 16 callers at once the proxy
// carries about 90 calls a second on a loaded 2-core machine, as many for
// a bare `add` as for a report). It fails if that work allows fewer than
// twice the reports N busy tags send (then sharding is due); the listings
// and scrapes on N summaries are timed after. docs/service.md ("Many
// tags") carries the figures and the threshold.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { start, ADMIN } from '../support/service.mjs';

const N = Number(process.env.EDGELEAF_CATALOG_TAGS ?? 10000);
const CALLERS = 16;
const name = (i) => `c${String(i).padStart(5, '0')}`;
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

test(`one catalog of ${N} tags takes a report from each: reports a second, against ${Math.ceil(N / 60)}/s needed`, async () => {
  const svc = await start();
  try {
    // One real tag, for the shape of a view (the summary's `tag`).
    assert.equal((await svc.admin('/v1/tags/c-shape', { method: 'PUT', body: '{"step":100}' })).status, 200);
    const view = await (await svc.admin('/v1/tags/c-shape')).json();
    const ns = await svc.mf.getDurableObjectNamespace('CATALOG');
    const catalog = ns.get(ns.idFromName('catalog'));
    const ask = async (request) => {
      const res = await catalog.fetch('https://catalog.internal/', { method: 'POST', body: JSON.stringify(request) });
      const text = await res.text();
      assert.equal(res.status, 200, text.slice(0, 200));
      return text;
    };
    const run = async (count, each) => {
      let next = 0;
      await Promise.all(Array.from({ length: CALLERS }, async () => {
        while (next < count) await each(next++);
      }));
    };
    const t0 = Date.now();
    await run(N, (i) => ask({ add: { bizTag: name(i) } }));
    console.log(`catalog: ${N} tags added in ${Date.now() - t0} ms`);

    const summary = (i, at) => ({
      tag: { ...view, bizTag: name(i), maxId: String(1000 * i) },
      // The last hour's minutes, which readers age the rate from: 30·i IDs
      // half an hour before `at` (60·i an hour then, a little less later).
      stats: {
        allocations: i, idsPerHour: 60 * i, remaining: String(2n ** 63n - 1n - BigInt(1000 * i)), exhaustedAtMs: null, atMs: at,
        minutes: [[at - 1_800_000, 30 * i]],
      },
    });
    // A report as a tag sends it (one summary), one at a time: the time of a
    // call through this harness (Miniflare's proxy from Node), which is not
    // the object's.
    const single = [];
    for (let i = 0; i < 200; i++) {
      const a = Date.now();
      await ask({ report: { summaries: [summary(i, Date.now())] } });
      single.push(Date.now() - a);
    }
    single.sort((a, b) => a - b);
    // The object's own work: every tag's report in batches of 100, one batch
    // in flight; per summary, what a batch takes beyond a one-summary call.
    const BATCH = 100; // within an object call's 64 KB
    const r0 = Date.now();
    for (let from = 0; from < N; from += BATCH) {
      const at = Date.now();
      await ask({ report: { summaries: Array.from({ length: Math.min(BATCH, N - from) }, (_, k) => summary(from + k, at)) } });
    }
    const ms = Date.now() - r0;
    const calls = Math.ceil(N / BATCH);
    const perSummary = Math.max(0, ms - calls * pct(single, 50)) / N;
    const capacity = Math.floor(1000 / Math.max(perSummary, 0.001));
    const needed = Math.ceil(N / 60);
    // The reads of a dashboard and a scraper, on the catalog of N summaries.
    const reads = [];
    for (const path of ['/v1/tags?limit=100', '/metrics', '/v1/fleet', '/v1/tags?limit=1000']) {
      const a = Date.now();
      const res = await svc.admin(path);
      await res.arrayBuffer();
      assert.equal(res.status, 200, path);
      reads.push(`${path} ${Date.now() - a} ms`);
    }
    console.log(`catalog of ${N} tags: a one-summary report ${pct(single, 50)} ms (p50 through the harness); `
      + `${N} summaries in ${calls} batches: ${ms} ms, ${perSummary.toFixed(3)} ms of the object's work a summary `
      + `(at most ${capacity} reports/s of its work; needed at ${N} busy tags: ${needed}/s); then ${reads.join(', ')}`);
    // The reports were kept: the busiest tag ranks first.
    const metrics = await (await svc.admin('/metrics?top=1')).text();
    // Its rate as of the scrape, aged from its minutes: 60·i an hour at the
    // report, within 5% (90 s) later.
    const top = metrics.match(/^edgeleaf_tag_ids_per_hour\{tag="([^"]+)"\} (\S+)$/m);
    assert.ok(top, metrics.slice(0, 500));
    assert.equal(top[1], name(N - 1));
    const rate = Number(top[2]);
    assert.ok(rate <= 60 * (N - 1) && rate >= 0.95 * 60 * (N - 1), `${name(N - 1)}: ${rate} IDs an hour`);
    assert.ok(capacity >= 2 * needed, `one catalog: its work allows ${capacity} reports/s, below twice the ${needed}/s of ${N} busy tags: shard it`);
  } finally {
    await svc.dispose();
  }
});
