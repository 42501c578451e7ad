#!/usr/bin/env bash
# Idempotent, pinned setup. Usage: scripts/setup.sh PART...
#   core     rustup targets (no_std check, wasm32)
#   wasm     wasm-pack + wasm-bindgen-cli (exact pins) and npm packages
#   worker   worker-build and npm packages (wrangler, workerd)
#   browser  Debian chromium + chromium-driver
#   bench    Debian wrk (HTTP load)
#   spec     schemathesis (PyPI) in target/schemathesis, a venv of its own
#   matrix   npm packages of the packaging matrix's apps (tests/pkg/matrix/*/)
# Each part checks before it installs, so a second run costs seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=versions.env
. scripts/versions.env
export PATH="$HOME/.cargo/bin:$PATH"

have() { command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -qF "$2"; }
say() { echo "setup: $*" >&2; }

core() {
  local installed
  installed=$(rustup target list --installed)
  for t in "$NO_STD_TARGET" "$WASM_TARGET"; do
    grep -qx "$t" <<<"$installed" || { say "rustup target add $t"; rustup target add "$t"; }
  done
}

npm_packages() {
  # package-lock.json pins every npm package. Not `npm ci`: it insists on the
  # lock's optional binaries for other platforms (workerd for macOS/Windows),
  # which the registry mirror here does not serve; `npm install` installs the
  # locked versions and skips optional packages it cannot get.
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "npm install (from package-lock.json)"
    npm install --no-audit --no-fund --loglevel=error
  fi
}

wasm() {
  core
  have wasm-pack "$WASM_PACK" || { say "cargo install wasm-pack $WASM_PACK"; cargo install wasm-pack --version "$WASM_PACK" --locked; }
  # not --locked: its lockfile pins a crate version the registry mirror here lacks
  have wasm-bindgen "$WASM_BINDGEN" || { say "cargo install wasm-bindgen-cli $WASM_BINDGEN"; cargo install wasm-bindgen-cli --version "$WASM_BINDGEN"; }
  npm_packages
}

worker() {
  core
  have wasm-bindgen "$WASM_BINDGEN" || { say "cargo install wasm-bindgen-cli $WASM_BINDGEN"; cargo install wasm-bindgen-cli --version "$WASM_BINDGEN"; }
  have worker-build "$WORKER_BUILD" || { say "cargo install worker-build $WORKER_BUILD"; cargo install worker-build --version "$WORKER_BUILD" --locked; }
  npm_packages
}

matrix() {
  # The packaging matrix's apps (tests/pkg/matrix/<app>/), each with its own
  # package-lock.json: installed when the lock (or package.json) changed since
  # the last install, recorded by a stamp in the app's node_modules. All at
  # once: npm waits on the registry and the disk, not the CPU. `npm install`
  # (not `npm ci`) for the reason npm_packages gives: the locks hold no
  # optional binaries of other platforms, which `npm ci` insists on.
  local app sum pids=() names=() failed=0 i
  for app in tests/pkg/matrix/*/; do
    app=${app%/}
    [ -f "$app/package-lock.json" ] || continue
    sum=$(cat "$app/package.json" "$app/package-lock.json" | sha256sum | cut -d' ' -f1)
    [ "$(cat "$app/node_modules/.edgeleaf-stamp" 2>/dev/null)" = "$sum" ] && continue
    say "npm install in $app (its lock changed)"
    (
      cd "$app" && npm install --no-audit --no-fund --loglevel=error >npm-install.log 2>&1 \
        && mkdir -p node_modules && echo "$sum" >node_modules/.edgeleaf-stamp && rm -f npm-install.log
    ) &
    pids+=($!) names+=("$app")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { failed=1; say "npm install failed in ${names[$i]}:"; cat "${names[$i]}/npm-install.log" >&2; }
  done
  [ "$failed" = 0 ]
}

browser() {
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    say "apt-get install chromium chromium-driver"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
  fi
}

bench() {
  if ! command -v wrk >/dev/null; then
    say "apt-get install wrk"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null
  fi
}

spec() {
  # The API fuzzer of scripts/spec.sh, with every package it needs pinned in
  # scripts/schemathesis.txt (from `pip freeze`), in a venv of its own: the
  # machine's Python stays as it was. Reinstalled when the pins change.
  local venv=target/schemathesis sum
  sum=$(sha256sum <scripts/schemathesis.txt | cut -d' ' -f1)
  [ "$(cat "$venv/.edgeleaf-stamp" 2>/dev/null)" = "$sum" ] && return
  say "pip install schemathesis into $venv (scripts/schemathesis.txt)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/schemathesis.txt
  echo "$sum" >"$venv/.edgeleaf-stamp"
}

[ $# -gt 0 ] || set -- core
for part in "$@"; do "$part"; done
