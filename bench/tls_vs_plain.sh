#!/bin/sh
# Unary throughput and latency of the greeter server over TLS and over
# plaintext, with the same load generator (h2load) and the same settings,
# side by side in one run. Results: a markdown table on stdout.
#
#   bench/tls_vs_plain.sh [BUILD_DIR] [REQUESTS]
#
# BUILD_DIR defaults to build/ (a RelWithDebInfo build); REQUESTS to 200000
# per run. Progress goes to stderr. Needs h2load (nghttp2-client).
set -eu
build=${1:-build}
n=${2:-200000}
root=$(cd "$(dirname "$0")/.." && pwd)
server="$build/examples/helloworld/greeter_server"
[ -x "$server" ] || { echo "no $server: build first" >&2; exit 2; }
command -v h2load >/dev/null || { echo "h2load missing (apt-get install nghttp2-client)" >&2; exit 2; }
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
"$root/scripts/gen-test-certs.sh" "$tmp/certs"
# One request body: HelloRequest{name:"x"} with the 5-byte gRPC prefix.
printf '\000\000\000\000\003\012\001x' >"$tmp/req.bin"

# start_server PORTFILE [tls flags...]: starts it on a free port.
start_server() {
  "$server" --port 0 --threads 1 "$@" >"$tmp/port.txt" 2>"$tmp/server.log" &
  pid=$!
  i=0
  until grep -q listening "$tmp/port.txt" 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "server did not start" >&2; exit 1; }
    sleep 0.05
  done
  port=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$tmp/port.txt")
}

# run NAME URL CONNS STREAMS: one h2load run, one table row.
run() {
  echo "  $1: h2load -n $n -c $3 -m $4 $2" >&2
  h2load -n "$n" -c "$3" -m "$4" -H "content-type: application/grpc" \
    -H "te: trailers" -d "$tmp/req.bin" --log-file="$tmp/log" "$2" \
    >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
  rps=$(sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$tmp/out")
  ok=$(sed -n 's/.* \([0-9]*\) succeeded.*/\1/p' "$tmp/out")
  # Percentiles of the per-request times (3rd column, microseconds).
  pct=$(cut -f3 "$tmp/log" | sort -n | awk '{a[NR]=$1} END {
    printf "%.0f | %.0f | %.0f", a[int(NR*0.5)], a[int(NR*0.99)], a[int(NR*0.999)]}')
  printf '| %s | %s | %s | %s | %.0f | %s |\n' "$1" "$3" "$4" "$ok" "$rps" "$pct"
}

url() { echo "$1://127.0.0.1:$port/helloworld.Greeter/SayHello"; }

echo "| transport | connections | streams/conn | ok | req/s | p50 us | p99 us | p99.9 us |"
echo "|---|---|---|---|---|---|---|---|"
for shape in "1 100" "8 10"; do
  set -- $shape
  echo "plaintext, -c $1 -m $2" >&2
  start_server
  run plaintext "$(url http)" "$1" "$2"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  echo "TLS, -c $1 -m $2" >&2
  start_server --use_tls --tls_cert "$tmp/certs/server.pem" \
    --tls_key "$tmp/certs/server.key"
  run TLS "$(url https)" "$1" "$2"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
done
