// Vitest with no configuration: `vitest run` of a test importing the package.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export const tool = 'vitest';

export default async function check(h) {
  rmSync(join(h.dir, 'out'), { recursive: true, force: true });
  await h.run('vitest', ['run']);
  return { ids: JSON.parse(readFileSync(join(h.dir, 'out/ids.json'), 'utf8')), note: 'vitest run (no config)' };
}
