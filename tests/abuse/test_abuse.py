#!/usr/bin/python3
"""HTTP/2 abuse against a sluice server (tests/abuse/abuse_server.c).

    test_abuse.py --server PATH ATTACK

One attack per run (ctest abuse.<attack>): the attacker is raw sockets with
hand-built HTTP/2 frames; a stock grpcio client makes the valid calls on
other connections. Each run checks that the attacker is answered as the
server's docs say (GOAWAY and its error code where one applies), that the
server process's CPU time over the attack stays under half its wall time
(with a 1 s floor) and its RSS growth under 64 MiB, and that a valid call
succeeds meanwhile (or, where the attack holds every slot, right after).
Every loop is bounded in count and time; every wait is generous (seconds,
3x margins or more). Exit 0 pass, 1 fail, 77 skipped (no grpc).
"""
import argparse
import os
import select
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
try:
    import grpc
    import interop_common
except ImportError:
    print("skipped: grpc not importable")
    sys.exit(77)

PB = None
CLK = os.sysconf("SC_CLK_TCK")

# ---- frames

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 1, 4, 1
PROTOCOL_ERROR, CANCEL, ENHANCE_YOUR_CALM = 1, 8, 11
MAGIC = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, ftype, flags,
                       sid) + payload


def settings(pairs=()):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v)
                                          for k, v in pairs))


def hpack_literal(name, value):
    """Literal header field without indexing, new name (RFC 7541 6.2.2);
    names and values under 127 bytes."""
    assert len(name) < 127 and len(value) < 127
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


def request_block(path=b"/helloworld.Greeter/SayHello"):
    return b"".join(hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", path),
        (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
        (b"te", b"trailers")))


def hello_message(name=b"x"):
    body = b"\x0a" + bytes([len(name)]) + name  # HelloRequest.name
    return b"\x00" + struct.pack(">I", len(body)) + body


class Attacker:
    """One raw HTTP/2 client connection."""

    def __init__(self, port, preface=True):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.s.setblocking(False)
        self.buf = b""
        self.goaway = None  # (error code, debug text)
        self.eof = False
        self.send_failed = False
        self.got = 0
        if preface:
            self.send(MAGIC + settings())

    def send(self, data, deadline=None):
        """Sends all of data unless the peer is gone or the deadline
        (default 10 s) passes; reads meanwhile. Returns False if not all
        was sent."""
        deadline = deadline or time.monotonic() + 10
        view = memoryview(data)
        while view:
            if self.eof or self.send_failed or time.monotonic() > deadline:
                return False
            try:
                n = self.s.send(view[:65536])
                view = view[n:]
                self.poll(0)  # what the server says as it comes
            except BlockingIOError:
                self.poll(0.05)
            except OSError:
                # gone: what it sent before is still to be read
                self.send_failed = True
                self.poll(0.5)
                return False
        return True

    def poll(self, timeout):
        """Reads what has come within timeout; parses frames."""
        if self.eof:
            return
        r, _, _ = select.select([self.s], [], [], timeout)
        if not r:
            return
        for _ in range(64):
            try:
                chunk = self.s.recv(65536)
            except BlockingIOError:
                break
            except OSError:
                self.eof = True
                break
            if not chunk:
                self.eof = True
                break
            self.got += len(chunk)
            self.buf += chunk
        self._parse()

    def _parse(self):
        while len(self.buf) >= 9:
            n = (self.buf[0] << 16) | (self.buf[1] << 8) | self.buf[2]
            if len(self.buf) < 9 + n:
                break
            ftype = self.buf[3]
            payload = self.buf[9:9 + n]
            self.buf = self.buf[9 + n:]
            if ftype == GOAWAY and len(payload) >= 8:
                code = struct.unpack(">I", payload[4:8])[0]
                self.goaway = (code, payload[8:].decode("latin-1"))

    def wait_goaway_or_eof(self, timeout):
        end = time.monotonic() + timeout
        while not self.eof and time.monotonic() < end:
            self.poll(0.1)
        return self.goaway

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


# ---- the server process

class Server:
    def __init__(self, path, flags=()):
        env = dict(os.environ)
        # ASan's quarantine would count as RSS growth; keep it small.
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                               ":quarantine_size_mb=16").lstrip(":")
        self.p = subprocess.Popen([path] + list(flags), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
        line = self._line(20)
        if not line.startswith("listening on "):
            raise RuntimeError("server did not start: %r" % line)
        self.port = int(line.split()[-1])

    def _line(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        return self.p.stdout.readline() if r else ""

    def stats(self):
        self.p.stdin.write("stats\n")
        self.p.stdin.flush()
        line = self._line(10)
        return dict(kv.split("=") for kv in line.split()) if line else {}

    def cpu_s(self):
        with open("/proc/%d/stat" % self.p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime

    def rss_kib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        try:
            self.p.stdin.close()
            rc = self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = "killed"
        return rc


def valid_call(port, name="ok", timeout=10):
    """A SayHello through grpcio on its own connection: the reply text or
    an error string."""
    with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
        say = ch.unary_unary("/helloworld.Greeter/SayHello",
                             request_serializer=PB.HelloRequest.SerializeToString,
                             response_deserializer=PB.HelloReply.FromString)
        try:
            return say(PB.HelloRequest(name=name), timeout=timeout).message
        except grpc.RpcError as e:
            return "error %s %s" % (e.code(), e.details())


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, name, ok, detail=""):
        print("%s: %s %s" % ("ok" if ok else "FAIL", name, detail))
        sys.stdout.flush()
        if not ok:
            self.failed += 1


class Watch:
    """The server's CPU and RSS over an attack."""

    def __init__(self, srv):
        self.srv = srv
        self.t0 = time.monotonic()
        self.cpu0 = srv.cpu_s()
        self.rss0 = srv.rss_kib()

    def report(self, c, floor_s=1.0):
        # The window includes a quiet second after the attack: a server
        # still burning CPU then shows it.
        time.sleep(1.0)
        wall = max(time.monotonic() - self.t0, floor_s)
        cpu = self.srv.cpu_s() - self.cpu0
        grow = (self.srv.rss_kib() - self.rss0) / 1024.0
        c.check("server CPU under half the wall time", cpu < 0.5 * wall,
                "(%.2f s CPU in %.2f s)" % (cpu, wall))
        c.check("server RSS growth under 64 MiB", grow < 64,
                "(%.1f MiB)" % grow)


# ---- attacks

def attack_rapid_reset(args, c):
    srv = Server(args.server)
    w = Watch(srv)
    a = Attacker(srv.port)
    block = request_block()
    sid, sent = 1, 0
    end = time.monotonic() + 15
    while sent < 5000 and a.goaway is None and not a.eof and \
            time.monotonic() < end:
        batch = b""
        for _ in range(100):
            batch += frame(HEADERS, END_HEADERS, sid, block)
            batch += frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL))
            sid += 2
            sent += 1
        a.send(batch)
        a.poll(0)
    a.wait_goaway_or_eof(10)
    c.check("rapid reset: GOAWAY ENHANCE_YOUR_CALM",
            a.goaway is not None and a.goaway[0] == ENHANCE_YOUR_CALM,
            "(%r after %d resets)" % (a.goaway, sent))
    c.check("valid call meanwhile", valid_call(srv.port) == "Hello ok")
    w.report(c)
    a.close()
    st = srv.stats()
    c.check("counted as SLUICE_SERVER_GOAWAY_CALM",
            int(st.get("calm", 0)) >= 1, str(st))
    c.check("server exits cleanly", srv.stop() == 0)


def flood(args, c, name, unit, count, want_code=ENHANCE_YOUR_CALM,
          prefix=b"", counter="calm"):
    srv = Server(args.server)
    w = Watch(srv)
    a = Attacker(srv.port)
    if prefix:
        a.send(prefix)
    sent = 0
    end = time.monotonic() + 15
    batch = unit * 1000
    while sent < count and not a.eof and not a.send_failed and \
            a.goaway is None and \
            time.monotonic() < end:
        if not a.send(batch, time.monotonic() + 5):
            break
        sent += 1000
    a.wait_goaway_or_eof(10)
    ok = a.goaway is not None and (want_code is None or
                                   a.goaway[0] == want_code)
    c.check("%s: GOAWAY%s" % (name, " code %d" % want_code
                              if want_code is not None else ""),
            ok, "(%r after %d frames)" % (a.goaway, sent))
    c.check("valid call meanwhile", valid_call(srv.port) == "Hello ok")
    w.report(c)
    a.close()
    st = srv.stats()
    if counter:
        c.check("counted (%s)" % counter, int(st.get(counter, 0)) >= 1,
                str(st))
    c.check("server exits cleanly", srv.stop() == 0)


def attack_settings_flood(args, c):
    flood(args, c, "SETTINGS flood", settings(), 100000)


def attack_ping_flood(args, c):
    # Ping enforcement (too_many_pings) or the ACK-queue limit ("flood"):
    # both are ENHANCE_YOUR_CALM.
    flood(args, c, "PING flood", frame(PING, 0, 0, b"\0" * 8), 100000,
          counter=None)


def attack_empty_data_flood(args, c):
    flood(args, c, "empty DATA flood", frame(DATA, 0, 1), 200000,
          prefix=frame(HEADERS, END_HEADERS, 1, request_block()))


def attack_continuation_flood(args, c):
    # One header block that never ends: CONTINUATIONs of a header each.
    unit = frame(CONTINUATION, 0, 1, hpack_literal(b"x-flood", b"y" * 60))
    flood(args, c, "CONTINUATION flood", unit, 100000,
          prefix=frame(HEADERS, 0, 1, request_block()))


def attack_zero_length_headers(args, c):
    # Streams whose header blocks are thousands of empty names and values.
    block = request_block() + hpack_literal(b"", b"") * 1000
    srv = Server(args.server)
    w = Watch(srv)
    a = Attacker(srv.port)
    sid, sent = 1, 0
    end = time.monotonic() + 15
    while sent < 3000 and not a.eof and a.goaway is None and \
            time.monotonic() < end:
        batch = b"".join(frame(HEADERS, END_HEADERS | END_STREAM, sid + 2 * i,
                               block) for i in range(50))
        sid += 100
        sent += 50
        if not a.send(batch, time.monotonic() + 5):
            break
    a.wait_goaway_or_eof(10)
    c.check("zero-length header flood: GOAWAY",
            a.goaway is not None, "(%r after %d streams)" % (a.goaway, sent))
    c.check("valid call meanwhile", valid_call(srv.port) == "Hello ok")
    w.report(c)
    a.close()
    c.check("server exits cleanly", srv.stop() == 0)


def attack_window_dribble(args, c):
    # A stream window of 1 byte, opened a byte at a time: the response
    # trickles out; the server must stay cheap and serve others.
    srv = Server(args.server)
    w = Watch(srv)
    a = Attacker(srv.port, preface=False)
    a.send(MAGIC + settings([(4, 1)]))  # SETTINGS_INITIAL_WINDOW_SIZE 1
    for i in range(20):
        sid = 1 + 2 * i
        a.send(frame(HEADERS, END_HEADERS, sid, request_block()) +
               frame(DATA, END_STREAM, sid, hello_message(b"d" * 100)))
    end = time.monotonic() + 3
    n = 0
    while time.monotonic() < end and n < 20000 and not a.eof:
        a.send(b"".join(frame(WINDOW_UPDATE, 0, 1 + 2 * i,
                              struct.pack(">I", 1)) for i in range(20)))
        n += 20
        a.poll(0.001)
    c.check("dribbling connection still served", not a.eof and a.got > 0,
            "(%d bytes read)" % a.got)
    c.check("valid call meanwhile", valid_call(srv.port) == "Hello ok")
    w.report(c)
    a.close()
    c.check("server exits cleanly", srv.stop() == 0)


def attack_preface_slowloris(args, c):
    srv = Server(args.server, ["--handshake-timeout", "1000"])
    w = Watch(srv)
    conns = [Attacker(srv.port, preface=False) for _ in range(50)]
    for a in conns:
        a.send(MAGIC[:5])  # a preface that never completes
    c.check("valid call meanwhile", valid_call(srv.port) == "Hello ok")
    end = time.monotonic() + 15
    while time.monotonic() < end and not all(a.eof for a in conns):
        for a in conns:
            a.poll(0.01)
    closed = sum(a.eof for a in conns)
    c.check("every slow connection closed", closed == len(conns),
            "(%d of %d)" % (closed, len(conns)))
    c.check("each got a GOAWAY", all(a.goaway for a in conns),
            "(%d of %d)" % (sum(1 for a in conns if a.goaway), len(conns)))
    w.report(c)
    st = srv.stats()
    c.check("counted as SLUICE_SERVER_HANDSHAKE_TIMEOUTS",
            int(st.get("handshake", 0)) >= len(conns), str(st))
    for a in conns:
        a.close()
    c.check("server exits cleanly", srv.stop() == 0)


def attack_tls_slowloris(args, c):
    """TLS: connections that never start the handshake, and ones that
    stop in the middle of it (a ClientHello, then nothing), are closed
    after the handshake timeout; TLS clients are served meanwhile."""
    import ssl
    certs = interop_common.make_test_certs()
    srv = Server(args.server, ["--handshake-timeout", "1000", "--tls", certs])
    w = Watch(srv)
    silent = [Attacker(srv.port, preface=False) for _ in range(20)]
    stalled = []
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    ctx.set_alpn_protocols(["h2"])
    for _ in range(20):
        raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        tls = ctx.wrap_socket(raw, server_hostname=interop_common.
                              TEST_SERVER_NAME, do_handshake_on_connect=False)
        tls.setblocking(False)
        try:
            tls.do_handshake()  # sends the ClientHello; then we stop
        except ssl.SSLWantReadError:
            pass
        # the same socket, read below TLS (wrap_socket took raw's fd)
        stalled.append((socket.fromfd(tls.fileno(), socket.AF_INET,
                                      socket.SOCK_STREAM), tls))
    with open(os.path.join(certs, "ca.pem"), "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    with grpc.secure_channel("127.0.0.1:%d" % srv.port, creds, options=(
            ("grpc.ssl_target_name_override",
             interop_common.TEST_SERVER_NAME),)) as ch:
        say = ch.unary_unary("/helloworld.Greeter/SayHello",
                             request_serializer=PB.HelloRequest.SerializeToString,
                             response_deserializer=PB.HelloReply.FromString)
        try:
            reply = say(PB.HelloRequest(name="ok"), timeout=10).message
        except grpc.RpcError as e:
            reply = "error %s %s" % (e.code(), e.details())
    c.check("valid TLS call meanwhile", reply == "Hello ok", reply)
    end = time.monotonic() + 15
    while time.monotonic() < end and not all(a.eof for a in silent):
        for a in silent:
            a.poll(0.01)
    c.check("connections without a handshake closed",
            all(a.eof for a in silent),
            "(%d of %d)" % (sum(a.eof for a in silent), len(silent)))
    closed = 0
    for raw, tls in stalled:
        # Read the raw socket (the TLS object would go on with the
        # handshake): the server's flight, then its close (EOF or a reset).
        raw.setblocking(True)
        raw.settimeout(max(0.1, end - time.monotonic()))
        try:
            while raw.recv(4096):
                pass
            closed += 1
        except socket.timeout:
            pass
        except OSError:
            closed += 1
        raw.close()
        tls.close()
    c.check("connections stalled mid-handshake closed",
            closed == len(stalled), "(%d of %d)" % (closed, len(stalled)))
    w.report(c)
    st = srv.stats()
    c.check("counted as SLUICE_SERVER_HANDSHAKE_TIMEOUTS",
            int(st.get("handshake", 0)) >= len(silent) + len(stalled),
            str(st))
    for a in silent:
        a.close()
    c.check("server exits cleanly", srv.stop() == 0)


def attack_max_connections(args, c):
    srv = Server(args.server, ["--max-connections", "20"])
    w = Watch(srv)
    conns = []
    for _ in range(40):
        conns.append(Attacker(srv.port))
        # one at a time: the server counts each before the next comes
        conns[-1].poll(0.5) if len(conns) <= 20 else None
    end = time.monotonic() + 10
    while time.monotonic() < end and sum(a.eof for a in conns) < 20:
        for a in conns:
            a.poll(0.01)
    refused = [a for a in conns if a.eof]
    c.check("connections past the cap closed", len(refused) == 20,
            "(%d closed)" % len(refused))
    c.check("refused without a byte", all(a.got == 0 for a in refused))
    c.check("those under the cap kept",
            all(not a.eof for a in conns[:20]))
    st = srv.stats()
    c.check("counted as SLUICE_SERVER_CONNECTIONS_REFUSED",
            int(st.get("refused", 0)) == 20, str(st))
    for a in conns:
        a.close()
    # the slots come back as the connections go
    end = time.monotonic() + 15
    reply = ""
    while time.monotonic() < end:
        reply = valid_call(srv.port, timeout=5)
        if reply == "Hello ok":
            break
        time.sleep(0.2)
    c.check("valid call once the flood is gone", reply == "Hello ok", reply)
    w.report(c)
    c.check("server exits cleanly", srv.stop() == 0)


def attack_emfile(args, c):
    srv = Server(args.server, ["--nofile", "64"])
    conns = []
    for _ in range(150):  # far past the server's 64 descriptors
        try:
            conns.append(socket.create_connection(("127.0.0.1", srv.port),
                                                  timeout=10))
        except OSError:
            break
    time.sleep(0.5)  # the server reaches its limit
    cpu0, t0 = srv.cpu_s(), time.monotonic()
    time.sleep(1.5)
    cpu, wall = srv.cpu_s() - cpu0, time.monotonic() - t0
    c.check("no spin at the descriptor limit", cpu < 0.5 * wall,
            "(%.2f s CPU in %.2f s, %d connections)" % (cpu, wall,
                                                        len(conns)))
    st = srv.stats()
    c.check("counted as SLUICE_SERVER_ACCEPT_PAUSED",
            int(st.get("paused", 0)) >= 1, str(st))
    for s in conns:
        s.close()
    end = time.monotonic() + 20
    reply = ""
    while time.monotonic() < end:
        reply = valid_call(srv.port, timeout=5)
        if reply == "Hello ok":
            break
        time.sleep(0.2)
    c.check("serves again once the flood is gone", reply == "Hello ok", reply)
    c.check("server exits cleanly", srv.stop() == 0)


def attack_header_list(args, c):
    """SETTINGS_MAX_HEADER_LIST_SIZE (16 KiB by default) both ways."""
    srv = Server(args.server)
    w = Watch(srv)
    big = "b" * 20000
    # a stock client sends it: the server fails the call
    with grpc.insecure_channel("127.0.0.1:%d" % srv.port) as ch:
        say = ch.unary_unary("/helloworld.Greeter/SayHello",
                             request_serializer=PB.HelloRequest.SerializeToString,
                             response_deserializer=PB.HelloReply.FromString)
        try:
            say(PB.HelloRequest(name="x"), timeout=10,
                metadata=(("x-big", big),))
            got = "OK"
        except grpc.RpcError as e:
            got = "%s %s" % (e.code(), e.details())
    c.check("grpcio client, large request metadata: RESOURCE_EXHAUSTED",
            "RESOURCE_EXHAUSTED" in got, got)
    # our client: refused before sending (the server's SETTINGS known)
    out = subprocess.run([args.server, "--call", "127.0.0.1:%d" % srv.port,
                          "--md-bytes", "20000"], capture_output=True,
                         text=True, timeout=60).stdout.strip()
    c.check("sluice client, large request metadata: RESOURCE_EXHAUSTED",
            out.startswith("RESOURCE_EXHAUSTED") and
            "header list too large" in out, out)
    out = subprocess.run([args.server, "--call", "127.0.0.1:%d" % srv.port,
                          "--md-bytes", "8000"], capture_output=True,
                         text=True, timeout=60).stdout.strip()
    c.check("sluice client, metadata under the limit: OK",
            out.startswith("OK"), out)
    # the server's responses over a stock client's limit (grpcio
    # announces 16 KiB): the server drops the metadata and says so
    for name in ("big-initial", "big-trailers"):
        got = valid_call(srv.port, name=name)
        c.check("sluice server, large response metadata (%s) to grpcio: "
                "RESOURCE_EXHAUSTED" % name,
                "RESOURCE_EXHAUSTED" in got and "too large" in got, got)
    c.check("valid call meanwhile", valid_call(srv.port) == "Hello ok")
    w.report(c)
    c.check("server exits cleanly", srv.stop() == 0)
    # a stock server sends large trailers: our client fails the call
    import concurrent.futures

    def handler(req, ctx):
        ctx.set_trailing_metadata((("x-big", big),))
        return PB.HelloReply(message="Hello " + req.name)

    gsrv = grpc.server(concurrent.futures.ThreadPoolExecutor(2))
    gsrv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "helloworld.Greeter", {"SayHello": grpc.unary_unary_rpc_method_handler(
            handler, request_deserializer=PB.HelloRequest.FromString,
            response_serializer=PB.HelloReply.SerializeToString)}),))
    gport = gsrv.add_insecure_port("127.0.0.1:0")
    gsrv.start()
    try:
        out = subprocess.run([args.server, "--call", "127.0.0.1:%d" % gport,
                              "--md-bytes", "0"], capture_output=True,
                             text=True, timeout=60).stdout.strip()
    finally:
        gsrv.stop(0)
    c.check("sluice client, large response trailers: RESOURCE_EXHAUSTED",
            out.startswith("RESOURCE_EXHAUSTED") and
            "header list too large" in out, out)


ATTACKS = {name[len("attack_"):]: fn for name, fn in globals().items()
           if name.startswith("attack_")}


def main():
    global PB
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("attack", choices=sorted(ATTACKS))
    args = ap.parse_args()
    PB = interop_common.load_helloworld()
    c = Checks()
    ATTACKS[args.attack](args, c)
    print("%d failed" % c.failed)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
