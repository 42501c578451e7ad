//! Segment-mode IDs: each tag's `SegmentDriver`, fed with segments from the
//! tag's Durable Object (a monotonic tag's IDs come from the object alone).

use edgeleaf::{code::ErrorCode, driver::SegmentStep, wait::MAX_WAIT_MS, wait::RETRY_AFTER_MS};
use edgeleaf_rules::wire::tag::AllocateRequest;
use futures::FutureExt;
use worker::{Context, Env};

use super::{isolate_id, run, with, Isolate, Then, Turn, POLL_MS};
use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::tag_store;

/// `count` segment-mode IDs of `tag`, from this isolate's buffer; waits for
/// the store only when the buffer is empty, within the request's budget
/// (its own load, or another request's). A monotonic tag's IDs come from
/// its object alone.
pub async fn segment_ids(env: &Env, ctx: &Context, tag: &str, count: usize) -> ApiResult<Vec<u64>> {
    let poll = |i: &mut Isolate, now, out: &mut [u64]| {
        let t = i.tags.entry(tag.to_owned()).or_default();
        if t.monotonic {
            // Not this buffer's: the match below asks the object (as it
            // does when a load is refused with this code).
            return Err(ApiError::new(ErrorCode::MonotonicTag, tag));
        }
        let poll = t.driver.poll(now, out);
        let turn = match poll.next {
            SegmentStep::Done { prefetch } => {
                if let Some(step) = prefetch {
                    // Prefetch at 10%: in the background of this request.
                    let load = load_segment(env.clone(), tag.to_owned(), step);
                    ctx.wait_until(load.map(|_| ()));
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
        load_segment(env.clone(), tag.to_owned(), step).await?;
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

/// Loads a segment of `tag` with `step` from its Durable Object into this
/// isolate's driver. Runs in the context of the request the driver asked.
async fn load_segment(env: Env, tag: String, step: u64) -> ApiResult<()> {
    with(|i| i.counters.store_calls += 1);
    let request = AllocateRequest {
        step: Some(step),
        request_id: None,
        for_isolate: true,
        by: format!("isolate:{}", isolate_id()),
        own_credential: false,
    };
    let answer = tag_store::allocate(&env, &tag, request).await;
    with(|i| {
        let t = i.tags.entry(tag.clone()).or_default();
        let installed = answer.and_then(|lease| {
            if let (Some(grant), None) = (&lease.opaque, &t.opaque) {
                t.opaque = Some(grant.ids()?);
            }
            Ok(t.driver.loaded(lease.allocation()?, now_ms())?)
        });
        if let Err(e) = &installed {
            t.driver.load_failed();
            t.monotonic |= e.code == ErrorCode::MonotonicTag;
            if e.code == ErrorCode::NotFound {
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
