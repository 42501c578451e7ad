// esbuild for a browser, as its docs show: --bundle --platform=browser, the
// page opened in Chromium.
export const tool = 'esbuild';

export default async function check(h) {
  await h.run('esbuild', ['src/main.js', '--bundle', '--platform=browser', '--format=esm', '--outdir=dist', '--log-level=warning']);
  const server = await h.serve('.');
  try {
    const { ids, consoleErrors } = await h.page(`${server.url}/index.html`);
    return { ids, consoleErrors, note: 'esbuild --bundle --platform=browser, page in Chromium' };
  } finally {
    await server.close();
  }
}
