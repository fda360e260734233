#!/usr/bin/env bash
# Installs the Debian 12 packages sluice needs, only those that are missing;
# with the argument "fuzz", also those of make fuzz.
set -euo pipefail

pkgs=(build-essential cmake pkg-config
      protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev libprotoc-dev
      protobuf-compiler libnghttp2-dev libssl-dev libuv1-dev zlib1g-dev
      libjansson-dev
      libcmocka-dev python3 python3-grpcio python3-protobuf
      openssl nghttp2-client doxygen
      iproute2 nftables nginx-light haproxy)

# make fuzz only (scripts/install-deps.sh fuzz): clang, and its libFuzzer
# and sanitizer runtimes (libclang_rt.fuzzer), which Debian 12 packages in
# libclang-rt-14-dev.
fuzz_pkgs=(clang libclang-rt-14-dev)
if [ "${1:-}" = fuzz ]; then
  pkgs+=("${fuzz_pkgs[@]}")
fi

exec "$(dirname "$0")/apt-install.sh" install-deps "${pkgs[@]}"
