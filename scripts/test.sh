#!/usr/bin/env bash
# Every test and check of the project. `make test` runs it; so does CI.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/versions.env
scripts/setup.sh core wasm worker browser
# The system's Node (20 on these machines) is the floor the npm package
# supports; wrangler and Miniflare need the Node 22 npm installs into node_modules.
NODE20="$(command -v node)"
NODE22="$PWD/node_modules/.bin/node"
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

step() { echo; echo "=== $*"; }
# A hung wait (a service that never becomes ready) fails its test, not CI.
NODE_TEST=(--test --test-timeout=300000)

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

step "the core depends on nothing of the service or of JS"
deps=$(cargo tree -e normal -p edgeleaf --all-features --prefix none --format '{p}' | awk '{print $1}' | sort -u | tr '\n' ' ')
echo "edgeleaf (all features): $deps"
for banned in sha2 serde_json wasm-bindgen js-sys getrandom worker; do
  case " $deps " in *" $banned "*) echo "the core depends on $banned"; exit 1;; esac
done

step "unit, property and doc tests (core, service rules)"
cargo test --all-features
cargo test -p edgeleaf-worker

step "the fleet simulation, short form: per-isolate leasing vs minters (fails on a duplicate, a fence, staleness or reserved-ID violation, or nothing served)"
cargo run --quiet --release --example fleet_sim -- --short

step "core on wasm32: wasm-pack test --node"
wasm-pack --log-level warn test --node --mode no-install --test wasm

step "core on wasm32: wasm-pack test --headless --chrome"
# Without WASM_BINDGEN_USE_BROWSER the runner skips every test and still exits 0.
out=$(WASM_BINDGEN_USE_BROWSER=1 wasm-pack --log-level warn test --headless --chrome --mode no-install --test wasm 2>&1) \
  || { echo "$out"; exit 1; }
echo "$out" | grep -E "Running headless|test result"
echo "$out" | grep -qE "test result: ok\. [1-9][0-9]* passed" || { echo "$out"; echo "no test ran in Chrome"; exit 1; }

step "npm package: build (make pkg)"
scripts/pkg.sh

step "npm package: TypeScript declarations"
tsc -p tests/ts/tsconfig.json

step "npm package: Node $($NODE20 --version) (ESM + CJS) and Chromium"
"$NODE20" "${NODE_TEST[@]}" tests/js/snowflake.test.mjs tests/js/segment.test.mjs tests/js/opaque-pkg.test.mjs tests/js/cjs.test.cjs tests/js/readme.test.mjs tests/js/pack.test.mjs \
  tests/js/browser.test.mjs

step "npm package: workerd (wrangler bundle, Miniflare; Node $($NODE22 --version))"
"$NODE22" "${NODE_TEST[@]}" tests/js/workerd.test.mjs

step "service: build the Worker (worker-build)"
scripts/worker.sh

step "service: every route, API keys × scopes (and across kill -9), lease capabilities (two applications, eviction, reclaim), the upgrade of a store written before lease secrets, history and metrics, opaque tags, an HTTP fuzzer, concurrency, registry, restarts, the JS client, kill -9, two isolates over the same Durable Objects through a kill -9, the dashboard in Chromium, the service's clock stepped under load (Miniflare/workerd; Node $($NODE22 --version))"
"$NODE22" "${NODE_TEST[@]}" tests/js/service.test.mjs tests/js/keys.test.mjs tests/js/keys-restart.test.mjs tests/js/leases.test.mjs tests/js/upgrade.test.mjs tests/js/fleet.test.mjs tests/js/opaque.test.mjs tests/js/fuzz.test.mjs tests/js/client.test.mjs tests/js/durability.test.mjs tests/js/dashboard.test.mjs \
  tests/js/clock-shim.test.mjs tests/js/clock-steps.test.mjs tests/js/two-isolates.test.mjs

step "chaos, short form (make chaos runs it for CHAOS_SECONDS): kill -9, lapsed leases, client and service clock steps, a hostile registry key; every ID checked, the service recovers after each fault, every refusal expected"
"$NODE22" "${NODE_TEST[@]}" tests/js/chaos.test.mjs
