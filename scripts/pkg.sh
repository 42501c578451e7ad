#!/usr/bin/env bash
# Builds the npm package in pkg/: the bindings' crate (pkg/wasm/) as wasm for Node (nodejs target) and for
# browsers/workerd (web target), and api.cjs, the CommonJS bundle of api.mjs
# and the modules it imports.
# The hand-written files of pkg/ are in git; what this makes is not.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh wasm
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"   # wasm-opt 132, esbuild, wasm-bindgen

rm -rf pkg/node pkg/web pkg/api.cjs
for target in nodejs web; do
  out=$([ "$target" = nodejs ] && echo node || echo web)
  # --mode no-install: wasm-bindgen comes from PATH, pinned by scripts/setup.sh.
  # --out-dir is relative to the bindings' crate (pkg/wasm/).
  wasm-pack --log-level warn build pkg/wasm --mode no-install --release --no-pack \
    --target "$target" --out-dir "../$out" --out-name edgeleaf
  rm -f "pkg/$out/.gitignore"
done
echo '{ "type": "module" }' > pkg/web/package.json
# --bundle: api.mjs imports its siblings; api.cjs carries them all.
esbuild pkg/api.mjs --bundle --format=cjs --platform=neutral --outfile=pkg/api.cjs --log-level=warning
ls -l pkg/web/edgeleaf_bg.wasm | awk '{print "pkg: web wasm " $5 " bytes"}'
echo "pkg: web wasm $(gzip -9c pkg/web/edgeleaf_bg.wasm | wc -c) bytes gzipped"
