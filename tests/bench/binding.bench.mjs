// A user's Worker drawing IDs from edgeleaf three ways, in one workerd, in
// the same run (issue 35): an RPC call through a service binding (`Ids`), a
// `fetch` through the binding (edgeleaf's HTTP API, no network), and a
// public HTTP request (the user's Worker fetching edgeleaf's listener on
// 127.0.0.1: on Cloudflare, a request over the internet, billed as a
// request of its own). The same harness for all three (the user's Worker's
// /bench path, tests/service/binding/worker.mjs): one segment ID per call,
// CHAINS concurrent chains of CALLS calls each. Latency: one chain, the
// wall time per call; load: 16 chains, calls per second. ROUNDS rounds, the
// ways in turn (rotated each round); each figure is a ratio to the public
// HTTP request of the same round, given as the median over rounds and the
// spread (lowest–highest). Run by `make bench` (scripts/bench.sh).
import { createServer } from 'node:net';
import { rmSync } from 'node:fs';
import { ADMIN, CLIENT } from '../support/service.mjs';
import { bundleUserWorker, startBound } from '../support/binding.mjs';
import { saveRows } from './rows.mjs';

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const CALLS = Number(process.env.CALLS ?? 300);
const TAG = 'bench-rpc';
const WAYS = ['rpc', 'fetch', 'http'];
const NAMES = { rpc: 'RPC call (service binding)', fetch: 'fetch through the binding', http: 'public HTTP request' };
const MODES = [
  { name: 'latency', chains: 1, calls: CALLS },
  { name: 'load', chains: 16, calls: Math.ceil(CALLS / 4) },
];
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

const srv = createServer();
await new Promise((r) => srv.listen(0, '127.0.0.1', r));
const { port } = srv.address();
await new Promise((r) => srv.close(r));

const out = bundleUserWorker();
const s = await startBound(out, { vars: { RPC_TAGS: 'bench*' }, port });
try {
  const put = await s.http(`/v1/tags/${TAG}`, { method: 'PUT', body: JSON.stringify({ step: 100000 }) }, ADMIN);
  if (put.status !== 200) throw new Error(JSON.stringify(put.body));
  const run = async (via, { chains, calls }) => {
    const t0 = performance.now();
    const r = await s.call(`/bench?via=${via}&tag=${TAG}&count=1&calls=${calls}&chains=${chains}&base=${encodeURIComponent(s.url)}`, { headers: { authorization: `Bearer ${CLIENT}` } });
    const ms = performance.now() - t0;
    if (r.status !== 200 || r.body.ids !== chains * calls) throw new Error(`${via}: ${JSON.stringify(r.body)}`);
    return { usPerCall: (1000 * ms) / calls, perS: (chains * calls * 1000) / ms };
  };
  for (const via of WAYS) await run(via, { chains: 4, calls: 50 }); // warm up
  const got = Object.fromEntries(MODES.map((m) => [m.name, Object.fromEntries(WAYS.map((w) => [w, []]))]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of MODES) {
      const order = WAYS.map((_, i) => WAYS[(i + round) % WAYS.length]);
      for (const via of order) got[mode.name][via].push(await run(via, mode));
    }
  }
  const rows = [];
  const lines = [];
  for (const mode of MODES) {
    const q = mode.name === 'latency' ? 'usPerCall' : 'perS';
    const unit = mode.name === 'latency' ? 'µs' : 'calls/s';
    const http = got[mode.name].http.map((r) => r[q]);
    for (const via of WAYS) {
      const values = got[mode.name][via].map((r) => r[q]);
      const ratios = values.map((v, i) => v / http[i]);
      const mid = median(ratios);
      const spread = `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`;
      lines.push(`${mode.name.padEnd(8)} ${NAMES[via].padEnd(30)} ${median(values).toFixed(0).padStart(8)} ${unit.padEnd(8)} ${mid.toFixed(2)}× of public HTTP (${spread})`);
      if (via !== 'http') {
        rows.push({
          name: `${mode.name === 'latency' ? 'time per call, one at a time' : `calls/s, ${mode.chains} at once`}: ${NAMES[via]}`,
          value: median(values), unit, baseline: { name: NAMES.http, value: median(http) }, ratio: mid, spread,
        });
      }
    }
  }
  console.log(`\nservice binding: one segment ID per call, ${ROUNDS} rounds; latency: ${MODES[0].calls} calls in a row; load: ${MODES[1].chains} chains of ${MODES[1].calls}`);
  for (const l of lines) console.log(l);
  const r = (mode, via) => rows.find((x) => x.name.startsWith(mode) && x.name.endsWith(NAMES[via])).ratio;
  const quote = `binding: an RPC call takes ${r('time', 'rpc').toFixed(2)}x the time of a public HTTP request (fetch through the binding ${r('time', 'fetch').toFixed(2)}x); under load ${r('calls', 'rpc').toFixed(2)}x its calls/s (fetch ${r('calls', 'fetch').toFixed(2)}x)`;
  console.log(`\n${quote}`);
  saveRows('binding', `service binding: a user's Worker calling edgeleaf in one workerd, ${ROUNDS} rounds (ratio to a public HTTP request of the same round: median, spread)`, rows, { quote });
} finally {
  await s.mf.dispose();
  rmSync(out, { recursive: true, force: true });
}
