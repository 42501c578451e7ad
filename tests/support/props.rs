//! The property tests' configuration, shared by every `tests/*_props.rs`
//! (each includes this file as `mod props`).
//!
//! `make test` must not fail by luck, so a property runs the same cases every
//! time: its RNG starts from [`FIXED_SEED`]. `make proof` (scripts/proof.sh)
//! runs them longer under a seed of its own and prints it; a failure there
//! replays exactly with the same two variables:
//!
//! - `EDGELEAF_PROPTEST_SEED`: unset, [`FIXED_SEED`]; a number, that seed;
//!   `random`, a new one drawn for each property (printed with its name);
//! - `EDGELEAF_PROPTEST_SCALE`: a whole number the case counts are multiplied
//!   by (1 unless set).
//!
//! The seed each property ran under is printed (`cargo test` shows it with a
//! failure's output, or with `--nocapture`).

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::hash::{BuildHasher, Hasher};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngSeed, TestRunner};

/// The seed of every property in `make test`. Changing it changes every
/// case the suite runs: do so only on purpose, and run `make proof` first.
pub const FIXED_SEED: u64 = 20_261_127;

/// The seed this run uses: [`FIXED_SEED`] unless `EDGELEAF_PROPTEST_SEED`
/// says otherwise; printed with the running test's name.
pub fn seed() -> u64 {
    let seed = match std::env::var("EDGELEAF_PROPTEST_SEED") {
        Err(_) => FIXED_SEED,
        Ok(s) if s.trim().is_empty() => FIXED_SEED,
        Ok(s) if s.trim() == "random" => random_seed(),
        Ok(s) => s.trim().parse().unwrap_or_else(|_| {
            panic!("EDGELEAF_PROPTEST_SEED: expected a u64 or `random`, found {s:?}")
        }),
    };
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    eprintln!("{test}: proptest seed {seed} (replay: EDGELEAF_PROPTEST_SEED={seed})");
    seed
}

/// `cases` times `EDGELEAF_PROPTEST_SCALE` (1 unless set).
pub fn scaled(cases: u32) -> u32 {
    let scale = std::env::var("EDGELEAF_PROPTEST_SCALE").map_or(1, |s| {
        s.trim().parse::<u32>().unwrap_or_else(|_| {
            panic!("EDGELEAF_PROPTEST_SCALE: expected a whole number, found {s:?}")
        })
    });
    cases.saturating_mul(scale.max(1))
}

/// A property's configuration: `cases` (scaled) from the run's seed.
pub fn config(cases: u32) -> Config {
    Config {
        cases: scaled(cases),
        rng_seed: RngSeed::Fixed(seed()),
        ..Config::default()
    }
}

/// A runner whose every draw follows from `seed` alone (no file of past
/// failures), for tests that draw values themselves.
pub fn runner_at(seed: u64) -> TestRunner {
    TestRunner::new(Config {
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    })
}

/// The value `strategy` draws from `seed`: the same on every run and
/// machine, for a given strategy.
pub fn draw<S: Strategy>(strategy: &S, seed: u64) -> S::Tree {
    strategy
        .new_tree(&mut runner_at(seed))
        .unwrap_or_else(|e| panic!("no value drawn from seed {seed}: {e}"))
}

/// Shrinks a failing value: the simplest value the search reaches that
/// still fails, with its failure (at most `budget` tries).
pub fn shrink<T: ValueTree, E>(
    tree: &mut T,
    mut failure: E,
    budget: u32,
    mut fails: impl FnMut(&T::Value) -> Result<(), E>,
) -> (T::Value, E) {
    let mut simplest = tree.current();
    let mut tries = 0;
    if !tree.simplify() {
        return (simplest, failure);
    }
    while tries < budget {
        tries += 1;
        let value = tree.current();
        let more = match fails(&value) {
            Err(why) => {
                simplest = value;
                failure = why;
                tree.simplify()
            }
            Ok(()) => tree.complicate(),
        };
        if !more {
            break;
        }
    }
    (simplest, failure)
}

fn random_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}
