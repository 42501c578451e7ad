// wrangler dev (local workerd) on a Worker importing the package.
export const tool = 'wrangler';

export default async function check(h) {
  const port = await h.port();
  const url = `http://127.0.0.1:${port}/`;
  const dev = await h.start('wrangler', ['dev', '--ip', '127.0.0.1', '--port', String(port),
    '--show-interactive-dev-session=false', '--log-level', 'warn'], { readyUrl: url });
  try {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`the Worker answered ${res.status}: ${await res.text()}\n${dev.output()}`);
    return { ids: await res.json(), note: 'wrangler dev (workerd), the .wasm as a module' };
  } finally {
    await dev.stop();
  }
}
