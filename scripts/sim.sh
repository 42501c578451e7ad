#!/usr/bin/env bash
# The world simulation (tests/sim/world_sim.rs): Cloudflare's 276 colos with
# their measured latencies (tests/sim/data/), today's design (one root object
# per tag, minters placed where first called) against regional allocators and
# minters, in an hour of steady traffic, a deploy storm at 10,000 isolates and
# a region's objects unreachable for a minute. Prints the tables of
# docs/benchmarks.md#the-world-simulation, and the bill per million IDs per
# route at the prices of tests/bench/bill.mjs; exits 1 on a duplicate (either
# design) or a violation of the regional design's targets (among them, in the
# full form, each route's objects at most $0.003 a million IDs in the steady hour).
# It runs the service as shipped: SNOWFLAKE_MINTERS and SNOWFLAKE_STALENESS_MS
# from worker/wrangler.toml, the minters placed and chosen by the core's own
# rules (MinterPools::over_regions, MintConfig::for_region, MintTries,
# MintedBuffer::fetch_unanswered), allocators at the hosting regions
# (Region::hosting).
# Arguments go to the simulation: scripts/sim.sh --short (what make test
# runs), --seed N, --isolates N, --minutes N, --minters N (to size them),
# --scenario steady|storm|outage (one alone),
# --rights on|off (minters lend rights to mint; unless told, as shipped:
# on when the registry can reserve 2 x SNOWFLAKE_MINTERS worker IDs),
# --rights-ttl-ms N (the rights holders' lease, to explore; as shipped: 6 minutes),
# --fault serve-before-persist|no-fallback|ignore-budget|forget-lent
# (a planted bug: the run must exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
exec cargo run --quiet --release --features serde --example world_sim -- "$@"
