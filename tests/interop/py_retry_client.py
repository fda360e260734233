#!/usr/bin/python3
"""A stock grpcio client of retrytest.RetryTest with retries on (gRFC A6).

    py_retry_client.py --target HOST:PORT --calls JSON
                       [--service-config JSON] [--no-retries]
                       [--proto FILE] [--protoc PATH]

--calls is a JSON list of calls made one after another on one channel
(created with options grpc.service_config = --service-config, default
DEFAULT_SERVICE_CONFIG below, and grpc.enable_retries = 1, which is also
grpcio 1.51's default; --no-retries sets it to 0):

    [{"name": "k2", "method": "unary" | "stream",
      "behavior": {"key": "...", "fail_first": 2, ...},   # retrytest.Behavior
      "timeout_ms": 5000}, ...]

Prints one JSON list on stdout, one object per call:

    {"name", "code" (int), "code_name", "message", "elapsed_ms",
     "messages": [Report...],          # responses received (stream: all)
     "trailers": {key: value},         # trailing metadata of the final status
     "observed": Report}               # Observe(key) afterwards

where a Report is {"attempts": [{"previous_attempts", "arrival_ms",
"timeout_ms"}], "seq", "note"}. Observe goes over a second channel without
a service config, so that its successes do not refill the first channel's
retry-throttling tokens. Exits 77 when grpc cannot be imported, 2 on bad
arguments, 0 otherwise (the checks are the caller's).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_common  # noqa: E402

try:
    import grpc
except ImportError:
    print("grpc is not importable by %s" % sys.executable, file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO = os.path.join(HERE, "retrytest.proto")
DEFAULT_SERVICE_CONFIG = {
    "methodConfig": [{
        "name": [{"service": "retrytest.RetryTest", "method": "Unary"},
                 {"service": "retrytest.RetryTest", "method": "Stream"}],
        "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.1s",
                        "maxBackoff": "1s", "backoffMultiplier": 2,
                        "retryableStatusCodes": ["UNAVAILABLE"]},
    }],
}
MAX_CALL_S = 60.0


def report_dict(r):
    return {"key": r.key, "seq": r.seq, "note": r.note,
            "attempts": [{"previous_attempts": a.previous_attempts,
                          "arrival_ms": a.arrival_ms,
                          "timeout_ms": a.timeout_ms} for a in r.attempts]}


def md_dict(md):
    out = {}
    for k, v in md or ():
        out[k] = v if isinstance(v, str) else interop_common.escape(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--calls", required=True)
    ap.add_argument("--service-config")
    ap.add_argument("--no-retries", action="store_true")
    ap.add_argument("--proto", default=os.environ.get("RETRYTEST_PROTO")
                    or DEFAULT_PROTO)
    ap.add_argument("--protoc")
    args = ap.parse_args()
    try:
        calls = json.loads(args.calls)
        sc = (json.loads(args.service_config) if args.service_config
              else DEFAULT_SERVICE_CONFIG)
    except ValueError as exc:
        ap.error("bad JSON: %s" % exc)

    pb = interop_common.load_pb2(args.proto, args.protoc)
    ch = grpc.insecure_channel(args.target, options=[
        ("grpc.service_config", json.dumps(sc)),
        ("grpc.enable_retries", 0 if args.no_retries else 1)])
    obs_ch = grpc.insecure_channel(args.target)
    unary = ch.unary_unary("/retrytest.RetryTest/Unary",
                           request_serializer=pb.Behavior.SerializeToString,
                           response_deserializer=pb.Report.FromString)
    stream = ch.unary_stream("/retrytest.RetryTest/Stream",
                             request_serializer=pb.Behavior.SerializeToString,
                             response_deserializer=pb.Report.FromString)
    observe = obs_ch.unary_unary(
        "/retrytest.RetryTest/Observe",
        request_serializer=pb.ObserveRequest.SerializeToString,
        response_deserializer=pb.Report.FromString)

    results = []
    for c in calls:
        b = pb.Behavior(**c.get("behavior", {}))
        timeout = min(c.get("timeout_ms", 10000) / 1000.0, MAX_CALL_S)
        res = {"name": c.get("name", ""), "messages": [], "trailers": {}}
        t0 = time.monotonic()
        try:
            if c.get("method", "unary") == "stream":
                it = stream(b, timeout=timeout)
                try:
                    for r in it:
                        res["messages"].append(report_dict(r))
                finally:
                    res["trailers"] = md_dict(it.trailing_metadata())
            else:
                r, call = unary.with_call(b, timeout=timeout)
                res["messages"].append(report_dict(r))
                res["trailers"] = md_dict(call.trailing_metadata())
            code, msg = grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            code, msg = e.code(), e.details() or ""
            if not res["trailers"]:
                res["trailers"] = md_dict(e.trailing_metadata())
        res["elapsed_ms"] = (time.monotonic() - t0) * 1000.0
        res["code"] = code.value[0]
        res["code_name"] = code.name
        res["message"] = msg
        try:
            res["observed"] = report_dict(observe(
                pb.ObserveRequest(key=b.key), timeout=10))
        except grpc.RpcError as e:
            res["observed"] = None
            res["observe_error"] = "%s: %s" % (e.code().name, e.details())
        results.append(res)
    ch.close()
    obs_ch.close()
    json.dump(results, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
