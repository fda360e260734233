"""Shared helpers of the interop peers and tests (run with /usr/bin/python3,
Debian's python3-grpcio; the pyenv python3 on PATH has no grpc).

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
    proto = os.path.abspath(proto or os.environ.get("HELLOWORLD_PROTO")
                            or DEFAULT_PROTO)
    protoc = protoc or os.environ.get("PROTOC") or "protoc"
    out = tempfile.mkdtemp(prefix="sluice-interop-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run([protoc, "-I", os.path.dirname(proto), "--python_out",
                    out, proto], check=True, timeout=60)
    sys.path.insert(0, out)
    return importlib.import_module("helloworld_pb2")


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
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent)
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
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout,
                          preexec_fn=_die_with_parent)


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
