// Runs the built Worker (worker/build/) in real workerd through Miniflare,
// with SQLite-backed Durable Objects persisted in a directory of our choice.
// Either in-process (`start`), or as a child process listening on a
// 127.0.0.1 port (`spawnService`), which a test can kill -9.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import * as MF from 'miniflare';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const ADMIN = 'test-admin-token';
export const CLIENT = 'test-client-token';

const wranglerToml = () => readFileSync(join(ROOT, 'worker/wrangler.toml'), 'utf8');

/** The `[vars]` of worker/wrangler.toml (`KEY = "value"  # comment` lines). */
export function wranglerVars() {
  const toml = wranglerToml();
  const section = toml.slice(toml.indexOf('\n[vars]\n') + 1).split(/\n\[/)[0];
  const vars = {};
  for (const line of section.split('\n').slice(1)) {
    const m = /^([A-Z_]+)\s*=\s*"([^"]*)"/.exec(line);
    if (m) vars[m[1]] = m[2];
  }
  if (!vars.LAYOUT) throw new Error('worker/wrangler.toml: no [vars] LAYOUT found');
  return vars;
}

/** Miniflare options for the Worker; `vars` override wrangler.toml's. */
export function options(opts = {}) {
  const v4 = v4Options(opts);
  return MF.convertV4MiniflareOptions ? MF.convertV4MiniflareOptions(v4) : v4;
}

/** The same, in Miniflare's v4 shape (one worker's options, shared ones inline). */
export function v4Options({ persist, vars = {}, port } = {}) {
  // EDGELEAF_WORKER_BUILD: another build of the Worker (the size/speed bench).
  const build = process.env.EDGELEAF_WORKER_BUILD ?? join(ROOT, 'worker/build');
  const v4 = {
    modulesRoot: build,
    modules: [
      { type: 'ESModule', path: join(build, 'index.js') },
      // The entry module's import: worker-build's own output (scripts/worker.sh;
      // a build from before the service binding has none: its index.js is that).
      ...(existsSync(join(build, 'edgeleaf.js')) ? [{ type: 'ESModule', path: join(build, 'edgeleaf.js') }] : []),
      { type: 'CompiledWasm', path: join(build, 'index_bg.wasm') },
    ],
    compatibilityDate: /^compatibility_date = "([0-9-]+)"/m.exec(wranglerToml())[1],
    durableObjects: {
      TAGS: { className: 'TagStore', useSQLite: true },
      CATALOG: { className: 'Catalog', useSQLite: true },
      REGISTRY: { className: 'WorkerRegistry', useSQLite: true },
      MINTERS: { className: 'SnowflakeMinter', useSQLite: true },
      KEYS: { className: 'KeyStore', useSQLite: true },
      API_KEYS: { className: 'ApiKey', useSQLite: true },
      ALLOCATORS: { className: 'RegionalAllocator', useSQLite: true },
    },
    bindings: { ...wranglerVars(), ADMIN_TOKEN: ADMIN, CLIENT_TOKEN: CLIENT, ...vars },
    ...(persist ? { resourcePersistencePath: persist } : {}),
    ...(port !== undefined ? { host: '127.0.0.1', port } : {}),
    cf: false,
  };
  return v4;
}

/** The Worker in this process; `fetch(path, init)` calls it with the client token. */
export async function start(opts = {}) {
  const mf = new MF.Miniflare(options(opts));
  await mf.ready;
  const call = (path, init = {}, token = CLIENT) =>
    mf.dispatchFetch(`http://localhost${path}`, {
      ...init,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(init.headers ?? {}) },
    });
  return {
    mf,
    fetch: call,
    admin: (path, init = {}) => call(path, init, ADMIN),
    dispose: () => mf.dispose(),
  };
}

/**
 * The service in a child process (its own process group, so workerd dies
 * with it) on a 127.0.0.1 port it binds itself (port 0: no window in which
 * another process could take a port we chose); resolves `{ child, url }`;
 * `capture` collects its stdout and stderr in `child.output`; `env` adds
 * environment variables (e.g. MINIFLARE_WORKERD_PATH, tests/support/clock.mjs).
 */
export async function spawnService(persist, vars = {}, { capture = false, env = {} } = {}) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), persist, '0', JSON.stringify(vars)], {
    detached: true,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', capture ? 'pipe' : 'inherit'],
  });
  // With `capture`, everything the service prints (workerd's logs included).
  child.output = '';
  child.stdout.on('data', (d) => { child.output += d; });
  child.stderr?.on('data', (d) => { child.output += d; });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('service did not start in 30 s')), 30_000);
    child.stdout.on('data', (d) => {
      const m = /ready (\S+)/.exec(String(d));
      if (m) { clearTimeout(timer); resolve(m[1].replace(/\/$/, '')); }
    });
    child.on('exit', (code) => reject(new Error(`service exited with ${code}`)));
  });
  return { child, url };
}

/** SIGKILL to the service's whole process group; resolves once it is gone. */
export function killHard(child) {
  try { process.kill(-child.pid, 'SIGKILL'); } catch { /* already gone */ }
  return new Promise((r) => (child.exitCode !== null || child.signalCode ? r() : child.once('exit', r)));
}

// `node tests/support/service.mjs <persist-dir> <port> [vars-json]`: serve until killed.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [persist, port, vars] = process.argv.slice(2);
  const mf = new MF.Miniflare(options({ persist, port: Number(port), vars: vars ? JSON.parse(vars) : {} }));
  const url = await mf.ready;
  console.log(`ready ${url}`);
}
