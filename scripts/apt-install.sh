#!/usr/bin/env bash
# Installs those of the given Debian packages that are missing, with
# apt-get as root (or through sudo when available). The one installer behind
# install-deps.sh, install-bench-deps.sh and install-pkg-deps.sh.
#
#   scripts/apt-install.sh NAME PACKAGE...   (NAME prefixes its messages)
set -euo pipefail
name=$1
shift

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "$name: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "$name: need root or sudo for apt-get" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
