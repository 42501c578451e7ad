#!/usr/bin/env bash
# The core's property tests at length, under a new random seed (make proof).
# `make test` runs every property under one fixed seed (tests/support/props.rs),
# so it never fails by luck; this run looks further: every property with
# PROOF_SCALE times its cases (20 unless set), every block_props planted
# fault searched from this seed, and each planted fault's rate over
# EDGELEAF_PLANTED_PLANS plans (24,000 unless set), which must all hold
# without a fault. The seed is printed first; a failure replays with
#   PROOF_SEED=<seed> PROOF_SCALE=<scale> make proof
# or, one test:
#   EDGELEAF_PROPTEST_SEED=<seed> EDGELEAF_PROPTEST_SCALE=<scale> \
#     cargo test --all-features --test <file> <name>
# A bug found this way is kept as a named test of its smallest case (as
# block_props' the_rarest_faults_are_caught_in_their_smallest_worlds), so
# that make test runs it whatever the seeds draw.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

seed="${PROOF_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
scale="${PROOF_SCALE:-20}"
export EDGELEAF_PROPTEST_SEED="$seed" EDGELEAF_PROPTEST_SCALE="$scale"
echo "make proof: seed $seed, cases x$scale"
echo "  replay: PROOF_SEED=$seed PROOF_SCALE=$scale make proof"
# Optimised, without the release profile's LTO (a build in minutes, not
# tens of them), in a target directory of its own so that make test's and
# make bench's builds are left as they are.
export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
cargo=(cargo test --release --all-features -p edgeleaf --target-dir target/proof)
start=$SECONDS
"${cargo[@]}" --tests
"${cargo[@]}" --test block_props -- --ignored --exact planted_fault_rates --nocapture
echo "make proof: passed in $((SECONDS - start)) s (seed $seed, cases x$scale)"
