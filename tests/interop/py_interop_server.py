#!/usr/bin/python3
"""grpc.testing.TestService on stock grpcio: the reference interop server.

    py_interop_server.py --port N [--host H] [--proto_dir DIR] [--protoc PATH]
                         [--use_tls --tls_cert FILE --tls_key FILE
                          [--tls_client_ca FILE [--require_client_cert]]]

Implements the "Server" section of gRPC's doc/interop-test-descriptions.md
with grpcio's generic handler API (no grpc_tools): EmptyCall, UnaryCall,
CacheableUnaryCall, StreamingOutputCall, StreamingInputCall, FullDuplexCall
and HalfDuplexCall; UnimplementedCall and grpc.testing.UnimplementedService are
left out, so they answer UNIMPLEMENTED. Prints "listening on <port>" (the
py_greeter_server.py convention) and flushes once it accepts calls; --port 0
picks a free port. Stops gracefully (2 s grace) on SIGTERM/SIGINT.

--use_tls (alone, =true or =false; gRPC's flag) serves TLS only, with
grpc.ssl_server_credentials from the PEM files of --tls_cert and --tls_key;
--tls_client_ca asks clients for a certificate from those CAs and
--require_client_cert refuses clients without one (mutual TLS).

The message classes come from `protoc --python_out`, run at start-up into a
temporary directory, from examples/interop/grpc/testing/*.proto
(--proto_dir or $INTEROP_PROTO_DIR: the directory holding grpc/testing/;
--protoc or $PROTOC: the protoc binary).

What a grpcio server cannot do, and so does not:
* CompressedRequest (expect_compressed): grpcio decompresses before the
  handler runs and does not tell it whether the message had the compressed
  flag set, so expect_compressed is ignored (never INVALID_ARGUMENT). Clients
  talking to this server must skip their compression probes.
* ResponseParameters.compressed / response_compressed are honoured by turning
  gzip on for the call (context.set_compression) and
  context.disable_next_message_compression() for the messages that must go
  out uncompressed.
"""

import argparse
import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import interop_common as ic  # noqa: E402

DEFAULT_PROTO_DIR = os.path.join(HERE, "..", "..", "examples", "interop")

try:
    import grpc
except ImportError:  # not Debian's python3-grpcio: ctest shows a skip
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

SERVICE = "grpc.testing.TestService"
GRACE_S = 2.0
ECHO_INITIAL = "x-grpc-test-echo-initial"
ECHO_TRAILING = "x-grpc-test-echo-trailing-bin"
MAX_PAYLOAD = 64 * 1024 * 1024      # refuse absurd response sizes
MAX_INTERVAL_US = 60 * 1000 * 1000  # and absurd sleeps


def load_testing_protos(proto_dir=None, protoc=None):
    """Runs protoc --python_out on grpc/testing/{empty,messages,test}.proto
    into a temporary directory and returns a namespace with .empty and
    .messages (the *_pb2 modules).

    The modules are loaded from their files under private names: the
    generated package would be "grpc.testing", which the installed grpc
    package shadows. test_pb2 only holds descriptors (services go through
    grpcio's generic API), so it is generated, which checks that test.proto
    compiles, but not imported."""
    proto_dir = os.path.abspath(proto_dir
                                or os.environ.get("INTEROP_PROTO_DIR")
                                or DEFAULT_PROTO_DIR)
    protoc = protoc or os.environ.get("PROTOC") or "protoc"
    out = tempfile.mkdtemp(prefix="sluice-interop-")
    atexit.register(shutil.rmtree, out, True)
    files = [os.path.join(proto_dir, "grpc", "testing", n + ".proto")
             for n in ("empty", "messages", "test")]
    subprocess.run([protoc, "-I", proto_dir, "--python_out", out] + files,
                   check=True, timeout=60, stdin=subprocess.DEVNULL)
    ns = types.SimpleNamespace()
    for name in ("empty", "messages"):
        path = os.path.join(out, "grpc", "testing", name + "_pb2.py")
        spec = importlib.util.spec_from_file_location(
            "sluice_interop_%s_pb2" % name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        setattr(ns, name, mod)
    return ns


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def status_code(number):
    """grpc.StatusCode for a numeric code (UNKNOWN for numbers outside
    0..16: grpcio can only send its enum)."""
    return _CODES.get(number, grpc.StatusCode.UNKNOWN)


class TestService:
    def __init__(self, pb):
        self.pb = pb
        m = pb.messages
        e = pb.empty
        self.handler = grpc.method_handlers_generic_handler(SERVICE, {
            "EmptyCall": grpc.unary_unary_rpc_method_handler(
                self.empty_call, e.Empty.FromString,
                e.Empty.SerializeToString),
            "UnaryCall": grpc.unary_unary_rpc_method_handler(
                self.unary_call, m.SimpleRequest.FromString,
                m.SimpleResponse.SerializeToString),
            "CacheableUnaryCall": grpc.unary_unary_rpc_method_handler(
                self.cacheable_unary_call, m.SimpleRequest.FromString,
                m.SimpleResponse.SerializeToString),
            "StreamingOutputCall": grpc.unary_stream_rpc_method_handler(
                self.streaming_output_call,
                m.StreamingOutputCallRequest.FromString,
                m.StreamingOutputCallResponse.SerializeToString),
            "StreamingInputCall": grpc.stream_unary_rpc_method_handler(
                self.streaming_input_call,
                m.StreamingInputCallRequest.FromString,
                m.StreamingInputCallResponse.SerializeToString),
            "FullDuplexCall": grpc.stream_stream_rpc_method_handler(
                self.full_duplex_call,
                m.StreamingOutputCallRequest.FromString,
                m.StreamingOutputCallResponse.SerializeToString),
            "HalfDuplexCall": grpc.stream_stream_rpc_method_handler(
                self.half_duplex_call,
                m.StreamingOutputCallRequest.FromString,
                m.StreamingOutputCallResponse.SerializeToString),
            # UnimplementedCall: deliberately absent -> UNIMPLEMENTED.
        })

    # ---- helpers

    @staticmethod
    def echo_metadata(context):
        """Echo Metadata: x-grpc-test-echo-initial goes back as initial
        metadata (sent now), x-grpc-test-echo-trailing-bin as trailing
        metadata (sent with the status, whatever it is)."""
        initial, trailing = [], []
        for key, value in context.invocation_metadata():
            if key == ECHO_INITIAL:
                initial.append((key, value))
            elif key == ECHO_TRAILING:
                trailing.append((key, value))
        if initial:
            context.send_initial_metadata(initial)
        if trailing:
            context.set_trailing_metadata(trailing)

    def payload(self, context, size, response_type=0):
        m = self.pb.messages
        if response_type != m.COMPRESSABLE:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "unsupported response_type %d" % response_type)
        if not 0 <= size <= MAX_PAYLOAD:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "bad response size %d" % size)
        return m.Payload(type=m.COMPRESSABLE, body=bytes(size))

    @staticmethod
    def wants_status(request):
        return (request.HasField("response_status")
                and request.response_status.code != 0)

    @staticmethod
    def end_with_status(context, echo_status):
        """Echo Status for streaming handlers: set code and message and let
        the handler return (abort() would also work, but raising inside a
        response generator is noisier in grpcio's logs)."""
        context.set_code(status_code(echo_status.code))
        context.set_details(echo_status.message)

    def responses(self, context, request, state):
        """The StreamingOutputCallResponses for one StreamingOutputCallRequest,
        honouring interval_us (sleep before each) and compressed (gzip for the
        call once any response asks for it; the others are sent with
        disable_next_message_compression()). Yields responses."""
        m = self.pb.messages
        for params in request.response_parameters:
            if params.interval_us > 0:
                time.sleep(min(params.interval_us, MAX_INTERVAL_US) / 1e6)
            body = self.payload(context, params.size, request.response_type)
            compressed = (params.HasField("compressed")
                          and params.compressed.value)
            if compressed and not state["gzip"]:
                context.set_compression(grpc.Compression.Gzip)
                state["gzip"] = True
            if state["gzip"] and not compressed:
                context.disable_next_message_compression()
            yield m.StreamingOutputCallResponse(payload=body)

    # ---- methods

    def empty_call(self, request, context):
        self.echo_metadata(context)
        return self.pb.empty.Empty()

    def unary_call(self, request, context):
        self.echo_metadata(context)
        # CompressedRequest: request.expect_compressed cannot be checked here,
        # grpcio hides the per-message compressed flag from handlers (see the
        # module docstring). It is ignored.
        if self.wants_status(request):
            context.abort(status_code(request.response_status.code),
                          request.response_status.message)
        if request.HasField("response_compressed"):
            context.set_compression(
                grpc.Compression.Gzip if request.response_compressed.value
                else grpc.Compression.NoCompression)
        body = self.payload(context, request.response_size,
                            request.response_type)
        return self.pb.messages.SimpleResponse(payload=body)

    def cacheable_unary_call(self, request, context):
        # The payload is the current time in ns, as ASCII decimal; the
        # cache-control header lets a caching proxy keep the answer 60 s.
        # Over POST (all grpcio can do) this is a plain unary call.
        context.send_initial_metadata(
            (("cache-control", "max-age=60, public"),))
        now = str(time.time_ns()).encode()
        m = self.pb.messages
        return m.SimpleResponse(payload=m.Payload(type=m.COMPRESSABLE,
                                                  body=now))

    def streaming_output_call(self, request, context):
        self.echo_metadata(context)
        yield from self.responses(context, request, {"gzip": False})
        # Echo Status after every requested response went out.
        if self.wants_status(request):
            self.end_with_status(context, request.response_status)

    def streaming_input_call(self, request_iterator, context):
        self.echo_metadata(context)
        # expect_compressed is ignored: see unary_call.
        total = 0
        for request in request_iterator:
            total += len(request.payload.body)
        return self.pb.messages.StreamingInputCallResponse(
            aggregated_payload_size=total)

    def full_duplex_call(self, request_iterator, context):
        self.echo_metadata(context)
        state = {"gzip": False}
        for request in request_iterator:
            yield from self.responses(context, request, state)
            # Echo Status: the responses this request asked for go out
            # first, then the call ends; later requests are not read.
            if self.wants_status(request):
                self.end_with_status(context, request.response_status)
                return

    def half_duplex_call(self, request_iterator, context):
        self.echo_metadata(context)
        requests = list(request_iterator)  # everything up to half close
        state = {"gzip": False}
        for request in requests:
            yield from self.responses(context, request, state)
            if self.wants_status(request):
                self.end_with_status(context, request.response_status)
                return


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True,
                    help="port to listen on, 0 picks a free one")
    ap.add_argument("--host", default="127.0.0.1")
    ic.add_server_tls_flags(ap)
    ap.add_argument("--threads", type=int, default=64,
                    help="handler threads")
    ap.add_argument("--proto_dir",
                    help="directory holding grpc/testing/*.proto "
                    "($INTEROP_PROTO_DIR)")
    ap.add_argument("--protoc", help="protoc ($PROTOC)")
    args = ap.parse_args()
    if not 0 <= args.port <= 65535 or args.threads <= 0:
        ap.error("bad --port or --threads")
    creds = ic.server_credentials(ap, args)  # None: plaintext

    pb = load_testing_protos(args.proto_dir, args.protoc)
    service = TestService(pb)
    return ic.serve((service.handler,), args.host, args.port, args.threads,
                    creds, GRACE_S)


if __name__ == "__main__":
    sys.exit(main())
