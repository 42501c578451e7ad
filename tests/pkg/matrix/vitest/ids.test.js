// A Vitest test that imports the package by name (Vitest's defaults: the node
// environment). The IDs go to out/ids.json for the matrix to check.
import { mkdirSync, writeFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { Snowflake } from 'edgeleaf';

test('draws IDs', async () => {
  const s = new Snowflake({ workerId: 16 });
  const ids = [...s.nextIds(2), await s.next()];
  expect(new Set(ids).size).toBe(3);
  expect(s.decompose(ids[0]).workerId).toBe(16);
  mkdirSync('out', { recursive: true });
  writeFileSync('out/ids.json', JSON.stringify(ids.map(String)));
});
