#!/usr/bin/python3
"""helloworld.Greeter on stock grpcio: the reference peer of greeter_client.

    py_greeter_server.py [--port N] [--host H] [--threads T]
                         [--proto FILE] [--protoc PATH]
                         [--use_tls --tls_cert FILE --tls_key FILE
                          [--tls_client_ca FILE [--require_client_cert]]]
                         [--grpc-arg KEY=INT ...]

Behaves like examples/helloworld/greeter_server: prints "listening on <port>"
once it accepts (port 0, the default, picks a free one), replies
"Hello <name>", echoes request metadata whose key starts with "x-echo-" as
initial and as trailing metadata, answers a name "sleep:<ms>" after <ms> ms,
and stops gracefully (2 s grace) on SIGINT/SIGTERM. --use_tls serves TLS
only (grpc.ssl_server_credentials from the PEM files of --tls_cert and
--tls_key; --tls_client_ca / --require_client_cert for mutual TLS).
--grpc-arg passes an integer channel argument to the grpcio server (e.g.
grpc.http2.max_ping_strikes=2); repeatable.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common  # noqa: E402

try:
    import grpc
except ImportError:  # not Debian's python3-grpcio: ctest shows a skip
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

GRACE_S = 2.0
MAX_SLEEP_MS = 3600000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--threads", type=int, default=0,
                    help="handler threads (default 64)")
    ap.add_argument("--proto", help="helloworld.proto ($HELLOWORLD_PROTO)")
    ap.add_argument("--protoc", help="protoc ($PROTOC)")
    interop_common.add_server_tls_flags(ap)
    ap.add_argument("--grpc-arg", action="append", default=[],
                    help="KEY=INT, a grpcio server option (repeatable)")
    args = ap.parse_args()
    options = []
    for kv in args.grpc_arg:
        key, sep, val = kv.partition("=")
        if not sep or not val.lstrip("-").isdigit():
            ap.error("--grpc-arg wants KEY=INT, got %r" % kv)
        options.append((key, int(val)))
    if not 0 <= args.port <= 65535 or args.threads < 0:
        ap.error("bad --port or --threads")
    creds = interop_common.server_credentials(ap, args)  # None: plaintext

    pb = interop_common.load_helloworld(args.proto, args.protoc)

    def say_hello(request, context):
        echo = [(k, v) for k, v in context.invocation_metadata()
                if k.startswith("x-echo-")]
        if echo:
            context.send_initial_metadata(echo)
            context.set_trailing_metadata(echo)
        name = request.name
        if name.startswith("sleep:") and name[6:].isdigit():
            time.sleep(min(int(name[6:]), MAX_SLEEP_MS) / 1000.0)
        return pb.HelloReply(message="Hello " + name)

    handler = grpc.method_handlers_generic_handler("helloworld.Greeter", {
        "SayHello": grpc.unary_unary_rpc_method_handler(
            say_hello,
            request_deserializer=pb.HelloRequest.FromString,
            response_serializer=pb.HelloReply.SerializeToString),
    })
    return interop_common.serve((handler,), args.host, args.port,
                                args.threads or 64, creds, GRACE_S,
                                options)


if __name__ == "__main__":
    sys.exit(main())
