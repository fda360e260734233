#!/usr/bin/env python3
"""resilience_report.py on a made-up raw directory (no chain is started):
amplification and the per-tier ratios from the layers' "received" and the
generators' "sent", failures by kind, a spike run's two generators, means
over runs, the targets' verdicts, and the per-cell progress line."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "resilience_report.py")
F1, F2 = 2, 3


def gen(sent, ok, p99_ms, kinds=None, res=None):
    kinds = kinds or {}
    errors = sum(kinds.values())
    k = {name: {"n": kinds.get(name, 0), "p50_us": 0, "p99_us": 0, "max_us": 0}
         for name in ("early_drop", "deadline_refusal", "timeout", "other", "breaker")}
    return {"connections": 1, "result": {
        "rate": 100, "seconds": 2.0, "ok": ok, "errors": errors,
        "latency_us": {"p50": p99_ms * 500, "p99": p99_ms * 1000},
        "sent": sent, "unsent": 0, "unfinished": 0, "kinds": k,
        "resilience": res,
        "cdf": {"ok": [[1000.0, 0.5], [p99_ms * 1000, 1.0]],
                "all": [[10.0, 0.5], [p99_ms * 1000, 1.0]]}}}


def res(retries=0, denials=0, breaker=0):
    return {"calls": 1, "attempts": 1, "retries": retries, "transparent_retries": 0,
            "hedges": 0, "denials": denials, "throttled": 0, "budget_denied": denials,
            "pushback_denied": 0, "deadline_denied": 0, "max_retries_denied": 0,
            "exhausted": 0, "breaker_requests": breaker, "breaker_pending": 0,
            "retry_delay_ms": 0}


def write_run(d, gens, received, layer_res=None):
    os.makedirs(d)
    json.dump(gens[0], open(os.path.join(d, "gen.json"), "w"))
    if len(gens) > 1:
        json.dump(gens[1], open(os.path.join(d, "gen-spike.json"), "w"))
    for name, n in received.items():
        dump = {"layer": name, "received": n, "fanout": 1}
        if layer_res and name in layer_res:
            dump["resilience"] = layer_res[name]
        with open(os.path.join(d, "layer-%s.json" % name), "w") as f:
            f.write(json.dumps(dict(dump, why="SIGUSR1", received=0)) + "\n")
            f.write(json.dumps(dump) + "\n")  # the exit dump counts


def main():
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw")
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        settings = {"capacity": 100, "capacity_how": "given", "computed": 100,
                    "t1": "1 1", "t2": "1 1", "t3": "1 1", "t3_instances": 2,
                    "f1": F1, "f2": F2, "fanout_mode": "sequential", "duration": 2,
                    "warmup": 1, "deadline_ms": 500, "size": 4096, "cb_max": 20,
                    "storm_cb": 1, "spike_base": 0.8, "spike_add": 1.2, "spike_s": 1,
                    "scenarios": "none cb-t1 storm-a5-i0 default", "loads": "0.8 1.2 spike",
                    "storm_loads": "1.2", "runs": 2, "cores": 2, "cpu": "test",
                    "date": "D", "commit": "abc"}
        os.makedirs(raw)
        json.dump(settings, open(os.path.join(raw, "settings.json"), "w"))
        # none: no retry, nothing lost: 1.0 everywhere (99 sent + 1 warm call).
        for load in ("0.8", "1.2"):
            for run in (1, 2):
                write_run(os.path.join(raw, "none", load, "run%d" % run),
                          [gen(99, 99, 50)], {"t1": 100, "t2": 200, "t3-1": 300, "t3-2": 300})
        # cb-t1 at 1.2: 20 of 100 refused at the generator's breaker.
        for load in ("0.8", "1.2"):
            for run in (1, 2):
                refused = 20 if load == "1.2" else 0
                write_run(os.path.join(raw, "cb-t1", load, "run%d" % run),
                          [gen(99, 99 - refused, 40, {"breaker": refused})],
                          {"t1": 100 - refused, "t2": 2 * (100 - refused),
                           "t3-1": 3 * (100 - refused), "t3-2": 3 * (100 - refused)})
        # storm: t2 sees 2.5x its calls, t3 half (the breaker), 300 retries.
        for run in (1, 2):
            write_run(os.path.join(raw, "storm-a5-i0", "1.2", "run%d" % run),
                      [gen(99, 10, 80, {"breaker": 90})],
                      {"t1": 100, "t2": 500, "t3-1": 150, "t3-2": 150},
                      {"t1": res(retries=300), "t2": res(breaker=400)})
        # default: runs differ (goodput 90 and 100 -> mean 95), 1.05 amplified;
        # a spike run with two generators.
        for run, ok in ((1, 90), (2, 100)):
            write_run(os.path.join(raw, "default", "0.8", "run%d" % run),
                      [gen(99, ok, 20)], {"t1": 100, "t2": 200, "t3-1": 300, "t3-2": 330})
            write_run(os.path.join(raw, "default", "1.2", "run%d" % run),
                      [gen(99, 2 * ok, 30, res=res(retries=5, denials=2))],
                      {"t1": 100, "t2": 200, "t3-1": 300, "t3-2": 330})
            write_run(os.path.join(raw, "default", "spike", "run%d" % run),
                      [gen(79, 79, 30), gen(19, 19, 60)],
                      {"t1": 100, "t2": 200, "t3-1": 300, "t3-2": 300})

        r = subprocess.run([sys.executable, REPORT, "cell",
                            os.path.join(raw, "storm-a5-i0", "1.2", "run1"), str(F1), str(F2)],
                           capture_output=True, text=True)
        check(r.returncode == 0, "cell exit %d: %s" % (r.returncode, r.stderr))
        check("amplification 0.50 (t1 1.00 t2 2.50), retries 300" in r.stdout,
              "cell line: %r" % r.stdout)
        check("breaker 90" in r.stdout, "cell line kinds: %r" % r.stdout)

        r = subprocess.run([sys.executable, REPORT, "report", raw, out, "D"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "report exit %d: %s" % (r.returncode, r.stderr))
        md = open(os.path.join(out, "resilience-D.md")).read()
        rows = {tuple(c.strip() for c in line.split("|")[1:3]): line
                for line in md.splitlines() if line.startswith("| ")}
        none = rows.get(("none", "1.2x"), "")
        check("| 1.00 | 1.00 | 1.00 |" in none, "none 1.2x: %r" % none)
        cb = rows.get(("cb-t1", "1.2x"), "")
        check("| 20 (20 %) |" in cb and "| 0.80 | 0.80 | 0.80 |" in cb, "cb-t1 1.2x: %r" % cb)
        st = rows.get(("storm-a5-i0", "1.2x"), "")
        check("| 0.50 | 1.00 | 2.50 | 300 | 0 |" in st, "storm: %r" % st)
        de = rows.get(("default", "1.2x"), "")
        check("| 95 [90-100] | 95 |" in de and "| 1.05 |" in de and "| 5 | 2 |" in de,
              "default 1.2x: %r" % de)
        sp = rows.get(("default", "spike"), "")
        # both generators: (79 + 19) ok over 2 s; 79 + 19 + 2 warm calls entered.
        check("| 49 |" in sp and "| 1.00 | 1.00 | 1.00 |" in sp, "default spike: %r" % sp)
        check("goodput 95/s = 95 % of capacity (target >= 95 %): **met**" in md,
              "goodput verdict")
        check("amplification at 1.2x 1.05 (target <= 1.1): **met**" in md, "ampl verdict")
        check("30.0 ms vs its under-load (0.8x, the lowest run) p99 20.0 ms = 1.50x" in md,
              "p99 verdict")
        check("(by goodput: cb-t1, 40/s, p99 40.0 ms)" in md and
              "beats it on both at once: **yes**" in md, "static verdict")
        check("  | storm-a5-i0 | 1.2x | 5 | 80.0 | 2.50 | 0.50 | 300 |" in md,
              "storm verdict")
        check(os.path.exists(os.path.join(out, "resilience-D.dat")), "dat file")
    if fails:
        for f in fails:
            print("FAIL:", f)
        sys.exit(1)
    print("test_resilience_report: OK")


if __name__ == "__main__":
    main()
