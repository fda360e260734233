#!/usr/bin/env bash
# sluice used as a user would: installed into a scratch prefix, then the
# out-of-tree example (examples/external/) built against it four ways and
# run each time:
#   1. CMake, find_package(sluice) + sluice_generate() (libsluice.so; the
#      programs find it through the RUNPATH CMake writes for the prefix),
#      and again with sluice_generate(... STATIC) (libsluice.a)
#   2. plain Makefile with pkg-config (libsluice.so; -Wl,-rpath from the
#      .pc's libdir)
#   3. the same, LINK=static (libsluice.a + pkg-config --static)
#   4. CMake, add_subdirectory() of the source tree (no install)
# plus the package's version rules and a DESTDIR install.
#
#   test_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2; exit 2; }
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
ext=$src/examples/external
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { echo "== $*" >&2; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "install into $tmp/prefix"
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in lib/libsluice.so lib/libsluice.so.1 lib/libsluice.a \
         bin/protoc-gen-sluice include/sluice/sluice.h \
         include/sluice/version.h include/sluice/options.proto \
         include/sluice/pb-c/sluice/options.pb-c.h \
         lib/cmake/sluice/sluiceConfig.cmake \
         lib/cmake/sluice/sluiceConfigVersion.cmake \
         lib/cmake/sluice/SluiceGenerate.cmake lib/pkgconfig/sluice.pc; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
[ -L "$prefix/lib/libsluice.so" ] || fail "libsluice.so is not a link"
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/sluice.pc")
step "version $version"

step "DESTDIR: staged under DESTDIR, the .pc names the real prefix"
DESTDIR=$tmp/stage cmake --install "$build" --prefix /opt/sluice-test \
  >/dev/null
pc=$tmp/stage/opt/sluice-test/lib/pkgconfig/sluice.pc
[ -f "$pc" ] || fail "DESTDIR install did not stage $pc"
grep -qx 'prefix=/opt/sluice-test' "$pc" || fail "$pc: $(head -1 "$pc")"
[ ! -e /opt/sluice-test ] || fail "DESTDIR install wrote /opt/sluice-test"

step "find_package version rules (same minor version before 1.0)"
IFS=. read -r major minor patch <<<"$version"
mkdir -p "$tmp/ver"
check_version() { # VERSION EXPECT(0 found | 1 not found)
  cat >"$tmp/ver/CMakeLists.txt" <<EOF2
cmake_minimum_required(VERSION 3.18)
project(v LANGUAGES C)
find_package(sluice $1 CONFIG REQUIRED)
EOF2
  rm -rf "$tmp/ver/b"
  if cmake -S "$tmp/ver" -B "$tmp/ver/b" -DCMAKE_PREFIX_PATH="$prefix" \
      >"$tmp/ver/log" 2>&1; then got=0; else got=1; fi
  [ $got -eq "$2" ] || { cat "$tmp/ver/log" >&2; fail "find_package($1)"; }
}
check_version "$major.$minor" 0
check_version "$major.$minor.$patch" 0
check_version "$major.$((minor + 1))" 1
[ "$minor" -gt 0 ] && check_version "$major.$((minor - 1))" 1
[ "$major" -eq 0 ] || check_version "$((major + 1)).0" 1

step "1. CMake package (find_package + sluice_generate)"
cmake -S "$ext" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cmake" -j2 >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log" >&2; fail "CMake build"; }
readelf -d "$tmp/cmake/notes_client" | grep -q 'NEEDED.*libsluice\.so\.1' ||
  fail "notes_client (CMake) does not link libsluice.so.1"
readelf -d "$tmp/cmake/notes_client" | grep -q "R.*PATH.*$prefix/lib" ||
  fail "notes_client (CMake) has no RUNPATH to $prefix/lib"
"$ext/run.sh" "$tmp/cmake"

step "1b. CMake package, sluice::sluice_static"
cmake -S "$ext" -B "$tmp/cmake-static" -DCMAKE_PREFIX_PATH="$prefix" \
  -DNOTES_STATIC=ON >/dev/null
cmake --build "$tmp/cmake-static" -j2 >"$tmp/cmake-static.log" 2>&1 ||
  { cat "$tmp/cmake-static.log" >&2; fail "CMake static build"; }
if readelf -d "$tmp/cmake-static/notes_client" | grep -q 'NEEDED.*libsluice'
then
  fail "notes_client (CMake, static) still needs libsluice.so"
fi
"$ext/run.sh" "$tmp/cmake-static"

step "2. pkg-config, shared"
make -s -C "$ext" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" OUT="$tmp/pc" \
  >"$tmp/pc.log" 2>&1 || { cat "$tmp/pc.log" >&2; fail "pkg-config build"; }
readelf -d "$tmp/pc/notes_client" | grep -q 'NEEDED.*libsluice\.so\.1' ||
  fail "notes_client (pkg-config) does not link libsluice.so.1"
"$ext/run.sh" "$tmp/pc"

step "3. pkg-config --static"
make -s -C "$ext" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" OUT="$tmp/pcs" \
  LINK=static >"$tmp/pcs.log" 2>&1 ||
  { cat "$tmp/pcs.log" >&2; fail "pkg-config --static build"; }
if readelf -d "$tmp/pcs/notes_client" | grep -q 'NEEDED.*libsluice'; then
  fail "notes_client (static) still needs libsluice.so"
fi
"$ext/run.sh" "$tmp/pcs"

step "4. add_subdirectory of the source tree"
cmake -S "$ext" -B "$tmp/sub" -DNOTES_SLUICE_SOURCE_DIR="$src" >/dev/null
cmake --build "$tmp/sub" -j2 >"$tmp/sub.log" 2>&1 ||
  { cat "$tmp/sub.log" >&2; fail "add_subdirectory build"; }
# Only the library and the plugin: no examples, tests, tools or benchmarks.
if grep -qE 'greeter|e2e_|sluice-bench|echo_server' "$tmp/sub.log"; then
  fail "add_subdirectory built sluice's own examples/tests/bench"
fi
"$ext/run.sh" "$tmp/sub"
echo "test_install: OK (sluice $version: CMake package shared and static," \
  "pkg-config shared and static, add_subdirectory)"
