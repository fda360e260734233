#!/usr/bin/python3
"""gRPC interop test client on stock grpcio.

    py_interop_client.py --server_host H --server_port P --test_case NAME
                         [--use_tls [--tls_ca FILE]
                          [--server_host_override NAME]
                          [--tls_cert FILE --tls_key FILE]]
                         [--skip_compression_probe]
                         [--proto_dir DIR] [--protoc PATH]

Runs the client cases of gRPC's doc/interop-test-descriptions.md against a
grpc.testing.TestService server. NAME is one case, a comma-separated list,
or "all" (every case of CASES, in that order). Prints one line per case,
"PASS <case>" or "FAIL <case>: <reason>", and exits 0 only when all passed
(2 on a usage error, 77 when grpc cannot be imported). Every wait is bounded:
each call has a deadline (CALL_TIMEOUT_S unless the case sets its own).

--use_tls (alone, =true or =false; gRPC's flag) calls over TLS:
grpc.ssl_channel_credentials with the CA certificates of --tls_ca (grpcio's
roots without it) and, for mutual TLS, --tls_cert / --tls_key;
--server_host_override NAME becomes grpc.ssl_target_name_override (the name
the server's certificate is checked against). Without --use_tls it is
ignored, and so is --use_test_ca.

Adaptations to what a grpcio client can do (a C peer should do the same to
line up with it):
* client_compressed_unary: the probe (expect_compressed=true, sent
  uncompressed, must fail INVALID_ARGUMENT), then expect_compressed=true sent
  with compression=grpc.Compression.Gzip, then expect_compressed=false sent
  uncompressed.
* client_compressed_streaming: the probe, then ONE stream sent with per-call
  gzip: grpcio cannot turn compression off for one message of a call, so the
  second message (45904 bytes, expect_compressed=false) goes out compressed
  too; a server accepts a compressed message when expect_compressed is false.
* server_compressed_unary / server_compressed_streaming: grpcio does not
  expose the compressed flag of received messages, so only the status and the
  payload sizes (and zero contents) are checked.
* --skip_compression_probe skips both INVALID_ARGUMENT probes: needed against
  a grpcio server, which cannot check expect_compressed.
"""

import argparse
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import grpc
except ImportError:  # not Debian's python3-grpcio: ctest shows a skip
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

from py_interop_server import load_testing_protos  # noqa: E402
import interop_common as ic  # noqa: E402

CALL_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
TS = "/grpc.testing.TestService/"
ECHO_INITIAL = ("x-grpc-test-echo-initial", "test_initial_metadata_value")
ECHO_TRAILING = ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab")
SPECIAL_MESSAGE = ("\t\ntest with whitespace\r\nand Unicode BMP \u263a "
                   "and non-BMP \U0001f608\t\n")

CASES = [
    "empty_unary",
    "large_unary",
    "client_streaming",
    "server_streaming",
    "ping_pong",
    "empty_stream",
    "timeout_on_sleeping_server",
    "cancel_after_begin",
    "cancel_after_first_response",
    "custom_metadata",
    "status_code_and_message",
    "special_status_message",
    "unimplemented_method",
    "unimplemented_service",
    "client_compressed_unary",
    "server_compressed_unary",
    "client_compressed_streaming",
    "server_compressed_streaming",
]


class Failure(Exception):
    pass


def expect(ok, why):
    if not ok:
        raise Failure(why)


def expect_error(exc, code, what):
    expect(exc.code() == code, "%s: status %s (%r), want %s"
           % (what, exc.code(), exc.details(), code))


def check_payload(payload, size, what):
    body = payload.body
    expect(len(body) == size, "%s: payload of %d bytes, want %d"
           % (what, len(body), size))
    expect(body.count(0) == size, "%s: payload is not all zeros" % what)


def metadata_value(md, key):
    for k, v in md or ():
        if k == key:
            return v
    return None


class RequestQueue:
    """A request iterator fed from the test: put() sends, close() half-closes.
    Its waits are bounded: with nothing put for `idle` seconds it ends (a
    half close) rather than hang the call's sending thread."""

    _END = object()

    def __init__(self, idle=CALL_TIMEOUT_S):
        self.q = queue.Queue()
        self.idle = idle

    def put(self, request):
        self.q.put(request)

    def close(self):
        self.q.put(self._END)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            item = self.q.get(timeout=self.idle)
        except queue.Empty:
            raise StopIteration
        if item is self._END:
            raise StopIteration
        return item


class Client:
    def __init__(self, channel, pb, skip_probe):
        self.ch = channel
        self.m = pb.messages
        self.e = pb.empty
        self.skip_probe = skip_probe
        m, e = self.m, self.e
        self.empty_call = channel.unary_unary(
            TS + "EmptyCall", e.Empty.SerializeToString, e.Empty.FromString)
        self.unary_call = channel.unary_unary(
            TS + "UnaryCall", m.SimpleRequest.SerializeToString,
            m.SimpleResponse.FromString)
        self.streaming_output_call = channel.unary_stream(
            TS + "StreamingOutputCall",
            m.StreamingOutputCallRequest.SerializeToString,
            m.StreamingOutputCallResponse.FromString)
        self.streaming_input_call = channel.stream_unary(
            TS + "StreamingInputCall",
            m.StreamingInputCallRequest.SerializeToString,
            m.StreamingInputCallResponse.FromString)
        self.full_duplex_call = channel.stream_stream(
            TS + "FullDuplexCall",
            m.StreamingOutputCallRequest.SerializeToString,
            m.StreamingOutputCallResponse.FromString)

    # ---- request builders

    def payload(self, size):
        return self.m.Payload(type=self.m.COMPRESSABLE, body=bytes(size))

    def large_request(self, **fields):
        return self.m.SimpleRequest(response_type=self.m.COMPRESSABLE,
                                    response_size=314159,
                                    payload=self.payload(271828), **fields)

    def output_request(self, sizes, payload_size=None, **fields):
        req = self.m.StreamingOutputCallRequest(
            response_type=self.m.COMPRESSABLE, **fields)
        for size in sizes:
            req.response_parameters.add(size=size)
        if payload_size is not None:
            req.payload.CopyFrom(self.payload(payload_size))
        return req

    # ---- cases

    def empty_unary(self):
        resp = self.empty_call(self.e.Empty(), timeout=CALL_TIMEOUT_S)
        expect(isinstance(resp, self.e.Empty), "response is not an Empty")

    def large_unary(self):
        resp = self.unary_call(self.large_request(), timeout=CALL_TIMEOUT_S)
        check_payload(resp.payload, 314159, "response")

    def client_streaming(self):
        reqs = [self.m.StreamingInputCallRequest(payload=self.payload(n))
                for n in (27182, 8, 1828, 45904)]
        resp = self.streaming_input_call(iter(reqs), timeout=CALL_TIMEOUT_S)
        expect(resp.aggregated_payload_size == 74922,
               "aggregated_payload_size %d, want 74922"
               % resp.aggregated_payload_size)

    def server_streaming(self):
        sizes = [31415, 9, 2653, 58979]
        call = self.streaming_output_call(self.output_request(sizes),
                                          timeout=CALL_TIMEOUT_S)
        got = list(call)
        expect(len(got) == len(sizes), "%d responses, want %d"
               % (len(got), len(sizes)))
        for i, (resp, size) in enumerate(zip(got, sizes)):
            check_payload(resp.payload, size, "response %d" % i)
        expect(call.code() == grpc.StatusCode.OK, "status %s" % call.code())

    def ping_pong(self):
        pairs = [(31415, 27182), (9, 8), (2653, 1828), (58979, 45904)]
        reqs = RequestQueue()
        call = self.full_duplex_call(reqs, timeout=CALL_TIMEOUT_S)
        try:
            for i, (resp_size, req_size) in enumerate(pairs):
                reqs.put(self.output_request([resp_size], req_size))
                resp = next(call)
                check_payload(resp.payload, resp_size, "response %d" % i)
            reqs.close()
            rest = list(call)
            expect(not rest, "%d responses after the last pong" % len(rest))
        except StopIteration:
            raise Failure("stream ended after %d responses (%s)"
                          % (i, call.code()))
        finally:
            reqs.close()
            call.cancel()  # no-op when the call already ended
        expect(call.code() == grpc.StatusCode.OK, "status %s" % call.code())

    def empty_stream(self):
        call = self.full_duplex_call(iter(()), timeout=CALL_TIMEOUT_S)
        got = list(call)
        expect(not got, "%d responses, want none" % len(got))
        expect(call.code() == grpc.StatusCode.OK, "status %s" % call.code())

    def timeout_on_sleeping_server(self):
        reqs = RequestQueue()
        reqs.put(self.output_request([], 27182))
        call = self.full_duplex_call(reqs, timeout=0.001)  # the case's 1 ms
        try:
            got = list(call)
            raise Failure("call succeeded with %d responses" % len(got))
        except grpc.RpcError as exc:
            expect_error(exc, grpc.StatusCode.DEADLINE_EXCEEDED, "call")
        finally:
            reqs.close()

    def cancel_after_begin(self):
        reqs = RequestQueue()  # nothing is ever sent on it
        fut = self.streaming_input_call.future(reqs, timeout=CALL_TIMEOUT_S)
        try:
            fut.cancel()
            expect(fut.cancelled() or fut.done(), "call still running")
            expect(fut.code() == grpc.StatusCode.CANCELLED,
                   "status %s, want CANCELLED" % fut.code())
        finally:
            reqs.close()

    def cancel_after_first_response(self):
        reqs = RequestQueue()
        call = self.full_duplex_call(reqs, timeout=CALL_TIMEOUT_S)
        try:
            reqs.put(self.output_request([31415], 27182))
            resp = next(call)
            check_payload(resp.payload, 31415, "response")
            call.cancel()
            try:
                next(call)
                raise Failure("a second response after cancel")
            except StopIteration:
                raise Failure("stream ended normally after cancel")
            except grpc.RpcError as exc:
                expect_error(exc, grpc.StatusCode.CANCELLED, "call")
            expect(call.code() == grpc.StatusCode.CANCELLED,
                   "status %s, want CANCELLED" % call.code())
        finally:
            reqs.close()
            call.cancel()

    def custom_metadata(self):
        md = (ECHO_INITIAL, ECHO_TRAILING)

        def check(initial, trailing, what):
            v = metadata_value(initial, ECHO_INITIAL[0])
            expect(v == ECHO_INITIAL[1], "%s: initial %s = %r, want %r"
                   % (what, ECHO_INITIAL[0], v, ECHO_INITIAL[1]))
            v = metadata_value(trailing, ECHO_TRAILING[0])
            expect(v == ECHO_TRAILING[1], "%s: trailing %s = %r, want %r"
                   % (what, ECHO_TRAILING[0], v, ECHO_TRAILING[1]))

        resp, call = self.unary_call.with_call(
            self.large_request(), metadata=md, timeout=CALL_TIMEOUT_S)
        check_payload(resp.payload, 314159, "unary response")
        check(call.initial_metadata(), call.trailing_metadata(), "unary")

        call = self.full_duplex_call(
            iter([self.output_request([314159], 271828)]), metadata=md,
            timeout=CALL_TIMEOUT_S)
        got = list(call)
        expect(len(got) == 1, "full duplex: %d responses, want 1" % len(got))
        check_payload(got[0].payload, 314159, "full duplex response")
        check(call.initial_metadata(), call.trailing_metadata(),
              "full duplex")

    def status_code_and_message(self):
        status = self.m.EchoStatus(code=2, message="test status message")
        self._echo_status(status)
        call = self.full_duplex_call(
            iter([self.output_request([], response_status=status)]),
            timeout=CALL_TIMEOUT_S)
        try:
            got = list(call)
            raise Failure("full duplex succeeded (%d responses)" % len(got))
        except grpc.RpcError as exc:
            expect_error(exc, grpc.StatusCode.UNKNOWN, "full duplex")
            expect(exc.details() == status.message,
                   "full duplex: message %r, want %r"
                   % (exc.details(), status.message))

    def special_status_message(self):
        self._echo_status(self.m.EchoStatus(code=2, message=SPECIAL_MESSAGE))

    def _echo_status(self, status):
        try:
            self.unary_call(self.m.SimpleRequest(response_status=status),
                            timeout=CALL_TIMEOUT_S)
            raise Failure("unary call succeeded")
        except grpc.RpcError as exc:
            expect_error(exc, grpc.StatusCode.UNKNOWN, "unary")
            expect(exc.details() == status.message,
                   "unary: message %r, want %r"
                   % (exc.details(), status.message))

    def _unimplemented(self, path):
        call = self.ch.unary_unary(path, self.e.Empty.SerializeToString,
                                   self.e.Empty.FromString)
        try:
            call(self.e.Empty(), timeout=CALL_TIMEOUT_S)
            raise Failure("%s succeeded" % path)
        except grpc.RpcError as exc:
            expect_error(exc, grpc.StatusCode.UNIMPLEMENTED, path)

    def unimplemented_method(self):
        self._unimplemented(TS + "UnimplementedCall")

    def unimplemented_service(self):
        self._unimplemented("/grpc.testing.UnimplementedService/"
                            "UnimplementedCall")

    def client_compressed_unary(self):
        def req(expect_compressed):
            return self.large_request(expect_compressed=self.m.BoolValue(
                value=expect_compressed))

        if not self.skip_probe:
            try:
                self.unary_call(req(True), timeout=CALL_TIMEOUT_S,
                                compression=grpc.Compression.NoCompression)
                raise Failure("probe (expect_compressed, sent uncompressed) "
                              "succeeded: want INVALID_ARGUMENT")
            except grpc.RpcError as exc:
                expect_error(exc, grpc.StatusCode.INVALID_ARGUMENT, "probe")
        resp = self.unary_call(req(True), timeout=CALL_TIMEOUT_S,
                               compression=grpc.Compression.Gzip)
        check_payload(resp.payload, 314159, "compressed call")
        resp = self.unary_call(req(False), timeout=CALL_TIMEOUT_S,
                               compression=grpc.Compression.NoCompression)
        check_payload(resp.payload, 314159, "uncompressed call")

    def server_compressed_unary(self):
        # grpcio does not show whether a received message had the compressed
        # flag: only the status and the payload are checked.
        for compressed in (True, False):
            resp = self.unary_call(
                self.large_request(
                    response_compressed=self.m.BoolValue(value=compressed)),
                timeout=CALL_TIMEOUT_S)
            check_payload(resp.payload, 314159,
                          "response_compressed=%s" % compressed)

    def client_compressed_streaming(self):
        def req(expect_compressed, size):
            return self.m.StreamingInputCallRequest(
                payload=self.payload(size),
                expect_compressed=self.m.BoolValue(value=expect_compressed))

        if not self.skip_probe:
            try:
                self.streaming_input_call(
                    iter([req(True, 27182)]), timeout=CALL_TIMEOUT_S,
                    compression=grpc.Compression.NoCompression)
                raise Failure("probe (expect_compressed, sent uncompressed) "
                              "succeeded: want INVALID_ARGUMENT")
            except grpc.RpcError as exc:
                expect_error(exc, grpc.StatusCode.INVALID_ARGUMENT, "probe")
        # grpcio compresses every message of a call or none: both go out
        # gzipped; the second says expect_compressed=false, which a server
        # does not hold against a compressed message.
        resp = self.streaming_input_call(
            iter([req(True, 27182), req(False, 45904)]),
            timeout=CALL_TIMEOUT_S, compression=grpc.Compression.Gzip)
        expect(resp.aggregated_payload_size == 73086,
               "aggregated_payload_size %d, want 73086"
               % resp.aggregated_payload_size)

    def server_compressed_streaming(self):
        # As in server_compressed_unary, the compressed flags are not visible.
        req = self.m.StreamingOutputCallRequest(
            response_type=self.m.COMPRESSABLE)
        req.response_parameters.add(size=31415,
                                    compressed=self.m.BoolValue(value=True))
        req.response_parameters.add(size=92653,
                                    compressed=self.m.BoolValue(value=False))
        call = self.streaming_output_call(req, timeout=CALL_TIMEOUT_S)
        got = list(call)
        expect(len(got) == 2, "%d responses, want 2" % len(got))
        check_payload(got[0].payload, 31415, "response 0")
        check_payload(got[1].payload, 92653, "response 1")
        expect(call.code() == grpc.StatusCode.OK, "status %s" % call.code())


def run_case(client, name):
    try:
        getattr(client, name)()
    except Failure as f:
        return str(f)
    except grpc.RpcError as exc:
        return "RPC failed: %s %r" % (exc.code(), exc.details())
    except Exception as exc:  # a bug in the case or a broken peer
        return "%s: %s" % (type(exc).__name__, exc)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server_host", default="127.0.0.1")
    ap.add_argument("--server_port", type=int, required=True)
    ap.add_argument("--test_case", required=True,
                    help="a case, a comma-separated list, or all: "
                    + ", ".join(CASES))
    ic.add_client_tls_flags(ap)
    ap.add_argument("--use_test_ca", help="ignored: the CA is --tls_ca's")
    ap.add_argument("--skip_compression_probe", action="store_true",
                    help="skip the expect_compressed INVALID_ARGUMENT probes "
                    "(for servers that cannot check expect_compressed)")
    ap.add_argument("--proto_dir",
                    help="directory holding grpc/testing/*.proto "
                    "($INTEROP_PROTO_DIR)")
    ap.add_argument("--protoc", help="protoc ($PROTOC)")
    args = ap.parse_args()
    if not 0 < args.server_port <= 65535:
        ap.error("bad --server_port")
    cases = (CASES if args.test_case == "all"
             else [c for c in args.test_case.split(",") if c])
    unknown = [c for c in cases if c not in CASES]
    if unknown or not cases:
        ap.error("unknown --test_case %s (known: all, %s)"
                 % (",".join(unknown) or "''", ", ".join(CASES)))

    pb = load_testing_protos(args.proto_dir, args.protoc)
    host = args.server_host
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    target = "%s:%d" % (host, args.server_port)
    failed = 0
    with ic.client_channel(ap, args, target) as channel:
        try:
            grpc.channel_ready_future(channel).result(
                timeout=CONNECT_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            print("cannot connect to %s within %.0f s"
                  % (target, CONNECT_TIMEOUT_S), file=sys.stderr)
        client = Client(channel, pb, args.skip_compression_probe)
        for name in cases:
            t0 = time.monotonic()
            why = run_case(client, name)
            took = time.monotonic() - t0
            if why is None:
                print("PASS %s" % name, flush=True)
            else:
                failed += 1
                print("FAIL %s: %s" % (name, why.replace("\n", "\\n")),
                      flush=True)
            print("  %s: %.3f s" % (name, took), file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
