#!/usr/bin/python3
"""Server-side connection limits of sluice against a stock grpcio 1.51
client (gRFC A8 ping enforcement, A9 max connection age).

    test_conn_lifetime_py.py --greeter GREETER_SERVER --interop INTEROP_SERVER

1. too_many_pings: a grpcio client with keepalive_time_ms=500 and
   max_pings_without_data=0 holds a silent FullDuplexCall on the sluice
   interop_server (default enforcement: 5 min, 2 strikes). The server must
   answer the 3rd bad PING with GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
   (C-core logs it, with both, on our stderr) and close: the call ends
   UNAVAILABLE long before its 30 s deadline, and the server counts one
   too_many_pings.
2. The same with --keepalive-min-time-ms 250 --keepalive-permit-without-calls
   1 on the server: the call runs into its 6 s deadline instead
   (DEADLINE_EXCEEDED), and the server counts none. (250 ms, not the
   spec's 500: grpcio paces its PINGs about 1 s apart, and on a loaded
   machine two of them may arrive closer than that; 4x margin.)
3. max_age: the sluice greeter_server with --max-connection-age-ms 1000
   (grace 10 s); four grpcio client threads call SayHello nonstop for at
   least 5 s: no call fails, and the server counts at least one max_age
   GOAWAY and more than one connection.

The server's counts come from the line it prints on stderr at shutdown
("connections: N accepted, N max_age, ..."). Every wait is bounded; only
lower bounds of time are used (a load lasts at least 5 s), never upper
ones beyond the calls' own deadlines. Exits 0, 1 on a failed check, 77 when
grpc cannot be imported.
"""

import argparse
import os
import re
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import interop_common  # noqa: E402
from interop_common import Checks, Server  # noqa: E402

try:
    import grpc
except ImportError:
    print("skip: no grpc module")
    sys.exit(77)

FULL_DUPLEX = "/grpc.testing.TestService/FullDuplexCall"
SAY_HELLO = "/helloworld.Greeter/SayHello"
HELLO_REQ = b"\n\x04load"  # helloworld.HelloRequest{name: "load"}


def identity(x):
    return x


class LoggedServer:
    """A sluice example server whose stderr goes to a file, read after it
    exits for its connection counts."""

    def __init__(self, cmd):
        fd, self.log = tempfile.mkstemp(prefix="sluice-conn-", suffix=".log")
        os.close(fd)
        self.server = Server(["sh", "-c", 'exec "$0" "$@" 2>"%s"' % self.log]
                             + cmd)

    @property
    def target(self):
        return self.server.target

    def stop(self):
        """Stops it; returns (exit code, counts dict, stderr text)."""
        rc = self.server.stop()
        self.server.__exit__(None, None, None)
        with open(self.log) as f:
            text = f.read()
        os.unlink(self.log)
        counts = {}
        m = re.search(r"connections: (.*)", text)
        if m:
            for part in m.group(1).split(","):
                n, name = part.split()
                counts[name] = int(n)
        return rc, counts, text


def silent_duplex(target, deadline_s):
    """A FullDuplexCall that sends nothing, with an aggressive keepalive;
    returns (status code, details, seconds it took)."""
    opts = [("grpc.keepalive_time_ms", 500),
            ("grpc.keepalive_timeout_ms", 20000),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.keepalive_permit_without_calls", 1)]
    stop = threading.Event()

    def requests():
        stop.wait(deadline_s + 30)  # silent until the call ends
        return
        yield  # a generator

    t0 = time.monotonic()
    with grpc.insecure_channel(target, options=opts) as ch:
        call = ch.stream_stream(FULL_DUPLEX, request_serializer=identity,
                                response_deserializer=identity)(
            requests(), timeout=deadline_s)
        try:
            for _ in call:
                pass
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            code, details = e.code(), e.details() or ""
        finally:
            stop.set()
    return code, details, time.monotonic() - t0


def check_pings(checks, interop, relaxed):
    extra = (["--keepalive-min-time-ms", "250",
              "--keepalive-permit-without-calls", "1"] if relaxed else [])
    srv = LoggedServer([interop, "--port", "0"] + extra)
    # C-core logs the GOAWAY it gets (error code and debug data) on this
    # process's stderr: catch it in a file for the duration of the call.
    log = tempfile.TemporaryFile()
    saved = os.dup(2)
    try:
        deadline = 6 if relaxed else 30
        sys.stderr.flush()
        os.dup2(log.fileno(), 2)
        try:
            code, details, took = silent_duplex(srv.target, deadline)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    finally:
        rc, counts, text = srv.stop()
    log.seek(0)
    core_log = log.read().decode(errors="replace")
    log.close()
    sys.stderr.write(core_log)
    name = "relaxed" if relaxed else "default"
    print("%s enforcement: %s %r after %.1f s; server %s" %
          (name, code, details, took, counts), flush=True)
    checks.check("%s: server exited 0" % name, rc == 0, "rc=%r" % rc)
    checks.check("%s: server printed its counts" % name,
                 "too_many_pings" in counts, text[-500:])
    if relaxed:
        checks.check("relaxed: call ran into its deadline",
                     code == grpc.StatusCode.DEADLINE_EXCEEDED,
                     "%s %r" % (code, details))
        checks.check("relaxed: no too_many_pings GOAWAY",
                     counts.get("too_many_pings") == 0, str(counts))
    else:
        checks.check("default: call ended UNAVAILABLE",
                     code == grpc.StatusCode.UNAVAILABLE,
                     "%s %r" % (code, details))
        checks.check("default: grpcio got GOAWAY ENHANCE_YOUR_CALM "
                     "too_many_pings",
                     "ENHANCE_YOUR_CALM" in core_log
                     and "too_many_pings" in core_log, core_log[-500:])
        checks.check("default: one too_many_pings GOAWAY",
                     counts.get("too_many_pings") == 1, str(counts))


def check_max_age(checks, greeter):
    srv = LoggedServer([greeter, "--port", "0", "--max-connection-age-ms",
                        "1000", "--max-connection-age-grace-ms", "10000"])
    ok = [0]
    failures = []
    lock = threading.Lock()
    stop = threading.Event()
    try:
        with grpc.insecure_channel(srv.target) as ch:
            hello = ch.unary_unary(SAY_HELLO, request_serializer=identity,
                                   response_deserializer=identity)

            def worker():
                for _ in range(1000000):
                    if stop.is_set():
                        return
                    try:
                        hello(HELLO_REQ, timeout=10)
                        with lock:
                            ok[0] += 1
                    except grpc.RpcError as e:
                        with lock:
                            failures.append("%s %s" % (e.code(), e.details()))

            threads = [threading.Thread(target=worker) for _ in range(4)]
            for t in threads:
                t.start()
            t0 = time.monotonic()
            # At least 5 s (five ages) and 300 calls; at most 60 s.
            while time.monotonic() - t0 < 60:
                with lock:
                    n = ok[0]
                if time.monotonic() - t0 >= 5 and n >= 300:
                    break
                time.sleep(0.1)
            stop.set()
            for t in threads:
                t.join(30)
    finally:
        stop.set()
        rc, counts, text = srv.stop()
    print("max_age: %d ok, %d failed; server %s" % (ok[0], len(failures),
                                                    counts), flush=True)
    checks.check("max_age: server exited 0", rc == 0, "rc=%r" % rc)
    checks.check("max_age: no failed call", not failures,
                 "; ".join(failures[:3]))
    checks.check("max_age: calls went through", ok[0] >= 300, str(ok[0]))
    checks.check("max_age: connections aged out",
                 counts.get("max_age", 0) >= 1, str(counts))
    checks.check("max_age: more than one connection",
                 counts.get("accepted", 0) >= 2, str(counts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--greeter", required=True)
    ap.add_argument("--interop", required=True)
    args = ap.parse_args()
    interop_common.exit_on_signals()
    checks = Checks()
    check_pings(checks, args.interop, relaxed=False)
    check_pings(checks, args.interop, relaxed=True)
    check_max_age(checks, args.greeter)
    checks.exit()


if __name__ == "__main__":
    main()
