// Compiled by `tsc --noEmit` in make test: the declarations must accept what
// the README shows and reject what the code rejects.
import { Snowflake, SegmentGenerator, EdgeleafClient, layoutInfo, type EdgeleafError, type SegmentSnapshot, type LeasedSnowflake, type ReturnedRange, type EdgeleafBinding } from 'edgeleaf';

const s = new Snowflake({ workerId: 1, layout: 'jsSafe', epoch: new Date('2024-01-01'), now: () => Date.now() });
const id: bigint = s.nextId();
const str: string = s.nextIdString();
const batch: BigUint64Array = s.nextIds(10);
const later: Promise<bigint> = s.next();
const parts = s.decompose(id);
const when: Date = parts.date;
const expires: number = s.layout.expiresAt;
const maxId: bigint = layoutInfo({ layout: 'leaf' }).maxId;
const again: bigint = Snowflake.compose({ timestamp: parts.timestamp, workerId: parts.workerId, sequence: parts.sequence });
Snowflake.decompose('123456789', { layout: { timestampBits: 41, workerBits: 10, sequenceBits: 12 } });

try {
  s.nextId();
} catch (e) {
  const err = e as EdgeleafError;
  if (err.code === 'sequence_exhausted') console.log(err.retryAfterMs);
}

const g = new SegmentGenerator({
  tag: 'order',
  step: 1000,
  fetchSegment: async (tag: string, step: number) => ({ start: 1n, end: BigInt(step) }),
});
const maybe: bigint | undefined = g.tryNext();
const next: Promise<bigint> = g.next();
const snap: SegmentSnapshot = g.snapshot();
const pos: 0 | 1 = snap.currentPos;

const client = new EdgeleafClient({ url: 'http://127.0.0.1:8787', token: 'dev-admin-token' });
const orders: SegmentGenerator = client.segment('order', { step: 1000 });
const leased: Promise<LeasedSnowflake> = client.snowflake({ nodeKey: 'host-1:8080' });
leased.then(async (sf) => { const x: bigint = sf.nextId(); await sf.close(); return x; });
export { orders };
const closing = new SegmentGenerator({
  tag: 'job',
  fetchSegment: async (tag: string, step: number) => ({ start: 1n, end: BigInt(step) }),
  returnSegment: async (tag: string, tail: { start: bigint; end: bigint }) => ({ taken: tail.start <= tail.end }),
});
const back: Promise<ReturnedRange[]> = closing.close();
const isClosed: boolean = closing.closed;
export { back, isClosed };
// @ts-expect-error the client hands tails back itself
client.segment('order', { returnSegment: async () => ({ taken: true }) });

// @ts-expect-error workerId is required
new Snowflake({});
// @ts-expect-error IDs are bigint, not number
const wrong: number = s.nextId();
// @ts-expect-error no such layout
new Snowflake({ workerId: 1, layout: 'twitter' });

export { str, batch, later, when, expires, maxId, again, maybe, next, pos, wrong };

// A Worker's service binding to edgeleaf's `Ids` entrypoint (docs/service.md).
declare const env: { IDS: EdgeleafBinding };
const bound = new EdgeleafClient({ binding: env.IDS });
const boundOrders: SegmentGenerator = bound.segment('order');
const boundFlake: Promise<LeasedSnowflake> = bound.snowflake();
async function direct(): Promise<string[]> {
  const answer = await env.IDS.segment('order', 10);
  if ('error' in answer) throw new Error(`${answer.error.code}: ${answer.error.message} (${answer.status})`);
  return answer.ids;
}
// @ts-expect-error a binding takes no token
new EdgeleafClient({ binding: env.IDS, token: 'x' });
// @ts-expect-error a binding or a URL, not both
new EdgeleafClient({ binding: env.IDS, url: 'http://127.0.0.1:8787' });
export { boundOrders, boundFlake, direct };
