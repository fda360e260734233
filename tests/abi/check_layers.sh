#!/usr/bin/env bash
# The runtime's layering (docs/architecture.md): every #include of an
# internal header names a folder the including file's layer may use, and
# no include climbs out with "..". The per-layer object libraries of
# runtime/CMakeLists.txt already fail the build on a wrong include; this
# says which line and why, and also covers relative paths the compiler
# would resolve next to the file.
#   check_layers.sh RUNTIME_DIR
set -euo pipefail
rt=${1:?usage: check_layers.sh RUNTIME_DIR}
declare -A below=(
  [core]="core"
  [wire]="core wire"
  [lb]="core lb"
  [transport]="core wire transport"
  [client]="core wire lb transport client"
  [server]="core wire transport server"
)
bad=0
for layer in "${!below[@]}"; do
  for f in "$rt/$layer"/*.[ch]; do
    [ -e "$f" ] || continue
    while IFS= read -r line; do
      inc=$(sed -E 's/^#include "([^"]+)".*/\1/' <<<"$line")
      case $inc in
      *..*)
        echo "check_layers: ${f#$rt/}: relative include $inc" >&2
        bad=1
        continue
        ;;
      */*) top=${inc%%/*} ;;
      *) continue ;; # a header next to the file
      esac
      [ "$top" = sluice ] && continue
      if ! grep -qw "$top" <<<"${below[$layer]}"; then
        echo "check_layers: ${f#$rt/}: $layer/ must not include $inc" >&2
        bad=1
      fi
    done < <(grep -E '^#include "' "$f" || true)
  done
done
for d in "$rt"/*/; do
  name=$(basename "$d")
  [ -n "${below[$name]+x}" ] || {
    echo "check_layers: runtime/$name/ is not a known layer" >&2
    bad=1
  }
done
[ $bad = 0 ] && echo "check_layers: ok"
exit $bad
