// TypeScript (strict): `tsc` with node16 resolution (an ES module and a
// CommonJS module: the types of both conditions) and with bundler
// resolution, then the output run in Node.
export const tool = 'typescript';

export default async function check(h) {
  await h.clean('dist-node16', 'dist-bundler');
  await h.run('tsc', ['-p', 'tsconfig.node16.json']);
  await h.run('tsc', ['-p', 'tsconfig.bundler.json']);
  const ids = [];
  for (const [i, file] of ['dist-node16/esm.mjs', 'dist-node16/cjs.cjs', 'dist-bundler/esm.mjs'].entries()) {
    ids.push(...JSON.parse((await h.run('node', [file, String(20 + i)])).stdout));
  }
  return { ids, note: 'tsc strict, node16 (.mts + .cts) and bundler resolution, run in Node' };
}
