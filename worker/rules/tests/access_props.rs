//! The access rules under random schedules: a revoked API key is refused by
//! every host within `KEY_CACHE_MS` (and a live one never refused), a flood
//! of made-up key IDs never pushes a key in use out of a host's cache (nor
//! grows it past its bounds), only a token of a key's exact shape names a
//! key ID to look up, no
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
    access::TagLimit, access::KEY_CACHE_ENTRIES, access::KEY_CACHE_MS, access::KEY_CACHE_UNKNOWN,
    access::KEY_RANDOM_BYTES,
};
use proptest::prelude::*;
use sha2::{Digest, Sha256};

#[path = "../../../tests/support/props.rs"]
mod props;

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
    #![proptest_config(props::config(500))]

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
enum FloodOp {
    /// Key `k` is presented, `dt` ms after the last event.
    Use { k: usize, dt: u64 },
    /// `n` made-up key IDs are presented (drawn from `seed`), `dt` ms after
    /// the last event.
    Flood { n: usize, seed: u64, dt: u64 },
    /// A made-up ID presented before (the `i`th most recent) again.
    Again { i: usize, dt: u64 },
}

fn flood_op() -> impl Strategy<Value = FloodOp> {
    prop_oneof![
        4 => (0..40usize, 0..3_000u64).prop_map(|(k, dt)| FloodOp::Use { k, dt }),
        2 => (0..2_500usize, any::<u64>(), 0..3_000u64).prop_map(|(n, seed, dt)| FloodOp::Flood { n, seed, dt }),
        2 => (0..4_000usize, 0..3_000u64).prop_map(|(i, dt)| FloodOp::Again { i, dt }),
    ]
}

/// A made-up key ID: 12 hex digits from `x` (SplitMix64's step).
fn made_up_id(x: &mut u64) -> String {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("{:012x}", (z ^ (z >> 31)) & 0xffff_ffff_ffff)
}

proptest! {
    #![proptest_config(props::config(200))]

    /// A key in use is fetched again only when its lookup is older than
    /// `KEY_CACHE_MS`, however many made-up IDs came between; a made-up ID
    /// is fetched again only when it is stale or `KEY_CACHE_UNKNOWN` newer
    /// made-up IDs pushed it out; neither part grows past its bound.
    #[test]
    fn made_up_key_ids_never_push_out_a_key_in_use(ops in prop::collection::vec(flood_op(), 1..60)) {
        let keys: Vec<(String, String)> = (0..40u8).map(|i| new_key(&[i + 1; KEY_RANDOM_BYTES])).collect();
        let record = |k: usize| KeyRecord { hash: token_hash(&keys[k].1), access: Access::root() };
        let mut cache = KeyCache::default();
        let mut fetched_at: BTreeMap<usize, u64> = BTreeMap::new();
        // Every made-up ID presented, in order, and when each was last fetched.
        let mut made_up: Vec<String> = Vec::new();
        let mut unknown_at: BTreeMap<String, (u64, usize)> = BTreeMap::new();
        let mut unknown_puts = 0usize;
        let mut now = T0;
        let present_unknown = |cache: &mut KeyCache, id: &str, now: u64, unknown_at: &mut BTreeMap<String, (u64, usize)>, unknown_puts: &mut usize| -> Result<(), TestCaseError> {
            match cache.get(id, now) {
                KeyLookup::Cached(r) => prop_assert!(r.is_none()),
                KeyLookup::Fetch => {
                    // Fetched again: stale, or at least KEY_CACHE_UNKNOWN others came since.
                    if let Some(&(at, seq)) = unknown_at.get(id) {
                        prop_assert!(now - at >= KEY_CACHE_MS || *unknown_puts - seq >= KEY_CACHE_UNKNOWN,
                            "made-up {} refetched {} ms and {} made-up IDs after its lookup", id, now - at, *unknown_puts - seq);
                    }
                    cache.put(id, None, now);
                    *unknown_puts += 1;
                    unknown_at.insert(id.to_string(), (now, *unknown_puts));
                }
            }
            Ok(())
        };
        for op in ops {
            match op {
                FloodOp::Use { k, dt } => {
                    now += dt;
                    let (id, token) = &keys[k];
                    match cache.get(id, now) {
                        KeyLookup::Cached(r) => prop_assert!(check_token(r, token).is_ok()),
                        KeyLookup::Fetch => {
                            if let Some(at) = fetched_at.get(&k) {
                                prop_assert!(now - at >= KEY_CACHE_MS, "key {} fetched again {} ms after its lookup", k, now - at);
                            }
                            cache.put(id, Some(record(k)), now);
                            fetched_at.insert(k, now);
                        }
                    }
                }
                FloodOp::Flood { n, mut seed, dt } => {
                    now += dt;
                    for _ in 0..n {
                        let id = made_up_id(&mut seed);
                        present_unknown(&mut cache, &id, now, &mut unknown_at, &mut unknown_puts)?;
                        made_up.push(id);
                    }
                }
                FloodOp::Again { i, dt } => {
                    now += dt;
                    if let Some(id) = made_up.len().checked_sub(i + 1).map(|j| made_up[j].clone()) {
                        present_unknown(&mut cache, &id, now, &mut unknown_at, &mut unknown_puts)?;
                    }
                }
            }
            prop_assert!(cache.ids().len() <= KEY_CACHE_ENTRIES);
            prop_assert!(cache.unknown_len() <= KEY_CACHE_UNKNOWN);
        }
        // Liveness: the flood reached the cache (made-up IDs are kept).
        prop_assert!(made_up.is_empty() || cache.unknown_len() > 0);
    }

    /// Only `elk_` + 12 lowercase hex + `_` + 64 lowercase hex names a key
    /// ID (anything else is never looked up), and that ID is the 12 digits.
    #[test]
    fn only_a_token_of_a_key_s_exact_shape_names_a_key_id(
        id in "[0-9a-fA-Fg]{11,13}",
        secret in "[0-9a-fA-F]{63,65}",
        prefix in prop_oneof![Just("elk_"), Just("ELK_"), Just("elk"), Just("")],
        sep in prop_oneof![Just("_"), Just("-"), Just("__")],
    ) {
        let token = format!("{prefix}{id}{sep}{secret}");
        let shaped = prefix == "elk_" && sep == "_"
            && id.len() == 12 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            && secret.len() == 64 && secret.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        prop_assert_eq!(token_key_id(&token), shaped.then_some(id.as_str()));
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
    #![proptest_config(props::config(500))]

    #[test]
    fn no_owner_ever_holds_more_live_worker_ids_than_its_limit(limit in 1..4u32, ops in prop::collection::vec(lease_op(), 1..150)) {
        let mut reg = Registry::new(RegistryConfig {
            capacity: 16,
            ttl_ms: 5_000,
            grace_ms: 1_000,
            max_skew_ms: 500,
            minters: 0,
            per_owner: Some(limit),
            lenders: 0,
            lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
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
    #![proptest_config(props::config(500))]

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
