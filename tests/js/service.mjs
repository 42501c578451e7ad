// Runs the built Worker (worker/build/) in real workerd through Miniflare,
// with SQLite-backed Durable Objects persisted in a directory of our choice.
// Either in-process (`start`), or as a child process listening on a
// 127.0.0.1 port (`spawnService`), which a test can kill -9.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import * as MF from 'miniflare';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const ADMIN = 'test-admin-token';
export const CLIENT = 'test-client-token';

/** Miniflare options for the Worker; `vars` override wrangler.toml's. */
export function options({ persist, vars = {}, port } = {}) {
  const build = join(ROOT, 'worker/build');
  const v4 = {
    modulesRoot: build,
    modules: [
      { type: 'ESModule', path: join(build, 'index.js') },
      { type: 'CompiledWasm', path: join(build, 'index_bg.wasm') },
    ],
    compatibilityDate: '2026-04-01',
    durableObjects: {
      TAGS: { className: 'TagStore', useSQLite: true },
      CATALOG: { className: 'Catalog', useSQLite: true },
      REGISTRY: { className: 'WorkerRegistry', useSQLite: true },
    },
    bindings: {
      LAYOUT: 'leaf', EPOCH_MS: '', DEFAULT_STEP: '1000', LEASE_TTL_MS: '60000', LEASE_GRACE_MS: '10000',
      MAX_SKEW_MS: '2000', MAX_BACKWARD_MS: '5', ADMIN_TOKEN: ADMIN, CLIENT_TOKEN: CLIENT, ...vars,
    },
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

// `node tests/js/service.mjs <persist-dir> <port>`: serve until killed.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [persist, port] = process.argv.slice(2);
  const mf = new MF.Miniflare(options({ persist, port: Number(port) }));
  const url = await mf.ready;
  console.log(`ready ${url}`);
}
