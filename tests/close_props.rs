//! A segment client that closes hands its unused tails back by the core's
//! one rule (`SegmentDriver::hand_back`, the `HandBack` a regional
//! allocator's retirement uses too; the npm `SegmentGenerator.close()` only
//! carries it): last first, one at a time, and nothing more after the first
//! answer that is not `Taken` (a refusal, or an answer that says nothing:
//! a throw, a timeout, a `returnSegment` that returns nothing). What it
//! sends was never handed out by it, each unused ID is offered at most
//! once, and with a root that takes a tail back only when it is the end of
//! its last range, no ID is handed out twice; when every tail is taken, the
//! root goes on right after the last ID the client handed out. The
//! client's fence (`SegmentDriver::fence`, the lease's `after`) is the end
//! of the last range it loaded, and it never loads at or below it.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{
    block::TailAnswer, driver::SegmentDriver, driver::SegmentStep, segment::Allocation,
    segment::StepPolicy,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

#[derive(Debug, Clone, Copy)]
enum Op {
    /// The client hands out up to this many IDs (loading as the driver says).
    Take(usize),
    /// Another client of the root leases this many IDs.
    Other(u64),
}

/// How the root's answer to one tail reaches the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// The root's answer, as it is.
    Answered,
    /// Lost before the root saw the tail.
    LostBefore,
    /// The root took (or refused) it; the answer was lost.
    LostAfter,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..40).prop_map(Op::Take),
        1 => (1u64..30).prop_map(Op::Other),
    ]
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        4 => Just(Reply::Answered),
        1 => Just(Reply::LostBefore),
        1 => Just(Reply::LostAfter),
    ]
}

/// A tag's root: `max_id`, the end of the last range it handed out.
struct Root {
    max: u64,
}

impl Root {
    fn lease(&mut self, step: u64) -> Allocation {
        let range = Allocation::new(self.max + 1, self.max + step).unwrap();
        self.max = range.end;
        range
    }

    /// Takes `tail` back only when nothing was handed out after it.
    fn take_back(&mut self, tail: Allocation) -> bool {
        if tail.end != self.max {
            return false;
        }
        self.max = tail.start - 1;
        true
    }
}

proptest! {
    #![proptest_config(props::config(2000))]

    #[test]
    fn a_closing_client_hands_back_last_first_and_stops_at_the_first_answer_not_taken(
        step in 1u64..20,
        prefetch in 0u8..=100,
        ops in prop::collection::vec(op(), 1..30),
        replies in prop::collection::vec(reply(), 2),
    ) {
        let policy = StepPolicy::new(step).unwrap();
        let buf = edgeleaf::segment::SegmentBuffer::with_prefetch_percent(policy, prefetch).unwrap();
        let mut client = SegmentDriver::with_buffer(buf);
        let mut root = Root { max: 0 };
        let mut handed_out: Vec<u64> = Vec::new();
        let mut loaded_end = 0;
        for op in &ops {
            match *op {
                Op::Other(n) => { root.lease(n); }
                Op::Take(n) => {
                    let mut out = vec![0u64; n];
                    let mut filled = 0;
                    for _ in 0..4 {
                        let poll = client.poll(0, &mut out[filled..]);
                        handed_out.extend_from_slice(&out[filled..filled + poll.filled]);
                        filled += poll.filled;
                        let load = match poll.next {
                            SegmentStep::LoadNow { step } | SegmentStep::Done { prefetch: Some(step) } => step,
                            _ => break,
                        };
                        prop_assert_eq!(client.fence(), loaded_end, "the fence is the end of the last range loaded");
                        let range = root.lease(load);
                        client.loaded(range, 0).unwrap();
                        loaded_end = range.end;
                        prop_assert!(client.loaded(Allocation::new(1, loaded_end).unwrap(), 0).is_err(), "nothing at or below the fence loads");
                    }
                }
            }
        }
        let highest_out = handed_out.iter().copied().max().unwrap_or(0);
        let mut back = client.hand_back();
        let mut sent: Vec<Allocation> = Vec::new();
        let mut ended = false;
        let mut all_taken = true;
        let mut i = 0;
        while let Some(tail) = back.to_send() {
            prop_assert!(!ended, "a tail sent after an answer that was not Taken");
            if let Some(prev) = sent.last() {
                prop_assert!(tail.end < prev.start, "last first: {:?} after {:?}", tail, prev);
            }
            prop_assert!(handed_out.iter().all(|id| *id < tail.start || *id > tail.end), "{:?} holds an ID handed out", tail);
            sent.push(tail);
            let reply = replies.get(i).copied().unwrap_or(Reply::Answered);
            i += 1;
            let answer = match reply {
                Reply::LostBefore => TailAnswer::Lost,
                Reply::LostAfter => { root.take_back(tail); TailAnswer::Lost }
                Reply::Answered if root.take_back(tail) => TailAnswer::Taken,
                Reply::Answered => TailAnswer::Refused { untaken: false },
            };
            if answer != TailAnswer::Taken {
                ended = true;
                all_taken = false;
            }
            back.answered(tail, answer);
        }
        prop_assert!(root.max >= highest_out, "the root went back to {} below {} handed out", root.max, highest_out);
        let unused = client.hand_back();
        prop_assert_eq!(unused.taken(), 0);
        if all_taken && ops.iter().all(|o| matches!(o, Op::Take(_))) {
            prop_assert_eq!(root.max, highest_out, "every tail taken: the root goes on right after the last ID used");
        }
        // Liveness: a client that loaded and closes with IDs unused sends one.
        let held: u64 = loaded_end.saturating_sub(highest_out);
        prop_assert!(held == 0 || !sent.is_empty(), "{} IDs unused, none sent", held);
    }
}
