//! A minter's batches, as the Durable Object and the isolate handle them:
//! - a minter's holder borrowing `MINTER_BORROW_MS` ahead (so that one call
//!   answers up to `MAX_MINT_BATCH`), killed at random and restored from what
//!   it last saved, under a clock that steps back a little and across
//!   restarts, with the registry's floor at its weakest (0): no ID twice,
//!   none at or past the lease's end, none above the saved reservation; and
//!   then, in a calm phase (the store up, the clock going forward), one call
//!   answers a whole `MAX_MINT_BATCH` (refusing everything would pass the
//!   rest);
//! - a busy isolate during a deploy whose minters still run the release
//!   before the borrow (they take at most 4,096 per call and refuse more with
//!   `out_of_range`; a gradual deployment keeps each Durable Object on its
//!   version, so new isolates meet old minters): it is still served.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;

use edgeleaf::{
    code::ErrorCode, holder::Grant, holder::HolderConfig, holder::HolderState,
    holder::SnowflakeHolder, layout::Parts, minted::minter_holder_config, minted::BatchAsk,
    minted::MintConfig, minted::MintStep, minted::MintedBuffer, minted::Refused,
    minted::MAX_MINT_BATCH, minted::MAX_MINT_BATCH_BEFORE_BORROW, secret::LeaseSecret, Layout,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

const T: u64 = 1_735_689_600_000;

fn grant(generation: u64, now: u64, ttl_ms: u64) -> Grant {
    Grant {
        worker_id: 1,
        generation,
        expires_at_ms: now + ttl_ms,
        issue_after_ms: 0,
        ttl_ms,
        layout: Layout::LEAF,
        secret: Some(LeaseSecret::from_random([generation as u8; 16])),
    }
}

proptest! {
    #![proptest_config(props::config(64))]
    #[test]
    fn a_borrowing_minter_never_repeats_nor_passes_its_lease_or_reservation(
        // (ms forward, ms back, ask, kill here, clock back across the kill)
        steps in prop::collection::vec((0u64..4, 0u64..24, 1u32..=MAX_MINT_BATCH, prop::bool::weighted(0.05), 0u64..250, prop::bool::weighted(0.02)), 1..300),
        ttl_ms in 20u64..300,
        reserve_ms in 10u64..200,
    ) {
        // The service's minter, with a shorter reservation (as minted_props).
        let config = HolderConfig { reserve_ms, ..minter_holder_config(5) };
        let mut h = SnowflakeHolder::new(config).unwrap();
        let mut now = T;
        let mut generation = 1;
        h.granted(grant(generation, now, ttl_ms), now).unwrap();
        let mut saved: Option<HolderState> = None;
        let mut seen = HashSet::new();
        let mut out = vec![0u64; MAX_MINT_BATCH as usize];
        let mut store_down = false;
        // After the random steps, a calm phase: the store up, the clock
        // 4 ms forward a step (past the 3 ms borrowed), whole batches asked.
        let calm = (0u64..250).map(|_| (4, 0, MAX_MINT_BATCH, false, 0, false));
        let (mut minted, mut calm_full) = (0usize, false);
        for (i, (fwd, back, ask, kill, kill_back, store_up)) in steps.iter().copied().chain(calm).enumerate() {
            let calm = i >= steps.len();
            // The store fails now and then, and stays down for a while.
            if store_up { store_down = !store_down; }
            if calm { store_down = false; }
            // Now and then back by up to 7 ms (within `max_backward_ms` + the borrow).
            now = (now + fwd).saturating_sub(back.saturating_sub(16)).max(T);
            if kill {
                if let Some(state) = saved {
                    now = now.saturating_sub(kill_back).max(T);
                    match SnowflakeHolder::restore(config, edgeleaf::rand::NoRandom, state, now) {
                        Ok(r) => h = r,
                        Err(_) => continue,
                    }
                }
            }
            if h.lease().is_none() {
                generation += 1;
                let _ = h.poll(now, &mut []);
                let _ = h.granted(grant(generation, now, ttl_ms), now);
            }
            if h.save_due_in(now) == Some(0) {
                if let Some(s) = h.save_request(now) {
                    if store_down {
                        h.save_failed();
                    } else {
                        h.saved(&s);
                        saved = Some(s);
                    }
                }
            }
            let expires = h.lease().map(|g| g.expires_at_ms);
            let Ok(poll) = h.poll(now, &mut out[..ask as usize]) else { continue };
            let reserved = saved.as_ref().map_or(0, |s| s.last_timestamp_ms);
            for &id in &out[..poll.filled] {
                let ts = Layout::LEAF.decompose(id).unwrap().timestamp_ms;
                prop_assert!(seen.insert(id), "ID {} twice", id);
                prop_assert!(ts <= now + 3, "{} ms ahead", ts - now);
                prop_assert!(ts <= reserved, "past the reservation {}", reserved);
                prop_assert!(ts < expires.unwrap(), "at or past the lease's end");
            }
            minted += poll.filled;
            if calm && poll.filled == MAX_MINT_BATCH as usize {
                calm_full = true;
                break;
            }
        }
        // Refusing everything would pass the checks above: once calm, the
        // minter answers a whole batch in one call (the borrow's promise).
        prop_assert!(
            calm_full,
            "no call answered {} IDs in 1 s of calm ({} minted in all)",
            MAX_MINT_BATCH,
            minted
        );
    }
}

/// A minter of the previous release: no borrowing, at most 4,096 per call
/// (the rest of its current unit), `out_of_range` above that.
struct OldMinter {
    worker_id: u32,
    unit_ms: u64,
    next_seq: u64,
}

impl OldMinter {
    fn mint(&mut self, ask: BatchAsk, now: u64) -> Result<Vec<(u64, u64)>, ErrorCode> {
        if ask.count == 0 || ask.count > MAX_MINT_BATCH_BEFORE_BORROW {
            return Err(ErrorCode::OutOfRange);
        }
        if now > self.unit_ms {
            self.unit_ms = now;
            self.next_seq = 0;
        }
        let left = 4_096 - self.next_seq;
        if left == 0 {
            return Err(ErrorCode::SequenceExhausted);
        }
        let n = u64::from(ask.count).min(left);
        let parts = Parts {
            timestamp_ms: self.unit_ms,
            worker_id: self.worker_id,
            sequence: u32::try_from(self.next_seq).unwrap(),
        };
        let start = Layout::LEAF.compose(parts).unwrap().get();
        self.next_seq += n;
        Ok(vec![(start, start + n)])
    }
}

/// Asks minter `ask.minter`, as worker/src/isolate/minted.rs `fetch_batch`
/// does; `Some(then)` on a refusal.
fn fetch(
    buf: &mut MintedBuffer,
    minters: &mut [OldMinter],
    ask: BatchAsk,
    now: u64,
) -> Option<Refused> {
    match minters[ask.minter as usize].mint(ask, now) {
        Ok(ranges) => {
            buf.fetched(ask.ticket, &ranges, now).unwrap();
            None
        }
        Err(code) => Some(buf.fetch_refused(ask.ticket, code, now, 1_000)),
    }
}

#[test]
fn a_busy_isolate_is_served_by_minters_of_the_previous_release() {
    let mut minters: Vec<OldMinter> = (0..16)
        .map(|i| OldMinter {
            worker_id: i,
            unit_ms: 0,
            next_seq: 0,
        })
        .collect();
    let mut buf = MintedBuffer::new(Layout::LEAF, MintConfig::new(16, 3)).unwrap();
    let tries = buf.config().tries_per_request();
    let (mut unserved, mut largest_ask) = (Vec::new(), 0);
    // 1,000 IDs every 5 ms (200,000/s, one busy isolate) for 3 s.
    let mut out = vec![0u64; 1_000];
    for step in 0..600u64 {
        let now = T + step * 5;
        let (mut filled, mut failures, mut rounds) = (0, 0, 0);
        while filled < out.len() && failures < tries && rounds < 20 {
            rounds += 1;
            let poll = buf.poll(now, &mut out[filled..]);
            filled += poll.filled;
            let ask = match poll.next {
                MintStep::Done {
                    prefetch: Some(ask),
                }
                | MintStep::FetchNow(ask) => ask,
                MintStep::Done { prefetch: None } | MintStep::Wait => continue,
            };
            largest_ask = largest_ask.max(ask.count);
            match fetch(&mut buf, &mut minters, ask, now) {
                None | Some(Refused::Again) => {}
                Some(Refused::Next) => failures += 1,
                Some(Refused::GiveUp { .. }) => break,
            }
        }
        if filled < out.len() && step >= 200 {
            unserved.push(step);
        }
    }
    assert!(
        largest_ask > MAX_MINT_BATCH_BEFORE_BORROW,
        "the load asks more than the old limit"
    );
    assert!(
        unserved.is_empty(),
        "{} of 400 requests after the first second unserved (first at step {:?}); the batch stays at {}",
        unserved.len(),
        unserved.first(),
        buf.batch()
    );
}
