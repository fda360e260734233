#!/usr/bin/python3
"""Interop: a greeter client against the stock grpcio server.

    test_against_py_server.py --client PATH

PATH is greeter_client (the C client under test) or py_greeter_client.py
(the harness checking itself). Starts py_greeter_server.py on a free port and
checks: a plain call, a metadata round trip (initial and trailing), a binary
metadata round trip, deadline expiry, and an unreachable target.
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
    args = ap.parse_args()
    ic.exit_on_signals()
    client = ic.command_for(os.path.abspath(args.client))
    server_cmd = ic.command_for(os.path.join(ic.HERE, "py_greeter_server.py"))
    c = ic.Checks()

    with ic.Server(server_cmd + ["--port", "0"]) as srv:
        def call(*extra):
            return ic.run(client + ["--target", srv.target] + list(extra),
                          CALL_TIMEOUT_S)

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

        t0 = time.monotonic()
        r = call("--name", "sleep:2000", "--timeout-ms", "200")
        took = time.monotonic() - t0
        c.check("deadline: exit 1", r.returncode == 1,
                "rc=%d stderr=%r" % (r.returncode, r.stderr))
        c.check("deadline: stderr starts with DEADLINE_EXCEEDED",
                r.stderr.startswith("DEADLINE_EXCEEDED"), repr(r.stderr))
        c.check("deadline: nothing on stdout", r.stdout == "", repr(r.stdout))
        c.check("deadline: fails within 1.5 s", took < 1.5, "%.2fs" % took)

        r = call("--name", "sleep:100", "--timeout-ms", "5000")
        c.check("slow reply inside the deadline",
                r.returncode == 0 and r.stdout == "Hello sleep:100\n",
                "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr))

        r = call("--name", "")
        c.check("empty name", r.returncode == 0 and r.stdout == "Hello \n",
                "rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr))

        rc = srv.stop()
        c.check("server stops on SIGTERM", rc == 0, "rc=%r" % rc)

    # Nobody listens on that port any more.
    r = ic.run(client + ["--target", srv.target, "--name", "x",
                         "--timeout-ms", "3000"], CALL_TIMEOUT_S)
    c.check("no server: exit 1", r.returncode == 1,
            "rc=%d stderr=%r" % (r.returncode, r.stderr))
    c.check("no server: UNAVAILABLE or DEADLINE_EXCEEDED",
            r.stderr.startswith(("UNAVAILABLE", "DEADLINE_EXCEEDED")),
            repr(r.stderr))

    r = ic.run(client + ["--bogus-flag"], CALL_TIMEOUT_S)
    c.check("bad flag: exit 2", r.returncode == 2, "rc=%d" % r.returncode)
    c.exit()


if __name__ == "__main__":
    main()
