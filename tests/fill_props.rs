//! A monotonic tag's store fills each answer with the core's loop
//! (`MonotonicIssuer::fill`), its loads synchronous and any of them liable
//! to fail: an answer the IDs in memory cover is answered whatever happens
//! to the prefetch it starts (a failed prefetch never fails an answer);
//! one they do not cover fails exactly when a load it needed failed; the
//! loop never waits for a load (a synchronous store leaves none in flight);
//! and the answers, in order, are whole, strictly increasing, inside the
//! segments allocated, each with the record to write naming its last ID.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{
    driver::FillError, driver::IssuedMark, driver::MonotonicIssuer, segment::Allocation,
    segment::StepPolicy, tag::TagRecord, Error,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

#[derive(Debug, Clone)]
struct Ask {
    count: usize,
    /// Which of this answer's loads fail (by order; beyond: succeed).
    fails: Vec<bool>,
    advance_ms: u64,
}

fn ask() -> impl Strategy<Value = Ask> {
    (
        1usize..60,
        prop::collection::vec(prop::bool::weighted(0.3), 0..4),
        0u64..600_000,
    )
        .prop_map(|(count, fails, advance_ms)| Ask {
            count,
            fails,
            advance_ms,
        })
}

proptest! {
    #![proptest_config(props::config(300))]

    #[test]
    fn a_failed_prefetch_never_fails_an_answer(
        step in 1u64..40,
        start in 0u64..1000,
        asks in prop::collection::vec(ask(), 1..40),
    ) {
        let mut record = TagRecord::new("t", step, start, "", 0).unwrap();
        let mut issued = 0u64;
        let mut issuer = MonotonicIssuer::new(StepPolicy::new(step).unwrap());
        let mut now = 0u64;
        // IDs allocated to this instance and not yet answered.
        let mut held = 0u64;
        let mut last: Option<u64> = None;
        let (mut covered, mut covered_ok) = (0, 0);
        for a in asks {
            now += a.advance_ms;
            issuer.begin(IssuedMark { max_id: record.max_id, issued });
            let mut out = vec![0u64; a.count];
            let mut fails = a.fails.iter().copied();
            let mut failed_needed = false;
            let covers = held >= a.count as u64;
            let mut allocated = Vec::new();
            let answer = issuer.fill(now, &mut out, |step| {
                if fails.next().unwrap_or(false) {
                    // A load that fails while IDs are still missing is one
                    // the answer needed.
                    failed_needed |= !covers;
                    return Err(Error::TagExhausted { max_id: record.max_id, step });
                }
                let (alloc, next) = record.allocate(Some(step), now)?;
                record = next;
                allocated.push(alloc);
                Ok::<Allocation, Error>(alloc)
            });
            held += allocated.iter().map(|a| a.end - a.start + 1).sum::<u64>();
            covered += usize::from(covers);
            match answer {
                Ok(mark) => {
                    covered_ok += usize::from(covers);
                    for id in &out {
                        prop_assert!(last.is_none_or(|l| *id > l), "{} after {:?}", id, last);
                        prop_assert!(*id > start && *id <= record.max_id);
                        last = Some(*id);
                    }
                    prop_assert_eq!(mark, IssuedMark { max_id: record.max_id, issued: *out.last().unwrap() });
                    held -= a.count as u64;
                    issued = mark.issued;
                    issuer.written(mark);
                }
                Err(FillError::Load(_)) => {
                    prop_assert!(!covers, "an answer its buffer covered failed");
                    prop_assert!(failed_needed, "failed with no needed load failing");
                    // The IDs taken for it stay unanswered: a gap.
                    held = 0;
                }
                Err(FillError::InFlight) => prop_assert!(false, "a synchronous loop waited"),
            }
        }
        prop_assert_eq!(covered_ok, covered);
    }
}
