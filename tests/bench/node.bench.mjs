// Node benchmark of the npm package against peer ID libraries, in one process.
// Figures are ns per ID (median of several rounds) and ratios against the
// floor measured in the same run: one Date.now() plus one call of a bare wasm
// export returning a u64. Times are this process's CPU time (user + system,
// process.cpuUsage) over the timed bursts: on a shared machine the wall clock
// also counts the time slices other processes took. Each measured function
// runs in a loop of its own (a call site that only ever saw it), so none is
// measured behind a call site made megamorphic by the ones before it. The
// floor and nextId() are measured round by round in turn; their ratio is
// given per round (median, lowest–highest). Run with `make bench` (after
// `make pkg`).
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { gzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import { Snowflake, SegmentGenerator, OpaqueIds } from 'edgeleaf';
import * as rawWasm from '../../pkg/web/edgeleaf.js';
import { saveRows } from './rows.mjs';
import { Snowflake as SapphireSnowflake } from '@sapphire/snowflake';
import { v7 as uuidv7 } from 'uuid';

const require = createRequire(import.meta.url);
rawWasm.initSync({ module: readFileSync(new URL('../../pkg/web/edgeleaf_bg.wasm', import.meta.url)) });
const FlakeId = require('flake-idgen');
const { Snowflake: NodejsSnowflake } = require('nodejs-snowflake');

const ROUNDS = 5;
const BURST = 3900; // below one millisecond's 4,096 sequence numbers, less a random start < 100
let sink;

/** Spins (here, in the harness, never in the library) until the clock ticks. */
function nextMillisecond() {
  const start = Date.now();
  while (Date.now() === start);
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
// A loop of its own for each function measured (see the top).
const loopFor = () => new Function('fn', 'calls', 'let s; for (let i = 0; i < calls; i++) s = fn(); return s;');

/**
 * ns per ID of one round: `bursts` bursts, each starting on a fresh
 * millisecond and making `calls` calls of `fn` (each yielding `idsPerCall`
 * IDs), so no generator runs out of sequence. Only the bursts are timed.
 */
function round(fn, loop, { calls = BURST, idsPerCall = 1, bursts = 200 } = {}) {
  let us = 0;
  for (let b = 0; b < bursts; b++) {
    nextMillisecond();
    const t0 = cpuUs();
    sink = loop(fn, calls);
    us += cpuUs() - t0;
  }
  return (us * 1000) / (bursts * calls * idsPerCall);
}

/** `fns` measured round by round in turn (round 0 warms up): ns per ID of each round, per function. */
function rounds(fns, opts) {
  const loops = fns.map(loopFor);
  const times = fns.map(() => []);
  for (let r = 0; r < ROUNDS + 1; r++) {
    fns.forEach((fn, i) => {
      const t = round(fn, loops[i], opts);
      if (r > 0) times[i].push(t);
    });
  }
  return times;
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Median ns per ID over rounds. */
function burst(fn, opts) {
  return median(rounds([fn], opts)[0]);
}

/** How many of `n` IDs are distinct (a duplicating generator says so here). */
function uniqueness(fn, n = 1_000_000) {
  const seen = new Set();
  let errors = 0;
  for (let i = 0; i < n; i++) {
    try {
      seen.add(fn());
    } catch {
      errors++;
      i--; // a thrown overflow is retried, as a caller would
      if (errors > 10 * n) break;
    }
  }
  return { distinct: seen.size, duplicates: n - seen.size, errors };
}

const ours = new Snowflake({ workerId: 1 });
// The sync call throws when this millisecond's sequence is used up; a bench
// loop at full speed retries on the next call, as a caller would.
const oursNextId = () => { try { return ours.nextId(); } catch { return ours.nextId(); } };

const rows = [];
// The floor and nextId() in turn, round by round: their ratio per round.
const [floorTimes, nextIdTimes] = rounds([() => rawWasm.__floor(Date.now()), () => ours.nextId()]);
const floor = median(floorTimes);
const nextIdRatios = nextIdTimes.map((t, i) => t / floorTimes[i]);
const nextIdRatio = { mid: median(nextIdRatios), lo: Math.min(...nextIdRatios), hi: Math.max(...nextIdRatios) };
rows.push(['floor: Date.now() + bare wasm export → u64', floor]);
rows.push(['Date.now() alone', burst(() => Date.now())]);
rows.push(['edgeleaf nextId()', median(nextIdTimes)]);
rows.push(['edgeleaf nextIdString()', burst(() => ours.nextIdString())]);
rows.push(['edgeleaf nextIds(1000), per ID', burst(() => ours.nextIds(1000), { calls: 3, idsPerCall: 1000 })]);

const sapphire = new SapphireSnowflake(1288834974657n);
const flake = new FlakeId({ id: 1 });
const nodejsSnowflake = new NodejsSnowflake({ custom_epoch: 1288834974657, instance_id: 1 });
const peers = [
  ['@sapphire/snowflake generate()', () => sapphire.generate({ workerId: 1n })],
  ['nodejs-snowflake getUniqueID()', () => nodejsSnowflake.getUniqueID()],
  ['flake-idgen next() (Buffer)', () => { try { return flake.next().readBigUInt64BE(); } catch { return 0n; } }],
  ['uuid v7()', () => uuidv7()],
  ['crypto.randomUUID()', () => randomUUID()],
];
for (const [name, fn] of peers) rows.push([name, burst(fn, { bursts: 50 })]);

// Decoders: an ID's parts back (no clock involved).
const sample = ours.nextId();
const sampleString = sample.toString();
const decoders = [
  ['edgeleaf decompose(id) {timestamp, date, workerId, sequence}', () => ours.decompose(sample)],
  ['edgeleaf decompose(id) from a decimal string', () => ours.decompose(sampleString)],
  ['edgeleaf Snowflake.decompose(id) (static, default layout)', () => Snowflake.decompose(sample)],
  ['@sapphire/snowflake deconstruct(id) (all fields)', () => sapphire.deconstruct(sample)],
  ['@sapphire/snowflake timestampFrom(id) (timestamp only)', () => sapphire.timestampFrom(sample)],
  ['nodejs-snowflake timestampFromID(id) (timestamp only)', () => NodejsSnowflake.timestampFromID(sample, 1288834974657)],
];
const decoded = decoders.map(([name, fn]) => [name, burst(fn, { bursts: 50 })]);

console.log('\nper ID in bursts of %d calls from a fresh ms, real clock, CPU time, median of %d rounds (ratio = time / floor)', BURST, ROUNDS);
for (const [name, ns] of rows) {
  const spread = name === 'edgeleaf nextId()' ? `  (per round: ${nextIdRatio.mid.toFixed(2)}×, ${nextIdRatio.lo.toFixed(2)}–${nextIdRatio.hi.toFixed(2)}×; target ≤ 1.2×)` : '';
  console.log(`  ${name.padEnd(46)} ${ns.toFixed(1).padStart(8)} ns   ${(ns / floor).toFixed(2)}×${spread}`);
}

console.log('\ndecoding one ID, median of %d rounds (ratio = time / @sapphire/snowflake deconstruct)', ROUNDS);
const fullPeer = decoded[3][1];
for (const [name, ns] of decoded) console.log(`  ${name.padEnd(58)} ${ns.toFixed(1).padStart(8)} ns   ${(ns / fullPeer).toFixed(2)}×`);

console.log('\nuniqueness over 1,000,000 IDs in a tight loop (thrown overflows retried)');
const uniq = [
  ['edgeleaf nextId()', oursNextId],
  ['@sapphire/snowflake generate()', () => sapphire.generate({ workerId: 1n })],
  ['nodejs-snowflake getUniqueID()', () => nodejsSnowflake.getUniqueID()],
  ['flake-idgen next()', () => flake.next().readBigUInt64BE()],
  ['uuid v7()', () => uuidv7()],
  ['crypto.randomUUID()', () => randomUUID()],
];
for (const [name, fn] of uniq) {
  const u = uniqueness(fn);
  console.log(`  ${name.padEnd(46)} ${u.duplicates === 0 ? 'unique' : `${u.duplicates} DUPLICATES`}${u.errors ? ` (${u.errors} thrown overflows)` : ''}`);
}

const sustainedRates = [];
async function sustained(label, gen, seconds = 2) {
  const end = Date.now() + seconds * 1000;
  const startMs = Date.now();
  let ids = 0;
  while (Date.now() < end) {
    const batch = await gen.nextIdsAsync(4096);
    ids += batch.length;
  }
  const ms = Date.now() - startMs;
  const rate = ids / (ms / 1000);
  sustainedRates.push([label, rate]);
  console.log(`  ${label.padEnd(46)} ${Math.round(rate).toLocaleString('en-US').padStart(10)}/s   ${((100 * rate) / 4_096_000).toFixed(1)}% of 4,096,000/s`);
}
console.log('\nsustained, real clock, %d s, awaiting timers on "retry after" (no busy-wait)', 2);
await sustained('nextIdsAsync(4096), default options (2 ms borrow)', new Snowflake({ workerId: 2 }));
await sustained('nextIdsAsync(4096), maxBorrowMs: 0 (no borrowing)', new Snowflake({ workerId: 3, maxBorrowMs: 0 }));
await sustained('nextIdsAsync(4096), maxBorrowMs: 4', new Snowflake({ workerId: 4, maxBorrowMs: 4 }));
await sustained('… and sequenceStartBound: 0', new Snowflake({ workerId: 5, maxBorrowMs: 4, sequenceStartBound: 0 }));

// The default borrow is safe across restarts if no process can start again
// and issue within it: the fastest start of a Node process to its first ID.
const starts = [];
for (let i = 0; i < 10; i++) {
  const t0 = Date.now();
  const out = execFileSync(process.execPath, ['--input-type=module', '-e',
    "import { Snowflake } from 'edgeleaf'; const s = new Snowflake({ workerId: 1 }); console.log(s.decompose(s.nextId()).timestamp);"],
  { cwd: new URL('../..', import.meta.url) });
  starts.push(Number(String(out)) - t0);
}
starts.sort((a, b) => a - b);
console.log(`  ${'a new Node process: spawn to its first ID (min / median of 10)'.padEnd(46)} ${starts[0]} / ${starts[5]} ms`);

// The price of an opaque ID over a plain segment ID, in wasm: the same
// SegmentGenerator loop with and without `opaque` (segments answered at once).
async function segmentCost(opaque) {
  let next = 1n;
  const g = new SegmentGenerator({
    tag: 'bench', step: 1_000_000, ...(opaque ? { opaque } : {}),
    fetchSegment: async () => { const start = next; next += 1_000_000n; return { start, end: next - 1n }; },
  });
  await g.nextIds(1000);
  const perRound = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 200; i++) await g.nextIds(1000);
    perRound.push(Number(process.hrtime.bigint() - t0) / 200_000);
  }
  return perRound.sort((a, b) => a - b)[ROUNDS >> 1];
}
const key = OpaqueIds.generateKey();
const plainNs = await segmentCost();
console.log('\nSegmentGenerator nextIds(1000), per ID, median of %d rounds (ratio = time / plain)', ROUNDS);
console.log(`  ${'plain segment IDs'.padEnd(46)} ${plainNs.toFixed(1).padStart(8)} ns   1.00×`);
const opaqueNs = [];
for (const [label, domain] of [['opaque, bits 53', { bits: 53 }], ['opaque, digits 12', { digits: 12 }]]) {
  const ns = await segmentCost({ key, ...domain });
  opaqueNs.push(ns);
  console.log(`  ${label.padEnd(46)} ${ns.toFixed(1).padStart(8)} ns   ${(ns / plainNs).toFixed(2)}×  (+${(ns - plainNs).toFixed(0)} ns per opaque ID)`);
}

const wasm = readFileSync(new URL('../../pkg/web/edgeleaf_bg.wasm', import.meta.url));
const gzipped = gzipSync(wasm, { level: 9 }).length;
console.log(`\n.wasm: ${wasm.length.toLocaleString('en-US')} bytes, ${gzipped.toLocaleString('en-US')} gzipped`);

const byName = (name) => rows.find((r) => r[0] === name)[1];
// The fastest correct snowflake peer (@sapphire/snowflake duplicates, below).
const fastestPeer = Math.min(byName('flake-idgen next() (Buffer)'), byName('nodejs-snowflake getUniqueID()'));
const floorRow = { name: 'floor: Date.now() + bare wasm export', value: floor };
const ceiling = { name: 'the layout\'s ceiling', value: 4_096_000 };
const fullDecoder = { name: decoded[3][0], value: decoded[3][1] };
saveRows('node', `npm package in Node ${process.version} (per ID, CPU time, medians of ${ROUNDS} rounds)`, [
  {
    name: 'Snowflake nextId()', value: byName('edgeleaf nextId()'), unit: 'ns', baseline: floorRow, ratio: nextIdRatio.mid,
    spread: `${nextIdRatio.lo.toFixed(2)}–${nextIdRatio.hi.toFixed(2)}×`, target: '≤ 1.2×', met: nextIdRatio.mid <= 1.2,
  },
  { name: 'Snowflake nextId() vs the fastest correct peer', value: byName('edgeleaf nextId()'), unit: 'ns', baseline: { name: 'fastest correct snowflake peer', value: fastestPeer } },
  { name: 'Snowflake nextIds(1000), per ID', value: byName('edgeleaf nextIds(1000), per ID'), unit: 'ns', baseline: floorRow, target: '≤ 8 ns', met: byName('edgeleaf nextIds(1000), per ID') <= 8 },
  { name: 'decompose(id)', value: decoded[0][1], unit: 'ns', baseline: fullDecoder, target: '≤ 1.0×', met: decoded[0][1] <= fullDecoder.value },
  { name: 'Snowflake.decompose(id) (static)', value: decoded[2][1], unit: 'ns', baseline: fullDecoder },
  { name: 'nodejs-snowflake timestampFromID (timestamp only)', value: decoded[5][1], unit: 'ns', baseline: fullDecoder },
  ...sustainedRates.map(([label, rate], i) => ({
    name: `sustained ${label}`, value: Math.round(rate), unit: 'IDs/s', baseline: ceiling,
    ...(i === 0 ? { target: '≥ 97%', met: rate >= 0.97 * ceiling.value } : {}),
  })),
  { name: 'a new Node process: spawn to its first ID (min of 10)', value: starts[0], unit: 'ms', baseline: { name: 'the default borrow', value: 2 }, target: '≫ 1×' , met: starts[0] > 10 * 2 },
  { name: 'opaque ID (53 bits) over a plain segment ID', value: opaqueNs[0], unit: 'ns', baseline: { name: 'plain segment ID', value: plainNs } },
  { name: '.wasm gzipped', value: gzipped, unit: 'bytes', target: '≤ 40 KB', met: gzipped <= 40 * 1024 },
]);
void sink;
