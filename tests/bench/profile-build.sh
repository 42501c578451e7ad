#!/usr/bin/env bash
# A build of the Worker for CPU profiles (tests/bench/profile.mjs): the same
# code and options as scripts/worker.sh (opt-level "s", wasm-opt -O), but the
# wasm keeps its name section (wasm-opt -g, no final strip), so a profile names
# Rust functions. Written to $1 (default target/worker-profile); worker/build is
# rebuilt as scripts/worker.sh makes it afterwards.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$(realpath -m "${1:-target/worker-profile}")"
. scripts/worker-env.sh
export CARGO_PROFILE_RELEASE_OPT_LEVEL=s
wrapper="$(mktemp)"
printf '#!/bin/sh\nexec "%s" -g "$@"\n' "$WASM_OPT_BIN" > "$wrapper"
chmod +x "$wrapper"
(cd worker && WASM_OPT_BIN="$wrapper" worker-build --release 2>&1 | grep -vE "^\s*$|failed to get|Compiling|Checking" || true)
rm -f "$wrapper"
rm -rf "$out" && mkdir -p "$out" && cp worker/build/index_bg.wasm "$out/"
# Laid out as scripts/worker.sh lays worker/build out: the entry module is index.js.
cp worker/build/index.js "$out/edgeleaf.js" && cp worker/entry.mjs "$out/index.js"
cp -r worker/build/worker "$out/" 2>/dev/null || true
echo "profile build: $out ($(wc -c < "$out/index_bg.wasm") bytes, with names)"
scripts/worker.sh
