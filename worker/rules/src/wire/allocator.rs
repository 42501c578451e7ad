//! A tag's regional allocator (`RegionalAllocator`, one per tag and hosting
//! region, named `"{tag}@{region}"`): its requests and answers. It is a
//! segment client of the tag's root object (`TagStore`) and a segment
//! server to its region's isolates: it answers the same [`SegmentLease`]
//! the root does.
//!
//! [`SegmentLease`]: super::tag::SegmentLease

use alloc::string::String;
use alloc::vec::Vec;

use edgeleaf::region::Region;
use serde::{Deserialize, Serialize};

/// What a regional allocator is asked. Each request names its tag and
/// region (the object's name): the object keeps them from its first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum AllocatorRequest {
    /// A range for one of the region's isolates: answers a
    /// [`SegmentLease`](super::tag::SegmentLease).
    Serve {
        /// The tag.
        tag: String,
        /// The allocator's region.
        region: Region,
        /// The step the isolate's driver asks for.
        step: u64,
        /// Who asked (`isolate:<id>`), for the root's history.
        by: String,
        /// How long the caller waits for the answer, ms (its share of its
        /// budget): the allocator answers within [`allocator_serve_ms`] of
        /// it, a 503 `store_unavailable` if its own block lease from the
        /// root is what is late. Absent (a caller of before): a request's
        /// whole budget.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_ms: Option<u64>,
    },
    /// What it holds: answers an [`AllocatorView`].
    View {
        /// The tag.
        tag: String,
        /// The allocator's region.
        region: Region,
    },
    /// Retires its blocks cleanly: with `hand_back`, their unused tails go
    /// back to the root when nothing was handed out after them (without: a
    /// deleted tag's, which keeps its `max_id`). Answers an [`AllocatorView`].
    Retire {
        /// The tag.
        tag: String,
        /// The allocator's region.
        region: Region,
        /// Hand the tails back to the root.
        hand_back: bool,
    },
}

impl super::StoreRequest for AllocatorRequest {
    fn repeatable(&self) -> bool {
        match self {
            // A serve made again leaves the first answer's range unused (a
            // gap, never an ID twice); a view is a read.
            AllocatorRequest::Serve { .. } | AllocatorRequest::View { .. } => true,
            // A retirement run twice finds nothing left the second time,
            // but its answer (what went back) would be lost: not again.
            AllocatorRequest::Retire { .. } => false,
        }
    }
}

/// A block an allocator holds: a range leased from the root, and what of it
/// is still to serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockView {
    /// First ID of the block, decimal.
    pub start: String,
    /// Last ID of the block (inclusive), decimal.
    pub end: String,
    /// The next ID it will serve from it, decimal.
    pub next: String,
    /// IDs of it not yet served.
    pub left: u64,
}

/// An allocator as the dashboard and the admin view show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatorView {
    /// The tag.
    pub tag: String,
    /// Its region.
    pub region: Region,
    /// The blocks it holds (the current one first).
    pub blocks: Vec<BlockView>,
    /// IDs it can still serve without asking the root.
    pub runway: u64,
    /// The highest ID it ever handed on, decimal ("0": none).
    pub served_high: String,
    /// A block lease sent to the root and not yet answered (its request ID
    /// is persisted: a replacement asks again under it).
    pub leasing: bool,
    /// Ranges served to isolates since it was created.
    pub served: u64,
    /// Blocks leased from the root since it was created.
    pub blocks_leased: u64,
    /// IDs handed back to the root (tails of retired blocks).
    pub handed_back: u64,
    /// Times it wrote its state since it was created (a request that only
    /// waits writes nothing).
    #[serde(default)]
    pub writes: u64,
}

/// The allocators of a tag, one per region asked (`GET
/// /v1/tags/{tag}/allocators`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatorViews {
    /// Each hosting region's allocator that answered.
    pub allocators: Vec<AllocatorView>,
    /// Regions whose allocator did not answer within the request's budget.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Region>,
}

/// How a call to an object went without bringing its answer: the isolate's
/// rule for its region's allocator ([`AllocatorMiss::ask_root`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocatorMiss {
    /// The object answered this error.
    Answered,
    /// No answer within the part of the budget it was given.
    Late,
    /// The platform said it is overloaded (never called again).
    Overloaded,
    /// The platform failed the call otherwise (unreachable, reset, or
    /// retryable failures past the budget).
    Failed,
}

impl From<edgeleaf::wait::CallFailure> for AllocatorMiss {
    /// A call the platform failed and the caller gave up on (the core's
    /// `wait::after_call_failed`): overloaded, or failed otherwise.
    fn from(failure: edgeleaf::wait::CallFailure) -> Self {
        match failure {
            edgeleaf::wait::CallFailure::Overloaded => AllocatorMiss::Overloaded,
            edgeleaf::wait::CallFailure::Retryable | edgeleaf::wait::CallFailure::Other => {
                AllocatorMiss::Failed
            }
        }
    }
}

impl AllocatorMiss {
    /// Whether an isolate whose region's allocator missed (with an error of
    /// `code`) asks the tag's root itself, with what is left of its budget:
    /// when the allocator did not answer (late, or failed by the platform)
    /// or answered that its own storage is broken. An allocator waiting
    /// for the root answers a 503 before its caller's limit
    /// ([`allocator_serve_ms`]): late is then the allocator itself, never
    /// a slow root, which the region's isolates would all ask at once. Never when it is
    /// overloaded (the root would take the load the allocator shed: a 503
    /// with `Retry-After` at once), nor when it answered anything else (its
    /// answer stands: `not_found`, `monotonic_tag`, or the root's own 503
    /// that it relayed).
    pub fn ask_root(self, code: edgeleaf::code::ErrorCode) -> bool {
        match self {
            AllocatorMiss::Late | AllocatorMiss::Failed => true,
            AllocatorMiss::Answered => code == edgeleaf::code::ErrorCode::StoreError,
            AllocatorMiss::Overloaded => false,
        }
    }
}

/// Ms a regional allocator may spend on a serve whose caller waits
/// `limit_ms` (as the request says), `elapsed_ms` after it received it,
/// before it answers a 503 `store_unavailable` with `Retry-After` itself
/// (an answer the caller does not take to the root): the caller's limit
/// less what passed and a margin for the answer's way back (a fifth of the
/// limit, at least [`ANSWER_MARGIN_MS`]).
pub fn allocator_serve_ms(limit_ms: u64, elapsed_ms: u64) -> u64 {
    let margin = (limit_ms / 5).max(ANSWER_MARGIN_MS);
    limit_ms.saturating_sub(elapsed_ms).saturating_sub(margin)
}

/// The least margin [`allocator_serve_ms`] keeps for an answer's way back.
pub const ANSWER_MARGIN_MS: u64 = 20;

/// The part of what is left of a request's budget an isolate gives its
/// region's allocator before it asks the tag's root itself: half (the
/// allocator is in the isolate's region, the root may be an ocean away).
pub fn allocator_share_ms(left_ms: u64) -> u64 {
    left_ms / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgeleaf::code::ErrorCode;

    #[test]
    fn a_call_the_platform_failed_asks_the_root_unless_overloaded() {
        use edgeleaf::wait::CallFailure;
        for f in [
            CallFailure::Overloaded,
            CallFailure::Retryable,
            CallFailure::Other,
        ] {
            let asks = AllocatorMiss::from(f).ask_root(ErrorCode::StoreUnavailable);
            assert_eq!(asks, f != CallFailure::Overloaded, "{f:?}");
        }
    }

    #[test]
    fn an_isolate_asks_the_root_only_when_its_allocator_did_not_answer() {
        assert!(AllocatorMiss::Late.ask_root(ErrorCode::StoreUnavailable));
        assert!(AllocatorMiss::Failed.ask_root(ErrorCode::StoreUnavailable));
        assert!(AllocatorMiss::Answered.ask_root(ErrorCode::StoreError));
        assert!(!AllocatorMiss::Overloaded.ask_root(ErrorCode::StoreUnavailable));
        assert!(!AllocatorMiss::Answered.ask_root(ErrorCode::StoreUnavailable));
        assert!(!AllocatorMiss::Answered.ask_root(ErrorCode::NotFound));
        assert!(!AllocatorMiss::Answered.ask_root(ErrorCode::MonotonicTag));
        assert_eq!(allocator_share_ms(1_000), 500);
    }

    #[test]
    fn an_allocator_answers_before_its_caller_gives_up() {
        assert_eq!(allocator_serve_ms(500, 0), 400);
        assert_eq!(allocator_serve_ms(500, 150), 250);
        assert_eq!(allocator_serve_ms(500, 450), 0);
        assert_eq!(allocator_serve_ms(50, 0), 30);
        assert_eq!(allocator_serve_ms(10, 0), 0);
        for limit in [0, 1, 19, 20, 100, 500, 1_000, u64::MAX] {
            for elapsed in [0, 1, 50, 499, 10_000, u64::MAX] {
                let ms = allocator_serve_ms(limit, elapsed);
                assert!(
                    ms == 0 || ms.saturating_add(elapsed) < limit,
                    "{limit} {elapsed} {ms}"
                );
            }
        }
        // Its 503 stands: the isolate does not take it to the root.
        assert!(!AllocatorMiss::Answered.ask_root(ErrorCode::StoreUnavailable));
    }
}
