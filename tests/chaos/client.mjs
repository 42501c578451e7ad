// One chaos client process: an EdgeleafClient (the npm package) drawing
// segment IDs from the service's leases, one long-lived leased snowflake and
// a churn of short-lived ones, under a clock the harness steps. Every ID
// issued goes back to the harness (over IPC, every 100 ms) with the worker ID
// and lease generation it was minted under; every refusal goes back by the
// kind of client that met it (clientSegment, clientNode, clientChurn), its
// code, and its HTTP status and Retry-After when it came from an answer.
// `node client.mjs <url> <token> <tag>`, forked by chaos.mjs.
//
// `node client.mjs <url> <token> <tag> shared <nodeKey> <file> <untilMs>`:
// instead, one node of a deployment that shares a store (the sharedStore
// fault): a leased snowflake on `nodeKey` whose store is the JSON file
// `file`, written as a user writes one (read and written whole), minting
// until `untilMs` (Unix ms; `{ t: 'until', at }` moves it), its refusals
// those of kind clientShared; it sends `{ t: 'started' }` with its first IDs.
//
// `node client.mjs <url> <token> <tag> victims <nodeKey,...>`: instead, the
// victims of the poison fault (forked with a registry key of their own): one
// leased snowflake per node key, each restarting all the time (lease, a few
// batches, release), its IDs sent back under "workerId:generation:nodeKey",
// its refusals those of kind clientVictim.
//
// Every answer of the registry is watched at the wire (the client's `fetch`):
// a 409 `clock_skew` goes back with its size (the registry's message: the
// node's clock against its reference) and what the run recorded that could
// explain it — when the request's nodeTime was read and when its answer came
// (a pause of this process falls in between), and this process's clock offset
// then — for the harness to judge by its size, not its kind. Each lease or
// renewal's delay goes back too (an owner's clock average is made of them).
import { readFile, writeFile } from 'node:fs/promises';
import { EdgeleafClient } from 'edgeleaf';

const [url, token, tag, mode, sharedKey, sharedFile, sharedUntil] = process.argv.slice(2);
let offset = 0;
// CHAOS_PLANT=hidden-skew: an offset the harness does not record.
let hidden = 0;
let stopping = false;
const now = () => Date.now() + offset + hidden;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The registry's answers, watched (see the top): `skews` the clock_skew
// refusals, `delays` [answered at, ms since its nodeTime was read] of every
// lease and renewal answered; `renewals` per worker ID its last renewal
// (sent at, answered at or null, refused), for a lease_expired to be judged
// by whether its renewal was late.
let skews = [];
let delays = [];
const renewals = new Map();
const SKEW = /expected within (\d+) ms of (.+?) \((\d+) ms\), found (\d+) ms/;
async function watchedFetch(input, init) {
  const m = /\/v1\/workers\/(?:lease|(\d+)\/renew)$/.exec(new URL(String(input)).pathname);
  if (!m) return fetch(input, init);
  const t0 = Date.now();
  const offset0 = offset;
  let nodeTime;
  try { nodeTime = JSON.parse(init.body).nodeTime; } catch { /* none */ }
  // When its nodeTime was read, by the real clock (a request sent again
  // carries the first one's).
  const read = typeof nodeTime === 'number' ? Math.min(t0, nodeTime - offset0) : t0;
  const renewal = m[1] && { sentAt: t0, answeredAt: null, refused: false };
  if (renewal) renewals.set(Number(m[1]), renewal);
  const res = await fetch(input, init);
  const t1 = Date.now();
  if (renewal) { renewal.answeredAt = t1; renewal.refused = !res.ok; }
  delays.push([t1, t1 - read]);
  if (res.status === 409) {
    let body;
    try { body = await res.clone().json(); } catch { /* judged as it is */ }
    const s = body?.error?.code === 'clock_skew' && SKEW.exec(body.error.message);
    if (body?.error?.code === 'clock_skew') {
      skews.push({
        what: m[1] ? 'renewal' : 'lease', read, answeredAt: t1, offsets: [offset0, offset],
        ...(s ? { maxSkewMs: Number(s[1]), reference: s[2], skewMs: Math.abs(Number(s[4]) - Number(s[3])) } : { message: body.error.message }),
      });
    }
  }
  return res;
}
const client = new EdgeleafClient({ url, token, fetch: watchedFetch });
let seg = [];
let sf = new Map(); // "workerId:generation" → ID strings
let refusals = {}; // "kind code status retry" → count
let messages = {}; // the same key → the first error's message
let untyped = [];

function refused(kind, e, lease) {
  if (typeof e?.code !== 'string') {
    untyped.push(`${kind}: ${String(e?.stack ?? e)}`);
    return;
  }
  // status 0: raised by the package itself (no answer, or its own rule).
  const key = `${kind} ${judged(e, lease)} ${e.status ?? 0} ${e.retryAfterMs > 0 ? 1 : 0}`;
  refusals[key] = (refusals[key] ?? 0) + 1;
  messages[key] ??= String(e.message).slice(0, 300);
}

// A refusal whose cause is judged by its size, not its kind: a clock_skew
// (every one at the wire, above), a lease lost to one, a lease that expired
// while its renewal was on its way or refused.
function judged(e, lease) {
  if (e.code === 'clock_skew') return 'clock_skew(judged)';
  if (e.code === 'lease_lost' && /\(clock_skew\)/.test(e.message)) return 'lease_lost(clock_skew,judged)';
  if (e.code === 'lease_expired' && lease) {
    const r = renewals.get(lease.workerId);
    // Its expiry by the real clock (the holder's clock is offset).
    const expiry = lease.expiresAtMs - offset;
    if (r && r.sentAt < expiry && (r.answeredAt === null || r.answeredAt > expiry - 50 || r.refused)) return 'lease_expired(late-renewal)';
  }
  return e.code;
}

function minted(lease, ids, nodeKey) {
  const key = `${lease.workerId}:${lease.generation}${nodeKey ? `:${nodeKey}` : ''}`;
  const list = sf.get(key) ?? [];
  for (const id of ids) list.push(String(id));
  sf.set(key, list);
}

function flush() {
  const msg = { t: 'ids', seg, sf: [...sf], refusals, messages, untyped, skews, delays };
  skews = [];
  delays = [];
  seg = [];
  sf = new Map();
  refusals = {};
  messages = {};
  untyped = [];
  return new Promise((r) => process.send(msg, r));
}

async function segments() {
  const gen = client.segment(tag);
  while (!stopping) {
    try {
      for (const id of await gen.nextIds(25)) seg.push(String(id));
    } catch (e) {
      refused('clientSegment', e);
      await sleep(50);
    }
    await sleep(5);
  }
}

// `churn`: a new node each time, a few IDs, then released. Otherwise one node
// key kept for the process's life, reopened whenever its lease is gone.
async function leased(churn) {
  const kind = churn ? 'clientChurn' : 'clientNode';
  while (!stopping) {
    let holder;
    try {
      holder = await client.snowflake({ now, ...(churn ? {} : { nodeKey: `chaos-${process.pid}` }) });
    } catch (e) {
      refused(kind, e);
      await sleep(100);
      continue;
    }
    for (let i = 0, errors = 0; !stopping && (!churn || i < 5) && errors < 20; i++) {
      // The lease is read in the same synchronous run as the minting: the
      // generation recorded is the one the IDs were minted under.
      const lease = holder.lease;
      try {
        minted(lease, holder.nextIds(20));
        errors = 0;
      } catch (e) {
        if (e?.ids) minted(lease, e.ids);
        refused(kind, e, lease);
        if (e?.code === 'lease_expired' || e?.code === 'lease_lost') break;
        errors++;
      }
      await sleep(churn ? 20 : 10);
    }
    await holder.close().catch((e) => refused(kind, e));
  }
}

// One node of two sharing a store (mode `shared`). `ended`: why it stopped
// before its time (sent to the harness at the end).
let ended = null;
// When it stops minting (Unix ms): from the command line, moved by the
// harness (`{ t: 'until' }`) once the first of the two has started.
let until = Number(sharedUntil);
async function shared() {
  const store = {
    async load() {
      try { return JSON.parse(await readFile(sharedFile, 'utf8')); } catch (e) { if (e.code === 'ENOENT') return undefined; throw e; }
    },
    async save(state) { await writeFile(sharedFile, JSON.stringify(state)); },
  };
  let holder;
  try {
    holder = await client.snowflake({ nodeKey: sharedKey, store, now });
  } catch (e) {
    refused('clientShared', e);
    ended = `not started: ${typeof e?.code === 'string' ? judged(e) : 'no code'}`;
    return;
  }
  let started = false;
  while (!stopping && Date.now() < until) {
    const lease = holder.lease;
    try {
      minted(lease, holder.nextIds(20));
    } catch (e) {
      if (e?.ids) minted(lease, e.ids);
      refused('clientShared', e, lease);
      if (e?.code === 'lease_expired' || e?.code === 'lease_lost') { ended = judged(e, lease); break; }
    }
    if (!started && sf.size) { started = true; await flush(); process.send({ t: 'started' }); }
    await sleep(5);
  }
  await holder.close().catch((e) => refused('clientShared', e));
}

// One victim node of the poison fault (mode `victims`): it restarts on its
// node key again and again, so a key squatted or a registry poisoned shows
// as a lease refused.
async function victim(nodeKey) {
  while (!stopping) {
    let holder;
    try {
      holder = await client.snowflake({ nodeKey, now });
    } catch (e) {
      refused('clientVictim', e);
      await sleep(100);
      continue;
    }
    for (let i = 0; !stopping && i < 20; i++) {
      const lease = holder.lease;
      try {
        minted(lease, holder.nextIds(5), nodeKey);
      } catch (e) {
        if (e?.ids) minted(lease, e.ids, nodeKey);
        refused('clientVictim', e, lease);
        if (e?.code === 'lease_expired' || e?.code === 'lease_lost') break;
      }
      await sleep(25);
    }
    await holder.close().catch((e) => refused('clientVictim', e));
  }
}

process.on('message', (m) => {
  if (m.t === 'clock') offset = m.offset;
  if (m.t === 'hidden') hidden = m.offset;
  if (m.t === 'until') until = m.at;
  if (m.t === 'stop') stopping = true;
});

const timer = setInterval(flush, 100);
await (mode === 'shared' ? shared()
  : mode === 'victims' ? Promise.all(sharedKey.split(',').map(victim))
    : Promise.all([segments(), leased(false), leased(true)]));
clearInterval(timer);
await flush();
if (mode === 'shared') await new Promise((r) => process.send({ t: 'ended', why: ended }, r));
process.disconnect();
