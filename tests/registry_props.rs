//! Property of the worker-ID registry: simulated nodes with skewed clocks
//! lease, renew, crash, restart, stall (keep issuing without renewing) and
//! release; under one worker ID, the time ranges issued under different
//! grants never overlap, so no two holders can stamp the same millisecond.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashMap;

use edgeleaf::{Error, Lease, Registry, RegistryConfig, SlotStatus};
use proptest::prelude::*;

const T0: u64 = 1_735_689_600_000;

#[derive(Debug, Clone)]
enum Op {
    /// Registry time passes.
    Tick(u64),
    /// Node n issues at its clock now (if it believes it holds a lease).
    Issue(usize),
    /// Node n renews if half its TTL passed, leases if it holds nothing.
    Maintain(usize),
    /// Node n crashes (keeps its cache: last grant and last timestamp).
    Crash(usize),
    /// Node n shuts down cleanly.
    Release(usize),
}

#[derive(Debug, Default, Clone)]
struct Node {
    offset: i64,
    lease: Option<Lease>,
    /// Cached across crashes, like Leaf's local file (with the fix: the
    /// last timestamp too).
    cached: Option<(u32, u64)>,
    last_issued_ms: u64,
    /// The generation the last ID was issued under: a new grant (a restart)
    /// resumes strictly after `last_issued_ms`, as `resume_after` does.
    last_generation: u64,
}

fn op(nodes: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..4_000).prop_map(Op::Tick),
        10 => (0..nodes).prop_map(Op::Issue),
        5 => (0..nodes).prop_map(Op::Maintain),
        1 => (0..nodes).prop_map(Op::Crash),
        1 => (0..nodes).prop_map(Op::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn one_worker_id_never_serves_two_holders_at_once(
        capacity in 1u32..5,
        offsets in prop::collection::vec(prop_oneof![-1_500i64..1_500, Just(-990i64), Just(990i64)], 6),
        ops in prop::collection::vec(op(6), 1..300),
    ) {
        let cfg = RegistryConfig { capacity, ttl_ms: 10_000, grace_ms: 2_000, max_skew_ms: 1_000 };
        let mut reg = Registry::new(cfg).unwrap();
        let mut nodes: Vec<Node> = offsets.iter().map(|&offset| Node { offset, ..Node::default() }).collect();
        let mut now = T0;
        // (worker_id, generation) -> first and last ms issued under that grant.
        let mut issued: HashMap<(u32, u64), (u64, u64)> = HashMap::new();

        for op in ops {
            match op {
                Op::Tick(ms) => now += ms,
                Op::Issue(n) => {
                    let node = &mut nodes[n];
                    let clock = now.saturating_add_signed(node.offset);
                    let Some(lease) = &node.lease else { continue };
                    // The node's own rules: stop at expiry by its clock; issue
                    // only after issue_after and after its own last timestamp.
                    if clock >= lease.expires_at_ms { node.lease = None; continue; }
                    let resumed = lease.generation != node.last_generation;
                    if clock <= lease.issue_after_ms
                        || clock < node.last_issued_ms
                        || (resumed && clock == node.last_issued_ms) { continue; }
                    let range = issued.entry((lease.worker_id, lease.generation)).or_insert((clock, clock));
                    range.1 = clock;
                    let (first, last) = *range;
                    for (&(w, g), &(a, b)) in &issued {
                        prop_assert!(w != lease.worker_id || g == lease.generation || b < first || last < a,
                            "worker {w}: generation {g} issued in {a}..={b}, generation {} in {first}..={last}",
                            lease.generation);
                    }
                    node.last_issued_ms = clock;
                    node.last_generation = lease.generation;
                }
                Op::Maintain(n) => {
                    let node = &mut nodes[n];
                    let clock = now.saturating_add_signed(node.offset);
                    match node.lease.clone() {
                        Some(l) if clock + l.ttl_ms / 2 >= l.expires_at_ms => {
                            match reg.renew(l.worker_id, l.generation, clock, node.last_issued_ms, now) {
                                Ok(renewed) => node.lease = Some(renewed),
                                Err(Error::LeaseExpired { .. } | Error::LeaseNotHeld { .. }) => node.lease = None,
                                Err(Error::ClockSkew { .. } | Error::ClockBehindLastReport { .. }) => node.lease = None,
                                Err(e) => panic!("unexpected {e}"),
                            }
                        }
                        Some(_) => {}
                        None => {
                            let key = format!("node-{n}");
                            match reg.lease(&key, clock, now, node.cached) {
                                Ok(l) => {
                                    node.cached = Some((l.worker_id, l.generation));
                                    node.lease = Some(l);
                                }
                                Err(Error::NoFreeWorkerId { .. } | Error::ClockSkew { .. }
                                    | Error::ClockBehindLastReport { .. }) => {}
                                Err(e) => panic!("unexpected {e}"),
                            }
                        }
                    }
                }
                Op::Crash(n) => nodes[n].lease = None,
                Op::Release(n) => {
                    let node = &mut nodes[n];
                    if let Some(l) = node.lease.take() {
                        match reg.release(l.worker_id, l.generation, node.last_issued_ms, now) {
                            Ok(()) | Err(Error::LeaseNotHeld { .. }) => {}
                            Err(e) => panic!("unexpected {e}"),
                        }
                    }
                }
            }
            // The registry's own view: at most one live grant per worker ID,
            // and every live grant is inside the capacity.
            let live: Vec<_> = reg.slots().filter(|s| reg.status(s, now) == SlotStatus::Live).collect();
            prop_assert!(live.iter().all(|s| s.worker_id < capacity));
        }
    }
}

/// The case the grace period and `issue_after_ms` exist for: a holder that
/// stalls (stops renewing) keeps issuing until its lease's end by its own
/// clock; a node whose clock runs 900 ms behind takes the recycled ID.
#[test]
fn a_recycled_id_is_issued_only_after_the_stalled_holder_stopped() {
    let cfg = RegistryConfig {
        capacity: 1,
        ttl_ms: 10_000,
        grace_ms: 2_000,
        max_skew_ms: 1_000,
    };
    let mut reg = Registry::new(cfg).unwrap();
    let a = reg.lease("a", T0, T0, None).unwrap();
    // "a" stalls: its last ID is stamped just before its lease ends.
    let a_last_ms = a.expires_at_ms - 1;
    // "b" (clock 900 ms behind) asks at every ms from the lapse on.
    let mut granted = None;
    for now in a.expires_at_ms..a.expires_at_ms + 3_000 {
        match reg.lease("b", now - 900, now, None) {
            Ok(l) => {
                granted = Some((now, l));
                break;
            }
            Err(Error::NoFreeWorkerId { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    let (at, b) = granted.expect("recycled after TTL + grace");
    assert!(at >= a.expires_at_ms + cfg.grace_ms);
    assert!(
        b.issue_after_ms >= a_last_ms,
        "b may stamp {}..: a stamped up to {a_last_ms}",
        b.issue_after_ms + 1
    );
}
