#!/usr/bin/env bash
# The chaos run (tests/chaos/chaos.mjs) against the Worker in workerd on
# 127.0.0.1: CHAOS_SECONDS long (default 60; 300 or more also requires worker
# IDs reused across generations), CHAOS_SEED to replay a run's faults,
# CHAOS_SERVICE_CLOCK=0 to leave out the service's clock steps, CHAOS_PLANT to
# break one thing on purpose and see its check fail, CHAOS_ONLY=kind,... to
# inject only those faults (tests/chaos/chaos.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh worker
scripts/pkg.sh
scripts/worker.sh
node_modules/.bin/node tests/chaos/chaos.mjs
