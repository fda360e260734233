#!/usr/bin/env bash
# Installs the Debian 12 packages that building and checking sluice's .deb
# packages needs (scripts/make-deb.sh, tests/package/test_debs.sh), only
# those that are missing: dpkg-dev (dpkg-shlibdeps computes the Depends),
# file (CPack finds the ELF files with it) and lintian. The library's own
# build needs these not (scripts/install-deps.sh). Runs apt-get as root (or
# through sudo when available).
set -euo pipefail

pkgs=(dpkg-dev file lintian)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-pkg-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-pkg-deps: need root or sudo for apt-get" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
