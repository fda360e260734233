# Shell helpers shared by examples/testbed/run.sh and resilience.sh
# (sourced, not run): logging, and starting and stopping testbed_layer
# processes so that none outlives the script.
#
# The sourcing script sets LOG_TAG (the log prefix), LAYER (the
# testbed_layer binary) and WORK (a scratch directory, removed at exit)
# before calling chain_traps. PIDS holds the layers started, GEN_PIDS any
# generator left running in the background; both are stopped at exit.
# shellcheck shell=bash

PIDS=()
GEN_PIDS=()
STARTS=0

log() { printf '[%s %s] %s\n' "$LOG_TAG" "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

stop_pids() {
  local sig=${1:-TERM} p
  for p in "${PIDS[@]}"; do kill -"$sig" "$p" 2>/dev/null || true; done
}
wait_pids() { # bounded: $1 seconds, then SIGKILL
  local deadline=$((SECONDS + $1)) p alive
  while :; do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    if [ $SECONDS -ge $deadline ]; then
      log "some layers did not stop in $1 s: SIGKILL"
      stop_pids KILL
      break
    fi
    sleep 0.1
  done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
stop_chain() {
  stop_pids TERM
  wait_pids 10
}
cleanup() {
  trap - EXIT INT TERM
  local p
  for p in "${GEN_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  if [ ${#PIDS[@]} -gt 0 ]; then
    stop_pids TERM
    wait_pids 5
  fi
  rm -rf "$WORK"
}
# Every process started here is stopped at exit, whatever happens.
chain_traps() {
  trap cleanup EXIT
  trap 'log interrupted; exit 130' INT TERM
}

# launch_layer NAME ARGS...: runs $LAYER ARGS in the background (its pid
# goes to PIDS), waits up to 5 s for its "listening on" line and sets PORT
# (not run in a subshell, so that PIDS keeps the process). A fresh output
# file per start: the redirection truncates only once the child runs, so a
# reused file could still show the previous chain's port.
launch_layer() {
  local name=$1 out
  shift
  STARTS=$((STARTS + 1))
  out=$WORK/$STARTS-$name
  "$LAYER" "$@" >"$out.stdout" 2>"$out.stderr" &
  PIDS+=($!)
  local deadline=$((SECONDS + 5))
  while ! grep -q '^listening on' "$out.stdout" 2>/dev/null; do
    kill -0 "${PIDS[-1]}" 2>/dev/null ||
      die "$name exited: $(cat "$out.stderr")"
    [ $SECONDS -lt $deadline ] || die "$name did not listen within 5 s"
    sleep 0.05
  done
  PORT=$(awk '/^listening on/ {print $3; exit}' "$out.stdout")
  [ -n "$PORT" ] || die "$name: no port in $(cat "$out.stdout")"
}
