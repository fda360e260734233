#!/usr/bin/env bash
# Installs the Debian 12 packages that building and checking sluice's .deb
# packages needs (scripts/make-deb.sh, tests/package/test_debs.sh), only
# those that are missing: dpkg-dev (dpkg-shlibdeps computes the Depends),
# file (CPack finds the ELF files with it) and lintian. The library's own
# build needs these not (scripts/install-deps.sh).
set -euo pipefail

pkgs=(dpkg-dev file lintian)

exec "$(dirname "$0")/apt-install.sh" install-pkg-deps "${pkgs[@]}"
