#!/bin/bash
# Reproduces the stale-estimate lockout of deadline refusal
# (docs/results/README.md, "Problems found in sluice"):
#   examples/testbed/repro_deadline_lockout.sh lcc|bcc|btc   (after a build)
# gen -> gw (lb $1) -> db x1 (1 worker x 50 ms = 20 calls/s).
# Phase 1: 100/s for 3 s, deadline 2000 ms (overload: latency grows to ~1-2 s).
# Phases 2, 3: 5/s (25 % load) for 5 s each, deadline 100 ms (50 ms service
# fits). Expected: phases 2 and 3 all OK. Seen with lcc: every call refused
# locally ("deadline_drops"), the latency EWMA decays only with the rare call
# that gets through.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD:-$ROOT/build}/examples/testbed
D=$(mktemp -d)
trap 'kill -TERM $GW $DB 2>/dev/null; wait; rm -rf "$D"' EXIT
LB=${1:-lcc}
$B/testbed_layer --port 0 --workers 1 --service-us 50000 --name db >"$D/db.out" 2>/dev/null & DB=$!
sleep 0.3; P1=$(awk '{print $3}' "$D/db.out")
$B/testbed_layer --port 0 --workers 8 --service-us 100 --name gw --next ipv4:127.0.0.1:$P1 --lb "$LB" --stats "$D/gw.json" >"$D/gw.out" & GW=$!
sleep 0.3; P2=$(awk '{print $3}' "$D/gw.out")
for r in "100 3 2000" "5 5 100" "5 5 100"; do
  set -- $r
  timeout 30 $B/testbed_gen --target 127.0.0.1:$P2 --rate $1 --duration $2 --warmup 0 --deadline $3 --json 2>/dev/null |
    jq -c '{rate,deadline_ms,ok,early_drops,deadline_drops,timeouts,p50_ms,p99_ms}'
  kill -USR1 $GW; sleep 0.2
  tail -1 "$D/gw.json" | jq -c '.channel | {dropped_limit,dropped_deadline, d: [.dests[] | {lb_state,limit,latency_min_us,latency_ewma_us,sent,ok,failed}]}'
done
