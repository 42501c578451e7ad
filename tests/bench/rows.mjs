// Each benchmark saves its figures as rows in target/bench-report/<part>.json;
// tests/bench/report.mjs prints them all as one table (make bench, at the end).
import { mkdirSync, writeFileSync } from 'node:fs';

export const REPORT_DIR = new URL('../../target/bench-report/', import.meta.url);

/**
 * `rows`: `{ name, value, unit, baseline?: { name, value }, ratio?, target?, met? }`;
 * `ratio` is value / baseline unless given (e.g. as a share).
 */
export function saveRows(part, title, rows) {
  mkdirSync(REPORT_DIR, { recursive: true });
  writeFileSync(new URL(`${part}.json`, REPORT_DIR), JSON.stringify({ title, rows }, null, 1));
}
