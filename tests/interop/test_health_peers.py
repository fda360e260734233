#!/usr/bin/python3
"""Interop: grpc.health.v1 and client-side health checking (gRFC A17)
between sluice and stock grpcio.

    test_health_peers.py --peer PATH

PATH is health_peer (tests/interop/health_peer.c), driven on stdin.

A. grpcio 1.51 client -> the sluice server (health_peer server):
   Check ("" SERVING as the bytes 08 01, the registered service SERVING,
   an unknown name NOT_FOUND); Watch("") sees SERVING -> NOT_SERVING ->
   SERVING as the status is flipped; Watch of an unknown name starts with
   SERVICE_UNKNOWN and follows once it is set; grpcio's own client-side
   health checking (round_robin + healthCheckConfig) stops sending calls
   while the server reports NOT_SERVING and resumes after SERVING; at
   shutdown a Watch stream gets NOT_SERVING and then ends.
A'. the same Check and Watch from a stock @grpc/grpc-js 1.14.7 client
   (js_health_client.js; grpc-js installed by scripts/install-grpc-js.sh
   into --js-dir, as for the retry tests: skipped when node, npm or the
   registry are missing).
B. the sluice client (health_peer client) -> grpcio servers with a Python
   Health servicer: one set NOT_SERVING gets no calls (rr through the
   service config, btc through the typed option); both NOT_SERVING fail
   fast with UNAVAILABLE "every destination reports NOT_SERVING", counted;
   SERVING again is used again; a grpcio server without the health service
   (UNIMPLEMENTED) is used normally.

Every wait is bounded; nothing asserts timing. Waits for a state change
poll a state the peer reports (or retry a bounded number of times).
"""

import argparse
import concurrent.futures
import json
import os
import select
import subprocess
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
CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
SAY_HELLO = "/helloworld.Greeter/SayHello"
HERE = os.path.dirname(os.path.abspath(__file__))
HEALTH_PROTO = os.path.abspath(os.environ.get("HEALTH_PROTO") or os.path.join(
    HERE, "..", "..", "proto", "grpc", "health", "v1", "health.proto"))


class Peer:
    """health_peer, one command line in, one answer line out."""

    def __init__(self, cmd, first_timeout=15.0):
        argv, kw = ic.spawn_args(cmd)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, **kw)
        ic._children.append(self.proc)
        self.buf = b""
        self.first = self.readline(first_timeout)

    def readline(self, timeout=TIMEOUT_S + 5):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("health_peer: no answer within %.0fs"
                                   % timeout)
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise RuntimeError("health_peer exited (%s)"
                                       % self.proc.poll())
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def cmd(self, line, timeout=TIMEOUT_S + 5):
        self.send(line)
        return self.readline(timeout)

    def lines(self, line, n):
        self.send(line)
        return [self.readline() for _ in range(n)]

    def close(self):
        """Ends the peer (EOF on stdin); returns its exit code, None when it
        had to be killed (a sanitizer's report is a non-zero code)."""
        try:
            self.proc.stdin.close()
            rc = self.proc.wait(30)
        except Exception:  # noqa: BLE001
            self.proc.kill()
            self.proc.wait()
            rc = None
        self.proc.stdout.close()
        return rc


def code_of(fn):
    try:
        fn()
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


# ---- A. grpcio client -> sluice server

def part_a(c, peer_path, hpb, hello):
    srv = Peer([peer_path, "server"])
    if not srv.first.startswith("listening on "):
        raise RuntimeError("unexpected first line %r" % srv.first)
    target = "127.0.0.1:%d" % int(srv.first.split()[-1])
    ch = grpc.insecure_channel(target)
    check = ch.unary_unary(
        CHECK, request_serializer=hpb.HealthCheckRequest.SerializeToString,
        response_deserializer=hpb.HealthCheckResponse.FromString)
    check_raw = ch.unary_unary(CHECK)  # bytes in, bytes out
    watch = ch.unary_stream(
        WATCH, request_serializer=hpb.HealthCheckRequest.SerializeToString,
        response_deserializer=hpb.HealthCheckResponse.FromString)
    S = hpb.HealthCheckResponse

    raw = check_raw(b"", timeout=TIMEOUT_S)
    c.check("A: Check(\"\") is the bytes 08 01 (SERVING)", raw == b"\x08\x01",
            repr(raw))
    r = check(hpb.HealthCheckRequest(service="helloworld.Greeter"),
              timeout=TIMEOUT_S)
    c.check("A: Check(helloworld.Greeter) SERVING", r.status == S.SERVING,
            str(r.status))
    code = code_of(lambda: check(hpb.HealthCheckRequest(service="nope"),
                                 timeout=TIMEOUT_S))
    c.check("A: Check(nope) NOT_FOUND", code == grpc.StatusCode.NOT_FOUND,
            str(code))

    # Watch("") follows the flips.
    it = watch(hpb.HealthCheckRequest(service=""), timeout=60)
    seen = [next(it).status]
    c.check("A: set NOT_SERVING", srv.cmd("set - NOT_SERVING") == "ok")
    seen.append(next(it).status)
    r = check(hpb.HealthCheckRequest(service=""), timeout=TIMEOUT_S)
    c.check("A: Check(\"\") NOT_SERVING", r.status == S.NOT_SERVING,
            str(r.status))
    c.check("A: set SERVING", srv.cmd("set - SERVING") == "ok")
    seen.append(next(it).status)
    c.check("A: Watch(\"\") sees SERVING, NOT_SERVING, SERVING",
            seen == [S.SERVING, S.NOT_SERVING, S.SERVING], str(seen))
    it.cancel()

    # Watch of an unknown name: SERVICE_UNKNOWN, then what is set.
    it = watch(hpb.HealthCheckRequest(service="later.Service"), timeout=60)
    first = next(it).status
    c.check("A: set later.Service", srv.cmd("set later.Service SERVING")
            == "ok")
    second = next(it).status
    c.check("A: Watch(unknown) SERVICE_UNKNOWN then SERVING",
            [first, second] == [S.SERVICE_UNKNOWN, S.SERVING],
            str([first, second]))
    it.cancel()

    # grpcio's client-side health checking against the sluice server.
    sc = json.dumps({"loadBalancingConfig": [{"round_robin": {}}],
                     "healthCheckConfig": {"serviceName": ""}})
    hch = grpc.insecure_channel(target, options=[("grpc.service_config", sc)])
    # A client-only grpcio process reads its sockets only while a call or a
    # connectivity watch polls them; calls that fail without I/O do not, so
    # the Watch stream's SERVING would sit unread. A subscription keeps a
    # poller running, as an application with traffic has.
    hch.subscribe(lambda _state: None, try_to_connect=True)
    hello_call = hch.unary_unary(
        SAY_HELLO, request_serializer=hello.HelloRequest.SerializeToString,
        response_deserializer=hello.HelloReply.FromString)

    def greet():
        return code_of(lambda: hello_call(hello.HelloRequest(name="h"),
                                          timeout=TIMEOUT_S))
    before = [greet() for _ in range(5)]
    c.check("A: grpcio health-checked channel: 5 calls OK",
            all(x == grpc.StatusCode.OK for x in before), str(before))
    c.check("A: set NOT_SERVING again", srv.cmd("set - NOT_SERVING") == "ok")
    # grpcio hears it on its Watch stream: calls fail from then on.
    # (bounded in time only to catch a hang; it usually takes one call)
    end = time.monotonic() + 20
    while greet() != grpc.StatusCode.UNAVAILABLE and time.monotonic() < end:
        time.sleep(0.02)
    after = [greet() for _ in range(7)]
    c.check("A: grpcio fails every call UNAVAILABLE while NOT_SERVING",
            all(x == grpc.StatusCode.UNAVAILABLE for x in after), str(after))
    c.check("A: set SERVING again", srv.cmd("set - SERVING") == "ok")
    end = time.monotonic() + 20
    ok = False
    while not ok and time.monotonic() < end:
        ok = greet() == grpc.StatusCode.OK
        if not ok:
            time.sleep(0.02)
    c.check("A: grpcio calls succeed again after SERVING", ok)
    hch.close()

    # Shutdown: the Watch stream is told NOT_SERVING, then ends.
    it = watch(hpb.HealthCheckRequest(service=""), timeout=60)
    first = next(it).status
    srv.send("shutdown")
    rest, end = [], None
    try:
        for m in it:
            rest.append(m.status)
    except grpc.RpcError as e:
        end = e.code()
    c.check("A: Watch at shutdown: SERVING, then NOT_SERVING, then the end",
            first == S.SERVING and rest == [S.NOT_SERVING]
            and end in (grpc.StatusCode.UNAVAILABLE, None),
            "%s %s %s" % (first, rest, end))
    c.check("A: server shut down", srv.readline(30) == "shut down")
    ch.close()
    rc = srv.close()
    c.check("A: server exited cleanly", rc == 0, str(rc))


# ---- B. sluice client -> grpcio servers with a Python Health servicer

class PyServer:
    """A grpcio server of helloworld.Greeter ("Hello from NAME") and, with
    health, grpc.health.v1.Health over a status it can flip."""

    def __init__(self, name, hpb, hello, health=True):
        self.name = name
        self.hpb = hpb
        self.status = hpb.HealthCheckResponse.SERVING
        self.cv = threading.Condition()
        self.watches = 0
        handlers = {
            "SayHello": grpc.unary_unary_rpc_method_handler(
                self.say_hello,
                request_deserializer=hello.HelloRequest.FromString,
                response_serializer=hello.HelloReply.SerializeToString)}
        self.hello = hello
        self.server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("helloworld.Greeter",
                                                  handlers),))
        if health:
            self.server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
                    "Check": grpc.unary_unary_rpc_method_handler(
                        self.check,
                        request_deserializer=hpb.HealthCheckRequest.FromString,
                        response_serializer=hpb.HealthCheckResponse
                        .SerializeToString),
                    "Watch": grpc.unary_stream_rpc_method_handler(
                        self.watch,
                        request_deserializer=hpb.HealthCheckRequest.FromString,
                        response_serializer=hpb.HealthCheckResponse
                        .SerializeToString)}),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def dest(self):
        return "127.0.0.1:%d" % self.port

    def say_hello(self, req, ctx):
        return self.hello.HelloReply(message="Hello from %s" % self.name)

    def check(self, req, ctx):
        with self.cv:
            return self.hpb.HealthCheckResponse(status=self.status)

    def watch(self, req, ctx):
        with self.cv:
            self.watches += 1
            last = self.status
        yield self.hpb.HealthCheckResponse(status=last)
        while ctx.is_active():
            with self.cv:
                self.cv.wait_for(lambda: self.status != last, timeout=0.2)
                cur = self.status
            if cur != last:
                last = cur
                yield self.hpb.HealthCheckResponse(status=cur)

    def set(self, status):
        with self.cv:
            self.status = status
            self.cv.notify_all()

    def stop(self):
        self.server.stop(0)


def calls(cl, n):
    """n calls; returns the answers' first words ("from A", or a code)."""
    out = []
    for line in cl.lines("call %d" % n, n):
        if line.startswith("OK Hello from "):
            out.append(line[len("OK Hello from "):])
        else:
            out.append(line)
    return out


def part_b(c, peer_path, hpb, hello, lb, use_service_config):
    S = hpb.HealthCheckResponse
    a = PyServer("A", hpb, hello)
    b = PyServer("B", hpb, hello)
    what = "B/%s%s: " % (lb, " (service config)" if use_service_config else "")
    cmd = [peer_path, "client", "--target",
           "ipv4:%s,%s" % (a.dest, b.dest), "--lb", lb]
    env_sc = None
    if use_service_config:
        env_sc = json.dumps({"loadBalancingConfig": [{"round_robin": {}}],
                             "healthCheckConfig": {"serviceName": ""}})
        os.environ["HEALTH_SERVICE_CONFIG"] = env_sc
    else:
        cmd += ["--health", "-"]
    try:
        cl = Peer(cmd)
    finally:
        os.environ.pop("HEALTH_SERVICE_CONFIG", None)
    c.check(what + "client ready", cl.first == "ready", cl.first)
    try:
        got = calls(cl, 10)
        c.check(what + "10 calls OK", all(g in ("A", "B") for g in got),
                str(got))
        c.check(what + "A SERVING", cl.cmd("wait %s SERVING" % a.dest) == "ok")
        c.check(what + "B SERVING", cl.cmd("wait %s SERVING" % b.dest) == "ok")
        if lb == "rr":
            got = calls(cl, 10)
            c.check(what + "both used", "A" in got and "B" in got, str(got))
        with a.cv, b.cv:
            c.check(what + "one Watch per server",
                    a.watches == 1 and b.watches == 1,
                    "%d %d" % (a.watches, b.watches))

        a.set(S.NOT_SERVING)
        c.check(what + "A NOT_SERVING seen",
                cl.cmd("wait %s NOT_SERVING" % a.dest) == "ok")
        got = calls(cl, 20)
        c.check(what + "every call on B", got == ["B"] * 20, str(got))

        b.set(S.NOT_SERVING)
        c.check(what + "B NOT_SERVING seen",
                cl.cmd("wait %s NOT_SERVING" % b.dest) == "ok")
        d0 = int(cl.cmd("drops"))
        got = calls(cl, 3)
        c.check(what + "both NOT_SERVING: UNAVAILABLE, its own reason",
                all(g.startswith("UNAVAILABLE every destination reports "
                                 "NOT_SERVING") for g in got), str(got))
        d1 = int(cl.cmd("drops"))
        c.check(what + "counted as not_serving drops", d1 == d0 + 3,
                "%d -> %d" % (d0, d1))

        a.set(S.SERVING)
        c.check(what + "A SERVING again",
                cl.cmd("wait %s SERVING" % a.dest) == "ok")
        got = calls(cl, 5)
        c.check(what + "A picked again", got == ["A"] * 5, str(got))
    finally:
        cl.send("quit")
        rc = cl.close()
        a.stop()
        b.stop()
    c.check(what + "client exited cleanly", rc == 0, str(rc))


def part_b_unimplemented(c, peer_path, hpb, hello):
    a = PyServer("A", hpb, hello)
    n = PyServer("N", hpb, hello, health=False)
    what = "B/unimplemented: "
    cl = Peer([peer_path, "client", "--target",
               "ipv4:%s,%s" % (a.dest, n.dest), "--lb", "rr", "--health", "-"])
    try:
        got = calls(cl, 1)
        c.check(what + "first call OK", got[0] in ("A", "N"), str(got))
        c.check(what + "N UNIMPLEMENTED (healthy)",
                cl.cmd("wait %s UNIMPLEMENTED" % n.dest) == "ok")
        got = calls(cl, 10)
        c.check(what + "N used", "N" in got and all(g in ("A", "N")
                                                    for g in got), str(got))
        a.set(hpb.HealthCheckResponse.NOT_SERVING)
        c.check(what + "A NOT_SERVING seen",
                cl.cmd("wait %s NOT_SERVING" % a.dest) == "ok")
        got = calls(cl, 10)
        c.check(what + "every call on N", got == ["N"] * 10, str(got))
    finally:
        cl.send("quit")
        rc = cl.close()
        a.stop()
        n.stop()
    c.check(what + "client exited cleanly", rc == 0, str(rc))


# ---- A'. grpc-js client -> sluice server

def part_a_js(c, peer_path, js_dir):
    if not js_dir:
        c.skip("A/grpc-js", "no --js-dir")
        return
    rc = subprocess.run([os.path.join(HERE, "..", "..", "scripts",
                                      "install-grpc-js.sh"), js_dir],
                        stdin=subprocess.DEVNULL, timeout=900).returncode
    if rc != 0:
        c.skip("A/grpc-js", "grpc-js is not installed "
               "(install-grpc-js.sh: %d)" % rc)
        return
    srv = Peer([peer_path, "server"])
    target = "127.0.0.1:%d" % int(srv.first.split()[-1])
    js = Peer(["node", os.path.join(HERE, "js_health_client.js"),
               "--target", target, "--proto", HEALTH_PROTO,
               "--node-modules", os.path.join(js_dir, "node_modules")],
              first_timeout=30)
    try:
        c.check("A/grpc-js: Check(\"\") SERVING", js.first ==
                "check - SERVING", js.first)
        line = js.readline()
        c.check("A/grpc-js: Check(nope) NOT_FOUND",
                line == "check nope NOT_FOUND", line)
        seen = [js.readline()]
        c.check("A/grpc-js: set NOT_SERVING",
                srv.cmd("set - NOT_SERVING") == "ok")
        seen.append(js.readline())
        c.check("A/grpc-js: set SERVING", srv.cmd("set - SERVING") == "ok")
        seen.append(js.readline())
        srv.send("shutdown")
        seen += [js.readline(), js.readline()]
        c.check("A/grpc-js: Watch sees SERVING, NOT_SERVING, SERVING, "
                "NOT_SERVING at shutdown, then the end",
                seen == ["watch SERVING", "watch NOT_SERVING",
                         "watch SERVING", "watch NOT_SERVING",
                         "end UNAVAILABLE"], str(seen))
        c.check("A/grpc-js: server shut down", srv.readline(30) ==
                "shut down")
    finally:
        jrc = js.close()
        src = srv.close()
    c.check("A/grpc-js: peers exited cleanly", jrc == 0 and src == 0,
            "%s %s" % (jrc, src))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--js-dir", default=os.environ.get("RETRY_JS_DIR"))
    args = ap.parse_args()
    ic.exit_on_signals()
    peer = os.path.abspath(args.peer)
    hpb = ic.load_pb2(HEALTH_PROTO)
    hello = ic.load_helloworld()
    c = ic.Checks()
    part_a(c, peer, hpb, hello)
    part_a_js(c, peer, args.js_dir)
    part_b(c, peer, hpb, hello, "rr", True)
    part_b(c, peer, hpb, hello, "btc", False)
    part_b_unimplemented(c, peer, hpb, hello)
    c.exit()


if __name__ == "__main__":
    main()
