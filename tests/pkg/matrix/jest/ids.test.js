// A Jest test (Jest's defaults: CommonJS, the node environment) that requires
// the package by name. The IDs go to out/ids.json for the matrix to check.
const { mkdirSync, writeFileSync } = require('node:fs');
const { Snowflake } = require('edgeleaf');

test('draws IDs', async () => {
  const s = new Snowflake({ workerId: 17 });
  const ids = [...s.nextIds(2), await s.next()];
  expect(new Set(ids).size).toBe(3);
  expect(s.decompose(ids[0]).workerId).toBe(17);
  mkdirSync('out', { recursive: true });
  writeFileSync('out/ids.json', JSON.stringify(ids.map(String)));
});
