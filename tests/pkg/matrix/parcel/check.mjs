// Parcel 2 with no configuration: `parcel build index.html`, the page opened in
// Chromium.
export const tool = 'parcel';

export default async function check(h) {
  await h.clean('dist');
  await h.run('parcel', ['build', 'index.html', '--no-cache', '--dist-dir', 'dist', '--log-level', 'warn']);
  const assets = (await h.files('dist')).filter((f) => f.endsWith('.wasm'));
  if (assets.length) throw new Error(`the build emitted ${assets.join(', ')}: the default entry carries its wasm inline`);
  const server = await h.serve('dist');
  try {
    const { ids, consoleErrors } = await h.page(`${server.url}/index.html`);
    return { ids, consoleErrors, note: 'parcel build index.html, no .wasm asset, page in Chromium' };
  } finally {
    await server.close();
  }
}
