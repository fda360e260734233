#!/usr/bin/env bash
# Builds sluice's Debian packages (libsluice1, libsluice-dev,
# protoc-gen-sluice) with CPack (cmake/SluicePackaging.cmake) in a build
# directory of their own, and prints the paths of the .deb files on stdout
# (progress on stderr).
#
#   scripts/make-deb.sh [BUILD_DIR]      # default build-deb
#
# Release build, prefix /usr (libdir lib/<multiarch>), no tests, examples,
# tools or benchmarks; Debian's hardening flags (dpkg-buildflags).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-deb}
case $build in /*) ;; *) build=$PWD/$build ;; esac
jobs=$(nproc 2>/dev/null || echo 2)

"$root/scripts/install-deps.sh"
"$root/scripts/install-pkg-deps.sh"

# The changelog's date, reproducible: the commit's time.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)
  export SOURCE_DATE_EPOCH
fi

# Debian's flags with all hardening (stack protector, _FORTIFY_SOURCE,
# relro, bindnow), given on the command line so that they also reach an
# existing build directory. Without -g: there is no -dbgsym package, and
# CPack strips the shared library and the plugin but not libsluice.a.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all DEB_CFLAGS_MAINT_STRIP=-g
# -fno-ident: no .comment section in libsluice.a's objects (lintian:
# static-library-has-unneeded-sections).
cflags="$(cd "$root" && dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS) -fno-ident"
ldflags=$(dpkg-buildflags --get LDFLAGS)

echo "make-deb: configuring $build" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" \
  -DSLUICE_INSTALL=ON \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_EXAMPLES=OFF \
  -DSLUICE_BUILD_TOOLS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
echo "make-deb: building" >&2
cmake --build "$build" -j "$jobs" >/dev/null
echo "make-deb: packaging" >&2
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB --config CPackConfig.cmake >&2)

shopt -s nullglob
debs=("$build"/*.deb)
if [ ${#debs[@]} -ne 3 ]; then
  echo "make-deb: expected 3 .deb files in $build, got ${#debs[@]}" >&2
  exit 1
fi
printf '%s\n' "${debs[@]}"
