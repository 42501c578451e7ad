// The HTTP bench's same-bytes floor (worker/src/routes/floor.rs) is a test
// hook, not a route: only a Worker with TEST_BENCH_FLOOR set answers it, and
// only to a request on a loopback host (a deployed Worker never gets one);
// otherwise the path is as unknown as any other. Where it answers, its body
// has the size and shape of the batch answer the bench compares it with.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, ADMIN, CLIENT } from '../support/service.mjs';

const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-floor-'));
const services = [];
after(async () => {
  for (const s of services) await s.dispose();
  rmSync(persist, { recursive: true, force: true });
});

const get = async (svc, path, host = 'localhost') => {
  const res = await svc.mf.dispatchFetch(`http://${host}${path}`, { headers: { authorization: `Bearer ${CLIENT}` } });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
};

test('the floor answers the batch answer\'s size and shape, on a loopback host of a Worker with TEST_BENCH_FLOOR only', async () => {
  const plain = await start({ persist });
  services.push(plain);
  const unknown = await get(plain, '/test/floor?count=1000&bytes=19009');
  assert.equal(unknown.status, 404, unknown.text);
  assert.equal(JSON.parse(unknown.text).error.code, 'not_found');
  await plain.dispose();
  services.pop();

  const svc = await start({ persist, vars: { TEST_BENCH_FLOOR: '1' } });
  services.push(svc);
  // Not on another host: what a deployed Worker would see.
  const elsewhere = await get(svc, '/test/floor?count=1000&bytes=19009', 'edgeleaf.example.com');
  assert.equal(elsewhere.status, 404, elsewhere.text);

  await svc.fetch('/v1/tags/floor', { method: 'PUT', body: JSON.stringify({ step: 1000, maxId: String(2 ** 52) }) }, ADMIN);
  for (const count of [1000, 100, 7]) {
    const batch = await get(svc, `/v1/segment/floor?count=${count}`);
    assert.equal(batch.status, 200, batch.text);
    const floor = await get(svc, `/test/floor?count=${count}&bytes=${Buffer.byteLength(batch.text)}`);
    assert.equal(floor.status, 200, floor.text);
    assert.equal(floor.type, batch.type);
    assert.equal(Buffer.byteLength(floor.text), Buffer.byteLength(batch.text));
    const ids = JSON.parse(floor.text).ids;
    assert.equal(ids.length, count);
    assert.ok(ids.every((id) => /^[1-9][0-9]*$/.test(id)), floor.text.slice(0, 100));
  }
});
