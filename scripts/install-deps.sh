#!/usr/bin/env bash
# Installs the Debian 12 packages sluice needs, only those that are missing.
# Runs apt-get as root (or through sudo when available).
set -euo pipefail

pkgs=(build-essential cmake pkg-config
      protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev libprotoc-dev
      protobuf-compiler libnghttp2-dev libssl-dev libuv1-dev zlib1g-dev
      libcmocka-dev python3 python3-grpcio python3-protobuf
      openssl nghttp2-client doxygen)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo for apt-get" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
