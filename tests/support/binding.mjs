// A user's Worker (tests/service/binding/) bound to edgeleaf's RPC entrypoint
// `Ids`, both in one workerd: for tests/service/binding.test.mjs and
// tests/bench/binding.bench.mjs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { ROOT, v4Options, CLIENT } from './service.mjs';

/** The user's Worker bundled by wrangler (as `wrangler deploy` would); resolves its output directory. */
export function bundleUserWorker() {
  const out = mkdtempSync(join(tmpdir(), 'edgeleaf-binding-'));
  execFileSync(join(ROOT, 'node_modules/.bin/wrangler'), ['deploy', '--dry-run', '--outdir', out], {
    cwd: join(ROOT, 'tests/service/binding'),
    env: {
      ...process.env,
      // wrangler's launcher runs `node` from PATH: Node 22 from node_modules.
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      WRANGLER_SEND_METRICS: 'false', CI: '1', NO_UPDATE_NOTIFIER: '1',
    },
    stdio: 'pipe',
  });
  return out;
}

/**
 * edgeleaf (`vars` over wrangler.toml's; on a 127.0.0.1 `port` if given),
 * the user's Worker `shop` (bundled in `out`) bound to it — `IDS` to the
 * `Ids` entrypoint, `EDGELEAF` to the default one — and `stranger`, a Worker
 * of the same workerd without a binding. `call(path)` asks `shop`,
 * `http(path)` edgeleaf's public API.
 */
export async function startBound(out, { vars = {}, port } = {}) {
  const { cf, host, port: _, ...edgeleaf } = { ...v4Options({ vars, port }), name: 'edgeleaf' };
  const wasm = readdirSync(out).filter((f) => f.endsWith('.wasm'));
  const shop = {
    name: 'shop',
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: join(out, 'worker.js') },
      ...wasm.map((f) => ({ type: 'CompiledWasm', path: join(out, f) })),
    ],
    compatibilityDate: edgeleaf.compatibilityDate,
    serviceBindings: { IDS: { name: 'edgeleaf', entrypoint: 'Ids' }, EDGELEAF: 'edgeleaf' },
  };
  const stranger = {
    name: 'stranger',
    modules: true,
    script: 'export default { fetch(req, env) { return Response.json(Object.keys(env)); } };',
    compatibilityDate: edgeleaf.compatibilityDate,
  };
  const mf = new Miniflare(convertV4MiniflareOptions({
    cf, ...(port !== undefined ? { host, port } : {}), workers: [edgeleaf, shop, stranger],
  }));
  const url = String(await mf.ready).replace(/\/$/, '');
  const user = await mf.getWorker('shop');
  const call = async (path, init) => {
    const res = await user.fetch(`http://shop${path}`, init);
    return { status: res.status, body: await res.json() };
  };
  const http = async (path, init = {}, token = CLIENT) => {
    const res = await mf.dispatchFetch(`http://localhost${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...(init.headers ?? {}) },
    });
    return { status: res.status, body: await res.json().catch(() => null) };
  };
  return { mf, url, user, call, http, stranger: await mf.getWorker('stranger') };
}
