//! The access rules under random schedules: a revoked API key is refused by
//! every host within `KEY_CACHE_MS` (and a live one never refused), no
//! credential ever holds more live worker IDs than `per_owner`, and a listing
//! shows a key exactly the tags a route naming them would open to it.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeMap;

use edgeleaf::{
    holder::Renewal, registry::GrantRequest, registry::Registry, registry::RegistryConfig,
    registry::SlotStatus, secret::LeaseSecret, secret::Proof, secret::SecretHash, Error,
};
use edgeleaf_rules::AccessError;
use edgeleaf_rules::{
    access::check_token, access::new_key, access::token_hash, access::token_key_id, access::Access,
    access::KeyCache, access::KeyLookup, access::KeyRecord, access::Scope, access::Scopes,
    access::TagLimit, access::KEY_CACHE_MS, access::KEY_RANDOM_BYTES,
};
use proptest::prelude::*;
use sha2::{Digest, Sha256};

/// The registry's host hashes the lease secrets it is given.
fn sha256(s: &LeaseSecret) -> SecretHash {
    SecretHash(Sha256::digest(s.as_bytes()).into())
}

const T0: u64 = 1_735_689_600_000;

#[derive(Debug, Clone)]
enum KeyOp {
    /// Host `h` serves a request with key `k`, `dt` ms after the last event.
    Use { h: usize, k: usize, dt: u64 },
    /// Key `k` is revoked at the store, `dt` ms after the last event.
    Revoke { k: usize, dt: u64 },
}

fn key_op() -> impl Strategy<Value = KeyOp> {
    prop_oneof![
        4 => (0..4usize, 0..3usize, 0..4_000u64).prop_map(|(h, k, dt)| KeyOp::Use { h, k, dt }),
        1 => (0..3usize, 0..4_000u64).prop_map(|(k, dt)| KeyOp::Revoke { k, dt }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_revoked_key_is_refused_everywhere_within_the_bound(ops in prop::collection::vec(key_op(), 1..200)) {
        let tokens: Vec<(String, String)> = (0..3u8).map(|i| new_key(&[i + 1; KEY_RANDOM_BYTES])).collect();
        let mut store: BTreeMap<String, KeyRecord> = tokens
            .iter()
            .map(|(id, token)| (id.clone(), KeyRecord { hash: token_hash(token), access: Access::root() }))
            .collect();
        let mut revoked_at: BTreeMap<usize, u64> = BTreeMap::new();
        let mut hosts: Vec<KeyCache> = (0..4).map(|_| KeyCache::default()).collect();
        let mut now = T0;
        for op in ops {
            match op {
                KeyOp::Revoke { k, dt } => {
                    now += dt;
                    store.remove(&tokens[k].0);
                    revoked_at.entry(k).or_insert(now);
                }
                KeyOp::Use { h, k, dt } => {
                    now += dt;
                    let (id, token) = &tokens[k];
                    prop_assert_eq!(token_key_id(token), Some(id.as_str()));
                    let record = match hosts[h].get(id, now) {
                        KeyLookup::Cached(r) => r.cloned(),
                        KeyLookup::Fetch => {
                            let r = store.get(id).cloned();
                            hosts[h].put(id, r.clone(), now);
                            r
                        }
                    };
                    let verdict = check_token(record.as_ref(), token);
                    match revoked_at.get(&k) {
                        None => prop_assert!(verdict.is_ok(), "a live key refused"),
                        Some(at) if now >= at + KEY_CACHE_MS => {
                            prop_assert_eq!(verdict, Err(AccessError::KeyRefused), "revoked at {} still opened at {}", at, now);
                        }
                        Some(_) => {}
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum LeaseOp {
    /// Owner `o` leases for node `n`; with `prove`, presenting that node's
    /// last grant.
    Lease {
        o: usize,
        n: usize,
        prove: bool,
        dt: u64,
    },
    /// Node `n` releases its last grant.
    Release { n: usize, dt: u64 },
    /// Node `n` renews its last grant.
    Renew { n: usize, dt: u64 },
}

fn lease_op() -> impl Strategy<Value = LeaseOp> {
    prop_oneof![
        4 => (0..3usize, 0..12usize, any::<bool>(), 0..3_000u64).prop_map(|(o, n, prove, dt)| LeaseOp::Lease { o, n, prove, dt }),
        1 => (0..12usize, 0..3_000u64).prop_map(|(n, dt)| LeaseOp::Release { n, dt }),
        2 => (0..12usize, 0..3_000u64).prop_map(|(n, dt)| LeaseOp::Renew { n, dt }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn no_owner_ever_holds_more_live_worker_ids_than_its_limit(limit in 1..4u32, ops in prop::collection::vec(lease_op(), 1..150)) {
        let mut reg = Registry::new(RegistryConfig {
            capacity: 16,
            ttl_ms: 5_000,
            grace_ms: 1_000,
            max_skew_ms: 500,
            minters: 0,
            per_owner: Some(limit),
        })
        .unwrap();
        let owners = ["a", "b", ""];
        let mut last: BTreeMap<usize, (usize, Proof)> = BTreeMap::new();
        let mut now = T0;
        for op in ops {
            match op {
                LeaseOp::Lease { o, n, prove, dt } => {
                    now += dt;
                    let previous = if prove { last.get(&n).map(|&(_, c)| c) } else { None };
                    let secret = LeaseSecret::from_random([n as u8; 16]);
                    let key = format!("node-{n}");
                    let ask = GrantRequest { owner: owners[o], node_key: &key, node_now_ms: now, previous, secret_hash: sha256(&secret) };
                    match reg.lease(ask, now) {
                        Ok(l) => { last.insert(n, (o, Proof { worker_id: l.worker_id, generation: l.generation, secret_hash: Some(sha256(&secret)) })); }
                        Err(Error::WorkerIdLimit { limit: l }) => {
                            prop_assert_eq!(l, limit);
                            prop_assert!(!owners[o].is_empty(), "the service's own leases have no owner limit");
                        }
                        Err(Error::NoFreeWorkerId { .. }) => {}
                        // Proof of a live grant another credential took.
                        Err(Error::NotLeaseHolder { mismatch: "owner", .. }) => {
                            prop_assert!(prove && last.get(&n).is_some_and(|&(by, _)| by != o));
                        }
                        Err(e) => prop_assert!(false, "unexpected {}", e),
                    }
                }
                LeaseOp::Release { n, dt } => {
                    now += dt;
                    if let Some(&(o, claim)) = last.get(&n) {
                        let r = Renewal { claim, node_now_ms: now, last_timestamp_ms: now };
                        let _ = reg.release(owners[o], &r, now);
                    }
                }
                LeaseOp::Renew { n, dt } => {
                    now += dt;
                    if let Some(&(o, claim)) = last.get(&n) {
                        let r = Renewal { claim, node_now_ms: now, last_timestamp_ms: now };
                        let _ = reg.renew(owners[o], &r, now);
                    }
                }
            }
            for owner in ["a", "b"] {
                let live = reg.slots().filter(|s| s.owner == owner && reg.status(s, now) == SlotStatus::Live).count();
                prop_assert!(live <= limit as usize, "{} holds {} live IDs, limit {}", owner, live, limit);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// `GET /v1/tags`, `/v1/monitor` and `/metrics` filter with `sees_tag`;
    /// `/v1/tags/{tag}` is opened by `permits`: one rule, both ways.
    #[test]
    fn a_listing_shows_exactly_the_tags_a_route_would_open(limit in "[ab]{0,3}\\*?", tags in prop::collection::vec("[ab]{1,4}", 1..8)) {
        let Ok(limit) = TagLimit::parse(&limit) else { return Ok(()) };
        let access = Access { scopes: Scopes::only(Scope::Monitor), tags: limit };
        for tag in &tags {
            prop_assert_eq!(access.sees_tag(tag), access.permits(Scope::Monitor, Some(tag)).is_ok());
        }
        prop_assert_eq!(access.sees_fleet(), access.tags == TagLimit::Any);
        prop_assert_eq!(access.permits_fleet_view(Scope::Monitor).is_ok(), access.sees_fleet());
    }
}
