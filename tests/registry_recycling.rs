//! The worker-ID registry's recycling rule. The holders' side, raced through a
//! real registry with clock steps, lost answers and restarts, is tested in
//! `holder_props.rs`.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{
    registry::GrantRequest, registry::Registry, registry::RegistryConfig, secret::SecretHash, Error,
};

const T0: u64 = 1_735_689_600_000;

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
        minters: 0,
        per_owner: None,
        lenders: 0,
        lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
    };
    let mut reg = Registry::new(cfg).unwrap();
    let a = reg
        .lease(
            GrantRequest {
                owner: "",
                node_key: "a",
                node_now_ms: T0,
                previous: None,
                secret_hash: SecretHash([1; 32]),
            },
            T0,
        )
        .unwrap();
    // "a" stalls: its last ID is stamped just before its lease ends.
    let a_last_ms = a.expires_at_ms - 1;
    // "b" (clock 900 ms behind) asks at every ms from the lapse on.
    let mut granted = None;
    for now in a.expires_at_ms..a.expires_at_ms + 3_000 {
        match reg.lease(
            GrantRequest {
                owner: "",
                node_key: "b",
                node_now_ms: now - 900,
                previous: None,
                secret_hash: SecretHash([1; 32]),
            },
            now,
        ) {
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
