// Rsbuild with no configuration (src/index.js, its own HTML), the page
// opened in Chromium.
export const tool = '@rsbuild/core';

export default async function check(h) {
  await h.clean('dist');
  await h.run('rsbuild', ['build', '--log-level', 'warn']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  const server = await h.serve('dist');
  try {
    const { ids } = await h.page(`${server.url}/`);
    return { ids, note: 'rsbuild build (no config), no .wasm asset, page in Chromium' };
  } finally {
    await server.close();
  }
}
