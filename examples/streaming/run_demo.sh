#!/usr/bin/env bash
# The streaming example end to end (ctest demo_streaming): starts
# ticker_server on a free port, runs ticker_client --demo all against it,
# compares the client's output with what the demos must print, and stops the
# server with SIGTERM (it must exit 0).
#
#   run_demo.sh SERVER CLIENT
#
# Every wait is bounded; the server is killed on every exit path.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SERVER CLIENT" >&2
  exit 2
fi
server=$1
client=$2
for b in "$server" "$client"; do
  [ -x "$b" ] || { echo "run_demo: $b not built" >&2; exit 2; }
done

STARTUP_TIMEOUT_S=10
CLIENT_TIMEOUT_S=30
STOP_TIMEOUT_S=10

server_pid=""
tmp=$(mktemp -d)

# SIGTERM (graceful), then SIGKILL if the server is not gone after $1 s.
# Returns the server's exit status (137 when killed).
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null
  if ! timeout "$1" tail --pid="$server_pid" -s 0.1 -f /dev/null; then
    echo "run_demo: ticker_server still running after ${1}s, killing it" >&2
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

# "listening on N" is read through a FIFO, with a timeout (see
# scripts/demo.sh).
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
  echo "run_demo: the server did not report a port within ${STARTUP_TIMEOUT_S}s" >&2
  exit 1
fi
echo "run_demo: ticker_server listening on port $port" >&2

timeout -k 2 "$CLIENT_TIMEOUT_S" \
  "$client" --target "127.0.0.1:$port" --demo all >"$tmp/client.out" 3<&-
rc=$?
exec 3<&-
cat "$tmp/client.out"

# The sum demo also says how often it waited for on_send_ready: that number
# varies from run to run, so the line is left out of the comparison.
cat >"$tmp/expected" <<'END'
countdown: 5
countdown: 4
countdown: 3
countdown: 2
countdown: 1
countdown: OK
sum: 5050 from 100 numbers
sum: OK
chat: echo: hello
chat: echo: how are you?
chat: echo: bye
chat: OK
END
failed=0
if [ "$rc" -ne 0 ]; then
  echo "run_demo: ticker_client exited with $rc" >&2
  failed=1
fi
if ! grep -v '^sum: sent ' "$tmp/client.out" | diff -u "$tmp/expected" - >&2
then
  echo "run_demo: unexpected client output (diff above)" >&2
  failed=1
fi

stop_server "$STOP_TIMEOUT_S"
server_rc=$?
server_pid=""
if [ "$server_rc" -ne 0 ]; then
  echo "run_demo: ticker_server exited with $server_rc" >&2
  failed=1
fi
[ "$failed" -eq 0 ] && echo "run_demo: OK" >&2
exit "$failed"
