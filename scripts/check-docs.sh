#!/usr/bin/env bash
# Generates the HTML API reference from the public headers
# (include/sluice/*.h) with Doxygen (docs/Doxyfile) and fails when Doxygen
# warns: an undocumented function, parameter, return value, type or macro,
# or a malformed doc comment. Prints the warnings.
#
#   scripts/check-docs.sh [OUTPUT_DIR]     default: build/docs/api
#
# The HTML goes to OUTPUT_DIR/html; the warnings to OUTPUT_DIR/warnings.log.
# `make docs` and the ctest test docs_doxygen run this; DOXYGEN names the
# binary (default: doxygen from PATH).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build/docs/api}
doxygen=${DOXYGEN:-doxygen}

if ! command -v "$doxygen" >/dev/null 2>&1; then
  echo "check-docs: $doxygen not found; scripts/install-deps.sh installs it" \
       "(Debian package doxygen)" >&2
  exit 1
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/warnings.log
rm -f "$log"

# The version shown on the pages, from the lines the build reads too.
version=$(sed -n 's/^#define SLUICE_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
            "$root/include/sluice/version.h" | paste -sd. -)

# Doxygen reads the configuration from stdin ("-"); paths in docs/Doxyfile
# are relative to the repository root.
rc=0
(
  cat "$root/docs/Doxyfile"
  echo "OUTPUT_DIRECTORY = \"$out\""
  echo "WARN_LOGFILE = \"$log\""
  echo "PROJECT_NUMBER = \"$version\""
) | (cd "$root" && "$doxygen" -) >"$out/doxygen.out" 2>&1 || rc=$?

if [ -s "$log" ]; then
  n=$(grep -c . "$log" || true)
  sed "s|^$root/||" "$log" >&2
  echo "check-docs: FAILED: $n doxygen warning line(s) (full log: $log)" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  cat "$out/doxygen.out" >&2
  echo "check-docs: FAILED: doxygen exited with status $rc" >&2
  exit 1
fi
echo "check-docs: no warnings; API reference in $out/html/index.html"
