#!/usr/bin/env bash
# Circuit breakers and retries in a 3-tier chain with fan-out (issue 13;
# the service-mesh talk of /work/shared seed 001, docs/resilience-experiment.md):
#
#   sluice-bench -> t1 (fan-out 2) -> t2 (fan-out 3) -> t3 x2
#
# six calls reach t3 per request entering the chain, as the talk's cart
# path needs six downstream requests over three tiers. Each tier is a
# testbed_layer; "a setting at tier k" is set on the channel that calls
# tier k (tier 1: sluice-bench's, tier 2: t1's, tier 3: t2's), as an Istio
# DestinationRule for a service acts in its callers' sidecars.
#
# For every scenario and load it starts a fresh chain, runs open-loop
# Poisson load from sluice-bench, stops the chain (each layer writes its
# counters), and at the end writes docs/results/resilience-<date>.md, its
# data and gnuplot plots (report: examples/testbed/resilience_report.py).
#
#   examples/testbed/resilience.sh [BUILD_DIR]      (default: build)
#
# Scenarios (SCENARIOS, names as below):
#   none              rr everywhere, no breaker, no retry (the reference)
#   cb-t1 cb-t2 cb-t3 cb-all   static breaker max_requests $CB_MAX at tier
#                     1, 2, 3 or every tier; rr; no retry
#   storm-aN-iI       rr; a sensitive breaker max_requests $STORM_CB at
#                     tier 3; retries at tiers 2 and 3 (t1's and t2's
#                     channels; the generator, like the talk's, does not
#                     retry) with maxAttempts N (first attempt included)
#                     and a fixed interval I ms (backoff I..I, jitter
#                     +-20 %; 0 is taken as 1 ms), retrying UNAVAILABLE and
#                     RESOURCE_EXHAUSTED; retry budget and throttling off,
#                     no max_retries: what a mesh does unless told
#   default           sluice's defaults at every tier: the btc strategy, no
#                     breaker, and a retry policy (maxAttempts 3, backoff
#                     25 ms x2 up to 100 ms, UNAVAILABLE and
#                     RESOURCE_EXHAUSTED) with retryThrottling (10 tokens,
#                     ratio 0.1) from a service config, leaving the
#                     library's default retry budget and pushback handling
#                     alone; also on the generator's channel (tier 1)
# Loads (LOADS): fractions of the measured capacity, and "spike": a base
# load of $SPIKE_BASE x capacity for the whole run plus a second generator
# adding $SPIKE_ADD x capacity for $SPIKE_S s in its middle.
#
# Settings (environment):
#   SCENARIOS="none cb-t1 cb-t2 cb-t3 cb-all storm-a1-i0 storm-a3-i0
#              storm-a5-i0 storm-a5-i25 storm-a5-i100 default"
#   LOADS="0.8 1.0 1.2 spike"  STORM_LOADS="1.2 spike" (storm-* only)
#   RUNS=2  runs of every cell, interleaved (every cell once, then again)
#   DURATION=3 WARMUP=1 (s)  DEADLINE_MS=500  SIZE=4096
#   CB_MAX=20  STORM_CB=1
#   SPIKE_BASE=0.8 SPIKE_ADD=1.2 SPIKE_S=1
#   T1="16 1000" T2="16 1000" T3="4 8000" (workers, service us per instance)
#   T3_INSTANCES=2  F1=2 F2=3  FANOUT_MODE=sequential
#   CAPACITY=measure|computed|<requests/s>  (measure: best goodput of a
#                                            short ramp of "none")
#   RAMP="0.9 1.0 1.1" RAMP_S=3
#   OUT=docs/results  DATE=$(date +%F)  KEEP_RAW=1  MAX_MINUTES=20
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LAYER=$BUILD/examples/testbed/testbed_layer
GENBIN=$BUILD/examples/testbed/testbed_gen
BENCH=$BUILD/tools/sluice-bench

SCENARIOS=${SCENARIOS:-none cb-t1 cb-t2 cb-t3 cb-all storm-a1-i0 storm-a3-i0 storm-a5-i0 storm-a5-i25 storm-a5-i100 default}
LOADS=${LOADS:-0.8 1.0 1.2 spike}
STORM_LOADS=${STORM_LOADS:-1.2 spike}
RUNS=${RUNS:-2}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
DEADLINE_MS=${DEADLINE_MS:-500}
SIZE=${SIZE:-4096}
CB_MAX=${CB_MAX:-20}
STORM_CB=${STORM_CB:-1}
SPIKE_BASE=${SPIKE_BASE:-0.8}
SPIKE_ADD=${SPIKE_ADD:-1.2}
SPIKE_S=${SPIKE_S:-1}
T1=${T1:-16 1000}
T2=${T2:-16 1000}
T3=${T3:-4 8000}
T3_INSTANCES=${T3_INSTANCES:-2}
F1=${F1:-2}
F2=${F2:-3}
FANOUT_MODE=${FANOUT_MODE:-sequential}
CAPACITY=${CAPACITY:-measure}
RAMP=${RAMP:-0.9 1.0 1.1}
RAMP_S=${RAMP_S:-3}
OUT=${OUT:-$ROOT/docs/results}
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac
DATE=${DATE:-$(date +%F)}
KEEP_RAW=${KEEP_RAW:-1}
MAX_MINUTES=${MAX_MINUTES:-20}

LOG_TAG=resilience
# shellcheck source=examples/testbed/chain_lib.sh
. "$ROOT/examples/testbed/chain_lib.sh"

[ -x "$LAYER" ] && [ -x "$BENCH" ] && [ -x "$GENBIN" ] ||
  die "$LAYER, $GENBIN or $BENCH missing: build first (make bench-resilience)"
command -v python3 >/dev/null || die "python3 is needed for the report"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/resilience.XXXXXX")
RAW=$OUT/resilience-$DATE-raw
T_START=$SECONDS
chain_traps

# start_layer NAME WORKERS SERVICE_US [NEXT [ARGS...]]: sets PORT.
start_layer() {
  local name=$1 w=$2 us=$3 next=${4:-}
  shift 3
  [ $# -gt 0 ] && shift
  local args=(--port 0 --workers "$w" --service-us "$us" --name "$name"
              --threads 1 --stats "$CELL/layer-$name.json"
              --shutdown-grace-ms 300)
  [ -n "$next" ] && args+=(--next "ipv4:$next" "$@")
  launch_layer "$name" "${args[@]}"
}

# The default scenario's service config (gRPC JSON), for every tier.
DEFAULT_SC=$WORK/default-service-config.json
cat >"$DEFAULT_SC" <<'EOF'
{
  "methodConfig": [{
    "name": [{"service": "testbed.Layer"}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.025s",
      "maxBackoff": "0.1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
    }
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}
EOF

# tier_args SCENARIO TIER: the channel flags of the channel calling TIER
# (1: the generator's, 2: t1's, 3: t2's), one per line.
tier_args() {
  local sc=$1 tier=$2
  case $sc in
    none) echo --lb; echo rr ;;
    cb-t[123])
      echo --lb; echo rr
      [ "${sc#cb-t}" = "$tier" ] && { echo --breakers; echo "$CB_MAX,0,0"; }
      ;;
    cb-all) echo --lb; echo rr; echo --breakers; echo "$CB_MAX,0,0" ;;
    storm-a*-i*)
      local a i
      a=${sc#storm-a}; a=${a%%-*}; i=${sc##*-i}
      echo --lb; echo rr
      [ "$tier" = 3 ] && { echo --breakers; echo "$STORM_CB,0,0"; }
      if [ "$tier" != 1 ]; then
        echo --retry; echo "$a,$i"
        echo --retry-budget; echo "0,0"
      fi
      ;;
    default) echo --service-config; echo "$DEFAULT_SC" ;;
    *) die "unknown scenario $sc" ;;
  esac
}

# start_chain SCENARIO: sets GW_PORT.
start_chain() {
  local sc=$1 i ports="" a=()
  read -r w us <<<"$T3"
  for ((i = 1; i <= T3_INSTANCES; i++)); do
    start_layer "t3-$i" "$w" "$us"
    ports+="${ports:+,}127.0.0.1:$PORT"
  done
  mapfile -t a < <(tier_args "$sc" 3)
  read -r w us <<<"$T2"
  start_layer t2 "$w" "$us" "$ports" --fanout "$F2" --fanout-mode "$FANOUT_MODE" "${a[@]}"
  ports=127.0.0.1:$PORT
  mapfile -t a < <(tier_args "$sc" 2)
  read -r w us <<<"$T1"
  start_layer t1 "$w" "$us" "$ports" --fanout "$F1" --fanout-mode "$FANOUT_MODE" "${a[@]}"
  GW_PORT=$PORT
}

REQ=$WORK/request.bin
"$GENBIN" --write-request "$REQ" --size "$SIZE"

# bench RATE DURATION WARMUP OUTFILE SCENARIO [SEED [bg]]: one
# sluice-bench, bounded in time (timeout) and in calls (its schedule: rate
# x (warm-up + duration)). With "bg" it runs in the background and its pid
# (timeout's, which passes TERM on) goes to GEN_PIDS.
bench() {
  local rate=$1 dur=$2 warm=$3 outf=$4 sc=$5 seed=${6:-1} bg=${7:-} limit a=()
  limit=$(python3 -c "print(int($dur + $warm + $DEADLINE_MS / 1000 + 20))")
  mapfile -t a < <(tier_args "$sc" 1)
  local cmd=(timeout -k 2 "$limit" "$BENCH" --target "127.0.0.1:$GW_PORT"
    --method /testbed.Layer/Call --request "$REQ" --rate "$rate"
    --arrival poisson --connections 1 --seed "$seed"
    --duration "$dur" --warmup "$warm" --deadline "$DEADLINE_MS"
    --max-outstanding 5000 --json --cdf --quiet "${a[@]}")
  if [ -n "$bg" ]; then
    "${cmd[@]}" >"$outf" 2>"$outf.stderr" &
    GEN_PIDS+=($!)
  else
    "${cmd[@]}" >"$outf" 2>"$outf.stderr" || true
  fi
}

# run_cell SCENARIO LOAD: the generator(s) against a fresh chain.
run_cell() {
  local sc=$1 load=$2 rate
  start_chain "$sc"
  if [ "$load" = spike ]; then
    rate=$(python3 -c "print(round($SPIKE_BASE * $CAP))")
    local add at
    add=$(python3 -c "print(round($SPIKE_ADD * $CAP))")
    at=$(python3 -c "print(max(0.0, $WARMUP + ($DURATION - $SPIKE_S) / 2))")
    bench "$rate" "$DURATION" "$WARMUP" "$CELL/gen.json" "$sc" 1 bg
    sleep "$at"
    bench "$add" "$SPIKE_S" 0 "$CELL/gen-spike.json" "$sc" 7
    wait "${GEN_PIDS[@]}" 2>/dev/null || true
    GEN_PIDS=()
    log "$sc, spike, run $run/$RUNS: $rate/s + $add/s for $SPIKE_S s"
  else
    rate=$(python3 -c "print(round($load * $CAP))")
    bench "$rate" "$DURATION" "$WARMUP" "$CELL/gen.json" "$sc"
    log "$sc, load $load, run $run/$RUNS: $rate/s"
  fi
  stop_chain
  python3 "$ROOT/examples/testbed/resilience_report.py" cell "$CELL" \
    "$F1" "$F2" >&2 || log "  (no summary: $(tail -1 "$CELL/gen.json.stderr" 2>/dev/null))"
}

mkdir -p "$OUT"
rm -rf "$RAW"
mkdir -p "$RAW"
read -r w3 us3 <<<"$T3"
COMPUTED=$(python3 -c "print(round($T3_INSTANCES * $w3 * 1e6 / $us3 / ($F1 * $F2)))")
log "chain: sluice-bench -> t1 ($T1, fan-out $F1) -> t2 ($T2, fan-out $F2) -> t3 x$T3_INSTANCES ($T3); fan-out $FANOUT_MODE"
log "t3 bound: $COMPUTED requests/s computed; payload $SIZE B; deadline $DEADLINE_MS ms; $DURATION s per cell after $WARMUP s"

CAP_HOW=computed
case $CAPACITY in
  computed) CAP=$COMPUTED ;;
  measure)
    CAP_HOW=measured
    best=0
    run=1
    for f in $RAMP; do
      CELL=$RAW/ramp-$f
      mkdir -p "$CELL"
      start_chain none
      rate=$(python3 -c "print(round($f * $COMPUTED))")
      bench "$rate" "$RAMP_S" 1 "$CELL/gen.json" none
      stop_chain
      g=$(python3 -c "import json;print(round(json.load(open('$CELL/gen.json'))['result']['throughput']))" 2>/dev/null || echo 0)
      log "capacity ramp (none): offered $rate/s -> goodput $g/s"
      [ "$g" -gt "$best" ] && best=$g
    done
    [ "$best" -gt 0 ] || die "the capacity ramp had no successful call"
    CAP=$best
    ;;
  *) CAP=$CAPACITY; CAP_HOW=given ;;
esac
log "capacity: $CAP requests/s ($CAP_HOW)"

loads_of() { case $1 in storm-*) echo "$STORM_LOADS" ;; *) echo "$LOADS" ;; esac; }
N_CELLS=0
for sc in $SCENARIOS; do N_CELLS=$((N_CELLS + $(wc -w <<<"$(loads_of "$sc")"))); done
log "$N_CELLS cells x $RUNS runs, about $((N_CELLS * RUNS * (DURATION + WARMUP + 4) / 60 + 1)) min (bound: $MAX_MINUTES min)"

cat >"$RAW/settings.json" <<EOF
{"capacity":$CAP,"capacity_how":"$CAP_HOW","computed":$COMPUTED,
 "t1":"$T1","t2":"$T2","t3":"$T3","t3_instances":$T3_INSTANCES,"f1":$F1,"f2":$F2,
 "fanout_mode":"$FANOUT_MODE","duration":$DURATION,"warmup":$WARMUP,
 "deadline_ms":$DEADLINE_MS,"size":$SIZE,"cb_max":$CB_MAX,"storm_cb":$STORM_CB,
 "spike_base":$SPIKE_BASE,"spike_add":$SPIKE_ADD,"spike_s":$SPIKE_S,
 "scenarios":"$SCENARIOS","loads":"$LOADS","storm_loads":"$STORM_LOADS","runs":$RUNS,
 "cores":$(nproc),"cpu":"$(lscpu | sed -n 's/^Model name: *//p' | head -1)",
 "date":"$DATE","commit":"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"}
EOF
cp "$DEFAULT_SC" "$RAW/default-service-config.json"

for ((run = 1; run <= RUNS; run++)); do
  for sc in $SCENARIOS; do
    for load in $(loads_of "$sc"); do
      if [ $((SECONDS - T_START)) -ge $((MAX_MINUTES * 60)) ]; then
        log "MAX_MINUTES=$MAX_MINUTES reached: the remaining cells are skipped"
        break 3
      fi
      CELL=$RAW/$sc/$load/run$run
      mkdir -p "$CELL"
      run_cell "$sc" "$load"
    done
  done
done

python3 "$ROOT/examples/testbed/resilience_report.py" report "$RAW" "$OUT" "$DATE"
[ "$KEEP_RAW" = 1 ] || rm -rf "$RAW"
log "done in $(((SECONDS - T_START) / 60)) min: $OUT/resilience-$DATE.md"
