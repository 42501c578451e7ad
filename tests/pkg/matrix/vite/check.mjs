// Vite with no configuration: `vite build` (the page served from dist/) and
// the dev server, each opened in Chromium.
export const tool = 'vite';

export default async function check(h) {
  await h.clean('dist');
  await h.run('vite', ['build', '--logLevel', 'warn']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  const server = await h.serve('dist');
  let built;
  try {
    built = await h.page(`${server.url}/`);
  } finally {
    await server.close();
  }
  const port = await h.port();
  const dev = await h.start('vite', ['--port', String(port), '--strictPort', '--host', '127.0.0.1'], { readyUrl: `http://127.0.0.1:${port}/` });
  try {
    const served = await h.page(dev.url);
    return { ids: [...built.ids, ...served.ids], note: 'vite build + vite dev server, no .wasm asset, pages in Chromium' };
  } finally {
    await dev.stop();
  }
}
