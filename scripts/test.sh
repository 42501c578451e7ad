#!/usr/bin/env bash
# Every test and check of the project. `make test` runs it; so does CI.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/versions.env
scripts/setup.sh core
export PATH="$HOME/.cargo/bin:$PATH"

step() { echo; echo "=== $*"; }

step "format"
cargo fmt --all -- --check

step "clippy (default, no_std, all features)"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --all-targets --no-default-features -- -D warnings
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "no_std build for $NO_STD_TARGET (no allocator; then alloc + serde)"
cargo build --lib --target "$NO_STD_TARGET" --no-default-features
cargo build --lib --target "$NO_STD_TARGET" --no-default-features --features alloc,serde

step "unit, property and doc tests"
cargo test --workspace --all-features
