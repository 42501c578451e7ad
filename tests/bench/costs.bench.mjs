// What a million IDs cost the Durable Objects, per route, at the dated prices
// of docs/benchmarks.md ("The bill"): the counts of tests/bench/bill.mjs
// (the service's own: object requests, rows read, rows written), over
// 10,000 × SCALE IDs on a single-ID route and 1,000,000 × SCALE on a batch
// route, each on a fresh tag (its first as many IDs measured apart); then
// the service binding's single-ID RPC call (a user's Worker in the same
// workerd, tests/support/binding.mjs). Saves the rows of the report
// (target/bench-report/costs.json).
// `node tests/bench/costs.bench.mjs` (SCALE=1, BINDING=1).
import { start } from '../support/service.mjs';
import { bundleUserWorker, startBound } from '../support/binding.mjs';
import { measure, measureRoutes, PRICES, TARGETS, usd } from './bill.mjs';
import { saveRows } from './rows.mjs';

const SCALE = Number(process.env.SCALE ?? 1);
const VARS = { TEST_COUNT_CALLS: '1', TEST_COLO_HEADER: '1', RPC_TAGS: '*' };

const svc = await start({ vars: VARS });
let results;
try {
  const key = await svc.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'bill', scopes: ['ids'] }) });
  results = await measureRoutes(svc, { scale: SCALE, idsToken: (await key.json()).token });
} finally {
  await svc.dispose();
}

// The binding: one RPC call per ID (`env.IDS.segment(tag, 1)`), 100 calls
// at a time (its Worker bundles the npm package: `make pkg` first; BINDING=0
// leaves it out).
const bound = process.env.BINDING === '0' ? null : await startBound(bundleUserWorker(), { vars: VARS });
if (bound) try {
  const put = await bound.mf.dispatchFetch('http://localhost/v1/tags/bill-rpc', {
    method: 'PUT', body: '{}', headers: { authorization: 'Bearer test-admin-token' },
  });
  await put.text();
  const ping = () => bound.mf.dispatchFetch('http://localhost/v1/ping');
  const n = Math.max(1, Math.round(100 * SCALE));
  const draw = async () => {
    const { status, body } = await bound.call('/rpc-many?tag=bill-rpc&count=1&calls=100');
    if (status !== 200) throw new Error(`rpc: ${status} ${JSON.stringify(body)}`);
    return body.ids.length;
  };
  const first = await measure(ping, draw, n);
  results.push({ name: 'the binding: env.IDS.segment(tag, 1)', single: true, first, ...(await measure(ping, draw, n)) });
} finally {
  await bound.mf.dispose();
}

const rows = results.map((r) => {
  const p = r.perMillionIds;
  const share = r.perMillion / (PRICES.workerRequest * 1e6 * (r.single ? 1 : r.calls / r.ids));
  return {
    name: `${r.name} (${r.ids.toLocaleString('en')} IDs)`,
    value: `${usd(r.perMillion)}`,
    unit: 'per M IDs',
    baseline: { name: 'the Worker requests that carry them', value: usd(PRICES.workerRequest * r.calls * (1e6 / r.ids)) },
    spread: `${(100 * share).toPrecision(2)}%; the tag's first as many IDs: ${usd(r.first?.perMillion ?? r.perMillion)}; per M IDs ${Math.round(p.requests).toLocaleString('en')} object requests, ${Math.round(p.rowsRead).toLocaleString('en')} rows read, ${Math.round(p.rowsWritten).toLocaleString('en')} written`,
    ...(r.single && !r.name.includes('monotonic') ? { target: `≤ ${usd(TARGETS.singleIdPerMillion)}`, met: r.perMillion <= TARGETS.singleIdPerMillion } : {}),
  };
});
for (const r of rows) console.log(`${r.name}: ${r.value} per million IDs (${r.spread})${r.target ? ` target ${r.target}: ${r.met ? 'met' : 'MISSED'}` : ''}`);
saveRows('costs', `the bill: the objects' cost per million IDs at the prices of ${PRICES.date} (counted, not timed)`, rows);
