// Deno 2 (the `deno` npm package's binary): `deno check` (the types), then
// `deno run` with no permission at all.
import { join } from 'node:path';

export const tool = 'deno';

export default async function check(h) {
  const env = { DENO_DIR: join(h.dir, '.deno'), DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' };
  await h.run('deno', ['check', '--no-lock', 'main.ts'], { env });
  const { stdout } = await h.run('deno', ['run', '--no-lock', '--no-prompt', 'main.ts'], { env });
  return { ids: JSON.parse(stdout), note: 'deno check + deno run with no permissions' };
}
