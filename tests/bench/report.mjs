// One table of every figure `make bench` measured, each with the baseline
// it was measured against in the same run: criterion's estimates
// (target/criterion) and the rows the other benchmarks saved
// (target/bench-report/*.json, see tests/bench/rows.mjs). Printed as Markdown, the
// form the README carries.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { REPORT_DIR } from './rows.mjs';

const criterion = new URL('../../target/criterion/', import.meta.url);
const estimate = (group, bench) => {
  const file = new URL(`${group}/${bench}/new/estimates.json`, criterion);
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).median.point_estimate : undefined;
};

const parts = [];
const counter = estimate('per_id', 'baseline_counter');
if (counter !== undefined) {
  const base = { name: 'a counter increment', value: counter };
  const row = (name, group, bench, per = 1, target, limit) => {
    const v = estimate(group, bench);
    return v === undefined ? [] : [{ name, value: v / per, unit: 'ns', baseline: base, ...(target ? { target, met: v / per <= limit } : {}) }];
  };
  parts.push({
    title: 'core, native (criterion, median per ID)',
    rows: [
      ...row('snowflake next_id', 'per_id', 'snowflake_next_id', 1, '≤ 20 ns', 20),
      ...row('snowflake fill 4096, per ID', 'batch', 'snowflake_fill_4096', 4096),
      ...row('segment next_id', 'per_id', 'segment_next_id', 1, '≤ 5 ns', 5),
      ...row('segment take 4096, per ID', 'batch', 'segment_take_4096', 4096),
      ...row('opaque encode, 53 bits', 'per_id', 'opaque_encode_bits53'),
    ],
  });
}
const order = ['core-sustained', 'node', 'http', 'binding', 'costs'];
const files = existsSync(REPORT_DIR) ? readdirSync(REPORT_DIR).filter((f) => f.endsWith('.json')) : [];
files.sort((a, b) => order.indexOf(a.replace('.json', '')) - order.indexOf(b.replace('.json', '')));
for (const f of files) parts.push(JSON.parse(readFileSync(new URL(f, REPORT_DIR), 'utf8')));

const fmt = (v, unit) => {
  if (typeof v !== 'number') return `${v} ${unit}`.trim();
  const digits = Math.abs(v) >= 100 || Number.isInteger(v) ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  return `${v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })} ${unit}`.trim();
};
console.log('\n| figure | value | baseline (same run) | ratio (spread across rounds) | target |');
console.log('|---|---|---|---|---|');
for (const { title, rows } of parts) {
  console.log(`| **${title}** | | | | |`);
  for (const r of rows) {
    const b = r.baseline;
    const ratio = r.ratio ?? (b && typeof r.value === 'number' && b.value ? r.value / b.value : undefined);
    const ratioText = (ratio === undefined ? '' : r.unit === 'IDs/s' || r.unit === 'req/s' ? `${(100 * ratio).toFixed(1)}%` : `${ratio.toFixed(2)}×`) +
      (r.spread ? ` (${r.spread})` : '');
    const target = r.target ? `${r.target} — ${r.met ? 'met' : '**missed**'}` : '';
    console.log(`| ${r.name} | ${fmt(r.value, r.unit)} | ${b ? `${b.name}: ${fmt(b.value, r.unit)}` : ''} | ${ratioText} | ${target} |`);
  }
}
// The lines to quote (tests/bench/http.bench.mjs: the HTTP figures in one line).
const quotes = parts.map((p) => p.quote).filter(Boolean);
if (quotes.length) console.log(`\n${quotes.join('\n')}`);
