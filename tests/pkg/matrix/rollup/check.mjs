// Rollup with @rollup/plugin-node-resolve (browser), the page opened in Chromium.
export const tool = 'rollup';

export default async function check(h) {
  await h.clean('dist');
  await h.run('rollup', ['-c', '--silent']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  const server = await h.serve('.');
  try {
    const { ids, consoleErrors } = await h.page(`${server.url}/index.html`);
    return { ids, consoleErrors, note: 'rollup -c with @rollup/plugin-node-resolve (browser: true), no .wasm asset, page in Chromium' };
  } finally {
    await server.close();
  }
}
