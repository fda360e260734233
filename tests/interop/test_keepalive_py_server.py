#!/usr/bin/python3
"""Client keepalive (gRFC A8) of sluice's greeter_client against stock
grpcio 1.51 servers (py_greeter_server.py).

    test_keepalive_py_server.py --client PATH_TO_greeter_client

1. Dead peer: the grpcio server is stopped with SIGSTOP; a call without a
   deadline and with keepalive 1000 ms / 1000 ms fails UNAVAILABLE
   "keepalive timeout" (the process is bounded at 60 s only to catch a
   hang); after SIGCONT a new call succeeds. The same call without
   keepalive but with a 2 s deadline ends DEADLINE_EXCEEDED.
2. Ping enforcement: a grpcio server with
   grpc.http2.min_ping_interval_without_data_ms=2000,
   grpc.http2.max_ping_strikes=2 and grpc.keepalive_permit_without_calls=1
   and a sluice client with keepalive 1000 ms and permit_without_calls that
   keeps its channel open between two calls: the server sends GOAWAY
   ENHANCE_YOUR_CALM too_many_pings, the channel doubles its keepalive time
   (greeter_client --stats prints it: time_ms = 1000 << too_many_pings,
   too_many_pings >= 1) and the second call, on a new connection, works.

Only counts, codes and texts are asserted, never how fast.
Exits 0 when every check passed, 1 otherwise, 77 when grpc is missing.
"""

import argparse
import importlib.util
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common as ic  # noqa: E402

if importlib.util.find_spec("grpc") is None:
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

HANG_S = 60  # a client run that takes longer has hung


def wait_stopped(pid, timeout_s=10.0):
    """True once every thread of pid is stopped (SIGSTOP is delivered
    asynchronously: a grpcio thread could still answer a call sent at
    once)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            states = []
            for tid in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            states = []
        if states and all(st in ("T", "t") for st in states):
            return True
        time.sleep(0.01)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True)
    args = ap.parse_args()
    ic.exit_on_signals()
    client = ic.command_for(os.path.abspath(args.client))
    server = ic.command_for(os.path.join(ic.HERE, "py_greeter_server.py"))
    c = ic.Checks()

    # 1. a stopped server
    with ic.Server(server + ["--port", "0"]) as srv:
        def call(*extra):
            return ic.run(client + ["--target", srv.target] + list(extra),
                          HANG_S)

        r = call("--name", "before", "--keepalive-time-ms", "1000",
                 "--keepalive-timeout-ms", "1000")
        c.check("keepalive on, server running: exit 0", r.returncode == 0,
                "rc=%d stderr=%r" % (r.returncode, r.stderr))
        os.kill(srv.proc.pid, signal.SIGSTOP)
        try:
            c.check("server stopped", wait_stopped(srv.proc.pid))
            t0 = time.monotonic()
            r = call("--name", "stopped", "--keepalive-time-ms", "1000",
                     "--keepalive-timeout-ms", "1000")
            took = time.monotonic() - t0
            c.check("stopped server: UNAVAILABLE keepalive timeout",
                    r.returncode == 1 and r.stderr.startswith("UNAVAILABLE:")
                    and "keepalive timeout: no bytes for 1000 ms after PING"
                    in r.stderr,
                    "rc=%d stderr=%r" % (r.returncode, r.stderr))
            c.check("stopped server: not before the keepalive time",
                    took >= 1.0, "took %.2f s" % took)
            r = call("--name", "stopped", "--timeout-ms", "2000")
            c.check("stopped server, no keepalive: DEADLINE_EXCEEDED",
                    r.returncode == 1
                    and r.stderr.startswith("DEADLINE_EXCEEDED:"),
                    "rc=%d stderr=%r" % (r.returncode, r.stderr))
        finally:
            os.kill(srv.proc.pid, signal.SIGCONT)
        r = call("--name", "after", "--keepalive-time-ms", "1000",
                 "--keepalive-timeout-ms", "1000", "--wait-for-ready",
                 "--timeout-ms", "20000")
        c.check("after SIGCONT: a new call works",
                r.returncode == 0 and r.stdout == "Hello after\n",
                "rc=%d stdout=%r stderr=%r" % (r.returncode, r.stdout,
                                              r.stderr))

    # 2. ping enforcement: too_many_pings doubles the keepalive time
    strict = server + [
        "--port", "0",
        "--grpc-arg", "grpc.http2.min_ping_interval_without_data_ms=2000",
        "--grpc-arg", "grpc.http2.max_ping_strikes=2",
        "--grpc-arg", "grpc.keepalive_permit_without_calls=1"]
    with ic.Server(strict) as srv:
        # grpcio sends the GOAWAY on the 3rd bad PING, about 3 s in; the
        # channel stays open 8 s between the two calls (generous).
        r = ic.run(client + ["--target", srv.target, "--name", "calm",
                             "--keepalive-time-ms", "1000",
                             "--keepalive-timeout-ms", "5000",
                             "--keepalive-without-calls", "--count", "2",
                             "--linger-ms", "8000", "--stats",
                             "--wait-for-ready", "--timeout-ms", "20000"],
                   HANG_S)
        c.check("too_many_pings: both calls OK", r.returncode == 0,
                "rc=%d stdout=%r stderr=%r" % (r.returncode, r.stdout,
                                              r.stderr))
        m = re.search(r"keepalive: time_ms=(\d+) too_many_pings=(\d+)",
                      r.stdout)
        c.check("too_many_pings: --stats keepalive line", m is not None,
                repr(r.stdout))
        if m:
            t, n = int(m.group(1)), int(m.group(2))
            c.check("too_many_pings: GOAWAY received", n >= 1,
                    "too_many_pings=%d" % n)
            c.check("too_many_pings: keepalive time doubled each time",
                    n < 20 and t == 1000 << n, "time_ms=%d n=%d" % (t, n))
        c.check("too_many_pings: logged on stderr",
                "too_many_pings; keepalive time for new connections 1000 -> "
                "2000 ms" in r.stderr, repr(r.stderr))
    return c.exit()


if __name__ == "__main__":
    sys.exit(main())
