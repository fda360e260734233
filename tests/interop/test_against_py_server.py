#!/usr/bin/python3
"""Interop: a greeter client against the stock grpcio server.

    test_against_py_server.py --client PATH [--server PATH] [--tls]

PATH is greeter_client (the C client under test) or py_greeter_client.py
(the harness checking itself). Starts py_greeter_server.py (or the --server
given, e.g. greeter_server for C against C) on a free port and checks: a
plain call, a metadata round trip (initial and trailing), a binary metadata
round trip, deadline expiry, and an unreachable target.

--tls runs all of it over TLS with test certificates generated at start
(scripts/gen-test-certs.sh; server --use_tls --tls_cert --tls_key, client
--use_tls --tls_ca --server_host_override server.test) and adds TLS checks:
a target named by its IP and by "localhost" without override (the
certificate's SANs), an untrusted CA, a name the certificate does not have,
a plaintext client, an unreadable CA file (exit 2), and mutual TLS against a
second server that requires a client certificate (with one, without one; a
server that is not a .py script, i.e. greeter_server, must also send the
client certificate's subject back as initial metadata x-peer-identity).
"""

import argparse
import importlib.util
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common as ic  # noqa: E402

if importlib.util.find_spec("grpc") is None:  # the peers need it
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

CALL_TIMEOUT_S = 30


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True)
    ap.add_argument("--server",
                    default=os.path.join(ic.HERE, "py_greeter_server.py"))
    ap.add_argument("--tls", action="store_true")
    args = ap.parse_args()
    ic.exit_on_signals()
    client = ic.command_for(os.path.abspath(args.client))
    server_cmd = ic.command_for(os.path.abspath(args.server))
    c = ic.Checks()
    certs = ic.make_test_certs() if args.tls else None
    tls_server = ic.server_tls_flags(certs) if certs else []
    tls_client = ic.client_tls_flags(certs) if certs else []
    if certs:
        print("TLS with the test certificates of %s" % certs, flush=True)

    with ic.Server(server_cmd + tls_server + ["--port", "0"]) as srv:
        def call(*extra):
            return ic.run(client + tls_client + ["--target", srv.target]
                          + list(extra), CALL_TIMEOUT_S)

        r = call("--name", "world")
        c.check("plain call: exit 0", r.returncode == 0,
                "rc=%d stderr=%r" % (r.returncode, r.stderr))
        c.check("plain call: stdout is 'Hello world'",
                r.stdout == "Hello world\n", repr(r.stdout))

        r = call("--name", "md", "--metadata", "x-echo-a=1",
                 "--metadata", "not-echoed=2", "--print-metadata")
        lines = r.stderr.splitlines()
        c.check("metadata: exit 0", r.returncode == 0,
                "rc=%d stderr=%r" % (r.returncode, r.stderr))
        c.check("metadata: initial x-echo-a=1", "initial x-echo-a=1" in lines,
                repr(r.stderr))
        c.check("metadata: trailing x-echo-a=1",
                "trailing x-echo-a=1" in lines, repr(r.stderr))
        c.check("metadata: not-echoed stays out",
                not any("not-echoed" in ln for ln in lines), repr(r.stderr))

        # Binary values: every byte value, a NUL first, sent as \xNN escapes.
        raw = bytes([0, 1, 0x7F, 0x80, 0xFF]) + b"ab=\\" + bytes(range(256))
        text = ic.escape(raw)
        r = call("--name", "bin", "--metadata", "x-echo-b-bin=" + text,
                 "--print-metadata")
        lines = r.stderr.splitlines()
        if r.returncode == 2:
            c.skip("binary metadata", "the client cannot express it: "
                   + r.stderr.strip().splitlines()[0])
        else:
            c.check("binary metadata: exit 0", r.returncode == 0,
                    "rc=%d stderr=%r" % (r.returncode, r.stderr))
            c.check("binary metadata: initial round trip",
                    "initial x-echo-b-bin=" + text in lines, repr(r.stderr))
            c.check("binary metadata: trailing round trip",
                    "trailing x-echo-b-bin=" + text in lines, repr(r.stderr))

        # The reply would come after 8 s; a 200 ms deadline must end the call
        # long before. (The bound covers the client process's start and TLS
        # handshake on a busy machine, so it is generous; what it proves is
        # that the client did not wait for the reply.)
        t0 = time.monotonic()
        r = call("--name", "sleep:8000", "--timeout-ms", "200")
        took = time.monotonic() - t0
        c.check("deadline: exit 1", r.returncode == 1,
                "rc=%d stderr=%r" % (r.returncode, r.stderr))
        c.check("deadline: stderr starts with DEADLINE_EXCEEDED",
                r.stderr.startswith("DEADLINE_EXCEEDED"), repr(r.stderr))
        c.check("deadline: nothing on stdout", r.stdout == "", repr(r.stdout))
        c.check("deadline: fails well before the 8 s reply", took < 6.0,
                "%.2fs" % took)

        r = call("--name", "sleep:100", "--timeout-ms", "5000")
        c.check("slow reply inside the deadline",
                r.returncode == 0 and r.stdout == "Hello sleep:100\n",
                "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr))

        r = call("--name", "")
        c.check("empty name", r.returncode == 0 and r.stdout == "Hello \n",
                "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr))

        if certs:
            tls_checks(c, client, certs, srv)

        rc = srv.stop()
        c.check("server stops on SIGTERM", rc == 0, "rc=%r" % rc)

    # Nobody listens on that port any more.
    r = ic.run(client + tls_client + ["--target", srv.target, "--name", "x",
                                      "--timeout-ms", "3000"],
               CALL_TIMEOUT_S)
    c.check("no server: exit 1", r.returncode == 1,
            "rc=%d stderr=%r" % (r.returncode, r.stderr))
    c.check("no server: UNAVAILABLE or DEADLINE_EXCEEDED",
            r.stderr.startswith(("UNAVAILABLE", "DEADLINE_EXCEEDED")),
            repr(r.stderr))

    r = ic.run(client + ["--bogus-flag"], CALL_TIMEOUT_S)
    c.check("bad flag: exit 2", r.returncode == 2, "rc=%d" % r.returncode)

    if certs:
        mtls_checks(c, client, server_cmd, certs)
    c.exit()


def tls_checks(c, client, certs, srv):
    """The TLS checks against srv, a server with server_tls_flags(certs)."""
    ca = os.path.join(certs, "ca.pem")

    def call(flags, target=srv.target, name="tls"):
        return ic.run(client + flags + ["--target", target, "--name", name,
                                        "--timeout-ms", "5000"],
                      CALL_TIMEOUT_S)

    def ok(r, name="tls"):
        return r.returncode == 0 and r.stdout == "Hello %s\n" % name

    def refused(r):
        # Refused at the handshake: the call never reaches the server. (A
        # grpcio client logs handshake errors before the status line.)
        return r.returncode == 1 and r.stdout == "" and any(
            ln.startswith("UNAVAILABLE") for ln in r.stderr.splitlines())

    def detail(r):
        return "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr)

    r = call(["--use_tls", "--tls_ca", ca])
    c.check("tls: 127.0.0.1 without override (IP SAN)", ok(r), detail(r))
    r = call(["--use_tls", "--tls_ca", ca],
             target="localhost:%d" % srv.port)
    c.check("tls: localhost without override (DNS SAN)", ok(r), detail(r))
    r = call(["--use_tls=true", "--tls_ca", ca, "--server_host_override",
              "localhost"])
    c.check("tls: --use_tls=true, override localhost", ok(r), detail(r))
    r = call(["--use_tls", "--tls_ca", os.path.join(certs, "other-ca.pem"),
              "--server_host_override", ic.TEST_SERVER_NAME])
    c.check("tls: untrusted CA refused with UNAVAILABLE", refused(r),
            detail(r))
    r = call(["--use_tls", "--tls_ca", ca, "--server_host_override",
              "wrong.test"])
    c.check("tls: name not in the certificate refused with UNAVAILABLE",
            refused(r), detail(r))
    r = call([])
    c.check("tls: plaintext client fails with UNAVAILABLE", refused(r),
            detail(r))
    r = call(["--use_tls", "--tls_ca", os.path.join(certs, "missing.pem")])
    c.check("tls: unreadable CA file exits 2", r.returncode == 2
            and "missing.pem" in r.stderr, detail(r))
    r = call(ic.client_tls_flags(certs), name="after")
    c.check("tls: server healthy after the refused clients",
            ok(r, "after"), detail(r))


def mtls_checks(c, client, server_cmd, certs):
    """Mutual TLS: a server that requires a client certificate from ca."""
    with ic.Server(server_cmd + ic.server_tls_flags(certs, mtls=True)
                   + ["--port", "0"]) as srv:
        def call(flags):
            return ic.run(client + flags + ["--target", srv.target, "--name",
                                            "mtls", "--timeout-ms", "5000",
                                            "--print-metadata"],
                          CALL_TIMEOUT_S)
        r = call(ic.client_tls_flags(certs, mtls=True))
        c.check("mtls: client with a certificate",
                r.returncode == 0 and r.stdout == "Hello mtls\n",
                "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr))
        if not server_cmd[-1].endswith(".py"):
            ids = [ln for ln in r.stderr.splitlines()
                   if ln.startswith("initial x-peer-identity=")]
            c.check("mtls: the server saw the client certificate's subject",
                    len(ids) == 1 and "CN=sluice-test-client" in ids[0],
                    repr(r.stderr))
        r = call(ic.client_tls_flags(certs))
        c.check("mtls: client without a certificate fails",
                r.returncode == 1 and r.stdout == "",
                "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr))
        rc = srv.stop()
        c.check("mtls: server stops on SIGTERM", rc == 0, "rc=%r" % rc)


if __name__ == "__main__":
    main()
