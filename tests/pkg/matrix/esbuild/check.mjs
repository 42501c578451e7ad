// esbuild, as its docs show:
//  - for a browser (--bundle --platform=browser): the default entry, no .wasm
//    asset, the page opened in Chromium;
//  - the slim entry, the .wasm copied by the file loader and fetched by init();
//  - for a Node server (--platform=node), the bundle run from another folder
//    (no node_modules beside it: a server build that must carry everything).
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const tool = 'esbuild';

export default async function check(h) {
  await h.clean('dist', 'dist-server');
  await h.run('esbuild', ['src/main.js', '--bundle', '--platform=browser', '--format=esm', '--outdir=dist', '--log-level=warning']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  await h.run('esbuild', ['src/slim.js', '--bundle', '--platform=browser', '--format=esm', '--outdir=dist',
    '--loader:.wasm=file', '--log-level=warning']);
  await h.run('esbuild', ['src/server.js', '--bundle', '--platform=node', '--format=esm', '--outfile=dist-server/server.mjs', '--log-level=warning']);
  const away = mkdtempSync(join(tmpdir(), 'edgeleaf-server-'));
  let server;
  try {
    copyFileSync(join(h.dir, 'dist-server/server.mjs'), join(away, 'server.mjs'));
    const bundled = JSON.parse((await h.run('node', ['server.mjs'], { cwd: away })).stdout);
    server = await h.serve('.');
    const { ids } = await h.page(`${server.url}/index.html`);
    const slim = await h.page(`${server.url}/slim.html`);
    return {
      ids: [...ids, ...slim.ids, ...bundled],
      note: 'esbuild --bundle --platform=browser (no .wasm asset), the slim entry with the .wasm by the file loader, pages in Chromium; --platform=node bundle run without node_modules',
    };
  } finally {
    rmSync(away, { recursive: true, force: true });
    await server?.close();
  }
}
