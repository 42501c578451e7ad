#!/usr/bin/env bash
# The chaos run (tests/chaos/chaos.mjs) against the Worker in workerd on
# 127.0.0.1: CHAOS_SECONDS long (default 60), CHAOS_SEED to replay a run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh worker
scripts/pkg.sh
scripts/worker.sh
node_modules/.bin/node tests/chaos/chaos.mjs
