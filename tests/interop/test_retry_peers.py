#!/usr/bin/python3
"""Client retries (gRFC A6) between stock peers and sluice.

    test_retry_peers.py --server SERVER --client CLIENT [--js-dir DIR]
    test_retry_peers.py --c-client PROG [--server py_retry_server.py]

SERVER is py_retry_server.py (grpcio) or the sluice retry_server; CLIENT is
py_retry_client.py (grpcio 1.51) or js_retry_client.js (@grpc/grpc-js,
installed into --js-dir by scripts/install-grpc-js.sh). Both speak
tests/interop/retrytest.proto. The script starts the server (port 0: it
picks a free one), runs the client with JSON lists of calls, and checks
what the server saw per call (attempts, grpc-previous-rpc-attempts, arrival
times, grpc-timeout) and the final status. Time is only ever bounded from
below (backoff and pushback floors), with slack; never from above.

--c-client runs the sluice retry client driver (retry_client.c) against
the grpcio server instead: the driver does its own checks and its exit
code is the test's. For its hedging scenario a second py_retry_server.py
runs next to it with --delay-ms 2000 (SLOW; the first one is FAST), and the
driver gets both as --hedge-targets ipv4:FAST,SLOW.

Exits 0 when every check passed, 1 otherwise, 77 (skipped) when grpc, node
or the grpc-js install is missing.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import interop_common  # noqa: E402
from interop_common import Checks, Server  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
UNAVAILABLE, INVALID_ARGUMENT, DEADLINE_EXCEEDED = 14, 3, 4
RESOURCE_EXHAUSTED = 8
# Slack for timer and scheduling jitter below the nominal floor (ms).
SLACK_MS = 15.0
# How long the admission test's first call holds the sluice server's only
# slot (client processes take ~1 s each to start on a loaded machine).
HOLD_MS = 10000
# The slow server of the C client's hedging scenario answers this late.
HEDGE_SLOW_MS = 2000


def svc_config(max_attempts=5, initial="0.1s", max_backoff="1s", mult=2,
               codes=("UNAVAILABLE",), throttling=None):
    sc = {"methodConfig": [{
        "name": [{"service": "retrytest.RetryTest", "method": "Unary"},
                 {"service": "retrytest.RetryTest", "method": "Stream"}],
        "retryPolicy": {"maxAttempts": max_attempts,
                        "initialBackoff": initial, "maxBackoff": max_backoff,
                        "backoffMultiplier": mult,
                        "retryableStatusCodes": list(codes)}}]}
    if throttling:
        sc["retryThrottling"] = throttling
    return sc


class Runner:
    def __init__(self, client, js_dir):
        self.client = client
        self.js_dir = js_dir
        self.kind = "grpc-js" if client.endswith(".js") else "grpcio"

    def cmd(self, target, calls, sc, no_retries):
        if self.kind == "grpc-js":
            cmd = ["node", self.client, "--node-modules",
                   os.path.join(self.js_dir, "node_modules")]
        else:
            cmd = interop_common.command_for(self.client)
        cmd += ["--target", target, "--calls", json.dumps(calls)]
        if sc is not None:
            cmd += ["--service-config", json.dumps(sc)]
        if no_retries:
            cmd.append("--no-retries")
        return cmd

    def run(self, target, calls, sc=None, no_retries=False, timeout=120):
        p = interop_common.run(self.cmd(target, calls, sc, no_retries),
                               timeout=timeout)
        if p.returncode == 77:
            print(p.stderr, file=sys.stderr)
            sys.exit(77)
        if p.returncode != 0:
            raise RuntimeError("client exited %d: %s" % (p.returncode,
                                                         p.stderr[-2000:]))
        return {r["name"]: r for r in json.loads(p.stdout)}


def attempts(r):
    return (r.get("observed") or {}).get("attempts", [])


def prevs(r):
    return [a["previous_attempts"] for a in attempts(r)]


def gaps(r):
    t = [a["arrival_ms"] for a in attempts(r)]
    return [t[i + 1] - t[i] for i in range(len(t) - 1)]


def fmt(r):
    return "code %s %r, attempts prev=%s gaps=%s timeouts=%s msgs=%d " \
        "trailers=%s" % (r["code_name"], r["message"], prevs(r),
                         [round(g) for g in gaps(r)],
                         [a["timeout_ms"] for a in attempts(r)],
                         len(r["messages"]), r["trailers"])


def main_cases(ck, run, target, server_kind, client_kind):
    """The cases every pairing runs; server_kind is "py" or "sluice"."""
    tag = "%s->%s" % (client_kind, server_kind)
    calls = [
        {"name": "fail2", "behavior": {"key": "fail2", "fail_first": 2}},
        {"name": "stream_fail2", "method": "stream",
         "behavior": {"key": "stream_fail2", "fail_first": 2,
                      "stream_messages": 2}},
        {"name": "nonretryable", "behavior": {
            "key": "nonretryable", "fail_first": 1,
            "code": INVALID_ARGUMENT}},
        {"name": "exhausted", "behavior": {"key": "exhausted",
                                           "fail_first": 1000}},
        # The stream sends its headers and a message, then fails: committed.
        {"name": "stream_commit", "method": "stream", "behavior": {
            "key": "stream_commit", "fail_first": 1,
            "headers_then_fail": True}},
        # Unary: response headers (x-committed) then the failure.
        {"name": "unary_commit", "behavior": {
            "key": "unary_commit", "fail_first": 1,
            "headers_then_fail": True}},
        {"name": "pushback200", "behavior": {
            "key": "pushback200", "fail_first": 1, "pushback": "200"}},
        {"name": "pushback_neg", "behavior": {
            "key": "pushback_neg", "fail_first": 1, "pushback": "-1"}},
        {"name": "pushback_bad", "behavior": {
            "key": "pushback_bad", "fail_first": 1, "pushback": "abc"}},
    ]
    res = run.run(target, calls)  # default config: 5 attempts, 0.1s x2, 1s
    for name, r in sorted(res.items()):
        print("  %s %s: %s" % (tag, name, fmt(r)), flush=True)

    r = res["fail2"]
    ck.check("%s fail2: OK after 3 attempts, previous-attempts '', 1, 2"
             % tag, r["code"] == 0 and prevs(r) == ["", "1", "2"], fmt(r))
    g = gaps(r)
    ck.check("%s fail2: backoff gaps >= 80 ms and >= 160 ms" % tag,
             len(g) == 2 and g[0] >= 80 - SLACK_MS and g[1] >= 160 - SLACK_MS,
             fmt(r))
    r = res["exhausted"]
    g = gaps(r)
    ck.check("%s exhausted: backoff gaps >= 80, 160, 320, 640 ms (0.1 s x2, "
             "-20 %% jitter)" % tag,
             len(g) == 4 and all(g[i] >= f - SLACK_MS for i, f in
                                 enumerate((80, 160, 320, 640))), fmt(r))
    r = res["stream_fail2"]
    ck.check("%s stream_fail2: OK after 3 attempts, 2 messages, no "
             "duplicates" % tag,
             r["code"] == 0 and prevs(r) == ["", "1", "2"]
             and [m["seq"] for m in r["messages"]] == [0, 1], fmt(r))
    r = res["nonretryable"]
    ck.check("%s INVALID_ARGUMENT is not retried" % tag,
             r["code"] == INVALID_ARGUMENT and len(attempts(r)) == 1, fmt(r))
    r = res["exhausted"]
    ck.check("%s always UNAVAILABLE: exactly maxAttempts (5) attempts, "
             "previous-attempts '', 1..4" % tag,
             r["code"] == UNAVAILABLE
             and prevs(r) == ["", "1", "2", "3", "4"], fmt(r))
    r = res["stream_commit"]
    ck.check("%s stream: a message, then UNAVAILABLE: committed, 1 attempt, "
             "the message delivered" % tag,
             r["code"] == UNAVAILABLE and len(attempts(r)) == 1
             and len(r["messages"]) == 1, fmt(r))
    r = res["unary_commit"]
    if server_kind == "py":
        ck.check("%s unary: response headers, then UNAVAILABLE: committed, "
                 "1 attempt" % tag,
                 r["code"] == UNAVAILABLE and len(attempts(r)) == 1, fmt(r))
    else:
        # sluice sends a unary error without a message Trailers-Only, the
        # initial metadata folded into that one HEADERS frame: the handler
        # cannot commit a unary call, so stock clients retry it.
        ck.check("%s unary: headers + error go Trailers-Only (sluice), so "
                 "the client retries: OK after 2 attempts" % tag,
                 r["code"] == 0 and len(attempts(r)) == 2, fmt(r))

    # Both servers send the trailer: a sluice handler sets it with
    # sluice_server_call_add_trailing_metadata (the one grpc- key allowed).
    r = res["pushback200"]
    g = gaps(r)
    ck.check("%s pushback 200 ms honoured: OK, 2nd attempt >= 200 ms "
             "later" % tag, r["code"] == 0 and len(g) == 1
             and g[0] >= 200 - SLACK_MS, fmt(r))
    r = res["pushback_neg"]
    ck.check("%s pushback -1: not retried" % tag,
             r["code"] == UNAVAILABLE and len(attempts(r)) == 1, fmt(r))
    r = res["pushback_bad"]
    # grpcio's server cannot send a malformed value: C-core parses the
    # key as a duration and sends "abc" as INT64_MIN, a negative
    # pushback; clients must not retry either way.
    if "grpc-js" in tag and server_kind != "py":
        # grpc-js parses the value with parseInt: "abc" is NaN and it
        # retries at once, where A6 says not to retry (a grpc-js bug, seen
        # only against a server that sends the malformed value verbatim).
        ck.check("%s pushback 'abc': grpc-js retries it (its known "
                 "deviation from A6)" % tag, len(attempts(r)) == 2, fmt(r))
    else:
        ck.check("%s pushback 'abc' (on the wire: %s): not retried"
                 % (tag, r["trailers"].get("grpc-retry-pushback-ms")),
                 r["code"] == UNAVAILABLE and len(attempts(r)) == 1, fmt(r))


def deadline_case(ck, run, target, tag):
    sc = svc_config(initial="0.2s", max_backoff="1s")
    res = run.run(target, [{"name": "deadline", "timeout_ms": 500,
                            "behavior": {"key": "deadline",
                                         "fail_first": 1000}}], sc)
    r = res["deadline"]
    print("  %s deadline: %s elapsed %.0f ms" % (tag, fmt(r), r["elapsed_ms"]))
    tms = [a["timeout_ms"] for a in attempts(r)]
    ck.check("%s deadline 500 ms across attempts (backoff 0.2 s): ends "
             "DEADLINE_EXCEEDED or UNAVAILABLE, 1..4 attempts" % tag,
             r["code"] in (DEADLINE_EXCEEDED, UNAVAILABLE)
             and 1 <= len(tms) <= 4, fmt(r))
    ck.check("%s deadline: every attempt carries grpc-timeout <= 500 ms, "
             "decreasing" % tag,
             tms and all(0 <= t <= 500 for t in tms)
             and all(tms[i + 1] < tms[i] for i in range(len(tms) - 1)),
             fmt(r))
    ck.check("%s deadline: no attempt starts after the deadline" % tag,
             all(a["arrival_ms"] - attempts(r)[0]["arrival_ms"] < 500
                 for a in attempts(r)), fmt(r))


def throttling_case(ck, run, target, tag):
    """retryThrottling maxTokens 10, tokenRatio 0.1; C-core counts
    milli-tokens: 10000 - 1000 per retryable failure, + 100 per OK, retry
    only while the new value is > 5000 (specs/retries.md)."""
    sc = svc_config(throttling={"maxTokens": 10, "tokenRatio": 0.1})
    calls = []
    for i in range(3):
        calls.append({"name": "fail%d" % i,
                      "behavior": {"key": "thr_fail%d" % i,
                                   "fail_first": 1000}})
    for i in range(31):
        calls.append({"name": "okA%d" % i, "behavior": {"key": "thr_okA%d"
                                                         % i}})
    calls.append({"name": "fail3", "behavior": {"key": "thr_fail3",
                                                "fail_first": 1000}})
    for i in range(19):
        calls.append({"name": "okB%d" % i, "behavior": {"key": "thr_okB%d"
                                                         % i}})
    calls.append({"name": "fail4", "behavior": {"key": "thr_fail4",
                                                "fail_first": 1000}})
    res = run.run(target, calls, sc)
    got = [len(attempts(res["fail%d" % i])) for i in range(5)]
    print("  %s throttling: attempts of the failing calls %s" % (tag, got))
    oks = all(res[c["name"]]["code"] == 0 for c in calls
              if c["name"].startswith("ok"))
    ck.check("%s throttling: failing calls make 5, 1, 1 attempts" % tag,
             got[:3] == [5, 1, 1], "got %s" % got)
    ck.check("%s throttling: 31 OKs later (3000 + 3100 milli-tokens) the "
             "next failing call makes 2" % tag, oks and got[3] == 2,
             "got %s" % got)
    # 4100 + 1900 = 6000; the failure leaves 5000, not > 5000: no retry.
    # Float token counters (grpc-js) may land on either side of 5000.
    if run.kind == "grpcio":
        ck.check("%s throttling: 19 OKs more give the next failing call 1"
                 % tag, got[4] == 1, "got %s" % got)
    else:
        print("  info: %s throttling, 19 OKs more: %d attempt(s) (C-core "
              "gives 1; grpc-js counts float tokens: 4.1 + 19 x 0.1 is "
              "borderline)" % (tag, got[4]))


def sluice_admission_pushback(ck, run, server_cmd, tag):
    """A sluice server's own pushback: max_concurrent_calls 1, max_queue 0;
    a second call is refused RESOURCE_EXHAUSTED with grpc-retry-pushback-ms
    (>= 10 ms)."""
    with Server(server_cmd + ["--max-concurrent-calls", "1",
                              "--max-queue", "0"]) as srv:
        target = srv.target
        holder_err = []
        holder_res = []
        holder_end = []

        def hold():
            try:
                holder_res.append(run.run(
                    target, [{"name": "holder", "timeout_ms": 20000,
                              "behavior": {"key": "holder",
                                           "delay_ms": HOLD_MS}}],
                    no_retries=True)["holder"])
                holder_end.append(time.monotonic())
            except Exception as exc:  # noqa: BLE001
                holder_err.append(str(exc))

        th = threading.Thread(target=hold)
        th.start()
        try:
            # Wait until the holder runs: probe until a call is refused
            # (Observe takes a slot too, so it cannot tell). A probe may
            # win the race to the one slot against a slowly starting
            # holder (seen under ASan), which is then refused itself:
            # start the holder again (a few times at most).
            deadline = time.monotonic() + 20
            refused = None
            restarts = 0
            while time.monotonic() < deadline:
                if (not th.is_alive() and restarts < 5 and holder_res
                        and holder_res[0]["code"] == RESOURCE_EXHAUSTED):
                    restarts += 1
                    del holder_res[:], holder_end[:], holder_err[:]
                    th = threading.Thread(target=hold)
                    th.start()
                    time.sleep(0.2)
                    continue
                res = run.run(target, [{"name": "probe", "timeout_ms": 5000,
                                        "behavior": {"key": "probe"}}],
                              no_retries=True)
                if res["probe"]["code"] == RESOURCE_EXHAUSTED:
                    refused = res["probe"]
                    break
                time.sleep(0.05)
            ck.check("%s sluice admission refusal carries "
                     "grpc-retry-pushback-ms >= 10" % tag,
                     refused is not None and int(refused["trailers"].get(
                         "grpc-retry-pushback-ms", "0")) >= 10,
                     refused and fmt(refused) or "never refused")
            if refused is not None:
                sc = svc_config(initial="20s", max_backoff="20s",
                                codes=("RESOURCE_EXHAUSTED",))
                res = run.run(target, [{"name": "pushed", "timeout_ms": 30000,
                                        "behavior": {"key": "pushed"}}], sc)
                pushed_end = time.monotonic()
                r = res["pushed"]
                print("  %s admission pushback: %s elapsed %.0f ms"
                      % (tag, fmt(r), r["elapsed_ms"]))
                # Honouring the ~10 ms pushback, the client uses up its 5
                # attempts while the holder still runs and gets
                # RESOURCE_EXHAUSTED; ignoring it, it would wait 16-24 s of
                # backoff, past the holder.
                # The client processes start slowly: make sure the pushed
                # call really ran while the slot was held.
                th.join(HOLD_MS / 1000.0 + 30)
                ck.check("%s the pushed call ended while the holder still "
                         "held the slot" % tag,
                         holder_end and pushed_end < holder_end[0],
                         "holder ended %.0f ms before" % (
                             (pushed_end - holder_end[0]) * 1000.0)
                         if holder_end else "holder did not end")
                ck.check("%s retried on the server's pushback (not the 20 s "
                         "backoff): RESOURCE_EXHAUSTED while the slot is "
                         "held, after >= 4 x 10 ms" % tag,
                         r["code"] == RESOURCE_EXHAUSTED
                         and r["elapsed_ms"] >= 40 - SLACK_MS, fmt(r))
        finally:
            th.join(60)
        h = holder_res[0] if holder_res else None
        if h:
            print("  %s admission holder: %s elapsed %.0f ms"
                  % (tag, fmt(h), h["elapsed_ms"]))
        ck.check("%s holder call: OK after its %d s, holding the one slot "
                 "throughout" % (tag, HOLD_MS // 1000),
                 not holder_err and h and h["code"] == 0
                 and h["elapsed_ms"] >= HOLD_MS - SLACK_MS,
                 "; ".join(holder_err) or (h and fmt(h)) or "no result")


def run_c_client(args):
    server = args.server or os.path.join(HERE, "py_retry_server.py")
    slow_cmd = interop_common.command_for(
        os.path.join(HERE, "py_retry_server.py")) + [
            "--delay-ms", str(HEDGE_SLOW_MS)]
    with Server(interop_common.command_for(server)) as srv, \
            Server(slow_cmd) as slow:
        hedge = "ipv4:%s,%s" % (srv.target, slow.target)
        print("C client: --target %s --hedge-targets %s (FAST, SLOW: "
              "%d ms late)" % (srv.target, hedge, HEDGE_SLOW_MS), flush=True)
        try:
            p = subprocess.run([args.c_client, "--target", srv.target,
                                "--hedge-targets", hedge],
                               stdin=subprocess.DEVNULL, timeout=150)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            print("FAIL the C client did not finish within 150 s")
            rc = 1
        for s in (slow, srv):
            if s.stop() is None:
                print("FAIL %s did not stop on SIGTERM (killed)"
                      % " ".join(s.cmd[-3:]))
                rc = rc or 1
    return rc


def main():
    interop_common.exit_on_signals()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server")
    ap.add_argument("--client")
    ap.add_argument("--c-client")
    ap.add_argument("--js-dir", default=os.environ.get("RETRY_JS_DIR"))
    args = ap.parse_args()
    try:
        import grpc  # noqa: F401
    except ImportError:
        print("grpc is not importable by %s" % sys.executable)
        return 77
    if args.c_client:
        return run_c_client(args)
    if not args.server or not args.client:
        ap.error("--server and --client (or --c-client) are required")

    run = Runner(args.client, args.js_dir)
    if run.kind == "grpc-js":
        if not args.js_dir:
            ap.error("a .js client needs --js-dir")
        rc = subprocess.run([os.path.join(ROOT, "scripts",
                                          "install-grpc-js.sh"),
                             args.js_dir], stdin=subprocess.DEVNULL,
                            timeout=900).returncode
        if rc != 0:
            print("grpc-js is not installed (install-grpc-js.sh: %d)" % rc)
            return 77
    server_kind = "py" if args.server.endswith(".py") else "sluice"
    server_cmd = interop_common.command_for(args.server)
    tag = "%s->%s" % (run.kind, server_kind)
    ck = Checks()
    with Server(server_cmd) as srv:
        main_cases(ck, run, srv.target, server_kind, run.kind)
        deadline_case(ck, run, srv.target, tag)
        throttling_case(ck, run, srv.target, tag)
        rc = srv.stop()
        ck.check("%s server stopped cleanly" % tag, rc == 0, "exit %s" % rc)
    if server_kind == "sluice":
        sluice_admission_pushback(ck, run, server_cmd, tag)
    ck.exit()


if __name__ == "__main__":
    sys.exit(main())
