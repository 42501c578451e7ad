//! Snowflake at edge scale, tested through the public API: minters
//! (`SnowflakeHolder`s under worker IDs reserved by `Registry::lease_minter`)
//! mint batches for isolates (`MintedBuffer`s) while ordinary nodes lease the
//! rest of the pool, isolates' clocks step, batch answers arrive late or are
//! lost, and minters restart from their saved state.
//!
//! Invariants: no ID served twice; every ID served was minted; none served
//! later than the staleness bound by the serving clock; minters use only
//! their reserved worker IDs, ordinary nodes never do.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;

use edgeleaf::{
    batch_ranges, Grant, GrantRequest, HolderConfig, HolderNext, HolderState, Layout, LeaseSecret,
    MintConfig, MintStep, MintedBuffer, Registry, RegistryConfig, SnowflakeHolder, SplitMix64,
};
use proptest::prelude::*;

const T0: u64 = 1_735_689_600_000;
const LAYOUT: Layout = Layout::LEAF;
const MINTERS: u32 = 3;
const STALENESS_MS: u64 = 200;

#[derive(Debug, Clone)]
enum Op {
    /// Time passes for everyone.
    Tick(u64),
    /// Isolate n's clock steps (within the registry's skew bound).
    Step(usize, i64),
    /// Isolate n serves a request for this many IDs.
    Serve(usize, usize),
    /// The k-th batch answer in flight arrives.
    Deliver(usize),
    /// The k-th batch answer in flight is lost.
    Lose(usize),
    /// Minter m dies and restarts from its saved state.
    Restart(usize),
    /// An ordinary node leases a worker ID.
    Lease,
}

struct Minter {
    holder: SnowflakeHolder<SplitMix64>,
    saved: HolderState,
}

fn holder_config() -> HolderConfig {
    HolderConfig {
        lease_again: true,
        reserve_ms: 3_000,
        ..HolderConfig::default()
    }
}

/// The minter's loop, as the Durable Object runs it: lease, renew and save at
/// once (its registry and store answer synchronously here), and answer what
/// could be minted without waiting.
fn mint(m: &mut Minter, index: u32, reg: &mut Registry, now: u64, count: usize) -> Vec<u64> {
    let mut out = vec![0u64; count];
    let mut filled = 0;
    for _ in 0..8 {
        if m.holder.save_due_in(now) == Some(0) {
            if let Some(state) = m.holder.save_request(now) {
                m.saved = state;
                m.holder.saved(&state);
            }
        }
        let Ok(poll) = m.holder.poll(now, &mut out[filled..]) else {
            break;
        };
        filled += poll.filled;
        if let Some(r) = poll.renew {
            match reg.renew("", &r, now) {
                Ok(l) => m.holder.renewed(Grant::from_lease(&l, None, LAYOUT), now),
                Err(e) => m
                    .holder
                    .renewal_failed(r.claim.generation, Some(e.error_code()), now),
            }
        }
        match poll.next {
            HolderNext::Done => break,
            HolderNext::Lease(ask) => {
                let secret = LeaseSecret::from_random([(now % 251) as u8; 16]);
                match reg.lease_minter(index, ask.node_now_ms, ask.previous, secret, now) {
                    Ok(l) => {
                        assert_eq!(l.worker_id, index, "a minter got another worker ID");
                        if m.holder
                            .granted(Grant::from_lease(&l, Some(secret), LAYOUT), now)
                            .is_err()
                        {
                            break;
                        }
                    }
                    Err(e) => {
                        m.holder.lease_failed(Some(e.error_code()), now);
                        break;
                    }
                }
            }
            HolderNext::LeaseInFlight | HolderNext::RetryAfter { .. } => {
                if let Some(state) = m.holder.save_request(now) {
                    m.saved = state;
                    m.holder.saved(&state);
                }
                // As the Durable Object: it never waits; nothing minted is
                // answered as nothing.
                break;
            }
        }
    }
    out.truncate(filled);
    out
}

fn op(isolates: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![0u64..20, 0u64..400, Just(2_000u64)].prop_map(Op::Tick),
        1 => (0..isolates, -400i64..400).prop_map(|(n, d)| Op::Step(n, d)),
        10 => (0..isolates, prop_oneof![1usize..5, 1usize..1000]).prop_map(|(n, k)| Op::Serve(n, k)),
        4 => any::<usize>().prop_map(Op::Deliver),
        1 => any::<usize>().prop_map(Op::Lose),
        1 => (0..MINTERS as usize).prop_map(Op::Restart),
        1 => Just(Op::Lease),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn minted_ids_are_served_once_fresh_and_from_reserved_ids(
        homes in prop::collection::vec(0u64..MINTERS as u64, 1..5),
        ops in prop::collection::vec(op(4), 1..300),
    ) {
        let reg_cfg = RegistryConfig { capacity: 8, ttl_ms: 10_000, grace_ms: 2_000, max_skew_ms: 1_000, minters: MINTERS, per_owner: None };
        let mut reg = Registry::new(reg_cfg).unwrap();
        let mut minters: Vec<Minter> = (0..MINTERS)
            .map(|i| Minter {
                holder: SnowflakeHolder::with_rand(holder_config(), SplitMix64::new(u64::from(i))).unwrap(),
                saved: HolderState::default(),
            })
            .collect();
        let mut isolates: Vec<(MintedBuffer, i64)> = homes
            .iter()
            .map(|&h| {
                let config = MintConfig { staleness_ms: STALENESS_MS, ..MintConfig::new(MINTERS, h) };
                (MintedBuffer::new(LAYOUT, config).unwrap(), 0)
            })
            .collect();
        let mut now = T0;
        let mut in_flight: Vec<(usize, Vec<(u64, u64)>)> = Vec::new();
        let mut minted: HashSet<u64> = HashSet::new();
        let mut served: HashSet<u64> = HashSet::new();
        let mut ordinary = 0;
        for op in ops {
            match op {
                Op::Tick(ms) => now += ms,
                Op::Step(n, d) => {
                    let n = n % isolates.len();
                    isolates[n].1 = (isolates[n].1 + d).clamp(-800, 800);
                }
                Op::Serve(n, count) => {
                    let n = n % isolates.len();
                    let (buf, offset) = &mut isolates[n];
                    let clock = now.saturating_add_signed(*offset);
                    let mut out = vec![0u64; count];
                    let poll = buf.poll(clock, &mut out);
                    for &id in &out[..poll.filled] {
                        prop_assert!(minted.contains(&id), "served {id}, never minted");
                        prop_assert!(served.insert(id), "served {id} twice");
                        let ts = LAYOUT.decompose(id).unwrap().timestamp_ms;
                        prop_assert!(clock.saturating_sub(ts) <= STALENESS_MS, "served {id} {} ms old", clock - ts);
                        prop_assert!(LAYOUT.decompose(id).unwrap().worker_id < MINTERS);
                    }
                    let ask = match poll.next {
                        MintStep::Done { prefetch } => prefetch,
                        MintStep::FetchNow(ask) => Some(ask),
                        MintStep::Wait => None,
                    };
                    if let Some(ask) = ask {
                        let m = ask.minter as usize;
                        let ids = mint(&mut minters[m], ask.minter, &mut reg, now, ask.count as usize);
                        for &id in &ids {
                            prop_assert!(minted.insert(id), "minted {id} twice");
                        }
                        in_flight.push((n, batch_ranges(&LAYOUT, &ids)));
                    }
                }
                Op::Deliver(k) if !in_flight.is_empty() => {
                    let (n, ranges) = in_flight.remove(k % in_flight.len());
                    let (buf, offset) = &mut isolates[n];
                    let clock = now.saturating_add_signed(*offset);
                    if ranges.is_empty() {
                        buf.fetch_failed();
                    } else {
                        buf.fetched(&ranges, clock).unwrap();
                    }
                }
                Op::Lose(k) if !in_flight.is_empty() => {
                    let (n, _) = in_flight.remove(k % in_flight.len());
                    isolates[n].0.fetch_failed();
                }
                Op::Restart(m) => {
                    let saved = minters[m].saved;
                    if let Ok(holder) = SnowflakeHolder::restore(holder_config(), SplitMix64::new(now), saved, now) {
                        minters[m].holder = holder;
                    }
                }
                Op::Lease => {
                    ordinary += 1;
                    let key = format!("node-{ordinary}");
                    let ask = GrantRequest { owner: "", node_key: &key, node_now_ms: now, previous: None, secret: LeaseSecret::from_random([0; 16]) };
                    if let Ok(l) = reg.lease(ask, now) {
                        prop_assert!(l.worker_id >= MINTERS, "an ordinary node got reserved ID {}", l.worker_id);
                    }
                }
                Op::Deliver(_) | Op::Lose(_) => {}
            }
        }
    }
}
