#!/usr/bin/env bash
# Do sluice-bench and h2load agree? Both load generators against the same
# server with the same settings (unary /bench.Echo/Unary, 64 B payload,
# closed loop, 64 streams in total over 1 or 8 connections), alternating
# ROUNDS times so that background load hits both alike.
#
#   compare_h2load.sh [BUILD_DIR] [ROUNDS] [SECONDS]
#
# Two servers (build/bench/echo_server, one loop pinned to SERVER_CPU; the
# generators pinned to CLIENT_CPU):
#   paced  --delay-us 2000: a fixed-latency service (throughput = streams /
#          latency, ~25-30k calls/s), far from either tool's CPU limit: here
#          the two must report the same throughput and latency;
#   raw    plain echo, CPU-bound: the numbers are then set by whichever side
#          runs out of CPU first (each tool's cost per call and how it
#          batches requests), so they may legitimately differ.
# Latency percentiles of h2load come from its per-request log (request start
# to end of response). Prints each round, then a markdown table of medians
# and of the per-round ratios sluice-bench / h2load.
set -uo pipefail
build=${1:-build}
rounds=${2:-5}
secs=${3:-4}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
server=$build/bench/echo_server
bench=$build/tools/sluice-bench
command -v h2load >/dev/null || { echo "h2load not installed (apt-get install nghttp2-client)" >&2; exit 2; }
for b in "$server" "$bench"; do
  [ -x "$b" ] || { echo "$b not built" >&2; exit 2; }
done

tmp=$(mktemp -d)
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT

# start_server ARGS...: sets port
start_server() {
  taskset -c "$SERVER_CPU" "$server" --port 0 --threads 1 "$@" >"$tmp/port" 2>/dev/null &
  server_pid=$!
  port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^listening on \([0-9]*\)$/\1/p' "$tmp/port")
    [ -n "$port" ] && return 0
    sleep 0.05
  done
  echo "server did not start" >&2
  exit 1
}

# The request on the wire: the 5-byte gRPC prefix + EchoMsg{payload: 64 x}.
python3 -c '
import sys
msg = b"\x0a\x40" + b"x" * 64
sys.stdout.buffer.write(b"\0" + len(msg).to_bytes(4, "big") + msg)' >"$tmp/req.grpc"
path=/bench.Echo/Unary

# Each prints "calls_per_s p50_us p99_us errors".
run_sb() {
  local c=$1
  taskset -c "$CLIENT_CPU" "$bench" --target "127.0.0.1:$port" --method "$path" \
    --size 64 --concurrency 64 --connections "$c" --duration "$secs" --warmup 1 \
    --lb rr --quiet --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]; print("%.0f %.0f %.0f %d" % (r["throughput"], r["latency_us"]["p50"], r["latency_us"]["p99"], r["errors"]))'
}
run_h2() {
  local c=$1
  local out
  out=$(taskset -c "$CLIENT_CPU" h2load -D "$secs" --warm-up-time 1 -c "$c" -m $((64 / c)) -t 1 \
    -H 'content-type: application/grpc' -H 'te: trailers' --log-file="$tmp/h2.log" \
    -d "$tmp/req.grpc" "http://127.0.0.1:$port$path" 2>&1)
  local rps failed
  rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  failed=$(sed -n 's/.* \([0-9]*\) failed, \([0-9]*\) errored.*/\1 \2/p' <<<"$out" | awk '{print $1 + $2}')
  cut -f3 "$tmp/h2.log" | sort -n | awk -v rps="${rps:-0}" -v bad="${failed:-1}" '
    function at(q,  i) { i = int(NR * q); if (i < 1) i = 1; return a[i] }
    { a[NR] = $1 }
    END { printf "%.0f %.0f %.0f %d\n", rps, NR ? at(0.5) : 0, NR ? at(0.99) : 0, bad }'
}

rows=()
for mode in paced raw; do
  if [ $mode = paced ]; then start_server --delay-us 2000; else start_server; fi
  for c in 1 8; do
    sb=() h2=()
    for i in $(seq "$rounds"); do
      s=$(run_sb "$c")
      h=$(run_h2 "$c")
      echo "$mode, $c conn, round $i: sluice-bench $s | h2load $h (calls/s p50 p99 errors)" >&2
      sb+=("$s")
      h2+=("$h")
    done
    rows+=("$(python3 - "$mode" "$c" "$(printf '%s;' "${sb[@]}")" "$(printf '%s;' "${h2[@]}")" <<'PY'
import statistics, sys
mode, c = sys.argv[1], sys.argv[2]
sb = [list(map(float, r.split())) for r in sys.argv[3].split(";") if r]
h2 = [list(map(float, r.split())) for r in sys.argv[4].split(";") if r]
med = lambda rows, k: statistics.median(r[k] for r in rows)
ratio = lambda k: statistics.median(a[k] / b[k] for a, b in zip(sb, h2) if b[k] > 0)
errs = int(sum(r[3] for r in sb)), int(sum(r[3] for r in h2))
print("| %s | %s | %.0f / %.0f | %.2f | %.0f / %.0f | %.2f | %.0f / %.0f | %.2f | %d / %d |" % (
    mode, c, med(sb, 0), med(h2, 0), ratio(0), med(sb, 1), med(h2, 1), ratio(1),
    med(sb, 2), med(h2, 2), ratio(2), errs[0], errs[1]))
PY
)")
  done
  stop_server
done
echo
echo "$rounds rounds of ${secs} s per tool and cell, medians; ratios are medians of per-round sluice-bench / h2load."
echo
echo "| server | conns | calls/s sluice-bench / h2load | ratio | p50 us | ratio | p99 us | ratio | errors |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
