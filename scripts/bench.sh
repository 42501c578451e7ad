#!/usr/bin/env bash
# Benchmarks: the core (criterion + sustained real clock) and the npm package
# against peers in Node. Figures go in README.md with this command; compare
# rows of one run with each other (these machines are small and noisy).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/pkg.sh
cargo bench --bench generators "$@"
/usr/bin/node bench/node.bench.mjs
