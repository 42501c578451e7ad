// Part of scripts/pkg.sh: writes pkg/web/edgeleaf_inline.js, the .wasm as the
// default entry carries it (raw DEFLATE, then base64, in a JS module), and
// checks that pkg/inflate.mjs decodes it back to the .wasm byte for byte.
import { deflateRawSync, constants } from 'node:zlib';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const pkg = (p) => fileURLToPath(new URL(`../pkg/${p}`, import.meta.url));
const wasm = readFileSync(pkg('web/edgeleaf_bg.wasm'));
const deflated = deflateRawSync(wasm, { level: constants.Z_BEST_COMPRESSION, memLevel: 9 });
const base64 = deflated.toString('base64');
writeFileSync(pkg('web/edgeleaf_inline.js'), `// Made by scripts/pkg.sh: edgeleaf_bg.wasm (${wasm.length} bytes), raw DEFLATE, base64.
export const size = ${wasm.length};
export const deflated = '${base64}';
`);

const { inflateRaw, fromBase64 } = await import(pkg('inflate.mjs'));
const { size, deflated: text } = await import(pkg('web/edgeleaf_inline.js'));
const back = inflateRaw(fromBase64(text), size);
if (Buffer.compare(Buffer.from(back), wasm) !== 0) {
  console.error('pkg: pkg/inflate.mjs does not decode the inlined wasm back to the .wasm');
  process.exit(1);
}
