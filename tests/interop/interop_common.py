"""Shared helpers of the interop peers and tests (run with /usr/bin/python3,
Debian's python3-grpcio; the pyenv python3 on PATH has no grpc), among them
the TLS flags of every peer and the test certificates
(scripts/gen-test-certs.sh, run at test time).

helloworld_pb2 is generated at run time with `protoc --python_out` into a
temporary directory, from examples/helloworld/helloworld.proto: the same file
the C code is generated from. $PROTOC and $HELLOWORLD_PROTO override where
protoc and the .proto are.
"""

import atexit
import ctypes
import importlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO = os.path.join(HERE, "..", "..", "examples", "helloworld",
                             "helloworld.proto")
SAY_HELLO = "/helloworld.Greeter/SayHello"


def load_helloworld(proto=None, protoc=None):
    """Generates and imports helloworld_pb2; returns the module."""
    return load_pb2(proto or os.environ.get("HELLOWORLD_PROTO")
                    or DEFAULT_PROTO, protoc)


def load_pb2(proto, protoc=None):
    """Generates <name>_pb2 from the .proto file proto with protoc
    --python_out into a temporary directory and imports it; returns the
    module ($PROTOC overrides protoc)."""
    proto = os.path.abspath(proto)
    protoc = protoc or os.environ.get("PROTOC") or "protoc"
    out = tempfile.mkdtemp(prefix="sluice-interop-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run([protoc, "-I", os.path.dirname(proto), "--python_out",
                    out, proto], check=True, timeout=60)
    sys.path.insert(0, out)
    name = os.path.splitext(os.path.basename(proto))[0] + "_pb2"
    return importlib.import_module(name)


# ---- TLS: gRPC's flags (--use_tls, --tls_cert, --tls_key, --tls_client_ca,
# --require_client_cert on servers; --use_tls, --tls_ca,
# --server_host_override, --tls_cert, --tls_key on clients) and the test
# certificates of scripts/gen-test-certs.sh.

GEN_TEST_CERTS = os.path.join(HERE, "..", "..", "scripts", "gen-test-certs.sh")
# The name the test server certificate is checked against (one of its SANs;
# clients connect to 127.0.0.1 and override the name).
TEST_SERVER_NAME = "server.test"


def make_test_certs():
    """Runs scripts/gen-test-certs.sh into a new temporary directory (removed
    at exit) and returns the directory: ca.pem, server.pem/.key,
    client.pem/.key, other-ca.pem, ... (see the script)."""
    out = tempfile.mkdtemp(prefix="sluice-certs-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run(["sh", GEN_TEST_CERTS, out], check=True, timeout=120,
                   stdin=subprocess.DEVNULL)
    return out


def server_tls_flags(certs, mtls=False):
    """A server's command-line flags for TLS with the certificates of
    make_test_certs(); mtls also requires a client certificate."""
    flags = ["--use_tls", "--tls_cert", os.path.join(certs, "server.pem"),
             "--tls_key", os.path.join(certs, "server.key")]
    if mtls:
        flags += ["--tls_client_ca", os.path.join(certs, "ca.pem"),
                  "--require_client_cert"]
    return flags


def client_tls_flags(certs, mtls=False):
    """A client's flags for calling a server_tls_flags() server at
    127.0.0.1; mtls adds the client certificate."""
    flags = ["--use_tls", "--tls_ca", os.path.join(certs, "ca.pem"),
             "--server_host_override", TEST_SERVER_NAME]
    if mtls:
        flags += ["--tls_cert", os.path.join(certs, "client.pem"),
                  "--tls_key", os.path.join(certs, "client.key")]
    return flags


def parse_bool(text):
    """argparse type of gRPC's boolean flags (true/false, 1/0, yes/no)."""
    import argparse
    low = text.lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError("want true or false, got %r" % text)


def add_bool_flag(ap, name, help_text):
    """--name alone means true; --name=B and --name B take a boolean."""
    ap.add_argument(name, nargs="?", const=True, default=False,
                    type=parse_bool, help=help_text)


def add_server_tls_flags(ap):
    add_bool_flag(ap, "--use_tls", "serve TLS only")
    ap.add_argument("--tls_cert", help="certificate chain (PEM file)")
    ap.add_argument("--tls_key", help="private key (PEM file)")
    ap.add_argument("--tls_client_ca",
                    help="ask clients for a certificate from these CAs")
    add_bool_flag(ap, "--require_client_cert",
                  "refuse clients without a certificate (mutual TLS)")


def add_client_tls_flags(ap, override_help="the name the server's "
                         "certificate is checked against (and SNI)"):
    add_bool_flag(ap, "--use_tls", "call over TLS")
    ap.add_argument("--tls_ca",
                    help="CA certificates to trust (PEM file; default: "
                    "grpcio's roots)")
    ap.add_argument("--server_host_override", help=override_help)
    ap.add_argument("--tls_cert",
                    help="client certificate chain, for mutual TLS (PEM)")
    ap.add_argument("--tls_key", help="its private key (PEM)")


def _read_pem(ap, flag, path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        ap.exit(2, "%s: %s: cannot read %s: %s\n"
                % (ap.prog, flag, path, exc.strerror))


def server_credentials(ap, args):
    """grpc.ssl_server_credentials for the flags of add_server_tls_flags(),
    or None for plaintext. Bad combinations and unreadable files exit 2."""
    import grpc
    if not args.use_tls:
        if (args.tls_cert or args.tls_key or args.tls_client_ca
                or args.require_client_cert):
            ap.error("--tls_cert, --tls_key, --tls_client_ca and "
                     "--require_client_cert need --use_tls")
        return None
    if not args.tls_cert or not args.tls_key:
        ap.error("--use_tls needs --tls_cert and --tls_key")
    if args.require_client_cert and not args.tls_client_ca:
        ap.error("--require_client_cert needs --tls_client_ca")
    cert = _read_pem(ap, "--tls_cert", args.tls_cert)
    key = _read_pem(ap, "--tls_key", args.tls_key)
    client_ca = (_read_pem(ap, "--tls_client_ca", args.tls_client_ca)
                 if args.tls_client_ca else None)
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca,
        require_client_auth=bool(args.require_client_cert))


def add_port(server, address, creds):
    """server.add_secure_port with creds (from server_credentials()), or
    add_insecure_port when creds is None; returns the port (0 when it cannot
    listen)."""
    try:
        return (server.add_secure_port(address, creds) if creds
                else server.add_insecure_port(address))
    except RuntimeError:
        return 0


def serve(handlers, host, port, threads, creds, grace_s, options=()):
    """The peers' server main loop: a grpcio server with handlers (generic
    handlers) and threads handler threads on host:port (an IPv6 literal gets
    its brackets), TLS with creds (from server_credentials()) or plaintext
    when None. Prints "listening on <port>" once it accepts, serves until
    SIGTERM or SIGINT, then stops with grace_s s of grace. options: grpc
    channel arguments for the server, (key, value) pairs. Returns 0, or 1
    (after saying why on stderr) when it cannot listen."""
    import concurrent.futures
    import threading
    import grpc
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=threads),
        handlers=tuple(handlers), maximum_concurrent_rpcs=None,
        options=list(options))
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    bound = add_port(server, "%s:%d" % (host, port), creds)
    if bound == 0:
        print("cannot listen on %s:%d" % (host, port), file=sys.stderr)
        return 1

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print("listening on %d" % bound, flush=True)
    while not stop.wait(3600):
        pass
    server.stop(grace_s).wait()
    return 0


def client_channel(ap, args, target, options=()):
    """grpc.secure_channel for the flags of add_client_tls_flags() (the
    override becomes grpc.ssl_target_name_override), or
    grpc.insecure_channel without --use_tls. Bad combinations and
    unreadable files exit 2. --server_host_override alone is ignored (gRPC's
    interop clients take it with plaintext too)."""
    import grpc
    if not args.use_tls:
        if args.tls_ca or args.tls_cert or args.tls_key:
            ap.error("--tls_ca, --tls_cert and --tls_key need --use_tls")
        return grpc.insecure_channel(target, options=list(options))
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls_cert and --tls_key go together")
    ca = _read_pem(ap, "--tls_ca", args.tls_ca) if args.tls_ca else None
    cert = _read_pem(ap, "--tls_cert", args.tls_cert) if args.tls_cert \
        else None
    key = _read_pem(ap, "--tls_key", args.tls_key) if args.tls_key else None
    creds = grpc.ssl_channel_credentials(root_certificates=ca,
                                         private_key=key,
                                         certificate_chain=cert)
    options = list(options)
    if args.server_host_override:
        options.append(("grpc.ssl_target_name_override",
                        args.server_host_override))
    return grpc.secure_channel(target, creds, options=options)


# ---- metadata values as text: bytes outside printable ASCII and the
# backslash are written \xNN and \\ (the C greeter_client does the same).

def escape(value):
    if isinstance(value, str):
        value = value.encode("latin-1")
    out = []
    for b in value:
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b <= 0x7E:
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return "".join(out)


def unescape(text):
    """Inverse of escape(); raises ValueError on a bad escape."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode("latin-1")
            i += 1
        elif text[i + 1:i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif text[i + 1:i + 2] == "x" and len(text) >= i + 4:
            out.append(int(text[i + 2:i + 4], 16))
            i += 4
        else:
            raise ValueError("bad escape in %r" % text)
    return bytes(out)


# ---- child processes that never outlive the test

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # The child gets SIGKILL when the test process dies, whatever kills it.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG,
                                               signal.SIGKILL)
    except Exception:  # pragma: no cover - best effort
        pass


_SETPRIV = shutil.which("setpriv")


def spawn_args(cmd):
    """The command and Popen keyword arguments for a child that dies with
    this process. util-linux's setpriv sets the parent-death signal, so no
    preexec_fn runs between fork and exec: without one CPython spawns with
    vfork, which runs no fork handlers. grpcio's (this process has grpc
    threads) sometimes abort the forked child before it reaches exec
    ("thd.h: assertion failed"), and the peer then seems to crash at
    start-up. Without setpriv: the preexec_fn, as before."""
    if _SETPRIV:
        return [_SETPRIV, "--pdeathsig", "KILL", "--"] + list(cmd), {}
    return list(cmd), {"preexec_fn": _die_with_parent}


def command_for(path):
    """A .py peer runs under this interpreter; anything else is executed."""
    return [sys.executable, path] if path.endswith(".py") else [path]


_children = []


def _kill_children():
    for p in _children:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_kill_children)


def exit_on_signals():
    """SIGTERM/SIGINT (ctest's timeout, Ctrl-C) become SystemExit so that
    finally blocks and atexit handlers stop the servers."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


class Server:
    """A server process that prints "listening on <port>" when ready."""

    def __init__(self, cmd, startup_timeout=15.0):
        self.cmd = cmd
        argv, kw = spawn_args(cmd)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, **kw)
        _children.append(self.proc)
        self.port = self._read_port(startup_timeout)

    def _read_port(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise RuntimeError("%s: no 'listening on' line within %.0fs"
                                   % (self.cmd[-1], timeout))
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    self.proc.wait()
                    raise RuntimeError("%s exited (%s) before listening"
                                       % (self.cmd[-1], self.proc.returncode))
                buf += chunk
        line = buf.split(b"\n", 1)[0].decode()
        if not line.startswith("listening on "):
            self.kill()
            raise RuntimeError("unexpected first line %r" % line)
        port = int(line[len("listening on "):])
        if port <= 0:
            self.kill()
            raise RuntimeError("bad port in %r" % line)
        return port

    @property
    def target(self):
        return "127.0.0.1:%d" % self.port

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL after timeout. Returns the exit code (None
        when it had to be killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        self.proc.stdout.close()
        return False


def run(cmd, timeout=30.0):
    """Runs a client to completion; returns CompletedProcess (text)."""
    argv, kw = spawn_args(cmd)
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, **kw)


class Checks:
    """Counts failures so that one run reports every broken case."""

    def __init__(self):
        self.failed = []
        self.skipped = []

    def check(self, name, ok, detail=""):
        print("%s %s%s" % ("ok  " if ok else "FAIL", name,
                           ("  -- " + detail) if detail and not ok else ""),
              flush=True)
        if not ok:
            self.failed.append(name)
        return ok

    def skip(self, name, why):
        print("skip %s  -- %s" % (name, why), flush=True)
        self.skipped.append(name)

    def exit(self):
        if self.failed:
            print("%d check(s) failed: %s" % (len(self.failed),
                                              ", ".join(self.failed)))
            sys.exit(1)
        print("all checks passed")
        sys.exit(0)
