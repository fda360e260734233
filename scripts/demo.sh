#!/usr/bin/env bash
# Demo: start the greeter server on a free port, call it once, stop it.
#
#   scripts/demo.sh BUILD_DIR
#
# Prints the client's output and exits with the client's exit code. The
# server is stopped on every exit path (the EXIT trap), including Ctrl-C.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
bin=$1/examples/helloworld
server=$bin/greeter_server
client=$bin/greeter_client
for b in "$server" "$client"; do
  [ -x "$b" ] || { echo "demo: $b not built" >&2; exit 2; }
done

STARTUP_TIMEOUT_S=10
CALL_TIMEOUT_MS=5000
STOP_TIMEOUT_S=10

server_pid=""
tmp=$(mktemp -d)

# SIGTERM (graceful), then SIGKILL if the server is not gone after $1 s.
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null
  if ! timeout "$1" tail --pid="$server_pid" -s 0.1 -f /dev/null; then
    echo "demo: greeter_server still running after ${1}s, killing it" >&2
    kill -KILL "$server_pid" 2>/dev/null
  fi
  wait "$server_pid"
}

# shellcheck disable=SC2317  # invoked through the trap
cleanup() {
  if [ -n "$server_pid" ]; then
    stop_server 3
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The server's stdout goes through a FIFO so that its "listening on N" line
# can be read with a timeout as soon as it is written. Opened read-write, the
# FIFO never blocks on open; a server that dies early shows as the timeout.
mkfifo "$tmp/server.out"
exec 3<>"$tmp/server.out"
"$server" --port 0 >"$tmp/server.out" 3<&- &
server_pid=$!

port=""
if read -r -t "$STARTUP_TIMEOUT_S" line <&3 &&
   [[ $line =~ ^listening\ on\ ([0-9]+)$ ]]; then
  port=${BASH_REMATCH[1]}
fi
if [ -z "$port" ] || [ "$port" -eq 0 ]; then
  echo "demo: the server did not report a port within ${STARTUP_TIMEOUT_S}s" >&2
  exit 1
fi
echo "demo: greeter_server listening on port $port" >&2

# The call's own deadline bounds it; timeout(1) guards against a hang anyway.
timeout -k 2 $(( CALL_TIMEOUT_MS / 1000 + 5 )) \
  "$client" --target "127.0.0.1:$port" --name world \
  --timeout-ms "$CALL_TIMEOUT_MS" 3<&-
rc=$?
exec 3<&-

# Graceful stop, bounded.
stop_server "$STOP_TIMEOUT_S"
server_rc=$?
server_pid=""
if [ "$server_rc" -ne 0 ]; then
  echo "demo: greeter_server exited with $server_rc" >&2
fi
exit "$rc"
