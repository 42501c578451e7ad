// webpack 5 with no configuration file (src/index.js → dist/main.js),
// production mode, the page opened in Chromium.
export const tool = 'webpack';

export default async function check(h) {
  await h.clean('dist');
  const { stdout, stderr } = await h.run('webpack', ['--mode', 'production']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  const out = stdout + stderr;
  if (/WARNING|ERROR/.test(out)) throw new Error(`webpack warned:\n${out}`);
  const server = await h.serve('.');
  try {
    const { ids } = await h.page(`${server.url}/index.html`);
    return { ids, note: 'webpack --mode production (no config), no warning, no .wasm asset, page in Chromium' };
  } finally {
    await server.close();
  }
}
