// Node as CommonJS (`require`): the package's `node` + `require` entry, on
// Node 20 and Node 22.
export const tool = 'node';

export default async function check(h) {
  const ids = [];
  const versions = [];
  for (const [i, node] of [h.node20, h.node22].entries()) {
    const { stdout } = await h.run(node, ['main.cjs', String(i + 1)]);
    ids.push(...JSON.parse(stdout));
    versions.push((await h.run(node, ['--version'])).stdout.trim());
  }
  return { ids, note: `require on Node ${versions.join(' and ')}` };
}
