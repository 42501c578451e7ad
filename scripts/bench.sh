#!/usr/bin/env bash
# Benchmarks. Figures go in README.md with this command; compare rows of one
# run with each other (these machines are small and noisy).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh core
cargo bench --bench generators "$@"
