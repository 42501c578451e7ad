// Two processes sharing one store (issue 24, item 1): how people deploy —
// pm2, a Node cluster, two containers from one config — two real Node
// processes run `EdgeleafClient.snowflake({ nodeKey, store })` with the same
// node key and a store backed by the same file, against the service in
// workerd. However the second reclaims what the first saved, no ID may be
// minted twice, and both must keep minting. First with the store a user
// writes (plain JSON read and write), then with edgeleaf/file-store, which
// refuses a second live process (`store_locked`) and hands the file on once
// the first is gone.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN, ROOT, spawnService, killHard } from '../support/service.mjs';

const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-shared-store-'));
let service;
let token;
before(async () => {
  service = await spawnService(join(dir, 'state'));
  const res = await fetch(`${service.url}/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'shared-store nodes', scopes: ['registry'] }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  ({ token } = await res.json());
});
after(async () => {
  if (service) await killHard(service.child);
  rmSync(dir, { recursive: true, force: true });
});

// One node: opens a leased snowflake on the store named, mints in batches
// until `until` (Unix ms), writes its IDs to `out` (raw u64s) and prints
// JSON lines: { started, workerId } once minting, { done, n, errors } at
// the end, or { failed: code } if it could not start. \`kind\`: 'user' (the
// store below) or 'file' (edgeleaf/file-store); \`close: false\` leaves the
// lease and the store open (for a kill -9).
const NODE = `
import { EdgeleafClient } from 'edgeleaf';
import { fileStore } from 'edgeleaf/file-store';
import { readFile, writeFile } from 'node:fs/promises';
const { url, token, nodeKey, path, out, until, kind, close = true } = JSON.parse(process.env.SHARED);
// The store a user writes: the state as JSON in a file, read and written whole.
const userStore = {
  async load() {
    try { return JSON.parse(await readFile(path, 'utf8')); } catch (e) { if (e.code === 'ENOENT') return undefined; throw e; }
  },
  async save(state) { await writeFile(path, JSON.stringify(state)); },
};
const store = kind === 'file' ? fileStore(path) : userStore;
const say = (o) => console.log(JSON.stringify(o));
let sf;
try {
  sf = await new EdgeleafClient({ url, token }).snowflake({ nodeKey, store });
} catch (e) {
  say({ failed: e.code ?? String(e) });
  process.exit(0);
}
const chunks = [];
let n = 0;
const errors = {};
let started = false;
// About 200 IDs a millisecond, as a busy node draws them (no cap on time).
while (Date.now() < until) {
  let ids;
  try { ids = sf.nextIds(200); } catch (e) {
    ids = e.ids ?? [];
    errors[e.code] = (errors[e.code] ?? 0) + 1;
    if (e.code === 'lease_lost' || e.code === 'lease_expired') break;
  }
  if (ids.length) { chunks.push(ids); n += ids.length; }
  if (!started && n > 0) { started = true; say({ started: true, workerId: sf.workerId }); }
  await new Promise((r) => setTimeout(r, 1));
}
const all = new BigUint64Array(n);
let at = 0;
for (const c of chunks) { all.set(c, at); at += c.length; }
await writeFile(out, all);
if (close) await sf.close().catch(() => {});
if (close && kind === 'file') await store.close();
say({ done: true, n, errors, workerId: sf.workerId });
`;

/** A node process; `lines` collects its JSON lines, `started` resolves on its first ID (or its failure). */
function startNode(params) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', NODE], {
    cwd: ROOT,
    env: { ...process.env, SHARED: JSON.stringify({ url: service.url, token, ...params }) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const node = { child, lines: [], err: '' };
  let onLine;
  node.started = new Promise((r) => { onLine = r; });
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) {
      const msg = JSON.parse(buf.slice(0, i));
      node.lines.push(msg);
      if (msg.started || msg.failed) onLine(msg);
    }
  });
  child.stderr.on('data', (d) => { node.err += d; });
  node.exited = new Promise((r) => child.on('exit', (status, signal) => r({ status, signal })));
  node.exited.then((e) => onLine({ exited: e }));
  return node;
}

const idsOf = (file) => {
  const b = readFileSync(file);
  return new BigUint64Array(b.buffer, b.byteOffset, b.length / 8);
};

/** IDs present more than once across `lists`. */
function duplicates(...lists) {
  const all = new BigUint64Array(lists.reduce((s, l) => s + l.length, 0));
  let at = 0;
  for (const l of lists) { all.set(l, at); at += l.length; }
  all.sort();
  let dups = 0;
  for (let i = 1; i < all.length; i++) if (all[i] === all[i - 1]) dups++;
  return dups;
}

/** An ID's worker ID and timestamp (in the layout's units), by the service's layout. */
async function decoder() {
  const { layout } = await (await fetch(`${service.url}/v1/health`)).json();
  const seq = BigInt(layout.sequenceBits);
  const mask = (1n << BigInt(layout.workerBits)) - 1n;
  return (id) => ({ worker: Number((id >> seq) & mask), ts: id >> (seq + BigInt(layout.workerBits)) });
}

test('two processes, one node key, one user-written store file: no ID twice, and both keep minting', async () => {
  const path = join(dir, 'user-store.json');
  // Both mint until the same instant; the second starts from the same file
  // once the first mints, and may wait up to the reservation the first
  // saved (3 s) before its first ID: about 5 s of minting side by side.
  const until = Date.now() + 10_000;
  const a = startNode({ nodeKey: 'shared-node', path, out: join(dir, 'a.bin'), until, kind: 'user' });
  const first = await a.started;
  assert.ok(first.started, `the first process did not start: ${JSON.stringify(first)} ${a.err}`);
  const b = startNode({ nodeKey: 'shared-node', path, out: join(dir, 'b.bin'), until, kind: 'user' });
  const second = await b.started;
  assert.ok(second.started, `the second process did not start: ${JSON.stringify(second)} ${b.err}`);
  await Promise.all([a.exited, b.exited]);
  const bIds = idsOf(join(dir, 'b.bin'));
  const aIds = idsOf(join(dir, 'a.bin'));
  const dups = duplicates(aIds, bIds);
  console.log(`shared user store: first ${aIds.length} IDs (worker ${first.workerId}), second ${bIds.length} (worker ${second.workerId}); ${dups} duplicates; ` +
    `${JSON.stringify(a.lines.at(-1))} ${JSON.stringify(b.lines.at(-1))}`);
  assert.equal(dups, 0, `${dups} IDs minted twice (workers ${first.workerId} and ${second.workerId})`);
  assert.ok(aIds.length > 20_000 && bIds.length > 20_000, `both minted: ${aIds.length} and ${bIds.length}`);
  // Side by side, each under a worker ID of its own: every ID of each
  // under the one it started with, the two different, and the first still
  // minting once the second had begun (by the IDs' own timestamps).
  const decode = await decoder();
  const workers = (ids) => new Set(Array.from(ids, (id) => decode(id).worker));
  assert.deepEqual([...workers(aIds)], [first.workerId], 'the first minted under its one worker ID');
  assert.deepEqual([...workers(bIds)], [second.workerId], 'the second minted under its one worker ID');
  assert.notEqual(first.workerId, second.workerId, 'the two processes minted under one worker ID');
  let bBegan = decode(bIds[0]).ts;
  for (const id of bIds) { const { ts } = decode(id); if (ts < bBegan) bBegan = ts; }
  const aAfter = aIds.filter((id) => decode(id).ts > bBegan).length;
  console.log(`the first minted ${aAfter} IDs after the second's first`);
  assert.ok(aAfter > 1_000, `the first minted ${aAfter} IDs after the second began: they must overlap in time`);
});

test('edgeleaf/file-store: a second live process is refused (store_locked); after a kill -9 of the first, the next one starts from the file', async () => {
  const path = join(dir, 'file-store.json');
  const until = Date.now() + 8_000;
  const a = startNode({ nodeKey: 'file-node', path, out: join(dir, 'fa.bin'), until, kind: 'file', close: false });
  const first = await a.started;
  assert.ok(first.started, `the first process did not start: ${JSON.stringify(first)} ${a.err}`);
  const b = startNode({ nodeKey: 'file-node', path, out: join(dir, 'fb.bin'), until, kind: 'file' });
  assert.deepEqual(await b.started, { failed: 'store_locked' });
  await b.exited;
  // The first dies without closing (its lock and live grant left behind).
  await new Promise((r) => setTimeout(r, 500));
  a.child.kill('SIGKILL');
  await a.exited;
  const c = startNode({ nodeKey: 'file-node', path, out: join(dir, 'fc.bin'), until: Date.now() + 5_000, kind: 'file' }); // it waits out the saved reservation (up to 3 s)
  const third = await c.started;
  assert.ok(third.started, `the restart did not start: ${JSON.stringify(third)} ${c.err}`);
  await c.exited;
  const cIds = idsOf(join(dir, 'fc.bin'));
  assert.ok(cIds.length > 1_000, `the restart minted ${cIds.length} IDs`);
  console.log(`file store: the first on worker ${first.workerId}, the restart (the lock taken over) on worker ${third.workerId}`);
  assert.notEqual(third.workerId, first.workerId, 'the dead process\'s grant is still live: the restart gets another worker ID');
  const reread = JSON.parse(readFileSync(path, 'utf8'));
  assert.equal(reread.workerId, third.workerId, 'the file now holds the restart\'s lease');
  assert.ok(!readdirSync(dir).some((f) => f.startsWith('file-store.json.lock')), 'the restart released the lock on close');
});
