//! Segment-mode IDs: each tag's `SegmentDriver`, fed with segments from the
//! isolate's region's allocator (`REGIONAL_ALLOCATORS`), or the tag's root
//! object when that one does not answer in time, or when there is none (a
//! monotonic tag's IDs come from the root alone).

use edgeleaf::{
    code::ErrorCode, driver::SegmentStep, region::Region, wait::MAX_WAIT_MS, wait::RETRY_AFTER_MS,
};
use edgeleaf_rules::wire::allocator::allocator_share_ms;
use edgeleaf_rules::wire::tag::{AllocateRequest, SegmentLease};
use futures::FutureExt;
use worker::{Context, Env};

use super::{isolate_id, run, with, Isolate, Then, Turn, POLL_MS};
use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::config::Config;
use crate::objects::allocator_store::stubs as allocator_store;
use crate::objects::tag_store::stubs as tag_store;
use crate::scope;

/// `count` segment-mode IDs of `tag`, from this isolate's buffer; waits for
/// the store only when the buffer is empty, within the request's budget
/// (its own load, or another request's). A monotonic tag's IDs come from
/// its object alone.
pub async fn segment_ids(env: &Env, ctx: &Context, tag: &str, count: usize) -> ApiResult<Vec<u64>> {
    let regional = Config::cached(env).is_ok_and(|c| c.regional_allocators);
    let region = scope::region().filter(|_| regional);
    let poll = |i: &mut Isolate, now, out: &mut [u64]| {
        let t = i.tags.entry(tag.to_owned()).or_default();
        let Some(poll) = t.sources.poll(region, now, out) else {
            // Not this buffer's: the match below asks the object (as it
            // does when a load is refused with this code).
            return Err(ApiError::new(ErrorCode::MonotonicTag, tag));
        };
        let turn = match poll.next {
            SegmentStep::Done { prefetch } => {
                if let Some(step) = prefetch {
                    // Prefetch at 10%: in the background of this request
                    // (with its region and test settings).
                    let load = load_segment(env.clone(), tag.to_owned(), step, region);
                    ctx.wait_until(scope::background().run(load).map(|_| ()));
                }
                Turn::Done
            }
            SegmentStep::LoadNow { step } => {
                i.counters.refills_that_blocked += 1;
                Turn::Send(step)
            }
            SegmentStep::Wait => Turn::Wait(POLL_MS),
        };
        Ok((poll.filled, turn))
    };
    let send = async |step, _| {
        load_segment(env.clone(), tag.to_owned(), step, region).await?;
        Ok(Then::Poll)
    };
    let late = |_, _| {
        let e = format!("segment {tag}: expected a segment within {MAX_WAIT_MS} ms, found none");
        ApiError::unavailable(ErrorCode::StoreUnavailable, e, RETRY_AFTER_MS)
    };
    let out = match run(count, poll, send, late).await {
        Err(e) if e.code == ErrorCode::MonotonicTag => {
            with(|i| i.counters.store_calls += 1);
            tag_store::ids(env, tag, count).await?
        }
        answer => {
            let mut out = answer?;
            with(|i| match i.tags.get(tag).and_then(|t| t.opaque.as_ref()) {
                Some(ids) => ids.encode_all(&mut out),
                None => Ok(()),
            })?;
            out
        }
    };
    with(|i| i.counters.segment_ids += out.len() as u64);
    Ok(out)
}

/// Loads a segment of `tag` with `step` into this isolate's driver: from
/// the region's allocator first, if the request's region is known and
/// allocators are on (a tag found monotonic asks its root alone); from the
/// root when there is none, or when it did not answer within its share of
/// the budget. Runs in the context of the request the driver asked.
async fn load_segment(env: Env, tag: String, step: u64, region: Option<Region>) -> ApiResult<()> {
    with(|i| i.counters.store_calls += 1);
    let by = format!("isolate:{}", isolate_id());
    let answer = match region {
        Some(region) => from_region(&env, &tag, region, step, by).await,
        None => from_root(&env, &tag, step, by).await.map(|l| (l, None)),
    };
    with(|i| {
        let t = i.tags.entry(tag.clone()).or_default();
        let installed = answer.and_then(|(lease, source)| {
            if let (Some(grant), None) = (&lease.opaque, &t.opaque) {
                t.opaque = Some(grant.ids()?);
            }
            Ok(t.sources
                .loaded(region, source, lease.allocation()?, now_ms())?)
        });
        if let Err(e) = &installed {
            if t.sources.load_failed(region, e.code) {
                // Unknown (or deleted) tag: keep no state for it, so made-up
                // names cannot grow this map.
                i.tags.remove(&tag);
            }
        } else {
            i.counters.refills += 1;
        }
        installed
    })
}

/// A segment from the tag's root object.
async fn from_root(env: &Env, tag: &str, step: u64, by: String) -> ApiResult<SegmentLease> {
    let request = AllocateRequest {
        step: Some(step),
        request_id: None,
        for_isolate: true,
        by,
        own_credential: false,
        after: None,
    };
    tag_store::allocate(env, tag, request).await
}

/// A segment from `region`'s allocator (with `Some(region)`), given its
/// share of the budget; from the root with the rest (with `None`) if it did
/// not answer (`AllocatorMiss::ask_root`).
async fn from_region(
    env: &Env,
    tag: &str,
    region: Region,
    step: u64,
    by: String,
) -> ApiResult<(SegmentLease, Option<Region>)> {
    let share = allocator_share_ms(scope::budget().remaining_ms());
    match allocator_store::serve_range(env, tag, region, step, &by, share).await {
        Ok(lease) => {
            with(|i| i.counters.allocator_loads += 1);
            Ok((lease, Some(region)))
        }
        Err(missed) if missed.how.ask_root(missed.error.code) => {
            with(|i| i.counters.root_fallbacks += 1);
            Ok((from_root(env, tag, step, by).await?, None))
        }
        Err(missed) => Err(missed.error),
    }
}
