// esbuild for a browser, as its docs show: --bundle --platform=browser, the
// page opened in Chromium.
export const tool = 'esbuild';

export default async function check(h) {
  await h.clean('dist');
  await h.run('esbuild', ['src/main.js', '--bundle', '--platform=browser', '--format=esm', '--outdir=dist', '--log-level=warning']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  const server = await h.serve('.');
  try {
    const { ids, consoleErrors } = await h.page(`${server.url}/index.html`);
    return { ids, consoleErrors, note: 'esbuild --bundle --platform=browser, no .wasm asset, page in Chromium' };
  } finally {
    await server.close();
  }
}
