// Bun: the runtime (`bun main.js`) and its bundler (`bun build --target
// browser`, the page opened in Chromium).
export const tool = 'bun';

export default async function check(h) {
  const { stdout } = await h.run('bun', ['main.js']);
  await h.clean('dist');
  await h.run('bun', ['build', 'main.js', '--target', 'browser', '--outdir', 'dist']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  const server = await h.serve('.');
  try {
    const { ids } = await h.page(`${server.url}/index.html`);
    return { ids: [...JSON.parse(stdout), ...ids], note: 'bun main.js + bun build --target browser, no .wasm asset, page in Chromium' };
  } finally {
    await server.close();
  }
}
