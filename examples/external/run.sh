#!/usr/bin/env bash
# Runs the out-of-tree example built in DIR: starts notes_server on a free
# port, adds three notes with notes_client, lists them and checks every
# line, then stops the server and checks it exited cleanly.
#
#   examples/external/run.sh DIR
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
dir=$1
for b in notes_server notes_client; do
  [ -x "$dir/$b" ] || { echo "run.sh: $dir/$b not built" >&2; exit 2; }
done
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

"$dir/notes_server" >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
port=
for _ in $(seq 100); do # up to 10 s
  port=$(sed -n 's/^listening on \([0-9]*\)$/\1/p' "$tmp/server.out")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "run.sh: notes_server did not start" >&2
  cat "$tmp/server.err" >&2
  exit 1
fi

timeout -k 2 20 "$dir/notes_client" "127.0.0.1:$port" \
  "buy milk" "call Ada" "ship 0.2" >"$tmp/client.out"
rc=$?
cat "$tmp/client.out"
expected='added note 1
added note 2
added note 3
note 1: buy milk
note 2: call Ada
note 3: ship 0.2
list: OK'
fail=0
if [ $rc -ne 0 ]; then
  echo "run.sh: notes_client exited with $rc" >&2
  fail=1
elif [ "$(cat "$tmp/client.out")" != "$expected" ]; then
  echo "run.sh: unexpected output; expected:" >&2
  echo "$expected" >&2
  fail=1
fi

kill -TERM "$server_pid"
for _ in $(seq 100); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
wait "$server_pid"
src=$?
server_pid=
if [ $src -ne 0 ]; then
  echo "run.sh: notes_server exited with $src" >&2
  cat "$tmp/server.err" >&2
  fail=1
fi
[ $fail -eq 0 ] && echo "run.sh: OK"
exit $fail
