// The package's entries beside the default one: edgeleaf/slim (the caller
// brings the .wasm), the .wasm as its own export, the CommonJS bundles, the
// JS inflater browsers use for the inlined wasm, and the default entry's
// error when a runtime refuses to compile synchronously.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { deflateRawSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { init, initSync, Snowflake, SegmentGenerator, OpaqueIds, EdgeleafClient, layoutInfo } from 'edgeleaf/slim';
import { inflateRaw, fromBase64 } from '../../pkg/inflate.mjs';
import { size, deflated } from '../../pkg/web/edgeleaf_inline.js';

const require = createRequire(import.meta.url);
const wasmPath = require.resolve('edgeleaf/edgeleaf.wasm');

test('edgeleaf/slim refuses to work before init, with a coded error', () => {
  for (const f of [() => new Snowflake({ workerId: 1 }), () => Snowflake.decompose(1n), () => layoutInfo(),
    () => new SegmentGenerator({ tag: 't', fetchSegment: async () => ({ start: 1n, end: 2n }) }),
    () => new OpaqueIds({ key: new Uint8Array(16), bits: 53 }), () => new EdgeleafClient({ url: 'http://127.0.0.1:1' })]) {
    assert.throws(f, { code: 'not_initialized', message: /await init/ });
  }
  assert.equal(OpaqueIds.generateKey().length, 16, 'generateKey needs no wasm');
});

test('edgeleaf/slim: init() takes the .wasm and rejects what is not one', async () => {
  await assert.rejects(init(), { code: 'invalid_argument' });
  await assert.rejects(init({ module: 1 }), { code: 'invalid_argument' });
  assert.throws(() => initSync('https://example.invalid/edgeleaf.wasm'), { code: 'invalid_argument' });
  await init(readFileSync(wasmPath));
  await init(readFileSync(wasmPath)); // a second call does nothing
  const s = new Snowflake({ workerId: 9 });
  const ids = s.nextIds(3);
  assert.equal(new Set(ids).size, 3);
  assert.equal(Snowflake.decompose(ids[0]).workerId, 9);
  assert.ok(s instanceof Snowflake);
  assert.equal(Snowflake.name, 'Snowflake');
  assert.equal(layoutInfo().workerBits, 10);
});

test('edgeleaf/slim from CommonJS, with initSync and a compiled module; the .wasm export resolves', () => {
  const out = execFileSync(process.execPath, ['--input-type=commonjs', '-e', `
    const { readFileSync } = require('node:fs');
    const { initSync, Snowflake } = require('edgeleaf/slim');
    const path = require.resolve('edgeleaf/edgeleaf.wasm');
    try { new Snowflake({ workerId: 1 }); } catch (e) { if (e.code !== 'not_initialized') throw e; }
    initSync(new WebAssembly.Module(readFileSync(path)));
    console.log(String(new Snowflake({ workerId: 2 }).nextId()));
  `], { encoding: 'utf8' });
  assert.match(out.trim(), /^[0-9]{18,19}$/);
  assert.ok(wasmPath.endsWith('.wasm'));
});

test('the default entry, imported and required, is ready at once (no await)', () => {
  for (const [type, code] of [
    ['module', "import { Snowflake } from 'edgeleaf'; console.log(String(new Snowflake({ workerId: 3 }).nextId()));"],
    ['commonjs', "const { Snowflake } = require('edgeleaf'); console.log(String(new Snowflake({ workerId: 3 }).nextId()));"],
  ]) {
    const out = execFileSync(process.execPath, [`--input-type=${type}`, '-e', code], { encoding: 'utf8' });
    assert.match(out.trim(), /^[0-9]{18,19}$/, type);
  }
});

test('the JS inflater (browsers) decodes the inlined wasm, and what zlib makes of other input', () => {
  const wasm = readFileSync(wasmPath);
  assert.deepEqual(Buffer.from(inflateRaw(fromBase64(deflated), size)), wasm);
  const inputs = [Buffer.alloc(0), Buffer.from('a'), Buffer.from('abc'.repeat(50_000)), randomBytes(100_000), wasm];
  for (const input of inputs) {
    for (const opts of [{ level: 0 }, { level: 1 }, { level: 9 }, { strategy: 4 /* Z_FIXED */ }, { strategy: 2 /* Z_HUFFMAN_ONLY */ }]) {
      assert.deepEqual(Buffer.from(inflateRaw(deflateRawSync(input, opts), input.length)), input, `${input.length} bytes, ${JSON.stringify(opts)}`);
    }
  }
  assert.throws(() => inflateRaw(deflateRawSync(wasm).subarray(0, 1000), wasm.length), /corrupt/);
  assert.throws(() => inflateRaw(deflateRawSync(wasm), wasm.length - 1), /corrupt/);
});

test('where the JS decoder runs (no process.getBuiltinModule), the default entry still loads', () => {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
    delete process.getBuiltinModule;
    const { Snowflake } = await import('edgeleaf');
    console.log(String(new Snowflake({ workerId: 4 }).nextId()));
  `], { encoding: 'utf8' });
  assert.match(out.trim(), /^[0-9]{18,19}$/);
});

test('where process.getBuiltinModule throws (Next.js\'s edge runtime), the default entry still loads', () => {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
    process.getBuiltinModule = () => { throw new Error('A Node.js API is used (process.getBuiltinModule) which is not supported in the Edge Runtime.'); };
    const { Snowflake } = await import('edgeleaf');
    console.log(String(new Snowflake({ workerId: 4 }).nextId()));
  `], { encoding: 'utf8' });
  assert.match(out.trim(), /^[0-9]{18,19}$/);
});

test('a runtime that refuses synchronous compilation gets a coded error naming the way out', () => {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
    const Module = WebAssembly.Module;
    WebAssembly.Module = function () { throw new RangeError('WebAssembly.Compile is disallowed on the main thread, if the buffer size is larger than 4KB.'); };
    try { await import('edgeleaf'); console.log('loaded'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }
  `], { encoding: 'utf8' });
  const e = JSON.parse(out);
  assert.equal(e.code, 'sync_compile_refused');
  assert.match(e.message, /edgeleaf\/slim/);
});
