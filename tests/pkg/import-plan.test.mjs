// import-leaf's plan and its writes, with the service played by functions:
// the edges a live service rarely shows (a Leaf max_id near the last ID, a
// deleted tag that keeps a higher maxId, a refusal that is not that one),
// and a hostile CSV that must not take quadratic time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { plan, apply } from '../../pkg/cli/import-leaf.mjs';

const MAX_ID = (1n << 63n) - 1n;
import { parseLeafRows } from '../../pkg/cli/leaf-dump.mjs';

const row = (bizTag, maxId, step = 1000) => ({ bizTag, maxId: BigInt(maxId), step, description: '', line: 1 });
const refusal = (message) => Object.assign(new Error(message), { code: 'out_of_range' });

test('a Leaf max_id whose margin passes the last ID is a conflict, planned before any write', async () => {
  const [p] = await plan([row('near-end', MAX_ID - 10n)], { getTag: async () => null });
  assert.equal(p.action, 'conflict');
  assert.match(p.reason, /passes the largest ID/);
  // Past 2^62 the tag would be left a short runway (a bad or hostile dump
  // must not exhaust it for good): refused unless forced.
  const [short] = await plan([row('fits', MAX_ID - 2_000_000n)], { getTag: async () => null });
  assert.equal(short.action, 'conflict');
  assert.match(short.reason, /passes 2\^62/);
  const [q] = await plan([row('fits', MAX_ID - 2_000_000n)], { getTag: async () => null, force: true });
  assert.equal(q.action, 'create');
  assert.equal(q.targetMaxId, MAX_ID);
  // A tag that allotted IDs within the margin (above Leaf's max_id, below the
  // target): Leaf nodes still loading could hand out the same. Refused.
  const [r] = await plan([row('in-margin', 1000)], { getTag: async () => ({ maxId: '5000' }) });
  assert.equal(r.action, 'conflict');
  assert.match(r.reason, /allotted IDs up to 5000/);
});

test('a deleted tag that keeps a higher maxId is re-created there; any other out_of_range is thrown, never retried without maxId', async () => {
  const [p] = await plan([row('kept', 3000)], { getTag: async () => null, margin: 0n });
  const puts = [];
  const keeps = async (tag, body) => {
    puts.push(body);
    if (body.maxId !== undefined) throw refusal(`kept (dump.sql:1): max_id: expected 5000..=${MAX_ID}, found ${body.maxId}`);
    return { maxId: '5000' };
  };
  const [done] = await apply([p], { putTag: keeps });
  assert.deepEqual([done.action, done.maxId], ['created', 5000n]);
  assert.equal(puts.length, 2);

  // The service refuses the target for another reason (past the last ID, a
  // domain's end): a retry without maxId would create the tag at 0, under
  // Leaf's IDs. It must be thrown, with nothing written.
  puts.length = 0;
  const tooHigh = async (tag, body) => {
    puts.push(body);
    if (body.maxId !== undefined) throw refusal(`kept (dump.sql:1): max_id: expected 0..=${MAX_ID}, found ${body.maxId}`);
    return { maxId: '0' };
  };
  await assert.rejects(apply([p], { putTag: tooHigh }), /max_id: expected 0/);
  assert.deepEqual(puts.map((b) => 'maxId' in b), [true]);
});

test('a CSV line of quotes parses (or is refused) in linear time', () => {
  const hostile = `a${'"'.repeat(1_000_000)},1,1\n`;
  const t0 = process.hrtime.bigint();
  try {
    parseLeafRows(hostile, { format: 'csv', source: 'x.csv' });
  } catch (e) {
    assert.equal(e.code, 'invalid_dump');
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  // Quadratic, this took minutes (320,000 quotes: 50 s); linear, ~0.1 s.
  assert.ok(ms < 10_000, `${ms} ms`);
});
