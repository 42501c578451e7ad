//! Opaque IDs through the public API: a bijection (round trip and range by
//! proptest on the real domains; exhaustively in the unit tests), and IDs of
//! consecutive counters that look unrelated: over 1,000,000 consecutive
//! counters each output bit is set 50% ± 0.5 points, consecutive IDs go up
//! and down 50% ± 0.5 points, and the rank correlation between counter and
//! ID is below 0.01 in magnitude.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{opaque::OpaqueDomain, opaque::OpaqueIds, Error};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

const N: u64 = 1_000_000;

fn domain() -> impl Strategy<Value = OpaqueDomain> {
    prop_oneof![
        (32u8..=63).prop_map(OpaqueDomain::Bits),
        (6u8..=18).prop_map(OpaqueDomain::Digits),
    ]
}

proptest! {
    #![proptest_config(props::config(256))]
    #[test]
    fn encode_is_a_bijection_onto_the_domain(d in domain(), key in any::<[u8; 16]>(), x in any::<u64>(), y in any::<u64>()) {
        let ids = OpaqueIds::new(d, &key).unwrap();
        let max = d.max_id();
        let (x, y) = (1 + x % max, 1 + y % max);
        let (a, b) = (ids.encode(x).unwrap(), ids.encode(y).unwrap());
        prop_assert!((1..=max).contains(&a));
        prop_assert_eq!(ids.decode(a).unwrap(), x);
        prop_assert_eq!(a == b, x == y);
        prop_assert!(ids.encode(max + 1).is_err());
    }
}

/// IDs of counters 1..=N under a fixed key.
fn run(d: OpaqueDomain) -> Vec<u64> {
    let ids = OpaqueIds::new(d, b"statistics-key!!").unwrap();
    (1..=N).map(|n| ids.encode(n).unwrap()).collect()
}

fn spearman(ids: &[u64]) -> f64 {
    // Ranks of the IDs (the counters' ranks are their positions).
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_unstable_by_key(|&i| ids[i]);
    let mut rank = vec![0f64; ids.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as f64;
    }
    let n = ids.len() as f64;
    let mean = (n - 1.0) / 2.0;
    let (mut cov, mut var) = (0f64, 0f64);
    for (i, r) in rank.iter().enumerate() {
        cov += (i as f64 - mean) * (r - mean);
        var += (i as f64 - mean).powi(2);
    }
    cov / var
}

fn up_share(ids: &[u64]) -> f64 {
    let ups = ids.windows(2).filter(|w| w[1] > w[0]).count();
    ups as f64 / (ids.len() - 1) as f64
}

#[test]
fn consecutive_counters_give_unrelated_ids() {
    for d in [
        OpaqueDomain::Bits(53),
        OpaqueDomain::Bits(32),
        OpaqueDomain::Digits(12),
    ] {
        let ids = run(d);
        let up = up_share(&ids);
        assert!((up - 0.5).abs() < 0.005, "{d:?}: {up} of steps go up");
        let rho = spearman(&ids);
        assert!(rho.abs() < 0.01, "{d:?}: rank correlation {rho}");
        if let OpaqueDomain::Bits(bits) = d {
            for bit in 0..bits {
                let set = ids.iter().filter(|&&id| id >> bit & 1 == 1).count() as f64 / N as f64;
                assert!((set - 0.5).abs() < 0.005, "{d:?}: bit {bit} set in {set}");
            }
        } else {
            // Decimal domains: each leading digit (the value's tenth) ~10%.
            let size = d.max_id() + 1;
            let mut tenths = [0u64; 10];
            for &id in &ids {
                tenths[(id / (size / 10)) as usize] += 1;
            }
            for (t, c) in tenths.iter().enumerate() {
                let share = *c as f64 / N as f64;
                assert!(
                    (share - 0.1).abs() < 0.005,
                    "{d:?}: tenth {t} holds {share}"
                );
            }
        }
    }
}

/// The checks above can fail: the identity map (and a plain segment) fails
/// every one of them.
#[test]
fn the_checks_catch_ordered_ids() {
    let ordered: Vec<u64> = (1..=N).collect();
    assert!(up_share(&ordered) > 0.99);
    assert!(spearman(&ordered) > 0.99);
}

// `OpaqueIds::encode_all` (two counters through the permutation at once, a
// one-word SipHash) against `encode` of each counter: the same IDs for every
// batch (odd lengths, both domains, cycle-walking past 0), and the same error
// (that of the first counter out of range, in either element of a pair or in
// the odd one left).

/// What a loop of `encode` answers: the IDs, or the first error.
fn each(ids: &OpaqueIds, counters: &[u64]) -> Result<Vec<u64>, Error> {
    counters.iter().map(|&n| ids.encode(n)).collect()
}

fn all(ids: &OpaqueIds, counters: &[u64]) -> Result<Vec<u64>, Error> {
    let mut out = counters.to_vec();
    ids.encode_all(&mut out).map(|()| out)
}

proptest! {
    #![proptest_config(props::config(500))]
    #[test]
    fn encode_all_answers_as_encode_of_each(
        d in domain(),
        key in any::<[u8; 16]>(),
        // (kind, raw): kind 0..6 in range, 6: 0, 7: max + 1, 8: u64::MAX,
        // 9: max (the last counter).
        picks in prop::collection::vec((0u8..10, any::<u64>()), 0..12),
    ) {
        let ids = OpaqueIds::new(d, &key).unwrap();
        let max = d.max_id();
        let counters: Vec<u64> = picks
            .iter()
            .map(|&(kind, raw)| match kind {
                6 => 0,
                7 => max + 1,
                8 => u64::MAX,
                9 => max,
                _ => 1 + raw % max,
            })
            .collect();
        prop_assert_eq!(all(&ids, &counters), each(&ids, &counters));
    }
}
