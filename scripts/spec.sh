#!/usr/bin/env bash
# worker/openapi.yaml against the service it describes: schemathesis (PyPI,
# pinned in scripts/schemathesis.txt) runs every check, from a fixed seed, on
# the built Worker (worker/build/, scripts/worker.sh) in workerd through
# Miniflare (tests/support/service.mjs), with the root token, so every route
# is reached; its probes take the token away or change it. Any failure fails:
# a status the spec does not list, a request the spec allows refused (or one
# it forbids accepted), a body not of its schema, a route open that the spec
# says needs a token, a method no route has answered other than 405.
# Usage: scripts/spec.sh [more st run options]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh spec
NODE22="$PWD/node_modules/.bin/node"
ST="$PWD/target/schemathesis/bin/st"
# Cases per operation and phase: about two minutes on a busy 2-core machine.
SPEC_EXAMPLES=${SPEC_EXAMPLES:-300}
[ -f worker/build/index.js ] || { echo "spec: worker/build/ missing (scripts/worker.sh builds it)" >&2; exit 1; }

work=$(mktemp -d)
# Its own process group (setsid), so that workerd goes with it.
# SPEC_VARS: settings over wrangler.toml's, as JSON ('{"CLIENT_TOKEN":""}':
# the ids routes open without a token).
setsid "$NODE22" tests/support/service.mjs "$work/state" 0 "${SPEC_VARS:-{\}}" >"$work/service.log" 2>&1 &
service=$!
trap 'kill -- -"$service" 2>/dev/null || true; wait "$service" 2>/dev/null || true; rm -rf "$work"' EXIT
url=
for _ in $(seq 300); do
  url=$(sed -n 's/^ready \(http[^ ]*\).*/\1/p' "$work/service.log" | head -1)
  [ -n "$url" ] && break
  kill -0 "$service" 2>/dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/service.log" >&2; echo "spec: the service did not start" >&2; exit 1; }
url=${url%/}

# tests/spec/: the run's settings (seed, one worker, no example database)
# and the checks of what the spec cannot say. The root token of
# tests/support/service.mjs (ADMIN) opens every route.
spec="$PWD/tests/spec"
cd "$work"
status=0
SCHEMATHESIS_HOOKS="$spec/hooks.py" "$ST" --config-file "$spec/schemathesis.toml" run "$OLDPWD/worker/openapi.yaml" \
  --url "$url" --max-examples "$SPEC_EXAMPLES" \
  --header "Authorization: Bearer test-admin-token" "$@" | tee "$work/st.log" || status=$?
# schemathesis' own last line counts failures and warnings, not cases: one
# line that says both.
cases=$(sed -n 's/^ *\([0-9]* generated, .*\)$/\1/p' "$work/st.log" | tail -1)
failures=$(sed -n 's/^=* \([0-9]*\) failures\{0,1\}[ ,].*/\1/p' "$work/st.log" | tail -1)
echo "spec: schemathesis $("$ST" --version | awk '{print $NF}'), seed $(sed -n 's/^Seed: //p' "$work/st.log" | tail -1): failures ${failures:-0}; test cases: ${cases:-none}"
exit "$status"
