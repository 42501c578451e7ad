// The tail handed back (issue 25, item 4), against the real Worker in
// workerd. Leaf discards a client's unused segment when it stops (its users'
// issues #15 and #78: step 2000, 27 IDs used, a restart, the next ID is
// 2001). Here `SegmentGenerator.close()` of an EdgeleafClient with an API
// key hands the unused tail back (POST /v1/segment/{tag}/lease/return, under
// the lease's request ID): it becomes a credit of that key, and the same
// key's next client's first ID is the 28th. The tag's max_id never moves
// back for a client (the root cannot know whether the client used those IDs:
// a key that returns IDs it used could otherwise make another key receive
// them); another key's next lease gets IDs above the range. Another key
// naming the same request ID and range takes nothing; callers without a key
// of their own (no token, CLIENT_TOKEN, ADMIN_TOKEN) are refused, and every
// input gets a typed 4xx.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EdgeleafClient } from 'edgeleaf';
import { start, ADMIN, CLIENT } from '../support/service.mjs';

let svc; // CLIENT_TOKEN set
let open; // CLIENT_TOKEN unset: the ID routes take no token
before(async () => {
  svc = await start();
  open = await start({ vars: { CLIENT_TOKEN: '' } });
});
after(async () => { await svc?.dispose(); await open?.dispose(); });

const json = { 'content-type': 'application/json' };
const put = async (s, tag, body) => {
  const res = await s.admin(`/v1/tags/${tag}`, { method: 'PUT', body: JSON.stringify(body) });
  assert.equal(res.status, 200, await res.text());
};
const maxId = async (s, tag) => BigInt((await (await s.admin(`/v1/tags/${tag}`)).json()).maxId);
const key = async (s, name) =>
  (await (await s.admin('/v1/keys', { method: 'POST', body: JSON.stringify({ name, scopes: ['ids'] }) })).json()).token;
const lease = (s, tag, body, token) =>
  s.fetch(`/v1/segment/${tag}/lease`, { method: 'POST', headers: json, body: JSON.stringify(body) }, token);
const giveBack = (s, tag, body, token) =>
  s.fetch(`/v1/segment/${tag}/lease/return`, { method: 'POST', headers: json, body: typeof body === 'string' ? body : JSON.stringify(body) }, token);
/** An EdgeleafClient on `s` whose requests are recorded. */
function client(s, token) {
  const paths = [];
  const c = new EdgeleafClient({
    url: 'http://localhost',
    token,
    fetch: (url, init) => { paths.push(new URL(url).pathname); return s.mf.dispatchFetch(url, init); },
  });
  return { c, paths };
}
async function ok(res) {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}
async function refused(res, status, code) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.equal(JSON.parse(text).error.code, code, text);
}

test("Leaf's #15/#78: a keyed client uses 27 IDs of a 2000-ID range and closes; the same key's next client's first ID is the 28th, another key's is above the range", async () => {
  await put(svc, 'issue15', { step: 2000 });
  const k = await key(svc, 'issue 15');
  const { c, paths } = client(svc, k);
  const g = c.segment('issue15', { step: 2000 });
  const used = await g.nextIds(27);
  assert.equal(used[0], 1n);
  assert.equal(used[26], 27n);
  assert.equal(await maxId(svc, 'issue15'), 2000n, 'one range leased');
  const closed = await g.close();
  assert.deepEqual(closed, [{ start: 28n, end: 2000n, taken: true }]);
  assert.equal(await g.close(), closed, 'idempotent: the same answer, nothing sent twice');
  assert.equal(paths.filter((p) => p.endsWith('/lease/return')).length, 1);
  assert.equal(await maxId(svc, 'issue15'), 2000n, 'max_id never moves back for a client: the tail is the key\'s credit');
  await assert.rejects(g.next(), { code: 'generator_closed' });
  // Another key's next lease: above the range, never the credited IDs.
  const other = client(svc, await key(svc, 'issue 15 other')).c.segment('issue15', { step: 2000 });
  assert.equal(await other.next(), 2001n, 'another key never gets the credited IDs');
  // The next client of the same key (a restart of the same application) goes on at 28.
  const next = client(svc, k).c.segment('issue15', { step: 2000 });
  assert.equal(await next.next(), 28n, 'no gap for the key');
  assert.deepEqual([...await next.nextIds(2)], [29n, 30n]);
  assert.equal(await maxId(svc, 'issue15'), 4000n);
  // With the shared client token there is no hand-back (its requests carry no
  // request ID): the tail stays a gap, as in Leaf — never an ID twice.
  const shared = client(svc, CLIENT);
  const s = shared.c.segment('issue15', { step: 2000 });
  const first = await s.next();
  assert.ok(first > 4000n, `${first}: above the keyed clients' ranges`);
  assert.deepEqual((await s.close()).map((r) => r.taken), [false]);
  assert.ok(!shared.paths.some((p) => p.endsWith('/lease/return')), 'nothing sent without a key');
  assert.equal(await maxId(svc, 'issue15'), first + 1999n, 'the shared client\'s tail stays skipped');
});

test('a lease by another caller in between: each tail is its own key\'s credit, and no ID is handed out twice', async () => {
  await put(svc, 'between', { step: 100 });
  const [ka, kb] = [await key(svc, 'between a'), await key(svc, 'between b')];
  const a = client(svc, ka).c.segment('between', { step: 100 });
  const b = client(svc, kb).c.segment('between', { step: 100 });
  const seen = new Set();
  const take = (ids) => { for (const id of ids) { assert.ok(!seen.has(id), `${id} twice`); seen.add(id); } };
  take(await a.nextIds(5)); // 1..=5, range 1..=100
  take(await b.nextIds(5)); // 101..=105, range 101..=200
  assert.equal(await maxId(svc, 'between'), 200n);
  assert.deepEqual(await a.close(), [{ start: 6n, end: 100n, taken: true }]);
  assert.deepEqual(await b.close(), [{ start: 106n, end: 200n, taken: true }]);
  assert.equal(await maxId(svc, 'between'), 200n, 'max_id never falls for a client\'s tail');
  // A third key goes on above both ranges; each key's next client, at its own credit.
  const c = client(svc, await key(svc, 'between c')).c.segment('between', { step: 100 });
  const ids = await c.nextIds(150);
  assert.equal(ids[0], 201n);
  take(ids);
  const a2 = client(svc, ka).c.segment('between', { step: 100 });
  const b2 = client(svc, kb).c.segment('between', { step: 100 });
  const [ia, ib] = [await a2.nextIds(95), await b2.nextIds(95)];
  assert.deepEqual([ia[0], ia[94], ib[0], ib[94]], [6n, 100n, 106n, 200n]);
  take(ia);
  take(ib);
});

test('another key naming the same requestId and range takes nothing; the holder itself takes its tail once', async () => {
  await put(svc, 'impostor', { step: 100 });
  const [mine, other] = [await key(svc, 'holder'), await key(svc, 'impostor')];
  const r = await ok(await lease(svc, 'impostor', { step: 100, requestId: 'job-1' }, mine));
  assert.deepEqual([r.start, r.end], ['1', '100']);
  const tail = { requestId: 'job-1', start: '11', end: '100' };
  for (const token of [other]) {
    assert.deepEqual(await ok(await giveBack(svc, 'impostor', tail, token)), { taken: false });
    assert.deepEqual(await ok(await giveBack(svc, 'impostor', { ...tail, start: '1' }, token)), { taken: false });
    assert.equal(await maxId(svc, 'impostor'), 100n, 'max_id unmoved');
  }
  // The impostor's own lease under the same requestId is a range of its own.
  const theirs = await ok(await lease(svc, 'impostor', { step: 100, requestId: 'job-1' }, other));
  assert.equal(theirs.start, '101');
  assert.deepEqual(await ok(await giveBack(svc, 'impostor', { ...tail, start: '101', end: '200' }, mine)), { taken: false }, 'nor can the holder take the impostor\'s');
  assert.deepEqual(await ok(await giveBack(svc, 'impostor', { requestId: 'job-1', start: '101', end: '200' }, other)), { taken: true });
  assert.equal(await maxId(svc, 'impostor'), 200n);
  // The holder's tail: taken once; a second time nothing (its range is shortened).
  assert.deepEqual(await ok(await giveBack(svc, 'impostor', tail, mine)), { taken: true });
  assert.deepEqual(await ok(await giveBack(svc, 'impostor', tail, mine)), { taken: false });
  assert.equal(await maxId(svc, 'impostor'), 200n, 'max_id never moves back for a client');
  // A retry of the lease answers only the IDs the holder kept.
  assert.deepEqual(await ok(await lease(svc, 'impostor', { step: 100, requestId: 'job-1' }, mine)), { ...r, end: '10', step: 10 });
  // Each key's next lease: its own credit, retried alike; then new IDs.
  const again = await ok(await lease(svc, 'impostor', { step: 100, requestId: 'job-2' }, mine));
  assert.deepEqual([again.start, again.end, again.step], ['11', '100', 90]);
  assert.deepEqual(await ok(await lease(svc, 'impostor', { step: 100, requestId: 'job-2' }, mine)), again, 'a retry: the same credit');
  assert.equal((await ok(await lease(svc, 'impostor', { step: 100 }, mine))).start, '201');
  assert.equal((await ok(await lease(svc, 'impostor', { step: 100 }, other))).start, '101');
  assert.equal((await ok(await lease(svc, 'impostor', { step: 100 }, other))).start, '301');
  assert.equal(await maxId(svc, 'impostor'), 400n);
});

test('callers without a key of their own are refused (400 request_id_needs_key); bad input gets a typed 4xx; max_id never moves', async () => {
  await put(svc, 'refuse', { step: 100 });
  await put(open, 'refuse', { step: 100 });
  await put(svc, 'refuse-mono', { step: 100, monotonic: true });
  const k = await key(svc, 'refuse');
  const r = await ok(await lease(svc, 'refuse', { step: 100, requestId: 'job-1' }, k));
  const tail = { requestId: 'job-1', start: '2', end: r.end };
  await refused(await giveBack(svc, 'refuse', tail, CLIENT), 400, 'request_id_needs_key');
  await refused(await giveBack(svc, 'refuse', tail, ADMIN), 400, 'request_id_needs_key');
  await ok(await lease(open, 'refuse', { step: 100 }, null));
  await refused(await giveBack(open, 'refuse', tail, null), 400, 'request_id_needs_key');
  assert.equal(await maxId(open, 'refuse'), 100n);
  await refused(await giveBack(svc, 'refuse', tail, null), 401, 'unauthorized');
  for (const [body, status, code] of [
    [{ start: '2', end: r.end }, 400, 'invalid_json'],
    [{ ...tail, step: 5 }, 400, 'invalid_json'],
    [{ ...tail, by: 'lease:someone' }, 400, 'invalid_json'],
    [{ ...tail, start: 2 }, 400, 'invalid_json'],
    ['{', 400, 'invalid_json'],
    [{ ...tail, start: 'two' }, 400, 'out_of_range'],
    [{ ...tail, start: '101' }, 400, 'invalid_segment'],
    [{ ...tail, start: '0' }, 400, 'invalid_segment'],
    [{ ...tail, requestId: '' }, 400, 'invalid_request_id'],
    [{ ...tail, requestId: 'x'.repeat(129) }, 400, 'invalid_request_id'],
  ]) {
    await refused(await giveBack(svc, 'refuse', body, k), status, code);
  }
  await refused(await giveBack(svc, 'no-such-tag', tail, k), 404, 'not_found');
  await refused(await giveBack(svc, 'refuse-mono', tail, k), 409, 'monotonic_tag');
  assert.equal(await maxId(svc, 'refuse'), 100n, 'nothing moved');
  assert.deepEqual(await ok(await giveBack(svc, 'refuse', tail, k)), { taken: true }, 'the holder still can');
  assert.equal(await maxId(svc, 'refuse'), 100n, 'credited: max_id stays');
});

test('a key that hands back IDs it used (a bug, a crash, a restored snapshot, or hostile) can repeat them only within its own key: another key never receives them', async () => {
  await put(svc, 'liar', { step: 100 });
  const [liar, honest] = [await key(svc, 'liar'), await key(svc, 'honest')];
  const r = await ok(await lease(svc, 'liar', { step: 100, requestId: 'used' }, liar));
  assert.deepEqual([r.start, r.end], ['1', '100']);
  // It used all of 1..=100, and says it used none.
  assert.deepEqual(await ok(await giveBack(svc, 'liar', { requestId: 'used', start: '1', end: '100' }, liar)), { taken: true });
  assert.equal(await maxId(svc, 'liar'), 100n, 'max_id never moves back for a client');
  // Another key: above every ID the liar held.
  const theirs = await ok(await lease(svc, 'liar', { step: 100 }, honest));
  assert.deepEqual([theirs.start, theirs.end], ['101', '200']);
  const g = client(svc, honest).c.segment('liar', { step: 100 });
  assert.ok((await g.nextIds(150)).every((id) => id > 100n), 'no ID of the liar\'s range');
  // The liar itself gets its own IDs again: a repeat within its own key only.
  assert.equal((await ok(await lease(svc, 'liar', { step: 100 }, liar))).start, '1');
});

test('credits are bounded per key: beyond 8, a tail stays a gap (taken: false)', async () => {
  await put(svc, 'bounded', { step: 10 });
  const k = await key(svc, 'bounded');
  const answers = [];
  for (let i = 0; i < 10; i++) await ok(await lease(svc, 'bounded', { step: 10, requestId: `r${i}` }, k));
  for (let i = 0; i < 10; i++) {
    answers.push((await ok(await giveBack(svc, 'bounded', { requestId: `r${i}`, start: String(i * 10 + 10), end: String(i * 10 + 10) }, k))).taken);
  }
  assert.deepEqual(answers, [...Array(8).fill(true), false, false]);
  assert.equal(await maxId(svc, 'bounded'), 100n);
  // The key's next leases take its credits, lowest first.
  assert.deepEqual((await ok(await lease(svc, 'bounded', { step: 10 }, k))), { start: '10', end: '10', step: 1, minStep: 10 });
  assert.equal((await ok(await lease(svc, 'bounded', { step: 10 }, k))).start, '20');
});

test('two clients of one key: one closes, the other (holding IDs above the credit) goes on with new IDs, never refused; a new client of the key takes the credit', async () => {
  await put(svc, 'siblings', { step: 100 });
  const k = await key(svc, 'siblings');
  const a = client(svc, k).c.segment('siblings', { step: 100, maxStep: 100 });
  const b = client(svc, k).c.segment('siblings', { step: 100, maxStep: 100 });
  const seen = new Set();
  const take = (ids) => { for (const id of ids) { assert.ok(!seen.has(id), `${id} twice`); seen.add(id); } };
  take(await a.nextIds(5)); // from 1
  take(await b.nextIds(5)); // above A's ranges
  const closed = await a.close();
  assert.ok(closed.length > 0 && closed.every((r) => r.taken), JSON.stringify(closed, (_, v) => String(v)));
  const credited = (id) => closed.some((r) => id >= r.start && id <= r.end);
  // B's next leases say what it holds: credits below it are left for another client of the key.
  const more = await b.nextIds(400);
  take(more);
  assert.ok(!more.some(credited), 'B never refused nor answered a credit below what it held');
  const c = client(svc, k).c.segment('siblings', { step: 100, maxStep: 100 });
  assert.equal(await c.next(), 6n, 'a new client of the key goes on at its credit');
  // `after` is checked: a typed 400.
  await refused(await lease(svc, 'siblings', { step: 100, after: 'x' }, k), 400, 'out_of_range');
  await refused(await lease(svc, 'siblings', { step: 100, after: 5 }, k), 400, 'invalid_json');
});
