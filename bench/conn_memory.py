#!/usr/bin/env python3
"""Server memory per connection and per held call (issue 15's memory rows).

Starts an echo server (sluice's build/bench/echo_server, or gRPC C++'s
build/bench/cpp/echo_server), then from this one process, with raw sockets
and hand-written HTTP/2 frames (no client library in the way), measures the
server's resident memory (VmRSS) at each step:

  start       the server listening, after one warm-up connection and call
  idle        N connections open, each after the preface and SETTINGS
              exchange, no call
  idle_closed those connections closed again, after a short settle
  held        N new connections, each with one small unary call that the
              server holds for HOLD_S seconds (echo_server --delay-us;
              sluice only: the gRPC C++ echo server has no slow mode)
  closed      those closed, and the held calls' time over (the server
              keeps a call until its reply is due)

and per step the growth per connection in KiB. --calls-on-one M also holds
M calls on a single connection (the server must allow M concurrent
streams: echo_server --max-streams) and reports the memory per held call.

  bench/conn_memory.py --server build/bench/echo_server [--connections N]
                       [--calls-on-one M] [--grpc] [--json] [--hold S]
                       [--max-closed-ratio R]

Progress goes to stderr; the result table (or JSON) to stdout. Every wait is
bounded; the server is killed at the end whatever happens.
"""
import argparse
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time

HOLD_S = 10  # how long the sluice echo server holds each call
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    # Literal header field without indexing, new name, no Huffman coding;
    # every length here is < 127, so one length byte each.
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def call_frames(stream, path):
    hdrs = b"".join(hpack_literal(k, v) for k, v in [
        (":method", "POST"), (":scheme", "http"), (":path", path),
        (":authority", "localhost"), ("content-type", "application/grpc"),
        ("te", "trailers")])
    body = b"\x0a\x40" + b"x" * 64  # bench.EchoMsg{payload: 64 bytes}
    msg = b"\x00" + struct.pack(">I", len(body)) + body
    # HEADERS (END_HEADERS), then DATA (END_STREAM).
    return frame(1, 0x4, stream, hdrs) + frame(0, 0x1, stream, msg)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def settled_rss(pid, quiet=0.3, limit=5.0):
    """RSS once two readings `quiet` seconds apart agree within 1 %."""
    end = time.monotonic() + limit
    prev = rss_kib(pid)
    while time.monotonic() < end:
        time.sleep(quiet)
        now = rss_kib(pid)
        if abs(now - prev) <= max(8, prev // 100):
            return now
        prev = now
    return prev


def open_conn(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(PREFACE + frame(4, 0, 0))
    # The server's SETTINGS first (it sends them at once), then our ACK.
    got = b""
    while len(got) < 9:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("server closed during the preface")
        got += chunk
    s.sendall(frame(4, 0x1, 0))
    return s


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def open_many(port, n):
    conns = []
    t0 = time.monotonic()
    for i in range(n):
        conns.append(open_conn(port))
        if (i + 1) % 1000 == 0 or i + 1 == n:
            progress(f"  {i + 1}/{n} connections "
                     f"({time.monotonic() - t0:.1f} s)")
    return conns


def port_free():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """The server under test, killed on exit whatever happens."""

    def __init__(self, a, port):
        self.a, self.port = a, port
        cmd = [a.server, "--port", str(port), "--threads", "1"]
        if not a.grpc:
            cmd += ["--delay-us", str(a.hold * 1000000), "--no-health"]
            if a.calls_on_one:
                cmd += ["--max-streams", str(a.calls_on_one + 10)]
        self.cmd = cmd

    def __enter__(self):
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.pid = self.p.pid
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return self
            except OSError:
                if time.monotonic() > deadline or self.p.poll() is not None:
                    self.__exit__()
                    sys.exit("conn_memory: the server did not start")
                time.sleep(0.05)

    def warm_start(self):
        """One connection with one call (held, or answered) first, so that
        one-time allocations are in the start figure; then the RSS."""
        w = open_conn(self.port)
        w.sendall(call_frames(1, self.a.path))
        time.sleep(0.3)
        w.close()
        rss = settled_rss(self.pid)
        progress(f"start: {rss} KiB")
        return rss

    def __exit__(self, *exc):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--calls-on-one", type=int, default=0)
    ap.add_argument("--grpc", action="store_true",
                    help="the server is gRPC C++'s: no held-call steps")
    ap.add_argument("--path", default="/bench.Echo/Unary")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--hold", type=int, default=HOLD_S,
                    help="seconds the server holds each call (default %d)"
                    % HOLD_S)
    ap.add_argument("--max-closed-ratio", type=float, default=0,
                    help="exit 1 when RSS after closing (idle or held) is "
                    "above this many times the start figure (a regression "
                    "check; 0: none)")
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = a.connections + 256
    if soft < need:
        if hard < need:  # 77: a test runner's "skipped"
            print(f"conn_memory: RLIMIT_NOFILE hard limit {hard} < {need}",
                  file=sys.stderr)
            sys.exit(77)
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

    n = a.connections
    rows = {}
    # Each phase against a fresh server, so that one phase's freed (but
    # kept) memory does not hide the next one's growth.
    with Server(a, port_free()) as srv:
        rows["start"] = srv.warm_start()
        conns = open_many(srv.port, n)
        rows["idle"] = settled_rss(srv.pid)
        progress(f"idle: {rows['idle']} KiB")
        for s in conns:
            s.close()
        time.sleep(1.0)
        rows["idle_closed"] = settled_rss(srv.pid)
        progress(f"idle connections closed: {rows['idle_closed']} KiB")
    if not a.grpc:
        with Server(a, port_free()) as srv:
            rows["held_start"] = srv.warm_start()
            conns = open_many(srv.port, n)
            sent = time.monotonic()
            for s in conns:
                s.sendall(call_frames(1, a.path))
            rows["held"] = settled_rss(srv.pid)
            progress(f"held: {rows['held']} KiB")
            for s in conns:
                s.close()
            # The server keeps a held call until its reply is due.
            time.sleep(max(1.0, sent + a.hold + 1.0 - time.monotonic()))
            rows["closed"] = settled_rss(srv.pid)
            progress(f"closed: {rows['closed']} KiB")
    if a.calls_on_one and not a.grpc:
        with Server(a, port_free()) as srv:
            srv.warm_start()
            s = open_conn(srv.port)
            rows["one_conn_before"] = settled_rss(srv.pid)
            m = a.calls_on_one
            batch = b"".join(call_frames(2 * i + 1, a.path) for i in range(m))
            s.sendall(batch)
            rows["one_conn_held"] = settled_rss(srv.pid)
            progress(f"{m} calls on one connection: "
                     f"{rows['one_conn_held']} KiB")
            s.close()

    res = {
        "server": os.path.basename(os.path.dirname(a.server)) + "/" +
        os.path.basename(a.server),
        "connections": n,
        "rss_kib": rows,
        "idle_kib_per_conn": round((rows["idle"] - rows["start"]) / n, 1),
        "idle_closed_vs_start": round(rows["idle_closed"] / rows["start"], 3),
    }
    if "held" in rows:
        res["held_kib_per_conn"] = round(
            (rows["held"] - rows["held_start"]) / n, 1)
        res["held_closed_vs_start"] = round(
            rows["closed"] / rows["held_start"], 3)
    if "one_conn_held" in rows:
        res["calls_on_one"] = a.calls_on_one
        res["kib_per_held_call"] = round(
            (rows["one_conn_held"] - rows["one_conn_before"]) /
            a.calls_on_one, 2)
    if a.json:
        print(json.dumps(res))
    else:
        print_summary(a, n, rows, res)
    if a.max_closed_ratio:
        worst = max(res["idle_closed_vs_start"],
                    res.get("held_closed_vs_start", 0))
        if worst > a.max_closed_ratio:
            sys.exit(f"conn_memory: memory after closing is {worst:.2f}x "
                     f"the start, over {a.max_closed_ratio}x")


def print_summary(a, n, rows, res):
    print(f"server {res['server']}, {n} connections: start {rows['start']} "
          f"KiB; idle +{res['idle_kib_per_conn']} KiB/conn", end="")
    if "held_kib_per_conn" in res:
        print(f"; one call held +{res['held_kib_per_conn']} KiB/conn", end="")
    print(f"; after closing idle ones {res['idle_closed_vs_start']:.2f}x "
          "start", end="")
    if "held_closed_vs_start" in res:
        print(f", held ones {res['held_closed_vs_start']:.2f}x", end="")
    if "kib_per_held_call" in res:
        print(f"; {a.calls_on_one} calls on one connection "
              f"{res['kib_per_held_call']} KiB/call", end="")
    print()


if __name__ == "__main__":
    main()
