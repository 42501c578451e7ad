// webpack 5 with no configuration file (src/index.js → dist/main.js),
// production mode, the page opened in Chromium.
export const tool = 'webpack';

export default async function check(h) {
  const { stdout, stderr } = await h.run('webpack', ['--mode', 'production']);
  const out = stdout + stderr;
  if (/WARNING|ERROR/.test(out)) throw new Error(`webpack warned:\n${out}`);
  const server = await h.serve('.');
  try {
    const { ids } = await h.page(`${server.url}/index.html`);
    return { ids, note: 'webpack --mode production (no config), no warning, page in Chromium' };
  } finally {
    await server.close();
  }
}
