#!/usr/bin/env bash
# Builds the Worker (worker/build/) with worker-build, using the pinned local
# wasm-bindgen, wasm-opt and esbuild (worker-build would download them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh worker
. scripts/worker-env.sh
cd worker && worker-build --release 2>&1 | grep -vE "^\s*$|failed to get|Compiling|Checking" || true
test -f build/index.js && test -f build/index_bg.wasm
echo "worker: build/index_bg.wasm $(wc -c < build/index_bg.wasm) bytes"
