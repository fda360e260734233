# shellcheck shell=bash
# Sourced by the demo scripts: start a sluice example server on a free port
# and stop it, every wait bounded, the server stopped on every exit path.
#
#   source scripts/serve.sh
#   serve_start NAME SERVER [ARGS...]   # sets $port and $server_pid
#   ... run a client against 127.0.0.1:$port, with 3<&- ...
#   serve_stop SECONDS                  # SIGTERM, then SIGKILL; returns the
#                                       # server's exit status (137: killed)
#
# The server's stdout goes through a FIFO so that its "listening on N" line
# can be read with a timeout as soon as it is written. Opened read-write,
# the FIFO never blocks on open; a server that dies early shows as the
# timeout. Clients should close fd 3 (3<&-) so they do not hold the FIFO.

SERVE_STARTUP_TIMEOUT_S=${SERVE_STARTUP_TIMEOUT_S:-10}
serve_name=server
server_pid=""
port=""
serve_tmp=$(mktemp -d)

serve_stop() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null
  if ! timeout "$1" tail --pid="$server_pid" -s 0.1 -f /dev/null; then
    echo "$serve_name still running after ${1}s, killing it" >&2
    kill -KILL "$server_pid" 2>/dev/null
  fi
  wait "$server_pid"
  local rc=$?
  server_pid=""
  exec 3<&-
  return "$rc"
}

# shellcheck disable=SC2317  # invoked through the trap
serve_cleanup() {
  serve_stop 3
  rm -rf "$serve_tmp"
}
trap serve_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

serve_start() {
  serve_name=$1
  shift
  mkfifo "$serve_tmp/server.out"
  exec 3<>"$serve_tmp/server.out"
  "$@" --port 0 >"$serve_tmp/server.out" 3<&- &
  server_pid=$!
  local line
  port=""
  if read -r -t "$SERVE_STARTUP_TIMEOUT_S" line <&3 &&
     [[ $line =~ ^listening\ on\ ([0-9]+)$ ]]; then
    port=${BASH_REMATCH[1]}
  fi
  if [ -z "$port" ] || [ "$port" -eq 0 ]; then
    echo "$serve_name did not report a port within ${SERVE_STARTUP_TIMEOUT_S}s" >&2
    exit 1
  fi
  echo "$serve_name listening on port $port" >&2
}
