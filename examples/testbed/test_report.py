#!/usr/bin/env python3
"""report.py on a made-up raw directory (no chain is started): the
normalize-bench step with and without sluice-bench's "kinds", one cell with
one run and one with two, layer dumps with and without drop timing."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report.py")


def hist(n, p99_us, max_us):
    # One bucket per value is enough for the merge: [lo_ns, hi_ns, count].
    b = [[int(p99_us * 1000), int(p99_us * 1000), n - 1]] if n > 1 else []
    b.append([int(max_us * 1000), int(max_us * 1000), 1])
    return {"n": n, "p50_us": p99_us, "p99_us": p99_us, "max_us": max_us,
            "min_us": p99_us if n > 1 else max_us, "buckets": b}


def layer(name, early=None, refused=None, kinds=True):
    d = {"layer": name, "port": 1, "why": "exit", "workers": 2, "service_us": 5,
         "received": 100, "skipped": 1, "served": 99, "fwd_ok": 90,
         "fwd_failed": 9, "queue_wait_us_mean": 10.0, "queue_max": 3}
    if name.startswith("db"):
        return d
    if kinds:
        empty = {"n": 0, "p50_us": 0, "p99_us": 0, "max_us": 0, "min_us": 0,
                 "buckets": []}
        d["kinds"] = {"ok": empty, "early_drop": early or empty,
                      "deadline_refusal": refused or empty,
                      "downstream_drop": empty, "timeout": empty, "other": empty}
    d["channel"] = {"lb": "btc", "dropped_unavailable": 0,
                    "dropped_limit": early["n"] if early else 0,
                    "dropped_path_limit": 0,
                    "dropped_deadline": refused["n"] if refused else 0,
                    "dropped_wait": 0,
                    "dests": [{"address": "x", "conn": "READY", "lb_state": "T-low/C-low",
                               "in_flight": 0, "limit": 10, "adaptive_limit": 10,
                               "rate": 1, "latency_min_us": 1, "latency_ewma_us": 1,
                               "peer_utilization": 0, "sent": 90, "ok": 90,
                               "failed": 0, "p50_us": 1, "p99_us": 1, "p999_us": 1,
                               "algo_ns": 500, "strategy_us": 15}]}
    return d


def bench(ok, p99_us, kinds):
    r = {"rate": 200, "seconds": 10.0, "ok": ok, "errors": 1000 - ok,
         "throughput": ok / 10.0,
         "errors_by_code": {"RESOURCE_EXHAUSTED": 1000 - ok - 2,
                            "DEADLINE_EXCEEDED": 2},
         "latency_us": {"min": 1, "p50": p99_us / 2, "p90": p99_us, "p99": p99_us,
                        "p999": p99_us, "max": p99_us, "mean": 1, "stddev": 1},
         "sent": 1000, "late": 0, "unfinished": 0}
    if kinds:
        r["kinds"] = {"early_drop": {"n": 1000 - ok - 2, "p50_us": 300, "p99_us": 700,
                                     "max_us": 900},
                      "deadline_refusal": {"n": 1, "p50_us": 50, "p99_us": 50, "max_us": 50},
                      "timeout": {"n": 1, "p50_us": 100000, "p99_us": 100000,
                                  "max_us": 100000},
                      "other": {"n": 0, "p50_us": 0, "p99_us": 0, "max_us": 0}}
    return {"target": "t", "mode": "open", "result": r}


def write(path, obj, lines=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(obj) + "\n")


def normalize(tmp, b):
    p = os.path.join(tmp, "b.json")
    write(p, b)
    out = subprocess.run([sys.executable, REPORT, "normalize-bench", p, "200", "10"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw")
        write(os.path.join(raw, "capacity.json"),
              {"capacity": 100, "how": "given", "computed": 100})
        write(os.path.join(raw, "settings.json"),
              {"instances": "gateway:1 A:1 B:1 C:1 db:1", "weak": "B",
               "weak_workers": 2, "weak_service_us": 5000, "workers": 8,
               "service_us": 1000, "gw_workers": 16, "gw_service_us": 200,
               "db_workers": 8, "db_service_us": 500, "duration": 10, "warmup": 3,
               "deadline_ms": 100, "size": 4096, "strategies": "rr btc",
               "loads": "0.3 2.0", "runs": "rr:1 btc:2", "generator": "sluice-bench",
               "cores": 2, "cpu": "x", "date": "d", "commit": "c"})
        # Without kinds: the code-only logic.
        g = normalize(tmp, bench(950, 20000, kinds=False))
        if g["early_drops"] != 48 or g["timeouts"] != 2 or "kinds" in g:
            fails.append("code-only normalize: %r" % g)
        # With kinds: counts and drop latency from it.
        g = normalize(tmp, bench(950, 20000, kinds=True))
        if g["early_drops"] != 48 or g["deadline_drops"] != 1 or g["timeouts"] != 1 \
                or abs(g["drop_p99_ms"] - 0.7) > 1e-9:
            fails.append("kinds normalize: %r" % g)
        # rr: one run each, old-style layer dumps (no drop timing).
        for load, ok in (("0.3", 300), ("2.0", 0)):
            cell = os.path.join(raw, "rr-%s" % load)
            write(os.path.join(cell, "gen.json"), normalize(tmp, bench(ok, 30000, False)))
            for name in ("gateway1", "A1", "B1", "C1", "db1"):
                write(os.path.join(cell, "layer-%s.json" % name), layer(name, kinds=False))
        # btc: two runs each; the gateway drops, fast in run 1, slow in run 2.
        for load, oks, p99s in (("0.3", (300, 298), (20000, 22000)),
                                ("2.0", (950, 900), (30000, 50000))):
            for run in (1, 2):
                cell = os.path.join(raw, "btc-%s" % load, "run%d" % run)
                write(os.path.join(cell, "gen.json"),
                      normalize(tmp, bench(oks[run - 1], p99s[run - 1], True)))
                slow = run == 2 and load == "2.0"
                for name in ("gateway1", "A1", "B1", "C1", "db1"):
                    early = refused = None
                    if name == "gateway1" and load == "2.0":
                        early = hist(200, 2500 if slow else 400, 3000 if slow else 800)
                        refused = hist(2, 30, 60)
                    write(os.path.join(cell, "layer-%s.json" % name),
                          layer(name, early, refused))
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        subprocess.run([sys.executable, REPORT, "report", raw, out, "t"], check=True)
        md = open(os.path.join(out, "testbed-t.md")).read()
        want = [
            # targets: run 1 meets all three, run 2 misses p99 and drops
            "| btc | 1 | 95/s (95 %) | yes | 30.0 / 20.0 = 1.50x | yes "
            "| gateway: 400 / 800 (n 202) | yes | 0.70 |",
            "| btc | 2 | 90/s (90 %) | yes | 50.0 / 20.0 = 2.50x | **no** "
            "| gateway: 2500 / 3000 (n 202) | **no** | 0.70 |",
            "in 1 of 2 runs with drops: **did not hold**",
            "- **rr**: goodput >= 90 % in 0 of 1 runs",
            "drop latency not measured",
            # summary: mean [min-max]; code-only generator: n/a
            "| btc | overload (2.0) | 100 | 92 [90-95] (92 %) | 20.0 [15.0-25.0] "
            "| 40.0 [30.0-50.0] |",
            "| max 2500 (gateway) | 1 | 1 | 0 |",
            "| rr | overload (2.0) | 100 | 0 (0 %) | - | - | - | 998 (99.8 %) "
            "| n/a | n/a | n/a | 2 | 0 |",
            "### Each run",
            "| btc | 2.0 | 2 | 90 | 50.0 | 98 | 0.70 | 2500 / 3000 (gateway) | 1 | 1 |",
            # per layer: merged drop timing; n/a for old dumps
            "| 2.0 #2 | gateway | 90 | 500 | 15.0 | 200 | 2 | 2500 / 3000 |",
            "| 2.0 | gateway | 90 | 500 | 15.0 | 0 | 0 | n/a |",
        ]
        for w in want:
            if w not in md:
                fails.append("report lacks: %s" % w)
        dat = open(os.path.join(out, "testbed-t.dat")).read()
        if "92.5 20.000 40.000 40.000 0.0730 90.0 95.0 30.000 50.000 2" not in dat:
            fails.append("dat lacks the goodput spread:\n" + dat)
        if fails:
            sys.stderr.write(md + "\n")
    for f in fails:
        sys.stderr.write("FAIL: %s\n" % f)
    if not fails:
        print("ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
