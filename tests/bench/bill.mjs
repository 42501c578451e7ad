// What IDs cost on Cloudflare, counted: the prices of the dated list in
// docs/benchmarks.md ("The bill"), and the service's own counts of what a run
// made the Durable Objects do (TEST_COUNT_CALLS: every answer of a loopback
// request says in `Edgeleaf-Test-Cost-Total` the object requests, rows read
// and rows written of every request its isolate handled, `waitUntil`'s
// calls included). Used by tests/service/costs.test.mjs (the targets) and
// tests/bench/costs.bench.mjs (the report's rows).

/** USD per unit, 2026-11-27: Cloudflare's Workers and Durable Objects pricing pages (Paid plan, beyond the included amounts). */
export const PRICES = {
  date: '2026-11-27',
  workerRequest: 0.30 / 1e6,
  objectRequest: 0.15 / 1e6,
  rowWritten: 1.00 / 1e6,
  rowRead: 0.001 / 1e6,
  gbSecond: 12.50 / 1e6,
};

/** The targets of issue 33: the objects' share ≤ 1% of the Worker request that carries the IDs; an idle tag ≤ $0.01 a month. */
export const TARGETS = {
  singleIdPerMillion: 0.01 * PRICES.workerRequest * 1e6, // $0.003
  idleTagPerMonth: 0.01,
};

/** `{ requests, rowsRead, rowsWritten }` from a cost header's `requests rows_read rows_written`. */
export function parseCost(header) {
  const [requests, rowsRead, rowsWritten] = String(header ?? '').split(' ').map(Number);
  if (![requests, rowsRead, rowsWritten].every(Number.isFinite)) throw new Error(`cost header: expected "requests read written", found ${header}`);
  return { requests, rowsRead, rowsWritten };
}

export function minus(a, b) {
  return { requests: a.requests - b.requests, rowsRead: a.rowsRead - b.rowsRead, rowsWritten: a.rowsWritten - b.rowsWritten };
}

/** USD of what the objects did (duration not counted: see docs/benchmarks.md). */
export function objectDollars(c) {
  return c.requests * PRICES.objectRequest + c.rowsRead * PRICES.rowRead + c.rowsWritten * PRICES.rowWritten;
}

/** The isolate's total so far, read from the answer to `GET /v1/ping` (no object call). */
export async function totalCost(fetchPing) {
  const res = await fetchPing();
  await res.text();
  return parseCost(res.headers.get('edgeleaf-test-cost-total'));
}

/**
 * What `n` calls of `draw(i)` (each resolving the number of IDs it got),
 * `chains` of them at a time, cost the objects, from the isolate's totals
 * before and after (`ping` reads them; `settleMs` lets `waitUntil`'s
 * refills finish first):
 * `{ ids, calls, cost, perMillion, perMillionIds: { requests, rowsRead, rowsWritten } }`.
 */
export async function measure(ping, draw, n, { settleMs = 300, chains = 1, from = 0 } = {}) {
  const before = await totalCost(ping);
  let ids = 0;
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(chains, n) }, async () => {
    while (next < n) {
      const got = await draw(from + next++);
      ids += got;
    }
  }));
  await new Promise((r) => setTimeout(r, settleMs));
  const cost = minus(await totalCost(ping), before);
  const per = (x) => (x * 1e6) / ids;
  return {
    ids,
    calls: n,
    cost,
    perMillion: per(objectDollars(cost)),
    perMillionIds: { requests: per(cost.requests), rowsRead: per(cost.rowsRead), rowsWritten: per(cost.rowsWritten) },
  };
}

/** `$0.0042` with enough digits to compare against a target of $0.003. */
export function usd(x) {
  if (x === 0) return '$0';
  return `$${x >= 0.01 ? x.toFixed(3) : x.toPrecision(2)}`;
}

/**
 * Every ID route, each on a fresh tag of its own (the shipped defaults: step
 * 1,000, regional allocators, 16 minters) in one service `svc` started with
 * TEST_COUNT_CALLS and TEST_COLO_HEADER (`svc.fetch(path, init, token)`,
 * `svc.admin`), 4 calls at a time; `scale` multiplies the number of calls
 * (1: a single-ID route draws 10,000 IDs, a batch route 1,000,000), drawn
 * twice: the tag's first IDs (`first`: its tables, the first segments of
 * the dynamic step, its first report) and as many again (the result
 * itself). `idsToken`: a key with the `ids` scope (request IDs are a key's
 * own); `singleOnly`: the single-ID routes alone. Resolves one `measure` result per route, with its `name`, whether it
 * is a single-ID route, and `first`.
 */
export async function measureRoutes(svc, { scale = 1, idsToken, singleOnly = false } = {}) {
  const colo = { 'edgeleaf-test-colo': 'IAD' };
  const ping = () => svc.fetch('/v1/ping', { headers: colo });
  const put = async (tag, body) => {
    const res = await svc.admin(`/v1/tags/${tag}`, { method: 'PUT', body: JSON.stringify(body), headers: colo });
    if (![200, 201].includes(res.status)) throw new Error(`PUT ${tag}: ${res.status} ${await res.text()}`);
    await res.text();
  };
  const get = (path, count) => async () => {
    const res = await svc.fetch(path, { headers: colo });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text}`);
    return count;
  };
  const single = Math.round(10_000 * scale);
  const batch = Math.round(1_000 * scale);
  const runs = [
    { name: 'GET /v1/segment/{tag}', single: true, tag: {}, n: single, draw: (t) => get(`/v1/segment/${t}`, 1) },
    { name: 'GET /api/segment/get/{tag} (Leaf)', single: true, tag: {}, n: single, draw: (t) => get(`/api/segment/get/${t}`, 1) },
    { name: 'GET /v1/segment/{tag}?count=100', tag: {}, n: batch, draw: (t) => get(`/v1/segment/${t}?count=100`, 100) },
    { name: 'GET /v1/segment/{tag}?count=1000', tag: {}, n: batch, draw: (t) => get(`/v1/segment/${t}?count=1000`, 1000) },
    { name: 'GET /v1/segment/{opaque tag} (bits 53)', single: true, tag: { opaque: { bits: 53 } }, n: single, draw: (t) => get(`/v1/segment/${t}`, 1) },
    { name: 'GET /v1/segment/{opaque tag}?count=1000', tag: { opaque: { bits: 53 } }, n: batch, draw: (t) => get(`/v1/segment/${t}?count=1000`, 1000) },
    { name: 'GET /v1/snowflake', single: true, n: single, draw: () => get('/v1/snowflake', 1) },
    { name: 'GET /api/snowflake/get/{tag} (Leaf)', single: true, n: single, draw: () => get('/api/snowflake/get/any', 1) },
    { name: 'GET /v1/snowflake?count=1000', n: batch, draw: () => get('/v1/snowflake?count=1000', 1000) },
    {
      name: 'POST /v1/segment/{tag}/lease (step 1000, a request ID)', tag: {}, n: Math.max(1, Math.round(batch / 10)),
      draw: (t) => async (i) => {
        const res = await svc.fetch(`/v1/segment/${t}/lease`, {
          method: 'POST', headers: { ...colo, 'content-type': 'application/json' }, body: JSON.stringify({ step: 1000, requestId: `bill-${i}` }),
        }, idsToken);
        const text = await res.text();
        if (res.status !== 200) throw new Error(`lease: ${res.status} ${text}`);
        const { start, end } = JSON.parse(text);
        return Number(BigInt(end) - BigInt(start) + 1n);
      },
    },
    { name: 'GET /v1/segment/{monotonic tag}', single: true, tag: { monotonic: true }, n: Math.max(1, Math.round(single / 10)), draw: (t) => get(`/v1/segment/${t}`, 1) },
  ];
  const results = [];
  for (const [i, r] of runs.entries()) {
    if (singleOnly && !r.single) continue;
    const tag = `bill-${i}`;
    if (r.tag) await put(tag, r.tag);
    const draw = r.draw(tag);
    const first = await measure(ping, draw, r.n, { chains: 4 });
    results.push({ name: r.name, single: !!r.single, first, ...(await measure(ping, draw, r.n, { chains: 4, from: r.n })) });
  }
  return results;
}
