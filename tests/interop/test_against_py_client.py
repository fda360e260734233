#!/usr/bin/python3
"""Interop: the stock grpcio client against a greeter server.

    test_against_py_client.py --server PATH [--tls]

PATH is greeter_server (the C server under test) or py_greeter_server.py
(the harness checking itself). Starts it on a free port and checks: a plain
call, metadata round trips (ASCII and binary, initial and trailing, as
grpcio sees them), deadline expiry, an unknown method and an unknown service
(UNIMPLEMENTED), 50 concurrent calls, the server still healthy afterwards,
py_greeter_client.py as a subprocess, and graceful shutdown on SIGTERM with a
call in flight.

--tls runs all of it over TLS with test certificates generated at start
(scripts/gen-test-certs.sh; the server gets --use_tls --tls_cert --tls_key,
grpcio channels are grpc.secure_channel with the test CA and
grpc.ssl_target_name_override server.test) and adds TLS checks: an
untrusted CA and a plaintext client fail with UNAVAILABLE and leave the
server healthy; mutual TLS against a second server that requires a client
certificate (with one; without one; a server that is not a .py script, i.e.
greeter_server, must send the client certificate's subject back as initial
metadata x-peer-identity).
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
    ap.add_argument("--tls", action="store_true")
    args = ap.parse_args()
    ic.exit_on_signals()
    server_path = ic.command_for(os.path.abspath(args.server))
    certs = ic.make_test_certs() if args.tls else None
    server_cmd = server_path + (ic.server_tls_flags(certs) if certs else []) \
        + ["--port", "0"]
    pb = ic.load_helloworld()
    c = ic.Checks()
    if certs:
        print("TLS with the test certificates of %s" % certs, flush=True)

    def channel(target, ca="ca.pem", client_cert=False):
        """A channel to target: over TLS (trusting certs/ca) with --tls."""
        if not certs:
            return grpc.insecure_channel(target)
        return tls_channel(certs, target, ca, client_cert)

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

    with ic.Server(server_cmd) as srv, channel(srv.target) as ch:
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
            with channel(srv.target) as ch2:
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

        if certs:
            for what, ch3 in (
                    ("untrusted CA", channel(srv.target, ca="other-ca.pem")),
                    ("plaintext client", grpc.insecure_channel(srv.target))):
                with ch3:
                    code, details = code_of(lambda: stub(ch3)(
                        pb.HelloRequest(name="x"), timeout=TIMEOUT_S))
                c.check("tls: %s fails with UNAVAILABLE" % what,
                        code == grpc.StatusCode.UNAVAILABLE,
                        "%s: %s" % (code, details))

        code, details = code_of(lambda: say_hello(
            pb.HelloRequest(name="after"), timeout=TIMEOUT_S))
        c.check("server healthy after all that", code == grpc.StatusCode.OK,
                "%s: %s" % (code, details))

        r = ic.run(ic.command_for(os.path.join(ic.HERE,
                                               "py_greeter_client.py"))
                   + (ic.client_tls_flags(certs) if certs else [])
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

    if certs:
        mtls_checks(c, pb, stub, code_of, server_path, certs)
    c.exit()


def tls_channel(certs, target, ca="ca.pem", client_cert=False):
    """grpc.secure_channel to target trusting certs/ca, checking the name
    server.test; with client_cert, presenting certs/client.pem."""
    def read(name):
        with open(os.path.join(certs, name), "rb") as f:
            return f.read()
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(ca),
        private_key=read("client.key") if client_cert else None,
        certificate_chain=read("client.pem") if client_cert else None)
    return grpc.secure_channel(
        target, creds,
        options=[("grpc.ssl_target_name_override", ic.TEST_SERVER_NAME)])


def mtls_checks(c, pb, stub, code_of, server_path, certs):
    """Mutual TLS: a server that requires a client certificate from ca."""
    cmd = server_path + ic.server_tls_flags(certs, mtls=True) + ["--port",
                                                                 "0"]
    with ic.Server(cmd) as srv:
        with tls_channel(certs, srv.target, client_cert=True) as ch:
            try:
                reply, info = stub(ch).with_call(pb.HelloRequest(name="mtls"),
                                                 timeout=TIMEOUT_S)
                c.check("mtls: client with a certificate",
                        reply.message == "Hello mtls", repr(reply.message))
                if not server_path[-1].endswith(".py"):
                    ids = [v for k, v in info.initial_metadata() or ()
                           if k == "x-peer-identity"]
                    c.check("mtls: the server saw the client certificate's "
                            "subject", len(ids) == 1
                            and "CN=sluice-test-client" in ids[0], repr(ids))
            except grpc.RpcError as e:
                c.check("mtls: client with a certificate", False,
                        "%s: %s" % (e.code(), e.details()))
        with tls_channel(certs, srv.target) as ch:
            code, details = code_of(lambda: stub(ch)(
                pb.HelloRequest(name="x"), timeout=TIMEOUT_S))
            c.check("mtls: client without a certificate fails with "
                    "UNAVAILABLE", code == grpc.StatusCode.UNAVAILABLE,
                    "%s: %s" % (code, details))
        rc = srv.stop()
        c.check("mtls: server stops on SIGTERM", rc == 0, "rc=%r" % rc)


if __name__ == "__main__":
    main()
