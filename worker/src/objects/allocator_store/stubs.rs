//! What callers use of a regional allocator: one function per
//! `AllocatorRequest`.

use edgeleaf::region::Region;
use edgeleaf_rules::wire::{
    allocator::AllocatorRequest, allocator::AllocatorView, tag::SegmentLease,
};
use worker::Env;

use crate::api::ApiResult;
use crate::objects::call::{call, call_within, Missed, Store};

/// A range of `tag` for an isolate of `region` (asked of the allocator of
/// its hosting region), within `limit_ms` of the request's budget.
pub async fn serve_range(
    env: &Env,
    tag: &str,
    region: Region,
    step: u64,
    by: &str,
    limit_ms: u64,
) -> Result<SegmentLease, Missed> {
    let region = region.hosting();
    let request = AllocatorRequest::Serve {
        tag: tag.to_owned(),
        region,
        step,
        by: by.to_owned(),
        limit_ms: Some(limit_ms),
    };
    call_within(env, Store::Allocator(tag, region), &request, Some(limit_ms)).await
}

/// What the allocator of `tag` in `region` holds.
pub async fn view(env: &Env, tag: &str, region: Region) -> ApiResult<AllocatorView> {
    let request = AllocatorRequest::View {
        tag: tag.to_owned(),
        region,
    };
    call(env, Store::Allocator(tag, region), &request).await
}

/// Retires the blocks of the allocator of `tag` in `region`: with
/// `hand_back`, their unused tails go back to the root when nothing
/// followed them.
pub async fn retire(
    env: &Env,
    tag: &str,
    region: Region,
    hand_back: bool,
) -> ApiResult<AllocatorView> {
    let request = AllocatorRequest::Retire {
        tag: tag.to_owned(),
        region,
        hand_back,
    };
    call(env, Store::Allocator(tag, region), &request).await
}
