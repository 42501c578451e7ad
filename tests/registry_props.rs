//! What one credential can cost the others at the worker-ID registry
//! (issue 24), tested through the public API with random schedules.
//!
//! Invariants:
//! - no owner ever keeps more worker IDs from the others than its
//!   `per_owner` limit: live, lapsed (not yet free), or freed with a floor
//!   (`last_timestamp_ms`) further ahead than a node's clock may be
//!   (the registry's + `max_skew_ms`) — whatever it leases, renews, proves
//!   and releases, with the largest timestamps the registry accepts;
//! - so another owner's lease, from a node whose clock is within the skew
//!   bound, never fails for want of a worker ID while the hostile owner's
//!   share and its own leave one, nor for its clock when the hostile owner
//!   leases under the victim's node key (squatting it): the victim is
//!   refused only for its own limit;
//! - a released floor never lies further ahead than a holder could have
//!   minted: the registry's clock (and the grant's expiry) + `max_skew_ms` +
//!   the largest borrow;
//! - the hostile owner's nodes, each reporting a clock within the bound,
//!   never move the clock a victim's node is checked against (the clock
//!   vote is per owner).
//!
//! And when the minters' count grows over worker IDs that nodes hold and
//! keep renewing (an upgrade): no node renews or is granted an ID in the
//! grown range, every minter holds its ID within a lease and its grace of
//! the upgrade, and it issues after everything a node could have stamped
//! under that ID.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeMap;

use edgeleaf::{
    holder::Renewal, registry::GrantRequest, registry::Lease, registry::Registry,
    registry::RegistryConfig, registry::SlotStatus, registry::WorkerSlot, secret::Proof,
    secret::SecretHash, snowflake::MAX_TOLERANCE_MS, Error,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

#[path = "support/props.rs"]
mod props;

const T0: u64 = 1_735_689_600_000;
const CAPACITY: u32 = 8;
const LIMIT: u32 = 3;
const SKEW: u64 = 1_000;
const TTL: u64 = 10_000;
const GRACE: u64 = 2_000;

fn config() -> RegistryConfig {
    RegistryConfig {
        capacity: CAPACITY,
        ttl_ms: TTL,
        grace_ms: GRACE,
        max_skew_ms: SKEW,
        minters: 0,
        per_owner: Some(LIMIT),
        lenders: 0,
        lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
    }
}

fn hash(k: u64) -> SecretHash {
    let mut b = [0x33; 32];
    b[..8].copy_from_slice(&k.to_le_bytes());
    SecretHash(b)
}

fn proof(l: &Lease, secret_hash: SecretHash) -> Proof {
    Proof {
        worker_id: l.worker_id,
        generation: l.generation,
        secret_hash: Some(secret_hash),
    }
}

/// Kept from everyone but its owner: not free, or freed with a floor ahead
/// of every clock the registry accepts.
fn withheld(reg: &Registry, s: &WorkerSlot, now: u64) -> bool {
    reg.status(s, now) != SlotStatus::Free || s.last_timestamp_ms > now + SKEW
}

fn withheld_by(reg: &Registry, owner: &str, now: u64) -> usize {
    reg.slots()
        .filter(|s| s.owner == owner && withheld(reg, s, now))
        .count()
}

#[derive(Debug, Clone)]
enum Op {
    /// Registry time passes.
    Tick(u64),
    /// The hostile owner leases under node key `key` (its clock `skew` off,
    /// within the bound), offering grant `prove` of its own as proof.
    Lease {
        key: u8,
        skew: i64,
        prove: Option<usize>,
    },
    /// It releases its grant `k` with the largest last timestamp accepted.
    Release(usize),
    /// It renews its grant `k` with the largest last timestamp accepted.
    Renew(usize),
    /// The victim leases, and sometimes keeps what it held.
    Victim { keep: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let skew = prop_oneof![Just(SKEW as i64), -(SKEW as i64)..=SKEW as i64];
    prop_oneof![
        3 => prop_oneof![0u64..500, 0u64..20_000].prop_map(Op::Tick),
        6 => (0u8..4, skew, prop::option::weighted(0.3, any::<usize>()))
            .prop_map(|(key, skew, prove)| Op::Lease { key, skew, prove }),
        6 => any::<usize>().prop_map(Op::Release),
        2 => any::<usize>().prop_map(Op::Renew),
        3 => prop::bool::weighted(0.3).prop_map(|keep| Op::Victim { keep }),
    ]
}

/// The largest `last_timestamp_ms` the registry accepts for this renewal
/// or release, found by asking (a refusal changes nothing), among a ladder
/// of candidates and `also`; a renewal's new lease with it.
fn largest_accepted(
    reg: &mut Registry,
    p: Proof,
    node_now: u64,
    now: u64,
    release: bool,
    also: &[u64],
) -> Option<(u64, Option<Lease>)> {
    let mut far = vec![
        now + 10 * 60_000,
        now + TTL + SKEW + MAX_TOLERANCE_MS,
        now + SKEW + MAX_TOLERANCE_MS,
        node_now + MAX_TOLERANCE_MS,
        now + MAX_TOLERANCE_MS,
        now + SKEW,
        now,
    ];
    far.extend_from_slice(also);
    far.sort_unstable_by(|a, b| b.cmp(a));
    for last in far {
        let r = Renewal {
            claim: p,
            node_now_ms: node_now,
            last_timestamp_ms: last,
        };
        let done = if release {
            reg.release("hostile", &r, now).map(|()| None)
        } else {
            reg.renew("hostile", &r, now).map(Some)
        };
        match done {
            Ok(lease) => return Some((last, lease)),
            Err(Error::OutOfRange { .. }) => {}
            Err(_) => return None,
        }
    }
    None
}

proptest! {
    #![proptest_config(props::config(500))]

    #[test]
    fn one_owner_never_keeps_more_worker_ids_from_the_others_than_its_limit(
        ops in prop::collection::vec(op(), 1..200),
        victim_skew in -(SKEW as i64)..=SKEW as i64,
    ) {
        one_owner_schedule(ops, victim_skew)?;
    }
}

/// One schedule of the property above.
fn one_owner_schedule(ops: Vec<Op>, victim_skew: i64) -> Result<(), TestCaseError> {
    let mut reg = Registry::new(config()).unwrap();
    let mut now = T0;
    let mut secrets = 0u64;
    let mut grants: Vec<(Lease, SecretHash)> = Vec::new();
    let mut victim: BTreeMap<u32, (Lease, SecretHash)> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Tick(ms) => now += ms,
            Op::Lease { key, skew, prove } => {
                secrets += 1;
                let previous = prove.filter(|_| !grants.is_empty()).map(|k| {
                    let (l, h) = &grants[k % grants.len()];
                    proof(l, *h)
                });
                // Key 0 is the victim's own (they are guessable, and
                // visible to a monitor key).
                let key = if key == 0 {
                    "victim-1".to_string()
                } else {
                    format!("hostile-{key}")
                };
                let ask = GrantRequest {
                    owner: "hostile",
                    node_key: &key,
                    node_now_ms: now.saturating_add_signed(skew),
                    previous,
                    secret_hash: hash(secrets),
                };
                if let Ok(l) = reg.lease(ask, now) {
                    grants.push((l, hash(secrets)));
                }
            }
            Op::Release(k) | Op::Renew(k) if grants.is_empty() => {
                let _ = k;
            }
            Op::Release(k) => {
                let (l, h) = grants[k % grants.len()].clone();
                // What its holder could have minted: by a clock within
                // the skew of the registry's, while the lease lived
                // (its expiry as last renewed), borrowing the most.
                let cap = now.min(l.expires_at_ms) + SKEW + MAX_TOLERANCE_MS;
                // The cap itself too (once the grant is free, the release
                // is refused: a_late_release_never_withholds_past_the_owners_share).
                if let Some((last, _)) = largest_accepted(
                    &mut reg,
                    proof(&l, h),
                    now + SKEW,
                    now,
                    true,
                    &[cap, cap + 1],
                ) {
                    prop_assert!(
                        last <= cap,
                        "a release at {} of a lease ending at {} set a floor {} ms ahead",
                        now,
                        l.expires_at_ms,
                        last - now
                    );
                }
            }
            Op::Renew(k) => {
                let k = k % grants.len();
                let (l, h) = grants[k].clone();
                // Its clock as far ahead as the bound allows.
                if let Some((_, Some(renewed))) =
                    largest_accepted(&mut reg, proof(&l, h), now + SKEW, now, false, &[])
                {
                    grants[k].0 = renewed;
                }
            }
            Op::Victim { keep } => {
                // The victim's node, its clock `victim_skew` off: what it
                // held lapses or is released.
                let clock = now.saturating_add_signed(victim_skew);
                let mine: Vec<_> = victim.keys().copied().collect();
                if !keep {
                    for id in mine {
                        let (l, h) = victim.remove(&id).unwrap();
                        let r = Renewal {
                            claim: proof(&l, h),
                            node_now_ms: clock,
                            last_timestamp_ms: clock,
                        };
                        let _ = reg.release("victim", &r, now);
                    }
                }
                let victim_held = withheld_by(&reg, "victim", now);
                secrets += 1;
                let ask = GrantRequest {
                    owner: "victim",
                    node_key: "victim-1",
                    node_now_ms: clock,
                    previous: None,
                    secret_hash: hash(secrets),
                };
                match reg.lease(ask, now) {
                    Ok(l) => {
                        // It waits at most for the skew bound, twice.
                        prop_assert!(l.issue_after_ms <= now + SKEW);
                        victim.insert(l.worker_id, (l, hash(secrets)));
                    }
                    Err(Error::WorkerIdLimit { .. }) => {
                        prop_assert_eq!(victim_held, LIMIT as usize);
                    }
                    Err(e) => prop_assert!(
                        false,
                        "the victim (holding {}) was refused: {} ({} IDs withheld by the hostile owner)",
                        victim_held, e, withheld_by(&reg, "hostile", now)
                    ),
                }
            }
        }
        let hostile = withheld_by(&reg, "hostile", now);
        prop_assert!(
            hostile <= LIMIT as usize,
            "the hostile owner withholds {} worker IDs",
            hostile
        );
    }
    Ok(())
}

/// The attack measured in issue 24, at small scale: one credential leases
/// and releases in a loop with the largest last timestamp a release
/// accepts. It makes at most its limit of worker IDs unusable, and another
/// credential's lease keeps succeeding throughout.
#[test]
fn leasing_and_releasing_far_ahead_poisons_at_most_the_owners_limit() {
    let mut reg = Registry::new(config()).unwrap();
    let mut now = T0;
    for round in 0..200u64 {
        now += 37;
        let key = format!("host-{round}:8080");
        let ask = GrantRequest {
            owner: "hostile",
            node_key: &key,
            node_now_ms: now,
            previous: None,
            secret_hash: hash(round),
        };
        if let Ok(l) = reg.lease(ask, now) {
            largest_accepted(&mut reg, proof(&l, hash(round)), now + SKEW, now, true, &[])
                .expect("its own release");
        }
        let poisoned = withheld_by(&reg, "hostile", now);
        assert!(
            poisoned <= LIMIT as usize,
            "round {round}: {poisoned} IDs unusable"
        );
        let ask = GrantRequest {
            owner: "victim",
            node_key: "victim-1",
            node_now_ms: now,
            previous: None,
            secret_hash: hash(1_000 + round),
        };
        let l = reg
            .lease(ask, now)
            .unwrap_or_else(|e| panic!("round {round}: the victim was refused: {e}"));
        let r = Renewal {
            claim: proof(&l, hash(1_000 + round)),
            node_now_ms: now,
            last_timestamp_ms: now,
        };
        reg.release("victim", &r, now).unwrap();
    }
}

/// A release after its lease ended: its holder stopped minting at the
/// lease's end (by a clock within the skew), so the floor it may set is
/// capped there, not at the registry's clock now.
#[test]
fn a_release_after_the_lease_ended_is_capped_at_its_end() {
    let mut reg = Registry::new(config()).unwrap();
    let ask = GrantRequest {
        owner: "hostile",
        node_key: "host-1:8080",
        node_now_ms: T0,
        previous: None,
        secret_hash: hash(1),
    };
    let l = reg.lease(ask, T0).unwrap();
    // Past its end, before the grace frees it.
    let now = l.expires_at_ms + GRACE / 2;
    let cap = l.expires_at_ms + SKEW + MAX_TOLERANCE_MS;
    assert_eq!(
        largest_accepted(
            &mut reg,
            proof(&l, hash(1)),
            now,
            now,
            true,
            &[cap, cap + 1]
        ),
        Some((cap, None))
    );
}

/// Found on 2026-11-27 once the property above offered releases the exact
/// cap: a grant that lapsed and whose grace passed (its ID free, counted
/// against nobody) is still released with a floor up to its expiry plus the
/// skew and 60 s, so its worker ID is kept from everyone again after its
/// owner took its full share of others: 4 withheld with a limit of 3. A
/// violation of the registry's rule, fixed there: a release once the ID is
/// free again is refused and changes nothing (the property above now offers
/// the cap to late releases too).
#[test]
fn a_late_release_never_withholds_past_the_owners_share() {
    let mut reg = Registry::new(config()).unwrap();
    let lease = |reg: &mut Registry, k: u64, now: u64| {
        let key = format!("host-{k}:8080");
        let ask = GrantRequest {
            owner: "hostile",
            node_key: &key,
            node_now_ms: now,
            previous: None,
            secret_hash: hash(k),
        };
        reg.lease(ask, now).unwrap()
    };
    let a = lease(&mut reg, 0, T0);
    // Renewed with a floor that will lie just ahead of the clock once the
    // grant is free: within the skew (not withheld), but ahead of the next
    // nodes' clocks (they get other IDs).
    let free_at = T0 + 9_000 + TTL + GRACE;
    let renewal = Renewal {
        claim: proof(&a, hash(0)),
        node_now_ms: T0 + 9_000,
        last_timestamp_ms: free_at + SKEW / 2,
    };
    let a = reg.renew("hostile", &renewal, T0 + 9_000).unwrap();
    assert_eq!(a.expires_at_ms + GRACE, free_at);
    let now = free_at;
    assert_eq!(withheld_by(&reg, "hostile", now), 0);
    for k in 1..=u64::from(LIMIT) {
        assert_ne!(lease(&mut reg, k, now).worker_id, a.worker_id);
    }
    assert_eq!(withheld_by(&reg, "hostile", now), LIMIT as usize);
    let cap = a.expires_at_ms + SKEW + MAX_TOLERANCE_MS;
    let late = Renewal {
        claim: proof(&a, hash(0)),
        node_now_ms: now,
        last_timestamp_ms: cap,
    };
    let _ = reg.release("hostile", &late, now);
    assert!(withheld_by(&reg, "hostile", now) <= LIMIT as usize);
}

/// A squatted node key (issue 24): another credential leases under the
/// victim's node key and releases with a floor far ahead. The victim's own
/// fresh lease is not refused: "its own earlier ID" is its own owner's.
#[test]
fn a_squatted_node_key_never_refuses_its_node() {
    let mut reg = Registry::new(config()).unwrap();
    let now = T0;
    let lease = |reg: &mut Registry, owner: &str, k: u64, now: u64| {
        let ask = GrantRequest {
            owner,
            node_key: "host-1:8080",
            node_now_ms: now,
            previous: None,
            secret_hash: hash(k),
        };
        reg.lease(ask, now)
    };
    // The victim ran once and released (its ID free, under its node key).
    let v = lease(&mut reg, "victim", 1, now).unwrap();
    let r = Renewal {
        claim: proof(&v, hash(1)),
        node_now_ms: now,
        last_timestamp_ms: now,
    };
    reg.release("victim", &r, now).unwrap();
    // The squatter leases under that node key (and gets that very ID:
    // free, and not its own), and releases it with the largest floor
    // accepted.
    let l = lease(&mut reg, "hostile", 2, now).unwrap();
    assert_eq!(l.worker_id, v.worker_id);
    largest_accepted(&mut reg, proof(&l, hash(2)), now, now, true, &[]).unwrap();
    // The victim restarts, its clock a little behind the registry's.
    let v2 = lease(&mut reg, "victim", 9, now + 5).unwrap();
    assert!(v2.issue_after_ms <= now + 5 + SKEW);
}

/// The clock vote (issue 24): one credential's leases, each within the skew
/// bound, must not move the reference another credential's node is checked
/// against; its own nodes are still checked against its own fleet.
#[test]
fn one_credential_cannot_walk_the_clock_vote_of_another() {
    let mut reg = Registry::new(RegistryConfig {
        capacity: 512,
        per_owner: None,
        ..RegistryConfig::new(&edgeleaf::Layout::LEAF)
    })
    .unwrap();
    let now = T0;
    let ask = |owner, key: &str, skew: i64, k: u64| {
        let key = key.to_string();
        move |reg: &mut Registry| {
            reg.lease(
                GrantRequest {
                    owner,
                    node_key: &key,
                    node_now_ms: now.saturating_add_signed(skew),
                    previous: None,
                    secret_hash: hash(k),
                },
                now,
            )
        }
    };
    for i in 0..200u64 {
        ask("a", &format!("a-{i}"), 1_900, i)(&mut reg).unwrap();
    }
    // Owner B's node lags 300 ms: 2.2 s from A's fleet, 0.3 s from the
    // registry's clock and B's (empty) fleet — accepted.
    assert!(ask("b", "b-1", -300, 1_000)(&mut reg).is_ok());
    // A's own node lagging 300 ms is still checked against A's fleet.
    assert!(matches!(
        ask("a", "a-late", -300, 1_001)(&mut reg),
        Err(Error::ClockSkew {
            reference: edgeleaf::error::ClockReference::LiveNodesAverage,
            ..
        })
    ));
    // And everyone is checked against the registry's own clock.
    assert!(matches!(
        ask("b", "b-2", 2_001, 1_002)(&mut reg),
        Err(Error::ClockSkew {
            reference: edgeleaf::error::ClockReference::Registry,
            ..
        })
    ));
}

/// What a node does in the schedule of
/// [`a_grown_minter_range_is_vacated_within_a_lease_and_its_grace`].
#[derive(Debug, Clone)]
enum NodeOp {
    Tick(u64),
    /// Node `key` leases, naming its latest grant (as a holder does).
    Lease(u8),
    /// It renews (leasing again if refused, as a holder does).
    Renew(u8),
    Release(u8),
    /// The minters' count grows to the schedule's new count (once).
    Upgrade,
}

fn node_op() -> impl Strategy<Value = NodeOp> {
    prop_oneof![
        3 => prop_oneof![0u64..500, 0u64..8_000].prop_map(NodeOp::Tick),
        3 => (0u8..6).prop_map(NodeOp::Lease),
        4 => (0u8..6).prop_map(NodeOp::Renew),
        1 => (0u8..6).prop_map(NodeOp::Release),
        1 => Just(NodeOp::Upgrade),
    ]
}

/// A fleet of nodes holding and renewing worker IDs.
struct Fleet {
    reg: Registry,
    now: u64,
    secrets: u64,
    /// Each node's latest grant, and whether it holds it still (a holder
    /// that released or lost it names it when it leases again).
    grants: BTreeMap<u8, (Lease, SecretHash, bool)>,
    /// Per grant (generation), its worker ID and the latest instant its
    /// node could have stamped under it: its expiry, or where it released.
    ends: BTreeMap<u64, (u32, u64)>,
    /// The minters' count, once grown (and when).
    grown: Option<(u32, u64)>,
}

impl Fleet {
    fn noted(&mut self, l: &Lease, end: u64) {
        self.ends.insert(l.generation, (l.worker_id, end));
    }

    /// The latest instant a node could have stamped under `worker_id`.
    fn end_of(&self, worker_id: u32) -> u64 {
        self.ends
            .values()
            .filter(|(id, _)| *id == worker_id)
            .map(|(_, end)| *end)
            .max()
            .unwrap_or(0)
    }

    fn lease(&mut self, key: u8) -> Result<(), TestCaseError> {
        self.secrets += 1;
        let node_key = format!("n-{key}");
        let ask = GrantRequest {
            owner: "o",
            node_key: &node_key,
            node_now_ms: self.now,
            previous: self.grants.get(&key).map(|(l, h, _)| proof(l, *h)),
            secret_hash: hash(self.secrets),
        };
        let Ok(l) = self.reg.lease(ask, self.now) else {
            if let Some(g) = self.grants.get_mut(&key) {
                g.2 = false;
            }
            return Ok(());
        };
        {
            if let Some((minters, _)) = self.grown {
                prop_assert!(
                    l.worker_id >= minters,
                    "node {} granted reserved ID {}",
                    key,
                    l.worker_id
                );
            }
            self.noted(&l, l.expires_at_ms);
            self.grants.insert(key, (l, hash(self.secrets), true));
        }
        Ok(())
    }

    fn renew(&mut self, key: u8) -> Result<(), TestCaseError> {
        let Some((l, h, held)) = self.grants.get(&key).cloned() else {
            return Ok(());
        };
        // A holder stops at its lease's end and leases again (its ID may
        // be someone else's by now).
        if !held || self.now >= l.expires_at_ms {
            return self.lease(key);
        }
        let r = Renewal {
            claim: proof(&l, h),
            node_now_ms: self.now,
            last_timestamp_ms: self.now,
        };
        match self.reg.renew("o", &r, self.now) {
            Ok(renewed) => {
                if let Some((minters, _)) = self.grown {
                    prop_assert!(
                        l.worker_id >= minters,
                        "node {} renewed reserved ID {}",
                        key,
                        l.worker_id
                    );
                }
                self.noted(&renewed, renewed.expires_at_ms);
                self.grants.insert(key, (renewed, h, true));
            }
            Err(Error::LeaseNotHeld { .. } | Error::LeaseExpired { .. }) => self.lease(key)?,
            Err(e) => prop_assert!(false, "node {} refused: {}", key, e),
        }
        Ok(())
    }

    fn release(&mut self, key: u8) {
        if let Some((l, h, true)) = self.grants.get(&key).cloned() {
            let r = Renewal {
                claim: proof(&l, h),
                node_now_ms: self.now,
                last_timestamp_ms: self.now,
            };
            if self.reg.release("o", &r, self.now).is_ok() {
                self.noted(&l, self.now.min(l.expires_at_ms));
                self.grants.insert(key, (l, h, false));
            }
        }
    }

    fn upgrade(&mut self, minters: u32) {
        if self.grown.is_none() {
            let config = RegistryConfig {
                minters,
                ..*self.reg.config()
            };
            let slots: Vec<WorkerSlot> = self.reg.slots().cloned().collect();
            self.reg = Registry::from_parts(config, self.reg.next_generation(), slots).unwrap();
            self.grown = Some((minters, self.now));
        }
    }
}

proptest! {
    #![proptest_config(props::config(300))]

    /// The minters' count grows over worker IDs nodes hold and keep
    /// renewing: each node there is refused and moves above the range, and
    /// every minter holds its ID within a lease and its grace of the
    /// upgrade, issuing after everything a node could have stamped there.
    #[test]
    fn a_grown_minter_range_is_vacated_within_a_lease_and_its_grace(
        ops in prop::collection::vec(node_op(), 1..120),
        before in 0u32..3,
        more in 1u32..3,
    ) {
        grown_minters_schedule(ops, before, before + more)?;
    }
}

/// One schedule of the property above.
fn grown_minters_schedule(ops: Vec<NodeOp>, before: u32, after: u32) -> Result<(), TestCaseError> {
    let config = RegistryConfig {
        per_owner: None,
        minters: before,
        ..config()
    };
    let mut f = Fleet {
        reg: Registry::new(config).unwrap(),
        now: T0,
        secrets: 1_000,
        grants: BTreeMap::new(),
        ends: BTreeMap::new(),
        grown: None,
    };
    for op in ops {
        match op {
            NodeOp::Tick(ms) => f.now += ms,
            NodeOp::Lease(k) => f.lease(k)?,
            NodeOp::Renew(k) => f.renew(k)?,
            NodeOp::Release(k) => f.release(k),
            NodeOp::Upgrade => f.upgrade(after),
        }
    }
    f.upgrade(after);
    let (_, at) = f.grown.unwrap();
    // Every node renews a third of a lease apart; every minter leases
    // (naming its grant) until it holds its ID, then renews.
    let mut minters: BTreeMap<u32, (Lease, SecretHash)> = BTreeMap::new();
    let step = TTL / 3;
    let deadline = at + TTL + GRACE + step;
    while f.now <= deadline + step {
        for k in 0..6 {
            f.renew(k)?;
        }
        for i in 0..after {
            f.secrets += 1;
            let held = minters.get(&i).map(|(l, h)| proof(l, *h));
            let renewed = held.and_then(|p| {
                let r = Renewal {
                    claim: p,
                    node_now_ms: f.now,
                    last_timestamp_ms: f.now,
                };
                f.reg.renew("", &r, f.now).ok()
            });
            if let Some(l) = renewed {
                let h = minters[&i].1;
                minters.insert(i, (l, h));
                continue;
            }
            match f.reg.lease_minter(i, f.now, held, hash(f.secrets), f.now) {
                Ok(l) => {
                    let end = f.end_of(i);
                    prop_assert!(
                        l.issue_after_ms >= end,
                        "minter {} issues after {}, a node's grant ran to {}",
                        i,
                        l.issue_after_ms,
                        end
                    );
                    minters.insert(i, (l, hash(f.secrets)));
                }
                Err(e) => prop_assert!(
                    f.now < deadline,
                    "minter {} still refused {} ms after the upgrade: {}",
                    i,
                    f.now - at,
                    e
                ),
            }
        }
        f.now += step;
    }
    Ok(())
}
