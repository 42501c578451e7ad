#!/usr/bin/env bash
# Benchmarks (tests/bench/): the core (criterion + sustained real clock), the npm package
# against peers in Node, and the Worker under HTTP load on 127.0.0.1. Figures go in README.md with this command; compare
# rows of one run with each other (these machines are small and noisy).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh bench
scripts/pkg.sh
scripts/worker.sh
rm -rf target/bench-report
cargo bench --bench generators "$@"
# The system Node (first on PATH here), the floor the package supports.
"$(command -v node)" tests/bench/node.bench.mjs
node_modules/.bin/node tests/bench/lease-prune.bench.mjs
node_modules/.bin/node tests/bench/http.bench.mjs
# A user's Worker calling it: RPC through a service binding, fetch through
# the binding, public HTTP, in the same run.
node_modules/.bin/node tests/bench/binding.bench.mjs
# The bill: what a million IDs cost the Durable Objects per route, counted
# (object requests, rows read and written) at the dated prices of
# docs/benchmarks.md.
node_modules/.bin/node tests/bench/costs.bench.mjs
# Every figure above in one table, each with its same-run baseline and its
# spread across rounds; last, the line to quote (http: single-ID … of no-op,
# batch … of the same-bytes floor, opaque … of plain).
node_modules/.bin/node tests/bench/report.mjs
