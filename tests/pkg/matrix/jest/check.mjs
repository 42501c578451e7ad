// Jest with no configuration: `jest` runs a test requiring the package.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export const tool = 'jest';

export default async function check(h) {
  rmSync(join(h.dir, 'out'), { recursive: true, force: true });
  await h.run('jest', ['--ci']);
  return { ids: JSON.parse(readFileSync(join(h.dir, 'out/ids.json'), 'utf8')), note: 'jest (no config, CommonJS)' };
}
