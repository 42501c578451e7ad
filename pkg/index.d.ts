// Types of the edgeleaf npm package. IDs are `bigint` everywhere (a JS number
// is exact only below 2^53); they are accepted as bigint, safe integer or
// decimal string.

/** Every `code` an edgeleaf `Error` can carry. */
export type ErrorCode =
  | 'generator_closed'
  | 'sync_compile_refused'
  | 'not_initialized'
  | 'invalid_dump'
  | 'import_conflict'
  | 'invalid_option'
  | 'invalid_argument'
  | 'invalid_clock'
  | 'invalid_id'
  | 'invalid_key'
  | 'out_of_range'
  | 'layout_too_wide'
  | 'layout_expired'
  | 'id_out_of_layout'
  | 'clock_before_epoch'
  | 'clock_moved_backwards'
  | 'clock_behind'
  | 'save_pending'
  | 'sequence_exhausted'
  | 'invalid_segment'
  | 'segment_overlap'
  | 'segment_buffer_full'
  | 'segment_fetch_failed'
  | 'random_unavailable'
  | 'internal'
  // From the service, through EdgeleafClient:
  | 'not_found'
  | 'unauthorized'
  | 'forbidden'
  | 'method_not_allowed'
  | 'invalid_json'
  | 'body_too_large'
  | 'invalid_request_id'
  | 'request_id_reused'
  | 'request_id_needs_key'
  | 'tag_changed'
  | 'invalid_region'
  | 'monotonic_tag'
  | 'monotonic_immutable'
  | 'not_monotonic'
  | 'opaque_tag'
  | 'not_opaque'
  | 'opaque_immutable'
  | 'tag_exhausted'
  | 'store_unavailable'
  | 'store_error'
  | 'config_invalid'
  | 'no_free_worker_id'
  | 'lease_not_held'
  | 'not_lease_holder'
  | 'clock_skew'
  | 'clock_behind_last_report'
  | 'reserved_node_key'
  | 'reserved_worker_id'
  | 'invalid_batch'
  | 'invalid_key_spec'
  | 'worker_id_limit'
  | 'http_error'
  // From EdgeleafClient itself:
  | 'service_unreachable'
  | 'registry_unreachable'
  | 'lease_lost'
  | 'lease_expired'
  // From edgeleaf/file-store:
  | 'store_locked';

/** The errors edgeleaf throws: plain `Error`s with a `code`. */
export interface EdgeleafError extends Error {
  code: ErrorCode;
  /** On `sequence_exhausted` and `clock_behind`: call again after this many ms. */
  retryAfterMs?: number;
  /** On a failed `nextIds(n)`: the IDs that were generated before it stopped. */
  ids?: BigUint64Array;
  /** On errors the service answered: its HTTP status. */
  status?: number;
}

/** An ID as callers may pass it. */
export type IdLike = bigint | number | string;

/** A custom bit layout: widths add up to at most 63. */
export interface CustomLayout {
  timestampBits: number;
  workerBits: number;
  sequenceBits: number;
  /** Unix ms; default Leaf's 1288834974657. */
  epoch?: number;
  /** Milliseconds per timestamp unit, 1..=3600000; default 1. */
  unitMs?: number;
}

/** `'leaf'` (41/10/12, default), `'jsSafe'` (38/7/8 in 10 ms units, IDs < 2^53), or custom. */
export type LayoutOption = 'leaf' | 'jsSafe' | CustomLayout;

export interface LayoutOptions {
  layout?: LayoutOption;
  /** Overrides the layout's epoch: Unix ms or a Date. */
  epoch?: number | Date;
}

export interface LayoutInfo {
  timestampBits: number;
  workerBits: number;
  sequenceBits: number;
  epoch: number;
  unitMs: number;
  /** The last instant (Unix ms) the layout can encode; later, generation fails with `layout_expired`. */
  expiresAt: number;
  maxWorkerId: number;
  maxSequence: number;
  maxId: bigint;
}

export interface SnowflakeOptions extends LayoutOptions {
  /** 0..=layout.maxWorkerId. */
  workerId: number;
  /** A clock that went back at most this far makes calls wait (`clock_behind`); further, `clock_moved_backwards`. Default 5. */
  maxBackwardMs?: number;
  /** Each time unit's sequence starts at a random value below this (0: always 0). Default 100 (Leaf). */
  sequenceStartBound?: number;
  /** When a unit's sequence runs out, issue from up to this many ms ahead of the clock instead of waiting. Default 2 (absorbs late timers; 0 never runs ahead). */
  maxBorrowMs?: number;
  /** Issue only from time units after this instant (Unix ms): a persisted last timestamp. */
  resumeAfter?: number;
  /** The clock, Unix ms. Default `Date.now`. */
  now?: () => number;
}

export interface Parts {
  /** Unix ms at the start of the ID's time unit. */
  timestamp: number;
  workerId: number;
  sequence: number;
}

export interface DecomposedId extends Parts {
  /** A new Date of `timestamp` at each read (included by `JSON.stringify`). */
  readonly date: Date;
}

export declare class Snowflake {
  /** @throws {EdgeleafError} `invalid_option`, `out_of_range`, `layout_too_wide`, `random_unavailable` */
  constructor(options: SnowflakeOptions);
  /** The next ID. Never waits: throws `sequence_exhausted` / `clock_behind` (with `retryAfterMs`), or `clock_moved_backwards`, `layout_expired`, `invalid_clock`. */
  nextId(): bigint;
  /** `nextId()` as a decimal string, for JSON. */
  nextIdString(): string;
  /** `n` IDs (1..=1,000,000) in one call; throws like `nextId()` if they can't all be had now (the error's `ids` has those that were). */
  nextIds(n: number): BigUint64Array;
  /** The next ID, awaiting a timer when the sequence ran out or the clock went back a little. */
  next(): Promise<bigint>;
  /** `n` IDs, awaiting across time units as needed. */
  nextIdsAsync(n: number): Promise<BigUint64Array>;
  /** The parts of an ID under this generator's layout. @throws `invalid_id`, `id_out_of_layout` */
  decompose(id: IdLike): DecomposedId;
  readonly layout: LayoutInfo;
  readonly workerId: number;
  /** The last issued ID's time unit (Unix ms) and sequence: persist `lastMs` to restart safely. */
  state(): { lastMs: number; sequence: number };
  /** An ID from its parts. @throws `out_of_range`, `clock_before_epoch`, `layout_expired`, `invalid_argument` */
  static compose(parts: { timestamp: number | Date; workerId: number; sequence: number }, layout?: LayoutOptions): bigint;
  /** The parts of an ID under a layout (default Leaf's). */
  static decompose(id: IdLike, layout?: LayoutOptions): DecomposedId;
}

/** A range of IDs, `start..=end`, as a store hands it out. */
export interface SegmentRange {
  start: IdLike;
  end: IdLike;
}

export interface SegmentGeneratorOptions {
  /** 1–128 characters of `[A-Za-z0-9._:-]`. */
  tag: string;
  /** Fetches the next range of about `step` IDs for `tag` (inclusive bounds, above every range before). */
  fetchSegment: (tag: string, step: number) => Promise<SegmentRange>;
  /** The configured (minimum) step, 1..=1,000,000. Default 1000. */
  step?: number;
  /** Cap for the dynamic step. Default 1,000,000. */
  maxStep?: number;
  /** Leaf's target segment duration: shorter doubles the step, over twice as long halves it. Default 900000 (15 min). */
  segmentDurationMs?: number;
  /** Load the next segment once this share (0..=100) of the current one is used. Default 10. */
  prefetchPercent?: number;
  /** The clock, Unix ms (for the dynamic step). Default `Date.now`. */
  now?: () => number;
  /** Hand out opaque IDs: each counter from `fetchSegment` goes through `OpaqueIds` with this key and domain (ranges must stay inside it). */
  opaque?: OpaqueOptions;
  /** Called by `close()` with each loaded range's unused tail (`end`: the range's end), last first; any answer but `{ taken: true }` (`{ taken: false }`, a throw, or nothing) stops the ones before it. */
  returnSegment?: (tag: string, tail: { start: bigint; end: bigint }) => Promise<{ taken: boolean } | void>;
}

/** A range `close()` offered back: `taken` as `returnSegment` answered. */
export interface ReturnedRange {
  start: bigint;
  end: bigint;
  taken: boolean;
}

export interface SegmentView {
  /** The next ID this segment will hand out. */
  value: bigint;
  /** Its last ID. */
  max: bigint;
  step: number;
}

/** Leaf's cache view of a double buffer. */
export interface SegmentSnapshot {
  initialized: boolean;
  currentPos: 0 | 1;
  nextReady: boolean;
  loading: boolean;
  step: number;
  segments: [SegmentView | null, SegmentView | null];
}

export declare class SegmentGenerator {
  /** @throws {EdgeleafError} `invalid_option`, `invalid_key`, `out_of_range` */
  constructor(options: SegmentGeneratorOptions);
  readonly tag: string;
  /** An ID if one is in memory, else `undefined` (a load is then under way). Never waits. */
  tryNext(): bigint | undefined;
  /** The next ID; awaits the store only when both buffers are empty. Rejects with `segment_fetch_failed`, `invalid_segment`, `segment_overlap`. */
  next(): Promise<bigint>;
  /** `n` IDs (1..=1,000,000), across segments. */
  nextIds(n: number): Promise<BigUint64Array>;
  /** Loads the first segment before the first request. */
  warmUp(): Promise<void>;
  /** Stops issuing (later calls throw `generator_closed`) and hands each range's unused tail back through `returnSegment`, last first. Idempotent. */
  close(): Promise<ReturnedRange[]>;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  snapshot(): SegmentSnapshot;
}

/** The client over HTTP. */
export interface EdgeleafHttpOptions {
  /** The service, e.g. `http://127.0.0.1:8787`. */
  url: string;
  /** Bearer token: an API key (`elk_…`) with the `ids` scope for segment(), the `registry` scope for snowflake(); or the client token for segment(). */
  token?: string;
  /** A fetch implementation (default `globalThis.fetch`). */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  binding?: never;
}

/** The client inside a Worker of the same account, over a service binding to edgeleaf's `Ids` entrypoint (no token). */
export interface EdgeleafBindingOptions {
  /** The binding, e.g. `env.IDS` (wrangler: `services = [{ binding = "IDS", service = "edgeleaf", entrypoint = "Ids" }]`). */
  binding: EdgeleafBinding;
  url?: never;
  token?: never;
  fetch?: never;
}

export type EdgeleafClientOptions = EdgeleafHttpOptions | EdgeleafBindingOptions;

/** A refusal or failure the binding answers instead of a value: the HTTP route's error body, its status, and when to retry. */
export interface BindingError {
  error: { code: ErrorCode; message: string };
  status: number;
  retryAfterMs?: number | null;
}

/** What one call of the binding answers: the value, as the HTTP route's JSON body, or a `BindingError`. */
export type BindingAnswer<T> = Promise<T | BindingError>;

/** A segment leased for a client (decimal bounds). */
export interface LeasedRange {
  start: string;
  end: string;
  step: number;
  [field: string]: unknown;
}

/** A snowflake worker ID leased for a node (with its secret: the leaser's alone). */
export interface WorkerLease {
  workerId: number;
  generation: number;
  expiresAtMs: number;
  ttlMs: number;
  [field: string]: unknown;
}

/**
 * edgeleaf's RPC entrypoint `Ids`, as a service binding shows it to the calling Worker. Each call answers what the HTTP
 * route answers (IDs as decimal strings), or a `BindingError`; which tags it may name is the serving Worker's
 * `RPC_TAGS` (none by default: every call answers `forbidden`), which it may reveal `RPC_REVEAL`.
 */
export interface EdgeleafBinding {
  /** `count` (1..=1000) IDs of the tag's segments, as `GET /v1/segment/{tag}`. */
  segment(tag: string, count?: number): BindingAnswer<{ ids: string[] }>;
  /** `count` (1..=1000) snowflake IDs, as `GET /v1/snowflake`. */
  snowflake(count?: number): BindingAnswer<{ ids: string[] }>;
  /** A whole segment for a client to serve, as `POST /v1/segment/{tag}/lease`. */
  segmentLease(tag: string, body?: { step?: number; requestId?: string; after?: string }): BindingAnswer<LeasedRange>;
  /** The unused tail of a leased segment handed back, as `POST /v1/segment/{tag}/lease/return`. */
  segmentReturn(tag: string, body: { requestId: string; start: string; end: string }): BindingAnswer<{ taken: boolean }>;
  /** The parts of a snowflake ID, as `GET /v1/snowflake/{id}`. */
  decode(id: IdLike): BindingAnswer<{ id: string; timestamp: number; workerId: number; sequence: number; date: string }>;
  /** The counter of an opaque tag's ID (tags in `RPC_REVEAL` only), as `POST /v1/tags/{tag}/reveal`. */
  reveal(tag: string, id: IdLike): BindingAnswer<{ id: string; counter: string | null; belongs: boolean }>;
  /** A worker ID for a node, as `POST /v1/workers/lease`. */
  workerLease(body: { nodeKey: string; nodeTime: number; previous?: unknown }): BindingAnswer<WorkerLease>;
  /** Renews a worker-ID lease, as `POST /v1/workers/{id}/renew`. */
  workerRenew(workerId: number, body: { generation: number; secret?: string; nodeTime?: number; lastTimestamp?: number }): BindingAnswer<WorkerLease>;
  /** Releases a worker-ID lease, as `DELETE /v1/workers/{id}`. */
  workerRelease(workerId: number, body: { generation: number; secret?: string; nodeTime?: number; lastTimestamp?: number }): BindingAnswer<unknown>;
}

/** An opaque ID domain: IDs below 2^bits (32..=63; 53 keeps them exact as JS numbers), or of at most `digits` decimal digits (6..=18). */
export type OpaqueDomain = { bits: number } | { digits: number };

/** A key (16 bytes, or 32 hex digits) and a domain. */
export type OpaqueOptions = OpaqueDomain & { key: Uint8Array | string };

/**
 * IDs that reveal neither order nor volume: a keyed permutation (a Feistel network over SipHash-2-4 in FF1's
 * shape) of the domain, so distinct counters always give distinct IDs. IDs are bigint even for `bits <= 53`
 * (one type for every domain; `Number(id)` is exact there). Not a signature: anyone may guess an ID in the domain.
 */
export declare class OpaqueIds {
  constructor(options: OpaqueOptions);
  /** The ID of counter `n` (1..=maxId). */
  encode(n: IdLike): bigint;
  /** The counter of `id`. */
  decode(id: IdLike): bigint;
  /** The largest ID (and counter). */
  readonly maxId: bigint;
  /** A new 128-bit key from crypto.getRandomValues. */
  static generateKey(): Uint8Array;
}

/** What a LeasedSnowflake saves to its store (Leaf's local cache, with the fix: the last timestamp, reserved ahead). */
export interface LeaseState {
  nodeKey: string;
  /** Unix ms no ID of this node goes past: a reservation ~3 s ahead while it holds a lease, the exact last timestamp after `close()`. */
  lastTimestamp: number;
  /** The last grant (absent before the first one). */
  workerId?: number;
  generation?: number;
  expiresAtMs?: number;
  ttlMs?: number;
  layout?: CustomLayout;
}

export interface LeaseStore {
  load(): Promise<LeaseState | undefined>;
  save(state: LeaseState): Promise<void>;
  /** If present, `snowflake()` calls it when it fails after `load()` (so a retry may load again). */
  close?(): Promise<void>;
}

export interface LeasedSnowflakeOptions {
  /** This node's key in the registry, 1–128 of `[A-Za-z0-9._:-]`; default random. */
  nodeKey?: string;
  store?: LeaseStore;
  now?: () => number;
}

/**
 * A Snowflake under a worker ID leased from the service; throws `lease_lost` / `lease_expired` once the lease is gone.
 * With a store, `nextId()` may throw `save_pending` (with `retryAfterMs`) if the store has not saved a new reservation
 * in time (a save is due about every second; `next()` waits for it).
 */
export declare class LeasedSnowflake {
  nextId(): bigint;
  nextIdString(): string;
  nextIds(n: number): BigUint64Array;
  next(): Promise<bigint>;
  decompose(id: IdLike): DecomposedId;
  readonly workerId: number;
  readonly layout: LayoutInfo;
  readonly lease: { workerId: number; generation: number; expiresAtMs: number; ttlMs: number; nodeKey: string };
  /** Renews now (it also renews itself at half the TTL). */
  renew(): Promise<void>;
  /** Stops renewing and releases the worker ID. */
  close(): Promise<void>;
}

/** A client of the edgeleaf service. */
export declare class EdgeleafClient {
  constructor(options: EdgeleafClientOptions);
  /** A SegmentGenerator fed by the service's segment leases (IDs generated in this process); with an API key, its `close()` hands unused tails back. */
  segment(tag: string, options?: Omit<SegmentGeneratorOptions, 'tag' | 'fetchSegment' | 'returnSegment'>): SegmentGenerator;
  /** Leases a worker ID from the registry (a key with the `registry` scope; at most MAX_WORKERS_PER_KEY live per key: 429 `worker_id_limit`). */
  snowflake(options?: LeasedSnowflakeOptions): Promise<LeasedSnowflake>;
  /** One JSON request to the service (through a binding: the ID operations only, else `invalid_argument`). */
  request(method: string, path: string, body?: unknown): Promise<any>;
}

/** The facts of a layout (default Leaf's). */
export declare function layoutInfo(layout?: LayoutOptions): LayoutInfo;

/** Where a tag moved from Leaf continues on the service (`edgeleaf import-leaf`). */
export interface LeafContinuation {
  /** `create` (no such tag), `raise` (it never allotted an ID), `unchanged` (at or above the target), or `conflict`. */
  action: 'create' | 'raise' | 'unchanged' | 'conflict';
  /** The margin above Leaf's max_id (by default two of Leaf's largest segment loads). */
  margin: bigint;
  /** Leaf's max_id + margin: the tag's maxId (its next ID is one above). */
  targetMaxId?: bigint;
  /** Why not: past the last ID, past 2^62 unforced (a short runway), an opaque tag, or IDs the service allotted below the target. */
  conflict?: 'past_last_id' | 'short_runway' | 'opaque' | 'allotted';
}
/** Decides where a tag moved from Leaf's `leaf_alloc` row continues, given the service's tag (null: none). */
export declare function continueAfterLeaf(
  leafMaxId: bigint | number | string,
  leafStep: number,
  options?: { margin?: bigint | number | string; service?: { maxId: bigint | number | string; opaque?: boolean } | null; force?: boolean },
): LeafContinuation;
/** Makes an `Error` with a `code`, as edgeleaf's own. */
export declare function codedError(code: string, message: string, fields?: object): EdgeleafError;
/** The most IDs one call (`nextIds`, `nextIdsAsync`, a segment's `next`) returns: 1,000,000. */
export declare const MAX_IDS_PER_CALL: number;
