#!/usr/bin/python3
"""Runs one interop pairing: a grpc.testing.TestService server and a client.

    run_interop.py [--pick_port] [--ready_timeout S] [--client_timeout S]
                   [--tls | --mtls]
                   --server CMD [ARG...] --client CMD [ARG...]

The server is started as `CMD ARG... --port 0` (or, with --pick_port, with a
free port picked here, for servers that cannot take 0; no --port is added
when ARG... has one) and must print "listening on <port>" within
--ready_timeout seconds (20). The client then runs as
`CMD ARG... --server_host 127.0.0.1 --server_port <port> --test_case all`
(no --test_case added when ARG... has one), with its output passed through,
for at most --client_timeout seconds (150). Afterwards the server gets
SIGTERM (SIGKILL after 10 s). The exit code is the client's (1 when it had to
be killed or the server never got ready; 77, a ctest skip, when either side
exits 77 before the run, i.e. grpc is not importable).

The options of this script come first: everything after --server up to
--client belongs to the server's command, everything after --client up to
--server to the client's.

--tls runs the pairing over TLS with test certificates generated here
(scripts/gen-test-certs.sh into a temporary directory D): the server gets
`--use_tls --tls_cert D/server.pem --tls_key D/server.key`, the client
`--use_tls --tls_ca D/ca.pem --server_host_override server.test`. --mtls is
--tls with client certificates: the server also gets `--tls_client_ca
D/ca.pem --require_client_cert`, the client `--tls_cert D/client.pem
--tls_key D/client.key`. Other TLS flags can be given to either side as its
own ARGs.

A CMD ending in .py runs under this interpreter. Both sides can be the
grpcio peers (py_interop_server.py, py_interop_client.py) or sluice's
interop_server / interop_client, which take the same flags and print the same
ready line and PASS/FAIL lines. Everything started here dies with this
process.
"""

import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common as ic  # noqa: E402

USAGE = __doc__.split("\n\n")[1]


def usage(msg):
    print("run_interop.py: %s\nusage:\n%s" % (msg, USAGE), file=sys.stderr)
    sys.exit(2)


def parse(argv):
    opts = {"pick_port": False, "ready_timeout": 20.0,
            "client_timeout": 150.0, "server": None, "client": None,
            "tls": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--pick_port":
            opts["pick_port"] = True
            i += 1
        elif a in ("--tls", "--mtls"):
            if opts["tls"] not in (None, a[2:]):
                usage("--tls and --mtls exclude each other")
            opts["tls"] = a[2:]
            i += 1
        elif a in ("--ready_timeout", "--client_timeout") and \
                i + 1 < len(argv):
            try:
                opts[a[2:]] = float(argv[i + 1])
            except ValueError:
                usage("bad %s %r" % (a, argv[i + 1]))
            i += 2
        elif a in ("--server", "--client"):
            # Everything up to the other marker belongs to this command.
            other = "--client" if a == "--server" else "--server"
            j = i + 1
            while j < len(argv) and argv[j] != other:
                j += 1
            if j == i + 1:
                usage("%s needs a command" % a)
            opts[a[2:]] = argv[i + 1:j]
            i = j
        else:
            usage("unexpected argument %r" % a)
    if not opts["server"] or not opts["client"]:
        usage("--server and --client are required")
    return opts


def command(words):
    return ic.command_for(words[0]) + words[1:]


def has_flag(words, flag):
    return any(w == flag or w.startswith(flag + "=") for w in words)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    opts = parse(sys.argv[1:])
    ic.exit_on_signals()
    server_cmd = command(opts["server"])
    tls_client_flags = []
    if opts["tls"]:
        try:
            certs = ic.make_test_certs()
        except (OSError, subprocess.SubprocessError) as exc:
            print("cannot generate the test certificates: %s" % exc,
                  file=sys.stderr)
            return 1
        mtls = opts["tls"] == "mtls"
        server_cmd += ic.server_tls_flags(certs, mtls)
        tls_client_flags = ic.client_tls_flags(certs, mtls)
        print("%s with the test certificates of %s"
              % ("mutual TLS" if mtls else "TLS", certs), flush=True)
    if not has_flag(server_cmd, "--port"):
        server_cmd += ["--port",
                       str(free_port() if opts["pick_port"] else 0)]

    t0 = time.monotonic()
    try:
        srv = ic.Server(server_cmd, opts["ready_timeout"])
    except RuntimeError as exc:
        print("server: %s" % exc, file=sys.stderr)
        # The server's own exit status, when it exited: 77 means skip.
        return 77 if "exited (77)" in str(exc) else 1
    with srv:
        print("server ready on port %d after %.2f s: %s"
              % (srv.port, time.monotonic() - t0, " ".join(server_cmd)),
              flush=True)
        client_cmd = command(opts["client"]) + tls_client_flags
        client_cmd += ["--server_host", "127.0.0.1",
                       "--server_port", str(srv.port)]
        if not has_flag(client_cmd, "--test_case"):
            client_cmd += ["--test_case", "all"]
        print("client: %s" % " ".join(client_cmd), flush=True)
        t1 = time.monotonic()
        argv, kw = ic.spawn_args(client_cmd)
        client = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kw)
        ic._children.append(client)
        try:
            rc = client.wait(opts["client_timeout"])
        except subprocess.TimeoutExpired:
            client.kill()
            client.wait()
            print("client: killed after %.0f s" % opts["client_timeout"],
                  file=sys.stderr)
            rc = 1
        took = time.monotonic() - t1
        alive = srv.proc.poll() is None
        src = srv.stop()
        print("client exit %d after %.2f s; server %s" % (
            rc, took,
            ("stopped (exit %s)" % src) if alive and src is not None
            else "killed (no exit 10 s after SIGTERM)" if alive
            else "had died during the run (exit %s)" % src), flush=True)
        # A server that crashed, hung on SIGTERM or exited non-zero (e.g. a
        # sanitizer report at exit) fails the pairing too.
        if rc == 0 and not (alive and src == 0):
            print("FAIL server did not stop cleanly", flush=True)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
