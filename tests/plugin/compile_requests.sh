#!/bin/sh
# Generated code must compile (issue 16): feeds each CodeGeneratorRequest
# file given (the plugin fuzz target's corpus, or a sample of what a long
# fuzz run found) to protoc-c and to protoc-gen-sluice directly, as protoc
# would, and compiles what both produced. An input that protoc-c refuses,
# or whose protoc-c code does not compile (a descriptor protoc itself would
# never have written), is skipped; one that our plugin refuses is fine (it
# says why). Ours failing to compile where protoc-c's compiles is a
# finding. Prints the tally; fails on a finding or when nothing was
# compiled at all.
# Usage: compile_requests.sh PLUGIN WRITE_RESPONSE INCLUDE_DIR CC FILE...
set -u
plugin=$1 writer=$2 inc=$3 cc=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pbc_cflags=$(pkg-config --cflags libprotobuf-c 2>/dev/null)
compiled=0 skipped=0 refused=0 bad=0
for req in "$@"; do
  d=$work/out
  rm -rf "$d" && mkdir -p "$d"
  if ! protoc-gen-c <"$req" 2>/dev/null | "$writer" "$d" 2>/dev/null; then
    skipped=$((skipped + 1)); continue
  fi
  ok=1
  for c in $(find "$d" -name '*.pb-c.c'); do
    "$cc" -std=c11 -c -o /dev/null -I"$d" $pbc_cflags "$c" 2>/dev/null || ok=0
  done
  if [ $ok = 0 ]; then skipped=$((skipped + 1)); continue; fi
  if ! "$plugin" <"$req" 2>/dev/null | "$writer" "$d" 2>"$work/err"; then
    refused=$((refused + 1)); continue
  fi
  if [ -z "$(find "$d" -name '*.sluice.c')" ]; then
    echo "compile_requests: $req: protoc-gen-sluice succeeded but wrote no .sluice.c" >&2
    bad=$((bad + 1)); continue
  fi
  for c in $(find "$d" -name '*.sluice.c'); do
    if ! "$cc" -std=c11 -Wall -Wextra -Werror -c -o /dev/null -I"$d" \
        -I"$inc" $pbc_cflags "$c" 2>"$work/cc"; then
      echo "compile_requests: $req: generated $(basename "$c") does not compile:" >&2
      head -20 "$work/cc" >&2
      bad=$((bad + 1))
    fi
  done
  compiled=$((compiled + 1))
done
echo "compile_requests: $# requests: $compiled compiled, $refused refused by protoc-gen-sluice, $skipped not valid for protoc-c, $bad findings"
[ "$bad" = 0 ] && [ "$compiled" -gt 0 ]
