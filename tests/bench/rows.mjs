// Each benchmark saves its figures as rows in target/bench-report/<part>.json;
// tests/bench/report.mjs prints them all as one table (make bench, at the end).
import { mkdirSync, writeFileSync } from 'node:fs';

export const REPORT_DIR = new URL('../../target/bench-report/', import.meta.url);

/**
 * `rows`: `{ name, value, unit, baseline?: { name, value }, ratio?, spread?, target?, met? }`;
 * `ratio` is value / baseline unless given (e.g. the median of same-round
 * ratios), `spread` its range across rounds as text; `quote`: a line the
 * report prints last.
 */
export function saveRows(part, title, rows, { quote } = {}) {
  mkdirSync(REPORT_DIR, { recursive: true });
  writeFileSync(new URL(`${part}.json`, REPORT_DIR), JSON.stringify({ title, rows, quote }, null, 1));
}
