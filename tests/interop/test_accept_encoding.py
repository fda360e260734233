#!/usr/bin/env python3
"""A request without grpc-accept-encoding (what a stock grpc-go client sends
on calls it does not compress itself) asking for a compressed response.

Sends raw HTTP/2 requests with nghttp (nghttp2-client) to grpc.testing
UnaryCall with response_compressed=true, against our interop_server and, as
the reference, a stock grpcio server that compresses with gzip:
  - no grpc-accept-encoding: both answer gzip (grpc-encoding: gzip,
    Compressed-Flag 1);
  - grpc-accept-encoding: identity: sluice answers uncompressed (the
    compression spec: never a coding the client did not list); grpcio 1.51
    compresses anyway (printed, not asserted: it is grpcio's, not ours).

  test_accept_encoding.py --server INTEROP_SERVER
Exit 77 when nghttp or grpc is missing.
"""
import argparse
import ctypes
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
def _die_with_parent():
    """Child side of Popen: SIGKILL when this script dies, even by SIGKILL
    (a ctest timeout), so no server or proxy outlives the test."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PDEATHSIG


def popen(args, **kw):
    return subprocess.Popen(args, preexec_fn=_die_with_parent, **kw)

# SimpleRequest{response_size: 10, response_compressed: {value: true}}
MSG = bytes([0x10, 0x0A, 0x32, 0x02, 0x08, 0x01])
FRAME = b"\x00" + len(MSG).to_bytes(4, "big") + MSG

PY_SERVER = r'''
import grpc, sys
from concurrent import futures
srv = grpc.server(futures.ThreadPoolExecutor(2),
                  compression=grpc.Compression.Gzip)
h = grpc.unary_unary_rpc_method_handler(lambda req, ctx: b"x" * 300)
srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
    "grpc.testing.TestService", {"UnaryCall": h}),))
port = srv.add_insecure_port("127.0.0.1:0")
srv.start()
print("listening on", port, flush=True)
srv.wait_for_termination(60)
'''


def call(port, accept, body):
    cmd = ["nghttp", "-v", "-H", "content-type: application/grpc",
           "-H", "te: trailers", "-d", body]
    if accept is not None:
        cmd += ["-H", f"grpc-accept-encoding: {accept}"]
    cmd.append(f"http://127.0.0.1:{port}/grpc.testing.TestService/UnaryCall")
    v = subprocess.run(cmd, capture_output=True, timeout=30).stdout
    data = subprocess.run(cmd[:1] + cmd[2:], capture_output=True,
                          timeout=30).stdout
    text = v.decode("latin-1")
    enc = None
    for line in text.splitlines():
        if "grpc-encoding:" in line:
            enc = line.split("grpc-encoding:")[1].strip()
    status = [l.split("grpc-status:")[1].strip() for l in text.splitlines()
              if "grpc-status:" in l]
    return enc, (data[0] if data else None), status


def start(cmd):
    p = popen(cmd, stdout=subprocess.PIPE, text=True)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        line = p.stdout.readline()
        if not line:
            break
        if line.startswith("listening on"):
            return p, int(line.split()[-1])
    p.kill()
    raise RuntimeError(f"{cmd[0]} did not say it listens")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    a = ap.parse_args()
    if not shutil.which("nghttp"):
        print("accept-encoding: SKIP: nghttp missing (nghttp2-client)")
        return SKIP
    with tempfile.NamedTemporaryFile(suffix=".bin") as body:
        body.write(FRAME)
        body.flush()
        procs, fails = [], []
        try:
            p, port = start([a.server, "--port", "0", "--threads", "1"])
            procs.append(p)
            for accept, want in ((None, ("gzip", 1)), ("identity", (None, 0)),
                                 ("identity,gzip", ("gzip", 1))):
                enc, flag, st = call(port, accept, body.name)
                print(f"sluice, grpc-accept-encoding {accept}: grpc-encoding "
                      f"{enc}, flag {flag}, grpc-status {st}", flush=True)
                if (enc, flag) != want or st != ["0"]:
                    fails.append(f"sluice with {accept}: {enc} {flag} {st}, "
                                 f"want {want} and status 0")
            try:
                p, port = start(["/usr/bin/python3", "-c", PY_SERVER])
                procs.append(p)
            except RuntimeError:
                print("accept-encoding: grpcio server not started (no grpc?);"
                      " reference part skipped")
                port = None
            if port:
                enc, flag, st = call(port, None, body.name)
                print(f"grpcio, no grpc-accept-encoding: grpc-encoding {enc}, "
                      f"flag {flag}, grpc-status {st}", flush=True)
                if (enc, flag) != ("gzip", 1):
                    fails.append(f"grpcio reference changed: {enc} {flag}")
                enc, flag, st = call(port, "identity", body.name)
                print(f"grpcio, grpc-accept-encoding identity: grpc-encoding "
                      f"{enc}, flag {flag} (not asserted)", flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait(timeout=10)
    for f in fails:
        print(f"accept-encoding: FAIL: {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
