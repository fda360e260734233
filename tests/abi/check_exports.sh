#!/usr/bin/env bash
# The shared library exports exactly the public API: every function the
# public headers declare (found by the compiler itself, gcc -aux-info, so a
# declaration split over lines or behind a macro is not missed) and nothing
# else (no sluice__* internals, no symbols of code linked in). Also checks
# the SONAME against SLUICE_ABI_VERSION, and the Debian symbols file
# (packaging/deb/libsluice1.symbols) against the exports: a new function
# goes in there with the version that adds it.
#
#   check_exports.sh LIBSLUICE_SO INCLUDE_DIR SYMBOLS_FILE CC [CFLAGS...]
set -euo pipefail
[ $# -ge 4 ] ||
  { echo "usage: $0 LIB INCLUDE_DIR SYMBOLS_FILE CC [CFLAGS...]" >&2; exit 2; }
lib=$1 inc=$2 symbols=$3 cc=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo '#include <sluice/sluice.h>' >"$tmp/all.c"
"$cc" -std=c11 -I"$inc" "$@" -aux-info "$tmp/aux" -c "$tmp/all.c" \
  -o "$tmp/all.o"
# Lines look like: /* .../include/sluice/x.h:12:NC */ extern int f (int);
# static inline helpers are compiled into the caller, not exported.
grep -F "$inc/sluice/" "$tmp/aux" | grep -v ' static ' |
  sed -E 's/.*\*\/ *//; s/ *\(.*//; s/.*[ *]//' | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk '{print $3}' | sort -u >"$tmp/exported"

n_decl=$(wc -l <"$tmp/declared")
n_exp=$(wc -l <"$tmp/exported")
[ "$n_decl" -gt 50 ] || { echo "only $n_decl declarations found" >&2; exit 1; }
fail=0
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
  echo "exported but not declared in include/sluice/ (mark them static, or" >&2
  echo "declare them public with SLUICE_API):" >&2
  echo "$extra" | sed 's/^/  /' >&2
  fail=1
fi
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
  echo "declared in include/sluice/ but not exported (SLUICE_API missing?):" >&2
  echo "$missing" | sed 's/^/  /' >&2
  fail=1
fi

listed=$(sed -n 's/^ \([a-z0-9_]*\)@Base .*/\1/p' "$symbols" | sort -u)
if [ "$listed" != "$(cat "$tmp/exported")" ]; then
  echo "$symbols differs from the exports (add new functions as" >&2
  echo "' name@Base <version that adds it>'; < listed only, > exported only):" >&2
  diff <(echo "$listed") "$tmp/exported" | grep '^[<>]' | sed 's/^/  /' >&2
  fail=1
fi
head -1 "$symbols" | grep -q "^libsluice\.so\.[0-9]* " ||
  { echo "$symbols: first line must name the library" >&2; fail=1; }

abi=$(sed -n 's/^#define SLUICE_ABI_VERSION \([0-9]*\)$/\1/p' \
  "$inc/sluice/version.h")
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libsluice.so.$abi" ]; then
  echo "SONAME is '$soname', expected libsluice.so.$abi" >&2
  fail=1
fi
[ $fail -eq 0 ] &&
  echo "exports: $n_exp symbols = the $n_decl public functions = $(basename "$symbols"); SONAME $soname"
exit $fail
