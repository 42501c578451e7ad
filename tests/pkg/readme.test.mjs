// The docs stay true. Every ```js block (run as an ES module) and ```cjs block
// (run as CommonJS) of the docs that hold JS examples — README.md,
// pkg/README.md, docs/*.md — runs here against the package, imported by name.
// Blocks tagged ```javascript are shown, not run (they need a live service;
// each says which test makes the same calls). Every relative link of the docs
// resolves to a file (and an #anchor to a heading of it), and the error-code
// tables name every code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (file) => readFileSync(join(ROOT, file), 'utf8');
const docsDir = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);

// The files whose examples run, and the files whose links are checked.
const EXAMPLES = ['README.md', 'pkg/README.md', ...docsDir];
const LINKED = ['README.md', 'CONTRIBUTING.md', 'pkg/README.md', 'src/README.md', ...docsDir];

const blocksOf = (file, lang) => [...read(file).matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm'))].map((m) => m[1]);

test('the docs have JS examples', () => {
  assert.ok(blocksOf('README.md', 'js').length >= 1, 'README.md: a JS example');
  assert.ok(blocksOf('pkg/README.md', 'js').length >= 3, 'pkg/README.md: the API, by example');
  assert.ok(blocksOf('pkg/README.md', 'cjs').length >= 1, 'pkg/README.md: a CommonJS example');
});

// console.assert only prints; make a failed assertion fail the example.
const strict = `console.assert = (ok, ...m) => { if (!ok) throw new Error('assertion failed ' + m.join(' ')); };\n`;

for (const file of EXAMPLES) {
  for (const [lang, inputType] of [['js', 'module'], ['cjs', 'commonjs']]) {
    blocksOf(file, lang).forEach((code, i) => {
      test(`${file} ${lang} example ${i + 1}`, () => {
        execFileSync(process.execPath, [`--input-type=${inputType}`, '-e', strict + code], { cwd: ROOT, stdio: 'pipe' });
      });
    });
  }
}

// Markdown without its code: fenced blocks and inline code spans hold text
// that looks like links and headings but is neither.
const prose = (text) => text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');

// GitHub's anchor for a heading: the text as rendered, lower case, without
// punctuation, spaces as hyphens; a repeated heading gets -1, -2, ...
function anchors(text) {
  const seen = new Map();
  const out = new Set();
  for (const [, heading] of text.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/[`*]/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

test('every relative link of the docs resolves', () => {
  const broken = [];
  let checked = 0;
  for (const file of LINKED) {
    for (const [, target] of prose(read(file)).matchAll(/\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      checked++;
      const [path, anchor] = target.split('#');
      const to = path === '' ? file : relative(ROOT, join(ROOT, dirname(file), decodeURIComponent(path)));
      if (to.startsWith('..') || !existsSync(join(ROOT, to))) {
        broken.push(`${file}: ${target} (no file ${to})`);
      } else if (anchor !== undefined && to.endsWith('.md') && !anchors(read(to)).has(anchor)) {
        broken.push(`${file}: ${target} (no heading #${anchor} in ${to})`);
      }
    }
  }
  assert.ok(checked >= 50, `only ${checked} links found: is the pattern still right?`);
  assert.deepEqual(broken, []);
});

// The quoted snake_case names in `text` between `start` and the first `end` after it.
function quotedCodes(text, start, end) {
  const from = text.indexOf(start);
  assert.ok(from >= 0, `${start} not found`);
  return [...text.slice(from, text.indexOf(end, from)).matchAll(/'([a-z_]+)'/g)].map((m) => m[1]);
}

test('the npm page names every error code of the package', () => {
  const codes = quotedCodes(read('pkg/index.d.ts'), 'export type ErrorCode =', ';');
  assert.ok(codes.length >= 40, `only ${codes.length} codes found in index.d.ts`);
  const page = read('pkg/README.md');
  assert.deepEqual(codes.filter((c) => !page.includes(`\`${c}\``)), []);
});

test('docs/service.md names every error code of the wire', () => {
  // The OpenAPI enum, itself checked against the core's ErrorCode by worker/rules/tests/error_codes.rs.
  const codes = quotedCodes(read('worker/openapi.yaml'), 'error codes (src/code.rs', 'message:');
  assert.ok(codes.length >= 30, `only ${codes.length} codes found in openapi.yaml`);
  const page = read('docs/service.md');
  assert.deepEqual(codes.filter((c) => !page.includes(`| \`${c}\` |`)), []);
});
