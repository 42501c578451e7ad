// OpaqueIds and SegmentGenerator's `opaque` option in Node: the same
// permutation as the Rust core (its known answers), checked options.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OpaqueIds, SegmentGenerator } from 'edgeleaf';
// The bindings, ready once 'edgeleaf' is imported (the same module): the
// core's constants, to compare the package's JS copies with.
import { opaqueKeyBytes } from '../../pkg/web/edgeleaf.js';

const KEY = Uint8Array.from({ length: 16 }, (_, i) => i);

test('the same permutation as the core: its known answers, both ways', () => {
  const digits = new OpaqueIds({ key: KEY, digits: 12 });
  const bits = new OpaqueIds({ key: Buffer.from(KEY).toString('hex'), bits: 53 });
  assert.deepEqual([digits.encode(1), digits.encode(2n), bits.encode('1'), bits.encode(2)],
    [743_070_357_142n, 377_027_069_371n, 5_978_809_911_643_182n, 8_009_441_055_610_694n]);
  assert.equal(digits.decode(743_070_357_142n), 1n);
  assert.equal(bits.maxId, 2n ** 53n - 1n);
  const seen = new Set();
  for (let n = 1n; n <= 10_000n; n++) {
    const id = bits.encode(n);
    assert.ok(id >= 1n && id <= bits.maxId);
    seen.add(id);
    assert.equal(bits.decode(id), n);
  }
  assert.equal(seen.size, 10_000);
  assert.equal(OpaqueIds.generateKey().length, 16);
});

test('generateKey() makes keys of the core\'s length (its JS copy of OPAQUE_KEY_BYTES, for edgeleaf/slim before init)', () => {
  assert.equal(OpaqueIds.generateKey().length, opaqueKeyBytes(), 'pkg/opaque.mjs OPAQUE_KEY_BYTES == src/opaque.rs OPAQUE_KEY_BYTES');
  // And a key of that length is one the core takes.
  assert.equal(new OpaqueIds({ key: OpaqueIds.generateKey(), bits: 40 }).maxId, 2n ** 40n - 1n);
});

test('a SegmentGenerator with `opaque` hands out opaque IDs of its counters', async () => {
  const key = OpaqueIds.generateKey();
  const ids = new OpaqueIds({ key, bits: 40 });
  let next = 1n;
  const g = new SegmentGenerator({
    tag: 'orders', step: 100, opaque: { key, bits: 40 },
    fetchSegment: async (_tag, step) => { const start = next; next += BigInt(step); return { start, end: next - 1n }; },
  });
  const got = [...await g.nextIds(500), await g.next()];
  assert.equal(new Set(got).size, 501);
  assert.deepEqual(got.map((id) => ids.decode(id)).sort((a, b) => (a < b ? -1 : 1)),
    Array.from({ length: 501 }, (_, i) => BigInt(i + 1)));
  // A range past the domain is refused, not wrapped.
  const past = new SegmentGenerator({
    tag: 'o', opaque: { key, bits: 32 }, fetchSegment: async () => ({ start: 2n ** 32n - 5n, end: 2n ** 32n + 5n }),
  });
  await assert.rejects(past.next(), { code: 'out_of_range' });
});

test('bad opaque options throw with a code', () => {
  const cases = [
    [() => new OpaqueIds(), 'invalid_option'],
    [() => new OpaqueIds({ key: KEY }), 'invalid_option'],
    [() => new OpaqueIds({ key: KEY, bits: 53, digits: 12 }), 'invalid_option'],
    [() => new OpaqueIds({ key: KEY.slice(0, 15), bits: 53 }), 'invalid_option'],
    [() => new OpaqueIds({ key: 'zz'.repeat(16), bits: 53 }), 'invalid_option'],
    [() => new OpaqueIds({ key: KEY, bits: 31 }), 'out_of_range'],
    [() => new OpaqueIds({ key: KEY, digits: 19 }), 'out_of_range'],
    [() => new OpaqueIds({ key: KEY, bits: 53, salt: 1 }), 'invalid_option'],
    [() => new OpaqueIds({ key: KEY, bits: 53 }).encode(0), 'out_of_range'],
    [() => new OpaqueIds({ key: KEY, bits: 53 }).encode(2n ** 53n), 'out_of_range'],
    [() => new OpaqueIds({ key: KEY, bits: 53 }).decode(-1n), 'invalid_id'],
  ];
  for (const [fn, code] of cases) assert.throws(fn, { code }, String(fn));
});
