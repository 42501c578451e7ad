// Bun: the runtime (`bun main.js`) and its bundler (`bun build --target
// browser`, the page opened in Chromium).
export const tool = 'bun';

export default async function check(h) {
  const { stdout } = await h.run('bun', ['main.js']);
  await h.run('bun', ['build', 'main.js', '--target', 'browser', '--outdir', 'dist']);
  const server = await h.serve('.');
  try {
    const { ids } = await h.page(`${server.url}/index.html`);
    return { ids: [...JSON.parse(stdout), ...ids], note: 'bun main.js + bun build --target browser, page in Chromium' };
  } finally {
    await server.close();
  }
}
