//! Properties of snowflake generation over random clocks and layouts, through
//! the public API only.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;

use edgeleaf::{
    layout::LayoutSpec, layout::Parts, rand::SplitMix64, snowflake::Next,
    snowflake::SnowflakeConfig, snowflake::SnowflakeGenerator, snowflake::Wait, Error, Layout,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

const T0: u64 = 1_735_689_600_000;

/// A clock move: mostly small steps forward, often frozen, sometimes back a
/// little, rarely back a lot or far forward.
fn clock_step() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => 0i64..=0,
        6 => 1i64..=3,
        2 => -8i64..=-1,
        1 => -5_000i64..=-9,
        1 => 4i64..=2_000,
    ]
}

fn config() -> impl Strategy<Value = (SnowflakeConfig, u64)> {
    (0u32..1024, 0u64..=10, 0u32..=100, 0u64..=3, any::<u64>()).prop_map(
        |(worker, back, bound, borrow, seed)| {
            let mut c = SnowflakeConfig::new(Layout::LEAF, worker);
            c.max_backward_ms = back;
            c.sequence_start_bound = bound;
            c.max_borrow_ms = borrow;
            (c, seed)
        },
    )
}

/// What a run saw.
struct Run {
    now: u64,
    first: Option<u64>,
    issued: usize,
}

/// Runs a generator over a clock path, asking for `calls` IDs per clock
/// reading, and checks every answer against the rules: each ID above
/// `last_id` (which carries across runs, so across restarts) and never seen.
fn run(
    gen: &mut SnowflakeGenerator<SplitMix64>,
    cfg: &SnowflakeConfig,
    steps: &[(i64, u16)],
    mut now: u64,
    seen: &mut HashSet<u64>,
    last_id: &mut u64,
) -> Run {
    let (mut first, mut issued) = (None, 0);
    for &(step, calls) in steps {
        now = now.saturating_add_signed(step);
        for _ in 0..calls {
            match gen.next_id(now) {
                Ok(Next::Id(id)) => {
                    let id = id.get();
                    assert!(id > *last_id, "not increasing: {id} after {last_id}");
                    first.get_or_insert(id);
                    issued += 1;
                    assert!(seen.insert(id), "duplicate {id}");
                    assert!(id <= i64::MAX as u64);
                    let parts = cfg.layout.decompose(id).unwrap();
                    assert_eq!(parts.worker_id, cfg.worker_id);
                    assert!(
                        parts.timestamp_ms <= now + cfg.max_borrow_ms,
                        "ran ahead of the clock more than the borrow bound"
                    );
                    *last_id = id;
                }
                Ok(Next::RetryAfter { ms, reason }) => {
                    assert!(ms >= 1);
                    if reason == Wait::ClockBehind {
                        assert!(ms <= cfg.max_backward_ms);
                    }
                    break;
                }
                Err(Error::ClockMovedBackwards { last_ms, now_ms }) => {
                    assert_eq!(now_ms, now);
                    assert!(last_ms > now + cfg.max_backward_ms);
                    break;
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
    }
    Run { now, first, issued }
}

proptest! {
    #![proptest_config(props::config(256))]

    #[test]
    fn ids_are_unique_and_increasing_over_random_clocks(
        (cfg, seed) in config(),
        steps in prop::collection::vec((clock_step(), 1u16..3000), 1..60),
    ) {
        let mut gen = SnowflakeGenerator::with_rand(cfg, SplitMix64::new(seed)).unwrap();
        let mut seen = HashSet::new();
        run(&mut gen, &cfg, &steps, T0, &mut seen, &mut 0);
    }

    /// A restart resumes from the persisted last timestamp (as a host would
    /// after a crash, with a clock that may have gone back): nothing issued
    /// before the restart is issued again.
    #[test]
    fn restarts_never_repeat_ids(
        (cfg, seed) in config(),
        before in prop::collection::vec((clock_step(), 1u16..3000), 1..30),
        wound_back in 0u64..50,
        after in prop::collection::vec((clock_step(), 1u16..3000), 1..30),
    ) {
        let mut gen = SnowflakeGenerator::with_rand(cfg, SplitMix64::new(seed)).unwrap();
        let mut seen = HashSet::new();
        let mut last = 0;
        let now = run(&mut gen, &cfg, &before, T0, &mut seen, &mut last).now;
        let persisted = gen.state().last_ms;
        let mut restarted =
            SnowflakeGenerator::resume_after(cfg, SplitMix64::new(seed), persisted).unwrap();
        // The clock path after the restart ends well past where it started,
        // so the restarted generator does issue, and its IDs are checked
        // against everything before the restart (uniqueness and order).
        let r = run(&mut restarted, &cfg, &after, now - wound_back, &mut seen, &mut last);
        let past = (persisted + 1).saturating_sub(r.now) as i64;
        let end = run(&mut restarted, &cfg, &[(past.max(1), 10)], r.now, &mut seen, &mut last);
        prop_assert!(r.issued + end.issued > 0, "nothing issued after the restart");
    }

    /// Exact state restore (a Durable Object saving after every ID) continues
    /// without a gap or a repeat: within the same time unit, the next
    /// sequence number.
    #[test]
    fn exact_restore_continues(
        (cfg, seed) in config(),
        steps in prop::collection::vec((clock_step(), 1u16..500), 1..20),
        split in 0usize..20,
    ) {
        let split = split.min(steps.len());
        let mut gen = SnowflakeGenerator::with_rand(cfg, SplitMix64::new(seed)).unwrap();
        let mut seen = HashSet::new();
        let mut last = 0;
        let now = run(&mut gen, &cfg, &steps[..split], T0, &mut seen, &mut last).now;
        let before = last;
        let mut back =
            SnowflakeGenerator::from_state(cfg, SplitMix64::new(seed ^ 1), gen.state()).unwrap();
        let r = run(&mut back, &cfg, &steps[split..], now, &mut seen, &mut last);
        if let (Some(first), true) = (r.first, before > 0) {
            let (a, b) = (cfg.layout.decompose(before).unwrap(), cfg.layout.decompose(first).unwrap());
            if a.timestamp_ms == b.timestamp_ms {
                prop_assert_eq!(b.sequence, a.sequence + 1, "a gap (or a repeat) at the restore");
            }
        }
    }

    /// Batches obey the same rules as single IDs.
    #[test]
    fn batches_are_unique_and_increasing(
        (cfg, seed) in config(),
        steps in prop::collection::vec((clock_step(), 1usize..9000), 1..30),
    ) {
        let mut gen = SnowflakeGenerator::with_rand(cfg, SplitMix64::new(seed)).unwrap();
        let mut now = T0;
        let mut last = 0u64;
        let mut seen = HashSet::new();
        for (step, n) in steps {
            now = now.saturating_add_signed(step);
            let mut buf = vec![0u64; n];
            match gen.fill(now, &mut buf) {
                Ok(f) => {
                    assert!(f.filled == n || f.retry_after.is_some());
                    for &id in &buf[..f.filled] {
                        assert!(id > last);
                        assert!(seen.insert(id));
                        last = id;
                    }
                }
                Err(Error::ClockMovedBackwards { .. }) => {}
                Err(e) => panic!("unexpected {e}"),
            }
        }
    }

    /// Two workers on the same clock never collide.
    #[test]
    fn distinct_workers_never_collide(
        a in 0u32..1024, b in 0u32..1024,
        steps in prop::collection::vec((clock_step(), 1u16..5000), 1..20),
    ) {
        prop_assume!(a != b);
        let mut seen = HashSet::new();
        for w in [a, b] {
            let cfg = SnowflakeConfig::new(Layout::LEAF, w);
            let mut gen = SnowflakeGenerator::with_rand(cfg, SplitMix64::new(7)).unwrap();
            run(&mut gen, &cfg, &steps, T0, &mut seen, &mut 0);
        }
    }

    #[test]
    fn decompose_inverts_compose_for_every_valid_layout(
        ts_bits in 1u8..=62, worker_bits in 0u8..=31, seq_bits in 1u8..=31,
        epoch in 0u64..2_000_000_000_000, unit in 1u64..=1000,
        ts_frac in 0.0f64..1.0, worker in any::<u32>(), seq in any::<u32>(),
    ) {
        let spec = LayoutSpec {
            timestamp_bits: ts_bits, worker_bits, sequence_bits: seq_bits,
            epoch_ms: epoch, unit_ms: unit,
        };
        let layout = match Layout::new(spec) {
            Ok(l) => l,
            Err(Error::LayoutTooWide { total_bits }) => {
                prop_assert!(total_bits > 63);
                return Ok(());
            }
            Err(Error::OutOfRange { what: "epoch_ms", .. }) => return Ok(()),
            Err(e) => panic!("unexpected {e}"),
        };
        let span = layout.expires_at() - layout.epoch_ms();
        let tick = ((span / unit) as f64 * ts_frac) as u64;
        let parts = Parts {
            timestamp_ms: epoch + tick.min(layout.max_tick()) * unit,
            worker_id: worker & layout.max_worker_id(),
            sequence: seq & layout.max_sequence(),
        };
        let id = layout.compose(parts).unwrap();
        prop_assert!(id.get() <= layout.max_id());
        prop_assert!(id.get() <= i64::MAX as u64);
        prop_assert_eq!(layout.decompose(id.get()).unwrap(), parts);
        // And the other way round, for any integer the layout holds.
        let raw = (u64::from(worker) << 32 | u64::from(seq)) & layout.max_id();
        prop_assert_eq!(layout.compose(layout.decompose(raw).unwrap()).unwrap().get(), raw);
    }
}
