// edgeleaf/file-store: a leased snowflake's store in a file. Mode 0600; saves
// atomic (a process killed while saving leaves the old state or the new one);
// one live process per file (`store_locked` for a second one, in another
// process or this one); a lock left by a dead process taken over; and the
// client restarting from the file after a kill -9.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync, promises as fsp } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { fileStore } from 'edgeleaf/file-store';
import { EdgeleafClient, Snowflake } from 'edgeleaf';
import { fakeRegistry } from './fake-registry.mjs';

const dir = mkdtempSync(join(tmpdir(), 'edgeleaf-file-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(dir, `state-${++n}.json`);
const mode = (p) => statSync(p).mode & 0o777;
const REGISTRY = pathToFileURL(join(import.meta.dirname, 'fake-registry.mjs')).href;

/** Runs `code` (an ES module importing the package by name) in another Node process; resolves `{ code, out, child }`. */
function node(code, { onLine } = {}) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
    if (onLine) for (const line of String(d).split('\n').filter(Boolean)) onLine(line, child);
  });
  child.stderr.on('data', (d) => { err += d; });
  const done = new Promise((resolve) => child.on('exit', (status, signal) => resolve({ status, signal, out, err })));
  return { child, done };
}

test('save and load: the state round-trips; the file and its lock are 0600; no temporary file stays', async () => {
  const path = fresh();
  const store = fileStore(path);
  assert.equal(await store.load(), undefined);
  const state = { nodeKey: 'host-1', lastTimestamp: 1_700_000_000_000, workerId: 3, generation: 2, secret: 'ab'.repeat(16) };
  await store.save(state);
  assert.deepEqual(await store.load(), state);
  assert.equal(mode(path), 0o600, 'the state file is 0600');
  assert.equal(mode(`${path}.lock`), 0o600, 'the lock file is 0600');
  // 0600 whatever the umask, and over a file that was wider.
  const old = process.umask(0o000);
  try {
    writeFileSync(path, JSON.stringify(state), { mode: 0o644 });
    await store.save({ ...state, generation: 3 });
  } finally { process.umask(old); }
  assert.equal(mode(path), 0o600);
  assert.equal(store.path, path);
  await store.close();
  assert.deepEqual(readdirSync(dir).filter((f) => f.startsWith(`state-${n}.`)), [`state-${n}.json`], 'close removed the lock');
});

test('edgeleaf/file-store from CommonJS: the same store', async () => {
  const { fileStore: required } = createRequire(import.meta.url)('edgeleaf/file-store');
  const store = required(fresh());
  await store.save({ lastTimestamp: 3 });
  assert.deepEqual(await fileStore(store.path).load().catch((e) => e.code), 'store_locked', 'one lock, whichever build took it');
  await store.close();
  assert.deepEqual(await fileStore(store.path).load(), { lastTimestamp: 3 });
});

test('bad paths and states are refused with a code; a file that holds no state is store_error', async () => {
  assert.throws(() => fileStore(''), { code: 'invalid_argument' });
  assert.throws(() => fileStore(5), { code: 'invalid_argument' });
  assert.throws(() => fileStore(new URL('https://example.com/x')), { code: 'invalid_argument' });
  const path = fresh();
  const store = fileStore(pathToFileURL(path));
  await assert.rejects(store.save('nope'), { code: 'invalid_argument' });
  writeFileSync(path, '{"lastTimest');
  await assert.rejects(store.load(), { code: 'store_error' });
  await store.close();
});

test('a save that fails before its rename leaves the old state, and no temporary file', async () => {
  const path = fresh();
  const store = fileStore(path);
  await store.save({ lastTimestamp: 1 });
  const rename = fsp.rename;
  fsp.rename = async () => { throw Object.assign(new Error('EIO: the disk went away'), { code: 'EIO' }); };
  try {
    await assert.rejects(store.save({ lastTimestamp: 2 }), /EIO/);
  } finally { fsp.rename = rename; }
  assert.deepEqual(await store.load(), { lastTimestamp: 1 });
  assert.deepEqual(readdirSync(dir).filter((f) => f.startsWith(`state-${n}.json.`) && !f.endsWith('.lock')), []);
  await store.close();
});

test('atomic saves: a process killed (SIGKILL) while saving leaves a whole state, every time', async () => {
  const path = fresh();
  // Large states, saved in a loop: a write that is not atomic is caught torn.
  const saver = `
    import { fileStore } from 'edgeleaf/file-store';
    const store = fileStore(${JSON.stringify(path)});
    const pad = 'x'.repeat(256 * 1024);
    for (let i = 1; ; i++) {
      await store.save({ lastTimestamp: i, pad });
      if (i === 1) console.log('saving');
    }`;
  let last = 0;
  for (let round = 0; round < 12; round++) {
    const { child, done } = node(saver, { onLine: (line) => line === 'saving' && setTimeout(() => child.kill('SIGKILL'), 5 + Math.random() * 40) });
    const r = await done;
    assert.equal(r.signal, 'SIGKILL', r.err);
    const store = fileStore(path); // the dead process's lock is taken over
    const state = await store.load();
    assert.ok(state && Number.isSafeInteger(state.lastTimestamp) && state.pad.length === 256 * 1024, `round ${round}: not a whole state`);
    assert.ok(state.lastTimestamp >= 1);
    last += state.lastTimestamp;
    await store.close();
  }
  assert.ok(last > 12, 'the saver got past its first save');
});

test('a second live process gets store_locked; it gets the store once the first closes it', async () => {
  const path = fresh();
  const store = fileStore(path);
  await store.save({ lastTimestamp: 7 });
  const tryIt = `
    import { fileStore } from 'edgeleaf/file-store';
    const s = fileStore(${JSON.stringify(path)});
    try { console.log(JSON.stringify({ state: await s.load() })); await s.close(); }
    catch (e) { console.log(JSON.stringify({ code: e.code, pid: e.pid, message: e.message })); }`;
  const refused = JSON.parse((await node(tryIt).done).out);
  assert.equal(refused.code, 'store_locked');
  assert.equal(refused.pid, process.pid);
  assert.match(refused.message, /in use by process [0-9]+ on .*: two live processes must not share one store/);
  // In this process too: one store per file.
  await assert.rejects(fileStore(path).load(), { code: 'store_locked' });
  await store.close();
  assert.deepEqual(JSON.parse((await node(tryIt).done).out), { state: { lastTimestamp: 7 } });
});

test('a stale lock is taken over: a dead pid, this pid from an earlier life, an old empty lock; not another host\'s fresh one', async () => {
  const path = fresh();
  const lock = `${path}.lock`;
  // A process that took the lock and died without closing.
  const r = await node(`
    import { fileStore } from 'edgeleaf/file-store';
    await fileStore(${JSON.stringify(path)}).save({ lastTimestamp: 9 });
    process.kill(process.pid, 'SIGKILL');`).done;
  assert.equal(r.signal, 'SIGKILL');
  const dead = JSON.parse(readFileSync(lock, 'utf8'));
  assert.notEqual(dead.pid, process.pid);
  const store = fileStore(path);
  assert.deepEqual(await store.load(), { lastTimestamp: 9 });
  const mine = JSON.parse(readFileSync(lock, 'utf8'));
  assert.notEqual(mine.token, dead.token, 'the lock is now ours');
  await store.close();
  // This pid, from a previous life (a container restarted keeps pid 1): a
  // start time that is not this process's, or none (read where /proc is not),
  // in this pid namespace and boot (the lock records them: `mine`).
  for (const start of ['1', undefined]) {
    writeFileSync(lock, JSON.stringify({ pid: process.pid, host: hostname(), ns: mine.ns, boot: mine.boot, start, token: 'f'.repeat(32) }));
    const again = fileStore(path);
    assert.deepEqual(await again.load(), { lastTimestamp: 9 }, `start ${start}`);
    await again.close();
  }
  // A live process whose pid is that of the lock's dead maker (a pid reused) is not its holder.
  writeFileSync(lock, JSON.stringify({ pid: process.ppid, host: hostname(), ns: mine.ns, boot: mine.boot, start: '1', token: 'f'.repeat(32) }));
  const reused = fileStore(path);
  assert.deepEqual(await reused.load(), { lastTimestamp: 9 });
  await reused.close();
  // But this very process (its pid and start time), in a store not this one, holds it.
  if (mine.start !== null) {
    writeFileSync(lock, JSON.stringify({ ...mine, token: 'd'.repeat(32) }));
    await assert.rejects(fileStore(path).load(), { code: 'store_locked' });
  }
  // An empty lock: its maker may be writing it now, so only an old one goes.
  writeFileSync(lock, '');
  await assert.rejects(fileStore(path).load(), { code: 'store_locked' });
  utimesSync(lock, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
  const third = fileStore(path);
  assert.deepEqual(await third.load(), { lastTimestamp: 9 });
  await third.close();
  // Another host's process cannot be checked: refused while its lock is fresh, and the message says how to clear it.
  writeFileSync(lock, JSON.stringify({ pid: 1, host: `not-${hostname()}`, token: 'e'.repeat(32) }));
  await assert.rejects(fileStore(path).load(), (e) => e.code === 'store_locked' && e.host === `not-${hostname()}` && e.message.includes(lock));
  rmSync(lock);
});

test('a store whose lock another process took over refuses to save (store_locked)', async () => {
  const path = fresh();
  const store = fileStore(path);
  await store.save({ lastTimestamp: 1 });
  writeFileSync(`${path}.lock`, JSON.stringify({ pid: process.pid, host: hostname(), token: '0'.repeat(32) }));
  await assert.rejects(store.save({ lastTimestamp: 2 }), { code: 'store_locked' });
  assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), { lastTimestamp: 1 });
  await store.close();
  assert.ok(readFileSync(`${path}.lock`, 'utf8').includes('0'.repeat(32)), 'close leaves a lock that is not its own');
});

test('the client restarts from the file after a kill -9: it offers the saved grant and mints after the saved reservation', async () => {
  const path = fresh();
  let lastId;
  const { done } = node(`
    import { EdgeleafClient } from 'edgeleaf';
    import { fileStore } from 'edgeleaf/file-store';
    import { fakeRegistry } from ${JSON.stringify(REGISTRY)};
    const reg = fakeRegistry();
    const client = new EdgeleafClient({ url: 'http://registry.test', fetch: reg.fetch });
    const sf = await client.snowflake({ nodeKey: 'restarting', store: fileStore(${JSON.stringify(path)}) });
    for (let i = 0; i < 50; i++) { console.log(String(await sf.next())); await new Promise((r) => setTimeout(r, 10)); }
    process.kill(process.pid, 'SIGKILL');`, { onLine: (l) => { lastId = BigInt(l); } });
  const r = await done;
  assert.equal(r.signal, 'SIGKILL', r.err);
  const saved = JSON.parse(readFileSync(path, 'utf8'));
  assert.equal(saved.nodeKey, 'restarting');
  assert.match(saved.secret, /^[0-9a-f]{32}$/);
  assert.ok(saved.lastTimestamp >= Snowflake.decompose(lastId).timestamp, 'the saved reservation covers every ID minted');
  const reg = fakeRegistry();
  const store = fileStore(path);
  const sf = await new EdgeleafClient({ url: 'http://registry.test', fetch: reg.fetch }).snowflake({ nodeKey: 'restarting', store });
  assert.deepEqual(reg.asks[0].previous, { workerId: saved.workerId, generation: saved.generation, secret: saved.secret });
  const id = await sf.next();
  assert.ok(id > lastId);
  assert.ok(Snowflake.decompose(id).timestamp > saved.lastTimestamp, 'after the saved reservation, not only after the last ID');
  await sf.close();
  assert.equal(JSON.parse(readFileSync(path, 'utf8')).lastTimestamp, Snowflake.decompose(id).timestamp);
  await store.close();
});

/** The pid of a process that has exited. */
async function deadPid() {
  const { child, done } = node('');
  await done;
  return child.pid;
}

/** This process's lock fields (pid namespace, boot ID, start time), as the store writes them. */
async function myLock() {
  const path = fresh();
  const store = fileStore(path);
  await store.save({ lastTimestamp: 1 });
  const mine = JSON.parse(readFileSync(`${path}.lock`, 'utf8'));
  await store.close();
  return mine;
}

const ago = (ms) => new Date(Date.now() - ms);

test('a lock of this host name in another pid namespace or boot is judged by its age, not its pid: refused while refreshed, taken over once 30 s old', async () => {
  const mine = await myLock();
  const path = fresh();
  const lock = `${path}.lock`;
  writeFileSync(path, JSON.stringify({ lastTimestamp: 5 }));
  const dead = await deadPid();
  // Two containers with one host name on one volume: the other's pid is dead
  // here, or this very pid (both pid 1) with another start time.
  for (const other of [{ ns: 'pid:[1]' }, { boot: '00000000-0000-4000-8000-000000000000' }, { ns: undefined, boot: undefined }]) {
    for (const pid of [dead, process.pid]) {
      const what = `${JSON.stringify(other)}, pid ${pid === dead ? 'dead here' : 'this one'}`;
      writeFileSync(lock, JSON.stringify({ ...mine, pid, start: '1', token: 'c'.repeat(32), ...other }));
      await assert.rejects(fileStore(path).load(), (e) => e.code === 'store_locked' && /30 s/.test(e.message), `${what}: a live lock, refreshed`);
      utimesSync(lock, ago(29_000), ago(29_000));
      await assert.rejects(fileStore(path).load(), { code: 'store_locked' }, `${what}: 29 s old`);
      utimesSync(lock, ago(31_000), ago(31_000));
      const store = fileStore(path);
      assert.deepEqual(await store.load(), { lastTimestamp: 5 }, `${what}: 31 s old`);
      await store.close();
    }
  }
  // Another host's lock, left by a pod killed (kill -9, OOM): taken over once no save has refreshed it for 30 s.
  writeFileSync(lock, JSON.stringify({ pid: 1, host: `not-${hostname()}`, token: 'e'.repeat(32) }));
  utimesSync(lock, ago(31_000), ago(31_000));
  const store = fileStore(path);
  assert.deepEqual(await store.load(), { lastTimestamp: 5 });
  assert.equal(JSON.parse(readFileSync(lock, 'utf8')).token.length, 32);
  assert.notEqual(JSON.parse(readFileSync(lock, 'utf8')).token, 'e'.repeat(32));
  await store.close();
});

test('each save refreshes the lock (its mtime): a live store\'s lock never looks abandoned', async () => {
  const path = fresh();
  const lock = `${path}.lock`;
  const store = fileStore(path);
  await store.save({ lastTimestamp: 1 });
  utimesSync(lock, ago(60_000), ago(60_000));
  await store.save({ lastTimestamp: 2 });
  assert.ok(Date.now() - statSync(lock).mtimeMs < 5_000, `the save left the lock ${Date.now() - statSync(lock).mtimeMs} ms old`);
  utimesSync(lock, ago(60_000), ago(60_000));
  await store.load();
  assert.ok(Date.now() - statSync(lock).mtimeMs < 5_000, 'load refreshes it too');
  await store.close();
});

test('two take-overs of one stale lock, interleaved: one gets the store, the other store_locked (the lock moved aside is checked by its token, not its inode)', async () => {
  const mine = await myLock();
  for (let round = 0; round < 5; round++) {
    const path = fresh();
    const lock = `${path}.lock`;
    writeFileSync(path, JSON.stringify({ lastTimestamp: 8 }));
    // Left by a dead process of this host: both judge it stale at once.
    writeFileSync(lock, JSON.stringify({ ...mine, pid: await deadPid(), start: '1', token: 'a'.repeat(32) }));
    const a = fileStore(path);
    const b = fileStore(path);
    // b has judged the lock stale and is about to move it aside; a takes it
    // over first (moves it aside, removes it, makes its own), then b moves
    // a's fresh lock aside (on ext4 often at the inode the stale one had).
    const rename = fsp.rename;
    let aDone = null;
    fsp.rename = async (from, to) => {
      if (aDone === null && String(to).endsWith('.stale')) {
        aDone = a.load().then(() => 'held', (e) => e.code);
        await aDone;
      }
      return rename(from, to);
    };
    let bDone;
    try {
      bDone = await b.load().then(() => 'held', (e) => e.code);
    } finally { fsp.rename = rename; }
    assert.deepEqual([await aDone, bDone], ['held', 'store_locked'], `round ${round}: a got ${await aDone}, b got ${bDone}`);
    await a.save({ lastTimestamp: 9 });
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), { lastTimestamp: 9 });
    await a.close();
    await b.close();
    assert.deepEqual(readdirSync(dir).filter((f) => f.startsWith(`state-${n}.json.`)), [], 'nothing left aside');
  }
});

test('a snowflake() that fails after taking the file (registry unreachable, clock refused) releases it: a retry in this process opens it', async () => {
  const path = fresh();
  const down = new EdgeleafClient({ url: 'http://registry.test', fetch: async () => { throw new TypeError('fetch failed'); } });
  await assert.rejects(down.snowflake({ nodeKey: 'retrying', store: fileStore(path) }), { code: 'registry_unreachable' });
  // A saved reservation ahead of this clock by more than the restart allows: refused before leasing.
  writeFileSync(path, JSON.stringify({ nodeKey: 'retrying', lastTimestamp: Date.now() + 600_000 }));
  const reg = fakeRegistry();
  const up = new EdgeleafClient({ url: 'http://registry.test', fetch: reg.fetch });
  await assert.rejects(up.snowflake({ nodeKey: 'retrying', store: fileStore(path) }), { code: 'clock_behind_last_report' });
  assert.equal(reg.asks.length, 0);
  rmSync(path);
  const store = fileStore(path);
  const sf = await up.snowflake({ nodeKey: 'retrying', store });
  assert.equal(typeof (await sf.next()), 'bigint');
  await sf.close();
  await store.close();
  // A store without close() is left as it is.
  const plain = { load: async () => ({ lastTimestamp: Date.now() + 600_000 }), save: async () => {} };
  await assert.rejects(up.snowflake({ nodeKey: 'retrying', store: plain }), { code: 'clock_behind_last_report' });
});

test('a lock refreshed between being judged stale and being moved aside goes back: its holder was alive', async () => {
  const path = fresh();
  const lock = `${path}.lock`;
  writeFileSync(lock, JSON.stringify({ pid: 1, host: `not-${hostname()}`, token: 'b'.repeat(32) }));
  utimesSync(lock, ago(31_000), ago(31_000));
  const rename = fsp.rename;
  fsp.rename = async (from, to) => {
    if (String(to).endsWith('.stale')) utimesSync(lock, new Date(), new Date()); // the holder's save, just in time
    return rename(from, to);
  };
  try {
    await assert.rejects(fileStore(path).load(), { code: 'store_locked' });
  } finally { fsp.rename = rename; }
  assert.equal(JSON.parse(readFileSync(lock, 'utf8')).token, 'b'.repeat(32), 'the holder keeps its lock');
  rmSync(lock);
});
