#!/usr/bin/env bash
# Builds the Worker (worker/build/) with worker-build, using the pinned local
# wasm-bindgen, wasm-opt and esbuild (worker-build would download them). The
# only build of the Worker: worker/wrangler.toml's [build] runs this script, so
# `wrangler deploy` and `make dev` ship what make test and make bench measure.
# It never runs wrangler itself (wrangler runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh worker
. scripts/worker-env.sh
# Size-oriented: opt-level "s" and no name section took the .wasm from 1,038 KB
# (372 KB gzipped) to 750 KB (289 KB) at the same req/s (README, Benchmarks).
export CARGO_PROFILE_RELEASE_OPT_LEVEL=s
cd worker && worker-build --release 2>&1 | grep -vE "^\s*$|failed to get|Compiling|Checking" || true
test -f build/index.js && test -f build/index_bg.wasm
# The entry module (worker/entry.mjs: worker-build's exports and the RPC
# entrypoint `Ids`) is build/index.js, what wrangler.toml's `main`, the tests
# and the bench load; worker-build's own module is build/edgeleaf.js. Its
# compat alias build/worker/shim.mjs re-exports index.js, so it follows.
mv build/index.js build/edgeleaf.js
cp entry.mjs build/index.js
wasm-opt --strip-debug --strip-producers --enable-bulk-memory --enable-nontrapping-float-to-int \
  --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue \
  build/index_bg.wasm -o build/index_bg.wasm
echo "worker: build/index_bg.wasm $(wc -c < build/index_bg.wasm) bytes, $(gzip -9c build/index_bg.wasm | wc -c) gzipped"
