// EdgeleafClient's segment leases against a fake service (a `fetch` of the
// test's own): what it sends and how often is the core's and the service's
// rule, carried through the bindings. Against the real Worker:
// tests/service/client.test.mjs and tail-return.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeleafClient } from 'edgeleaf';

const KEY = `elk_${'a1'.repeat(6)}_${'0f'.repeat(32)}`;

/** A service that leases ranges of `step` from 1 and records each call's body. */
function service({ fail = () => null } = {}) {
  const s = { max: 0n, calls: [], times: [] };
  s.fetch = async (url, init) => {
    const body = init.body === undefined ? undefined : JSON.parse(init.body);
    s.calls.push({ url, body });
    s.times.push(Date.now());
    const failed = fail(s.calls.length);
    if (failed === 'throw') throw new Error('connection reset');
    if (failed) return new Response(JSON.stringify({ error: { code: failed.code, message: 'refused' } }), { status: failed.status, headers: failed.retryAfter ? { 'retry-after': failed.retryAfter } : {} });
    if (url.endsWith('/lease/return')) return Response.json({ taken: true });
    const start = s.max + 1n;
    s.max += BigInt(body.step);
    return Response.json({ start: String(start), end: String(s.max) });
  };
  return s;
}

const client = (s, token = KEY) => new EdgeleafClient({ url: 'http://edgeleaf.test', ...(token === null ? {} : { token }), fetch: s.fetch });

test('a lease that gets no answer (or a 5xx) is asked at most 4 times, from a 25 ms backoff: the core\'s schedule (wait::after_call_failed)', async () => {
  for (const failure of ['throw', { status: 503, code: 'store_unavailable' }]) {
    const s = service({ fail: () => failure });
    const err = await client(s).segment('t', { step: 10 }).next().then(() => null, (e) => e);
    assert.ok(err, 'rejected');
    assert.equal(err.code, failure === 'throw' ? 'service_unreachable' : 'store_unavailable');
    assert.equal(s.calls.length, 4, `${JSON.stringify(failure)}: MAX_CALL_ATTEMPTS calls`);
    const waits = s.times.slice(1).map((t, i) => t - s.times[i]);
    // 12–25, 25–50, 50–100 ms (the timers may fire a little late, never early).
    assert.ok(waits[0] >= 11 && waits[2] >= 49 && waits.reduce((a, b) => a + b) < 1000, `waits ${waits}`);
    // All under one request ID: a retry gets the same range.
    assert.equal(new Set(s.calls.map((c) => c.body.requestId)).size, 1);
  }
  // A refusal is the caller's to see at once.
  const refused = service({ fail: () => ({ status: 403, code: 'forbidden', retryAfter: '1' }) });
  await assert.rejects(client(refused).segment('t').next(), { code: 'forbidden' });
  assert.equal(refused.calls.length, 1);
  // An answer after a lost one: served.
  const flaky = service({ fail: (n) => (n < 3 ? 'throw' : null) });
  assert.equal(await client(flaky).segment('t', { step: 10 }).next(), 1n);
  assert.equal(flaky.calls.length, 3);
});

test('a 503 that says when to ask again (Retry-After) is asked again no sooner, within the budget (wait::after_told_to_wait)', async () => {
  const s = service({ fail: () => ({ status: 503, code: 'overloaded', retryAfter: '1' }) });
  const err = await client(s).segment('t', { step: 10 }).next().then(() => null, (e) => e);
  assert.equal(err?.code, 'overloaded');
  assert.equal(err.retryAfterMs, 1000, 'the service\'s Retry-After is passed on');
  assert.equal(s.calls.length, 4, 'MAX_CALL_ATTEMPTS calls: 3 s of waits fit the 10 s budget');
  const waits = s.times.slice(1).map((t, i) => t - s.times[i]);
  assert.ok(waits.every((w) => w >= 999), `waits ${waits}: each at least the 1 s the service asked`);
  // A Retry-After that is not whole seconds, or absurd: the wait is whole
  // ms, at most a day (past the budget: given up at once), and the error
  // thrown is the service's.
  for (const [retryAfter, calls] of [['0.0001', 4], ['1e300', 1]]) {
    const odd = service({ fail: () => ({ status: 503, code: 'overloaded', retryAfter }) });
    const e = await client(odd).segment('t', { step: 10 }).next().then(() => null, (x) => x);
    assert.equal(e?.code, 'overloaded', retryAfter);
    assert.ok(Number.isInteger(e.retryAfterMs) && e.retryAfterMs <= 86_400_000, `${e.retryAfterMs}`);
    assert.equal(odd.calls.length, calls, retryAfter);
  }
  // One that mends: served after the wait.
  const mended = service({ fail: (n) => (n === 1 ? { status: 503, code: 'overloaded', retryAfter: '1' } : null) });
  const t0 = Date.now();
  assert.equal(await client(mended).segment('t', { step: 10 }).next(), 1n);
  assert.ok(Date.now() - t0 >= 999 && mended.calls.length === 2);
});

test('with an API key, each lease says the generator\'s fence (`after`: the end of its last range); other tokens send neither request IDs nor `after`', async () => {
  const s = service();
  const g = client(s).segment('t', { step: 10, prefetchPercent: 100 });
  await g.nextIds(35); // three ranges: 1..=10, 11..=30, 31..=70 (the step doubling)
  const leases = s.calls.filter((c) => c.url.endsWith('/lease')).map((c) => c.body);
  assert.ok(leases.length >= 3);
  assert.equal(leases[0].after, undefined, 'nothing held yet');
  assert.equal(leases[1].after, '10');
  assert.equal(leases[2].after, '30');
  assert.ok(leases.every((b) => /^t-[0-9a-f]{24}$/.test(b.requestId)));
  const closed = await g.close();
  assert.ok(closed.length > 0 && closed.every((r) => r.taken));
  // Not an API key's shape (worker/rules/src/access.rs): the service's shared credentials.
  for (const token of ['client-token', `${KEY}0`, KEY.toUpperCase(), null]) {
    const other = service();
    const h = client(other, token).segment('t', { step: 10, prefetchPercent: 100 });
    await h.nextIds(25);
    assert.ok(other.calls.every((c) => c.body.requestId === undefined && c.body.after === undefined), String(token));
    assert.deepEqual((await h.close()).map((r) => r.taken), [false], 'nothing handed back');
  }
});
