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
#  (b) the same over TLS for the --tls-sizes (default 64 KiB and 1 MiB):
#      servers with a throwaway certificate (scripts/gen-test-certs.sh, EC
#      P-256), clients --use_tls --tls_ca; both stacks on the system's
#      OpenSSL (Debian's gRPC 1.51 links libssl3, not BoringSSL). What each
#      server negotiates with `openssl s_client` is noted under the table.
#  (c) bulk streaming: one call moves --bulk-total bytes (default 256 MiB)
#      in messages of each --bulk-sizes (default 64 KiB and 1 MiB), upload
#      (client streaming, bench.Echo/Upload) and download (server
#      streaming, bench.Echo/Download), the clients' --bulk mode; the four
#      pairings, median MB/s (10^6 bytes/s) and the server's CPU seconds
#      for the transfer; both malloc settings as in (a).
#  (e) raw calls (docs/raw-calls.md): the unary echo of (a) at each of
#      --raw-sizes (default 256 KiB and 1 MiB) with the sluice sides in
#      their raw modes (echo_server --raw answers with the request's own
#      buffer, echo_client --raw sends sluice_bufs and does not decode),
#      against the same gRPC C++ peers: the zero-copy path of issue 15.
#  (d) server memory per connection: bench/conn_memory.py against both
#      servers (idle connections; sluice also with one held call each and
#      with many calls held on one connection).
#
#   bench/run_large.sh [--build DIR] [--runs N] [--duration S]
#                      [--sizes "B B ..."] [--tls-sizes "B B ..."]
#                      [--bulk-sizes "B B ..."] [--bulk-total BYTES]
#                      [--raw-sizes "B B ..."]
#                      [--only "unary tls bulk raw memory"] [--quick]
#                      [--connections N] [--out FILE] [--no-pin]
#
# --only: the parts to run (any of unary, tls, bulk, raw, memory; default
# all).
# --quick: 1 run of 1 s per cell, sizes 64 KiB and 1 MiB, 64 MiB bulk
# transfers, 200 connections (~3 min); flags given explicitly win.
# Defaults: build/, 3 runs of 3 s per cell, 1,000 connections,
# docs/results/large-<date>.md. ~18 min: (a) ~8, (b) ~3.5, (c) ~2.5,
# (e) ~3, (d) ~1. Pinning as run_compare.sh: servers on CPU 0, clients on CPU 1.
# Every client run is bounded (its --duration or --timeout, and timeout(1)
# around it). Progress on stderr; the markdown on stdout and in the out
# file.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=build
runs= dur= sizes= tls_sizes= bulk_sizes= bulk_total= nconn= raw_sizes=
only="unary tls bulk raw memory"
untrimmed=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864
out=
pin=1
quick=0
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --duration) dur=$2; shift 2 ;;
  --sizes) sizes=$2; shift 2 ;;
  --tls-sizes) tls_sizes=$2; shift 2 ;;
  --bulk-sizes) bulk_sizes=$2; shift 2 ;;
  --bulk-total) bulk_total=$2; shift 2 ;;
  --raw-sizes) raw_sizes=$2; shift 2 ;;
  --only) only=$2; shift 2 ;;
  --quick) quick=1; shift ;;
  --connections) nconn=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --no-pin) pin=0; shift ;;
  -h | --help) sed -n '2,54p' "$0"; exit 0 ;;
  *) echo "run_large: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ $quick = 1 ]; then
  : "${runs:=1}" "${dur:=1}" "${sizes:=65536 1048576}" "${bulk_total:=67108864}" "${nconn:=200}"
fi
: "${runs:=3}" "${dur:=3}" "${sizes:=65536 262144 1048576 4194240}"
: "${tls_sizes:=65536 1048576}" "${bulk_sizes:=65536 1048576}"
: "${raw_sizes:=262144 1048576}"
: "${bulk_total:=268435456}" "${nconn:=1000}"
for part in $only; do
  case $part in unary | tls | bulk | raw | memory) ;;
  *) echo "run_large: --only takes unary, tls, bulk, raw, memory; not $part" >&2; exit 2 ;;
  esac
done
want() { [[ " $only " == *" $1 "* ]]; }
want unary || sizes=
want tls || tls_sizes=
want bulk || bulk_sizes=
want raw || raw_sizes=
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

# start_server TUNABLES SERVER [ARGS...]: starts it pinned on a free port;
# sets sp (its pid) and port. Returns 1 if it does not listen.
start_server() {
  local tun=$1
  shift
  port=$(free_port)
  env ${tun:+GLIBC_TUNABLES=$tun} "${srv_cpu[@]}" "$1" --port "$port" --threads 1 "${@:2}" >/dev/null 2>&1 &
  sp=$!
  wait_port "$port" || { kill $sp; wait $sp 2>/dev/null || true; return 1; }
}
stop_server() { kill $sp 2>/dev/null; wait $sp 2>/dev/null || true; }
ticks() { awk '{print $14+$15}' /proc/$1/stat; }

# cell TUNABLES SERVER CLIENT SIZE TLS(0/1) [RAW(0/1)]
#   -> "calls/s p50_us server_us_per_call errors"
# RAW: the sluice side(s) of the pairing in their raw modes.
cell() {
  local sp port t0 t1 res tun=$1 srv=() cli=()
  if [ "$5" = 1 ]; then
    srv=(--tls_cert "$tmp/certs/server.pem" --tls_key "$tmp/certs/server.key")
    cli=(--use_tls --tls_ca "$tmp/certs/ca.pem")
  fi
  if [ "${6:-0}" = 1 ]; then
    [ "$2" = "$s_server" ] && srv+=(--raw)
    [ "$3" = "$s_client" ] && cli+=(--raw)
  fi
  start_server "$tun" "$2" "${srv[@]}" || { echo "0 0 0 1"; return; }
  t0=$(ticks $sp)
  res=$(env ${tun:+GLIBC_TUNABLES=$tun} timeout $((dur + 30)) "${cli_cpu[@]}" "$3" --target 127.0.0.1:$port \
    --concurrency 8 --connections 1 --duration "$dur" --warmup 0 --size "$4" "${cli[@]}" \
    2>/dev/null | tail -1 || true)
  t1=$(ticks $sp)
  stop_server
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

# bulk_cell TUNABLES SERVER CLIENT upload|download SIZE
#   -> "MB/s seconds server_cpu_s errors"
bulk_cell() {
  local sp port t0 t1 res tun=$1
  start_server "$tun" "$2" || { echo "0 0 0 1"; return; }
  t0=$(ticks $sp)
  res=$(env ${tun:+GLIBC_TUNABLES=$tun} timeout 150 "${cli_cpu[@]}" "$3" --target 127.0.0.1:$port \
    --bulk "$4" --total "$bulk_total" --size "$5" --timeout 120 \
    2>/dev/null | tail -1 || true)
  t1=$(ticks $sp)
  stop_server
  python3 - "$res" "$t0" "$t1" <<'PY'
import json, os, sys
try:
    d = json.loads(sys.argv[1])
except Exception:
    print("0 0 0 1"); sys.exit()
hz = os.sysconf("SC_CLK_TCK")
print(d["mb_per_s"], d["seconds"], (int(sys.argv[3]) - int(sys.argv[2])) / hz, d["errors"])
PY
}

# What a TLS server negotiates with OpenSSL's command-line client (its
# defaults, ALPN h2): "protocol cipher".
tls_probe() {
  local sp port out
  start_server "" "$1" --tls_cert "$tmp/certs/server.pem" --tls_key "$tmp/certs/server.key" || { echo "failed"; return; }
  out=$(timeout 10 openssl s_client -connect 127.0.0.1:$port -alpn h2 \
    -CAfile "$tmp/certs/ca.pem" </dev/null 2>/dev/null | tr -d '\0' |
    sed -n 's/^New, \([^,]*\), Cipher is \(.*\)/\1 \2/p' | head -1 || true)
  stop_server
  echo "$out"
}

if [ -n "$tls_sizes" ]; then
  "$root/scripts/gen-test-certs.sh" "$tmp/certs"
  echo "sluice $(tls_probe "$s_server")" >"$tmp/tls_probe"
  echo "grpc $(tls_probe "$g_server")" >>"$tmp/tls_probe"
fi

pairs=(ss gg gs sg)
declare -A SRV=([ss]=$s_server [gg]=$g_server [gs]=$s_server [sg]=$g_server)
declare -A CLI=([ss]=$s_client [gg]=$g_client [gs]=$g_client [sg]=$s_client)
nsz=$(( $(wc -w <<<"$sizes") + $(wc -w <<<"$tls_sizes") + 2 * $(wc -w <<<"$bulk_sizes") + $(wc -w <<<"$raw_sizes") ))
ncells=$(( nsz * ${#pairs[@]} * runs * 2 ))
i=0
: >"$tmp/cells"
for mode in default untrimmed; do
  tun=
  [ $mode = untrimmed ] && tun=$untrimmed
  for kind in unary tls raw upload download; do
    case $kind in
    unary) ksizes=$sizes ;;
    tls) ksizes=$tls_sizes ;;
    raw) ksizes=$raw_sizes ;;
    *) ksizes=$bulk_sizes ;;
    esac
    for size in $ksizes; do
      for r in $(seq "$runs"); do
        for p in "${pairs[@]}"; do
          i=$((i + 1))
          log "[$i/$ncells] $mode malloc, $kind, size $size, ${p}, run $r"
          case $kind in
          unary) res=$(cell "$tun" "${SRV[$p]}" "${CLI[$p]}" "$size" 0) ;;
          tls) res=$(cell "$tun" "${SRV[$p]}" "${CLI[$p]}" "$size" 1) ;;
          raw) res=$(cell "$tun" "${SRV[$p]}" "${CLI[$p]}" "$size" 0 1) ;;
          *) res=$(bulk_cell "$tun" "${SRV[$p]}" "${CLI[$p]}" "$kind" "$size") ;;
          esac
          echo "$kind $mode $size $p $res" >>"$tmp/cells"
        done
      done
    done
  done
done

if want memory; then
  log "memory per connection ($nconn connections)"
  python3 "$root/bench/conn_memory.py" --server "$s_server" \
    --connections "$nconn" --calls-on-one 900 --json >"$tmp/mem_s" || true
  python3 "$root/bench/conn_memory.py" --server "$g_server" --grpc \
    --connections "$nconn" --json >"$tmp/mem_g" || true
fi

python3 - "$tmp" "$runs" "$dur" "$nconn" "$(git -C "$root" rev-parse --short HEAD)" \
  "$pin" "$bulk_total" <<'PY' | tee "$out"
import collections, json, os, statistics, sys
tmp, runs, dur, nconn, rev, pin, bulk_total = sys.argv[1:]
cells = collections.defaultdict(list)
for line in open(f"{tmp}/cells"):
    kind, mode, size, p, *v = line.split()
    cells[(kind, mode, int(size))].append((p, [float(x) for x in v]))
def med(kind, mode, size, p, k):
    v = [x[k] for q, x in cells[(kind, mode, size)] if q == p]
    return statistics.median(v) if v else 0.0
def errs(kind, mode, size, p):
    return int(sum(x[3] for q, x in cells[(kind, mode, size)] if q == p))
def sizes_of(kind, mode):
    return sorted({s for k, m, s in cells if k == kind and m == mode})
where = 'servers on CPU 0, clients on CPU 1' if pin == '1' else 'unpinned'
modes = (("default", "glibc malloc as it comes"),
         ("untrimmed", "glibc malloc trimming off in every process (GLIBC_TUNABLES)"))
head = ("| {} | sluice -> sluice | gRPC C++ -> gRPC C++ | ratio | gRPC C++ client -> sluice server"
        " | sluice client -> gRPC C++ server |\n|---|---|---|---|---|---|")

def unary_tables(kind):
    for mode, title in modes:
        print(f"### {title}\n")
        print(head.format("size"))
        for size in sizes_of(kind, mode):
            def fmt(p):
                c, p50, cpu = (med(kind, mode, size, p, k) for k in range(3))
                e = errs(kind, mode, size, p)
                s = f"{c:,.0f}/s, p50 {p50 / 1000:.1f} ms, server {cpu:,.0f} us/call"
                return s + (f" ({e} errors)" if e else "")
            gg = med(kind, mode, size, "gg", 0)
            ratio = med(kind, mode, size, "ss", 0) / gg if gg else float("nan")
            print(f"| {size:,} B | {fmt('ss')} | {fmt('gg')} | {ratio:.2f}x | {fmt('gs')} | {fmt('sg')} |")
        print()

if sizes_of("unary", "default") or sizes_of("unary", "untrimmed"):
    print(f"## Large messages: unary echo, 8 in flight on 1 connection ({rev})\n")
    print(f"Median of {runs} interleaved runs of {dur} s each; server CPU per call from /proc; {where}.\n")
    unary_tables("unary")

if sizes_of("tls", "default") or sizes_of("tls", "untrimmed"):
    print(f"## Large messages over TLS: unary echo, 8 in flight on 1 connection ({rev})\n")
    print(f"As above, over TLS: a throwaway EC P-256 certificate (scripts/gen-test-certs.sh), "
          f"clients --use_tls --tls_ca. Both stacks use the system's OpenSSL "
          f"(sluice directly; Debian's gRPC C++ 1.51 links libssl3, not BoringSSL).", end="")
    try:
        probe = dict(l.split(" ", 1) for l in open(f"{tmp}/tls_probe").read().splitlines())
        print(f" Negotiated with `openssl s_client -alpn h2` (OpenSSL's default offer): "
              f"sluice server {probe.get('sluice', '?').strip() or '?'}, "
              f"gRPC C++ server {probe.get('grpc', '?').strip() or '?'}.", end="")
    except Exception:
        pass
    print("\n")
    unary_tables("tls")

if sizes_of("raw", "default") or sizes_of("raw", "untrimmed"):
    print(f"## Raw calls: unary echo without protobuf, 8 in flight on 1 connection ({rev})\n")
    print("As the first table, with every sluice side in its raw mode (docs/raw-calls.md): "
          "`echo_server --raw` answers with the request's own buffer, `echo_client --raw` "
          "sends sluice_bufs and does not decode. The gRPC C++ peers are the same programs as "
          "above (protobuf). \"sluice -> sluice\" is raw at both ends; the crossed columns "
          "are raw on the sluice side only.\n")
    unary_tables("raw")

if any(sizes_of(k, m) for k in ("upload", "download") for m, _ in modes):
    mib = int(bulk_total) / 1048576
    print(f"## Bulk streaming: {mib:,.0f} MiB in one call ({rev})\n")
    print(f"Upload: client streaming (bench.Echo/Upload, the server counts and answers with the totals); "
          f"download: server streaming (bench.Echo/Download). One call on one connection, "
          f"after an empty unary call that brings the connection up; timed from the call's start "
          f"to its end by the client. Median of {runs} interleaved runs; MB/s = 10^6 bytes/s of "
          f"payload; the server's CPU seconds for the transfer from /proc; {where}.\n")
    for mode, title in modes:
        rows = [(k, s) for k in ("upload", "download") for s in sizes_of(k, mode)]
        if not rows:
            continue
        print(f"### {title}\n")
        print(head.format("transfer"))
        for kind, size in rows:
            def fmt(p):
                mbs, secs, cpu = (med(kind, mode, size, p, k) for k in range(3))
                e = errs(kind, mode, size, p)
                s = f"{mbs:,.0f} MB/s ({secs:.2f} s), server {cpu:.2f} s CPU"
                return s + (f" ({e} errors)" if e else "")
            gg = med(kind, mode, size, "gg", 0)
            ratio = med(kind, mode, size, "ss", 0) / gg if gg else float("nan")
            label = f"{kind}, {size // 1024:,} KiB messages" if size % 1024 == 0 else f"{kind}, {size:,} B messages"
            print(f"| {label} | {fmt('ss')} | {fmt('gg')} | {ratio:.2f}x | {fmt('gs')} | {fmt('sg')} |")
        print()

if os.path.exists(f"{tmp}/mem_s") or os.path.exists(f"{tmp}/mem_g"):
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
