#!/usr/bin/env bash
# Demo: start the greeter server on a free port, call it once, stop it.
#
#   scripts/demo.sh BUILD_DIR
#
# Prints the client's output and exits with the client's exit code. The
# server is stopped on every exit path, including Ctrl-C (scripts/serve.sh).
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
CALL_TIMEOUT_MS=5000
STOP_TIMEOUT_S=10

# shellcheck source=scripts/serve.sh
source "$(dirname "$0")/serve.sh"
serve_start greeter_server "$server"

# The call's own deadline bounds it; timeout(1) guards against a hang anyway.
timeout -k 2 $(( CALL_TIMEOUT_MS / 1000 + 5 )) \
  "$client" --target "127.0.0.1:$port" --name world \
  --timeout-ms "$CALL_TIMEOUT_MS" 3<&-
rc=$?

# Graceful stop, bounded.
serve_stop "$STOP_TIMEOUT_S"
server_rc=$?
if [ "$server_rc" -ne 0 ]; then
  echo "demo: greeter_server exited with $server_rc" >&2
fi
exit "$rc"
