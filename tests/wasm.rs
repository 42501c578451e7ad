//! The core's invariants on wasm32, run by `wasm-pack test` in Node and in
//! headless Chromium (WASM_BINDGEN_USE_BROWSER=1). proptest does not run
//! there, so the random cases come from SplitMix64 with fixed seeds.
#![cfg(target_arch = "wasm32")]

use std::collections::HashSet;

use edgeleaf::{
    layout::Parts, rand::RandSource, rand::SplitMix64, registry::GrantRequest, registry::Registry,
    registry::RegistryConfig, secret::SecretHash, segment::Allocation, segment::SegmentBuffer,
    segment::SegmentNext, segment::StepPolicy, snowflake::Next, snowflake::SnowflakeConfig,
    snowflake::SnowflakeGenerator, tag::TagRecord, Error, Layout,
};
use wasm_bindgen_test::wasm_bindgen_test;

const T0: u64 = 1_735_689_600_000;

#[wasm_bindgen_test]
fn snowflake_ids_are_unique_and_increasing_over_random_clocks() {
    for seed in 0..20u64 {
        let mut rng = SplitMix64::new(seed);
        let mut cfg = SnowflakeConfig::new(Layout::LEAF, rng.next_u32() % 1024);
        cfg.max_borrow_ms = u64::from(rng.next_u32() % 3);
        let mut gen = SnowflakeGenerator::with_rand(cfg, SplitMix64::new(seed)).unwrap();
        let (mut now, mut last, mut seen) = (T0, 0u64, HashSet::new());
        for _ in 0..200 {
            // Mostly forward or frozen, sometimes back a little or a lot.
            let step = i64::from(rng.next_u32() % 12) - 3;
            let step = if rng.next_u32() % 50 == 0 {
                -10_000
            } else {
                step
            };
            now = now.saturating_add_signed(step);
            for _ in 0..rng.next_u32() % 3000 {
                match gen.next_id(now) {
                    Ok(Next::Id(id)) => {
                        assert!(id.get() > last && seen.insert(id.get()));
                        last = id.get();
                    }
                    Ok(Next::RetryAfter { ms, .. }) => {
                        assert!(ms >= 1);
                        break;
                    }
                    Err(Error::ClockMovedBackwards { .. }) => break,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        assert!(seen.len() > 1000);
    }
}

#[wasm_bindgen_test]
fn compose_and_decompose_round_trip_in_u64_arithmetic() {
    let mut rng = SplitMix64::new(7);
    for layout in [Layout::LEAF, Layout::JS_SAFE] {
        for _ in 0..1000 {
            let tick = (u64::from(rng.next_u32()) << 9) % layout.max_tick();
            let parts = Parts {
                timestamp_ms: layout.epoch_ms() + tick * layout.unit_ms(),
                worker_id: rng.next_u32() & layout.max_worker_id(),
                sequence: rng.next_u32() & layout.max_sequence(),
            };
            let id = layout.compose(parts).unwrap();
            assert!(id.get() <= layout.max_id());
            assert_eq!(layout.decompose(id.get()).unwrap(), parts);
        }
    }
}

#[wasm_bindgen_test]
fn segments_from_the_allocator_never_repeat() {
    let mut row = TagRecord::new("wasm", 13, 0, "", 0).unwrap();
    let mut buf = SegmentBuffer::new(StepPolicy::new(13).unwrap());
    let mut seen = HashSet::new();
    let load = |buf: &mut SegmentBuffer, row: &mut TagRecord, now| {
        let (alloc, next): (Allocation, TagRecord) = row
            .allocate(Some(buf.step_for_next_load(now)), now)
            .unwrap();
        *row = next;
        buf.load(alloc, now).unwrap();
    };
    for now in 0..20_000u64 {
        match buf.next_id() {
            SegmentNext::Id { id, prefetch } => {
                assert!(seen.insert(id));
                if prefetch {
                    load(&mut buf, &mut row, now);
                }
            }
            SegmentNext::Exhausted { .. } => load(&mut buf, &mut row, now),
        }
    }
    assert!(seen.len() > 19_000);
}

#[wasm_bindgen_test]
fn registry_never_shares_a_live_worker_id() {
    let mut reg = Registry::new(RegistryConfig::new(&Layout::JS_SAFE)).unwrap();
    let mut ids = HashSet::new();
    for n in 0..128 {
        let key = format!("node-{n}");
        let lease = reg
            .lease(
                GrantRequest {
                    owner: "",
                    node_key: &key,
                    node_now_ms: T0,
                    previous: None,
                    secret_hash: SecretHash([1; 32]),
                },
                T0,
            )
            .unwrap();
        assert!(ids.insert(lease.worker_id));
    }
    assert!(matches!(
        reg.lease(
            GrantRequest {
                owner: "",
                node_key: "one-too-many",
                node_now_ms: T0,
                previous: None,
                secret_hash: SecretHash([1; 32])
            },
            T0
        ),
        Err(Error::NoFreeWorkerId { capacity: 128 })
    ));
}
