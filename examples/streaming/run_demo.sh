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
CLIENT_TIMEOUT_S=30
STOP_TIMEOUT_S=10

# shellcheck source=scripts/serve.sh
source "$(dirname "$0")/../../scripts/serve.sh"
serve_start ticker_server "$server"
tmp=$serve_tmp

timeout -k 2 "$CLIENT_TIMEOUT_S" \
  "$client" --target "127.0.0.1:$port" --demo all >"$tmp/client.out" 3<&-
rc=$?
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

serve_stop "$STOP_TIMEOUT_S"
server_rc=$?
if [ "$server_rc" -ne 0 ]; then
  echo "run_demo: ticker_server exited with $server_rc" >&2
  failed=1
fi
[ "$failed" -eq 0 ] && echo "run_demo: OK" >&2
exit "$failed"
