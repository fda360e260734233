#!/usr/bin/env bash
# ctest bench_smoke: starts interop_server on a free port, runs sluice-bench
# for 1 s of open-loop load on EmptyCall (an empty request is a valid
# grpc.testing.Empty) over 2 connections on 2 event loops (each runs half of
# the schedule) and checks that it exits 0 with ~200 ok calls, every call
# sent, no errors, and the "kinds" of failed calls present and empty in its
# JSON summary. The server is stopped with SIGTERM on every exit path.
#
#   run_smoke.sh INTEROP_SERVER SLUICE_BENCH
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 INTEROP_SERVER SLUICE_BENCH" >&2
  exit 2
fi
server=$1
bench=$2
for b in "$server" "$bench"; do
  [ -x "$b" ] || { echo "bench_smoke: $b not built" >&2; exit 2; }
done

server_pid=""
tmp=$(mktemp -d)
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null
    if ! timeout 5 tail --pid="$server_pid" -s 0.1 -f /dev/null; then
      kill -KILL "$server_pid" 2>/dev/null
    fi
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# "listening on N" through a FIFO, with a timeout.
mkfifo "$tmp/server.out"
exec 3<>"$tmp/server.out"
"$server" --port 0 --host 127.0.0.1 >"$tmp/server.out" 3<&- &
server_pid=$!
port=""
if read -r -t 10 line <&3 && [[ $line =~ ^listening\ on\ ([0-9]+)$ ]]; then
  port=${BASH_REMATCH[1]}
fi
exec 3<&-
if [ -z "$port" ] || [ "$port" -eq 0 ]; then
  echo "bench_smoke: the server did not report a port within 10s" >&2
  exit 1
fi

timeout -k 2 30 "$bench" --target "127.0.0.1:$port" \
  --method /grpc.testing.TestService/EmptyCall --request /dev/null \
  --duration 1 --warmup 0 --rate 200 --connections 2 --threads 2 --json \
  >"$tmp/out.json"
rc=$?
cat "$tmp/out.json"
if [ "$rc" -ne 0 ]; then
  echo "bench_smoke: sluice-bench exited with $rc" >&2
  exit 1
fi
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
ok, errors = r["ok"], r["errors"]
problems = []
if ok <= 0:
    problems.append("ok == 0")
if errors != 0:
    problems.append("errors == %d" % errors)
if not 150 <= ok <= 250:
    problems.append("ok == %d, expected ~200 at 200 calls/s for 1 s" % ok)
if r["unsent"] or r["unfinished"]:
    problems.append("unsent %d, unfinished %d" % (r["unsent"], r["unfinished"]))
if r["sent"] != 200:
    problems.append("sent %d, expected exactly 200 scheduled calls" % r["sent"])
kinds = r.get("kinds", {})
if sorted(kinds) != ["breaker", "deadline_refusal", "early_drop", "other", "timeout"]:
    problems.append("kinds: %s" % sorted(kinds))
for name, k in kinds.items():
    if sorted(k) != ["max_us", "n", "p50_us", "p99_us"] or k["n"] != 0 \
            or k["p99_us"] != 0:
        problems.append("kinds.%s: %s" % (name, k))
if problems:
    sys.exit("bench_smoke: " + "; ".join(problems))
print("bench_smoke: OK (%d calls, p99 %.1f us)" % (ok, r["latency_us"]["p99"]),
      file=sys.stderr)
PY
