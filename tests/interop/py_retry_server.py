#!/usr/bin/python3
"""retrytest.RetryTest on stock grpcio: the reference server of the retry tests.

    py_retry_server.py [--port N] [--host H] [--threads T] [--delay-ms N]
                       [--proto FILE] [--protoc PATH]

Serves tests/interop/retrytest.proto: each request (a Behavior) says how
the attempt is answered (fail the first k attempts of its key with a code,
a grpc-retry-pushback-ms trailer, response headers before the failure, a
delay); the server records every attempt's grpc-previous-rpc-attempts,
arrival time (monotonic ms) and remaining deadline per key and returns the
record (Report). Observe returns it without counting an attempt.

--delay-ms N makes every Unary and Stream attempt of this server instance
wait N ms before it is answered (on top of the request's own delay_ms):
the slow destination of the hedging test. Observe is never delayed. The
server also records, per attempt, whether the client cancelled it before
it was answered (context.add_callback / is_active): a delayed attempt
stops waiting as soon as it is cancelled; Attempt.cancelled, Attempt.done
and Report.cancelled say what was seen. Prints
"listening on <port>" once it accepts (port 0, the default, picks a free
one) and stops on SIGINT/SIGTERM. Exits 77 when grpc cannot be imported.
"""

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common  # noqa: E402

try:
    import grpc
except ImportError:  # not Debian's python3-grpcio: ctest shows a skip
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO = os.path.join(HERE, "retrytest.proto")
GRACE_S = 1.0
MAX_DELAY_MS = 60000
CODES = {c.value[0]: c for c in grpc.StatusCode}


class AttemptState:
    """What happened to one attempt: answered by the handler, cancelled by
    the client, over (either way, or failed). Guarded by Records.mu."""

    def __init__(self, pb_attempt):
        self.pb = pb_attempt
        self.answered = False
        self.cancelled = False
        self.done = False
        self.ended = threading.Event()  # set when the RPC terminates


class Records:
    """Attempts seen per key."""

    def __init__(self, pb):
        self.pb = pb
        self.mu = threading.Lock()
        self.by_key = {}

    def arrive(self, key, context):
        """Records an attempt; returns (its number (1, 2 ...), its
        AttemptState)."""
        now_ms = time.monotonic() * 1000.0
        prev = ""
        for k, v in context.invocation_metadata():
            if k == "grpc-previous-rpc-attempts":
                prev = v if isinstance(v, str) else v.decode("latin-1")
        left = context.time_remaining()
        att = self.pb.Attempt(previous_attempts=prev, arrival_ms=now_ms,
                              timeout_ms=-1 if left is None
                              else int(left * 1000.0))
        st = AttemptState(att)
        with self.mu:
            lst = self.by_key.setdefault(key, [])
            lst.append(st)
            n = len(lst)

        def on_end():
            # Runs when the RPC terminates: after the answer went, or when
            # the client cancelled it (RST_STREAM) or its deadline passed.
            with self.mu:
                if not st.answered:
                    st.cancelled = True
                st.done = True
            st.ended.set()

        if not context.add_callback(on_end):
            on_end()  # already terminated
        return n, st

    def answering(self, st, context):
        """The handler is about to answer st: returns False (and marks it
        cancelled) when the client has cancelled it already."""
        with self.mu:
            if st.cancelled or not context.is_active():
                st.cancelled = True
                return False
            st.answered = True
            return True

    def report(self, key, seq=0, note=""):
        with self.mu:
            atts = []
            for st in self.by_key.get(key, []):
                a = self.pb.Attempt()
                a.CopyFrom(st.pb)
                a.cancelled = st.cancelled
                a.done = st.done
                atts.append(a)
        return self.pb.Report(key=key, attempts=atts, seq=seq, note=note,
                              cancelled=sum(a.cancelled for a in atts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--threads", type=int, default=0,
                    help="handler threads (default 64)")
    ap.add_argument("--delay-ms", type=int, default=0,
                    help="every Unary/Stream attempt waits this long first")
    ap.add_argument("--proto", default=os.environ.get("RETRYTEST_PROTO")
                    or DEFAULT_PROTO)
    ap.add_argument("--protoc", help="protoc ($PROTOC)")
    args = ap.parse_args()
    if not 0 <= args.port <= 65535 or args.threads < 0 \
            or not 0 <= args.delay_ms <= MAX_DELAY_MS:
        ap.error("bad --port, --threads or --delay-ms")

    pb = interop_common.load_pb2(args.proto, args.protoc)
    rec = Records(pb)

    def fail(b, n, context):
        """Ends a failing attempt (raises through context.abort)."""
        code = CODES.get(b.code or 14, grpc.StatusCode.UNKNOWN)
        if b.pushback and (b.pushback_attempts == 0
                           or n <= b.pushback_attempts):
            context.set_trailing_metadata(
                [("grpc-retry-pushback-ms", b.pushback)])
        context.abort(code, "attempt %d of %r fails" % (n, b.key))

    def begin(b, context):
        """Records the attempt and waits out the delays; returns (its
        number, whether it fails), or None when the attempt ended meanwhile
        (cancelled by the client or past its deadline: not answered)."""
        n, st = rec.arrive(b.key, context)
        delay_ms = min(args.delay_ms + b.delay_ms, MAX_DELAY_MS)
        if delay_ms:
            st.ended.wait(delay_ms / 1000.0)  # a cancellation cuts it short
        if not rec.answering(st, context):
            return None
        return n, n <= b.fail_first

    def unary(b, context):
        got = begin(b, context)
        if got is None:
            context.abort(grpc.StatusCode.CANCELLED, "cancelled by the client")
        n, failing = got
        if failing:
            if b.headers_then_fail:
                context.send_initial_metadata([("x-committed", "1")])
            fail(b, n, context)
        return rec.report(b.key)

    def stream(b, context):
        got = begin(b, context)
        if got is None:
            return
        n, failing = got
        if failing:
            if b.headers_then_fail:
                context.send_initial_metadata([("x-committed", "1")])
                yield rec.report(b.key, 0, "sent before failing")
            fail(b, n, context)
            return
        for i in range(max(1, b.stream_messages)):
            yield rec.report(b.key, i)

    def observe(req, context):
        return rec.report(req.key)

    handler = grpc.method_handlers_generic_handler("retrytest.RetryTest", {
        "Unary": grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=pb.Behavior.FromString,
            response_serializer=pb.Report.SerializeToString),
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=pb.Behavior.FromString,
            response_serializer=pb.Report.SerializeToString),
        "Observe": grpc.unary_unary_rpc_method_handler(
            observe, request_deserializer=pb.ObserveRequest.FromString,
            response_serializer=pb.Report.SerializeToString),
    })
    return interop_common.serve((handler,), args.host, args.port,
                                args.threads or 64, None, GRACE_S)


if __name__ == "__main__":
    sys.exit(main())
