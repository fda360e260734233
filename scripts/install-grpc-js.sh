#!/usr/bin/env bash
# Installs the stock @grpc/grpc-js peers of the interop tests into DIR:
#
#   scripts/install-grpc-js.sh DIR
#
# Copies tests/interop/js/package.json and package-lock.json (exact versions
# and integrity hashes) into DIR and runs `npm ci` there, so that DIR/
# node_modules holds @grpc/grpc-js and @grpc/proto-loader. Does nothing when
# DIR already holds an install of the same lock file. No install scripts are
# run (--ignore-scripts: none of these packages needs one). Exits 77 when
# node or npm is missing or npm ci fails (no registry reachable ...): the
# tests that need grpc-js then show as skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
src="$here/tests/interop/js"
dir="${1:?usage: install-grpc-js.sh DIR}"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-grpc-js: node or npm not found (apt-get install nodejs npm)" >&2
  exit 77
fi
mkdir -p "$dir"
if [ -f "$dir/node_modules/@grpc/grpc-js/package.json" ] &&
   cmp -s "$src/package-lock.json" "$dir/.installed-lock.json"; then
  exit 0
fi
# One installer at a time per DIR (ctest -j runs several tests).
exec 9>"$dir/.install.lock"
flock -w 600 9
if [ -f "$dir/node_modules/@grpc/grpc-js/package.json" ] &&
   cmp -s "$src/package-lock.json" "$dir/.installed-lock.json"; then
  exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dir/"
rm -f "$dir/.installed-lock.json"
if ! (cd "$dir" && timeout 600 npm ci --no-audit --no-fund --ignore-scripts \
        --loglevel=error); then
  echo "install-grpc-js: npm ci failed in $dir" >&2
  exit 77
fi
cp "$src/package-lock.json" "$dir/.installed-lock.json"
