// edgeleaf/file-store: the store of a leased snowflake (`EdgeleafClient#snowflake`)
// in a file, for Node (and Deno, Bun). Not in the default entry: it needs the
// file system, which browsers and workerd do not have. It holds no rule about
// IDs; it keeps what the client asks it to keep:
//   - saves are atomic (a temporary file, written and fsynced, then renamed
//     over the old one, and the directory fsynced): a crash leaves the old
//     state or the new one, never a torn file;
//   - the file and its lock are 0600: the state holds the lease's secret;
//   - one live process at a time: the first `load()` (or `save()`) takes a
//     lock file (`<path>.lock`, created exclusively, holding the pid, its
//     start time, the host, the pid namespace, the boot ID and a token);
//     another live process then gets `store_locked`. A lock left by a process
//     that is gone (this host, pid namespace and boot, and no such pid, or
//     another process under it: a pid reused, a container restarted as pid 1)
//     is taken over. A lock whose pid cannot be checked from here (another
//     host, pid namespace or boot) is taken over once no save has refreshed
//     it for STALE_MS: each save and load refreshes it (its mtime), and checks
//     it is still this store's (`store_locked` if it was taken over: a store
//     whose saves stall that long loses the file, and stops). `close()`
//     releases it.
import { promises as fsp, constants } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { codedError, describe } from './errors.mjs';

const MODE = 0o600;
// A lock file still empty (its creator died between creating and writing it,
// or is writing it now) is taken over only once it is this old.
const EMPTY_LOCK_MS = 5_000;
// A lock whose pid cannot be checked from here (another host, pid namespace
// or boot) is stale once no save has refreshed it for this long: the client
// saves about once a second.
const STALE_MS = 30_000;
// The paths this process holds (shared by every copy of this module in the
// process: the ES module and the CommonJS build, two versions installed).
const held = (globalThis[Symbol.for('edgeleaf.file-store.held')] ??= new Set());

const token = () => randomBytes(16).toString('hex');

/** Whether process `pid` of this host is alive (EPERM: alive, not ours). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/**
 * When process `pid` started (Linux: clock ticks since boot, /proc/<pid>/stat),
 * or null where that cannot be read: with the pid, it tells a process from a
 * later one given the same pid.
 */
async function startOf(pid) {
  try {
    const stat = await fsp.readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/**
 * This process's pid namespace and boot (Linux; null where they cannot be
 * read): a pid means something only to processes that share both.
 */
let whereAmI = null;
function where() {
  const read = (f, path) => f(path).then((s) => String(s).trim() || null, () => null);
  whereAmI ??= Promise.all([read(fsp.readlink, '/proc/self/ns/pid'), read((p) => fsp.readFile(p, 'utf8'), '/proc/sys/kernel/random/boot_id')])
    .then(([ns, boot]) => ({ ns, boot }));
  return whereAmI;
}

async function fsyncDir(dir) {
  let fh;
  try {
    fh = await fsp.open(dir, constants.O_RDONLY);
    await fh.sync();
  } catch { /* not every platform opens or syncs a directory (Windows) */ } finally {
    await fh?.close().catch(() => {});
  }
}

/**
 * The lock at `lockPath` as read through one handle: `{ ino, mtimeMs, text,
 * holder, ageMs }`, or null if there is none. `refresh(holder)`: when it says
 * so, the lock's mtime is set to now through that handle (the file read, not
 * one made since under its name).
 */
async function readLock(lockPath, refresh) {
  let fh;
  try {
    fh = await fsp.open(lockPath, 'r');
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw e;
  }
  try {
    const st = await fh.stat();
    const text = await fh.readFile('utf8');
    let holder = null;
    try { holder = JSON.parse(text); } catch { /* empty or torn: judged by age */ }
    if (!(holder && Number.isSafeInteger(holder.pid) && holder.pid > 0 && typeof holder.host === 'string' && typeof holder.token === 'string')) holder = null;
    if (refresh?.(holder)) {
      const now = new Date();
      await fh.utimes(now, now);
    }
    return { ino: st.ino, mtimeMs: st.mtimeMs, text, holder, ageMs: Date.now() - st.mtimeMs };
  } finally {
    await fh.close();
  }
}

class FileStore {
  #path;
  #lockPath;
  #canonical = false;
  #token = null;
  #queue = Promise.resolve();

  constructor(path) {
    this.#path = path;
    this.#lockPath = `${path}.lock`;
  }

  /** The state file's path. */
  get path() { return this.#path; }

  /** The saved state, or undefined when there is none yet. Takes the lock first. */
  load() {
    return this.#serial(async () => {
      await this.#lock();
      await this.#removeTemporaries();
      let text;
      try {
        text = await fsp.readFile(this.#path, 'utf8');
      } catch (e) {
        if (e.code === 'ENOENT') return undefined;
        throw e;
      }
      let state;
      try { state = JSON.parse(text); } catch { state = undefined; }
      if (state === null || typeof state !== 'object' || Array.isArray(state)) {
        throw codedError('store_error', `edgeleaf/file-store: ${this.#path} holds no saved state (${text.length} bytes that are not a JSON object): ` +
          'restore it or remove it (then wait until the lease it held has lapsed, a TTL, before starting)', { path: this.#path });
      }
      return state;
    });
  }

  /** Replaces the saved state, atomically. Takes the lock first, or checks it is still this store's. */
  save(state) {
    return this.#serial(async () => {
      if (state === null || typeof state !== 'object' || Array.isArray(state)) {
        throw codedError('invalid_argument', `edgeleaf/file-store: save: expected a state object, found ${describe(state)}`);
      }
      await this.#lock();
      const text = `${JSON.stringify(state)}\n`;
      const tmp = `${this.#path}.${process.pid}-${token().slice(0, 8)}.tmp`;
      const fh = await fsp.open(tmp, 'wx', MODE);
      try {
        try {
          await fh.chmod(MODE).catch(() => {}); // exactly 0600, whatever the umask
          await fh.writeFile(text, 'utf8');
          await fh.sync();
        } finally {
          await fh.close();
        }
        await fsp.rename(tmp, this.#path);
      } catch (e) {
        await fsp.unlink(tmp).catch(() => {});
        throw e;
      }
      await fsyncDir(dirname(this.#path));
    });
  }

  /** Releases the lock (the state stays). A later `load()` or `save()` takes it again. */
  close() {
    return this.#serial(async () => {
      if (this.#token === null) return;
      const mine = this.#token;
      this.#token = null;
      held.delete(this.#path);
      const lock = await readLock(this.#lockPath);
      if (lock?.holder?.token === mine) await fsp.unlink(this.#lockPath).catch(() => {});
    });
  }

  // One operation at a time: a save never overtakes another.
  #serial(op) {
    const run = this.#queue.then(op);
    this.#queue = run.catch(() => {});
    return run;
  }

  #locked(holder, why, elsewhere = false) {
    const who = holder ? `process ${holder.pid} on ${holder.host}` : 'another process';
    const gone = elsewhere
      ? `if that process is gone, remove ${this.#lockPath} (or wait: once no save has refreshed it for ${STALE_MS / 1000} s, it is taken over)`
      : `if that process is gone, remove ${this.#lockPath}`;
    return codedError('store_locked', `edgeleaf/file-store: ${this.#path} is in use by ${who}${why}: ` +
      `two live processes must not share one store (give each its own file); ${gone}`,
    { path: this.#path, lockPath: this.#lockPath, ...(holder ? { pid: holder.pid, host: holder.host } : {}) });
  }

  async #lock() {
    if (!this.#canonical) {
      // One lock per file, however its directory is named (symlinks).
      this.#path = join(await fsp.realpath(dirname(this.#path)), basename(this.#path));
      this.#lockPath = `${this.#path}.lock`;
      this.#canonical = true;
    }
    if (this.#token !== null) {
      // Held: still ours? (Someone may have removed it, or taken it over.)
      // If so, its mtime says it is alive (to processes that cannot check its pid).
      const mine = this.#token;
      const lock = await readLock(this.#lockPath, (holder) => holder?.token === mine);
      if (lock?.holder?.token === this.#token) return;
      this.#token = null;
      held.delete(this.#path);
      throw this.#locked(lock?.holder ?? null, ', which took over its lock');
    }
    if (held.has(this.#path)) throw this.#locked({ pid: process.pid, host: hostname() }, ' (another store of this process)');
    const { ns, boot } = await where();
    const me = { pid: process.pid, host: hostname(), ns, boot, start: await startOf(process.pid), token: token(), at: Date.now() };
    for (let attempt = 0; attempt < 5; attempt++) {
      let fh;
      try {
        fh = await fsp.open(this.#lockPath, 'wx', MODE);
      } catch (e) {
        if (e.code !== 'EEXIST') throw e;
        const lock = await readLock(this.#lockPath);
        if (lock === null) continue; // released meanwhile
        if (!(await this.#stale(lock))) throw this.#locked(lock.holder, '', lock.holder !== null && !(await this.#here(lock.holder)));
        await this.#takeOver(lock);
        continue;
      }
      try {
        await fh.writeFile(JSON.stringify(me), 'utf8');
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fsyncDir(dirname(this.#lockPath));
      this.#token = me.token;
      held.add(this.#path);
      return;
    }
    throw this.#locked(null, ' (its lock kept changing)');
  }

  // Whether `holder`'s pid is one this process can check: this host, pid
  // namespace and boot (a lock written before these were recorded is not).
  async #here(holder) {
    const { ns, boot } = await where();
    return holder.host === hostname() && (holder.ns ?? null) === ns && (holder.boot ?? null) === boot;
  }

  // Whether the lock's holder is gone: no such process on this host, or
  // another process under its pid (one started since: a pid reused, or a
  // container restarted as pid 1). A holder whose pid cannot be checked from
  // here (another host, pid namespace or boot: the same host name in two
  // containers sees the other's pids as dead or as its own) is gone once its
  // saves have not refreshed the lock for STALE_MS. Judged gone wrongly (its
  // saves stalled), it gets `store_locked` at its next save and stops.
  async #stale({ holder, ageMs }) {
    if (holder === null) return ageMs > EMPTY_LOCK_MS;
    if (!(await this.#here(holder))) return ageMs > STALE_MS;
    if (holder.pid !== process.pid && !alive(holder.pid)) return true;
    const start = await startOf(holder.pid);
    if (typeof holder.start === 'string' && start !== null) return holder.start !== start;
    // Where start times cannot be read: this pid's lock is stale unless this process holds it.
    return holder.pid === process.pid && !held.has(this.#path);
  }

  // Moves the stale lock aside (rename is atomic), checking it was the one
  // judged stale, and not refreshed since (its holder saving): by its token
  // and mtime (an empty or torn one: its text, inode and mtime), never by its
  // inode alone, which a file system reuses at once (a lock made meanwhile by
  // another process taking the same stale lock over may have the stale one's
  // inode). A lock moved by mistake goes back; if a
  // third lock took its place meanwhile, its holder finds at its next save
  // that the lock is not its own (`store_locked`).
  async #takeOver(lock) {
    const aside = `${this.#lockPath}.${process.pid}-${token().slice(0, 8)}.stale`;
    try {
      await fsp.rename(this.#lockPath, aside);
    } catch (e) {
      if (e.code === 'ENOENT') return;
      throw e;
    }
    const moved = await readLock(aside).catch(() => null);
    const same = moved !== null && moved.mtimeMs === lock.mtimeMs && (lock.holder !== null
      ? moved.holder?.token === lock.holder.token
      : moved.holder === null && moved.text === lock.text && moved.ino === lock.ino);
    if (!same) {
      try {
        await fsp.link(aside, this.#lockPath); // back, unless a lock took its place (EEXIST)
      } catch (e) {
        if (e.code !== 'EEXIST') await fsp.rename(aside, this.#lockPath).catch(() => {}); // no hard links here
      }
    }
    await fsp.unlink(aside).catch(() => {});
  }

  // Temporary files a crash left behind (this store's own names only).
  async #removeTemporaries() {
    const dir = dirname(this.#path);
    const prefix = `${basename(this.#path)}.`;
    let names;
    try { names = await fsp.readdir(dir); } catch { return; }
    for (const name of names) {
      if (name.startsWith(prefix) && /^[0-9]+-[0-9a-f]{8}\.tmp$/.test(name.slice(prefix.length))) {
        await fsp.unlink(resolve(dir, name)).catch(() => {});
      }
    }
  }
}

/**
 * A store for `EdgeleafClient#snowflake({ store })` in the file at `path`
 * (a string or a file: URL), for Node. See the module's first comment.
 */
export function fileStore(path) {
  let p = path;
  if (p instanceof URL) {
    if (p.protocol !== 'file:') throw codedError('invalid_argument', `edgeleaf/file-store: path: expected a file path or file: URL, found ${p.protocol} URL`);
    p = fileURLToPath(p);
  }
  if (typeof p !== 'string' || p === '' || p.includes('\0')) {
    throw codedError('invalid_argument', `edgeleaf/file-store: path: expected a file path or file: URL, found ${describe(path)}`);
  }
  return new FileStore(resolve(p));
}
