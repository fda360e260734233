#!/usr/bin/env bash
# The paper's 5-layer chain on one machine (docs/results/README.md):
#
#   generator -> gateway x1 -> A x2 -> B x2 -> C x2 -> database x2
#
# every layer a testbed_layer whose channel to the next layer uses the
# strategy under test. For each strategy (rr lcc bcc btc) and each load
# (under-load, high-load, overload as fractions of the chain's capacity) it
# starts a fresh chain, runs the open-loop generator, stops the chain (each
# layer writes its channel statistics), and finally writes
# docs/results/testbed-<date>.md and the plots.
#
#   examples/testbed/run.sh [BUILD_DIR]        (default: build)
#
# Settings (environment):
#   STRATEGIES="rr lcc bcc btc"  LOADS="0.3 1.0 2.0"
#   RUNS=1        runs of every cell (each a fresh chain); RUNS_<lb>=N
#                 overrides it for one strategy (e.g. RUNS_btc=2). The runs
#                 are interleaved: every strategy's first run, then every
#                 second run ... With N > 1 a cell's raw files go to
#                 <lb>-<load>/run<k>/ and the report gives the mean and
#                 min-max. Each cell takes about DURATION + WARMUP + 3 s.
#   DURATION=10 WARMUP=3 (s)  DEADLINE_MS=100  SIZE=4096
#   WEAK=B WEAK_WORKERS=2 WEAK_SERVICE_US=5000   the weakest layer
#   WORKERS=8 SERVICE_US=1000                    the other inner layers
#   GW_WORKERS=16 GW_SERVICE_US=200 DB_WORKERS=8 DB_SERVICE_US=500
#   INSTANCES="gateway:1 A:2 B:2 C:2 db:2"
#   CAPACITY=measure|computed|<calls/s>   (default measure: a short ramp)
#   RAMP="0.6 0.8 1.0 1.2 1.4" RAMP_S=4   the ramp, x the computed capacity
#   GEN=auto|testbed_gen|sluice-bench     (auto: sluice-bench if built)
#   OUT=docs/results  DATE=$(date +%F)  KEEP_RAW=1
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BIN=$BUILD/examples/testbed
LAYER=$BIN/testbed_layer
GENBIN=$BIN/testbed_gen
BENCH=$BUILD/tools/sluice-bench

STRATEGIES=${STRATEGIES:-rr lcc bcc btc}
LOADS=${LOADS:-0.3 1.0 2.0}
RUNS=${RUNS:-1}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
DEADLINE_MS=${DEADLINE_MS:-100}
SIZE=${SIZE:-4096}
WEAK=${WEAK:-B}
WEAK_WORKERS=${WEAK_WORKERS:-2}
WEAK_SERVICE_US=${WEAK_SERVICE_US:-5000}
WORKERS=${WORKERS:-8}
SERVICE_US=${SERVICE_US:-1000}
GW_WORKERS=${GW_WORKERS:-16}
GW_SERVICE_US=${GW_SERVICE_US:-200}
DB_WORKERS=${DB_WORKERS:-8}
DB_SERVICE_US=${DB_SERVICE_US:-500}
INSTANCES=${INSTANCES:-gateway:1 A:2 B:2 C:2 db:2}
CAPACITY=${CAPACITY:-measure}
RAMP=${RAMP:-0.6 0.8 1.0 1.2 1.4}
RAMP_S=${RAMP_S:-4}
GEN=${GEN:-auto}
OUT=${OUT:-$ROOT/docs/results}
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac
DATE=${DATE:-$(date +%F)}
KEEP_RAW=${KEEP_RAW:-1}

LOG_TAG=testbed
# shellcheck source=examples/testbed/chain_lib.sh
. "$ROOT/examples/testbed/chain_lib.sh"

[ -x "$LAYER" ] && [ -x "$GENBIN" ] ||
  die "$LAYER or $GENBIN missing: build first (make bench-testbed)"
if [ "$GEN" = auto ]; then
  if [ -x "$BENCH" ]; then GEN=sluice-bench; else GEN=testbed_gen; fi
fi
command -v python3 >/dev/null || die "python3 is needed for the report"

# runs_of LB: RUNS_<LB> or RUNS.
runs_of() {
  local v="RUNS_$1" n
  n=${!v:-$RUNS}
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "$v/RUNS must be a positive integer, not '$n'"
  echo "$n"
}
MAXRUNS=0
RUNS_DESC=""
N_CELLS=0
for lb in $STRATEGIES; do
  n=$(runs_of "$lb") || exit 1
  [ "$n" -gt "$MAXRUNS" ] && MAXRUNS=$n
  RUNS_DESC+="${RUNS_DESC:+ }$lb:$n"
  N_CELLS=$((N_CELLS + n * $(wc -w <<<"$LOADS")))
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/testbed.XXXXXX")
RAW=$OUT/testbed-$DATE-raw
chain_traps

# start_layer NAME IDX WORKERS SERVICE_US LB [NEXT]: sets PORT.
start_layer() {
  local name=$1 idx=$2 w=$3 us=$4 lb=$5 next=${6:-}
  local args=(--port 0 --workers "$w" --service-us "$us" --name "$name$idx"
              --threads 1 --stats "$CELL/layer-$name$idx.json")
  [ -n "$next" ] && args+=(--next "ipv4:$next" --lb "$lb")
  launch_layer "$name$idx" "${args[@]}"
}

count_of() { # count_of NAME: instances of a layer
  local kv
  for kv in $INSTANCES; do
    [ "${kv%%:*}" = "$1" ] && { echo "${kv#*:}"; return; }
  done
  echo 1
}

# layer_conf NAME: "workers service_us"
layer_conf() {
  case $1 in
    gateway) echo "$GW_WORKERS $GW_SERVICE_US" ;;
    db) echo "$DB_WORKERS $DB_SERVICE_US" ;;
    "$WEAK") echo "$WEAK_WORKERS $WEAK_SERVICE_US" ;;
    *) echo "$WORKERS $SERVICE_US" ;;
  esac
}

# start_chain LB: sets GW_PORT.
start_chain() {
  local lb=$1 next="" name i n ports conf
  for name in db C B A gateway; do
    n=$(count_of $name)
    conf=$(layer_conf $name)
    ports=""
    for ((i = 1; i <= n; i++)); do
      # shellcheck disable=SC2086
      start_layer $name $i $conf "$lb" "$next"
      ports+="${ports:+,}127.0.0.1:$PORT"
    done
    next=$ports
  done
  GW_PORT=${next#127.0.0.1:}
}

REQ=$WORK/request.bin
"$GENBIN" --write-request "$REQ" --size "$SIZE"

# run_gen RATE DURATION WARMUP OUTFILE
run_gen() {
  local rate=$1 dur=$2 warm=$3 outf=$4 limit
  limit=$(python3 -c "print(int($dur + $warm + $DEADLINE_MS / 1000 + 30))")
  if [ "$GEN" = sluice-bench ]; then
    timeout -k 5 "$limit" "$BENCH" --target "127.0.0.1:$GW_PORT" \
      --method /testbed.Layer/Call --request "$REQ" --rate "$rate" \
      --arrival poisson --lb rr --connections 1 \
      --duration "$dur" --warmup "$warm" --deadline "$DEADLINE_MS" \
      --json >"$outf.bench" 2>"$outf.stderr" || true
    if python3 "$ROOT/examples/testbed/report.py" normalize-bench \
      "$outf.bench" "$rate" "$dur" >"$outf" 2>>"$outf.stderr"; then
      return
    fi
    log "sluice-bench gave no usable result ($(tail -1 "$outf.stderr")): testbed_gen for this cell"
  fi
  timeout -k 5 "$limit" "$GENBIN" --target "127.0.0.1:$GW_PORT" \
    --rate "$rate" --duration "$dur" --warmup "$warm" \
    --deadline "$DEADLINE_MS" --size "$SIZE" --json \
    >"$outf" 2>"$outf.stderr" || true
  [ -s "$outf" ] || die "generator produced nothing: $(tail -3 "$outf.stderr")"
}

mkdir -p "$OUT"
rm -rf "$RAW"
mkdir -p "$RAW"
read -r ww wus <<<"$(layer_conf "$WEAK")"
COMPUTED=$(python3 -c "print(round($(count_of "$WEAK") * $ww * 1e6 / $wus))")
log "chain: $INSTANCES; weakest layer $WEAK: $(count_of "$WEAK") x $ww workers x $wus us = $COMPUTED calls/s computed"
log "generator: $GEN; payload $SIZE B; deadline $DEADLINE_MS ms; $DURATION s per cell after $WARMUP s warm-up"

CAP_HOW=computed
case $CAPACITY in
  computed) CAP=$COMPUTED ;;
  measure)
    CAP_HOW=measured
    CELL=$RAW/ramp
    mkdir -p "$CELL"
    best=0
    for f in $RAMP; do
      rate=$(python3 -c "print(round($f * $COMPUTED))")
      start_chain lcc
      log "capacity ramp (lcc): offered $rate/s for $RAMP_S s"
      run_gen "$rate" "$RAMP_S" 1 "$CELL/gen-$f.json"
      stop_chain
      mkdir -p "$CELL/layers-$f"
      mv "$CELL"/layer-*.json "$CELL/layers-$f/" 2>/dev/null || true
      g=$(python3 -c "import json;print(round(json.load(open('$CELL/gen-$f.json'))['goodput_rps']))")
      log "  goodput $g/s"
      [ "$g" -gt "$best" ] && best=$g
    done
    CAP=$best
    ;;
  *) CAP=$CAPACITY; CAP_HOW=given ;;
esac
log "capacity: $CAP calls/s ($CAP_HOW)"
printf '{"capacity":%s,"how":"%s","computed":%s}\n' "$CAP" "$CAP_HOW" \
  "$COMPUTED" >"$RAW/capacity.json"

log "runs per cell: $RUNS_DESC ($N_CELLS cells, about $((N_CELLS * (DURATION + WARMUP + 3) / 60 + 1)) min)"
for ((run = 1; run <= MAXRUNS; run++)); do
  for lb in $STRATEGIES; do
    n=$(runs_of "$lb")
    [ "$run" -le "$n" ] || continue
    for load in $LOADS; do
      rate=$(python3 -c "print(round($load * $CAP))")
      CELL=$RAW/$lb-$load
      [ "$n" -gt 1 ] && CELL=$CELL/run$run
      mkdir -p "$CELL"
      start_chain "$lb"
      log "$lb, load $load, run $run/$n: offered $rate/s (gateway port $GW_PORT)"
      run_gen "$rate" "$DURATION" "$WARMUP" "$CELL/gen.json"
      stop_chain
      python3 - "$CELL/gen.json" <<'EOF' >&2
import json, sys
g = json.load(open(sys.argv[1]))
print("[testbed]   goodput %.0f/s, p99 %.2f ms, early drops %d, timeouts %d"
      % (g["goodput_rps"], g["p99_ms"], g["early_drops"], g["timeouts"]))
EOF
    done
  done
done

cat >"$RAW/settings.json" <<EOF
{"instances":"$INSTANCES","weak":"$WEAK","weak_workers":$WEAK_WORKERS,
 "weak_service_us":$WEAK_SERVICE_US,"workers":$WORKERS,"service_us":$SERVICE_US,
 "gw_workers":$GW_WORKERS,"gw_service_us":$GW_SERVICE_US,
 "db_workers":$DB_WORKERS,"db_service_us":$DB_SERVICE_US,
 "duration":$DURATION,"warmup":$WARMUP,"deadline_ms":$DEADLINE_MS,"size":$SIZE,
 "strategies":"$STRATEGIES","loads":"$LOADS","runs":"$RUNS_DESC","generator":"$GEN",
 "cores":$(nproc),"cpu":"$(lscpu | sed -n 's/^Model name: *//p' | head -1)",
 "date":"$DATE","commit":"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"}
EOF
python3 "$ROOT/examples/testbed/report.py" report "$RAW" "$OUT" "$DATE"
[ "$KEEP_RAW" = 1 ] || rm -rf "$RAW"
log "done: $OUT/testbed-$DATE.md"
