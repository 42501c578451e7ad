// Rsbuild with no configuration (src/index.js, its own HTML), the page
// opened in Chromium.
export const tool = '@rsbuild/core';

export default async function check(h) {
  await h.run('rsbuild', ['build', '--log-level', 'warn']);
  const server = await h.serve('dist');
  try {
    const { ids } = await h.page(`${server.url}/`);
    return { ids, note: 'rsbuild build (no config), page in Chromium' };
  } finally {
    await server.close();
  }
}
