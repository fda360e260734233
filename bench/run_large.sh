#!/usr/bin/env bash
# Large messages and memory per connection, sluice vs gRPC C++ side by side
# (issue 15's rows; bench/run_compare.sh runs this at its end):
#
#  (a) unary echo, 8 calls in flight on 1 connection, closed loop, for each
#      size (default 64 KiB, 256 KiB, 1 MiB, 4 MiB - 64 B: gRPC's default
#      4 MiB message limit counts the protobuf framing), in the four
#      pairings: sluice client -> sluice server, gRPC C++ -> gRPC C++, and
#      crossed (gRPC C++ client -> sluice server, sluice client -> gRPC C++
#      server). RUNS runs of each cell, interleaved (every pairing once, then
#      again), median calls/s and p50; the server's CPU per call from
#      /proc (utime + stime over the client's run). Twice: with glibc's
#      malloc as it comes, and with its trimming off for every process
#      (GLIBC_TUNABLES mmap_threshold / trim_threshold, see $untrimmed):
#      on this VM page faults are expensive, and gRPC C++, which frees each
#      message's buffers back to glibc, runs 1 MiB calls ~8x slower with the
#      defaults; the second table compares the two stacks without that.
#  (b) server memory per connection: bench/conn_memory.py against both
#      servers (idle connections; sluice also with one held call each and
#      with many calls held on one connection).
#
#   bench/run_large.sh [--build DIR] [--runs N] [--duration S]
#                      [--sizes "B B ..."] [--connections N] [--out FILE]
#                      [--no-pin]
#
# Defaults: build/, 3 runs of 3 s per cell, 1,000 connections,
# docs/results/large-<date>.md. ~8 min. Pinning as run_compare.sh: servers
# on CPU 0, clients on CPU 1. Progress on stderr; the markdown on stdout and
# in the out file.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=build
runs=3
dur=3
sizes="65536 262144 1048576 4194240"
nconn=1000
untrimmed=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864
out=
pin=1
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --duration) dur=$2; shift 2 ;;
  --sizes) sizes=$2; shift 2 ;;
  --connections) nconn=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --no-pin) pin=0; shift ;;
  -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
  *) echo "run_large: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $build in /*) ;; *) build=$root/$build ;; esac
[ -n "$out" ] || out=$root/docs/results/large-$(date +%F).md

s_server=$build/bench/echo_server
s_client=$build/bench/echo_client
g_server=$build/bench/cpp/echo_server
g_client=$build/bench/cpp/echo_client
for f in "$s_server" "$s_client" "$g_server" "$g_client"; do
  [ -x "$f" ] || { echo "run_large: no $f (scripts/install-bench-deps.sh, then make build)" >&2; exit 2; }
done
srv_cpu=() cli_cpu=()
if [ $pin = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  srv_cpu=(taskset -c 0) cli_cpu=(taskset -c 1)
fi
log() { echo "run_large: $*" >&2; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# cell TUNABLES SERVER CLIENT SIZE -> "calls/s p50_us server_us_per_call errors"
cell() {
  local port sp t0 t1 res tun=$1
  shift
  port=$(free_port)
  env ${tun:+GLIBC_TUNABLES=$tun} "${srv_cpu[@]}" "$1" --port "$port" --threads 1 >/dev/null 2>&1 &
  sp=$!
  wait_port "$port" || { kill $sp; echo "0 0 0 1"; return; }
  t0=$(awk '{print $14+$15}' /proc/$sp/stat)
  res=$(env ${tun:+GLIBC_TUNABLES=$tun} timeout $((dur + 30)) "${cli_cpu[@]}" "$2" --target 127.0.0.1:$port \
    --concurrency 8 --connections 1 --duration "$dur" --warmup 0 --size "$3" \
    2>/dev/null | tail -1 || true)
  t1=$(awk '{print $14+$15}' /proc/$sp/stat)
  kill $sp 2>/dev/null; wait $sp 2>/dev/null || true
  python3 - "$res" "$t0" "$t1" <<'PY'
import json, os, sys
try:
    d = json.loads(sys.argv[1])
except Exception:
    print("0 0 0 1"); sys.exit()
hz = os.sysconf("SC_CLK_TCK")
cpu_us = (int(sys.argv[3]) - int(sys.argv[2])) * 1e6 / hz
calls = max(d["calls"], 1)
print(d["calls_per_s"], d["p50_us"], round(cpu_us / calls), d["errors"])
PY
}

pairs=(ss gg gs sg)
declare -A SRV=([ss]=$s_server [gg]=$g_server [gs]=$s_server [sg]=$g_server)
declare -A CLI=([ss]=$s_client [gg]=$g_client [gs]=$g_client [sg]=$s_client)
ncells=$(( $(wc -w <<<"$sizes") * ${#pairs[@]} * runs * 2 ))
i=0
for mode in default untrimmed; do
  tun=
  [ $mode = untrimmed ] && tun=$untrimmed
  for size in $sizes; do
    for r in $(seq "$runs"); do
      for p in "${pairs[@]}"; do
        i=$((i + 1))
        log "[$i/$ncells] $mode malloc, size $size, ${p}, run $r"
        echo "$mode $size $p $(cell "$tun" "${SRV[$p]}" "${CLI[$p]}" "$size")" >>"$tmp/cells"
      done
    done
  done
done

log "memory per connection ($nconn connections)"
python3 "$root/bench/conn_memory.py" --server "$s_server" \
  --connections "$nconn" --calls-on-one 900 --json >"$tmp/mem_s" || true
python3 "$root/bench/conn_memory.py" --server "$g_server" --grpc \
  --connections "$nconn" --json >"$tmp/mem_g" || true

python3 - "$tmp" "$runs" "$dur" "$nconn" "$(git -C "$root" rev-parse --short HEAD)" \
  "$pin" <<'PY' | tee "$out"
import collections, json, statistics, sys
tmp, runs, dur, nconn, rev, pin = sys.argv[1:]
cells = collections.defaultdict(list)
for line in open(f"{tmp}/cells"):
    mode, size, p, cps, p50, cpu, err = line.split()
    cells[(mode, int(size), p)].append((float(cps), float(p50), float(cpu), int(err)))
def med(v, k): return statistics.median(x[k] for x in v)
print(f"## Large messages: unary echo, 8 in flight on 1 connection ({rev})\n")
print(f"Median of {runs} interleaved runs of {dur} s each; server CPU per call from /proc;"
      f" {'servers on CPU 0, clients on CPU 1' if pin == '1' else 'unpinned'}.\n")
for mode, title in (("default", "glibc malloc as it comes"),
                    ("untrimmed", "glibc malloc trimming off in every process (GLIBC_TUNABLES)")):
  print(f"### {title}\n")
  print("| size | sluice -> sluice | gRPC C++ -> gRPC C++ | ratio | gRPC C++ client -> sluice server | sluice client -> gRPC C++ server |")
  print("|---|---|---|---|---|---|")
  for size in sorted({s for m, s, _ in cells if m == mode}):
    row = {}
    for p in ("ss", "gg", "gs", "sg"):
        v = cells[(mode, size, p)]
        errs = sum(x[3] for x in v)
        row[p] = (med(v, 0), med(v, 1), med(v, 2), errs)
    def fmt(p):
        c, p50, cpu, e = row[p]
        s = f"{c:,.0f}/s, p50 {p50 / 1000:.1f} ms, server {cpu:,.0f} us/call"
        return s + (f" ({e} errors)" if e else "")
    ratio = row["ss"][0] / row["gg"][0] if row["gg"][0] else float("nan")
    print(f"| {size:,} B | {fmt('ss')} | {fmt('gg')} | {ratio:.2f}x | {fmt('gs')} | {fmt('sg')} |")
  print()
print(f"\n## Server memory per connection ({nconn} connections)\n")
print("| server | idle KiB/conn | one held call KiB/conn | RSS after closing (idle / held) vs start | KiB per held call (900 on one connection) |")
print("|---|---|---|---|---|")
for name, f in (("sluice", "mem_s"), ("gRPC C++", "mem_g")):
    try:
        m = json.load(open(f"{tmp}/{f}"))
    except Exception:
        print(f"| {name} | failed | | | |"); continue
    print(f"| {name} | {m['idle_kib_per_conn']} | {m.get('held_kib_per_conn', 'n/a (no slow mode)')} | "
          f"{m['idle_closed_vs_start']:.2f}x / {m.get('held_closed_vs_start', 'n/a')}x | {m.get('kib_per_held_call', 'n/a')} |")
PY
log "wrote $out"
