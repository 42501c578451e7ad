//! The registry's lease events: what `Registry` emits from each operation
//! equals what the registry's Durable Object used to compute by comparing a
//! worker ID's slot before and after the operation (the model below), for
//! random sequences of leases, minters' leases, renewals, releases and
//! evictions, with refusals, wrong secrets, and a registry clock that stalls
//! and sometimes steps back.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeMap;

use edgeleaf::{
    holder::Renewal, registry::GrantRequest, registry::Lease, registry::LeaseEvent,
    registry::LeaseEventKind, registry::Registry, registry::RegistryConfig, registry::WorkerSlot,
    secret::Proof, secret::SecretHash,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[path = "support/props.rs"]
mod props;

const T0: u64 = 1_735_689_600_000;
const NODES: usize = 5;
const CAPACITY: u32 = 5;

/// The model (the registry's store computed the events so until the
/// registry emitted them): the events an operation made, from the slot of
/// the worker ID it changed before (`None`: never leased) and after it, at
/// `now`.
fn diff(before: Option<&WorkerSlot>, after: &WorkerSlot, now: u64) -> Vec<LeaseEvent> {
    match before {
        // The same grant: evicted, released or extended (or none of these).
        Some(b) if b.generation == after.generation => {
            let kind = if after.evicted && !b.evicted {
                Some(LeaseEventKind::Evicted)
            } else if after.released && !b.released {
                Some(LeaseEventKind::Released)
            } else if after.expires_at_ms > b.expires_at_ms {
                Some(LeaseEventKind::Renewed)
            } else {
                None
            };
            kind.map(|k| LeaseEvent::new(k, now, after))
                .into_iter()
                .collect()
        }
        // A new grant; the one it replaced lapsed if it ran out unreleased
        // (a node proving it held a live grant takes it over: no lapse).
        _ => before
            .filter(|b| !b.released && !b.evicted && b.expires_at_ms <= now)
            .map(|b| LeaseEvent::new(LeaseEventKind::Lapsed, b.expires_at_ms, b))
            .into_iter()
            .chain([LeaseEvent::new(LeaseEventKind::Granted, now, after)])
            .collect(),
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Node `n` (of owner `n % 2`) leases, offering its last grant or not,
    /// its clock `skew` ms off the registry's.
    Lease { n: usize, previous: bool, skew: i64 },
    /// Minter `index` leases, offering its last grant or not.
    Minter { index: u32, previous: bool },
    /// Node `n` renews its last grant (with a wrong secret if `forged`).
    Renew { n: usize, forged: bool, skew: i64 },
    /// Node `n` releases its last grant.
    Release { n: usize, forged: bool },
    /// An operator evicts a worker ID.
    Evict { worker_id: u32 },
    /// The registry's clock moves (back, sometimes).
    Tick { ms: i64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NODES, any::<bool>(), -1_200i64..1_200).prop_map(|(n, previous, skew)| Op::Lease { n, previous, skew }),
        1 => (0u32..2, any::<bool>()).prop_map(|(index, previous)| Op::Minter { index, previous }),
        4 => (0..NODES, prop::bool::weighted(0.1), -300i64..300).prop_map(|(n, forged, skew)| Op::Renew { n, forged, skew }),
        1 => (0..NODES, prop::bool::weighted(0.1)).prop_map(|(n, forged)| Op::Release { n, forged }),
        1 => (0..CAPACITY).prop_map(|worker_id| Op::Evict { worker_id }),
        4 => prop_oneof![4 => 0i64..4_000, 1 => -1_000i64..0, 1 => Just(0i64)].prop_map(|ms| Op::Tick { ms }),
    ]
}

/// The hash of grant `k`'s secret (the registry sees hashes only).
fn secret_of(k: u64) -> SecretHash {
    let mut b = [0x5a; 32];
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

fn owner(n: usize) -> &'static str {
    ["team-a", "team-b"][n % 2]
}

fn node_key(n: usize) -> String {
    format!("node-{n}")
}

/// Runs `ops`, checking each operation's events against the model; returns
/// the kinds seen.
fn run(ops: &[Op]) -> Result<Vec<LeaseEventKind>, TestCaseError> {
    let config = RegistryConfig {
        capacity: CAPACITY,
        ttl_ms: 5_000,
        grace_ms: 2_000,
        max_skew_ms: 1_500,
        minters: 2,
        per_owner: Some(2),
        lenders: 0,
        lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
    };
    let mut reg = Registry::new(config).unwrap();
    let mut now = T0;
    let mut secrets = 0u64;
    // Each node's (and minter's: keys NODES + index) last grant.
    let mut held: BTreeMap<usize, (Lease, SecretHash)> = BTreeMap::new();
    let mut seen = Vec::new();
    for op in ops {
        let before: BTreeMap<u32, WorkerSlot> =
            reg.slots().map(|s| (s.worker_id, s.clone())).collect();
        let last = |n: usize, forged: bool| {
            held.get(&n).map(|(l, s)| {
                let secret = if forged { secret_of(u64::MAX) } else { *s };
                proof(l, secret)
            })
        };
        let renewal = |c: Proof, node_now_ms: u64| Renewal {
            claim: c,
            node_now_ms,
            last_timestamp_ms: node_now_ms.saturating_sub(10),
        };
        // The worker ID the operation changed, if it succeeded.
        let changed: Option<u32> = match op {
            Op::Tick { ms } => {
                now = now.saturating_add_signed(*ms);
                None
            }
            Op::Lease { n, previous, skew } => {
                secrets += 1;
                let secret = secret_of(secrets);
                let key = node_key(*n);
                let ask = GrantRequest {
                    owner: owner(*n),
                    node_key: &key,
                    node_now_ms: now.saturating_add_signed(*skew),
                    previous: if *previous { last(*n, false) } else { None },
                    secret_hash: secret,
                };
                reg.lease(ask, now).ok().map(|l| {
                    let id = l.worker_id;
                    held.insert(*n, (l, secret));
                    id
                })
            }
            Op::Minter { index, previous } => {
                secrets += 1;
                let secret = secret_of(secrets);
                let k = NODES + *index as usize;
                let p = if *previous { last(k, false) } else { None };
                reg.lease_minter(*index, now, p, secret, now).ok().map(|l| {
                    let id = l.worker_id;
                    held.insert(k, (l, secret));
                    id
                })
            }
            Op::Renew { n, forged, skew } => last(*n, *forged).and_then(|c| {
                let r = renewal(c, now.saturating_add_signed(*skew));
                reg.renew(owner(*n), &r, now).ok().map(|_| c.worker_id)
            }),
            Op::Release { n, forged } => last(*n, *forged).and_then(|c| {
                reg.release(owner(*n), &renewal(c, now), now)
                    .ok()
                    .map(|()| c.worker_id)
            }),
            Op::Evict { worker_id } => reg.evict(*worker_id, now).ok().map(|_| *worker_id),
        };
        let expected = match changed.and_then(|id| reg.slot(id)) {
            Some(after) => diff(before.get(&after.worker_id), after, now),
            None => Vec::new(),
        };
        let emitted = reg.take_events();
        prop_assert_eq!(&emitted, &expected, "after {:?} at {}", op, now);
        seen.extend(emitted.iter().map(|e| e.kind));
    }
    Ok(seen)
}

#[test]
fn the_registry_emits_what_the_slot_diff_made() {
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..props::config(256)
    });
    let kinds = std::cell::RefCell::new(std::collections::BTreeSet::new());
    runner
        .run(&prop::collection::vec(op(), 1..120), |ops| {
            let seen = run(&ops)?;
            kinds
                .borrow_mut()
                .extend(seen.into_iter().map(LeaseEventKind::as_str));
            Ok(())
        })
        .unwrap();
    // The sequences reach every kind of event.
    assert_eq!(
        kinds.into_inner().into_iter().collect::<Vec<_>>(),
        ["evicted", "granted", "lapsed", "released", "renewed"]
    );
}
