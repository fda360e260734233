#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build (make fuzz) for FUZZ_SECONDS
# each, over a working copy of its checked-in corpus, and prints per target
# the executions, exec/s, coverage (cov / ft of libFuzzer's last status
# line) and any crash file. Exits 1 when a target found something.
#
#   scripts/run-fuzz.sh [BUILD_DIR]            (default build-fuzz)
#
# Environment:
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_TARGETS  names to run, e.g. "framing grpc_headers" (default: all)
#   FUZZ_JOBS     targets run side by side (default 1)
#   FUZZ_MERGE=1  merge the new inputs that add coverage back into
#                 tests/fuzz/corpus/<name> (libFuzzer -merge=1: only those)
#   FUZZ_ARGS     extra libFuzzer flags, e.g. "-max_len=65536"
#
# The working corpus (BUILD_DIR/fuzz-run/<name>/corpus) is kept between
# runs, so a second run goes on from where the first stopped; the checked-in
# corpus is only read, unless FUZZ_MERGE=1. Crash files land in
# BUILD_DIR/fuzz-run/<name>/artifacts (docs/fuzzing.md: reproducing one).
set -euo pipefail

build=${1:-build-fuzz}
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/tests/fuzz
bin=$build/tests/fuzz
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
run=$build/fuzz-run

if [ -n "${FUZZ_TARGETS:-}" ]; then
  targets=$FUZZ_TARGETS
else
  targets=$(cd "$src" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
fi

# One target: fuzz, then a one-line summary in $run/<name>/summary.
fuzz_one() {
  # A subshell of its own: a grep that finds nothing in a crashed run's log
  # must not end it before the summary is written.
  set +e +o pipefail
  local name=$1 exe=$bin/fuzz_$1 dir=$run/$1
  mkdir -p "$dir/corpus" "$dir/artifacts"
  rm -f "$dir"/artifacts/* "$dir/summary"
  [ -x "$exe" ] || { echo "$name: $exe not built" >"$dir/summary"; return; }
  # The checked-in seeds, without overwriting what earlier runs found.
  cp -n "$src/corpus/$name"/* "$dir/corpus/" 2>/dev/null || true
  local dict=()
  [ -f "$src/$name.dict" ] && dict=(-dict="$src/$name.dict")
  # -timeout: a single input slower than 10 s is a finding (a hang);
  # -rss_limit_mb: so is a run that needs more than 2 GiB.
  # shellcheck disable=SC2086
  "$exe" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$dir/artifacts/" "${dict[@]}" \
    ${FUZZ_ARGS:-} "$dir/corpus" >"$dir/log" 2>&1 || true
  local execs rate cov ft crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  cov=$(grep -o ' cov: [0-9]*' "$dir/log" | tail -1 | awk '{print $2}')
  ft=$(grep -o ' ft: [0-9]*' "$dir/log" | tail -1 | awk '{print $2}')
  # slow-unit-* files only note the slowest input: not a finding. (A
  # process paused from outside, SIGSTOP on a shared machine, leaves one, or
  # a timeout-*: replay the file to tell a real hang from that.)
  crashes=$(ls "$dir/artifacts" 2>/dev/null | grep -v '^slow-unit-' |
    sed "s|^|$dir/artifacts/|" | tr '\n' ' ')
  printf '%-16s execs %-10s exec/s %-7s cov %-6s ft %-6s %s\n' "$name" \
    "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "${crashes:+FOUND: $crashes(log: $dir/log)}" >"$dir/summary"
  if [ "${FUZZ_MERGE:-0}" = 1 ] && [ -z "$crashes" ]; then
    "$exe" -merge=1 "$src/corpus/$name" "$dir/corpus" >"$dir/merge.log" 2>&1 ||
      echo "$name: merge failed ($dir/merge.log)" >&2
  fi
}

echo "fuzzing $(echo $targets | wc -w) targets, ${seconds}s each, $jobs at a time"
running=0
for t in $targets; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

found=0
for t in $targets; do
  cat "$run/$t/summary"
  grep -q 'FOUND\|not built' "$run/$t/summary" && found=1
done
if [ "$found" = 1 ]; then
  echo "fuzz: findings above; reproduce with: $bin/fuzz_<name> <crash file>" >&2
  exit 1
fi
