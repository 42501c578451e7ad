// Node as ES module (`import`): the package's `node` + `import` entry, on the
// floor version (Node 20) and on Node 22.
export const tool = 'node';

export default async function check(h) {
  const ids = [];
  const versions = [];
  for (const [i, node] of [h.node20, h.node22].entries()) {
    const { stdout } = await h.run(node, ['main.mjs', String(i + 1)]);
    ids.push(...JSON.parse(stdout));
    versions.push((await h.run(node, ['--version'])).stdout.trim());
  }
  return { ids, note: `import on Node ${versions.join(' and ')}` };
}
