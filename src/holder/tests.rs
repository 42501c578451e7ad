use super::*;
use crate::code::ErrorCode;
use crate::error::Error;
use crate::layout::Layout;
use crate::rand::NoRandom;
use crate::secret::LeaseSecret;
use crate::snowflake::Wait;
use crate::wait::DEFAULT_TAKE_OVER_MS;

const T: u64 = 1_735_689_600_000;

fn grant(generation: u64, now: u64) -> Grant {
    Grant {
        worker_id: 7,
        generation,
        expires_at_ms: now + 10_000,
        issue_after_ms: 0,
        ttl_ms: 10_000,
        layout: Layout::LEAF,
        secret: Some(LeaseSecret::from_random([9; 16])),
    }
}

fn holding(config: HolderConfig) -> SnowflakeHolder {
    let mut h = SnowflakeHolder::new(config).unwrap();
    assert!(matches!(
        h.poll(T, &mut []).unwrap().next,
        HolderNext::Lease(_)
    ));
    h.granted(grant(1, T), T).unwrap();
    h
}

fn one(h: &mut SnowflakeHolder, now: u64) -> Result<HolderPoll, Error> {
    h.poll(now, &mut [0u64; 1])
}

#[test]
fn leases_once_on_first_use_and_waits_for_the_answer() {
    let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
    let p = one(&mut h, T).unwrap();
    assert_eq!(
        p.next,
        HolderNext::Lease(LeaseAsk {
            node_now_ms: T,
            previous: None
        })
    );
    assert_eq!(one(&mut h, T + 1).unwrap().next, HolderNext::LeaseInFlight);
    // The answer never came: after the take-over time, ask again.
    assert!(matches!(
        one(&mut h, T + DEFAULT_TAKE_OVER_MS).unwrap().next,
        HolderNext::Lease(_)
    ));
}

#[test]
fn renews_at_half_the_ttl_and_stops_at_the_lapse() {
    let mut h = holding(HolderConfig::default());
    assert_eq!(one(&mut h, T).unwrap().renew, None);
    // Asked for before it is due, it is sent; its answer clears it.
    let early = h.renewal_now(T + 1).unwrap();
    h.renewed(grant(early.claim.generation, T), T + 2);
    let r = one(&mut h, T + 5_000).unwrap().renew.unwrap();
    assert_eq!((r.claim.worker_id, r.claim.generation), (7, 1));
    // One renewal in flight at a time, even when asked for.
    assert_eq!(one(&mut h, T + 5_001).unwrap().renew, None);
    assert_eq!(h.renewal_now(T + 5_002), None);
    // No answer, no renewal: at the lapse minting stops, for good.
    assert_eq!(one(&mut h, T + 9_999).unwrap().filled, 1);
    let lapsed = Error::LeaseExpired {
        worker_id: 7,
        expired_at_ms: T + 10_000,
        now_ms: T + 10_000,
    };
    assert_eq!(one(&mut h, T + 10_000), Err(lapsed.clone()));
    assert_eq!(one(&mut h, T + 20_000), Err(lapsed));
    // A late renewal answer does not bring it back.
    h.renewed(grant(1, T + 9_000), T + 10_001);
    assert!(one(&mut h, T + 10_002).is_err());
}

#[test]
fn a_refused_renewal_stops_minting_and_a_transient_failure_retries() {
    let mut h = holding(HolderConfig::default());
    let r = one(&mut h, T + 5_000).unwrap().renew.unwrap();
    h.renewal_failed(
        r.claim.generation,
        Some(ErrorCode::StoreUnavailable),
        T + 5_010,
    );
    assert_eq!(one(&mut h, T + 5_020).unwrap().renew, None, "backs off");
    let r = one(&mut h, T + 5_010 + RENEW_RETRY_MS)
        .unwrap()
        .renew
        .unwrap();
    // A late refusal of another generation is ignored ...
    h.renewal_failed(99, Some(ErrorCode::LeaseNotHeld), T + 6_100);
    assert_eq!(one(&mut h, T + 6_100).unwrap().filled, 1);
    // ... its own is not.
    h.renewal_failed(r.claim.generation, Some(ErrorCode::LeaseNotHeld), T + 6_200);
    assert!(matches!(
        one(&mut h, T + 6_200),
        Err(Error::LeaseLost {
            cause: Some(ErrorCode::LeaseNotHeld),
            ..
        })
    ));
}

#[test]
fn leasing_again_resumes_after_everything_issued() {
    let config = HolderConfig {
        lease_again: true,
        ..HolderConfig::default()
    };
    let mut h = holding(config);
    let mut out = [0u64; 4096];
    assert_eq!(h.poll(T + 9_999, &mut out).unwrap().filled, 4096);
    let last = out[4095];
    let HolderNext::Lease(ask) = one(&mut h, T + 10_000).unwrap().next else {
        panic!("expected a new lease")
    };
    assert_eq!(
        ask.previous.map(|c| (c.worker_id, c.generation)),
        Some((7, 1))
    );
    // The registry answers with an issue_after in the past: the holder's
    // own last timestamp still bounds the first ID.
    h.granted(grant(2, T + 9_000), T + 9_999).unwrap();
    assert!(matches!(
        one(&mut h, T + 9_999).unwrap().next,
        HolderNext::RetryAfter { .. }
    ));
    let mut next = [0u64; 1];
    assert_eq!(h.poll(T + 10_000, &mut next).unwrap().filled, 1);
    assert!(next[0] > last);
}

#[test]
fn restore_refuses_a_clock_behind_and_resumes_after_the_restart() {
    let mut h = holding(HolderConfig::default());
    assert_eq!(one(&mut h, T + 100).unwrap().filled, 1);
    let saved = h.state();
    assert_eq!(saved.last_timestamp_ms, T + 100);
    assert_eq!(
        SnowflakeHolder::restore(HolderConfig::default(), NoRandom, saved, T + 99).err(),
        Some(Error::ClockBehindLastReport {
            worker_id: Some(7),
            last_timestamp_ms: T + 100,
            node_now_ms: T + 99
        })
    );
    let mut r =
        SnowflakeHolder::restore(HolderConfig::default(), NoRandom, saved, T + 500).unwrap();
    let HolderNext::Lease(ask) = one(&mut r, T + 500).unwrap().next else {
        panic!()
    };
    assert_eq!(
        ask.previous.map(|c| (c.worker_id, c.generation)),
        Some((7, 1))
    );
    // The registry does not answer: the saved lease, unexpired as it
    // is, is not minted under (another process may hold it); the holder
    // asks again.
    r.lease_failed(None, T + 500);
    assert_eq!(r.lease(), None);
    let mut out = [0u64; 1];
    assert!(matches!(
        r.poll(T + 501, &mut out).unwrap(),
        HolderPoll {
            filled: 0,
            next: HolderNext::Lease(_),
            ..
        }
    ));
    // Granted: it mints after the restart moment.
    r.granted(grant(2, T + 501), T + 501).unwrap();
    assert_eq!(r.poll(T + 501, &mut out).unwrap().filled, 1);
    assert_eq!(
        Layout::LEAF.decompose(out[0]).unwrap().timestamp_ms,
        T + 501
    );
    // A refusal does not start it either.
    let mut r =
        SnowflakeHolder::restore(HolderConfig::default(), NoRandom, saved, T + 500).unwrap();
    let _ = one(&mut r, T + 500);
    r.lease_failed(Some(ErrorCode::ClockSkew), T + 500);
    assert_eq!(r.lease(), None);
}

#[test]
fn a_store_that_keeps_failing_is_asked_again_after_a_growing_pause() {
    let config = HolderConfig {
        reserve_ms: 3_000,
        ..HolderConfig::default()
    };
    let mut h = SnowflakeHolder::restore(config, NoRandom, HolderState::default(), T).unwrap();
    let _ = one(&mut h, T);
    h.granted(grant(1, T), T).unwrap();
    let mut now = T;
    let mut pauses = [0; 7];
    for p in &mut pauses {
        let _ = h.save_request(now).unwrap();
        h.save_failed();
        *p = h.save_due_in(now).unwrap();
        now += *p;
    }
    assert_eq!(pauses, [50, 100, 200, 400, 800, 1_000, 1_000]);
    // One save that succeeds ends the pauses: the reservation's own
    // schedule again.
    let s = h.save_request(now).unwrap();
    h.saved(&s);
    assert_eq!(h.save_due_in(now), Some(1_000));
}

#[test]
fn a_restart_in_the_millisecond_of_its_last_save_waits_out_the_reservation() {
    let config = HolderConfig {
        reserve_ms: 3_000,
        ..HolderConfig::default()
    };
    let mut h = SnowflakeHolder::restore(config, NoRandom, HolderState::default(), T).unwrap();
    let _ = one(&mut h, T);
    h.granted(grant(1, T), T).unwrap();
    let saved = h.save_request(T).unwrap();
    h.saved(&saved);
    let mut r = SnowflakeHolder::restore(config, NoRandom, saved, T).unwrap();
    let _ = one(&mut r, T);
    r.granted(grant(2, T), T).unwrap();
    let s = r.save_request(T).unwrap();
    r.saved(&s);
    assert_eq!(
        one(&mut r, T).unwrap().next,
        HolderNext::RetryAfter {
            ms: 3_001,
            reason: Wait::ClockBehind
        }
    );
    // The save timer extends the reservation before the clock gets there.
    assert_eq!(r.save_due_in(T), Some(1_000));
    let s = r.save_request(T + 1_000).unwrap();
    r.saved(&s);
    assert_eq!(one(&mut r, T + 3_001).unwrap().filled, 1);
    // Restarting again at once finds a reservation at most 3 s ahead.
    assert!(SnowflakeHolder::restore(config, NoRandom, s, T + 1_001).is_ok());
}

#[test]
fn a_grant_whose_floor_is_ahead_of_the_clock_is_waited_for() {
    // The registry may grant another node's freed ID whose floor is a
    // little ahead of this clock (within its skew bound): wait, do not
    // fail with the clock "moved backwards".
    let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
    let _ = one(&mut h, T);
    let g = Grant {
        issue_after_ms: T + 1_500,
        ..grant(1, T)
    };
    h.granted(g, T).unwrap();
    assert_eq!(
        one(&mut h, T).unwrap().next,
        HolderNext::RetryAfter {
            ms: 1_501,
            reason: Wait::ClockBehind
        }
    );
    let mut out = [0u64; 1];
    assert_eq!(h.poll(T + 1_501, &mut out).unwrap().filled, 1);
    assert_eq!(
        Layout::LEAF.decompose(out[0]).unwrap().timestamp_ms,
        T + 1_501
    );
}

#[test]
fn a_holder_that_borrows_stops_before_its_borrowed_ids_pass_the_lapse() {
    // Borrowing mints up to `max_borrow_ms` ahead of the clock: such a
    // holder stops once now + borrow reaches the lease's end, so no ID
    // of it lies at or past the end (the next holder's floor).
    let config = HolderConfig {
        max_borrow_ms: 1_000,
        ..HolderConfig::default()
    };
    let mut h = holding(config);
    let end = T + 10_000;
    let mut out = [0u64; 4096 * 4];
    let mut last = 0;
    for now in [T + 8_990, T + 8_999, T + 9_998] {
        if let Ok(p) = h.poll(now, &mut out) {
            for &id in &out[..p.filled] {
                last = last.max(Layout::LEAF.decompose(id).unwrap().timestamp_ms);
            }
        }
    }
    assert!(last > T, "it minted");
    assert!(last < end, "minted at {last}, the lease ends at {end}");
    assert!(matches!(
        one(&mut h, T + 9_000),
        Err(Error::LeaseExpired { .. })
    ));
}

#[test]
fn close_releases_once_and_stops() {
    let mut h = holding(HolderConfig::default());
    assert_eq!(one(&mut h, T + 1).unwrap().filled, 1);
    let release = h.close(T + 2).unwrap();
    assert_eq!(
        (release.claim.worker_id, release.last_timestamp_ms),
        (7, T + 1)
    );
    assert_eq!(h.close(T + 3), None);
    assert!(matches!(
        one(&mut h, T + 3),
        Err(Error::LeaseLost { cause: None, .. })
    ));
    assert_eq!(h.state().lease.map(|l| l.generation), Some(1));
}

/// A holder reserving further ahead than a registry accepts as reported
/// (a minter's rights holder) only lends: it mints nothing, and its
/// renewals report at most its clock + the tolerance, however far ahead it
/// lent. One that mints reports its last timestamp as before.
#[test]
fn a_holder_that_only_lends_mints_nothing_and_reports_within_the_tolerance() {
    use crate::snowflake::MAX_TOLERANCE_MS;
    let config = HolderConfig {
        reserve_ms: MAX_RESERVE_MS,
        lease_again: true,
        lends_only: true,
        ..HolderConfig::default()
    };
    let over = HolderConfig {
        reserve_ms: MAX_RESERVE_MS + 1,
        ..config
    };
    assert!(SnowflakeHolder::new(over).is_err());
    // A holder that mints reserves at most the tolerance ahead.
    let minting = HolderConfig {
        reserve_ms: MAX_TOLERANCE_MS + 1,
        lends_only: false,
        ..config
    };
    assert!(SnowflakeHolder::new(minting).is_err());
    let mut h = holding(config);
    let state = h.save_request(T).unwrap();
    assert_eq!(state.last_timestamp_ms, T + MAX_RESERVE_MS);
    h.saved(&state);
    assert_eq!(one(&mut h, T + 10).unwrap().filled, 0, "it never mints");
    let lent = h.lendable(T + 10).unwrap();
    assert_eq!(lent.until_ms, T + 10_000, "up to its lease's expiry");
    h.lent_until(T + 300_000);
    let at = grant(1, T).renew_at_ms();
    let renewal = h.renewal(at).unwrap();
    assert_eq!(renewal.last_timestamp_ms, at + MAX_TOLERANCE_MS);
    // A holder that mints reports what it issued.
    let mut m = holding(HolderConfig::default());
    m.lent_until(T + 5_000);
    assert_eq!(one(&mut m, T + 10).unwrap().filled, 1);
    assert_eq!(m.renewal(at).unwrap().last_timestamp_ms, T + 5_000);
}
