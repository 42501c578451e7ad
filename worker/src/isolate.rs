//! What one Worker isolate keeps in memory between requests: a segment double
//! buffer per tag (fed from the tag's Durable Object), its leased snowflake
//! generator, and counters for `/v1/monitor`.
//!
//! Requests interleave at every await, so state is borrowed only between
//! awaits. A request may not await I/O that another request started (Workers
//! refuse it), so a load is done by the request that needs it; others that
//! find one in flight await short timers and look again. A load marked in
//! flight for longer than `TAKE_OVER_MS` (its request was cancelled) is taken
//! over.

use std::cell::RefCell;
use std::collections::BTreeMap;

use edgeleaf::{
    Lease, SegmentBuffer, SegmentSnapshot, SnowflakeConfig, SnowflakeGenerator, SplitMix64,
    StepPolicy, Wait,
};
use futures::future::{FutureExt, LocalBoxFuture};
use serde::Serialize;
use serde_json::json;
use worker::{Context, Env, Method};

use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, random_u64, sleep_ms};
use crate::config::Config;
use crate::registry_store::{LeaseRequest, Previous, RenewRequest};
use crate::stores::{call, Store};
use crate::tag_store::{AllocateRequest, SegmentLease};

/// Longest a request waits for the snowflake sequence or a slightly slow clock.
const MAX_WAIT_MS: u64 = 1000;
/// Longest a request waits for another request's load before answering 503.
const MAX_LOAD_WAIT_MS: u64 = 5000;
/// A load in flight this long is presumed lost with its request.
const TAKE_OVER_MS: u64 = 3000;
/// How often a waiting request looks again.
const POLL_MS: u64 = 2;

#[derive(Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    pub segment_ids: u64,
    pub snowflake_ids: u64,
    pub refills: u64,
    pub refills_that_blocked: u64,
    pub store_calls: u64,
    pub errors: u64,
}

#[derive(Default)]
struct TagState {
    buffer: Option<SegmentBuffer>,
    /// When the load in flight started (registry of in-flight work, not I/O).
    loading_since: Option<u64>,
    monotonic: bool,
}

/// Claims the right to start work marked by `since`: true when none is in
/// flight or the one in flight is presumed lost.
fn claim(since: &mut Option<u64>, now: u64) -> bool {
    match *since {
        Some(t) if now.saturating_sub(t) < TAKE_OVER_MS => false,
        _ => {
            *since = Some(now);
            true
        }
    }
}

struct Leased {
    gen: SnowflakeGenerator<SplitMix64>,
    lease: Lease,
    renew_at_ms: u64,
    renewing: bool,
}

#[derive(Default)]
struct Isolate {
    tags: BTreeMap<String, TagState>,
    snowflake: Option<Leased>,
    leasing_since: Option<u64>,
    node_key: Option<String>,
    /// The last grant, to ask for the same worker ID again; and the last
    /// timestamp issued under any grant, to resume after it.
    previous: Option<Previous>,
    last_issued_ms: u64,
    counters: Counters,
    started_ms: u64,
}

thread_local! {
    static ISOLATE: RefCell<Isolate> = RefCell::new(Isolate::default());
}

fn with<T>(f: impl FnOnce(&mut Isolate) -> T) -> T {
    ISOLATE.with(|i| f(&mut i.borrow_mut()))
}

/// Counts an error answered by this isolate.
pub fn count_error() {
    with(|i| i.counters.errors += 1);
}

// ---------------------------------------------------------------- segments

enum Step {
    Done,
    Monotonic,
    LoadNow,
    Wait,
}

/// Loads the next segment of `tag` from its Durable Object into this
/// isolate's buffer. Runs in the context of the request that claimed it.
async fn load_segment(env: Env, tag: String) -> ApiResult<()> {
    let step = with(|i| {
        i.counters.store_calls += 1;
        i.tags
            .get(&tag)
            .and_then(|t| t.buffer.as_ref())
            .map(|b| b.step_for_next_load(now_ms()))
    });
    let answer: ApiResult<SegmentLease> = call(
        &env,
        Store::Tag(&tag),
        Method::Post,
        "/allocate",
        Some(&AllocateRequest {
            step,
            request_id: None,
        }),
    )
    .await;
    with(|i| {
        let t = i.tags.entry(tag.clone()).or_default();
        t.loading_since = None;
        let installed = answer.and_then(|lease| {
            let alloc = lease.allocation()?;
            let buf = match t.buffer.as_mut() {
                Some(b) => b,
                None => t
                    .buffer
                    .insert(SegmentBuffer::new(StepPolicy::new(lease.min_step)?)),
            };
            Ok(buf.load(alloc, now_ms())?)
        });
        match installed {
            Ok(()) => i.counters.refills += 1,
            Err(e) => {
                if e.code == "monotonic_tag" {
                    t.monotonic = true;
                }
                if let Some(b) = t.buffer.as_mut() {
                    b.load_failed();
                }
                if e.status == 404 {
                    // Unknown (or deleted) tag: keep no state for it, so
                    // made-up names cannot grow this map.
                    i.tags.remove(&tag);
                }
                return Err(e);
            }
        }
        Ok(())
    })
}

/// `count` segment-mode IDs of `tag`, from this isolate's buffer; waits for
/// the store only when the buffer is empty.
pub async fn segment_ids(env: &Env, ctx: &Context, tag: &str, count: usize) -> ApiResult<Vec<u64>> {
    let mut out = vec![0u64; count];
    let mut filled = 0;
    let mut waited = 0;
    loop {
        let now = now_ms();
        let step = with(|i| {
            let t = i.tags.entry(tag.to_owned()).or_default();
            if t.monotonic {
                return Step::Monotonic;
            }
            let mut wants_load = false;
            if let Some(buf) = t.buffer.as_mut() {
                let take = buf.take(&mut out[filled..]);
                filled += take.filled;
                wants_load = take.load;
            }
            if filled == out.len() {
                if wants_load && claim(&mut t.loading_since, now) {
                    // Prefetch at 10%: in the background of this request.
                    ctx.wait_until(load_segment(env.clone(), tag.to_owned()).map(|_| ()));
                }
                return Step::Done;
            }
            // Both halves empty (or never loaded): this request must wait.
            if claim(&mut t.loading_since, now) {
                i.counters.refills_that_blocked += 1;
                Step::LoadNow
            } else {
                Step::Wait
            }
        });
        match step {
            Step::Done => {
                with(|i| i.counters.segment_ids += out.len() as u64);
                return Ok(out);
            }
            Step::Monotonic => return monotonic_ids(env, tag, count).await,
            Step::LoadNow => {
                if let Err(e) = load_segment(env.clone(), tag.to_owned()).await {
                    if e.code != "monotonic_tag" {
                        return Err(e);
                    }
                }
            }
            Step::Wait => {
                waited += POLL_MS;
                if waited > MAX_LOAD_WAIT_MS {
                    return Err(ApiError::unavailable("store_unavailable", format!("segment {tag}: expected a segment within {MAX_LOAD_WAIT_MS} ms, found none"), 1000));
                }
                sleep_ms(POLL_MS).await;
            }
        }
    }
}

async fn monotonic_ids(env: &Env, tag: &str, count: usize) -> ApiResult<Vec<u64>> {
    #[derive(serde::Deserialize)]
    struct Ids {
        ids: Vec<String>,
    }
    with(|i| i.counters.store_calls += 1);
    let ids: Ids = call(
        env,
        Store::Tag(tag),
        Method::Post,
        "/ids",
        Some(&json!({ "count": count })),
    )
    .await?;
    let ids = ids
        .ids
        .iter()
        .map(|s| {
            s.parse()
                .map_err(|_| ApiError::unavailable("store_error", "store: bad ID", 1000))
        })
        .collect::<ApiResult<Vec<u64>>>()?;
    with(|i| i.counters.segment_ids += ids.len() as u64);
    Ok(ids)
}

/// Forgets a deleted tag's buffer.
pub fn forget_tag(tag: &str) {
    with(|i| i.tags.remove(tag));
}

// ---------------------------------------------------------------- snowflake

/// Leases a worker ID for this isolate from the registry. Runs in the
/// context of the request that claimed it.
async fn lease_worker_id(env: &Env, config: &Config) -> ApiResult<()> {
    let (node_key, previous) = with(|i| {
        i.counters.store_calls += 1;
        let key = i
            .node_key
            .get_or_insert_with(|| format!("isolate-{:016x}", random_u64()))
            .clone();
        (key, i.previous)
    });
    let request = LeaseRequest {
        node_key,
        node_time: now_ms(),
        previous,
    };
    let answer: ApiResult<Lease> =
        call(env, Store::Registry, Method::Post, "/lease", Some(&request)).await;
    with(|i| {
        i.leasing_since = None;
        let lease = answer?;
        let mut cfg = SnowflakeConfig::new(config.layout, lease.worker_id);
        cfg.max_backward_ms = config.max_backward_ms;
        // Issue only after everything earlier holders of this worker ID
        // (and this isolate) may have issued.
        let after = lease
            .issue_after_ms
            .max(i.last_issued_ms)
            .max(config.layout.epoch_ms());
        let gen = SnowflakeGenerator::resume_after(cfg, SplitMix64::new(random_u64()), after)?;
        i.previous = Some(Previous {
            worker_id: lease.worker_id,
            generation: lease.generation,
        });
        let renew_at_ms = now_ms() + lease.ttl_ms / 2;
        i.snowflake = Some(Leased {
            gen,
            lease,
            renew_at_ms,
            renewing: false,
        });
        Ok(())
    })
}

fn start_renewal(
    env: &Env,
    worker_id: u32,
    generation: u64,
    last_timestamp: u64,
) -> LocalBoxFuture<'static, ()> {
    let env = env.clone();
    async move {
        with(|i| i.counters.store_calls += 1);
        let request = RenewRequest {
            worker_id,
            generation,
            node_time: now_ms(),
            last_timestamp,
        };
        let answer: ApiResult<Lease> = call(
            &env,
            Store::Registry,
            Method::Post,
            "/renew",
            Some(&request),
        )
        .await;
        with(|i| {
            let Some(l) = i
                .snowflake
                .as_mut()
                .filter(|l| l.lease.generation == generation)
            else {
                return;
            };
            l.renewing = false;
            match answer {
                Ok(lease) => {
                    l.renew_at_ms = now_ms() + lease.ttl_ms / 2;
                    l.lease = lease;
                }
                // Lost or lapsed: stop issuing now; the next request leases again.
                Err(e) if e.status == 409 => i.snowflake = None,
                // The registry is unreachable: try again on a later request;
                // the lease still lapses on time if it never answers.
                Err(_) => {}
            }
        });
    }
    .boxed_local()
}

enum Mint {
    Done,
    LeaseNow,
    Wait(u64),
}

/// `count` snowflake IDs under this isolate's leased worker ID.
pub async fn snowflake_ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    let mut out = vec![0u64; count];
    let mut filled = 0;
    let mut waited = 0;
    loop {
        let now = now_ms();
        let step = with(|i| -> ApiResult<Mint> {
            if i.snowflake
                .as_ref()
                .is_some_and(|l| now >= l.lease.expires_at_ms)
            {
                // The lease lapsed: never mint under it.
                i.snowflake = None;
            }
            let Some(l) = i.snowflake.as_mut() else {
                // Another request may be leasing: then wait a little and look again.
                return Ok(if claim(&mut i.leasing_since, now) {
                    Mint::LeaseNow
                } else {
                    Mint::Wait(POLL_MS)
                });
            };
            let fill = l.gen.fill(now, &mut out[filled..])?;
            filled += fill.filled;
            i.last_issued_ms = i.last_issued_ms.max(l.gen.state().last_ms);
            if now >= l.renew_at_ms && !l.renewing {
                l.renewing = true;
                ctx.wait_until(start_renewal(
                    env,
                    l.lease.worker_id,
                    l.lease.generation,
                    l.gen.state().last_ms,
                ));
            }
            Ok(match fill.retry_after {
                None => Mint::Done,
                Some((ms, Wait::SequenceExhausted | Wait::ClockBehind)) => Mint::Wait(ms),
            })
        })?;
        match step {
            Mint::Done if filled == out.len() => {
                with(|i| i.counters.snowflake_ids += out.len() as u64);
                return Ok(out);
            }
            Mint::Done => {}
            Mint::LeaseNow => lease_worker_id(env, config).await?,
            Mint::Wait(ms) => {
                waited += ms;
                if waited > MAX_WAIT_MS {
                    return Err(ApiError::unavailable("sequence_exhausted", format!("snowflake: expected to mint {count} IDs within {MAX_WAIT_MS} ms, found only {filled}"), ms));
                }
                // Date.now() moves only across I/O and timers: await one.
                sleep_ms(ms).await;
            }
        }
    }
}

/// What `/v1/monitor` shows: Leaf's cache view of every buffer, the
/// snowflake lease, and the counters.
pub fn monitor() -> serde_json::Value {
    with(|i| {
        if i.started_ms == 0 {
            i.started_ms = now_ms();
        }
        let buffers: BTreeMap<&String, serde_json::Value> = i
            .tags
            .iter()
            .map(|(tag, t)| {
                let snap: Option<SegmentSnapshot> = t.buffer.as_ref().map(SegmentBuffer::snapshot);
                let view = snap.map(|s| {
                    json!({
                        "initialized": s.initialized, "currentPos": s.current_pos, "nextReady": s.next_ready,
                        "loading": s.loading, "step": s.step,
                        "segments": s.segments.iter().map(|seg| seg.map(|v| json!({
                            "value": v.value.to_string(), "max": v.max.to_string(), "step": v.step,
                        }))).collect::<Vec<_>>(),
                    })
                });
                (tag, json!({ "monotonic": t.monotonic, "buffer": view }))
            })
            .collect();
        let lease = i.snowflake.as_ref().map(|l| {
            json!({
                "workerId": l.lease.worker_id, "generation": l.lease.generation, "nodeKey": l.lease.node_key,
                "expiresAtMs": l.lease.expires_at_ms, "renewAtMs": l.renew_at_ms,
                "lastIssuedMs": l.gen.state().last_ms,
            })
        });
        json!({ "buffers": buffers, "snowflake": lease, "counters": i.counters, "isolateSinceMs": i.started_ms })
    })
}
