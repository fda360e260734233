#!/usr/bin/env bash
# Installs sluice's Debian packages on this machine, builds the out-of-tree
# example (examples/external/) against them four ways (CMake find_package +
# sluice_generate(), shared and NOTES_STATIC=ON; its Makefile with
# pkg-config, shared and LINK=static), runs each build
# (examples/external/run.sh), then removes the packages again and checks
# that nothing of them is left.
#
#   tests/package/test_debs.sh [DEB_DIR]
#
# Without DEB_DIR the packages are built first (scripts/make-deb.sh into
# build-deb/). Needs root (apt-get, dpkg), as on CI (a fresh Debian 12).
# Exits 77 (skipped) when not root or when sluice is already installed in
# /usr (packages or a `make install`): the test would install over it and
# then remove it. Progress on stderr.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
pkgs=(libsluice1 libsluice-dev protoc-gen-sluice)
say() { echo "test_debs: $*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
fail() { say "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (installs packages with apt-get)"
command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
  skip "needs apt-get and dpkg (Debian)"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null ||
            gcc -print-multiarch)
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null |
     grep -qv '^not-installed$'; then
    skip "package $p is already installed ($(dpkg-query -W -f='${Version}' "$p")); remove it first"
  fi
done
for path in /usr/include/sluice /usr/lib/"$multiarch"/cmake/sluice \
            /usr/lib/"$multiarch"/pkgconfig/sluice.pc /usr/bin/protoc-gen-sluice; do
  [ -e "$path" ] && skip "$path exists (sluice installed from elsewhere)"
done

start=$(date +%s)
if [ $# -ge 1 ]; then
  debdir=$(cd "$1" && pwd)
else
  say "building the packages (scripts/make-deb.sh)"
  "$root/scripts/make-deb.sh" >/dev/null
  debdir=$root/build-deb
fi
debs=()
for p in "${pkgs[@]}"; do
  shopt -s nullglob
  found=("$debdir/${p}_"*.deb)
  shopt -u nullglob
  [ ${#found[@]} -eq 1 ] ||
    fail "want one ${p}_*.deb in $debdir, found ${#found[@]}"
  debs+=("${found[0]}")
done

scratch=$(mktemp -d /tmp/sluice-test-debs.XXXXXX)
installed=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ $installed -eq 1 ]; then
    say "removing the packages"
    if ! DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "${pkgs[@]}" \
           >"$scratch/remove.log" 2>&1; then
      cat "$scratch/remove.log" >&2
      say "FAIL: apt-get remove failed"
      rc=1
    fi
    for p in "${pkgs[@]}"; do
      if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null |
         grep -qv '^not-installed$\|^config-files$'; then
        say "FAIL: $p still installed after apt-get remove"
        rc=1
      fi
    done
    # Every file the packages had installed must be gone, and sluice's
    # directories with them.
    local left=0 f
    while IFS= read -r f; do
      if [ -e "$f" ] && [ ! -d "$f" ] || [ -L "$f" ]; then
        say "FAIL: left behind: $f"
        left=1
      fi
    done < <(cat "$scratch"/files.* 2>/dev/null)
    for f in /usr/include/sluice /usr/lib/*/cmake/sluice \
             /usr/share/doc/libsluice1 /usr/share/doc/libsluice-dev \
             /usr/share/doc/protoc-gen-sluice; do
      [ -e "$f" ] && { say "FAIL: left behind: $f/"; left=1; }
    done
    [ $left -eq 0 ] && say "removal left nothing behind" || rc=1
  fi
  rm -rf "$scratch"
  if [ $rc -eq 0 ]; then
    say "PASS ($(( $(date +%s) - start )) s)"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A fresh Debian image has no package lists: apt-get could not fetch the
# packages' dependencies.
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
  say "apt-get update (no package lists)"
  apt-get update -qq
fi
say "installing ${debs[*]##*/}"
installed=1
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
       --no-install-recommends "${debs[@]}" >"$scratch/install.log" 2>&1; then
  cat "$scratch/install.log" >&2
  fail "apt-get install failed"
fi
for p in "${pkgs[@]}"; do
  dpkg -L "$p" >"$scratch/files.$p"
done

# What each package must have put where (the multiarch libdir of prefix /usr).
libdir=/usr/lib/$multiarch
expect() { # package path...
  local p=$1 f
  shift
  for f in "$@"; do
    grep -qxF "$f" "$scratch/files.$p" || fail "dpkg -L $p: no $f"
    [ -e "$f" ] || fail "$f ($p) not on disk"
  done
}
expect libsluice1 "$libdir/libsluice.so.1" /usr/share/doc/libsluice1/copyright
expect libsluice-dev /usr/include/sluice/sluice.h \
  /usr/include/sluice/options.proto \
  /usr/include/sluice/pb-c/sluice/options.pb-c.h \
  /usr/include/sluice/pb-c/google/protobuf/descriptor.pb-c.h \
  "$libdir/libsluice.a" "$libdir/libsluice.so" \
  "$libdir/cmake/sluice/sluiceConfig.cmake" \
  "$libdir/cmake/sluice/SluiceGenerate.cmake" \
  "$libdir/pkgconfig/sluice.pc"
expect protoc-gen-sluice /usr/bin/protoc-gen-sluice \
  /usr/share/man/man1/protoc-gen-sluice.1.gz
grep -q "^$libdir/libsluice.so" "$scratch/files.libsluice-dev" &&
  [ "$(readlink -f "$libdir/libsluice.so")" = "$(readlink -f "$libdir/libsluice.so.1")" ] ||
  fail "libsluice.so does not lead to libsluice.so.1"
say "installed: $(dpkg-query -W -f='${Package} ${Version}\n' "${pkgs[@]}" | paste -sd' ')"

# The example as a user has it: a copy, away from sluice's tree, with no
# hints where sluice is.
src=$scratch/external
if [ ! -f "$root/examples/external/CMakeLists.txt" ] ||
   [ ! -x "$root/examples/external/run.sh" ]; then
  fail "examples/external/ (CMakeLists.txt, run.sh) missing"
fi
cp -r "$root/examples/external" "$src"
rm -rf "$src"/build* 2>/dev/null || true
unset CMAKE_PREFIX_PATH PKG_CONFIG_PATH sluice_DIR

run() { # name build-dir
  say "$1: running (run.sh)"
  if ! "$src/run.sh" "$2" >"$scratch/run.$1.log" 2>&1; then
    cat "$scratch/run.$1.log" >&2
    fail "$1: run.sh failed"
  fi
}
linked_shared() { # binary: must load the installed libsluice.so.1
  local so
  so=$(ldd "$1" | sed -n 's/^[[:space:]]*libsluice\.so\.1 => \([^ ]*\).*/\1/p')
  # /lib is /usr/lib on a merged-/usr system: compare the real files.
  [ -n "$so" ] &&
    [ "$(readlink -f "$so")" = "$(readlink -f "$libdir/libsluice.so.1")" ] ||
    fail "$1 does not load $libdir/libsluice.so.1: $(ldd "$1")"
}

say "cmake: configuring and building (find_package(sluice 0.3 CONFIG))"
if ! { cmake -S "$src" -B "$scratch/cmake" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$scratch/cmake" -j "$(nproc)"; } \
       >"$scratch/cmake.log" 2>&1; then
  cat "$scratch/cmake.log" >&2
  fail "cmake build of examples/external failed"
fi
found_dir=$(sed -n 's/^sluice_DIR:PATH=//p' "$scratch/cmake/CMakeCache.txt")
[ "$found_dir" = "$libdir/cmake/sluice" ] ||
  fail "find_package found sluice in '$found_dir', not $libdir/cmake/sluice"
linked_shared "$scratch/cmake/notes_server"
run cmake "$scratch/cmake"

say "cmake: building with NOTES_STATIC=ON (sluice::sluice_static)"
if ! { cmake -S "$src" -B "$scratch/cmake-static" -DCMAKE_BUILD_TYPE=Release \
         -DNOTES_STATIC=ON &&
       cmake --build "$scratch/cmake-static" -j "$(nproc)"; } \
       >"$scratch/cmake-static.log" 2>&1; then
  cat "$scratch/cmake-static.log" >&2
  fail "cmake NOTES_STATIC=ON build of examples/external failed"
fi
if ldd "$scratch/cmake-static/notes_server" | grep -q libsluice; then
  fail "NOTES_STATIC=ON: notes_server still loads libsluice.so"
fi
run cmake-static "$scratch/cmake-static"

say "pkg-config: building (Makefile, shared)"
make -C "$src" OUT="$scratch/pc" -j "$(nproc)" >"$scratch/pc.log" 2>&1 ||
  { cat "$scratch/pc.log" >&2; fail "make (pkg-config) failed"; }
linked_shared "$scratch/pc/notes_server"
run pkg-config "$scratch/pc"

say "pkg-config: building (Makefile, LINK=static)"
make -C "$src" OUT="$scratch/pc-static" LINK=static -j "$(nproc)" \
  >"$scratch/pc-static.log" 2>&1 ||
  { cat "$scratch/pc-static.log" >&2; fail "make LINK=static failed"; }
if ldd "$scratch/pc-static/notes_server" | grep -q libsluice; then
  fail "LINK=static: notes_server still loads libsluice.so"
fi
run pkg-config-static "$scratch/pc-static"
