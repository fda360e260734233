#!/usr/bin/env bash
# sluice-bench against h2load on the same server and settings: unary
# EmptyCall on interop_server, closed loop, 2 connections x 32 streams.
# The server runs one loop pinned to CPU 0 (SERVER_CPU), each load
# generator is pinned to CPU 1 (CLIENT_CPU), and the two tools alternate
# ROUNDS times so that background load hits both alike.
#
#   compare_h2load.sh [BUILD_DIR] [ROUNDS] [SECONDS]
#
# Prints one line per run, the median of each tool and the median of the
# per-round ratios (each round runs both tools back to back, so a ratio is
# taken under similar background load).
set -uo pipefail
build=${1:-build}
rounds=${2:-5}
secs=${3:-5}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
server=$build/examples/interop/interop_server
bench=$build/tools/sluice-bench
command -v h2load >/dev/null || { echo "h2load not installed (apt-get install nghttp2-client)" >&2; exit 2; }
for b in "$server" "$bench"; do
  [ -x "$b" ] || { echo "$b not built" >&2; exit 2; }
done

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

mkfifo "$tmp/server.out"
exec 3<>"$tmp/server.out"
taskset -c "$SERVER_CPU" "$server" --port 0 --host 127.0.0.1 --threads 1 \
  >"$tmp/server.out" 3<&- &
server_pid=$!
port=""
if read -r -t 10 line <&3 && [[ $line =~ ^listening\ on\ ([0-9]+)$ ]]; then
  port=${BASH_REMATCH[1]}
fi
exec 3<&-
[ -n "$port" ] || { echo "server did not start" >&2; exit 1; }

# An EmptyCall request on the wire: the 5-byte gRPC prefix of an empty message.
printf '\0\0\0\0\0' >"$tmp/empty.grpc"
path=/grpc.testing.TestService/EmptyCall

sb=()
h2=()
for i in $(seq "$rounds"); do
  r=$(taskset -c "$CLIENT_CPU" "$bench" --target "127.0.0.1:$port" \
        --method "$path" --request /dev/null --concurrency 64 \
        --connections 2 --duration "$secs" --warmup 1 --lb rr --quiet --json |
      python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]; print("%.0f %d %.1f %.1f" % (r["throughput"], r["errors"], r["latency_us"]["p50"], r["latency_us"]["p99"]))')
  set -- $r
  sb+=("$1")
  echo "round $i sluice-bench: $1 calls/s, errors $2, p50 $3 us, p99 $4 us"
  out=$(taskset -c "$CLIENT_CPU" h2load -D "$secs" --warm-up-time 1 -c 2 -m 32 -t 1 \
          -H 'content-type: application/grpc' -H 'te: trailers' \
          -d "$tmp/empty.grpc" "http://127.0.0.1:$port$path" 2>&1)
  rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  st=$(grep '^status codes' <<<"$out")
  sb_h2=${rps%.*}
  h2+=("$sb_h2")
  echo "round $i h2load:       $sb_h2 req/s ($st)"
done
python3 - "${sb[*]}" "${h2[*]}" <<'PY'
import statistics, sys
sb = [float(x) for x in sys.argv[1].split()]
h2 = [float(x) for x in sys.argv[2].split()]
ms, mh = statistics.median(sb), statistics.median(h2)
ratios = sorted(a / b for a, b in zip(sb, h2))
print("median sluice-bench %.0f calls/s, h2load %.0f req/s; per-round ratios %s, median %.3f"
      % (ms, mh, " ".join("%.3f" % r for r in ratios), statistics.median(ratios)))
PY
