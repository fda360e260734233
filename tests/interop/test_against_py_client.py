#!/usr/bin/python3
"""Interop: the stock grpcio client against a greeter server.

    test_against_py_client.py --server PATH

PATH is greeter_server (the C server under test) or py_greeter_server.py
(the harness checking itself). Starts it on a free port and checks: a plain
call, metadata round trips (ASCII and binary, initial and trailing, as
grpcio sees them), deadline expiry, an unknown method and an unknown service
(UNIMPLEMENTED), 50 concurrent calls, the server still healthy afterwards,
py_greeter_client.py as a subprocess, and graceful shutdown on SIGTERM with a
call in flight.
"""

import argparse
import concurrent.futures
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common as ic  # noqa: E402

try:
    import grpc
except ImportError:  # not Debian's python3-grpcio: ctest shows a skip
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

TIMEOUT_S = 10.0
CONCURRENT = 50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    args = ap.parse_args()
    ic.exit_on_signals()
    server_cmd = ic.command_for(os.path.abspath(args.server)) + ["--port", "0"]
    pb = ic.load_helloworld()
    c = ic.Checks()

    def stub(channel, path=ic.SAY_HELLO):
        return channel.unary_unary(
            path, request_serializer=pb.HelloRequest.SerializeToString,
            response_deserializer=pb.HelloReply.FromString)

    def code_of(fn):
        try:
            fn()
        except grpc.RpcError as e:
            return e.code(), e.details()
        return grpc.StatusCode.OK, ""

    with ic.Server(server_cmd) as srv, \
            grpc.insecure_channel(srv.target) as ch:
        say_hello = stub(ch)

        try:
            reply = say_hello(pb.HelloRequest(name="world"), timeout=TIMEOUT_S)
            c.check("plain call", reply.message == "Hello world",
                    repr(reply.message))
        except grpc.RpcError as e:
            c.check("plain call", False, "%s: %s" % (e.code(), e.details()))

        binary = bytes(range(256)) + b"\x00\xff"
        md = (("x-echo-a", "1"), ("x-echo-b-bin", binary),
              ("not-echoed", "2"))
        try:
            reply, info = say_hello.with_call(pb.HelloRequest(name="md"),
                                              timeout=TIMEOUT_S, metadata=md)
            initial = list(info.initial_metadata() or ())
            trailing = list(info.trailing_metadata() or ())
            for what, got in (("initial", initial), ("trailing", trailing)):
                c.check("metadata: %s x-echo-a=1" % what,
                        ("x-echo-a", "1") in got, repr(got))
                c.check("metadata: %s x-echo-b-bin round trip" % what,
                        ("x-echo-b-bin", binary) in got, repr(got))
                c.check("metadata: %s has no not-echoed" % what,
                        all(k != "not-echoed" for k, _ in got), repr(got))
            c.check("metadata: reply", reply.message == "Hello md",
                    repr(reply.message))
        except grpc.RpcError as e:
            c.check("metadata call", False, "%s: %s" % (e.code(), e.details()))

        t0 = time.monotonic()
        code, details = code_of(lambda: say_hello(
            pb.HelloRequest(name="sleep:2000"), timeout=0.2))
        took = time.monotonic() - t0
        c.check("deadline: DEADLINE_EXCEEDED",
                code == grpc.StatusCode.DEADLINE_EXCEEDED,
                "%s: %s" % (code, details))
        c.check("deadline: within 1.5 s", took < 1.5, "%.2fs" % took)

        for path in ("/helloworld.Greeter/Nope", "/helloworld.Nobody/SayHello"):
            code, details = code_of(lambda: stub(ch, path)(
                pb.HelloRequest(name="x"), timeout=TIMEOUT_S))
            c.check("unknown %s: UNIMPLEMENTED" % path,
                    code == grpc.StatusCode.UNIMPLEMENTED,
                    "%s: %s" % (code, details))

        # 50 calls in flight at once; some are answered later from another
        # thread, so replies come back out of order.
        names = ["c%d" % i if i % 5 else "sleep:%d" % (50 + i)
                 for i in range(CONCURRENT)]
        futures = [say_hello.future(pb.HelloRequest(name=n),
                                    timeout=TIMEOUT_S) for n in names]
        bad = []
        for n, f in zip(names, futures):
            try:
                msg = f.result().message
                if msg != "Hello " + n:
                    bad.append("%s -> %r" % (n, msg))
            except grpc.RpcError as e:
                bad.append("%s -> %s: %s" % (n, e.code(), e.details()))
        c.check("%d concurrent calls all OK" % CONCURRENT, not bad,
                "; ".join(bad[:5]))

        # Same again from several threads over separate channels.
        def one_channel(i):
            with grpc.insecure_channel(srv.target) as ch2:
                return stub(ch2)(pb.HelloRequest(name="t%d" % i),
                                 timeout=TIMEOUT_S).message
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            try:
                got = list(pool.map(one_channel, range(16)))
                c.check("16 channels from 8 threads",
                        got == ["Hello t%d" % i for i in range(16)], repr(got))
            except grpc.RpcError as e:
                c.check("16 channels from 8 threads", False,
                        "%s: %s" % (e.code(), e.details()))

        code, details = code_of(lambda: say_hello(
            pb.HelloRequest(name="after"), timeout=TIMEOUT_S))
        c.check("server healthy after all that", code == grpc.StatusCode.OK,
                "%s: %s" % (code, details))

        r = ic.run(ic.command_for(os.path.join(ic.HERE,
                                               "py_greeter_client.py"))
                   + ["--target", srv.target, "--name", "world"])
        c.check("py_greeter_client.py", r.returncode == 0
                and r.stdout == "Hello world\n",
                "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr))

        # Graceful shutdown: a call in flight (answered after 500 ms) still
        # completes within the 2 s grace, and the server exits 0.
        fut = say_hello.future(pb.HelloRequest(name="sleep:500"),
                               timeout=TIMEOUT_S)
        time.sleep(0.2)  # let the call reach the server
        t0 = time.monotonic()
        stopped = {}
        stopper = threading.Thread(
            target=lambda: stopped.setdefault("rc", srv.stop(10.0)))
        stopper.start()
        code, details = code_of(fut.result)
        c.check("shutdown: in-flight call completes OK",
                code == grpc.StatusCode.OK, "%s: %s" % (code, details))
        stopper.join()
        took = time.monotonic() - t0
        c.check("shutdown: server exits 0", stopped.get("rc") == 0,
                "rc=%r" % stopped.get("rc"))
        c.check("shutdown: within 5 s", took < 5.0, "%.2fs" % took)

    c.exit()


if __name__ == "__main__":
    main()
