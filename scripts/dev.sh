#!/usr/bin/env bash
# `make dev`: installs what is missing, builds the Worker and serves it with
# `wrangler dev` (workerd) on http://127.0.0.1:8787 (wrangler.toml's [build]
# runs scripts/worker.sh: the build deploy ships), Durable Objects persisted
# in .wrangler/state (SQLite): a second start continues every ID sequence.
# Tokens come from worker/.dev.vars (ADMIN_TOKEN=dev-admin-token).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh worker
. scripts/worker-env.sh
export CI=1   # no interactive prompts from wrangler
STATE="$ROOT/.wrangler/state"
mkdir -p "$STATE"
cd worker
echo "dev: serving on http://127.0.0.1:${PORT:-8787} (state: $STATE); Ctrl-C stops"
exec wrangler dev --ip 127.0.0.1 --port "${PORT:-8787}" --persist-to "$STATE" \
  --show-interactive-dev-session=false --log-level "${LOG_LEVEL:-warn}"
