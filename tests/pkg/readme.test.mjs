// Every ```js block of README.md runs here, as a module that imports the
// package by name, so the documented examples stay true.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const blocks = [...readFileSync(`${ROOT}/README.md`, 'utf8').matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);

test('README has JS examples', () => assert.ok(blocks.length >= 3));

blocks.forEach((code, i) => {
  test(`README JS example ${i + 1}`, () => {
    // console.assert only prints; make a failed assertion fail the example.
    const strict = `console.assert = (ok, ...m) => { if (!ok) throw new Error('assertion failed ' + m.join(' ')); };\n`;
    execFileSync(process.execPath, ['--input-type=module', '-e', strict + code], { cwd: ROOT, stdio: 'pipe' });
  });
});
