#!/usr/bin/env bash
# Installs the Debian 12 packages the benchmarks need (bench/run_compare.sh),
# only those that are missing: the gRPC C++ reference (libgrpc++-dev and its
# code generator protobuf-compiler-grpc), h2load (nghttp2-client),
# gnuplot-nox for plots and valgrind (bench/percall.sh: callgrind and
# memcheck counts). The library and its tests need none of these.
set -euo pipefail

pkgs=(libgrpc++-dev protobuf-compiler-grpc gnuplot-nox nghttp2-client valgrind)

exec "$(dirname "$0")/apt-install.sh" install-bench-deps "${pkgs[@]}"
