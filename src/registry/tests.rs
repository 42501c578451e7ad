use super::*;
use crate::error::{ClockReference, Error};
use crate::holder::Renewal;
use crate::layout::Layout;
use crate::secret::LeaseSecret;
use crate::secret::{Proof, SecretHash};
use crate::snowflake::MAX_TOLERANCE_MS;
use alloc::string::String;
use alloc::vec::Vec;
use sha2::{Digest, Sha256};

const T: u64 = 1_700_000_000_000;
const OWNER: &str = "team-a";

fn reg(capacity: u32) -> Registry {
    Registry::new(RegistryConfig {
        capacity,
        ttl_ms: 10_000,
        grace_ms: 5_000,
        max_skew_ms: 1_000,
        minters: 0,
        per_owner: None,
        lenders: 0,
        lender_ttl_ms: crate::registry::DEFAULT_LENDER_TTL_MS,
    })
    .unwrap()
}

/// Each grant's secret: unique per grant, known to the test.
fn secret_of(generation: u64) -> LeaseSecret {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&generation.to_le_bytes());
    LeaseSecret::from_random(b)
}

/// The host's hash of a secret.
fn sha256(s: &LeaseSecret) -> SecretHash {
    SecretHash(Sha256::digest(s.as_bytes()).into())
}

/// The hash of grant `generation`'s secret.
fn hash_of(generation: u64) -> SecretHash {
    sha256(&secret_of(generation))
}

fn proof(l: &Lease) -> Proof {
    Proof {
        worker_id: l.worker_id,
        generation: l.generation,
        secret_hash: Some(hash_of(l.generation)),
    }
}

fn rn(claim: Proof, node_now_ms: u64, last_timestamp_ms: u64) -> Renewal<Proof> {
    Renewal {
        claim,
        node_now_ms,
        last_timestamp_ms,
    }
}

/// Leases as `OWNER` with a fresh secret.
fn lease(
    r: &mut Registry,
    key: &str,
    node_now: u64,
    reg_now: u64,
    previous: Option<Proof>,
) -> Result<Lease, Error> {
    let ask = GrantRequest {
        owner: OWNER,
        node_key: key,
        node_now_ms: node_now,
        previous,
        secret_hash: hash_of(r.next_generation()),
    };
    r.lease(ask, reg_now)
}

#[test]
fn lowest_free_id_and_no_sharing() {
    let mut r = reg(3);
    let ids: Vec<u32> = ["a", "b", "c"]
        .iter()
        .map(|k| lease(&mut r, k, T, T, None).unwrap().worker_id)
        .collect();
    assert_eq!(ids, [0, 1, 2]);
    assert_eq!(
        lease(&mut r, "d", T, T, None),
        Err(Error::NoFreeWorkerId { capacity: 3 })
    );
    // "a" again without proof: its ID is live, so it gets none.
    assert!(lease(&mut r, "a", T, T, None).is_err());
}

#[test]
fn lease_expiry_at_ttl_and_recycling_after_grace() {
    let mut r = reg(1);
    let a = lease(&mut r, "a", T, T, None).unwrap();
    assert_eq!(a.expires_at_ms, T + 10_000);
    // TTL − 1 ms: renewal works.
    let a = r
        .renew(OWNER, &rn(proof(&a), T + 9_999, T + 9_000), T + 9_999)
        .unwrap();
    // TTL + 1 ms after that renewal: refused, the node must stop.
    let lapsed_at = a.expires_at_ms;
    assert_eq!(
        r.renew(OWNER, &rn(proof(&a), lapsed_at + 1, T), lapsed_at + 1),
        Err(Error::LeaseExpired {
            worker_id: 0,
            expired_at_ms: lapsed_at,
            now_ms: lapsed_at + 1
        })
    );
    // Exactly at TTL it has lapsed too.
    assert!(r
        .renew(OWNER, &rn(proof(&a), lapsed_at, T), lapsed_at)
        .is_err());
    // Within the grace period nobody else gets it.
    let g = lapsed_at + 5_000;
    assert!(matches!(
        lease(&mut r, "b", g - 1, g - 1, None),
        Err(Error::NoFreeWorkerId { .. })
    ));
    // After TTL + grace it is recycled, issuing only after the old lease's end.
    let b = lease(&mut r, "b", g, g, None).unwrap();
    assert_eq!(b.worker_id, 0);
    assert!(b.generation > a.generation);
    assert_eq!(b.issue_after_ms, lapsed_at);
    // The old holder is fenced off.
    assert!(matches!(
        r.renew(OWNER, &rn(proof(&a), g, g), g),
        Err(Error::LeaseNotHeld { .. })
    ));
}

#[test]
fn a_node_gets_its_previous_id_back_once_its_grant_is_no_longer_live() {
    let mut r = reg(4);
    lease(&mut r, "x", T, T, None).unwrap();
    let a = lease(&mut r, "a", T, T, None).unwrap();
    // With proof while the grant is live: another ID (the proof may be
    // a copy, held by a second process still minting under it), and
    // the grant stays its holder's.
    let other = lease(&mut r, "a", T + 1, T + 1, Some(proof(&a))).unwrap();
    assert_ne!(other.worker_id, a.worker_id);
    assert!(r.renew(OWNER, &rn(proof(&a), T + 2, T + 1), T + 2).is_ok());
    // Lapsed, not yet free: the proof takes it back, issuing after its
    // expiry, though the node's clock lags behind that.
    let lapsed_at = T + 2 + 10_000;
    let again = lease(&mut r, "a", lapsed_at - 500, lapsed_at + 1, Some(proof(&a))).unwrap();
    assert_eq!(again.worker_id, a.worker_id);
    assert!(again.generation > a.generation);
    assert_eq!(again.issue_after_ms, lapsed_at);
    // Released: free, and it comes back to the same node.
    r.release(OWNER, &rn(proof(&again), 0, lapsed_at), lapsed_at + 2)
        .unwrap();
    let third = lease(&mut r, "a", lapsed_at + 3, lapsed_at + 3, None).unwrap();
    assert_eq!(third.worker_id, a.worker_id);
    assert_eq!(third.issue_after_ms, lapsed_at);
}

#[test]
fn only_the_holder_renews_releases_or_reclaims() {
    let mut r = reg(4);
    let a = lease(&mut r, "a", T, T, None).unwrap();
    let before = r.clone();
    let wrong = Proof {
        secret_hash: Some(hash_of(999)),
        ..proof(&a)
    };
    let none = Proof {
        secret_hash: None,
        ..proof(&a)
    };
    let secret_refused = Error::NotLeaseHolder {
        worker_id: a.worker_id,
        mismatch: "secret",
    };
    let owner_refused = Error::NotLeaseHolder {
        worker_id: a.worker_id,
        mismatch: "owner",
    };
    for p in [wrong, none] {
        assert_eq!(
            r.renew(OWNER, &rn(p, T + 1, T), T + 1).unwrap_err(),
            secret_refused
        );
        assert_eq!(
            r.release(OWNER, &rn(p, 0, T), T + 1).unwrap_err(),
            secret_refused
        );
        assert_eq!(
            lease(&mut r, "a", T + 1, T + 1, Some(p)).unwrap_err(),
            secret_refused
        );
    }
    // The right secret under another credential is refused too.
    assert_eq!(
        r.renew("team-b", &rn(proof(&a), T + 1, T), T + 1)
            .unwrap_err(),
        owner_refused
    );
    assert_eq!(
        r.release("team-b", &rn(proof(&a), 0, T), T + 1)
            .unwrap_err(),
        owner_refused
    );
    // Nothing changed: the holder's lease is as it was, and it renews.
    assert_eq!(r, before);
    assert!(r.renew(OWNER, &rn(proof(&a), T + 2, T + 1), T + 2).is_ok());
    // A proof of a grant that is gone is no proof (and no refusal): the
    // node gets a fresh ID.
    let g = T + 2 + 10_000 + 5_000;
    let later = lease(&mut r, "z", g, g, Some(wrong)).unwrap();
    assert_eq!(later.worker_id, 0);
}

#[test]
fn eviction_stops_the_holder_and_fences_past_its_end_plus_skew() {
    let mut r = reg(1);
    let a = lease(&mut r, "a", T, T, None).unwrap();
    assert!(matches!(r.evict(0, T + 100), Ok(end) if end == a.expires_at_ms + 1_000));
    assert!(r.evict(0, T + 100).is_err(), "evicted twice");
    // The holder is refused at its next renewal, so it stops.
    assert!(matches!(
        r.renew(OWNER, &rn(proof(&a), T + 200, T + 100), T + 200),
        Err(Error::LeaseNotHeld { .. })
    ));
    assert_eq!(r.status(r.slot(0).unwrap(), T + 200), SlotStatus::Lapsed);
    // Reused only after its end (expiry + skew) + grace, issuing after the end.
    let free_at = a.expires_at_ms + 1_000 + 5_000;
    assert!(lease(&mut r, "b", free_at - 1, free_at - 1, None).is_err());
    let b = lease(&mut r, "b", free_at, free_at, None).unwrap();
    assert_eq!(b.issue_after_ms, a.expires_at_ms + 1_000);
    // Nothing to evict on a free or never-leased ID.
    assert!(reg(2).evict(1, T).is_err());
}

#[test]
fn grants_from_before_secrets_are_fenced_and_only_minters_reclaim_them() {
    let mut r = Registry::new(RegistryConfig {
        minters: 1,
        ..*reg(3).config()
    })
    .unwrap();
    let m = r.lease_minter(0, T, None, hash_of(1), T).unwrap();
    let n = lease(&mut r, "n", T, T, None).unwrap();
    // As an old store has them: no secret.
    let slots: Vec<WorkerSlot> = r
        .slots()
        .cloned()
        .map(|s| WorkerSlot { secret: None, ..s })
        .collect();
    let mut r = Registry::from_parts(*r.config(), r.next_generation(), slots).unwrap();
    let legacy = |l: &Lease| Proof {
        secret_hash: None,
        ..proof(l)
    };
    // Nobody renews or releases them, with or without a secret.
    assert!(r.renew(OWNER, &rn(legacy(&n), T + 1, T), T + 1).is_err());
    assert!(r.renew(OWNER, &rn(proof(&n), T + 1, T), T + 1).is_err());
    assert!(r.release(OWNER, &rn(legacy(&n), 0, T), T + 1).is_err());
    // The node that held it, restarting without a secret, gets another
    // ID while it is live (no refusal: it had nothing to prove with).
    let n2 = lease(&mut r, "n", T + 1, T + 1, Some(legacy(&n))).unwrap();
    assert_ne!(n2.worker_id, n.worker_id);
    // A minter reclaims its own by generation (it is the service's own).
    let m2 = r
        .lease_minter(0, T + 2, Some(legacy(&m)), hash_of(7), T + 2)
        .unwrap();
    assert_eq!((m2.worker_id, m2.issue_after_ms), (0, T + 2));
    // The legacy grant lapses, then is fenced at expiry + skew.
    let free_at = n.expires_at_ms + 1_000 + 5_000;
    r.release(OWNER, &rn(proof(&n2), 0, T + 5), T + 5).unwrap();
    assert!(
        lease(&mut r, "x", free_at - 1, free_at - 1, None)
            .unwrap()
            .worker_id
            != n.worker_id
    );
    let x = lease(&mut r, "y", free_at, free_at, None).unwrap();
    assert_eq!(
        (x.worker_id, x.issue_after_ms),
        (n.worker_id, n.expires_at_ms + 1_000)
    );
}

#[test]
fn clock_checks_refuse_bad_nodes() {
    let mut r = reg(8);
    assert!(matches!(
        lease(&mut r, "a", T + 1_001, T, None),
        Err(Error::ClockSkew {
            reference: ClockReference::Registry,
            ..
        })
    ));
    // Two live nodes running 900 ms ahead of the registry.
    lease(&mut r, "a", T + 900, T, None).unwrap();
    lease(&mut r, "b", T + 900, T, None).unwrap();
    // Within 1 s of the registry, but 1.1 s behind the live average.
    assert!(matches!(
        lease(&mut r, "c", T - 200, T, None),
        Err(Error::ClockSkew {
            reference: ClockReference::LiveNodesAverage,
            ..
        })
    ));
    assert!(lease(&mut r, "c", T + 500, T, None).is_ok());
}

#[test]
fn a_clock_behind_the_last_report_is_refused() {
    let mut r = reg(1);
    let a = lease(&mut r, "a", T, T, None).unwrap();
    let a = r
        .renew(OWNER, &rn(proof(&a), T + 2_000, T + 1_999), T + 2_000)
        .unwrap();
    // The node's clock went back 500 ms since its last report.
    assert!(matches!(
        r.renew(OWNER, &rn(proof(&a), T + 1_500, T + 1_500), T + 2_500),
        Err(Error::ClockBehindLastReport { .. })
    ));
    r.release(OWNER, &rn(proof(&a), 0, T + 1_999), T + 2_600)
        .unwrap();
    // A restart whose clock is behind the last issued timestamp: refused.
    assert!(matches!(
        lease(&mut r, "a", T + 1_000, T + 1_500, None),
        Err(Error::ClockBehindLastReport { .. })
    ));
}

#[test]
fn a_timestamp_far_ahead_cannot_fence_a_worker_id_for_ever() {
    let mut r = reg(2);
    let a = lease(&mut r, "a", T, T, None).unwrap();
    let far = T + 9_000_000_000_000;
    assert!(matches!(
        r.renew(OWNER, &rn(proof(&a), T + 1, far), T + 1),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        r.release(OWNER, &rn(proof(&a), T + 1, far), T + 1),
        Err(Error::OutOfRange { .. })
    ));
    // The most a release may report: what its holder could have minted
    // by a clock within the skew bound of the registry's, borrowing the
    // most. Its ID is then passed over by other nodes (not refused),
    // counts against its owner's share while the floor is ahead, and
    // only its own node is refused.
    let most = T + 2 + 1_000 + MAX_TOLERANCE_MS;
    assert!(matches!(
        r.release(OWNER, &rn(proof(&a), T + 1, most + 1), T + 2),
        Err(Error::OutOfRange { .. })
    ));
    r.release(OWNER, &rn(proof(&a), T + 1, most), T + 2)
        .unwrap();
    assert!(r.withheld(r.slot(a.worker_id).unwrap(), T + 2));
    assert_eq!(r.withheld_by(OWNER, most - 1_001), 1);
    assert_eq!(r.withheld_by(OWNER, most - 1_000), 0);
    let b = lease(&mut r, "b", T + 3, T + 3, None).unwrap();
    assert_ne!(b.worker_id, a.worker_id);
    assert!(matches!(
        lease(&mut r, "a", T + 3, T + 3, None),
        Err(Error::ClockBehindLastReport { .. })
    ));
    // Another credential, even naming an old generation, learns nothing.
    assert!(matches!(
        r.renew("team-b", &rn(proof(&a), T + 4, T), T + 4),
        Err(Error::NotLeaseHolder {
            mismatch: "owner",
            ..
        })
    ));
}

#[test]
fn a_freed_id_whose_floor_is_a_little_ahead_is_granted_to_wait_for() {
    let mut r = reg(1);
    let a = lease(&mut r, "a", T, T, None).unwrap();
    r.release(OWNER, &rn(proof(&a), T, T + 800), T).unwrap();
    // Another node, its clock 100 ms behind the registry's: no refusal,
    // no "no free ID": it issues after the floor.
    let b = lease(&mut r, "b", T - 100, T + 1, None).unwrap();
    assert_eq!((b.worker_id, b.issue_after_ms), (0, T + 800));
    // A floor further ahead than the skew bound keeps it from others.
    r.release(OWNER, &rn(proof(&b), T + 1, T + 1_002), T + 1)
        .unwrap();
    assert!(matches!(
        lease(&mut r, "c", T + 1, T + 1, None),
        Err(Error::NoFreeWorkerId { .. })
    ));
    assert_eq!(r.withheld_by(OWNER, T + 1), 1);
    assert_eq!(lease(&mut r, "c", T + 2, T + 2, None).unwrap().worker_id, 0);
}

#[test]
fn a_holder_reporting_timestamps_ahead_of_its_clock_is_renewed_again() {
    // A restarted holder resumes after its saved reservation, up to a
    // few seconds ahead of its clock, and reports that as issued.
    let mut r = reg(1);
    let a = lease(&mut r, "a", T, T, None).unwrap();
    r.renew(OWNER, &rn(proof(&a), T + 1_000, T + 3_000), T + 1_000)
        .unwrap();
    let again = r.renew(OWNER, &rn(proof(&a), T + 2_000, T + 3_000), T + 2_000);
    assert_eq!(again.map(|l| l.issue_after_ms), Ok(T + 3_000));
}

#[test]
fn reserved_ids_go_to_their_minters_only() {
    let mut r = Registry::new(RegistryConfig {
        minters: 2,
        ..*reg(4).config()
    })
    .unwrap();
    // Others draw from 2..4 only, and may not pose as minters.
    assert_eq!(lease(&mut r, "a", T, T, None).unwrap().worker_id, 2);
    assert_eq!(lease(&mut r, "b", T, T, None).unwrap().worker_id, 3);
    assert_eq!(
        lease(&mut r, "c", T, T, None),
        Err(Error::NoFreeWorkerId { capacity: 4 })
    );
    assert_eq!(
        lease(&mut r, "minter:0", T, T, None),
        Err(Error::ReservedNodeKey {
            prefix: MINTER_KEY_PREFIX
        })
    );
    // Minter i gets worker ID i however full the rest is.
    let m1 = r
        .lease_minter(1, T, None, hash_of(r.next_generation()), T)
        .unwrap();
    assert_eq!((m1.worker_id, m1.node_key.as_str()), (1, "minter:1"));
    assert!(matches!(
        r.lease_minter(2, T, None, hash_of(0), T),
        Err(Error::OutOfRange { .. })
    ));
    // A restarted minter proves its grant and keeps its ID; one that
    // cannot prove it waits for the lapse like anyone else.
    let next = hash_of(r.next_generation());
    let again = r
        .lease_minter(1, T + 5, Some(proof(&m1)), next, T + 5)
        .unwrap();
    assert_eq!(again.worker_id, 1);
    assert_eq!(again.issue_after_ms, T + 5);
    assert!(r.lease_minter(1, T + 6, None, hash_of(0), T + 6).is_err());
    // Claim of a reserved ID does not get an ordinary node into it.
    assert!(lease(&mut r, "a", T, T, Some(proof(&again))).is_err());
    // A node that held an ID before it was reserved keeps it until it
    // lapses; the minter waits.
    let mut small = reg(4);
    let x = lease(&mut small, "x", T, T, None).unwrap();
    assert_eq!(x.worker_id, 0);
    let mut grown = Registry::from_parts(
        RegistryConfig {
            minters: 1,
            ..*small.config()
        },
        small.next_generation(),
        small.slots().cloned(),
    )
    .unwrap();
    assert!(grown.lease_minter(0, T, None, hash_of(0), T).is_err());
    let later = T + 10_000 + 5_000;
    let m0 = grown
        .lease_minter(0, later, None, hash_of(0), later)
        .unwrap();
    assert_eq!((m0.worker_id, m0.issue_after_ms), (0, T + 10_000));
}

/// The minters' count grows (an upgrade: 16 to 36 in the service), over
/// IDs that nodes hold: renewing, such a node would keep its ID for ever and
/// that minter never start. Its renewal is refused instead; it leases again
/// above the range, and the minter takes the ID once the grant lapsed.
#[test]
fn a_node_on_an_id_the_minters_grew_over_moves_and_the_minter_gets_it() {
    let old = RegistryConfig {
        minters: 2,
        ..*reg(8).config()
    };
    let mut r = Registry::new(old).unwrap();
    let m0 = r
        .lease_minter(0, T, None, hash_of(r.next_generation()), T)
        .unwrap();
    let a = lease(&mut r, "a", T, T, None).unwrap();
    let b = lease(&mut r, "b", T, T, None).unwrap();
    assert_eq!((a.worker_id, b.worker_id), (2, 3));
    let mut r = Registry::from_parts(
        RegistryConfig { minters: 4, ..old },
        r.next_generation(),
        r.slots().cloned(),
    )
    .unwrap();
    // A stranger still learns only that it is not the holder.
    assert!(matches!(
        r.renew("team-b", &rn(proof(&a), T + 1, T), T + 1),
        Err(Error::NotLeaseHolder { .. })
    ));
    // The minter's own grant, inside the range, renews as before.
    assert!(r.renew("", &rn(proof(&m0), T + 1, T), T + 1).is_ok());
    // Node a renews as a holder does, every few seconds, and is refused
    // each time; nothing changes. Minter 2 waits out a's grant.
    let before = r.clone();
    for now in (T + 1_000..T + 15_000).step_by(3_000) {
        assert_eq!(
            r.renew(OWNER, &rn(proof(&a), now, now - 1), now),
            Err(Error::LeaseNotHeld {
                worker_id: 2,
                generation: a.generation
            })
        );
    }
    assert_eq!(r, before);
    assert!(matches!(
        r.lease_minter(2, T + 1_000, None, hash_of(0), T + 1_000),
        Err(Error::NoFreeWorkerId { .. })
    ));
    // It leases again, naming its grant: an ID above the range. So does b,
    // whose ID 3 is now reserved too.
    let a2 = lease(&mut r, "a", T + 1_000, T + 1_000, Some(proof(&a))).unwrap();
    let b2 = lease(&mut r, "b", T + 1_000, T + 1_000, Some(proof(&b))).unwrap();
    assert_eq!((a2.worker_id, b2.worker_id), (4, 5));
    assert!(r
        .renew(OWNER, &rn(proof(&a2), T + 2_000, T + 1_999), T + 2_000)
        .is_ok());
    // After the lapse and the grace, minter 2 issues after a's grant ended.
    let later = a.expires_at_ms + 5_000;
    let m2 = r
        .lease_minter(2, later, None, hash_of(r.next_generation()), later)
        .unwrap();
    assert_eq!((m2.worker_id, m2.issue_after_ms), (2, a.expires_at_ms));
    assert!(r
        .renew("", &rn(proof(&m2), later + 1, later), later + 1)
        .is_ok());
}

#[test]
fn a_minters_grant_is_never_released_reclaimed_or_evicted_by_anyone_else() {
    let mut r = Registry::new(RegistryConfig {
        minters: 1,
        ..*reg(3).config()
    })
    .unwrap();
    let m = r.lease_minter(0, T, None, hash_of(1), T).unwrap();
    let before = r.clone();
    let refused = Error::ReservedWorkerId { worker_id: 0 };
    // Named as `previous`, with the right secret or not, by a node or by
    // the service's own isolates (owner ""): refused, not passed over.
    let mut wrong = proof(&m);
    wrong.secret_hash = Some(hash_of(9));
    for (owner, p) in [(OWNER, proof(&m)), ("", proof(&m)), (OWNER, wrong)] {
        let ask = GrantRequest {
            owner,
            node_key: "n",
            node_now_ms: T,
            previous: Some(p),
            secret_hash: hash_of(5),
        };
        assert_eq!(r.lease(ask, T + 1), Err(refused.clone()));
        assert_eq!(r.release(owner, &rn(p, T, T), T + 1), Err(refused.clone()));
    }
    // Nor does the operator evict it.
    assert_eq!(r.evict(0, T + 1), Err(refused.clone()));
    // A node's own older grant of that ID (from before it was reserved)
    // is a stale proof, passed over as any other.
    let stale = Proof {
        generation: m.generation - 1,
        ..proof(&m)
    };
    let ask = GrantRequest {
        owner: OWNER,
        node_key: "n",
        node_now_ms: T,
        previous: Some(stale),
        secret_hash: hash_of(6),
    };
    assert!(r.clone().lease(ask, T + 1).is_ok());
    assert_eq!(r, before);
    // The minter renews and reclaims it as before.
    assert!(r.renew("", &rn(proof(&m), T + 2, T + 1), T + 2).is_ok());
    let again = r.lease_minter(0, T + 3, Some(proof(&m)), hash_of(2), T + 3);
    assert_eq!(again.map(|l| l.worker_id), Ok(0));
}

#[test]
fn per_owner_is_never_passed_by_proving_a_live_grant_under_another_key() {
    let mut r = Registry::new(RegistryConfig {
        per_owner: Some(1),
        ..*reg(4).config()
    })
    .unwrap();
    let a = lease(&mut r, "a", T, T, None).unwrap();
    // Proved, but under another node key: another ID would be a second.
    assert_eq!(
        lease(&mut r, "b", T + 1, T + 1, Some(proof(&a))),
        Err(Error::WorkerIdLimit { limit: 1 })
    );
    assert_eq!(r.withheld_by(OWNER, T + 1), 1);
}

#[test]
fn config_and_parts_are_validated() {
    let mut c = RegistryConfig::new(&Layout::LEAF);
    assert_eq!(c.capacity, 1024);
    c.max_skew_ms = c.grace_ms;
    assert!(Registry::new(c).is_err());
    let ok = RegistryConfig::new(&Layout::JS_SAFE);
    assert_eq!(ok.capacity, 128);
    let too_many = RegistryConfig { minters: 65, ..ok };
    assert!(too_many.validate().is_err());
    let slot = WorkerSlot {
        worker_id: 200,
        node_key: "n".into(),
        generation: 1,
        expires_at_ms: 0,
        released: false,
        last_timestamp_ms: 0,
        reported_clock_ms: 0,
        reported_at_ms: 0,
        owner: String::new(),
        secret: None,
        evicted: false,
    };
    assert!(Registry::from_parts(ok, 5, [slot.clone()]).is_err());
    let mut r = reg(2);
    lease(&mut r, "a", T, T, None).unwrap();
    let back = Registry::from_parts(*r.config(), r.next_generation(), r.slots().cloned()).unwrap();
    assert_eq!(back, r);
}

/// A lender (a minter's rights holder, the last `lenders` of the minters'
/// IDs) is granted and renewed for `lender_ttl_ms`, and each expiry it is
/// answered becomes its ID's floor; a batch minter's grant is as before.
#[test]
fn a_lenders_grant_lasts_its_ttl_and_its_expiry_is_the_floor() {
    let config = RegistryConfig {
        minters: 4,
        lenders: 2,
        lender_ttl_ms: 300_000,
        ..*reg(8).config()
    };
    let mut r = Registry::new(config).unwrap();
    let batch = r
        .lease_minter(1, T, None, hash_of(r.next_generation()), T)
        .unwrap();
    let lender = r
        .lease_minter(2, T, None, hash_of(r.next_generation()), T)
        .unwrap();
    assert_eq!((batch.ttl_ms, batch.expires_at_ms), (10_000, T + 10_000));
    assert_eq!(r.slot(1).unwrap().last_timestamp_ms, 0);
    assert_eq!(
        (lender.ttl_ms, lender.expires_at_ms),
        (300_000, T + 300_000)
    );
    assert_eq!(lender.issue_after_ms, 0, "its holder starts at once");
    assert_eq!(r.slot(2).unwrap().last_timestamp_ms, T + 300_000);
    // Renewed at half, reporting its clock + the tolerance (what it lent
    // lies further ahead): the new expiry is the floor.
    let now = T + 150_000;
    let renewed = r
        .renew("", &rn(proof(&lender), now, now + MAX_TOLERANCE_MS), now)
        .unwrap();
    assert_eq!(renewed.expires_at_ms, now + 300_000);
    assert_eq!(r.slot(2).unwrap().last_timestamp_ms, now + 300_000);
    // A shorter TTL since (the operator's): the expiry does not move back.
    let mut shorter = Registry::from_parts(
        RegistryConfig {
            lender_ttl_ms: 60_000,
            ..config
        },
        r.next_generation(),
        r.slots().cloned(),
    )
    .unwrap();
    let again = shorter
        .renew("", &rn(proof(&lender), now + 1, now + 1), now + 1)
        .unwrap();
    assert_eq!(again.expires_at_ms, now + 300_000);
    // Nor does a restarted lender's reclaim of its live grant: it is
    // refused until its clock nears the floor (everything it lent), then
    // issues after it.
    let end = now + 300_000;
    assert!(matches!(
        shorter.lease_minter(2, now + 2, Some(proof(&lender)), hash_of(0), now + 2),
        Err(Error::ClockBehindLastReport { .. })
    ));
    let at = end - 500;
    let back = shorter
        .lease_minter(
            2,
            at,
            Some(proof(&lender)),
            hash_of(shorter.next_generation()),
            at,
        )
        .unwrap();
    assert_eq!((back.worker_id, back.issue_after_ms), (2, end));
    assert_eq!(back.expires_at_ms, end.max(at + 60_000));
}

/// The release before (0.1.0: a 60 s TTL, only the batch IDs reserved)
/// takes the registry over (a rollback, or a gradual deploy hosting the
/// registry on it while a minter runs this one): its renewal of a lender
/// moves the expiry back to its clock + 60 s, but not the floor, so the
/// lender's ID — anyone's there — goes to an outside node only past every
/// right lent under the longer expiry.
#[test]
fn a_registry_that_moves_a_lenders_expiry_back_keeps_its_floor() {
    let config = RegistryConfig {
        minters: 4,
        lenders: 2,
        lender_ttl_ms: 300_000,
        ..*reg(8).config()
    };
    let mut r = Registry::new(config).unwrap();
    r.lease_minter(2, T, None, hash_of(r.next_generation()), T)
        .unwrap();
    let old = RegistryConfig {
        minters: 2,
        ttl_ms: 60_000,
        ..*reg(8).config()
    };
    // Its renewal (0.1.0's `renew`): the report kept if higher, the
    // expiry set to its clock + its TTL, whatever it was.
    let now = T + 150_000;
    let slots = r.slots().cloned().map(|mut s| {
        if s.worker_id == 2 {
            s.last_timestamp_ms = s.last_timestamp_ms.max(now + MAX_TOLERANCE_MS);
            s.expires_at_ms = now + 60_000;
            s.reported_clock_ms = now;
            s.reported_at_ms = now;
        }
        s
    });
    let mut old = Registry::from_parts(old, r.next_generation(), slots).unwrap();
    // Past the shortened lease and its grace, ID 2 is free but its floor
    // is ahead: an outside node gets another.
    let at = now + 60_000 + 5_000;
    let a = lease(&mut old, "a", at, at, None).unwrap();
    assert_ne!(a.worker_id, 2);
    // Once the clock passed the floor, ID 2 is given, after it.
    let at = T + 300_000;
    let b = lease(&mut old, "b", at, at, None).unwrap();
    assert_eq!((b.worker_id, b.issue_after_ms), (2, T + 300_000));
}

/// The split the Worker and the simulation run: with rights, every minter's
/// rights holder (`rights_worker_index`) is a lender, and no batch minter is.
#[test]
fn reserved_minters_lend_from_the_rights_holders_ids() {
    let mut c = *reg(256).config();
    c.reserve_minters(36, true);
    assert_eq!((c.minters, c.lenders), (72, 36));
    let mut r = Registry::new(c).unwrap();
    for i in [0, 35] {
        let rights = crate::minted::rights_worker_index(36, i);
        let lender = r
            .lease_minter(rights, T, None, hash_of(r.next_generation()), T)
            .unwrap();
        assert_eq!(lender.ttl_ms, c.lender_ttl_ms, "rights holder {i}");
        let batch = r
            .lease_minter(i, T, None, hash_of(r.next_generation()), T)
            .unwrap();
        assert_eq!(batch.ttl_ms, c.ttl_ms, "batch minter {i}");
    }
    c.reserve_minters(36, false);
    assert_eq!((c.minters, c.lenders), (36, 0));
}
