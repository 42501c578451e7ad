use super::*;
use crate::code::ErrorCode;
use crate::error::Error;
use crate::rand::SplitMix64;
use crate::segment::Allocation;
use crate::wait::{InFlight, DEFAULT_TAKE_OVER_MS};
use alloc::vec::Vec;

fn range(s: &Serve) -> (u64, u64) {
    match s {
        Serve::Range { range, .. } => (range.start, range.end),
        other => panic!("expected a range, found {other:?}"),
    }
}

fn block(start: u64, end: u64) -> Allocation {
    Allocation::new(start, end).unwrap()
}

#[test]
fn asks_a_block_serves_ranges_and_prefetches_one_ask_at_a_time() {
    let mut rand = SplitMix64::new(1);
    let mut a = BlockAllocator::new();
    let Serve::Load(first) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    assert_eq!(first.step, None, "the tag's step is not known yet");
    assert_eq!(first.request_id.len(), 2 * BLOCK_REQUEST_ID_BYTES);
    assert_eq!(a.serve(5, 0, &mut rand), Serve::Wait, "one ask in flight");
    assert_eq!(
        a.loaded(&first.request_id, block(1, 100), 10, 0),
        Ok(BlockLoad::Installed)
    );
    // Granted at least the tag's step; past 10% used, the prefetch.
    assert_eq!(
        a.serve(5, 0, &mut rand),
        Serve::Range {
            range: block(1, 10),
            ask: None,
            persist: true
        }
    );
    let s = a.serve(5, 0, &mut rand);
    assert_eq!(range(&s), (11, 20));
    let Serve::Range {
        ask: Some(next), ..
    } = s
    else {
        panic!("{s:?}")
    };
    assert_eq!(next.step, Some(200), "a block that lasted 0 ms doubles");
    assert_ne!(next.request_id, first.request_id);
    assert_eq!(
        range(&a.serve(95, 0, &mut rand)),
        (21, 100),
        "a block's end"
    );
    assert_eq!(a.serve(5, 0, &mut rand), Serve::Wait);
    // A second copy of the first answer is ignored.
    assert_eq!(
        a.loaded(&first.request_id, block(1, 100), 10, 0),
        Ok(BlockLoad::Ignored)
    );
    assert_eq!(
        a.loaded(&next.request_id, block(301, 500), 10, 1),
        Ok(BlockLoad::Installed)
    );
    assert_eq!(range(&a.serve(10, 1, &mut rand)), (301, 310));
    assert_eq!(a.served_high(), 310);
}

#[test]
fn a_block_held_half_an_hour_is_due_to_retire() {
    let mut rand = SplitMix64::new(4);
    let mut a = BlockAllocator::new();
    assert!(!a.retire_due(RETIRE_AFTER_MS));
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&ask.request_id, block(1, 20), 10, 1_000).unwrap();
    assert!(!a.retire_due(1_000 + RETIRE_AFTER_MS - 1));
    assert!(a.retire_due(1_000 + RETIRE_AFTER_MS));
    // Served whole: nothing held, nothing due.
    let _ = a.serve(20, 2_000, &mut rand);
    assert_eq!(a.blocks(), []);
    assert!(!a.retire_due(1_000 + RETIRE_AFTER_MS));
    assert_eq!(a.retire(), []);
}

#[test]
fn a_tail_the_root_refused_is_served_again_and_never_due_again() {
    let mut rand = SplitMix64::new(5);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&ask.request_id, block(1, 100), 10, 0).unwrap();
    assert_eq!(range(&a.serve(10, 0, &mut rand)), (1, 10));
    let tails = a.retire();
    assert_eq!(tails.len(), 1);
    assert_eq!(a.available(), 0);
    // The root refused it (it handed out IDs after it): kept.
    assert_eq!(a.keep(tails.clone(), RETIRE_AFTER_MS), 1);
    assert_eq!(a.available(), 90);
    assert!(!a.retire_due(10 * RETIRE_AFTER_MS), "kept for good");
    // Kept twice: refused (the buffer holds it already).
    assert_eq!(a.keep(tails, RETIRE_AFTER_MS), 0);
    let Serve::Range { range, ask, .. } = a.serve(10, RETIRE_AFTER_MS, &mut rand) else {
        panic!("the kept tail served")
    };
    assert_eq!(range.start, 11);
    // A block leased after the kept tail is due in its time.
    let next = ask.expect("the next block asked at the kept tail's 10%");
    a.loaded(&next.request_id, block(200, 299), 10, 2 * RETIRE_AFTER_MS)
        .unwrap();
    assert!(!a.retire_due(3 * RETIRE_AFTER_MS - 1));
    assert!(a.retire_due(3 * RETIRE_AFTER_MS));
}

/// An allocator retired with two tails, last first: 101..=200, 12..=100.
fn retired_with_two_tails() -> (BlockAllocator, Vec<Tail>) {
    let mut rand = SplitMix64::new(8);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&ask.request_id, block(1, 100), 10, 0).unwrap();
    let Serve::Range {
        ask: Some(next), ..
    } = a.serve(11, 0, &mut rand)
    else {
        panic!("the next block asked at 10%")
    };
    a.loaded(&next.request_id, block(101, 200), 10, 0).unwrap();
    let tails = a.retire();
    assert_eq!(
        tails.iter().map(|t| t.range.start).collect::<Vec<_>>(),
        [101, 12]
    );
    (a, tails)
}

#[test]
fn a_hand_back_sends_last_first_and_stops_at_the_first_tail_not_taken() {
    // Both taken: nothing kept.
    let (mut a, tails) = retired_with_two_tails();
    let mut back = HandBack::new(tails);
    while let Some(t) = back.to_send() {
        back.answered(t, TailAnswer::Taken);
    }
    assert_eq!(back.finish(&mut a, 0), (189, 0));
    assert_eq!(a.available(), 0);
    // The last refused with proof: it and the unsent one kept.
    let (mut a, tails) = retired_with_two_tails();
    let mut back = HandBack::new(tails);
    let t = back.to_send().unwrap();
    assert_eq!(t.range.start, 101);
    back.answered(t, TailAnswer::Refused { untaken: true });
    assert_eq!(back.to_send(), None, "the earlier tail cannot come back");
    assert_eq!(back.finish(&mut a, 0), (0, 2));
    assert_eq!(a.available(), 189);
    // The last lost (maybe taken): a gap; the unsent one kept.
    let (mut a, tails) = retired_with_two_tails();
    let mut back = HandBack::new(tails);
    let t = back.to_send().unwrap();
    back.answered(t, TailAnswer::Lost);
    assert_eq!(back.finish(&mut a, 0), (0, 1));
    assert_eq!(a.available(), 89);
    // Refused without proof: a gap too.
    let (mut a, tails) = retired_with_two_tails();
    let mut back = HandBack::new(tails);
    let t = back.to_send().unwrap();
    back.answered(t, TailAnswer::Refused { untaken: false });
    assert_eq!(back.finish(&mut a, 0), (0, 1));
    assert_eq!(a.available(), 89);
}

#[test]
fn a_refused_tail_stays_skipped_once_the_allocator_moved_on() {
    let mut rand = SplitMix64::new(6);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&ask.request_id, block(1, 100), 10, 0).unwrap();
    let _ = a.serve(10, 0, &mut rand);
    let tails = a.retire();
    // An isolate came first: a new block is asked for, above the tail.
    assert!(matches!(a.serve(10, 0, &mut rand), Serve::Load(_)));
    assert_eq!(a.keep(tails, 0), 0);
}

#[test]
fn a_failed_or_restored_ask_is_sent_again_under_its_request_id() {
    let mut rand = SplitMix64::new(2);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.load_failed(&ask.request_id);
    assert_eq!(a.serve(5, 1, &mut rand), Serve::Load(ask.clone()));
    assert_eq!(a.serve(5, 2, &mut rand), Serve::Wait);
    // Presumed lost after the take-over time: the same ask again.
    assert_eq!(
        a.serve(5, 2 + DEFAULT_TAKE_OVER_MS, &mut rand),
        Serve::Load(ask.clone())
    );
    // A restored copy has nothing in flight: it sends it again at once.
    let mut restored = a.clone();
    restored.in_flight = InFlight::default();
    assert_eq!(restored.serve(5, 3, &mut rand), Serve::Load(ask));
}

#[test]
fn retiring_hands_back_the_unserved_tails_last_first_and_never_serves_below() {
    let mut rand = SplitMix64::new(3);
    let mut a = BlockAllocator::new();
    let Serve::Load(first) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&first.request_id, block(1, 100), 10, 0).unwrap();
    let Serve::Range {
        ask: Some(next), ..
    } = a.serve(20, 0, &mut rand)
    else {
        panic!()
    };
    a.loaded(&next.request_id, block(101, 300), 10, 0).unwrap();
    let tails = a.retire();
    assert_eq!(
        tails,
        [
            Tail {
                range: block(101, 300),
                request_id: next.request_id.clone()
            },
            Tail {
                range: block(21, 100),
                request_id: first.request_id.clone()
            },
        ]
    );
    assert_eq!((a.available(), a.pending()), (0, None));
    // Asks anew; a block at or below what it served is refused.
    let Serve::Load(again) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    assert_eq!(again.step, Some(100), "the tag's step times the factor");
    assert!(matches!(
        a.loaded(&again.request_id, block(20, 200), 10, 0),
        Err(Error::SegmentOverlap { .. })
    ));
    let Serve::Load(bad) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    let backwards = Allocation {
        start: 300,
        end: 250,
        step: 0,
    };
    assert_eq!(
        a.loaded(&bad.request_id, backwards, 10, 0),
        Err(Error::InvalidSegment {
            start: 300,
            end: 250
        })
    );
    // The tail came back to the root: served again, from above 20.
    let Serve::Load(third) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&third.request_id, block(21, 120), 10, 0).unwrap();
    assert_eq!(range(&a.serve(10, 0, &mut rand)), (21, 30));
}

#[test]
fn the_timer_is_set_for_the_oldest_block_and_not_at_all_for_kept_tails() {
    let mut rand = SplitMix64::new(6);
    let mut a = BlockAllocator::new();
    assert_eq!(a.next_check(0), None, "nothing held: no timer");
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    assert_eq!(a.next_check(0), None, "an ask alone: nothing to retire yet");
    a.loaded(&ask.request_id, block(1, 100), 10, 1_000).unwrap();
    assert_eq!(a.next_check(1_000), Some(RETIRE_AFTER_MS));
    assert_eq!(a.next_check(1_500), Some(RETIRE_AFTER_MS - 500));
    assert_eq!(a.next_check(1_000 + RETIRE_AFTER_MS), Some(0));
    assert_eq!(a.next_check(1_000 + 2 * RETIRE_AFTER_MS), Some(0));
    // Retired, the root refused the tail with proof: kept, never due, so the
    // host sets no timer (before, it looked again every 3 minutes for ever).
    assert_eq!(range(&a.serve(10, 2_000, &mut rand)), (1, 10));
    let tails = a.retire();
    assert_eq!(a.keep(tails, 2_000), 1);
    assert!(a.available() > 0);
    assert_eq!(a.next_check(10 * RETIRE_AFTER_MS), None);
}

#[test]
fn an_ask_refused_as_reused_is_given_up_and_asked_anew() {
    let mut rand = SplitMix64::new(7);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    // A failure that may pass: the same ask again.
    assert!(!a.load_refused(&ask.request_id, ErrorCode::StoreUnavailable));
    assert_eq!(a.serve(5, 1, &mut rand), Serve::Load(ask.clone()));
    // The root remembers its request ID with another step: sending it again
    // can never be answered, so a new ask under a new request ID.
    assert!(a.load_refused(&ask.request_id, ErrorCode::RequestIdReused));
    assert_eq!(a.pending(), None);
    let Serve::Load(again) = a.serve(5, 2, &mut rand) else {
        panic!("a new ask")
    };
    assert_ne!(again.request_id, ask.request_id);
    // A late answer to the given-up ask is ignored; the new one installs.
    assert_eq!(
        a.loaded(&ask.request_id, block(1, 100), 10, 3),
        Ok(BlockLoad::Ignored)
    );
    assert_eq!(
        a.loaded(&again.request_id, block(101, 200), 10, 3),
        Ok(BlockLoad::Installed)
    );
    assert_eq!(range(&a.serve(10, 4, &mut rand)), (101, 110));
    // Refused for an ask that is not the pending one: nothing changes.
    assert!(!a.load_refused("other", ErrorCode::RequestIdReused));
}

#[test]
fn forgets_on_not_found_or_monotonic_only_before_its_first_block() {
    let mut rand = SplitMix64::new(3);
    let mut a = BlockAllocator::new();
    let Serve::Load(first) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    // Its first ask is in flight, unwritten, and the root says no tag.
    assert!(!a.persist_first(&Serve::Load(first.clone())));
    for code in [ErrorCode::NotFound, ErrorCode::MonotonicTag] {
        assert!(a.forgets_after(code), "{code:?}");
    }
    assert!(!a.forgets_after(ErrorCode::StoreUnavailable));
    a.load_failed(&first.request_id);
    let Serve::Load(again) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&again.request_id, block(1, 100), 10, 0).unwrap();
    // Once it held a block, its state stays (its tails, its fence), and
    // every ask is written before it is sent.
    assert!(!a.forgets_after(ErrorCode::NotFound));
    assert!(!a.forgets_after(ErrorCode::MonotonicTag));
    let served = a.serve(5, 0, &mut rand);
    assert!(a.persist_first(&served));
    assert!(!a.persist_first(&Serve::Wait));
}

/// Serves `step` and says whether the host writes first.
fn serve_written(a: &mut BlockAllocator, step: u64, rand: &mut SplitMix64) -> ((u64, u64), bool) {
    let s = a.serve(step, 0, rand);
    (range(&s), a.persist_first(&s))
}

#[test]
fn ranges_within_the_reservation_are_answered_without_a_write() {
    let mut rand = SplitMix64::new(11);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(10, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&ask.request_id, block(1, 1_000), 10, 0).unwrap();
    // The first range passes the reservation: written, reserving 16 more.
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((1, 10), true));
    assert_eq!(a.reserved(), 10 + RESERVE_RANGES * 10);
    // Then no write until a range passes the reservation, but for the one
    // that asks for the next block (at 10% of this one: 101..=110).
    let mut writes = Vec::new();
    for _ in 0..RESERVE_RANGES {
        let (r, written) = serve_written(&mut a, 10, &mut rand);
        if written {
            writes.push(r);
        }
    }
    assert_eq!(writes, [(101, 110)]);
    assert_eq!(a.reserved(), 110 + RESERVE_RANGES * 10);
    for _ in 0..10 {
        assert!(!serve_written(&mut a, 10, &mut rand).1);
    }
    assert_eq!(a.served_high(), a.reserved());
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((271, 280), true));
    assert_eq!(a.reserved(), 280 + RESERVE_RANGES * 10);
    // Never past the blocks held.
    for _ in 0..10 {
        let _ = serve_written(&mut a, 60, &mut rand);
        assert!(a.reserved() <= 1_000, "{}", a.reserved());
    }
    assert_eq!(a.reserved(), 1_000);
}

#[test]
fn a_new_blocks_first_range_is_written() {
    let mut rand = SplitMix64::new(12);
    let mut a = BlockAllocator::new();
    let Serve::Load(first) = a.serve(10, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&first.request_id, block(1, 100), 10, 0).unwrap();
    let _ = a.serve(10, 0, &mut rand);
    let Serve::Range {
        ask: Some(next), ..
    } = a.serve(10, 0, &mut rand)
    else {
        panic!("the next block asked at 10%")
    };
    assert_eq!(a.reserved(), 100, "within the block held");
    a.loaded(&next.request_id, block(101, 400), 10, 0).unwrap();
    assert_eq!(a.reserved(), 100, "an install reserves nothing of it");
    for _ in 0..8 {
        assert!(!serve_written(&mut a, 10, &mut rand).1);
    }
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((101, 110), true));
    assert_eq!(a.reserved(), 110 + RESERVE_RANGES * 10);
}

#[cfg(feature = "serde")]
#[test]
fn the_state_is_saved_as_if_the_reservation_were_handed_on() {
    let mut rand = SplitMix64::new(13);
    let mut a = BlockAllocator::new();
    let Serve::Load(first) = a.serve(10, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&first.request_id, block(1, 100), 10, 0).unwrap();
    let _ = a.serve(10, 0, &mut rand);
    let Serve::Range {
        ask: Some(next), ..
    } = a.serve(10, 0, &mut rand)
    else {
        panic!()
    };
    a.loaded(&next.request_id, block(101, 300), 10, 0).unwrap();
    let _ = a.serve(100, 0, &mut rand);
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((101, 110), true));
    assert_eq!((a.served_high(), a.reserved()), (110, 270));
    let saved = serde_json::to_string(&a).unwrap();
    let mut restored: BlockAllocator = serde_json::from_str(&saved).unwrap();
    // As stored: everything up to the reservation handed on, the first
    // block gone, the second's cursor past it (what 0.1.0 reads: it serves
    // from the cursor).
    assert_eq!((restored.served_high(), restored.reserved()), (270, 270));
    assert_eq!(restored.blocks().len(), 1);
    let view = restored.snapshot().segments;
    assert_eq!(
        view.iter()
            .flatten()
            .filter(|s| s.value <= s.max)
            .map(|s| (s.value, s.max))
            .collect::<Vec<_>>(),
        [(271, 300)]
    );
    // The old instance serves on within it; the restored one after it.
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((111, 120), false));
    assert_eq!(range(&restored.serve(10, 0, &mut rand)), (271, 280));
    // Nor does it hand the reservation back: its tail starts after it.
    let mut restored: BlockAllocator = serde_json::from_str(&saved).unwrap();
    let tails = restored.retire();
    assert_eq!(
        tails
            .iter()
            .map(|t| (t.range.start, t.range.end))
            .collect::<Vec<_>>(),
        [(271, 300)]
    );
    // The instance that reserved hands back all it did not hand on: the
    // state it saves first says so.
    let tails = a.retire();
    assert_eq!(
        tails
            .iter()
            .map(|t| (t.range.start, t.range.end))
            .collect::<Vec<_>>(),
        [(121, 300)]
    );
    let saved: BlockAllocator = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
    assert_eq!((saved.served_high(), a.reserved()), (120, 120));
    // A kept tail is served again, written first.
    assert_eq!(a.keep(tails, 0), 1);
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((121, 130), true));
}

#[test]
fn the_form_to_store_starts_after_the_reservation() {
    let mut rand = SplitMix64::new(14);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(10, 0, &mut rand) else {
        panic!()
    };
    a.loaded(&ask.request_id, block(1, 1_000), 10, 0).unwrap();
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((1, 10), true));
    assert_eq!(serve_written(&mut a, 10, &mut rand), ((11, 20), false));
    let mut stored = a.to_store();
    stored.in_flight = InFlight::default();
    assert_eq!((stored.served_high(), stored.reserved()), (170, 170));
    assert_eq!(range(&stored.serve(10, 0, &mut rand)), (171, 180));
    // A clone is not that form: it would serve again what the old
    // instance serves from memory.
    assert_eq!(range(&a.clone().serve(10, 0, &mut rand)), (21, 30));
}
