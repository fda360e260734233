#!/usr/bin/env bash
# Installs the Debian 12 packages the benchmarks need (bench/run_compare.sh),
# only those that are missing: the gRPC C++ reference (libgrpc++-dev and its
# code generator protobuf-compiler-grpc), h2load (nghttp2-client) and
# gnuplot-nox for plots. Runs apt-get as root (or through sudo when
# available). The library and its tests need none of these.
set -euo pipefail

pkgs=(libgrpc++-dev protobuf-compiler-grpc gnuplot-nox nghttp2-client)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-bench-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-bench-deps: need root or sudo for apt-get" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
