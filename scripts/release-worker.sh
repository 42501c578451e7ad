#!/usr/bin/env bash
# Builds the Worker of the newest release in CHANGELOG.md (its heading
# `## <version> — <date> — <commit>`) from that commit, into
# target/releases/<version>/worker/build/, and prints that path. The two-version
# test (tests/service/two-versions.test.mjs) runs it beside the Worker in the
# tree, as Cloudflare runs two versions during every deploy.
#
# The release's sources come from git (`git archive <commit>`; its npm files
# are the tree's node_modules), so a clone
# without that commit cannot run the test: it fails here, saying so. The build
# is the release's own recipe (its scripts/worker.sh: worker-build with the
# pinned local tools, opt-level "s", wasm-opt), with a cargo target directory
# of its own; a second run finds the build and costs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
release=$(grep -m1 -E '^## [0-9]+\.[0-9]+\.[0-9]+ — ' CHANGELOG.md) \
  || { echo "release-worker: no released version in CHANGELOG.md" >&2; exit 1; }
version=$(awk '{print $2}' <<<"$release")
commit=$(awk '{print $NF}' <<<"$release")
git cat-file -e "$commit^{commit}" 2>/dev/null \
  || { echo "release-worker: commit $commit of release $version is not in this clone (a shallow clone?): fetch it, or the full history" >&2; exit 1; }
dir="$ROOT/target/releases/$version"
mkdir -p "$ROOT/target/releases"
# One build at a time (a test may ask while make test's step builds).
exec 9>"$ROOT/target/releases/.lock"
flock 9
build="$dir/worker/build"
if [ -f "$build/index_bg.wasm" ] && [ "$(cat "$dir/.commit" 2>/dev/null)" = "$commit" ]; then
  echo "$build"
  exit 0
fi
scripts/setup.sh worker >&2
rm -rf "$dir" && mkdir -p "$dir"
git archive "$commit" | tar -x -C "$dir"
# The build reads npm files (the dashboard's uPlot): the tree's, as installed.
ln -s "$ROOT/node_modules" "$dir/node_modules"
echo "release-worker: building $version ($commit) in $dir" >&2
# The release's own recipe (its scripts/worker.sh), with a cargo target
# directory kept across releases.
CARGO_TARGET_DIR="$ROOT/target/releases/cargo" "$dir/scripts/worker.sh" >&2
test -f "$build/index.js" && test -f "$build/index_bg.wasm" \
  || { echo "release-worker: the build of $version made no $build/index_bg.wasm" >&2; exit 1; }
echo "$commit" >"$dir/.commit"
echo "$build"
