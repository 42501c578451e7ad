#!/usr/bin/env bash
# Every test and check of the project, in three parts, one per product:
#   core     format, clippy, no_std builds, cargo tests, the fleet and world
#            simulations,
#            the core on wasm32 (wasm-pack test)                 (make test-core)
#   pkg      the npm package: build, TypeScript declarations, tests/pkg/ on
#            Node 20 and Chromium, tests/pkg/workerd/ in workerd, the packaging
#            matrix (tests/pkg/matrix.test.mjs: the packed package in each
#            toolchain's app, tests/pkg/matrix/<app>/)          (make test-pkg)
#   service  the Worker built as `wrangler deploy` builds it (its size against
#            the Workers limits), tests/service/, worker/openapi.yaml against
#            the service (schemathesis, scripts/spec.sh), tests/chaos/
#                                                                 (make test-service)
# Usage: scripts/test.sh [core|pkg|service]...; none: all three in that order
# (`make test`, which CI runs). JS tests are found by folder, not named here.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/versions.env
[ $# -gt 0 ] || set -- core pkg service
for part in "$@"; do
  case "$part" in core | pkg | service) ;; *) echo "usage: scripts/test.sh [core|pkg|service]..." >&2; exit 2 ;; esac
done
# The system's Node (20 on these machines) is the floor the npm package
# supports; wrangler and Miniflare need the Node 22 npm installs into node_modules.
# (the first node on PATH outside node_modules/.bin, so that a PATH with the
# project's tools first still tests on the system's Node)
NODE20="$(PATH=$(tr ':' '\n' <<<"$PATH" | grep -v node_modules/.bin | paste -sd:) command -v node)"
NODE22="$PWD/node_modules/.bin/node"
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
# Tests start their own service: never one left running (tests/service/
# leases.test.mjs runs against $EDGELEAF_URL when set, the CLI reads it).
unset EDGELEAF_URL EDGELEAF_TOKEN EDGELEAF_ADMIN_TOKEN
# The model checkers run whole here: MODEL_ONLY (one world or fault, while
# working on it) would skip the rest.
unset MODEL_ONLY

step() { echo; echo "=== $*"; }
# A hung wait (a service that never becomes ready) fails its test, not CI.
NODE_TEST=(--test --test-timeout=300000)

# Where each part finds its JS tests. A test file anywhere else under tests/
# would run in no part: that fails every part at once. (The matrix's apps,
# tests/pkg/matrix/<app>/, hold their own tools' tests, which their checks run.)
MATRIX_TESTS=(tests/pkg/matrix.test.mjs)    # Node 22 runs it; each app's tools run as they need
PKG_TESTS=()                                # Node 20 (ESM, CJS) and Chromium
for f in tests/pkg/*.test.*; do [ "$f" = "${MATRIX_TESTS[0]}" ] || PKG_TESTS+=("$f"); done
PKG_WORKERD_TESTS=(tests/pkg/workerd/*.test.*) # Node 22: wrangler bundles, Miniflare runs
SERVICE_TESTS=(tests/service/*.test.*)      # Node 22: Miniflare / workerd
CHAOS_TESTS=(tests/chaos/*.test.*)          # Node 22
stray=$(comm -23 <(find tests -path tests/pkg/matrix -prune -o -name '*.test.*' -print | sort) \
  <(printf '%s\n' "${PKG_TESTS[@]}" "${MATRIX_TESTS[@]}" "${PKG_WORKERD_TESTS[@]}" "${SERVICE_TESTS[@]}" "${CHAOS_TESTS[@]}" | sort))
[ -z "$stray" ] || { echo "test files outside the folders scripts/test.sh runs:"; echo "$stray"; exit 1; }

core() {
  scripts/setup.sh core wasm browser

  step "format"
  cargo fmt --all -- --check

  step "clippy (core: default, no_std, all features; the service's rules; the wasm32 bindings and the Worker)"
  cargo clippy --all-targets -- -D warnings
  cargo clippy -p edgeleaf --all-targets --no-default-features -- -D warnings
  cargo clippy --all-targets --all-features -- -D warnings
  cargo clippy -p edgeleaf --tests --target "$WASM_TARGET" -- -D warnings
  cargo clippy -p edgeleaf-wasm --target "$WASM_TARGET" -- -D warnings
  cargo clippy -p edgeleaf-worker --target "$WASM_TARGET" -- -D warnings

  step "no_std build for $NO_STD_TARGET (no allocator; then alloc + serde)"
  cargo clippy -p edgeleaf --lib --target "$NO_STD_TARGET" --no-default-features --features alloc,serde -- -D warnings
  cargo build -p edgeleaf --lib --target "$NO_STD_TARGET" --no-default-features
  cargo build -p edgeleaf --lib --target "$NO_STD_TARGET" --no-default-features --features alloc,serde

  step "the core depends on nothing of the service or of JS (cargo tree -e normal)"
  deps=$(cargo tree -e normal -p edgeleaf --all-features --prefix none --format '{p}' | awk '{print $1}' | sort -u | tr '\n' ' ')
  echo "edgeleaf (all features): $deps"
  for banned in sha2 serde_json wasm-bindgen js-sys getrandom worker edgeleaf-rules; do
    case " $deps " in *" $banned "*) echo "the core depends on $banned"; exit 1 ;; esac
  done

  step "unit, property and doc tests (the core: tests/*.rs; the service's rules: worker/rules/tests/)"
  cargo test --all-features
  cargo test -p edgeleaf-worker

  step "the fleet simulation (tests/sim/), short form: per-isolate leasing vs minters (fails on a duplicate, a fence, staleness or reserved-ID violation, or nothing served)"
  cargo run --quiet --release --example fleet_sim -- --short

  step "the world simulation (tests/sim/), short form: 276 colos, today's design vs regional allocators, steady / deploy storm / a region down (fails on a duplicate or a regional target missed; make sim runs the full form)"
  scripts/sim.sh --short
  # Its checks can fail, each planted fault (--fault) by the check meant for
  # it (exit 1, that check's violation printed): an allocator that answers
  # before it stores what it answered serves IDs twice after the storm's
  # replacements; an isolate that waits past its request's budget answers
  # late; isolates that never fall back leave the cold isolates of the
  # region down unserved in their first request; a minter that forgets
  # the rights it lent lends slices still out, and isolates mint the same
  # IDs.
  for planted in "serve-before-persist:IDs served twice" \
    "forget-lent:IDs served twice" \
    "ignore-budget:requests answered after their bound" \
    "no-fallback:in its first request while they were unreachable"; do
    fault=${planted%%:*} check=${planted#*:} rc=0
    out=$(scripts/sim.sh --short --fault "$fault" 2>&1) || rc=$?
    if [ "$rc" -ne 1 ] || ! grep -q "^VIOLATION: .*$check" <<<"$out"; then
      echo "the world simulation missed a planted fault (--fault $fault: exit $rc, no violation \"$check\")"; exit 1
    fi
    echo "--fault $fault caught: $(grep -c '^VIOLATION: ' <<<"$out") violations, e.g. $(grep -m1 "^VIOLATION: .*$check" <<<"$out")"
  done

  step "core on wasm32: wasm-pack test --node"
  wasm-pack --log-level warn test --node --mode no-install --test wasm

  step "core on wasm32: wasm-pack test --headless --chrome"
  # Without WASM_BINDGEN_USE_BROWSER the runner skips every test and still exits 0.
  out=$(WASM_BINDGEN_USE_BROWSER=1 wasm-pack --log-level warn test --headless --chrome --mode no-install --test wasm 2>&1) \
    || { echo "$out"; exit 1; }
  echo "$out" | grep -E "Running headless|test result"
  echo "$out" | grep -qE "test result: ok\. [1-9][0-9]* passed" || { echo "$out"; echo "no test ran in Chrome"; exit 1; }
}

pkg() {
  scripts/setup.sh wasm browser matrix

  step "npm package: build (make pkg)"
  scripts/pkg.sh
  PKG_BUILT=1

  step "npm package: TypeScript declarations"
  tsc -p tests/pkg/ts/tsconfig.json

  step "npm package: Node $($NODE20 --version) (ESM + CJS) and Chromium (tests/pkg/)"
  "$NODE20" "${NODE_TEST[@]}" "${PKG_TESTS[@]}"

  step "npm package: workerd (tests/pkg/workerd/: wrangler bundle, Miniflare; Node $($NODE22 --version))"
  "$NODE22" "${NODE_TEST[@]}" "${PKG_WORKERD_TESTS[@]}"

  step "npm package: the packaging matrix (npm pack, installed into one app per toolchain; browser builds in Chromium)"
  EDGELEAF_NODE20="$NODE20" "$NODE22" "${NODE_TEST[@]}" "${MATRIX_TESTS[@]}"
}

# Workers limits (developers.cloudflare.com/workers/platform/limits, "Worker
# size"): 3 MB after compression on the Free plan, 10 MB on Paid; 64 MiB
# before compression (wrangler 4's own bound).
FREE_GZIP=3000000 PAID_GZIP=10000000 MAX_RAW=$((64 * 1024 * 1024))

deploy_dry_run() {
  # The Worker's one build: wrangler runs worker/wrangler.toml's [build]
  # (scripts/worker.sh, the build make bench measures) and bundles what
  # `wrangler deploy` would upload. --dry-run neither logs in nor uploads.
  local out raw gz
  out=$(mktemp -d)
  (cd worker && . ../scripts/worker-env.sh && CI=1 wrangler deploy --dry-run --outdir "$out") \
    | { grep -vE "^(Binding|Your Worker has access|env\.)|^\s*$" || true; }
  # The modules `wrangler deploy` uploads, measured as its "Total Upload" is
  # (zlib's gzip of the .wasm and the JS, concatenated in that order).
  read -r raw gz < <(cat "$out"/*.wasm "$out"/*.js | "$NODE22" -e "
    const b = require('fs').readFileSync(0); console.log(b.length, require('zlib').gzipSync(b).length)")
  rm -rf "$out"
  [ -n "$gz" ] || { echo "deploy bundle: not measured"; exit 1; }
  echo "deploy bundle (.wasm + index.js): $raw bytes, $gz gzipped"
  echo "  Workers Free: $((gz * 100 / FREE_GZIP))% of its 3 MB gzipped; Paid: $((gz * 100 / PAID_GZIP))% of 10 MB; $((raw * 100 / MAX_RAW))% of the 64 MiB before compression"
  [ "$gz" -le "$FREE_GZIP" ] && [ "$raw" -le "$MAX_RAW" ] \
    || { echo "the Worker is over the Workers Free plan's size limit"; exit 1; }
}

service() {
  scripts/setup.sh worker browser spec
  if [ -z "${PKG_BUILT:-}" ]; then
    step "npm package: build (the service tests' client is the package)"
    scripts/pkg.sh
  fi

  step "service: build the Worker as \`wrangler deploy\` does (dry run; [build] runs scripts/worker.sh), its size against the Workers limits"
  deploy_dry_run

  step "service: the previous release's Worker (the newest in CHANGELOG.md, built from its commit), for the two-version test"
  scripts/release-worker.sh

  step "service (tests/service/): every route, API keys × scopes (and across kill -9), lease capabilities (two applications, eviction, reclaim), the upgrade of a store written before lease secrets, history and metrics, opaque tags, an HTTP fuzzer, concurrency, registry, restarts, the JS client, kill -9, two isolates over the same Durable Objects through a kill -9, a user's Worker calling over a service binding (RPC), the dashboard in Chromium, the service's clock stepped under load, the previous release beside this one in every arrangement (Miniflare/workerd; Node $($NODE22 --version))"
  "$NODE22" "${NODE_TEST[@]}" "${SERVICE_TESTS[@]}"

  step "service: worker/openapi.yaml is the service (schemathesis $(sed -n 's/^schemathesis==//p' scripts/schemathesis.txt), every check, seed and settings in tests/spec/: each status, pattern and bound of the spec against the Worker in workerd, auth probes, unlisted methods 405; 0 failures)"
  # Its summary line (failures or passes, and the time) closes its output.
  scripts/spec.sh

  step "chaos (tests/chaos/), short form (make chaos runs it for CHAOS_SECONDS): kill -9, lapsed leases, client and service clock steps, a hostile registry key, two processes sharing a store, callers without a key reusing request IDs, a key poisoning and squatting worker IDs; every ID checked, every victim served, the service recovers after each fault, every refusal expected"
  "$NODE22" "${NODE_TEST[@]}" "${CHAOS_TESTS[@]}"
}

for part in "$@"; do "$part"; done
