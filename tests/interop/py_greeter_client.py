#!/usr/bin/python3
"""One helloworld.Greeter/SayHello call on stock grpcio: the reference peer
of greeter_server, with greeter_client's command line and output.

    py_greeter_client.py --target HOST:PORT --name X [--timeout-ms N]
                         [--metadata key=value ...] [--print-metadata]
                         [--method /pkg.Service/Method]
                         [--proto FILE] [--protoc PATH]
                         [--use_tls [--tls_ca FILE]
                          [--server_host_override NAME]
                          [--tls_cert FILE --tls_key FILE]]

Prints the reply message on stdout and exits 0; on failure prints
"<STATUS_NAME>: <details>" on stderr and exits 1; bad flags exit 2.
Values of "-bin" keys may use \\xNN escapes; --print-metadata prints
"initial key=value" / "trailing key=value" lines on stderr, escaped alike.
--use_tls calls over TLS (grpc.ssl_channel_credentials with the CA of
--tls_ca; --server_host_override becomes grpc.ssl_target_name_override;
--tls_cert / --tls_key for mutual TLS).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common  # noqa: E402

try:
    import grpc
except ImportError:  # not Debian's python3-grpcio: ctest shows a skip
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)


def parse_metadata(ap, items):
    md = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            ap.error("--metadata wants key=value, got %r" % item)
        if key.endswith("-bin"):
            try:
                md.append((key, interop_common.unescape(value)))
            except ValueError as e:
                ap.error(str(e))
        else:
            md.append((key, value))
    return md


def print_metadata(what, md):
    for key, value in md or ():
        print("%s %s=%s" % (what, key, interop_common.escape(value)),
              file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--timeout-ms", type=int, default=0)
    ap.add_argument("--metadata", action="append", default=[])
    ap.add_argument("--print-metadata", action="store_true")
    ap.add_argument("--method", default=interop_common.SAY_HELLO)
    ap.add_argument("--proto", help="helloworld.proto ($HELLOWORLD_PROTO)")
    ap.add_argument("--protoc", help="protoc ($PROTOC)")
    interop_common.add_client_tls_flags(ap)
    args = ap.parse_args()
    if args.timeout_ms < 0:
        ap.error("--timeout-ms must not be negative")
    metadata = parse_metadata(ap, args.metadata)

    pb = interop_common.load_helloworld(args.proto, args.protoc)
    with interop_common.client_channel(ap, args, args.target) as channel:
        call = channel.unary_unary(
            args.method,
            request_serializer=pb.HelloRequest.SerializeToString,
            response_deserializer=pb.HelloReply.FromString)
        try:
            reply, info = call.with_call(
                pb.HelloRequest(name=args.name),
                timeout=args.timeout_ms / 1000.0 if args.timeout_ms else None,
                metadata=metadata or None)
        except grpc.RpcError as e:
            print("%s: %s" % (e.code().name, e.details() or ""),
                  file=sys.stderr)
            if args.print_metadata:
                print_metadata("initial", e.initial_metadata())
                print_metadata("trailing", e.trailing_metadata())
            return 1
        print(reply.message, flush=True)
        if args.print_metadata:
            print_metadata("initial", info.initial_metadata())
            print_metadata("trailing", info.trailing_metadata())
    return 0


if __name__ == "__main__":
    sys.exit(main())
