//! Moving a tag from Leaf (`leaf::continue_after`): whatever Leaf's row and
//! the service's tag, a tag the plan lets the service use hands out only IDs
//! strictly above Leaf's `max_id` plus the margin, and no ID it already
//! allotted can lie at or below that line; the plan is idempotent (applied,
//! the next plan says unchanged); unless forced, it never leaves a tag above
//! `MAX_IMPORT_TARGET` (a short runway).

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::leaf::{
    continue_after, default_margin, Conflict, Move, ServiceTag, MAX_IMPORT_TARGET,
};
use edgeleaf::segment::MAX_SEGMENT_ID;
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

fn max_id() -> impl Strategy<Value = u64> {
    prop_oneof![
        // A tag that never allotted an ID (or a Leaf row at 0).
        2 => Just(0u64),
        2 => 0..10_000_000u64,
        1 => MAX_IMPORT_TARGET - 10_000_000..=MAX_IMPORT_TARGET + 10_000_000,
        1 => MAX_SEGMENT_ID - 10_000_000..=MAX_SEGMENT_ID,
        1 => any::<u64>()
    ]
}

fn service() -> impl Strategy<Value = Option<ServiceTag>> {
    prop::option::of(
        (max_id(), prop::bool::weighted(0.1))
            .prop_map(|(max_id, opaque)| ServiceTag { max_id, opaque }),
    )
}

proptest! {
    #![proptest_config(props::config(4096))]

    #[test]
    fn the_service_continues_strictly_above_leaf_and_the_margin(
        leaf in max_id(),
        step in prop_oneof![1..3_000_000u64, any::<u64>()],
        margin in prop::option::of(prop_oneof![0..3_000_000u64, any::<u64>()]),
        tag in service(),
        force in any::<bool>(),
    ) {
        let margin = margin.unwrap_or(default_margin(step));
        let plan = match continue_after(leaf, margin, tag, force) {
            Err(_) => { prop_assert!(leaf > MAX_SEGMENT_ID); return Ok(()); }
            Ok(plan) => plan,
        };
        match plan {
            Ok((target, mv)) => {
                // The next ID the tag hands out is target + 1: above Leaf's and the margin.
                prop_assert_eq!(u128::from(target), u128::from(leaf) + u128::from(margin));
                prop_assert!(target <= MAX_SEGMENT_ID);
                prop_assert!(force || target <= MAX_IMPORT_TARGET, "a short runway unforced");
                match (mv, tag) {
                    (Move::Create, None) => {}
                    (Move::Raise, Some(t)) => prop_assert!(t.max_id == 0 && !t.opaque),
                    (Move::Unchanged, Some(t)) => prop_assert!(t.max_id >= target && !t.opaque),
                    (mv, tag) => prop_assert!(false, "{:?} for {:?}", mv, tag),
                }
                // Applied (the tag at the target), the plan is done.
                let again = continue_after(leaf, margin, Some(ServiceTag { max_id: target, opaque: false }), force);
                prop_assert_eq!(again, Ok(Ok((target, Move::Unchanged))));
            }
            Err(Conflict::PastLastId) => prop_assert!(u128::from(leaf) + u128::from(margin) > u128::from(MAX_SEGMENT_ID)),
            Err(Conflict::ShortRunway { target }) => {
                prop_assert!(!force && target > MAX_IMPORT_TARGET && target <= MAX_SEGMENT_ID);
                prop_assert_eq!(u128::from(target), u128::from(leaf) + u128::from(margin));
            }
            Err(Conflict::Opaque) => prop_assert!(tag.is_some_and(|t| t.opaque)),
            Err(Conflict::Allotted { service_max_id }) => {
                // Refused exactly when the service allotted IDs below the line.
                let t = tag.unwrap();
                prop_assert_eq!(t.max_id, service_max_id);
                prop_assert!(service_max_id > 0 && u128::from(service_max_id) < u128::from(leaf) + u128::from(margin));
            }
        }
    }
}

#[test]
fn a_row_at_zero_and_a_row_near_the_end() {
    // Leaf never handed out an ID: the tag starts after the margin.
    assert_eq!(continue_after(0, 0, None, false), Ok(Ok((0, Move::Create))));
    assert_eq!(
        continue_after(
            0,
            5,
            Some(ServiceTag {
                max_id: 0,
                opaque: false
            }),
            false
        ),
        Ok(Ok((5, Move::Raise)))
    );
    // A dump that would leave the tag at 2^63 − 1: refused unless forced.
    assert_eq!(
        continue_after(MAX_SEGMENT_ID, 0, None, false),
        Ok(Err(Conflict::ShortRunway {
            target: MAX_SEGMENT_ID
        }))
    );
    assert_eq!(
        continue_after(MAX_SEGMENT_ID, 0, None, true),
        Ok(Ok((MAX_SEGMENT_ID, Move::Create)))
    );
    assert_eq!(
        continue_after(MAX_IMPORT_TARGET, 0, None, false),
        Ok(Ok((MAX_IMPORT_TARGET, Move::Create)))
    );
}

#[test]
fn the_default_margin_is_two_of_leafs_largest_loads() {
    assert_eq!(default_margin(1_000), 2_000_000);
    assert_eq!(default_margin(5_000_000), 10_000_000);
    assert_eq!(default_margin(u64::MAX), u64::MAX);
}
