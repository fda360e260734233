#!/usr/bin/env bash
# Every public header compiles on its own, first in its translation unit, as
# C11 and as C++11, with -Wall -Wextra -Werror -pedantic: it includes what it
# needs and nothing in it is an extension or C-only.
#
#   check_headers.sh INCLUDE_DIR CC CXX [CFLAGS...]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 INCLUDE_DIR CC CXX [CFLAGS...]" >&2; exit 2; }
inc=$1 cc=$2 cxx=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
warn=(-Wall -Wextra -Werror -pedantic)
fail=0 n=0
for h in "$inc"/sluice/*.h; do
  name=sluice/$(basename "$h")
  printf '#include <%s>\n#include <%s>\ntypedef int not_empty;\n' "$name" "$name" >"$tmp/t.c"
  cp "$tmp/t.c" "$tmp/t.cc"
  if ! "$cc" -std=c11 "${warn[@]}" -I"$inc" "$@" -c "$tmp/t.c" \
      -o "$tmp/t.o"; then
    echo "FAIL (C11): $name" >&2
    fail=1
  fi
  if ! "$cxx" -std=c++11 "${warn[@]}" -I"$inc" "$@" -c "$tmp/t.cc" \
      -o "$tmp/t.o"; then
    echo "FAIL (C++11): $name" >&2
    fail=1
  fi
  n=$((n + 1))
done
[ $n -gt 5 ] || { echo "only $n headers in $inc/sluice" >&2; exit 1; }
[ $fail -eq 0 ] && echo "headers: $n public headers compile alone as C11 and C++11"
exit $fail
