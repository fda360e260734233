#!/usr/bin/env bash
# sluice vs the gRPC C++ reference (issue 6 §3), side by side in one run:
#
#  (a) servers: the same load generator against build/bench/echo_server
#      (sluice) and build/bench/cpp/echo_server (gRPC C++ callback API):
#      h2load, and build/tools/sluice-bench when it exists;
#  (b) clients: build/bench/echo_client (sluice) and
#      build/bench/cpp/echo_client (gRPC C++ callback API) against the same
#      server, sluice's echo_server;
#
# each for 64 B and 4 KB payloads (bench.EchoMsg), 1 and 8 connections,
# closed loop (64 calls outstanding in total), then open loop at 50 % of the
# max that the closed loop measured for that server (a) or client (b), and
# open loop with both sides at the same offered rate (50 % of the slower
# one's max), so their latencies compare under equal load.
# Open loop in (a) needs sluice-bench --rate (h2load cannot keep a schedule
# without coordinated omission); in (b) the clients' own --rate.
#
#   bench/run_compare.sh [--build DIR] [--duration S] [--warmup S]
#                        [--concurrency N] [--out FILE] [--no-pin] [--no-large]
#
# (e) at the end: bench/run_large.sh (large messages in all four pairings,
# TLS, bulk streaming, server memory per connection; ~15 min more,
# --no-large skips it).
#
# Defaults: build/, 5 s per cell (+0.5 s warm-up), 64 outstanding,
# docs/results/compare-<date>.md. 80 cells: ~8 min at 5 s, ~4.5 min at
# 3 s. Then (c) bidi ping-pong (sluice-bench --bidi) and (d) TLS (h2load
# over https, servers restarted with a test certificate) against both
# servers, closed loop. Progress on stderr; the markdown tables (ratios are sluice /
# gRPC) on stdout and in the out file.
#
# Pinning: with taskset and at least 2 CPUs, every server runs on CPU 0
# and every load generator / client on CPU 1, so the two sides never
# compete for a core (the machine this was written for has 2). Servers:
# sluice with --threads 1 (one loop for its one core); gRPC C++ with
# --threads 1 as a hint (its callback API runs on gRPC's own threads, all
# on the one pinned core).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=build
dur=5
warm=0.5
conc=64
out=
pin=1
large=1
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift 2 ;;
  --duration) dur=$2; shift 2 ;;
  --warmup) warm=$2; shift 2 ;;
  --concurrency) conc=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --no-pin) pin=0; shift ;;
  --no-large) large=0; shift ;;
  -h | --help) sed -n '2,37p' "$0"; exit 0 ;;
  *) echo "run_compare: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $build in /*) ;; *) build=$root/$build ;; esac
[ -n "$out" ] || out=$root/docs/results/compare-$(date +%F).md

s_server=$build/bench/echo_server
g_server=$build/bench/cpp/echo_server
s_client=$build/bench/echo_client
g_client=$build/bench/cpp/echo_client
sbench=$build/tools/sluice-bench
for f in "$s_server" "$s_client"; do
  [ -x "$f" ] || { echo "run_compare: no $f (build first: make build)" >&2; exit 2; }
done
have_grpc=1
for f in "$g_server" "$g_client"; do
  [ -x "$f" ] || have_grpc=0
done
[ $have_grpc = 1 ] || {
  echo "run_compare: no gRPC C++ programs in $build/bench/cpp (needs libgrpc++-dev protobuf-compiler-grpc: scripts/install-bench-deps.sh, then rebuild)" >&2
  exit 2
}
notes=()
have_h2load=1
command -v h2load >/dev/null || { have_h2load=0; notes+=("h2load missing (nghttp2-client): its rows were skipped."); }
have_sbench=0
if [ -x "$sbench" ] && "$sbench" --help 2>&1 | grep -q -- '--rate'; then
  have_sbench=1
else
  notes+=("build/tools/sluice-bench missing: its rows, and the open-loop server comparison, were skipped.")
fi

srv_pin=()
gen_pin=()
if [ $pin = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  srv_pin=(taskset -c 0)
  gen_pin=(taskset -c 1)
  pin_note="servers pinned to CPU 0, load generators and clients to CPU 1 (taskset)"
else
  pin_note="no pinning (taskset missing, fewer than 2 CPUs, or --no-pin): servers and load generators share the CPUs"
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
log() { echo "run_compare: $*" >&2; }

# Request bodies for h2load: the 5-byte gRPC prefix + EchoMsg{payload}.
for size in 64 4096; do
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

# start_server NAME BINARY -> sets port_NAME
start_server() {
  local name=$1 bin=$2
  shift 2
  "${srv_pin[@]}" "$bin" --port 0 --threads 1 "$@" >"$tmp/$name.port" 2>"$tmp/$name.log" &
  pids+=($!)
  local i=0
  until grep -q listening "$tmp/$name.port" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 200 ] && { log "$name server did not start"; cat "$tmp/$name.log" >&2; exit 1; }
    sleep 0.05
  done
  eval "port_$name=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$tmp/$name.port")"
  eval "pid_$name=$!"
}

# Every measurement prints one line: "calls_per_s p50_us p99_us p999_us errors"
# (a dash for what is unknown).

# json_pick FILE KIND: the line above from a result in JSON.
json_pick() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
text = open(sys.argv[1]).read().strip().splitlines()
d = json.loads(text[-1]) if text else {}
if sys.argv[2] == "sbench":
    r = d.get("result", {})
    lat = r.get("latency_us", {})
    bad = r.get("errors", 0) + r.get("unfinished", 0) + r.get("start_failed", 0) + r.get("dropped_locally", 0)
    print("%.0f %.0f %.0f %.0f %d" % (r.get("throughput", 0), lat.get("p50", 0), lat.get("p99", 0), lat.get("p999", 0), bad))
else:
    print("%.0f %.0f %.0f %.0f %d" % (d.get("calls_per_s", 0), d.get("p50_us", 0), d.get("p99_us", 0), d.get("p999_us", 0), d.get("errors", 0) + d.get("missed", 0)))
EOF
}

# h2load PORT SIZE CONNS [SCHEME]: closed loop, conc streams in total
# (SCHEME https: over TLS, no certificate check).
run_h2load() {
  local port=$1 size=$2 c=$3 scheme=${4:-http}
  local m=$(((conc + c - 1) / c))
  "${gen_pin[@]}" h2load -D "$(ms "$dur")ms" --warm-up-time="$(ms "$warm")ms" \
    -c "$c" -m "$m" -t 1 -H "content-type: application/grpc" -H "te: trailers" \
    -d "$tmp/req$size.bin" --log-file="$tmp/h2.log" \
    "$scheme://127.0.0.1:$port/bench.Echo/Unary" >"$tmp/h2.out" 2>&1 || {
    cat "$tmp/h2.out" >&2
    echo "0 - - - 1"
    return
  }
  local rps failed
  rps=$(sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$tmp/h2.out")
  failed=$(sed -n 's/.* \([0-9]*\) failed, \([0-9]*\) errored.*/\1 \2/p' "$tmp/h2.out" | awk '{print $1 + $2}')
  cut -f3 "$tmp/h2.log" | sort -n | awk -v rps="$rps" -v bad="${failed:-0}" '
    function at(q,  i) { i = int(NR * q); if (i < 1) i = 1; return a[i] }
    { a[NR] = $1 }
    END {
      if (NR == 0) { printf "%.0f - - - %d\n", rps, bad; exit }
      printf "%.0f %.0f %.0f %.0f %d\n", rps, at(0.5), at(0.99), at(0.999), bad
    }'
}

# sbench PORT SIZE CONNS [RATE]
run_sbench() {
  local port=$1 size=$2 c=$3 rate=${4:-}
  local load=(--concurrency "$conc")
  [ -n "$rate" ] && load=(--rate "$rate" --max-outstanding 10000)
  "${gen_pin[@]}" "$sbench" --target "127.0.0.1:$port" --method /bench.Echo/Unary \
    --size "$size" "${load[@]}" --connections "$c" --duration "$dur" \
    --warmup "$warm" --lb rr --json --quiet >"$tmp/sb.json" 2>"$tmp/sb.err" || true
  if [ -s "$tmp/sb.json" ]; then json_pick "$tmp/sb.json" sbench; else cat "$tmp/sb.err" >&2; echo "0 - - - 1"; fi
}

# sbench_bidi PORT SIZE CONNS: conc ping-pong streams on /bench.Echo/Bidi.
run_sbench_bidi() {
  local port=$1 size=$2 c=$3
  "${gen_pin[@]}" "$sbench" --target "127.0.0.1:$port" --bidi \
    --size "$size" --concurrency "$conc" --connections "$c" --duration "$dur" \
    --warmup "$warm" --lb rr --json --quiet >"$tmp/sb.json" 2>"$tmp/sb.err" || true
  if [ -s "$tmp/sb.json" ]; then json_pick "$tmp/sb.json" sbench; else cat "$tmp/sb.err" >&2; echo "0 - - - 1"; fi
}

# client BINARY PORT SIZE CONNS [RATE]
run_client() {
  local bin=$1 port=$2 size=$3 c=$4 rate=${5:-}
  local load=(--concurrency "$conc")
  [ -n "$rate" ] && load=(--rate "$rate")
  # `times` in the subshell: the client's user and system CPU time.
  (
    "${gen_pin[@]}" "$bin" --target "127.0.0.1:$port" --size "$size" "${load[@]}" \
      --connections "$c" --duration "$dur" --warmup "$warm" >"$tmp/cl.json" 2>"$tmp/cl.err" || true
    times >"$tmp/times"
  )
  local cpu
  cpu=$(sed -n 2p "$tmp/times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.3f", t }')
  if [ -s "$tmp/cl.json" ]; then echo "$(json_pick "$tmp/cl.json" client) $cpu"; else cat "$tmp/cl.err" >&2; echo "0 - - - 1 $cpu"; fi
}

ms() { awk -v s="$1" 'BEGIN { printf "%d", s * 1000 }'; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# per_call CPU_SECONDS CALLS_PER_S: CPU us per call over warm-up + duration.
per_call() { awk -v c="$1" -v r="$2" -v t="$(awk -v d="$dur" -v w="$warm" 'BEGIN{print d + w}')" \
  'BEGIN { if (r > 0 && c != "") printf "%.1f", c * 1e6 / (r * t); else print "-" }'; }
hz=$(getconf CLK_TCK)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "-") printf "%.2f", a / b; else print "-" }'; }
half() { awk -v a="$1" 'BEGIN { printf "%d", a / 2 }'; }
f() { echo "$1" | cut -d' ' -f"$2"; }

# open_tables PART TITLE HOW MAXS MAXG: the open-loop tables of part a
# (servers, sluice-bench) or b (clients), from the closed-loop maxima in
# the associative arrays named MAXS and MAXG: each side at 50 % of its own
# max, then both at the same offered rate (50 % of the slower side's max).
open_tables() {
  local part=$1 title=$2 how=$3
  local -n mxs=$4 mxg=$5
  local mode size c rs rg s g
  for mode in own same; do
    {
      echo
      if [ $mode = own ]; then
        echo "### ($part) $title at 50 % of their own max (open loop, $how)"
      else
        echo "### ($part) $title at the same offered rate: 50 % of the slower one's max (open loop, $how)"
      fi
      echo
      echo "| size | conns | sluice rate (done/s) | sluice p50 / p99 / p99.9 | gRPC rate (done/s) | gRPC p50 / p99 / p99.9 | p99 ratio | err s/g |"
      echo "|---|---|---|---|---|---|---|---|"
    } >>"$res"
    for size in 64 4096; do
      for c in 1 8; do
        rs=$(half "${mxs[$size.$c]}")
        rg=$(half "${mxg[$size.$c]}")
        if [ $mode = same ]; then
          [ "$rs" -lt "$rg" ] && rg=$rs || rs=$rg
        fi
        if [ "$rs" -lt 1 ] || [ "$rg" -lt 1 ]; then
          echo "| $size | $c | - | - | - | - | - | no closed-loop max |" >>"$res"
          continue
        fi
        log "($part) open loop ($mode rate), $size B, $c conn: sluice at $rs/s"
        if [ $part = a ]; then s=$(run_sbench "$port_sluice" $size $c "$rs"); else s=$(run_client "$s_client" "$port_sluice" $size $c "$rs"); fi
        log "    $s"
        log "($part) open loop ($mode rate), $size B, $c conn: gRPC at $rg/s"
        if [ $part = a ]; then g=$(run_sbench "$port_grpc" $size $c "$rg"); else g=$(run_client "$g_client" "$port_sluice" $size $c "$rg"); fi
        log "    $g"
        echo "| $size | $c | $rs ($(f "$s" 1)) | $(f "$s" 2) / $(f "$s" 3) / $(f "$s" 4) | $rg ($(f "$g" 1)) | $(f "$g" 2) / $(f "$g" 3) / $(f "$g" 4) | $(ratio "$(f "$s" 3)" "$(f "$g" 3)") | $(f "$s" 5)/$(f "$g" 5) |" >>"$res"
      done
    done
  done
}

start_server sluice "$s_server"
start_server grpc "$g_server"
log "sluice echo_server on $port_sluice, gRPC C++ echo_server on $port_grpc; $pin_note"
log "each cell ${dur} s measured after ${warm} s warm-up"

res=$tmp/results.md
# What was measured: the build's source tree (CMakeCache.txt) and its HEAD,
# which need not be the tree this script is in.
build_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
build_commit=unknown
if [ -n "$build_src" ]; then
  build_commit=$(git -C "$build_src" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$build_src" diff --quiet HEAD -- 2>/dev/null || build_commit="$build_commit (with local changes)"
else
  build_src="?"
fi
{
  echo "## sluice vs gRPC C++: $(date +%F)"
  echo
  echo "Command: \`bench/run_compare.sh --build $build --duration $dur --warmup $warm --concurrency $conc\`"
  echo "(script at commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown);"
  echo "programs measured: $build, built from $build_src at commit $build_commit)."
  echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), $(uname -sr);"
  echo "gRPC C++ $(pkg-config --modversion grpc++ 2>/dev/null || echo '?'), $(h2load --version 2>/dev/null | head -1 || echo 'no h2load');"
  echo "$pin_note. Closed loop: $conc calls outstanding in total over the"
  echo "connections; open loop: 50 % of the closed-loop max of that server"
  echo "(or client), or the same rate for both, latency from each call's"
  echo "intended start. Latency in us."
  echo "Ratios are sluice / gRPC (throughput: higher is better for sluice;"
  echo "p99: lower is better for sluice). err counts failed, unfinished or"
  echo "missed calls. CPU us/call: the server's (a) or the client's (b) user +"
  echo "system CPU time over the cell (warm-up included) per completed call:"
  echo "when the load generator, not the server, limits the rate (the server"
  echo "core is not saturated), this is the fairer cost comparison."
  echo "In the open-loop tables \"done/s\" is the rate of calls"
  echo "completed in the window: below the offered rate, the side could not"
  echo "keep up and its latencies are queueing (overload), not service time."
  echo "Load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (anything well above"
  echo "1 means other work shared the CPUs: treat the numbers as noisy)."
} >"$res"

# ---- (a) servers
declare -A max_s max_g agree
{
  echo
  echo "### (a) Servers: the same load generator, sluice server vs gRPC C++ server (closed loop)"
  echo
  echo "| generator | size | conns | sluice calls/s | gRPC calls/s | ratio | server CPU us/call s / g | sluice p50 / p99 / p99.9 | gRPC p50 / p99 / p99.9 | err s/g |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} >>"$res"
gens=()
[ $have_h2load = 1 ] && gens+=(h2load)
[ $have_sbench = 1 ] && gens+=(sluice-bench)
for gen in "${gens[@]}"; do
  for size in 64 4096; do
    for c in 1 8; do
      log "(a) $gen, $size B, $c conn: sluice server"
      t0=$(ticks "$pid_sluice")
      if [ "$gen" = h2load ]; then s=$(run_h2load "$port_sluice" $size $c); else s=$(run_sbench "$port_sluice" $size $c); fi
      cs=$(per_call "$(awk -v a="$t0" -v b="$(ticks "$pid_sluice")" -v hz="$hz" 'BEGIN{print (b - a) / hz}')" "$(f "$s" 1)")
      log "    $s, server CPU $cs us/call"
      log "(a) $gen, $size B, $c conn: gRPC server"
      t0=$(ticks "$pid_grpc")
      if [ "$gen" = h2load ]; then g=$(run_h2load "$port_grpc" $size $c); else g=$(run_sbench "$port_grpc" $size $c); fi
      cg=$(per_call "$(awk -v a="$t0" -v b="$(ticks "$pid_grpc")" -v hz="$hz" 'BEGIN{print (b - a) / hz}')" "$(f "$g" 1)")
      log "    $g, server CPU $cg us/call"
      if [ "$gen" = sluice-bench ]; then max_s[$size.$c]=$(f "$s" 1); max_g[$size.$c]=$(f "$g" 1); fi
      agree[$gen.sluice.$size.$c]=$(f "$s" 1)
      agree[$gen.grpc.$size.$c]=$(f "$g" 1)
      echo "| $gen | $size | $c | $(f "$s" 1) | $(f "$g" 1) | $(ratio "$(f "$s" 1)" "$(f "$g" 1)") | $cs / $cg | $(f "$s" 2) / $(f "$s" 3) / $(f "$s" 4) | $(f "$g" 2) / $(f "$g" 3) / $(f "$g" 4) | $(f "$s" 5)/$(f "$g" 5) |" >>"$res"
    done
  done
done

# The two load generators against the same server, from the rows above.
if [ $have_h2load = 1 ] && [ $have_sbench = 1 ]; then
  {
    echo
    echo "### (a') The load generators agree: sluice-bench vs h2load against the same server (closed loop, from (a))"
    echo
    echo "| server | size | conns | h2load calls/s | sluice-bench calls/s | sluice-bench / h2load |"
    echo "|---|---|---|---|---|---|"
    for srv in sluice grpc; do
      for size in 64 4096; do
        for c in 1 8; do
          h=${agree[h2load.$srv.$size.$c]}
          b=${agree[sluice-bench.$srv.$size.$c]}
          echo "| $srv | $size | $c | $h | $b | $(ratio "$b" "$h") |"
        done
      done
    done
  } >>"$res"
fi

if [ $have_sbench = 1 ]; then
  open_tables a "Servers" "sluice-bench --rate" max_s max_g
else
  printf '\n### (a) Servers, open loop\n\nSkipped: needs build/tools/sluice-bench --rate.\n' >>"$res"
fi

# ---- (b) clients, against sluice's echo_server
declare -A cmax_s cmax_g
{
  echo
  echo "### (b) Clients: sluice client vs gRPC C++ client, both against the sluice echo_server (closed loop)"
  echo
  echo "| size | conns | sluice client calls/s | gRPC client calls/s | ratio | client CPU us/call s / g | sluice p50 / p99 / p99.9 | gRPC p50 / p99 / p99.9 | err s/g |"
  echo "|---|---|---|---|---|---|---|---|---|"
} >>"$res"
for size in 64 4096; do
  for c in 1 8; do
    log "(b) $size B, $c conn: sluice client"
    s=$(run_client "$s_client" "$port_sluice" $size $c)
    log "    $s"
    log "(b) $size B, $c conn: gRPC client"
    g=$(run_client "$g_client" "$port_sluice" $size $c)
    log "    $g"
    cmax_s[$size.$c]=$(f "$s" 1)
    cmax_g[$size.$c]=$(f "$g" 1)
    echo "| $size | $c | $(f "$s" 1) | $(f "$g" 1) | $(ratio "$(f "$s" 1)" "$(f "$g" 1)") | $(per_call "$(f "$s" 6)" "$(f "$s" 1)") / $(per_call "$(f "$g" 6)" "$(f "$g" 1)") | $(f "$s" 2) / $(f "$s" 3) / $(f "$s" 4) | $(f "$g" 2) / $(f "$g" 3) / $(f "$g" 4) | $(f "$s" 5)/$(f "$g" 5) |" >>"$res"
  done
done
open_tables b "Clients" "the clients' --rate, against the sluice echo_server" cmax_s cmax_g
# ---- (c) bidi ping-pong and (d) TLS: servers, closed loop
if [ $have_sbench = 1 ]; then
  {
    echo
    echo "### (c) Bidi ping-pong: sluice-bench --bidi ($conc streams, one message in flight each) against each server"
    echo
    echo "| size | conns | sluice msgs/s | gRPC msgs/s | ratio | server CPU us/msg s / g | sluice p50 / p99 / p99.9 | gRPC p50 / p99 / p99.9 | err s/g |"
    echo "|---|---|---|---|---|---|---|---|---|"
  } >>"$res"
  for size in 64 4096; do
    for c in 1 8; do
      log "(c) bidi, $size B, $c conn: sluice server"
      t0=$(ticks "$pid_sluice")
      s=$(run_sbench_bidi "$port_sluice" $size $c)
      cs=$(per_call "$(awk -v a="$t0" -v b="$(ticks "$pid_sluice")" -v hz="$hz" 'BEGIN{print (b - a) / hz}')" "$(f "$s" 1)")
      log "    $s, server CPU $cs us/msg"
      log "(c) bidi, $size B, $c conn: gRPC server"
      t0=$(ticks "$pid_grpc")
      g=$(run_sbench_bidi "$port_grpc" $size $c)
      cg=$(per_call "$(awk -v a="$t0" -v b="$(ticks "$pid_grpc")" -v hz="$hz" 'BEGIN{print (b - a) / hz}')" "$(f "$g" 1)")
      log "    $g, server CPU $cg us/msg"
      echo "| $size | $c | $(f "$s" 1) | $(f "$g" 1) | $(ratio "$(f "$s" 1)" "$(f "$g" 1)") | $cs / $cg | $(f "$s" 2) / $(f "$s" 3) / $(f "$s" 4) | $(f "$g" 2) / $(f "$g" 3) / $(f "$g" 4) | $(f "$s" 5)/$(f "$g" 5) |" >>"$res"
    done
  done
fi
if [ $have_h2load = 1 ] && command -v openssl >/dev/null; then
  "$root/scripts/gen-test-certs.sh" "$tmp/certs" >/dev/null 2>&1
  # The plaintext servers are stopped first: one server per core at a time.
  kill "$pid_sluice" "$pid_grpc" 2>/dev/null || true
  wait "$pid_sluice" "$pid_grpc" 2>/dev/null || true
  start_server sluice_tls "$s_server" --tls_cert "$tmp/certs/server.pem" --tls_key "$tmp/certs/server.key"
  start_server grpc_tls "$g_server" --tls_cert "$tmp/certs/server.pem" --tls_key "$tmp/certs/server.key"
  {
    echo
    echo "### (d) TLS: h2load over TLS 1.3 (one handshake per connection) against each server, closed loop"
    echo
    echo "| size | conns | sluice calls/s | gRPC calls/s | ratio | server CPU us/call s / g | sluice p50 / p99 / p99.9 | gRPC p50 / p99 / p99.9 | err s/g |"
    echo "|---|---|---|---|---|---|---|---|---|"
  } >>"$res"
  for size in 64 4096; do
    for c in 1 8; do
      log "(d) TLS, $size B, $c conn: sluice server"
      t0=$(ticks "$pid_sluice_tls")
      s=$(run_h2load "$port_sluice_tls" $size $c https)
      cs=$(per_call "$(awk -v a="$t0" -v b="$(ticks "$pid_sluice_tls")" -v hz="$hz" 'BEGIN{print (b - a) / hz}')" "$(f "$s" 1)")
      log "    $s, server CPU $cs us/call"
      log "(d) TLS, $size B, $c conn: gRPC server"
      t0=$(ticks "$pid_grpc_tls")
      g=$(run_h2load "$port_grpc_tls" $size $c https)
      cg=$(per_call "$(awk -v a="$t0" -v b="$(ticks "$pid_grpc_tls")" -v hz="$hz" 'BEGIN{print (b - a) / hz}')" "$(f "$g" 1)")
      log "    $g, server CPU $cg us/call"
      echo "| $size | $c | $(f "$s" 1) | $(f "$g" 1) | $(ratio "$(f "$s" 1)" "$(f "$g" 1)") | $cs / $cg | $(f "$s" 2) / $(f "$s" 3) / $(f "$s" 4) | $(f "$g" 2) / $(f "$g" 3) / $(f "$g" 4) | $(f "$s" 5)/$(f "$g" 5) |" >>"$res"
    done
  done
fi

# (e) large messages (64 KiB .. 4 MiB) in all four pairings, and server
# memory per connection: bench/run_large.sh, its tables appended.
if [ "$large" = 1 ]; then
  log "(e) large messages and memory per connection (bench/run_large.sh)"
  pin_flag=()
  [ "$pin" = 1 ] || pin_flag=(--no-pin)
  if "$root/bench/run_large.sh" --build "$build" "${pin_flag[@]}" \
    --out "$tmp/large.md" >/dev/null; then
    { echo; cat "$tmp/large.md"; } >>"$res"
  else
    notes+=("bench/run_large.sh failed: its rows are missing.")
  fi
fi

notes+=("Load average after the run: $(cut -d' ' -f1-3 /proc/loadavg) (the run itself adds about 2).")
if [ ${#notes[@]} -gt 0 ]; then
  {
    echo
    for n in "${notes[@]}"; do echo "Note: $n"; done
  } >>"$res"
fi
# Server memory at the end (the gRPC server's RSS grows under load).
for p in "${pids[@]}"; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$p/status 2>/dev/null || echo '?')
  log "server pid $p: VmRSS $rss kB"
done

mkdir -p "$(dirname "$out")"
cp "$res" "$out"
cat "$res"
log "saved to $out"
