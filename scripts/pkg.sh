#!/usr/bin/env bash
# Builds the npm package in pkg/ from the bindings' crate (pkg/wasm/): the wasm
# and its JS glue (wasm-bindgen's web target) in pkg/web/, then what the
# entries need beside the hand-written files:
#   web/edgeleaf_inline.js  the .wasm deflated and base64-encoded, for the
#                           default entry (index.mjs), checked to decode back
#   index.cjs, slim.cjs     CommonJS bundles of index.mjs and slim.mjs
#   file-store.cjs          ... and of file-store.mjs (Node only: no wasm)
#   *.d.cts                 the types for `require` (copies of the .d.ts)
# The hand-written files of pkg/ are in git; what this makes is not.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh wasm
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"   # wasm-opt 132, esbuild, wasm-bindgen, Node 22

rm -rf pkg/node pkg/web pkg/api.cjs pkg/index.cjs pkg/slim.cjs pkg/file-store.cjs pkg/index.d.cts pkg/slim.d.cts pkg/file-store.d.cts
# --mode no-install: wasm-bindgen comes from PATH, pinned by scripts/setup.sh.
# --out-dir is relative to the bindings' crate (pkg/wasm/).
wasm-pack --log-level warn build pkg/wasm --mode no-install --release --no-pack \
  --target web --out-dir ../web --out-name edgeleaf
rm -f pkg/web/.gitignore pkg/web/*.d.ts
# The glue's init() falls back to `new URL('edgeleaf_bg.wasm', import.meta.url)`
# when given no wasm. No entry calls it so (slim's init requires the wasm), and
# that line makes bundlers emit the .wasm as an asset even for the default
# entry, which carries it inline: out it goes.
glue=pkg/web/edgeleaf.js
fallback="module_or_path = new URL('edgeleaf_bg.wasm', import.meta.url);"
grep -qF "$fallback" "$glue" || { echo "pkg: $glue has no default wasm URL to remove: has wasm-bindgen's glue changed?"; exit 1; }
sed -i "s|$fallback|throw new Error('edgeleaf: init() needs the wasm');|" "$glue"
! grep -q "import\.meta" "$glue" || { echo "pkg: $glue still reads import.meta"; exit 1; }

node scripts/pkg-inline.mjs
for entry in index slim; do
  esbuild "pkg/$entry.mjs" --bundle --format=cjs --platform=neutral --outfile="pkg/$entry.cjs" --log-level=warning
done
esbuild pkg/file-store.mjs --bundle --format=cjs --platform=node --outfile=pkg/file-store.cjs --log-level=warning
cp pkg/index.d.ts pkg/index.d.cts
sed "s|from './index.js'|from './index.cjs'|" pkg/slim.d.ts > pkg/slim.d.cts
sed "s|from './index.js'|from './index.cjs'|" pkg/file-store.d.ts > pkg/file-store.d.cts

gz() { gzip -9c "$@" | wc -c; }
echo "pkg: web wasm $(wc -c <pkg/web/edgeleaf_bg.wasm) bytes, $(gz pkg/web/edgeleaf_bg.wasm) gzipped"
# An entry's size: the entry and every module it imports, bundled (unminified, as
# the package ships them) and minified (as an app's production build carries them).
for entry in index slim workerd; do
  esbuild "pkg/$entry.mjs" --bundle --format=esm --platform=neutral --external:'*.wasm' --log-level=error --outfile=/tmp/edgeleaf-$$.js
  esbuild "pkg/$entry.mjs" --bundle --format=esm --platform=neutral --external:'*.wasm' --log-level=error --minify --outfile=/tmp/edgeleaf-$$.min.js
  echo "pkg: $entry.mjs and its imports: $(wc -c </tmp/edgeleaf-$$.js) bytes, $(gz /tmp/edgeleaf-$$.js) gzipped; minified $(wc -c </tmp/edgeleaf-$$.min.js), $(gz /tmp/edgeleaf-$$.min.js) gzipped"
done
rm -f /tmp/edgeleaf-$$.js /tmp/edgeleaf-$$.min.js
