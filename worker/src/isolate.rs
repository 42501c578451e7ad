//! What one Worker isolate keeps in memory between requests: a segment driver
//! per tag (fed from the tag's Durable Object), snowflake IDs — a buffer of
//! batches from the minters (`SNOWFLAKE_MINTERS` > 0), or else a holder under
//! a worker ID of its own — and counters for `/v1/monitor`. The rules — when
//! to load and with which step, when to fetch and which batches are stale,
//! when to lease, renew or stop minting — are the core's (`SegmentDriver`,
//! `MintedBuffer`, `SnowflakeHolder`); this file carries their requests to
//! the Durable Objects and their answers back, and runs one wait loop each.
//!
//! Requests interleave at every await, so state is borrowed only between
//! awaits. A request may not await I/O that another request started (Workers
//! refuse it), so a load or lease is done by the request the core asked; the
//! others wait on short timers and poll again.

use std::cell::RefCell;
use std::collections::BTreeMap;

use edgeleaf::{
    code::ErrorCode, driver::SegmentDriver, driver::SegmentStep, holder::HolderConfig,
    holder::HolderNext, holder::LeaseAsk, holder::Renewal, holder::SnowflakeHolder,
    minted::BatchAsk, minted::MintConfig, minted::MintStep, minted::MintedBuffer, minted::Refused,
    opaque::OpaqueIds, rand::SplitMix64, segment::StepPolicy, segment::DEFAULT_SEGMENT_DURATION_MS,
    segment::MAX_STEP, wait::WaitBudget, wait::MAX_WAIT_MS,
};
use futures::future::{self, Either, FutureExt, LocalBoxFuture};
use serde::Serialize;
use serde_json::json;
use worker::{Context, Env, Method};

use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, random_u64, sleep_ms};
use crate::config::Config;
use crate::minter_store::{Batch, MintRequest};
use crate::registry_store::{self, Granted, LeaseRequest, Previous};
use crate::stores::{call, Store};
use crate::tag_store::{AllocateRequest, SegmentLease};

/// Longest a request waits for another request's segment load before answering 503.
const MAX_LOAD_WAIT_MS: u64 = 5000;
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
    pub minter_calls: u64,
    pub errors: u64,
}

pub(crate) struct TagState {
    pub(crate) driver: SegmentDriver,
    pub(crate) monotonic: bool,
    /// An opaque tag's permutation: the driver hands out counters, and
    /// this turns them into the IDs served.
    pub(crate) opaque: Option<OpaqueIds>,
}

impl Default for TagState {
    fn default() -> Self {
        TagState {
            // The floor of the dynamic step is the tag's own step, which the
            // store applies to every request (TagRecord::grant_step).
            driver: SegmentDriver::new(StepPolicy {
                min_step: 1,
                max_step: MAX_STEP,
                duration_ms: DEFAULT_SEGMENT_DURATION_MS,
            }),
            monotonic: false,
            opaque: None,
        }
    }
}

#[derive(Default)]
pub(crate) struct Isolate {
    pub(crate) tags: BTreeMap<String, TagState>,
    pub(crate) snowflake: Option<SnowflakeHolder<SplitMix64>>,
    pub(crate) minted: Option<MintedBuffer>,
    pub(crate) node_key: Option<String>,
    pub(crate) counters: Counters,
    pub(crate) started_ms: u64,
    /// A random name for this isolate (metrics labels, tag histories).
    id: String,
}

thread_local! {
    static ISOLATE: RefCell<Isolate> = RefCell::new(Isolate::default());
}

pub(crate) fn with<T>(f: impl FnOnce(&mut Isolate) -> T) -> T {
    ISOLATE.with(|i| f(&mut i.borrow_mut()))
}

/// This isolate's name: 8 random hex digits, drawn at its first use.
pub fn isolate_id() -> String {
    with(|i| {
        if i.id.is_empty() {
            i.id = format!("{:08x}", random_u64() & 0xffff_ffff);
        }
        i.id.clone()
    })
}

/// Counts an error answered by this isolate.
pub fn count_error() {
    with(|i| i.counters.errors += 1);
}

// ---------------------------------------------------------------- segments

/// Loads a segment of `tag` with `step` from its Durable Object into this
/// isolate's driver. Runs in the context of the request the driver asked.
async fn load_segment(env: Env, tag: String, step: u64) -> ApiResult<()> {
    with(|i| i.counters.store_calls += 1);
    let answer: ApiResult<SegmentLease> = call(
        &env,
        Store::Tag(&tag),
        Method::Post,
        "/allocate",
        Some(&AllocateRequest {
            step: Some(step),
            request_id: None,
            for_isolate: true,
            by: format!("isolate:{}", isolate_id()),
        }),
    )
    .await;
    with(|i| {
        let t = i.tags.entry(tag.clone()).or_default();
        let installed = answer.and_then(|lease| {
            if let (Some(grant), None) = (&lease.opaque, &t.opaque) {
                t.opaque = Some(grant.ids()?);
            }
            Ok(t.driver.loaded(lease.allocation()?, now_ms())?)
        });
        match installed {
            Ok(()) => i.counters.refills += 1,
            Err(e) => {
                t.driver.load_failed();
                if e.code == ErrorCode::MonotonicTag {
                    t.monotonic = true;
                }
                if e.code == ErrorCode::NotFound {
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
                return None;
            }
            let poll = t.driver.poll(now, &mut out[filled..]);
            filled += poll.filled;
            match poll.next {
                SegmentStep::Done {
                    prefetch: Some(step),
                } => {
                    // Prefetch at 10%: in the background of this request.
                    ctx.wait_until(load_segment(env.clone(), tag.to_owned(), step).map(|_| ()));
                }
                SegmentStep::LoadNow { .. } => i.counters.refills_that_blocked += 1,
                _ => {}
            }
            Some(poll.next)
        });
        match step {
            None => return monotonic_ids(env, tag, count).await,
            Some(SegmentStep::Done { .. }) => {
                with(|i| -> ApiResult<()> {
                    i.counters.segment_ids += out.len() as u64;
                    if let Some(ids) = i.tags.get(tag).and_then(|t| t.opaque.as_ref()) {
                        ids.encode_all(&mut out)?;
                    }
                    Ok(())
                })?;
                return Ok(out);
            }
            Some(SegmentStep::LoadNow { step }) => {
                if let Err(e) = load_segment(env.clone(), tag.to_owned(), step).await {
                    if e.code != ErrorCode::MonotonicTag {
                        return Err(e);
                    }
                }
            }
            Some(SegmentStep::Wait) => {
                waited += POLL_MS;
                if waited > MAX_LOAD_WAIT_MS {
                    return Err(ApiError::unavailable(ErrorCode::StoreUnavailable, format!("segment {tag}: expected a segment within {MAX_LOAD_WAIT_MS} ms, found none"), 1000));
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
                .map_err(|_| ApiError::store_error(format!("store: ID {s:?} is not a number")))
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

/// Leases a worker ID for this isolate. Runs in the context of the request
/// the holder asked.
async fn lease_worker_id(env: &Env, config: &Config, ask: LeaseAsk) -> ApiResult<()> {
    let node_key = with(|i| {
        i.counters.store_calls += 1;
        i.node_key
            .get_or_insert_with(|| format!("isolate-{:016x}", random_u64()))
            .clone()
    });
    let request = LeaseRequest {
        node_key,
        node_time: ask.node_now_ms,
        previous: ask.previous.map(Previous::from),
        owner: String::new(),
    };
    let answer: ApiResult<Granted> =
        call(env, Store::Registry, Method::Post, "/lease", Some(&request)).await;
    with(|i| {
        let holder = i
            .snowflake
            .as_mut()
            .ok_or_else(|| ApiError::new(ErrorCode::StoreError, "snowflake: holder missing"))?;
        registry_store::lease_answered(holder, answer, config.layout, now_ms())
    })
}

fn renew(env: &Env, config: &Config, r: Renewal) -> LocalBoxFuture<'static, ()> {
    let env = env.clone();
    let layout = config.layout;
    async move {
        with(|i| i.counters.store_calls += 1);
        let answer = registry_store::renew(&env, r).await;
        with(|i| {
            if let Some(holder) = i.snowflake.as_mut() {
                registry_store::renewal_answered(holder, r, answer, layout, now_ms());
            }
        });
    }
    .boxed_local()
}

/// `count` snowflake IDs: from the minters' batches, or (without minters)
/// under this isolate's own leased worker ID.
pub async fn snowflake_ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    if config.minters > 0 {
        minted_ids(env, ctx, config, count).await
    } else {
        leased_ids(env, ctx, config, count).await
    }
}

/// How a fetch from a minter went wrong, and what the buffer says to do.
struct FetchError {
    error: ApiError,
    then: Refused,
}

/// Fetches a batch from a minter into this isolate's buffer. Runs in the
/// context of the request the buffer asked (or in its `waitUntil`).
async fn fetch_batch(env: Env, ask: BatchAsk, remaining_ms: u64) -> Result<(), FetchError> {
    with(|i| i.counters.minter_calls += 1);
    let request = MintRequest {
        index: ask.minter,
        count: ask.count,
    };
    let answer: ApiResult<Batch> = call(
        &env,
        Store::Minter(ask.minter),
        Method::Post,
        "/mint",
        Some(&request),
    )
    .await;
    let refused = answer.is_err();
    let ranges = answer.and_then(|batch| {
        batch
            .ranges
            .iter()
            .map(|(s, e)| match (s.parse(), e.parse()) {
                (Ok(s), Ok(e)) => Ok((s, e)),
                _ => Err(ApiError::store_error(format!(
                    "minter {}: range [{s}, {e}) is not two integers",
                    ask.minter
                ))),
            })
            .collect::<ApiResult<Vec<(u64, u64)>>>()
    });
    with(|i| {
        let Some(buf) = i.minted.as_mut() else {
            let error = ApiError::store_error("snowflake: minted buffer missing");
            return Err(FetchError {
                error,
                then: Refused::Next,
            });
        };
        match ranges.and_then(|r| Ok(buf.fetched(&r, now_ms())?)) {
            Ok(()) => Ok(()),
            Err(error) if refused => {
                let then = buf.fetch_refused(error.code, now_ms(), remaining_ms);
                Err(FetchError { error, then })
            }
            Err(error) => {
                buf.fetch_failed();
                Err(FetchError {
                    error,
                    then: Refused::Next,
                })
            }
        }
    })
}

/// This isolate's buffer settings: the configured minters and staleness
/// bound, starting at a random minter.
fn mint_config(config: &Config) -> MintConfig {
    MintConfig {
        staleness_ms: config.staleness_ms,
        ..MintConfig::new(config.minters, random_u64())
    }
}

/// `count` snowflake IDs from the minters' batches in this isolate's buffer,
/// within the core's wait budget: a minter that does not answer in what is
/// left of it is passed over (its Durable Object may be stuck on a clock
/// that stepped back), and a request that runs out answers 503 at once.
async fn minted_ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    let mut out = vec![0u64; count];
    let mut filled = 0;
    let mut failures = 0;
    let mut budget = WaitBudget::new(now_ms(), MAX_WAIT_MS);
    let mut last_error = None;
    let give_up = |last_error: Option<ApiError>, filled: usize| {
        last_error.unwrap_or_else(|| {
            ApiError::unavailable(
                ErrorCode::StoreUnavailable,
                format!("snowflake: expected {count} minted IDs within {MAX_WAIT_MS} ms, found {filled}"),
                MAX_WAIT_MS,
            )
        })
    };
    loop {
        let now = now_ms();
        let next = with(|i| -> ApiResult<MintStep> {
            let buf = match i.minted.as_mut() {
                Some(b) => b,
                None => i
                    .minted
                    .insert(MintedBuffer::new(config.layout, mint_config(config))?),
            };
            let poll = buf.poll(now, &mut out[filled..]);
            filled += poll.filled;
            Ok(poll.next)
        })?;
        let wait = match next {
            MintStep::Done { prefetch } => {
                if let Some(ask) = prefetch {
                    ctx.wait_until(fetch_batch(env.clone(), ask, 0).map(|_| ()));
                }
                with(|i| i.counters.snowflake_ids += out.len() as u64);
                return Ok(out);
            }
            MintStep::FetchNow(ask) => {
                let left = budget.remaining_ms(now).max(1);
                let fetch = fetch_batch(env.clone(), ask, left).boxed_local();
                let answer = match future::select(fetch, sleep_ms(left).boxed_local()).await {
                    Either::Left((answer, _)) => answer,
                    Either::Right(((), _)) => {
                        with(|i| i.minted.as_mut().map(MintedBuffer::fetch_failed));
                        Err(FetchError {
                            error: ApiError::unavailable(
                                ErrorCode::StoreUnavailable,
                                format!(
                                    "minter {}: expected an answer within {left} ms, found none",
                                    ask.minter
                                ),
                                MAX_WAIT_MS,
                            ),
                            then: Refused::Next,
                        })
                    }
                };
                let Err(FetchError { error, then }) = answer else {
                    continue;
                };
                match then {
                    Refused::Again => {
                        last_error = Some(error);
                        POLL_MS
                    }
                    Refused::Next => {
                        failures += 1;
                        last_error = Some(error);
                        if failures >= mint_config(config).tries_per_request() {
                            return Err(give_up(last_error, filled));
                        }
                        continue;
                    }
                    Refused::GiveUp {
                        code,
                        retry_after_ms,
                    } => {
                        return Err(ApiError::unavailable(
                            code,
                            format!("snowflake: this clock is {retry_after_ms} ms behind IDs the minters already minted: {}", error.message),
                            retry_after_ms,
                        ));
                    }
                }
            }
            MintStep::Wait => POLL_MS,
        };
        if !budget.wait(now_ms(), wait) {
            return Err(give_up(last_error, filled));
        }
        sleep_ms(wait).await;
    }
}

/// `count` snowflake IDs under this isolate's leased worker ID.
async fn leased_ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    let mut out = vec![0u64; count];
    let mut filled = 0;
    let mut budget = WaitBudget::new(now_ms(), MAX_WAIT_MS);
    loop {
        let now = now_ms();
        let next = with(|i| -> ApiResult<HolderNext> {
            let holder = match i.snowflake.as_mut() {
                Some(h) => h,
                None => {
                    let holder_config = HolderConfig {
                        max_backward_ms: config.max_backward_ms,
                        // An isolate has no store to restart from: after a
                        // lapse or refusal it simply leases again.
                        lease_again: true,
                        ..HolderConfig::default()
                    };
                    let h =
                        SnowflakeHolder::with_rand(holder_config, SplitMix64::new(random_u64()))?;
                    i.snowflake.insert(h)
                }
            };
            let poll = holder.poll(now, &mut out[filled..])?;
            filled += poll.filled;
            if let Some(r) = poll.renew {
                ctx.wait_until(renew(env, config, r));
            }
            Ok(poll.next)
        })?;
        let wait = match next {
            HolderNext::Done => {
                with(|i| i.counters.snowflake_ids += out.len() as u64);
                return Ok(out);
            }
            HolderNext::Lease(ask) => {
                lease_worker_id(env, config, ask).await?;
                continue;
            }
            HolderNext::LeaseInFlight => POLL_MS,
            HolderNext::RetryAfter { ms, .. } => ms,
        };
        if !budget.wait(now_ms(), wait) {
            return Err(ApiError::unavailable(ErrorCode::SequenceExhausted, format!("snowflake: expected to mint {count} IDs within {MAX_WAIT_MS} ms, found only {filled}"), wait));
        }
        // Date.now() moves only across I/O and timers: await one.
        sleep_ms(wait).await;
    }
}
