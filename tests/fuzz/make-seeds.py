#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz (corpus/<target>/*): real frames,
headers, gzip members, load reports and service configs in the input
layout each target documents, and CodeGeneratorRequests that protoc itself
produces for a few of tests/plugin's protos. Deterministic (gzip without a
timestamp), so re-running it changes nothing unless this script changed.
Findings fixed later are added by hand as corpus/<target>/regress-*.

    tests/fuzz/make-seeds.py [--protoc PROTOC]
"""
import argparse
import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(msg, compressed=0):
    return bytes([compressed]) + struct.pack(">I", len(msg)) + msg


def gz(data):
    return gzip.compress(data, compresslevel=6, mtime=0)


# ---- framing: [mode][nsplit][splits...][stream]
def framing():
    hello = b"\x0a\x05world"
    stream = frame(hello) + frame(b"") + frame(b"x" * 300) + frame(gz(hello), 1)
    # max 200000 (mode 7); one feed
    write("framing", "whole", bytes([7, 0]) + stream)
    # byte by byte, taking reassembled messages (bit 3)
    write("framing", "bytewise-take", bytes([7 | 8, 1, 1]) + stream)
    # odd splits, including empty DATA frames
    write("framing", "splits", bytes([7 | 8, 4, 3, 0, 7, 200]) + stream)
    # consumer stops at the second message
    write("framing", "stop", bytes([7 | 2 << 4, 2, 2, 5]) + stream)
    # over the limit (max 100, mode 3), and a bad flag
    write("framing", "too-large", bytes([3, 0]) + frame(b"y" * 101))
    write("framing", "bad-flag", bytes([7, 1, 2]) + b"\x02\x00\x00\x00\x01z")
    # truncated: a prefix, and half a body
    write("framing", "truncated", bytes([5, 0]) + frame(b"abc")[:6])


# ---- timeout: the header value
def timeout():
    for v in ["1S", "100m", "99999999H", "0n", "5M", "250u", "12345678n"]:
        write("timeout", v, v)


# ---- percent: a message
def percent():
    write("percent", "plain", "deadline exceeded")
    write("percent", "encoded", "caf%C3%A9 %25 100%")
    write("percent", "raw", "line\nbreak \x01\xff%zz%4")


# ---- base64: a -bin value
def base64_():
    write("base64", "unpadded", "AAECAwQFBgc")
    write("base64", "padded", "aGVsbG8=")
    write("base64", "bad", "a=b=")


# ---- metadata and grpc_headers: "name: value" lines, empty line = block end
REQUEST = [
    (":method", "POST"), (":scheme", "http"), (":path", "/helloworld.Greeter/SayHello"),
    (":authority", "localhost:50051"), ("content-type", "application/grpc+proto"),
    ("te", "trailers"), ("grpc-timeout", "100m"), ("grpc-encoding", "gzip"),
    ("grpc-accept-encoding", "identity, deflate, gzip"),
    ("user-agent", "grpc-c/1.51.1 (linux; chttp2)"), ("x-request-id", "42"),
    ("trace-bin", "AAECAwQ,BQYH"),
]
RESPONSE = [(":status", "200"), ("content-type", "application/grpc"),
            ("grpc-encoding", "gzip"), ("x-server", "sluice")]
TRAILERS = [("grpc-status", "14"), ("grpc-message", "connection%20reset%F0%9F%98%80"),
            ("endpoint-load-metrics-bin", "CQAAAAAAAOA/"),
            ("grpc-status-details-bin", "CA4SBWVycm9y")]


def lines(headers):
    return "".join("%s: %s\n" % h for h in headers)


def metadata():
    write("metadata", "request", lines(REQUEST))
    write("metadata", "trailers", lines(TRAILERS))
    write("metadata", "bad", "Upper-Case: x\nkey: tab\there\nx-bin: !!!\n"
          "grpc-custom: y\ngrpc-previous-rpc-attempts: 1\n")


def grpc_headers():
    now = b"\x00\x00\x10\x00\x00\x00\x00\x00"
    # mode bit 0: request
    write("grpc_headers", "request", b"\x01" + now + lines(REQUEST).encode())
    write("grpc_headers", "request-bad",
          b"\x01" + now + lines([(":method", "GET"), ("content-type", "text/html"),
                                 ("grpc-timeout", "1x")]).encode())
    # response: headers block, then trailers (bit 2 = END_STREAM on block 1)
    write("grpc_headers", "response",
          b"\x04" + now + (lines(RESPONSE) + "\n" + lines(TRAILERS)).encode())
    # Trailers-Only: one block with END_STREAM (bit 1)
    write("grpc_headers", "trailers-only",
          b"\x02" + now + lines([(":status", "200"), ("content-type", "application/grpc")]
                                + TRAILERS).encode())


# ---- compress: [mode][max hi][max lo][corrupt][bytes]
def compress():
    msg = b"\x0a\x0bhello world" * 20
    write("compress", "gzip", bytes([0, 0x10, 0, 0]) + gz(msg))
    # a bomb: 1 MiB of zeros against a 4096-byte limit
    write("compress", "bomb", bytes([0, 0x10, 0, 0]) + gz(b"\0" * (1 << 20)))
    write("compress", "two-members", bytes([0, 0x10, 0, 0]) + gz(b"a") + gz(b"b"))
    write("compress", "roundtrip-flip", bytes([1 | 4 | 3 << 5, 0x10, 0, 20]) + msg)
    write("compress", "identity", bytes([2, 0, 100]) + b"\0" + msg[:50])
    write("compress", "encodings", bytes([3, 0, 0, 0]) + b"gzip\nidentity, deflate,gzip ")


# ---- orca: an OrcaLoadReport
def pb_key(field, wt):
    return bytes([field << 3 | wt])


def pb_double(field, d):
    return pb_key(field, 1) + struct.pack("<d", d)


def pb_metric(key, d):
    entry = pb_key(1, 2) + bytes([len(key)]) + key + pb_double(2, d)
    return pb_key(8, 2) + bytes([len(entry)]) + entry


def orca():
    full = (pb_double(1, 0.5) + pb_double(2, 0.25) + pb_double(6, 1200.0) +
            pb_double(9, 0.75) + pb_metric(b"queue_ms", 3.5) +
            pb_metric(b"in_flight", 7.0) + pb_metric(b"downstream", 0.1))
    write("orca", "full", full)
    # deprecated rps (varint), an unknown field and an unknown map key
    write("orca", "rps-unknown", pb_key(3, 0) + b"\xe8\x07" + pb_key(4, 2) +
          b"\x03abc" + pb_metric(b"other", 1.0) + pb_key(5, 5) + b"\0\0\0\0")
    write("orca", "negative-nan", pb_double(1, -1.0) + pb_double(2, float("nan")))


# ---- service_config: JSON
def service_config():
    with open(os.path.join(ROOT, "docs/results/resilience-2026-12-02-raw/"
                           "default-service-config.json")) as f:
        write("service_config", "resilience", f.read())
    write("service_config", "a6", '{"methodConfig":[{"name":[{"service":"pkg.Svc",'
          '"method":"M"}],"retryPolicy":{"maxAttempts":4,"initialBackoff":"0.1s",'
          '"maxBackoff":"1s","backoffMultiplier":2,"retryableStatusCodes":'
          '["UNAVAILABLE"]}}],"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}')
    write("service_config", "hedging", '{"methodConfig":[{"name":[{}],"timeout":'
          '"1.5s","waitForReady":true,"maxRequestMessageBytes":"1048576",'
          '"maxResponseMessageBytes":4194304,"hedgingPolicy":{"maxAttempts":3,'
          '"hedgingDelay":"0.05s","nonFatalStatusCodes":[14,"internal"]}},'
          '{"name":[{"service":"a.B"},{"service":"a.C","method":"D"}],'
          '"waitForReady":false}],"loadBalancingConfig":[{"unknown":{}},'
          '{"round_robin":{}}],"healthCheckConfig":{"serviceName":"a.B"}}')
    write("service_config", "lb-policy", '{"loadBalancingPolicy":"ROUND_ROBIN",'
          '"healthCheckConfig":{}}')
    write("service_config", "bad", '{"methodConfig":[{"name":[{"method":"M"}],'
          '"retryPolicy":{"maxAttempts":1}}]}')


# ---- plugin: CodeGeneratorRequests as protoc sends them
def plugin(protoc):
    if not protoc:
        print("make-seeds: protoc not found, plugin seeds skipped", file=sys.stderr)
        return
    protos = os.path.join(ROOT, "tests/plugin/protos")
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "protoc-gen-dump")
        out = os.path.join(tmp, "req")
        with open(dump, "w") as f:
            # an empty CodeGeneratorResponse is zero bytes
            f.write('#!/bin/sh\ncat > "$DUMP_TO"\n')
        os.chmod(dump, 0o755)
        for name in ["helloworld.proto", "streaming.proto", "nested.proto",
                     "nopkg.proto", "multi.proto"]:
            env = dict(os.environ, DUMP_TO=out)
            subprocess.run([protoc, "--plugin=protoc-gen-dump=" + dump,
                            "--dump_out=" + tmp, "-I" + protos, name],
                           check=True, env=env)
            with open(out, "rb") as f:
                data = f.read()
            if len(data) > 16384:
                continue  # imports descriptor.proto: too big for a seed
            write("plugin", name.replace(".proto", ""), data)


# ---- server_conn and client_conn: h2peer.h's ops after a config byte
def pb_varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_int(field, v):
    return pb_varint(field << 3) + pb_varint(v)


def pb_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def echo_msg(text="", payload=b"", reply_size=0, delay_ms=0, status_code=0,
             status_message="", hold=False, echo_md=False):
    m = b""
    if text:
        m += pb_bytes(1, text)
    if payload:
        m += pb_bytes(2, payload)
    if reply_size:
        m += pb_int(3, reply_size)
    if delay_ms:
        m += pb_int(4, delay_ms)
    if status_code:
        m += pb_int(5, status_code)
    if status_message:
        m += pb_bytes(6, status_message)
    if hold:
        m += pb_int(7, 1)
    if echo_md:
        m += pb_int(8, 1)
    return m


def chunk(seq, payload=b""):
    return (pb_int(1, seq) if seq else b"") + (pb_bytes(2, payload)
                                               if payload else b"")


def op_headers(sid, lines, flags=0, more=False):
    text = "".join(l + "\n" for l in lines) + "\n"
    return bytes([0 | (0x80 if more else 0), flags, sid]) + text.encode()


def op_msg(sid, msg, end=False, compressed=0, more=False):
    return (bytes([1 | (0x80 if more else 0), 1 if end else 0, sid,
                   compressed]) + struct.pack(">H", len(msg)) + msg)


def op_data(sid, data, end=False):
    return bytes([2, 1 if end else 0, sid]) + struct.pack(">H", len(data)) + \
        data


def op_rst(sid, code):
    return bytes([3, sid, code])


def op_window(sid, inc):
    return bytes([4, sid]) + struct.pack(">I", inc)


def op_ping(ack=False, data=b"fuzzping"):
    return bytes([5, 1 if ack else 0]) + data


def op_settings(entries=(), ack=False):
    return bytes([6, 1 if ack else 0, len(entries)]) + b"".join(
        struct.pack(">HI", i, v) for i, v in entries)


def op_goaway(last_sid, code, debug=b""):
    return bytes([7, last_sid, code, len(debug)]) + debug


def request(path, extra=()):
    return [":method: POST", ":scheme: http", ":path: " + path,
            ":authority: localhost", "content-type: application/grpc",
            "te: trailers", "user-agent: fuzz"] + list(extra)


def hpack_literal(headers):
    # literal header fields without indexing, new names, no Huffman
    out = b""
    for name, value in headers:
        out += b"\x00" + bytes([len(name)]) + name.encode() + \
            bytes([len(value)]) + value.encode()
    return out


def frame_bytes(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def server_conn():
    t = "server_conn"
    echo = "/e2e.Echo/Echo"
    write(t, "unary", bytes([0]) + op_headers(0, request(echo)) +
          op_msg(0, echo_msg("hello", b"abc"), end=True))
    write(t, "unary-coalesced", bytes([0]) +
          op_headers(0, request(echo), more=True) +
          op_msg(0, echo_msg("hi", reply_size=3000, delay_ms=1), end=True,
                 more=True) +
          op_headers(1, request("/e2e.Echo/Big", ["grpc-timeout: 5S"]),
                     more=True) +
          op_msg(1, echo_msg("big", reply_size=20000), end=True))
    write(t, "unary-status-md", bytes([0]) +
          op_headers(0, request(echo, ["x-a: b", "x-c-bin: AAEC",
                                       "grpc-accept-encoding: gzip"])) +
          op_msg(0, echo_msg("x", status_code=5, status_message="nope"),
                 end=True) +
          op_headers(1, request(echo, ["x-md: v", "x-two: 2"])) +
          op_msg(1, echo_msg("md", echo_md=True), end=True))
    write(t, "unary-hold-reset", bytes([0]) +
          op_headers(0, request(echo)) +
          op_msg(0, echo_msg("held", hold=True), end=True) +
          op_headers(1, request(echo)) +
          op_msg(1, echo_msg("held too", hold=True), end=True) +
          op_rst(0, 8) + bytes([11]) + bytes([12]))
    gzmsg = gz(echo_msg("compressed", b"z" * 100))
    write(t, "unary-gzip", bytes([0]) +
          op_headers(0, request(echo, ["grpc-encoding: gzip",
                                       "grpc-accept-encoding: identity,gzip"]))
          + op_msg(0, gzmsg, end=True, compressed=1))
    write(t, "unary-bad", bytes([0]) +
          op_headers(0, request("/e2e.Echo/Nope")) +
          op_headers(1, [":method: POST", ":scheme: http",
                         ":path: " + echo, "content-type: text/plain"],
                     flags=1) +
          op_headers(2, request(echo, ["grpc-timeout: 1n"])) +
          op_msg(2, echo_msg("late"), end=True) +
          op_headers(3, request(echo, ["grpc-encoding: br"]), flags=1))
    bidi = "/streamt.Streams/Bidi"
    write(t, "bidi", bytes([0]) + op_headers(0, request(bidi)) +
          op_msg(0, chunk(1, b"one")) + op_msg(0, chunk(2, b"two" * 50)) +
          op_window(0x80, 100000) + op_msg(0, chunk(3), end=True))
    write(t, "bidi-small-buffer", bytes([2]) + op_headers(0, request(bidi)) +
          b"".join(op_msg(0, chunk(i, b"p" * 700)) for i in range(1, 6)) +
          op_msg(0, chunk(999999)) + op_data(0, b"", end=True))
    write(t, "upload", bytes([0]) +
          op_headers(0, request("/streamt.Streams/Upload")) +
          op_msg(0, chunk(1, b"a" * 10)) + op_msg(0, chunk(2, b"b" * 20)) +
          op_data(0, b"", end=True))
    dl = pb_int(1, 5) + pb_int(2, 100) + pb_int(3, 1)
    write(t, "download", bytes([2]) +
          op_headers(0, request("/streamt.Streams/Download",
                                ["grpc-accept-encoding: gzip"])) +
          op_msg(0, dl, end=True) + op_window(0, 1000) + op_ping() +
          op_settings([(4, 100), (5, 16384)]) + bytes([12, 12]))
    write(t, "raw", bytes([0]) +
          op_headers(0, request("/fuzz.Raw/Unary")) +
          op_msg(0, b"raw bytes", end=True) +
          op_headers(1, request("/fuzz.Raw/Bidi")) +
          op_msg(1, b"first") + op_msg(1, b"second", end=True))
    write(t, "limits", bytes([4 | 8 | 32]) +
          b"".join(op_headers(i, request(echo), more=True) +
                   op_msg(i, echo_msg("n%d" % i), end=True, more=True)
                   for i in range(5)) +
          op_headers(5, request(echo)) +
          op_msg(5, echo_msg("too big", b"q" * 1200), end=True))
    write(t, "health-reflection", bytes([16]) +
          op_headers(0, request("/grpc.health.v1.Health/Check")) +
          op_msg(0, pb_bytes(1, "e2e.Echo"), end=True) +
          op_headers(1, request("/grpc.health.v1.Health/Watch")) +
          op_msg(1, pb_bytes(1, ""), end=True) +
          op_headers(2, request(
              "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")) +
          op_msg(2, pb_bytes(7, "*")) +
          op_msg(2, pb_bytes(4, "grpc.health.v1.Health"), end=True))
    write(t, "continuation-goaway", bytes([64]) +
          op_headers(0, request(echo, ["x-long: " + "l" * 100]), flags=2) +
          op_msg(0, echo_msg("c"), end=True) + op_ping(ack=True) +
          op_goaway(0, 0, b"bye"))
    write(t, "deadline", bytes([0]) +
          op_headers(0, request(bidi, ["grpc-timeout: 1m"])) +
          op_msg(0, chunk(1, b"slow")) +
          op_headers(1, request(echo, ["grpc-timeout: 1m"])) +
          op_msg(1, echo_msg("held past", hold=True), end=True) +
          bytes([15]) + op_msg(0, chunk(2, b"late"), end=True) + bytes([11]))
    block = hpack_literal([(":method", "POST"), (":scheme", "http"),
                           (":path", echo), (":authority", "a"),
                           ("content-type", "application/grpc"),
                           ("te", "trailers")])
    msg = echo_msg("raw mode")
    write(t, "raw-mode", bytes([1]) + frame_bytes(1, 4, 1, block) +
          frame_bytes(0, 1, 1, frame(msg)))


def client_conn():
    t = "client_conn"
    resp = [":status: 200", "content-type: application/grpc",
            "grpc-encoding: identity", "grpc-accept-encoding: identity,gzip"]
    ok = ["grpc-status: 0"]
    # the unary call (stream 1): headers, its response, trailers
    write(t, "unary-ok", bytes([0]) + op_headers(0, resp) +
          op_msg(0, echo_msg("hello")) + op_headers(0, ok, flags=1))
    write(t, "unary-md", bytes([16]) +
          op_headers(0, resp + ["x-init: 1", "x-bin: AAEC"]) +
          op_msg(0, echo_msg("md", b"p" * 50)) +
          op_headers(0, ok + ["grpc-message: fine%20thanks", "x-trail: t",
                              "endpoint-load-metrics-bin: CQAAAAAAAOA/"],
                     flags=1))
    write(t, "unary-trailers-only", bytes([0]) +
          op_headers(0, [":status: 200", "content-type: application/grpc",
                         "grpc-status: 14", "grpc-message: unavailable"],
                     flags=1))
    write(t, "unary-gzip", bytes([32]) +
          op_headers(0, resp[:2] + ["grpc-encoding: gzip"]) +
          op_msg(0, gz(echo_msg("zipped", b"z" * 200)), compressed=1) +
          op_headers(0, ok, flags=1))
    write(t, "unary-http-error", bytes([0]) +
          op_headers(0, [":status: 503", "content-type: text/html"],
                     flags=1))
    write(t, "unary-refused-goaway", bytes([0]) + op_rst(0, 7) +
          op_goaway(0x80, 0, b"bye") + bytes([12]))
    write(t, "unary-too-large", bytes([128]) + op_headers(0, resp) +
          op_msg(0, echo_msg("x" * 200)) + op_headers(0, ok, flags=1))
    # bidi (stream 3), after the unary one completes
    write(t, "bidi", bytes([2]) +
          op_headers(0, resp) + op_msg(0, echo_msg("u")) +
          op_headers(0, ok, flags=1) +
          op_headers(1, resp) + op_msg(1, chunk(1, b"one")) +
          bytes([11, 0]) + op_msg(1, chunk(2, b"two")) +
          bytes([11, 3]) + bytes([11, 4]) + bytes([11, 1]) +
          op_window(1, 1000) + op_window(0x80, 1000) +
          op_headers(1, ok, flags=1))
    write(t, "bidi-cancel", bytes([2 | 16]) +
          op_headers(1, resp) + op_msg(1, chunk(1, b"x" * 100)) +
          bytes([11, 2]) + op_rst(1, 8) + bytes([11, 5]) +
          op_headers(0, [":status: 200", "content-type: application/grpc",
                         "grpc-status: 0"], flags=1))
    # download (stream 3 or 5) and raw (the next)
    write(t, "download-raw", bytes([4 | 8]) +
          op_headers(1, resp) + op_msg(1, chunk(1, b"d" * 10)) +
          op_msg(1, chunk(2, b"d" * 10)) + op_headers(1, ok, flags=1) +
          op_headers(2, resp) + op_msg(2, b"raw reply") +
          op_headers(2, ok, flags=1) + op_ping() +
          op_settings([(3, 1), (4, 65535)]) + op_headers(0, resp) +
          op_data(0, frame(echo_msg("split"))[:4]) +
          op_data(0, frame(echo_msg("split"))[4:]) +
          op_headers(0, ok, flags=1))
    write(t, "deadline", bytes([2 | 64]) + op_headers(1, resp) +
          bytes([15]) + op_msg(1, chunk(1, b"after")) + op_headers(0, resp) +
          op_msg(0, echo_msg("u")) + op_headers(0, ok, flags=1))
    block = hpack_literal([(":status", "200"),
                           ("content-type", "application/grpc")])
    trailers = hpack_literal([("grpc-status", "0")])
    write(t, "raw-mode", bytes([1]) + frame_bytes(1, 4, 1, block) +
          frame_bytes(0, 0, 1, frame(echo_msg("raw mode"))) +
          frame_bytes(1, 5, 1, trailers))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protoc", default=shutil.which("protoc"))
    args = ap.parse_args()
    framing()
    timeout()
    percent()
    base64_()
    metadata()
    grpc_headers()
    compress()
    orca()
    service_config()
    plugin(args.protoc)
    server_conn()
    client_conn()


if __name__ == "__main__":
    main()
