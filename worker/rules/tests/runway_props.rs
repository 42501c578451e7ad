//! The runway view counts to where allocation stops: for a tag of any kind
//! at any `max_id`, served under any layout (`jsSafe` included: the layout
//! is the snowflakes' bits, and a tag's history no longer reads it), the
//! history's `domain_max` is the end of the last segment the tag's record
//! hands out, and the runway's `remaining` is exactly the number of IDs its
//! allocations hand out before `tag_exhausted`.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{opaque::OpaqueDomain, tag::TagKind, tag::TagRecord, Error};
use edgeleaf_rules::wire::tag::{TagHistory, TagView};
use proptest::prelude::*;

#[path = "../../../tests/support/props.rs"]
mod props;

const KINDS: [TagKind; 5] = [
    TagKind::Plain,
    TagKind::Monotonic,
    TagKind::Opaque(OpaqueDomain::Bits(40)),
    TagKind::Opaque(OpaqueDomain::Digits(9)),
    TagKind::Opaque(OpaqueDomain::Bits(63)),
];

/// A record of `kind` whose `max_id` is `left` IDs before its kind's end
/// (0 when that is further).
fn record(kind: TagKind, step: u64, left: u64) -> TagRecord {
    let mut r = TagRecord::new("t", step, 0, "", 0)
        .unwrap()
        .with_kind(kind)
        .unwrap();
    r.max_id = r.last_id() - left.min(r.last_id());
    r.validate().unwrap();
    r
}

fn history(r: &TagRecord) -> TagHistory {
    TagHistory {
        tag: TagView::from(r),
        allocations: 0,
        events: Vec::new(),
    }
}

proptest! {
    #![proptest_config(props::config(256))]

    /// Near the end (where the two used to part: 2^53 − 1 under jsSafe),
    /// allocating until exhausted hands out exactly `remaining` IDs and the
    /// last one is `domain_max`.
    #[test]
    fn remaining_is_what_allocation_still_hands_out(
        kind in prop::sample::select(KINDS.to_vec()),
        step in 1u64..=1_000_000,
        left in 0u64..=3_000_000,
    ) {
        let mut r = record(kind, step, left);
        let h = history(&r);
        let runway = h.runway(0).unwrap();
        let (mut handed, mut last) = (0u64, r.max_id);
        loop {
            match r.allocate(None, 0) {
                Ok((a, next)) => {
                    prop_assert_eq!(a.start, last + 1);
                    handed += a.end - a.start + 1;
                    last = a.end;
                    r = next;
                }
                Err(Error::TagExhausted { .. }) => break,
                Err(e) => return Err(TestCaseError::fail(format!("{e:?}"))),
            }
        }
        prop_assert_eq!(runway.remaining, handed);
        prop_assert_eq!(h.domain_max(), r.max_id);
        prop_assert_eq!(h.domain_max(), r.last_id());
    }

    /// Anywhere in the domain: the view's end is the record's, and what is
    /// left is counted from `max_id` to it.
    #[test]
    fn the_view_ends_where_the_record_does(
        kind in prop::sample::select(KINDS.to_vec()),
        left in any::<u64>(),
    ) {
        let r = record(kind, 1000, left);
        let h = history(&r);
        prop_assert_eq!(h.domain_max(), r.last_id());
        prop_assert_eq!(h.runway(0).unwrap().remaining, r.last_id() - r.max_id);
        // Liveness: a tag not at its end allocates.
        prop_assert_eq!(r.allocate(None, 0).is_ok(), r.max_id < r.last_id());
    }
}
