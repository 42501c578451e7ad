//! Properties of segment mode: the store never hands out overlapping ranges,
//! and a buffer fed from it never yields an ID twice or outside what it loaded.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;

use edgeleaf::{
    segment::Allocation, segment::SegmentBuffer, segment::SegmentNext, segment::StepPolicy,
    segment::MAX_SEGMENT_ID, segment::MAX_STEP, tag::TagRecord,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Next,
    Take(usize),
    /// Deliver the load in flight, if any; `true` makes the store fail it.
    Deliver(bool),
    /// Another node takes a segment from the same tag in between.
    Interleave(u64),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => Just(Op::Next),
        3 => (1usize..50).prop_map(Op::Take),
        4 => Just(Op::Deliver(false)),
        1 => Just(Op::Deliver(true)),
        1 => (1u64..100).prop_map(Op::Interleave),
        2 => (0u64..3_600_000).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn buffer_never_repeats_and_stays_inside_loaded_segments(
        min_step in 1u64..40,
        percent in 0u8..=100,
        start_max in prop_oneof![0u64..1000, (MAX_SEGMENT_ID - 5_000)..MAX_SEGMENT_ID],
        ops in prop::collection::vec(op(), 1..400),
    ) {
        let policy = StepPolicy::new(min_step).unwrap();
        let mut buf = SegmentBuffer::with_prefetch_percent(policy, percent).unwrap();
        let mut store = TagRecord::new("prop", min_step, start_max, "", 0).unwrap();
        let mut now = 0u64;
        let mut in_flight = false;
        let mut loaded: Vec<Allocation> = Vec::new();
        let mut seen = HashSet::new();
        let mut check = |id: u64, loaded: &[Allocation]| {
            assert!(seen.insert(id), "duplicate {id}");
            assert!(loaded.iter().any(|a| (a.start..=a.end).contains(&id)), "{id} outside");
        };
        for op in ops {
            match op {
                Op::Next => match buf.next_id() {
                    SegmentNext::Id { id, prefetch } => {
                        check(id, &loaded);
                        if prefetch { assert!(!in_flight); in_flight = true; }
                    }
                    SegmentNext::Exhausted { load } => {
                        assert_eq!(load, !in_flight, "asked to load exactly when none in flight");
                        in_flight = true;
                    }
                },
                Op::Take(n) => {
                    let mut out = vec![0; n];
                    let t = buf.take(&mut out);
                    for &id in &out[..t.filled] { check(id, &loaded); }
                    if t.load { assert!(!in_flight); in_flight = true; }
                }
                Op::Deliver(fail) if in_flight => {
                    in_flight = false;
                    let step = buf.step_for_next_load(now);
                    assert!(step >= min_step && step <= 1_000_000);
                    match store.allocate(Some(step), now) {
                        Ok((alloc, next)) if !fail => {
                            store = next;
                            buf.load(alloc, now).unwrap();
                            loaded.push(alloc);
                        }
                        _ => buf.load_failed(),
                    }
                }
                Op::Deliver(_) => {}
                Op::Interleave(step) => {
                    if let Ok((_, next)) = store.allocate(Some(step), now) { store = next; }
                }
                Op::Advance(ms) => now += ms,
            }
        }
        let snap = buf.snapshot();
        prop_assert_eq!(snap.loading, in_flight);
    }

    /// Any interleaving of allocations and updates on one tag yields disjoint,
    /// positive segments in increasing order.
    #[test]
    fn allocator_never_overlaps(
        initial in 0u64..1_000_000,
        ops in prop::collection::vec((1u64..=1_000_000, prop::option::of(0u64..5000)), 1..200),
    ) {
        let mut rec = TagRecord::new("alloc", 1000, initial, "", 0).unwrap();
        let mut last_end = initial;
        for (i, (step, bump)) in ops.into_iter().enumerate() {
            if let Some(bump) = bump.filter(|_| i % 7 == 0) {
                // An admin update may raise max_id, never lower it.
                rec = rec.update(rec.step, Some(rec.max_id + bump), None, "x", i as u64).unwrap();
                prop_assert!(rec.update(rec.step, Some(rec.max_id.saturating_sub(1)), None, "", 0).is_err()
                    || rec.max_id == 0);
            }
            let (a, next) = rec.allocate(Some(step), i as u64).unwrap();
            prop_assert!(a.start > last_end);
            prop_assert!(a.start >= 1 && a.end <= MAX_SEGMENT_ID);
            prop_assert_eq!(a.end - a.start + 1, step);
            prop_assert_eq!(next.max_id, a.end);
            last_end = a.end;
            rec = next;
        }
    }

    /// A tag's `max_step` bounds every step granted, survives updates that
    /// do not set it, and is never below the step: whatever step a caller
    /// asks for and however the admin changes the tag.
    #[test]
    fn granted_steps_stay_within_step_and_max_step(
        step in 1u64..=2000,
        max_step in prop::option::of(1u64..=4000),
        ops in prop::collection::vec((0u64..3_000_000, prop::option::of(1u64..=2000), prop::option::of(1u64..=4000)), 1..100),
    ) {
        let Ok(mut rec) = TagRecord::new("pinned", step, 0, "", 0).unwrap().with_max_step(max_step) else {
            prop_assert!(max_step.is_some_and(|m| m < step));
            return Ok(());
        };
        for (i, (asked, new_step, new_max)) in ops.into_iter().enumerate() {
            let granted = rec.grant_step(Some(asked));
            let cap = rec.max_step.unwrap_or(MAX_STEP);
            prop_assert!(rec.step <= granted && granted <= cap);
            let (a, next) = rec.allocate(Some(granted), i as u64).unwrap();
            prop_assert!(a.end - a.start < cap);
            rec = next;
            if let Some(new_step) = new_step.filter(|_| i % 5 == 0) {
                let kept = rec.max_step;
                match rec.update(new_step, None, new_max, "", i as u64) {
                    Ok(updated) => {
                        prop_assert_eq!(updated.max_step, new_max.or(kept));
                        prop_assert!(updated.max_step.is_none_or(|m| m >= updated.step));
                        rec = updated;
                    }
                    Err(_) => prop_assert!(new_max.or(kept).is_some_and(|m| m < new_step)),
                }
            }
        }
    }
}
