#!/usr/bin/env bash
# Per-call costs that do not depend on the machine's load: user-space
# instructions per call (callgrind) and heap allocations per call (memcheck)
# of the sluice echo server (DIR/bench/echo_server) and the sluice echo
# client (DIR/bench/echo_client), unary bench.Echo/Unary, 64 B and 4 KB
# payloads, 1 and 8 calls outstanding on one connection.
#
#   bench/percall.sh [--build DIR] [--calls N] [--warmup-calls W]
#                    [--client-warmup S] [--sizes "64 4096"]
#                    [--streams "1 8"] [--reps R] [--timeout S]
#
# Baseline command (docs/results/percall-baseline-82ccfa3.md):
#   bench/percall.sh --build /work/wt-base/build
#
# Defaults: build/ (relative to the current directory, else to the repo),
# N = 20000, W = 2000, S = 1, 2 repetitions of every cell, 300 s at most for
# any one step (server start, load, exit). Builds nothing. Progress on
# stderr, markdown tables on stdout. 6 to 10 minutes with the defaults.
#
# How: every number is the difference of two runs of the measured program
# divided by the difference of their call counts, so start-up, connection
# set-up and exit cancel out, and what is left is the cost of a warm call.
#  - server: `echo_server --threads 1` under valgrind, loaded by h2load
#    (one connection, M streams, the raw gRPC request body as in
#    bench/run_compare.sh), once with -n W and once with -n W+N calls, then
#    SIGTERM; h2load must report every call succeeded.
#  - client: `echo_client --warmup 0 --concurrency M --connections 1` under
#    valgrind against a native echo_server (--threads 1). echo_client runs
#    for a time, not a number of calls, so the call count is what it reports
#    (its "calls" plus the M calls still outstanding at the end, the same in
#    both runs): a first run of S seconds (again for 2S, then 4S, while it
#    completed fewer than 100 calls: start-up under valgrind on a loaded
#    machine can take a whole second; noted under the table), then one long
#    enough for about N more calls at the rate the first one reached (at
#    most 120 s; more calls than N under memcheck, whose first second is
#    slow to start). Its
#    instructions are counted only inside uv_run (--toggle-collect=uv_run),
#    which leaves out the benchmark's own sort of the latencies at exit
#    (n log n, so it would not cancel).
#  - instructions: valgrind --tool=callgrind, the total Ir of all threads
#    (server) or of uv_run (client), and the same split by object with
#    callgrind_annotate (self cost): the executable (echo_server or
#    echo_client: sluice is linked into it statically, with the generated
#    code and the bench program), libnghttp2, libc, libprotobuf-c, libuv.
#  - allocations: valgrind --tool=memcheck, "total heap usage: A allocs,
#    F frees, B bytes allocated" at exit: malloc, calloc, realloc (one alloc
#    and one free each), aligned and C++ allocations, as valgrind counts
#    them. Allocations served from sluice's own caches (core/objcache.c,
#    transport/h2mem.c) are not counted: they never reach malloc.
# Repeatability (docs/results/percall-baseline-82ccfa3.md): the server's
# instructions repeat to within ~0.2 % in one invocation and ~0.7 % across
# invocations on a loaded machine (h2load sends the same bytes every call),
# its mallocs exactly. The client's instructions move by up to ~5 % between
# invocations (~1-3 % between the two repetitions of one): echo_client sets
# a 10 s deadline, and sluice sends the time left, in microseconds, as
# grpc-timeout on every call, indexed by HPACK, so the header values, and
# nghttp2's HPACK work, depend on timing (under valgrind the client is slow
# enough for them to differ from call to call); probably also how replies
# batch per loop turn. Most of that is in nghttp2 and libc (memcmp); the
# executable's share moves less (up to ~3 %). Compare client cells only
# with differences well above their spread, or over several invocations.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=build
calls=20000
warm=2000
cwarm=1
sizes="64 4096"
streams="1 8"
reps=2
tmo=300
max_dur=120
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift 2 ;;
  --calls) calls=$2; shift 2 ;;
  --warmup-calls) warm=$2; shift 2 ;;
  --client-warmup) cwarm=$2; shift 2 ;;
  --sizes) sizes=$2; shift 2 ;;
  --streams) streams=$2; shift 2 ;;
  --reps) reps=$2; shift 2 ;;
  --timeout) tmo=$2; shift 2 ;;
  -h | --help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) echo "percall: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $build in
/*) ;;
*) if [ -d "$build" ]; then build=$(cd "$build" && pwd); else build=$root/$build; fi ;;
esac
server=$build/bench/echo_server
client=$build/bench/echo_client
for f in "$server" "$client"; do
  [ -x "$f" ] || { echo "percall: no $f (build first: cmake --build $build --target echo_server echo_client)" >&2; exit 2; }
done
for t in valgrind h2load python3 timeout; do
  command -v $t >/dev/null || { echo "percall: $t missing (scripts/install-bench-deps.sh installs valgrind and nghttp2-client)" >&2; exit 2; }
done

# valgrind must not look for debug info on the network.
unset DEBUGINFOD_URLS
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
log() { echo "percall: $*" >&2; }
fail() { log "$*"; exit 1; }

# Request bodies for h2load: the 5-byte gRPC prefix + EchoMsg{payload}.
for size in $sizes; do
  python3 - "$size" >"$tmp/req$size.bin" <<'EOF'
import sys
n = int(sys.argv[1])
v, l = b"", n
while True:
    b, l = l & 0x7F, l >> 7
    v += bytes([b | 0x80 if l else b])
    if not l:
        break
msg = b"\x0a" + v + b"x" * n
sys.stdout.buffer.write(b"\0" + len(msg).to_bytes(4, "big") + msg)
EOF
done

# valgrind_args TOOL OUT: the options for one measured run; its report in
# OUT.log, callgrind's profile in OUT.cg.
valgrind_args() {
  if [ "$1" = callgrind ]; then
    echo "--tool=callgrind --callgrind-out-file=$2.cg --log-file=$2.log"
  else
    echo "--tool=memcheck --leak-check=no --log-file=$2.log"
  fi
}

# result TOOL OUT BINARY: of a finished run, callgrind: "total exe nghttp2
# libc protobuf-c libuv rest", the instructions in all and in each object
# (self cost; exe is BINARY, where sluice is linked statically); memcheck:
# "allocs frees bytes".
result() {
  if [ "$1" = callgrind ]; then
    local total
    total=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$2.cg" | head -1)
    [ -n "$total" ] || return 0
    echo "$total $(callgrind_annotate --inclusive=no --threshold=100 --auto=no "$2.cg" 2>/dev/null |
      awk -v exe="$3" '
        /^ *[0-9,]+ / && /\[/ {
          v = $1; gsub(",", "", v); o = $0; sub(/.*\[/, "", o); sub(/\].*/, "", o)
          if (o == exe) k = 1; else if (o ~ /\/libnghttp2\./) k = 2; else if (o ~ /\/libc\.so/) k = 3
          else if (o ~ /\/libprotobuf-c\./) k = 4; else if (o ~ /\/libuv\./) k = 5; else k = 6
          c[k] += v
        }
        END { printf "%.0f %.0f %.0f %.0f %.0f %.0f\n", c[1], c[2], c[3], c[4], c[5], c[6] }')"
  else
    sed -n 's/.*total heap usage: \([0-9,]*\) allocs, \([0-9,]*\) frees, \([0-9,]*\) bytes allocated.*/\1 \2 \3/p' "$2.log" | tr -d , | head -1
  fi
}

# memcheck's own findings (0 is expected); noted under the table (the runs
# are in subshells: the notes go through a file).
check_errors() {
  local n
  n=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$2.log" | tr -d , | head -1)
  if [ "$1" = memcheck ] && [ -n "$n" ] && [ "$n" != 0 ]; then
    echo "memcheck reported $n errors in $3 (its log: on stderr)" >>"$tmp/notes"
    cat "$2.log" >&2
  fi
}

# wait_port FILE PID: the port a starting echo_server printed.
wait_port() {
  local i=0 limit=$((tmo * 20))
  until grep -q listening "$1" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt $limit ] && return 1
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$1"
}

# server_run TOOL SIZE STREAMS CALLS OUT: echo_server under valgrind, CALLS
# calls from h2load, then SIGTERM. Prints result().
server_run() {
  local tool=$1 size=$2 m=$3 n=$4 out=$5 vp port ok
  # shellcheck disable=SC2046
  timeout -k 5 "$tmo" valgrind $(valgrind_args "$tool" "$out") \
    "$server" --port 0 --threads 1 >"$out.port" 2>"$out.err" &
  vp=$!
  port=$(wait_port "$out.port" "$vp") || { cat "$out.err" "$out.log" >&2 2>/dev/null; fail "server under $tool did not start"; }
  timeout -k 5 "$tmo" h2load -n "$n" -c 1 -m "$m" -t 1 \
    -H "content-type: application/grpc" -H "te: trailers" \
    -d "$tmp/req$size.bin" "http://127.0.0.1:$port/bench.Echo/Unary" >"$out.h2" 2>&1 || true
  kill -TERM "$vp" 2>/dev/null || true
  wait "$vp" || { cat "$out.err" >&2; fail "server under $tool exited with an error (or timed out)"; }
  ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' "$out.h2")
  if ! grep -q "status codes: $n 2xx" "$out.h2" || [ "$ok" != "$n" ]; then
    cat "$out.h2" >&2
    fail "h2load: not all $n calls succeeded"
  fi
  check_errors "$tool" "$out" "the server ($size B, $m streams)"
  result "$tool" "$out" "$server"
}

# client_run TOOL SIZE STREAMS DURATION OUT: echo_client under valgrind
# against the native server. Prints "CALLS result()".
client_run() {
  local tool=$1 size=$2 m=$3 dur=$4 out=$5 extra=() n
  [ "$tool" = callgrind ] && extra=(--toggle-collect=uv_run)
  local budget
  budget=$(awk -v d="$dur" -v t="$tmo" 'BEGIN { printf "%d", d + t }')
  local rc=0
  # shellcheck disable=SC2046
  timeout -k 5 "$budget" valgrind $(valgrind_args "$tool" "$out") "${extra[@]}" \
    "$client" --target "127.0.0.1:$native_port" --size "$size" \
    --concurrency "$m" --connections 1 --duration "$dur" --warmup 0 \
    >"$out.json" 2>"$out.err" || rc=$?
  if [ $rc != 0 ]; then
    # echo_client exits 1 when no call completed in the window: under
    # valgrind on a loaded machine, start-up can take all of a short run.
    # Prints "0" (no result) for the caller to try a longer run.
    if python3 -c 'import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
sys.exit(0 if d["calls"] == 0 and d["errors"] == 0 and d["missed"] == 0 else 1)' "$out.json" 2>/dev/null; then
      echo 0
      return 0
    fi
    cat "$out.err" "$out.json" >&2
    fail "client under $tool failed (or timed out)"
  fi
  n=$(python3 -c 'import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert d["errors"] == 0 and d["missed"] == 0, d
print(d["calls"])' "$out.json") || { cat "$out.json" >&2; fail "client: calls with errors"; }
  check_errors "$tool" "$out" "the client ($size B, $m outstanding)"
  # Every slot's last call ends after the window: M more than reported.
  echo "$((n + m)) $(result "$tool" "$out" "$client")"
}

# per DECIMALS CALLS_A CALLS_B A B: (B - A) / (CALLS_B - CALLS_A)
per() { awk -v f="%.$1f" -v na="$2" -v nb="$3" -v a="$4" -v b="$5" 'BEGIN { printf f, (b - a) / (nb - na) }'; }

# The native server the clients talk to.
"$server" --port 0 --threads 1 >"$tmp/native.port" 2>"$tmp/native.err" &
pids+=($!)
native_port=$(wait_port "$tmp/native.port" "${pids[0]}") || { cat "$tmp/native.err" >&2; fail "native echo_server did not start"; }

src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
rev=unknown
if [ -n "$src" ] && git -C "$src" rev-parse --short HEAD >/dev/null 2>&1; then
  rev=$(git -C "$src" rev-parse --short HEAD)
  git -C "$src" diff --quiet HEAD -- 2>/dev/null || rev="$rev (with uncommitted changes)"
fi
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "build $build (source ${src:-?} at $rev, ${btype:-?}); $calls calls after $warm (server) / ${cwarm} s (client) of warm-up; $reps repetitions"

declare -A ins obj alc frs byt
cells=()
for side in server client; do
  for size in $sizes; do
    for m in $streams; do
      cells+=("$side $size $m")
      for r in $(seq "$reps"); do
        for tool in callgrind memcheck; do
          key="$side.$size.$m.$tool.$r"
          o=$tmp/$side-$size-$m-$tool-$r
          if [ $side = server ]; then
            log "server, $size B, $m streams, $tool, rep $r: $warm then $((warm + calls)) calls"
            ra=$(server_run $tool "$size" "$m" "$warm" "$o-a")
            rb=$(server_run $tool "$size" "$m" "$((warm + calls))" "$o-b")
            na=$warm nb=$((warm + calls))
          else
            # The first run: S seconds; twice as long, up to 3 times, while
            # it completed fewer than 100 calls (start-up under valgrind on
            # a loaded machine can take most of a short run, and the second
            # run's length is computed from this one's rate). Either way it
            # is the difference of the two runs that counts.
            w=$cwarm
            for try in 1 2 3; do
              log "client, $size B, $m outstanding, $tool, rep $r: ${w} s"
              ra=$(client_run $tool "$size" "$m" "$w" "$o-a")
              [ "${ra%% *}" -lt 100 ] || break
              if [ "$try" = 3 ]; then
                [ "${ra%% *}" -gt 0 ] || fail "client: no call completed in the first run (three tries, the last ${w} s)"
                break
              fi
              log "    ${ra%% *} calls only: again, longer"
              w=$(awk -v w="$w" 'BEGIN { printf "%.2f", 2 * w }')
            done
            [ "$w" = "$cwarm" ] || echo "client $size B x $m, $tool, rep $r: the first run completed fewer than 100 calls in ${cwarm} s (start-up under valgrind on a loaded machine); it was run again for ${w} s" >>"$tmp/notes"
            na=${ra%% *} ra=${ra#* }
            # The second run: long enough for N more calls at the first
            # one's rate; again, longer, while it made fewer than N / 2
            # more (the rate moves with the machine's load), up to 3 times.
            dur=$(awk -v n="$calls" -v na="$na" -v w="$w" -v mx="$max_dur" \
              'BEGIN { d = w + n * w / na; if (d > mx) d = mx; printf "%.2f", d }')
            for try in 1 2 3; do
              log "    $na calls; then ${dur} s"
              rb=$(client_run $tool "$size" "$m" "$dur" "$o-b")
              nb=${rb%% *} rb=${rb#* }
              [ $((nb - na)) -lt $((calls / 2)) ] || break
              [ "$try" -lt 3 ] || fail "client: $((nb - na)) more calls in the longer run, fewer than $((calls / 2)) (three tries)"
              dur=$(awk -v n="$calls" -v na="$na" -v nb="$nb" -v d="$dur" -v w="$w" -v mx="$max_dur" \
                'BEGIN { r = (nb > na ? (nb - na) : 1) / (d - w); d = w + 1.2 * n / r; if (d > mx) d = mx; printf "%.2f", d }')
            done
          fi
          read -r -a a <<<"$ra"
          read -r -a b <<<"$rb"
          if [ ${#a[@]} -eq 0 ] || [ ${#b[@]} -eq 0 ]; then fail "no $tool result"; fi
          if [ $tool = callgrind ]; then
            if [ ${#a[@]} -ne 7 ] || [ ${#b[@]} -ne 7 ]; then fail "callgrind: no per-object counts"; fi
            ins[$key]=$(per 0 "$na" "$nb" "${a[0]}" "${b[0]}")
            for i in 1 2 3 4 5 6; do
              obj[$key.$i]=$(per 0 "$na" "$nb" "${a[$i]}" "${b[$i]}")
            done
            log "    $((nb - na)) calls: ${ins[$key]} instructions per call (executable ${obj[$key.1]}, nghttp2 ${obj[$key.2]}, libc ${obj[$key.3]}, protobuf-c ${obj[$key.4]}, libuv ${obj[$key.5]}, rest ${obj[$key.6]})"
          else
            alc[$key]=$(per 2 "$na" "$nb" "${a[0]}" "${b[0]}")
            frs[$key]=$(per 2 "$na" "$nb" "${a[1]}" "${b[1]}")
            byt[$key]=$(per 0 "$na" "$nb" "${a[2]}" "${b[2]}")
            log "    $((nb - na)) calls: ${alc[$key]} allocs, ${frs[$key]} frees, ${byt[$key]} bytes per call"
          fi
        done
      done
    done
  done
done

# join ARRAY KEY [SUB]: the repetitions' values (ARRAY[KEY.rep] or
# ARRAY[KEY.rep.SUB]), " / " between them.
join() {
  local -n arr=$1
  local s="" r
  for r in $(seq "$reps"); do s="$s${s:+ / }${arr[$2.$r${3:+.$3}]}"; done
  echo "$s"
}
# spread ARRAY KEY [SUB]: (max - min) / min of the repetitions, in per cent.
spread() {
  local -n arr=$1
  local r
  for r in $(seq "$reps"); do echo "${arr[$2.$r${3:+.$3}]}"; done |
    awk 'NR == 1 { lo = hi = $1 } { if ($1 < lo) lo = $1; if ($1 > hi) hi = $1 }
         END { if (lo > 0) printf "%.2f %%", (hi - lo) * 100 / lo; else print "-" }'
}

echo "## Per-call costs: $(date +%F)"
echo
echo "Command: \`bench/percall.sh --build $build --calls $calls --warmup-calls $warm --client-warmup $cwarm --reps $reps\`"
echo "(binaries from ${src:-?} at $rev, ${btype:-?} build)."
echo "$(valgrind --version), $(h2load --version 2>/dev/null | head -1); $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), $(uname -sr); load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "Unary bench.Echo/Unary on one connection. Server: \`echo_server --threads 1\` under valgrind, \`h2load -c 1 -m M -t 1\`"
echo "(M = outstanding), the difference of \`-n $warm\` and \`-n $((warm + calls))\`. Client: \`echo_client --concurrency M\`"
echo "under valgrind against a native echo_server, the difference of a ${cwarm} s run and a run long enough for about"
echo "$calls more calls (instructions inside uv_run only). Instructions: callgrind Ir (user space), all threads;"
echo "\"in the executable\": self cost in echo_server / echo_client, which hold sluice (linked statically), the"
echo "generated code and the small bench program. Allocations: memcheck's total heap usage (malloc, calloc, realloc, ...)."
echo "Every cell: its $reps repetitions, \" / \" between them; spread = (max - min) / min."
echo
echo "| side | size B | outstanding | instructions/call | spread | in the executable | spread | mallocs/call | bytes allocated/call |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in "${cells[@]}"; do
  read -r side size m <<<"$c"
  k=$side.$size.$m
  echo "| $side | $size | $m | $(join ins "$k.callgrind") | $(spread ins "$k.callgrind") | $(join obj "$k.callgrind" 1) | $(spread obj "$k.callgrind" 1) | $(join alc "$k.memcheck") | $(join byt "$k.memcheck") |"
done
echo
echo "Instructions per call by object (self cost), and frees per call:"
echo
echo "| side | size B | outstanding | executable (sluice) | libnghttp2 | libc | libprotobuf-c | libuv | rest (ld.so, ...) | frees/call |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in "${cells[@]}"; do
  read -r side size m <<<"$c"
  k=$side.$size.$m
  echo "| $side | $size | $m | $(join obj "$k.callgrind" 1) | $(join obj "$k.callgrind" 2) | $(join obj "$k.callgrind" 3) | $(join obj "$k.callgrind" 4) | $(join obj "$k.callgrind" 5) | $(join obj "$k.callgrind" 6) | $(join frs "$k.memcheck") |"
done
if [ -s "$tmp/notes" ]; then
  echo
  sed 's/^/Note: /' "$tmp/notes"
fi
log "done"
