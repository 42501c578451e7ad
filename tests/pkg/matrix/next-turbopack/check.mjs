// Next.js (app router): a client component imports edgeleaf at the top of its
// file; `next build` prerenders the page on the server (the import and a call
// into the wasm must work there), `next start` serves it, and headless
// Chromium draws IDs in the browser. An edge route handler (`runtime = 'edge'`)
// draws IDs on the server. next-webpack/check.mjs runs the same with
// `next build --webpack`.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export const tool = 'next';
export default (h) => checkNext(h, { webpack: false });

// `workerId`s: 1 in the browser, 2 in the edge route; `COMPOSED` as in app/ids.js.
const COMPOSED = { timestamp: Date.UTC(2026, 0, 1), workerId: 7, sequence: 3 };
const env = { NEXT_TELEMETRY_DISABLED: '1' }; // h sets it too
const NEXT_OWN_WARNINGS = [/The Edge Runtime is deprecated/, /Using edge runtime on a page currently disables static generation/,
  /No build cache found/];

export async function checkNext(h, { webpack }) {
  const require = createRequire(join(h.dir, 'package.json'));
  const node = h.node22; // the tools' Node
  const next = join(h.dir, 'node_modules', 'next', 'dist', 'bin', 'next');
  const version = require('next/package.json').version;
  const { Snowflake } = require('edgeleaf'); // the same tarball, as Node loads it
  const fail = (what, output = '') => { throw new Error(`next@${version}${webpack ? ' --webpack' : ''}: ${what}${output && `\n${output}`}`); };

  let t = Date.now();
  const build = await h.run(node, [next, 'build', ...(webpack ? ['--webpack'] : []), h.dir], { env, timeoutMs: 900_000 });
  const buildS = (Date.now() - t) / 1000;
  const buildOut = build.stdout + build.stderr;
  // No warning (webpack's "Compiled with warnings", e.g. for top-level await in a dependency),
  // but Next's own: two about the edge runtime, which the route handler uses on purpose, and
  // one about a CI (h sets CI=1) building without a .next/cache.
  const warnings = buildOut.split('\n').filter((l) => /⚠|warn/i.test(l) && !NEXT_OWN_WARNINGS.some((w) => w.test(l)));
  if (warnings.length) fail(`the build warned: ${warnings.join(' / ')}`, buildOut);

  // What `next build` prerendered: the page, with the ID the wasm composed on the server.
  const composed = Snowflake.compose(COMPOSED).toString();
  const html = await readFile(join(h.dir, '.next', 'server', 'app', 'index.html'), 'utf8').catch(() => fail('no prerendered .next/server/app/index.html', buildOut));
  if (!html.includes(`<p id="ssr">${composed}</p>`)) fail(`the prerendered page lacks <p id="ssr">${composed}</p>`, html);
  // The route handler is built for the edge runtime, not Node.
  const manifest = JSON.parse(await readFile(join(h.dir, '.next', 'server', 'middleware-manifest.json'), 'utf8'));
  if (!manifest.functions?.['/api/ids/route']) fail('/api/ids is not an edge function', JSON.stringify(manifest));

  const port = await h.port();
  const url = `http://127.0.0.1:${port}`;
  const server = await h.start(node, [next, 'start', '-p', String(port), '-H', '127.0.0.1', h.dir], { readyUrl: `${url}/`, env });
  try {
    t = Date.now();
    const { ids: pageIds, consoleErrors } = await h.page(`${url}/`);
    if (consoleErrors.length) fail(`console errors: ${consoleErrors.join('\n')}`);
    const res = await fetch(`${url}/api/ids`);
    const body = await res.text();
    if (res.status !== 200) fail(`/api/ids answered ${res.status}`, body);
    const edgeIds = JSON.parse(body);
    for (const [ids, workerId, where] of [[pageIds, 1, 'page'], [edgeIds, 2, '/api/ids']]) {
      if (!Array.isArray(ids) || ids.length < 3 || !ids.every((id) => typeof id === 'string' && /^[0-9]+$/.test(id))) {
        fail(`${where}: expected ≥ 3 decimal strings, got ${JSON.stringify(ids)}`);
      }
      if (!ids.every((id) => Snowflake.decompose(id).workerId === workerId)) fail(`${where}: not worker ${workerId}: ${ids}`);
    }
    const useS = (Date.now() - t) / 1000;
    return {
      ids: [...pageIds, ...edgeIds],
      note: `next build${webpack ? ' --webpack' : ' (Turbopack)'} ${buildS.toFixed(0)} s, no warning, / prerendered `
        + `(the wasm composed an ID on the server); next start: ${pageIds.length} IDs from a client component `
        + `in Chromium, ${edgeIds.length} from an edge route handler (${useS.toFixed(1)} s)`,
    };
  } finally {
    await server.stop();
  }
}
