//! A tail handed back is answered by one call of the core
//! (`TagRecord::answer_tail`), whoever hands it back: an outside client's
//! tail never moves `max_id` back (it may only become the client's own
//! credit), and an allocator's never becomes a credit (it may only return);
//! a tail that is the end of the range remembered under its asker's
//! request ID is taken — an allocator's when nothing followed it, a
//! client's when its credits have room and none overlaps it — and what is
//! taken shortens or removes that range in the same answer.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{
    opaque::OpaqueDomain, segment::Allocation, tag::Asker, tag::Remembered, tag::TagKind,
    tag::TagRecord, tag::TailBack, tag::TailBackAnswer, tag::MAX_CREDITS,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// A regional allocator (the service's own, `for_isolate`).
    Allocator,
    /// An outside client with a key of its own.
    Client,
}

#[derive(Debug, Clone)]
struct Case {
    who: Who,
    opaque: bool,
    /// The leased range, `start..=start + len - 1`.
    start: u64,
    len: u64,
    /// How far into the range the tail starts (clamped into it).
    tail_from: u64,
    /// IDs handed out after the range.
    followed: u64,
    remembered: bool,
    /// Credits the client holds (below the range), and whether one overlaps.
    credits: usize,
    overlapping: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just(Who::Allocator), Just(Who::Client)],
        any::<bool>(),
        1_000u64..1_000_000,
        1u64..1000,
        0u64..1100,
        prop_oneof![3 => Just(0u64), 1 => 1u64..100],
        prop::bool::weighted(0.8),
        0..=MAX_CREDITS,
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(who, opaque, start, len, tail_from, followed, remembered, credits, overlapping)| {
                Case {
                    who,
                    opaque: opaque && who == Who::Allocator,
                    start,
                    len,
                    tail_from,
                    followed,
                    remembered,
                    credits,
                    overlapping,
                }
            },
        )
}

proptest! {
    #![proptest_config(props::config(1000))]

    #[test]
    fn a_client_tail_is_credited_and_an_allocator_tail_returns(c in case()) {
        let end = c.start + c.len - 1;
        let kind = if c.opaque {
            TagKind::Opaque(OpaqueDomain::Bits(40))
        } else {
            TagKind::Plain
        };
        let record = TagRecord::new("t", 10, end + c.followed, "", 0)
            .unwrap()
            .with_kind(kind)
            .unwrap();
        let leased = Allocation::new(c.start, end).unwrap();
        let remembered = c.remembered.then_some(Remembered { segment: leased, granted: c.len });
        let tail = Allocation::new(c.start + c.tail_from.min(c.len - 1), end).unwrap();
        let back = TailBack {
            tail,
            request_id: "r1",
            caller: Asker::Own(if c.who == Who::Client { "key" } else { "allocator:wnam" }),
            for_isolate: c.who == Who::Allocator,
        };
        let mut credits: Vec<Allocation> = (0..c.credits as u64)
            .map(|i| Allocation::new(1 + 2 * i, 1 + 2 * i).unwrap())
            .collect();
        if c.overlapping && c.credits > 0 {
            credits[0] = tail;
        }
        let answer = record.answer_tail(&back, remembered.as_ref(), &credits, 7).unwrap();
        let its_tail = remembered.is_some();
        match (&answer, c.who) {
            (TailBackAnswer::Returned { record: r, .. }, Who::Allocator) => {
                prop_assert_eq!(r.max_id, tail.start - 1);
                prop_assert_eq!(c.followed, 0, "returned though IDs followed it");
            }
            (TailBackAnswer::Credited { credit, .. }, Who::Client) => {
                prop_assert_eq!(*credit, tail);
                prop_assert_eq!(answer.max_id(record.max_id), record.max_id);
            }
            (TailBackAnswer::Closed { .. }, Who::Allocator) => {
                prop_assert!(c.followed > 0, "closed though nothing followed it");
                prop_assert!(answer.remembered().is_some(), "closed without a write");
            }
            (TailBackAnswer::Skipped(_), _) => {}
            (a, who) => prop_assert!(false, "{:?} answered {:?}", who, a),
        }
        // A refusal proves the tail untaken (and closes it) only for an
        // allocator's tail at the end of its remembered range, IDs after it.
        prop_assert_eq!(
            answer.untaken(),
            c.who == Who::Allocator && its_tail && c.followed > 0,
            "{:?}",
            answer
        );
        // Liveness: the end of its remembered range is taken when nothing
        // stands in the way.
        let free = match c.who {
            Who::Allocator => c.followed == 0,
            Who::Client => credits.len() < MAX_CREDITS && !(c.overlapping && c.credits > 0),
        };
        prop_assert_eq!(answer.taken(), its_tail && free, "{:?}", answer);
        if answer.taken() {
            prop_assert!(answer.remembered().is_some());
        }
    }
}
