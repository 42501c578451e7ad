// Rollup with @rollup/plugin-node-resolve (browser), the page opened in Chromium.
export const tool = 'rollup';

export default async function check(h) {
  await h.run('rollup', ['-c', '--silent']);
  const server = await h.serve('.');
  try {
    const { ids, consoleErrors } = await h.page(`${server.url}/index.html`);
    return { ids, consoleErrors, note: 'rollup -c with @rollup/plugin-node-resolve (browser: true), page in Chromium' };
  } finally {
    await server.close();
  }
}
