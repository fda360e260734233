#!/bin/sh
# ctest bench_echo_smoke: the sluice echo server and one second of the sluice
# echo client against it (closed loop, 2 connections, then open loop), and
# the raw (zero-copy) modes: the raw client against that server, then both
# against `echo_server --raw`, small and 1 MiB messages. Checks that calls
# completed without errors; never checks speed.
#
#   bench/smoke.sh ECHO_SERVER ECHO_CLIENT
set -eu
server=$1
client=$2
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

start_server() { # ARGS...: starts the server, sets pid and port
  "$server" --port 0 --threads 1 "$@" >"$tmp/port" 2>"$tmp/server.log" &
  pid=$!
  i=0
  until grep -q listening "$tmp/port" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 200 ] && { echo "server did not start" >&2; cat "$tmp/server.log" >&2; exit 1; }
    kill -0 "$pid" 2>/dev/null || { echo "server exited" >&2; cat "$tmp/server.log" >&2; exit 1; }
    sleep 0.05
  done
  port=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$tmp/port")
}
stop_server() {
  kill -TERM "$pid"
  wait "$pid" || { echo "server exited with $? after SIGTERM" >&2; exit 1; }
  pid=
}

start_server
check() { # NAME JSON: at least one call, no errors
  echo "$1: $2"
  calls=$(echo "$2" | sed -n 's/.*"calls":\([0-9]*\).*/\1/p')
  errors=$(echo "$2" | sed -n 's/.*"errors":\([0-9]*\).*/\1/p')
  [ -n "$calls" ] && [ "$calls" -gt 0 ] && [ "$errors" = 0 ] ||
    { echo "$1: bad result" >&2; exit 1; }
}
out=$("$client" --target "127.0.0.1:$port" --concurrency 16 --connections 2 \
  --duration 1 --warmup 0.2 --size 64)
check closed "$out"
out=$("$client" --target "127.0.0.1:$port" --rate 500 --connections 1 \
  --duration 1 --warmup 0.2 --size 4096)
check open "$out"
out=$("$client" --target "127.0.0.1:$port" --concurrency 8 --duration 1 \
  --warmup 0.2 --size 1048576 --raw)
check raw-client "$out"
stop_server

start_server --raw
for size in 64 1048576; do
  out=$("$client" --target "127.0.0.1:$port" --concurrency 8 --duration 1 \
    --warmup 0.2 --size $size --raw)
  check "raw-raw-$size" "$out"
  out=$("$client" --target "127.0.0.1:$port" --concurrency 8 --duration 1 \
    --warmup 0.2 --size $size)
  check "client-raw-server-$size" "$out"
done
stop_server
echo "ok"
