// Runs the built Worker (worker/build/) in real workerd through Miniflare,
// with SQLite-backed Durable Objects persisted in a directory of our choice.
// Either in-process (`start`), or as a child process listening on a
// 127.0.0.1 port (`spawnService`), which a test can kill -9.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
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
export function options({ persist, vars = {}, port } = {}) {
  const build = join(ROOT, 'worker/build');
  const v4 = {
    modulesRoot: build,
    modules: [
      { type: 'ESModule', path: join(build, 'index.js') },
      { type: 'CompiledWasm', path: join(build, 'index_bg.wasm') },
    ],
    compatibilityDate: /^compatibility_date = "([0-9-]+)"/m.exec(wranglerToml())[1],
    durableObjects: {
      TAGS: { className: 'TagStore', useSQLite: true },
      CATALOG: { className: 'Catalog', useSQLite: true },
      REGISTRY: { className: 'WorkerRegistry', useSQLite: true },
      MINTERS: { className: 'SnowflakeMinter', useSQLite: true },
    },
    bindings: { ...wranglerVars(), ADMIN_TOKEN: ADMIN, CLIENT_TOKEN: CLIENT, ...vars },
    ...(persist ? { resourcePersistencePath: persist } : {}),
    ...(port !== undefined ? { host: '127.0.0.1', port } : {}),
    cf: false,
  };
  return MF.convertV4MiniflareOptions ? MF.convertV4MiniflareOptions(v4) : v4;
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

// `node tests/js/service.mjs <persist-dir> <port> [vars-json]`: serve until killed.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [persist, port, vars] = process.argv.slice(2);
  const mf = new MF.Miniflare(options({ persist, port: Number(port), vars: vars ? JSON.parse(vars) : {} }));
  const url = await mf.ready;
  console.log(`ready ${url}`);
}
