use super::*;
use crate::code::ErrorCode;
use crate::error::Error;
use crate::holder::{HolderNext, LeaseAsk, RENEW_RETRY_MS};
use crate::layout::Layout;
use crate::layout::Parts;
use crate::snowflake::Wait;
use alloc::vec;
use alloc::vec::Vec;

const T: u64 = 1_700_000_000_000;

fn id(ms: u64, worker: u32, seq: u32) -> u64 {
    let parts = Parts {
        timestamp_ms: ms,
        worker_id: worker,
        sequence: seq,
    };
    Layout::LEAF.compose(parts).unwrap().get()
}

fn buf() -> MintedBuffer {
    MintedBuffer::new(Layout::LEAF, MintConfig::new(4, 1)).unwrap()
}

#[test]
fn a_refusal_of_the_minters_own_clock_is_a_503_with_how_long() {
    let behind = Error::ClockBehindLastReport {
        worker_id: Some(0),
        last_timestamp_ms: T + 2_500,
        node_now_ms: T,
    };
    assert_eq!(
        minter_restore_refused(&behind),
        Some(MinterStep::Unavailable {
            code: ErrorCode::ClockMovedBackwards,
            retry_after_ms: 2_500
        })
    );
    assert_eq!(minter_restore_refused(&Error::SegmentBufferFull), None);
    for code in [ErrorCode::ClockSkew, ErrorCode::ClockBehindLastReport] {
        assert_eq!(
            minter_lease_refused(code),
            Some(MinterStep::Unavailable {
                code: ErrorCode::StoreUnavailable,
                retry_after_ms: RENEW_RETRY_MS
            })
        );
    }
    assert_eq!(minter_lease_refused(ErrorCode::NoFreeWorkerId), None);
}

#[test]
fn serves_in_order_and_prefetches_below_ninety_percent() {
    let mut b = buf();
    let mut out = [0u64; 4];
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    assert_eq!(
        ask,
        BatchAsk {
            minter: 1,
            count: FIRST_MINT_BATCH,
            ticket: 1,
            right: false,
        }
    );
    // A second caller while the fetch is in flight waits.
    assert_eq!(b.poll(T, &mut out).next, MintStep::Wait);
    b.fetched(b.ticket(), &[(id(T, 1, 0), id(T, 1, 16))], T)
        .unwrap();
    let p = b.poll(T, &mut out);
    assert_eq!(out, [id(T, 1, 0), id(T, 1, 1), id(T, 1, 2), id(T, 1, 3)]);
    // 12 of 16 left: below 90%, fetch in the background.
    assert!(matches!(p.next, MintStep::Done { prefetch: Some(_) }));
    let p = b.poll(T, &mut out);
    assert_eq!(p.next, MintStep::Done { prefetch: None });
}

#[test]
fn stale_ids_are_dropped_never_served() {
    let mut b = buf();
    let mut out = [0u64; 1];
    let _ = b.poll(T, &mut out);
    b.fetched(b.ticket(), &[(id(T, 1, 0), id(T, 1, 10))], T)
        .unwrap();
    assert_eq!(b.poll(T + 1_000, &mut out).filled, 1);
    let p = b.poll(T + 1_001, &mut out);
    assert_eq!(p.filled, 0);
    // The prefetch asked for at T + 1000 is still in flight.
    assert_eq!(p.next, MintStep::Wait);
    assert_eq!(b.dropped(), 9);
    assert_eq!(b.staleness().max(), 1_000);
}

#[test]
fn a_minter_answers_the_largest_batch_at_one_clock_reading() {
    use crate::holder::{Grant, SnowflakeHolder};
    let mut h = SnowflakeHolder::new(minter_holder_config(5)).unwrap();
    assert!(matches!(
        h.poll(T, &mut []).unwrap().next,
        HolderNext::Lease(_)
    ));
    let grant = Grant {
        worker_id: 1,
        generation: 1,
        expires_at_ms: T + 60_000,
        issue_after_ms: 0,
        ttl_ms: 60_000,
        layout: Layout::LEAF,
        secret: Some(crate::secret::LeaseSecret::from_random([9; 16])),
    };
    h.granted(grant, T).unwrap();
    let state = h.save_request(T).unwrap();
    h.saved(&state);
    let mut out = vec![0u64; MAX_MINT_BATCH as usize];
    assert_eq!(h.poll(T, &mut out).unwrap().filled, out.len());
    // A range per unit, none past the borrow, and a buffer takes them all.
    let ranges = batch_ranges(&Layout::LEAF, &out);
    assert_eq!(ranges.len(), 4);
    let last = Layout::LEAF.decompose(out[out.len() - 1]).unwrap();
    assert_eq!(last.timestamp_ms, T + MINTER_BORROW_MS);
    let mut b = buf();
    assert_eq!(b.fetched(b.ticket(), &ranges, T), Ok(Fetched::Kept));
    assert_eq!(b.available(), u64::from(MAX_MINT_BATCH));
}

#[test]
fn batches_grow_with_the_rate_and_shrink_when_ids_go_stale() {
    // Serve 1,000 IDs every 10 ms; answer each fetch at once.
    let mut b = buf();
    let mut out = vec![0u64; 1_000];
    let mut now = T;
    for _ in 0..60 {
        let mut filled = 0;
        while filled < out.len() {
            let p = b.poll(now, &mut out[filled..]);
            filled += p.filled;
            let ask = match p.next {
                MintStep::Done { prefetch } => prefetch,
                MintStep::FetchNow(ask) => Some(ask),
                MintStep::Wait => panic!("nothing in flight"),
            };
            if let Some(ask) = ask {
                // As a minter borrowing ahead answers: a range per unit.
                let ranges: Vec<_> = (0..u64::from(ask.count))
                    .step_by(4_096)
                    .map(|k| {
                        let start = id(now + k / 4_096, 1, 0);
                        (start, start + (u64::from(ask.count) - k).min(4_096))
                    })
                    .collect();
                b.fetched(b.ticket(), &ranges, now).unwrap();
            }
        }
        now += 10;
    }
    // 100 IDs/ms for a quarter of the bound is more than the largest batch.
    assert_eq!(b.batch(), MAX_MINT_BATCH);
    // Everything goes stale: the next fetch halves the batch.
    let _ = b.poll(now + 5_000, &mut out);
    b.fetched(
        b.ticket(),
        &[(id(now + 5_000, 1, 0), id(now + 5_000, 1, 1))],
        now + 5_000,
    )
    .unwrap();
    assert_eq!(b.batch(), MAX_MINT_BATCH / 2);
    assert!(b.dropped() > 0);
}

#[test]
fn bad_batches_are_refused_whole() {
    let mut b = buf();
    for ranges in [
        vec![(5, 5)],
        vec![(id(T, 1, 4095), id(T + 1, 1, 1))],
        vec![(id(T, 1, 0), id(T, 1, 4)), (id(T, 1, 2), id(T, 1, 6))],
        vec![(u64::MAX - 1, u64::MAX)],
    ] {
        assert!(matches!(
            b.fetched(b.ticket(), &ranges, T),
            Err(Error::InvalidBatch { .. })
        ));
        assert_eq!(b.available(), 0);
    }
    b.fetched(b.ticket(), &[(id(T, 1, 0), id(T, 1, 4))], T)
        .unwrap();
    // A copy of the answer kept is late, never kept twice.
    assert_eq!(
        b.fetched(b.ticket(), &[(id(T, 1, 0), id(T, 1, 4))], T),
        Ok(Fetched::Late)
    );
    // The next fetch's batch overlapping IDs held is refused.
    let mut out = [0u64; 1];
    let MintStep::Done {
        prefetch: Some(ask),
    } = b.poll(T, &mut out).next
    else {
        panic!("expected a prefetch")
    };
    assert!(b
        .fetched(ask.ticket, &[(id(T, 1, 3), id(T, 1, 5))], T)
        .is_err());
}

#[test]
fn a_failed_fetch_moves_to_the_next_minter() {
    let mut b = buf();
    let mut out = [0u64; 1];
    let _ = b.poll(T, &mut out);
    b.fetch_failed();
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!()
    };
    assert_eq!(ask.minter, 2);
    b.fetch_failed();
    b.fetch_failed();
    assert_eq!(b.minter(), 0);
}

#[test]
fn a_fetch_unanswered_at_its_requests_bound_is_awaited_and_fills_the_buffer() {
    // A minter 1,472 ms away cold (BEY's in weur): the request that asked
    // gives up at its 1 s; the answer still serves the next request, and
    // the minter is not passed over.
    let mut b = buf();
    let mut out = [0u64; 1];
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    assert_eq!(
        b.fetch_unanswered(b.ticket(), T + 1_000),
        Unanswered::Await { for_ms: 2_000 }
    );
    assert_eq!(b.minter(), ask.minter);
    // The next request waits for it rather than asks another minter.
    assert_eq!(b.poll(T + 1_200, &mut out).next, MintStep::Wait);
    let first = id(T + 1_400, ask.minter, 0);
    assert_eq!(
        b.fetched(b.ticket(), &[(first, first + 8)], T + 1_472),
        Ok(Fetched::Kept)
    );
    let poll = b.poll(T + 1_472, &mut out);
    assert_eq!((poll.filled, out[0]), (1, first));
    assert_eq!(b.minter(), ask.minter);
    // Presumed lost once the buffer would take it over: failed, next minter.
    let mut b = buf();
    let _ = b.poll(T, &mut out);
    assert_eq!(
        b.fetch_unanswered(b.ticket(), T + 3_000),
        Unanswered::Failed
    );
    assert_eq!(b.minter(), ask.minter + 1);
    // Nothing in flight: nothing to await, nothing failed.
    assert_eq!(
        b.fetch_unanswered(b.ticket(), T + 3_000),
        Unanswered::Answered
    );
    assert_eq!(b.minter(), ask.minter + 1);
}

#[test]
fn a_late_answer_never_closes_the_fetch_that_took_over() {
    // Fetch A goes unanswered past take_over_ms; a later poll takes over
    // with fetch B to the next minter; then A's answer comes in.
    let mut b = buf();
    let mut out = [0u64; 1];
    let MintStep::FetchNow(a) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    let MintStep::FetchNow(bb) = b.poll(T + 3_000, &mut out).next else {
        panic!("expected a take-over")
    };
    assert_eq!((bb.minter, b.minter()), (a.minter + 1, a.minter + 1));
    assert_ne!(a.ticket, bb.ticket);
    let late = id(T + 3_000, a.minter, 0);
    assert_eq!(
        b.fetched(a.ticket, &[(late, late + 8)], T + 3_010),
        Ok(Fetched::Late)
    );
    assert_eq!(
        b.fetch_refused(a.ticket, ErrorCode::StoreUnavailable, T + 3_010, 0),
        Refused::Again
    );
    assert_eq!(
        b.fetch_unanswered(a.ticket, T + 3_010),
        Unanswered::TakenOver
    );
    // B is still in flight: the next request waits for it, no third fetch,
    // and no minter is passed over.
    assert_eq!(b.poll(T + 3_020, &mut out).next, MintStep::Wait);
    assert_eq!((b.available(), b.minter()), (0, bb.minter));
    let first = id(T + 3_050, bb.minter, 0);
    assert_eq!(
        b.fetched(bb.ticket, &[(first, first + 8)], T + 3_050),
        Ok(Fetched::Kept)
    );
    assert_eq!(b.poll(T + 3_050, &mut out).filled, 1);
}

#[test]
fn an_isolate_fails_over_to_other_regions_and_comes_back_home() {
    // 6 minters, this region's pool 2..4, first asked: 3.
    let config = MintConfig::in_pool(6, 2..4, 1);
    assert_eq!((config.home, config.tries_per_request()), (3, 3));
    let mut b = MintedBuffer::new(Layout::LEAF, config).unwrap();
    let mut out = [0u64; 1];
    let mut asked = vec![];
    for _ in 0..4 {
        let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
            panic!("expected a fetch")
        };
        asked.push(ask.minter);
        b.fetch_failed();
    }
    // Its pool from home, then the others from one chosen by home.
    assert_eq!(asked, [3, 2, 1, 4]);
    // Away (since its first fetch outside its pool, at T), it is served by
    // another region's minter, and stays there...
    let MintStep::FetchNow(ask) = b.poll(T + 1, &mut out).next else {
        panic!("expected a fetch")
    };
    assert_eq!(ask.minter, 5);
    let late = T + RETURN_HOME_MS - 1;
    b.fetched(b.ticket(), &[(id(late, 5, 0), id(late, 5, 1))], late)
        .unwrap();
    let p = b.poll(late, &mut out);
    assert_eq!(p.filled, 1);
    let MintStep::Done {
        prefetch: Some(ask),
    } = p.next
    else {
        panic!("expected a prefetch")
    };
    assert_eq!(ask.minter, 5);
    b.fetch_failed();
    assert_eq!(b.minter(), 0, "the next other region's");
    // ... until RETURN_HOME_MS after it left: then its region's again.
    let MintStep::FetchNow(ask) = b.poll(T + RETURN_HOME_MS, &mut out).next else {
        panic!("expected a fetch")
    };
    assert_eq!(ask.minter, 3);
}

#[test]
fn a_large_pools_early_other_region_minter_is_away_too() {
    // 16 minters, this region's pool 0..6 (first asked: 0): the order asks
    // 0, 1, 2, then another region's (position 3), then the pool's rest.
    let config = MintConfig::in_pool(16, 0..6, 0);
    let mut b = MintedBuffer::new(Layout::LEAF, config).unwrap();
    let mut out = [0u64; 1];
    for _ in 0..3 {
        let _ = b.poll(T, &mut out);
        b.fetch_failed();
    }
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    assert!(!config.in_own_pool(ask.minter), "another region's");
    b.fetched(
        b.ticket(),
        &[(id(T, ask.minter, 0), id(T, ask.minter, 1))],
        T,
    )
    .unwrap();
    assert_eq!(b.poll(T, &mut out).filled, 1);
    // (Its prefetch finds the time unit used up: asked again later.)
    assert_eq!(
        b.fetch_refused(b.ticket(), ErrorCode::SequenceExhausted, T, 0),
        Refused::Again
    );
    // Served there, it still comes home RETURN_HOME_MS after it left.
    let MintStep::FetchNow(ask) = b.poll(T + RETURN_HOME_MS, &mut out).next else {
        panic!("expected a fetch")
    };
    assert_eq!(ask.minter, 0, "its region's again");
}

#[test]
fn a_request_tries_at_most_its_share_of_minters() {
    // A pool of 6 of 16: three of it and one other region's, then 503.
    let b = MintedBuffer::new(Layout::LEAF, MintConfig::in_pool(16, 0..6, 0)).unwrap();
    let mut tries = MintTries::default();
    assert_eq!(b.config().tries_per_request(), 4);
    assert!(tries.failed(&b));
    assert!(tries.failed(&b));
    assert!(tries.failed(&b));
    assert!(!tries.failed(&b), "the fourth failure answers");
    assert_eq!(tries.count(), 4);
    // A single minter: its failure answers at once.
    let one = MintedBuffer::new(Layout::LEAF, MintConfig::new(1, 0)).unwrap();
    assert!(!MintTries::default().failed(&one));
}

#[test]
fn an_isolates_settings_follow_the_services_split() {
    use crate::region::Region;
    let pools = MinterPools::over_regions(32);
    for r in Region::ALL {
        let c = MintConfig::for_region(32, Some(r), 7);
        let pool = pools.region_pool(r);
        assert_eq!(
            (c.pool_start, c.pool_len),
            (pool.start, pool.end - pool.start)
        );
        assert!(pool.contains(&c.home));
    }
    assert_eq!(MintConfig::for_region(32, None, 7), MintConfig::new(32, 7));
}

#[test]
fn a_batch_stale_on_arrival_is_a_failed_fetch() {
    let mut b = buf();
    let mut out = [0u64; 1];
    let _ = b.poll(T, &mut out);
    // Minter 1's clock lags by more than the bound (1 s): every ID of
    // its batch is stale at once.
    let stale = [(id(T - 1_001, 1, 0), id(T - 1_001, 1, 10))];
    assert_eq!(b.fetched(b.ticket(), &stale, T), Ok(Fetched::Stale));
    assert_eq!((b.available(), b.dropped(), b.fetches()), (0, 10, 0));
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    assert_eq!(ask.minter, 2, "the next fetch goes to the next minter");
    // A batch with some fresh IDs is kept; its stale ones are dropped.
    let mixed = [
        (id(T - 1_001, 2, 0), id(T - 1_001, 2, 5)),
        (id(T - 1_000, 2, 0), id(T - 1_000, 2, 5)),
    ];
    assert_eq!(b.fetched(b.ticket(), &mixed, T), Ok(Fetched::Kept));
    assert_eq!(b.poll(T, &mut out).filled, 1);
    assert_eq!(out[0], id(T - 1_000, 2, 0));
    assert_eq!(b.minter(), 2);
}

#[test]
fn a_refusal_is_waited_on_only_while_the_clock_can_catch_up_in_time() {
    let layout = Layout::LEAF;
    let mut b = MintedBuffer::new(layout, MintConfig::new(4, 0)).unwrap();
    let parts = crate::layout::Parts {
        timestamp_ms: T,
        worker_id: 0,
        sequence: 0,
    };
    let id = layout.compose(parts).unwrap().get();
    b.fetched(b.ticket(), &[(id, id + 1)], T).unwrap();
    // Used up in this unit: ask the same minter again.
    assert_eq!(
        b.fetch_refused(b.ticket(), ErrorCode::SequenceExhausted, T, 1_000),
        Refused::Again
    );
    assert_eq!(
        b.fetch_refused(b.ticket(), ErrorCode::SequenceExhausted, T - 900, 1_000),
        Refused::Again
    );
    // This clock stepped back past what the request can wait: answer now.
    assert_eq!(
        b.fetch_refused(b.ticket(), ErrorCode::SequenceExhausted, T - 60_000, 1_000),
        Refused::GiveUp {
            code: ErrorCode::ClockMovedBackwards,
            retry_after_ms: 60_000 - MINTER_BORROW_MS
        }
    );
    assert_eq!(b.minter(), 0);
    // Anything else: the next minter.
    assert_eq!(
        b.fetch_refused(b.ticket(), ErrorCode::StoreUnavailable, T, 1_000),
        Refused::Next
    );
    assert_eq!(b.minter(), 1);
}

#[test]
fn a_minter_never_waits_and_leases_at_most_once() {
    let wait = |ms, reason| HolderNext::RetryAfter { ms, reason };
    let ask = LeaseAsk {
        node_now_ms: T,
        previous: None,
    };
    // A partial batch is answered, whatever the holder would wait for.
    for next in [
        wait(1, Wait::SequenceExhausted),
        wait(60_000, Wait::ClockBehind),
        HolderNext::LeaseInFlight,
    ] {
        assert_eq!(minter_step(1, next, false), MinterStep::Answer);
    }
    // Nothing: answered at once, with the code and the wait.
    assert_eq!(
        minter_step(0, wait(60_000, Wait::ClockBehind), false),
        MinterStep::Unavailable {
            code: ErrorCode::ClockMovedBackwards,
            retry_after_ms: 60_000
        }
    );
    assert_eq!(
        minter_step(0, wait(0, Wait::SequenceExhausted), false),
        MinterStep::Unavailable {
            code: ErrorCode::SequenceExhausted,
            retry_after_ms: 1
        }
    );
    assert_eq!(
        minter_step(0, HolderNext::Lease(ask), false),
        MinterStep::Lease(ask)
    );
    assert!(matches!(
        minter_step(0, HolderNext::Lease(ask), true),
        MinterStep::Unavailable {
            code: ErrorCode::StoreUnavailable,
            ..
        }
    ));
    assert_eq!(
        MintConfig::new(16, 3).tries_per_request(),
        MINTERS_PER_REQUEST
    );
    assert_eq!(MintConfig::new(2, 3).tries_per_request(), 2);
    // A pool of three: all of it and one other region's minter.
    assert_eq!(MintConfig::in_pool(16, 0..3, 0).tries_per_request(), 4);
    // A large pool: no fan-out of one request.
    assert_eq!(
        MintConfig::in_pool(1024, 0..171, 0).tries_per_request(),
        MINTERS_PER_REQUEST + 1
    );
}

#[test]
fn ranges_split_at_units_and_gaps() {
    let ids = [
        id(T, 2, 7),
        id(T, 2, 8),
        id(T, 2, 9),
        id(T + 1, 2, 0),
        id(T + 1, 2, 2),
    ];
    assert_eq!(
        batch_ranges(&Layout::LEAF, &ids),
        vec![
            (id(T, 2, 7), id(T, 2, 10)),
            (id(T + 1, 2, 0), id(T + 1, 2, 1)),
            (id(T + 1, 2, 2), id(T + 1, 2, 3)),
        ]
    );
}

fn rights_buf() -> MintedBuffer {
    let config = MintConfig {
        rights: true,
        ..MintConfig::new(4, 1)
    };
    MintedBuffer::new(Layout::LEAF, config).unwrap()
}

fn right(worker: u32, seq_start: u32, from: u64, until: u64) -> MintRight {
    MintRight {
        worker_id: worker,
        seq_start,
        // Any length is the buffer's to mint; the ledger decides it.
        seq_len: 16,
        from_ms: from,
        until_ms: until,
    }
}

#[test]
fn under_a_right_an_isolate_mints_at_its_own_clock_and_asks_again_once_a_window() {
    let mut b = rights_buf();
    let mut out = [0u64; 1];
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    assert!(ask.right, "an isolate with rights asks for one");
    assert_eq!(ask.count, 1, "with a right asked for, only what it needs");
    let r = right(40, 32, T + 1, T + 60_001);
    let got = b.fetched_with_right(ask.ticket, &[(id(T, 4, 0), id(T, 4, 1))], Some(r), T);
    assert_eq!(got, Ok(Fetched::Kept));
    // The batch's one ID first, then the right's, stamped with this clock.
    let p = b.poll(T, &mut out);
    assert_eq!((p.filled, out[0]), (1, id(T, 4, 0)));
    assert_eq!(p.next, MintStep::Done { prefetch: None });
    let mut fetches = 0;
    let mut seen = Vec::new();
    // One ID every 5 s for 40 s: no fetch (a batch would be stale each time).
    for k in 1..=8u64 {
        let now = T + k * 5_000;
        let p = b.poll(now, &mut out);
        assert_eq!(p.filled, 1);
        assert_eq!(
            out[0],
            id(now, 40, 32),
            "fresh: this clock's unit, the right's slice"
        );
        if let MintStep::Done { prefetch: Some(_) } = p.next {
            fetches += 1;
        }
        seen.push(out[0]);
    }
    assert_eq!(
        fetches, 0,
        "no minter asked within the window's first three quarters"
    );
    // Past three quarters: the next right is asked for in the background.
    let now = T + 50_000;
    let p = b.poll(now, &mut out);
    let MintStep::Done {
        prefetch: Some(ask),
    } = p.next
    else {
        panic!("expected a prefetch, found {:?}", p.next)
    };
    assert!(ask.right);
    assert_eq!(b.right_minted(), 9);
    seen.push(out[0]);
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 9);
}

#[test]
fn a_right_is_minted_once_per_unit_and_sequence_and_never_past_its_end() {
    let mut b = rights_buf();
    let mut one = [0u64; 1];
    let MintStep::FetchNow(ask) = b.poll(T, &mut one).next else {
        panic!("expected a fetch")
    };
    let r = right(7, 0, T + 1, T + 10);
    b.fetched_with_right(ask.ticket, &[], Some(r), T).unwrap();
    // At T: 16 of unit T+1 .. up to MINTER_BORROW_MS past the right's start
    // (T+1..=T+4): 64 IDs, then no more without the clock.
    let mut out = [0u64; 100];
    let p = b.poll(T, &mut out);
    assert_eq!(p.filled, 64);
    for (k, &x) in out[..64].iter().enumerate() {
        let k = k as u64;
        assert_eq!(x, id(T + 1 + k / 16, 7, (k % 16) as u32));
    }
    assert!(matches!(p.next, MintStep::FetchNow(a) if a.count == 36 && !a.right));
    b.fetch_failed();
    // At T+9: units T+5.. skipped (the clock moved on), T+9 only (T+10 is
    // past the end), and then the right is gone.
    let p = b.poll(T + 9, &mut out);
    assert_eq!(p.filled, 16);
    assert_eq!(out[0], id(T + 9, 7, 0));
    assert!(b.right().is_none());
    // A clock stepped back mints nothing it minted before.
    let mut c = rights_buf();
    let MintStep::FetchNow(ask) = c.poll(T, &mut one).next else {
        panic!("expected a fetch")
    };
    c.fetched_with_right(
        ask.ticket,
        &[],
        Some(right(7, 0, T + 1, T + 1_000)),
        T + 100,
    )
    .unwrap();
    let mut first = [0u64; 16];
    assert_eq!(c.poll(T + 100, &mut first).filled, 16);
    assert_eq!(first[15], id(T + 100, 7, 15));
    // Stepped back to T+50: unit T+101 is too far ahead of it to mint.
    let p = c.poll(T + 50, &mut one);
    assert_eq!(p.filled, 0);
    c.fetch_failed();
    let p = c.poll(T + 99, &mut one);
    assert_eq!((p.filled, one[0]), (1, id(T + 101, 7, 0)));
}

#[test]
fn no_right_given_pauses_asking_and_a_bad_right_is_refused() {
    let mut b = rights_buf();
    let mut out = [0u64; 1];
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    // A minter of the release before: the batch alone.
    b.fetched_with_right(ask.ticket, &[(id(T, 1, 0), id(T, 1, 1))], None, T)
        .unwrap();
    let p = b.poll(T, &mut out);
    assert_eq!(p.filled, 1);
    let MintStep::Done {
        prefetch: Some(ask),
    } = p.next
    else {
        panic!("expected a prefetch")
    };
    assert!(!ask.right, "no right asked for within RIGHT_RETRY_MS");
    assert_eq!(ask.count, FIRST_MINT_BATCH);
    b.fetch_failed();
    let MintStep::FetchNow(ask) = b.poll(T + RIGHT_RETRY_MS, &mut out).next else {
        panic!("expected a fetch")
    };
    assert!(ask.right, "asked again after the pause");
    let bad = MintRight {
        seq_len: 0,
        ..right(1, 0, T + 1, T + 100)
    };
    assert!(matches!(
        b.fetched_with_right(ask.ticket, &[], Some(bad), T + RIGHT_RETRY_MS),
        Err(Error::InvalidRight { .. })
    ));
    let beyond = right(1, 4_090, T + 1, T + 100);
    assert!(beyond.validate(&Layout::LEAF).is_err());
    assert!(right(1, 4_080, T + 1, T + 100)
        .validate(&Layout::LEAF)
        .is_ok());
}

fn lendable(from: u64, until: u64) -> Option<crate::holder::Lendable> {
    Some(crate::holder::Lendable {
        worker_id: 40,
        from_ms: from,
        until_ms: until,
    })
}

#[test]
fn a_ledger_lends_each_slice_once_at_a_time_within_what_the_holder_may_lend() {
    let mut l = RightLedger::new(Layout::LEAF);
    assert_eq!(l.slices(), 1_024);
    assert_eq!(l.lend(T, None), None, "no lease, nothing to lend");
    let r = l.lend(T, lendable(0, T + 30_000)).unwrap();
    assert_eq!(
        (r.worker_id, r.seq_len, r.from_ms, r.until_ms),
        (40, RIGHT_SEQUENCES, T + 1, T + 30_000)
    );
    // Never a window shorter than MIN_RIGHT_MS.
    assert_eq!(l.lend(T, lendable(0, T + MIN_RIGHT_MS)), None);
    // After the holder's floor, at most MAX_RIGHT_MS.
    let r2 = l.lend(T, lendable(T + 500, T + 2 * MAX_RIGHT_MS)).unwrap();
    assert_eq!((r2.from_ms, r2.until_ms), (T + 500, T + 500 + MAX_RIGHT_MS));
    assert_ne!(r.seq_start, r2.seq_start);
    for _ in 2..l.slices() {
        assert!(l.lend(T, lendable(0, T + 30_000)).is_some());
    }
    assert_eq!(
        l.lend(T, lendable(0, T + 30_000)),
        None,
        "every slice lent now"
    );
    // A slice is lent again from where its right ended.
    let again = l.lend(T + 30_000, lendable(0, T + 90_000)).unwrap();
    assert_eq!(again.from_ms, T + 30_001);
    assert_eq!(l.lent(), 1_025);
    // A failed lease pauses asking for RIGHT_RETRY_MS.
    assert!(l.may_lease(T));
    l.lease_failed(T);
    assert!(!l.may_lease(T + RIGHT_RETRY_MS - 1) && l.may_lease(T + RIGHT_RETRY_MS));
    // Its holder's ask is then not sent, and asked again once the pause ends.
    let mut h = crate::holder::SnowflakeHolder::new(rights_holder_config(5)).unwrap();
    let mut none = [0u64; 0];
    let next = h.poll(T + 1, &mut none).unwrap().next;
    assert!(matches!(next, HolderNext::Lease(_)));
    assert_eq!(l.lease_to_send(next, &mut h, T + 1), None);
    assert_eq!(l.lend_from(T + 1, &mut h), None, "no lease, nothing lent");
    // Told the ask was not sent: no lease in flight to wait out.
    let next = h.poll(T + 2, &mut none).unwrap().next;
    assert!(matches!(next, HolderNext::Lease(_)), "{next:?}");
    assert_eq!(l.lease_to_send(next, &mut h, T + 2), None);
    let next = h.poll(T + RIGHT_RETRY_MS, &mut none).unwrap().next;
    assert!(
        matches!(next, HolderNext::Lease(_)),
        "the holder asks again: {next:?}"
    );
    assert!(l.lease_to_send(next, &mut h, T + RIGHT_RETRY_MS).is_some());
}

#[test]
fn a_holder_that_saved_no_reservation_yet_lends_nothing() {
    use crate::holder::{Grant, SnowflakeHolder};
    // Leased, its first save not yet done (in flight, or the store down):
    // what it may lend ends at its reservation, 0.
    let mut h = SnowflakeHolder::new(super::rights_holder_config(0)).unwrap();
    let grant = Grant {
        worker_id: 40,
        generation: 1,
        expires_at_ms: T + 60_000,
        issue_after_ms: 0,
        ttl_ms: 60_000,
        layout: Layout::LEAF,
        secret: None,
    };
    h.granted(grant, T).unwrap();
    assert_eq!(h.lendable(T).map(|l| l.until_ms), Some(0));
    let mut leaf = RightLedger::new(Layout::LEAF);
    assert_eq!(leaf.lend(T, h.lendable(T)), None, "no right (no overflow)");
    // Under a layout of 10 ms units, the rounding to whole units neither
    // overflows nor wraps to a right ending near 2^64.
    // (After that layout's epoch, 2024.)
    let t = 1_735_689_600_000;
    let mut js = RightLedger::new(Layout::JS_SAFE);
    assert_eq!(js.lend(t, lendable(0, 0)), None);
    assert_eq!(js.lend(t, lendable(0, 7)), None);
    let r = js.lend(t, lendable(0, t + 30_005)).unwrap();
    assert_eq!((r.from_ms, r.until_ms), (t + 10, t + 30_000));
    assert_eq!(leaf.lent() + js.lent(), 1);
}

#[test]
fn a_holder_whose_floor_is_ahead_of_the_clock_lends_only_once_the_clock_nears_it() {
    // A restarted minter's rights holder resumes after the reservation it
    // saved, up to a minute ahead: a right from there would be minted at
    // once, its IDs stamped that far ahead of every clock.
    let mut l = RightLedger::new(Layout::LEAF);
    assert_eq!(l.lend(T, lendable(T + 40_000, T + 100_000)), None);
    assert_eq!(l.lent(), 0);
    // Within a second of the unit after the clock's: lent from the floor.
    let r = l
        .lend(T + 39_000, lendable(T + 40_000, T + 100_000))
        .unwrap();
    assert_eq!(r.from_ms, T + 40_000);
    let r = l.lend(T + 38_999, lendable(T + 40_001, T + 100_000));
    assert_eq!(r, None);
}

#[test]
fn a_right_answered_twice_is_not_minted_twice() {
    let mut b = rights_buf();
    let mut out = [0u64; 8];
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    let r = right(7, 0, T + 1, T + 60_000);
    b.fetched_with_right(ask.ticket, &[], Some(r), T).unwrap();
    assert_eq!(b.poll(T + 1, &mut out).filled, 8);
    let first = out;
    // The same answer again (a copied message): nothing minted again.
    b.fetched_with_right(ask.ticket, &[], Some(r), T + 1)
        .unwrap();
    assert_eq!(b.poll(T + 1, &mut out).filled, 8);
    assert!(out.iter().all(|x| !first.contains(x)));
    assert_eq!(b.rights(), 1);
}

#[test]
fn a_minter_mints_no_batch_beside_a_right_that_serves_the_ask() {
    let r = MintRight {
        worker_id: 40,
        seq_start: 0,
        seq_len: RIGHT_SEQUENCES,
        from_ms: T + 1,
        until_ms: T + 60_000,
    };
    let at_once = RIGHT_SEQUENCES * 4; // 1 ms units: this one and MINTER_BORROW_MS (3) after
    assert_eq!(batch_beside_right(&Layout::LEAF, 1, Some(&r)), 0);
    assert_eq!(batch_beside_right(&Layout::LEAF, at_once, Some(&r)), 0);
    assert_eq!(
        batch_beside_right(&Layout::LEAF, at_once + 1, Some(&r)),
        at_once + 1
    );
    assert_eq!(batch_beside_right(&Layout::LEAF, 1, None), 1);
    // The buffer serves such an ask from the right alone.
    let mut b = rights_buf();
    let mut out = [0u64; 1];
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    assert_eq!(batch_beside_right(&Layout::LEAF, ask.count, Some(&r)), 0);
    b.fetched_with_right(ask.ticket, &[], Some(r), T).unwrap();
    assert_eq!(b.poll(T, &mut out).filled, 1);
}

#[test]
fn a_copy_of_an_answer_already_taken_is_late_under_a_right_too() {
    let mut b = rights_buf();
    let mut out = vec![0u64; 100];
    let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
        panic!("expected a fetch")
    };
    // More than the right serves at once: a batch beside it.
    assert_eq!(ask.count, 100);
    let r = right(40, 0, T + 1, T + 60_000);
    let batch = [(id(T, 4, 0), id(T, 4, 100))];
    assert_eq!(
        b.fetched_with_right(ask.ticket, &batch, Some(r), T),
        Ok(Fetched::Kept)
    );
    let p = b.poll(T, &mut out);
    assert_eq!(p.filled, 100);
    // Under a right nothing is fetched ahead, so the ticket is still the
    // latest: the copy must still be refused.
    assert_eq!(p.next, MintStep::Done { prefetch: None });
    assert_eq!(
        b.fetched_with_right(ask.ticket, &batch, Some(r), T),
        Ok(Fetched::Late)
    );
    let mut more = [0u64; 1];
    assert_eq!(b.poll(T, &mut more).filled, 1);
    assert!(!out.contains(&more[0]), "an ID of the copy served again");
    // A right not on whole units is refused (jsSafe: units of 10 ms from
    // its epoch, 2024-01-01).
    let js = Layout::JS_SAFE.epoch_ms() + 1_000_000;
    let whole = MintRight {
        from_ms: js + 10,
        until_ms: js + 100,
        ..r
    };
    assert!(whole.validate(&Layout::JS_SAFE).is_ok());
    for (from_ms, until_ms) in [(js + 1, js + 100), (js + 10, js + 101)] {
        let odd = MintRight {
            from_ms,
            until_ms,
            ..whole
        };
        assert!(odd.validate(&Layout::JS_SAFE).is_err(), "{odd:?}");
    }
}
