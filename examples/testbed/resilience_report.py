#!/usr/bin/env python3
"""The resilience experiment's report (run by examples/testbed/resilience.sh).

  resilience_report.py cell CELL_DIR F1 F2
      one line about one run on stderr-friendly stdout (progress).
  resilience_report.py report RAW_DIR OUT_DIR DATE
      reads RAW_DIR/settings.json and RAW_DIR/<scenario>/<load>/run<k>/
      (gen.json, gen-spike.json for a spike, layer-*.json); writes
      OUT_DIR/resilience-DATE.md, resilience-DATE.dat and the plots
      resilience-DATE-*.png (gnuplot; SVG without pngcairo, none without
      gnuplot).

Definitions (docs/resilience-experiment.md):
  requests entering the chain = calls the generator(s) issued (sluice-bench
      "sent", warm-up included, + 1 connection-opening call each), the
      same window as the layers' counters (a fresh chain per run);
  attempts at tier k = calls the tier-k layers received (every attempt of
      a retried or hedged call is one);
  amplification = attempts at t3 / (requests entering x F1 x F2): 1.0 when
      nothing is retried, failed or dropped; below 1 when calls fail or are
      refused before reaching t3; above 1 when retries multiply them.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys

# The testbed report's helpers (report.py, next to this file; the script's
# directory is on sys.path when it runs).
from report import fmt_ms as fms, gnuplot_terminal, last_dump, mean  # noqa: E402

KINDS = ["breaker", "early_drop", "deadline_refusal", "timeout", "other"]
STATIC = ["cb-t1", "cb-t2", "cb-t3", "cb-all"]


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tier_of(name):
    m = re.match(r"t(\d)", name)
    return int(m.group(1)) if m else None


def read_run(d, f1, f2):
    """One run's figures, or None when the generator wrote nothing."""
    g = load_json(os.path.join(d, "gen.json"))
    if g is None or "result" not in g:
        return None
    gens = [g]
    sp = load_json(os.path.join(d, "gen-spike.json"))
    if sp is not None and "result" in sp:
        gens.append(sp)
    base = g["result"]
    secs = float(base.get("seconds", 1)) or 1.0
    r = {"ok": 0, "errors": 0, "unsent": 0, "unfinished": 0, "issued": 0,
         "kinds": {k: 0 for k in KINDS}, "gen_res": [], "spike": len(gens) > 1}
    for x in gens:
        res = x["result"]
        r["ok"] += res["ok"]
        r["errors"] += res["errors"]
        r["unsent"] += res.get("unsent", 0)
        r["unfinished"] += res.get("unfinished", 0)
        r["issued"] += res.get("sent", 0) + x.get("connections", 1)
        for k in KINDS:
            r["kinds"][k] += (res.get("kinds", {}).get(k) or {}).get("n", 0)
        r["gen_res"].append(res.get("resilience"))
    r["offered"] = (base["ok"] + base["errors"] + base.get("unsent", 0)) / secs
    r["goodput"] = r["ok"] / secs
    lat = base.get("latency_us", {})
    r["p50_ms"] = lat.get("p50", 0) / 1e3 if base["ok"] else None
    r["p99_ms"] = lat.get("p99", 0) / 1e3 if base["ok"] else None
    r["cdf_ok"] = base.get("cdf", {}).get("ok", [])
    r["cdf_all"] = base.get("cdf", {}).get("all", [])
    r["measured"] = r["ok"] + r["errors"] + r["unsent"]
    # layers
    recv = {1: 0, 2: 0, 3: 0}
    retries = hedges = denials = breaker = 0
    have_res = False
    for path in glob.glob(os.path.join(d, "layer-*.json")):
        dump = last_dump(path)
        if dump is None:
            continue
        t = tier_of(dump["layer"])
        if t in recv:
            recv[t] += dump["received"]
        res = dump.get("resilience")
        if isinstance(res, dict):
            have_res = True
            retries += res["retries"]
            hedges += res["hedges"]
            denials += res["denials"]
            breaker += res["breaker_requests"] + res["breaker_pending"]
    for res in r["gen_res"]:
        if isinstance(res, dict):
            have_res = True
            retries += res["retries"]
            hedges += res["hedges"]
            denials += res["denials"]
            breaker += res["breaker_requests"] + res["breaker_pending"]
    r["recv"] = recv
    n = r["issued"] or 1
    r["tier_ratio"] = {1: recv[1] / n, 2: recv[2] / (n * f1),
                       3: recv[3] / (n * f1 * f2)}
    r["amplification"] = r["tier_ratio"][3]
    r["retries"], r["hedges"], r["denials"], r["breaker_refused"] = (
        retries, hedges, denials, breaker)
    r["have_res"] = have_res
    return r


def cell_line(cell, f1, f2):
    r = read_run(cell, f1, f2)
    if r is None:
        print("[resilience]   no generator output")
        return
    fails = ", ".join("%s %d" % (k, v) for k, v in r["kinds"].items() if v)
    print("[resilience]   goodput %.0f/s, p99 %s ms, failed %d (%s), "
          "amplification %.2f (t1 %.2f t2 %.2f), retries %d"
          % (r["goodput"], "%.1f" % r["p99_ms"] if r["p99_ms"] is not None else "-",
             r["errors"], fails or "none", r["amplification"],
             r["tier_ratio"][1], r["tier_ratio"][2], r["retries"]))


def spread(xs, fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    if len(xs) == 1 or fmt(min(xs)) == fmt(max(xs)):
        return fmt(mean(xs))
    return "%s [%s-%s]" % (fmt(mean(xs)), fmt(min(xs)), fmt(max(xs)))


def f0(x):
    return "%.0f" % x


def f2(x):
    return "%.2f" % x


def mean_cdf(cdfs):
    """Quantile-averaged CDF of several runs: the mean latency at each
    fraction (the runs give the same fractions)."""
    cdfs = [c for c in cdfs if c]
    if not cdfs:
        return []
    n = min(len(c) for c in cdfs)
    return [(sum(c[i][0] for c in cdfs) / len(cdfs), cdfs[0][i][1])
            for i in range(n)]


def load_label(load):
    return "spike" if load == "spike" else "%sx" % load


def report(raw, out, date):
    st = json.load(open(os.path.join(raw, "settings.json")))
    f1, f2_ = st["f1"], st["f2"]
    cap = float(st["capacity"])
    scenarios = st["scenarios"].split()
    cells = {}
    for sc in scenarios:
        for load_dir in sorted(glob.glob(os.path.join(raw, sc, "*"))):
            load = os.path.basename(load_dir)
            runs = []
            for d in sorted(glob.glob(os.path.join(load_dir, "run*"))):
                r = read_run(d, f1, f2_)
                if r is not None:
                    runs.append(r)
            if runs:
                cells[(sc, load)] = runs

    def agg(sc, load, key):
        rs = cells.get((sc, load), [])
        return mean([r[key] for r in rs])

    def loads_of(sc):
        ls = [l for (s, l) in cells if s == sc]
        return sorted(ls, key=lambda l: (l == "spike", float(l) if l != "spike" else 0))

    md = []
    md.append("# Circuit breakers and retries in a 3-tier chain, %s\n" % date)
    md.append("Generated by `examples/testbed/resilience.sh` (`make bench-resilience`; "
              "how to read it: `docs/resilience-experiment.md`). Commit `%s`, %d "
              "cores (%s), every process on one machine.\n"
              % (st["commit"], st["cores"], st["cpu"]))
    md.append("Chain: sluice-bench (open loop, Poisson arrivals, latency from the "
              "intended send time, deadline %d ms) -> **t1** (%s workers x us, "
              "fan-out %d) -> **t2** (%s, fan-out %d) -> **t3** x%d (%s each); "
              "fan-out %s; %d B messages on every call. %d requests reach t3 per "
              "request entering the chain. Service time is simulated by sleeping "
              "workers (capacity = workers / service time). %s s measured per run "
              "after %s s of warm-up, a fresh chain per run, %d run(s) per cell, "
              "interleaved.\n"
              % (st["deadline_ms"], st["t1"].replace(" ", " x "), f1,
                 st["t2"].replace(" ", " x "), f2_, st["t3_instances"],
                 st["t3"].replace(" ", " x "), st["fanout_mode"], st["size"],
                 f1 * f2_, st["duration"], st["warmup"], st["runs"]))
    md.append("Capacity: **%.0f requests/s** entering the chain (%s; t3 bounds it at "
              "%s computed).\n" % (cap, "best goodput of a short ramp without "
                                   "breakers or retries" if st["capacity_how"] ==
                                   "measured" else st["capacity_how"], st["computed"]))
    md.append("Scenarios: *none* (rr, no breaker, no retry); *cb-tK* / *cb-all*: a "
              "static breaker max_requests %d on the channel calling tier K / "
              "every tier, rr, no retry; *storm-aN-iI*: breaker max_requests %d at "
              "tier 3, retries at tiers 2 and 3 with maxAttempts N (the first "
              "included; N = 1: none) every I ms (0 = 1 ms), retrying UNAVAILABLE "
              "and RESOURCE_EXHAUSTED, retry budget and throttling off; *default*: "
              "sluice's defaults at every tier (btc, no breaker) with a retry "
              "policy (3 attempts, 25 ms backoff x2 to 100 ms) and retryThrottling "
              "(10, 0.1) from a service config, the library's default retry "
              "budget. *spike*: %.1fx capacity for the whole run plus %.1fx for "
              "%s s in its middle from a second generator.\n"
              % (st["cb_max"], st["storm_cb"], st["spike_base"], st["spike_add"],
                 st["spike_s"]))
    md.append("Columns: *offered* requests/s the base generator sent in the measured "
              "window (Poisson: it varies around the rate; a spike's second generator "
              "not included); *goodput* successful requests/s (both generators in a spike "
              "run) and %% of capacity; failed requests by kind as the generator "
              "classes them (*breaker*: RESOURCE_EXHAUSTED \"circuit breaker\", at "
              "any tier; *drop*: RESOURCE_EXHAUSTED \"dropped locally\" by a btc "
              "strategy; *refusal*: DEADLINE_EXCEEDED \"dropped locally\"; "
              "*timeout*; *other*: anything else, e.g. a layer's queue expiry), "
              "share of the requests measured; *p50/p99*: of the successful "
              "requests (a spike run: of the base generator's); *ampl.*: "
              "amplification, attempts arriving at t3 per request entering the "
              "chain / %d (1.0 = every request reached t3 once per fan-out call, "
              "no retry); *t1/t2*: the same ratio at tiers 1 and 2; *retries*: "
              "retry attempts made by all channels; *denied*: retries not made "
              "(budget, throttling, pushback, deadline, max_retries). Several "
              "runs: mean [min-max].\n" % (f1 * f2_))

    # ---- summary table
    md.append("## Results\n")
    md.append("| scenario | load | offered/s | goodput/s | % cap | breaker | drop | refusal "
              "| timeout | other | p50 ms | p99 ms | ampl. | t1 | t2 | retries | denied |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for sc in scenarios:
        for load in loads_of(sc):
            rs = cells[(sc, load)]
            meas = mean([r["measured"] for r in rs]) or 1

            def kind(k):
                v = mean([r["kinds"][k] for r in rs])
                return "%.0f (%.0f %%)" % (v, 100 * v / meas) if v else "0"
            other = mean([r["kinds"]["other"] + r["unsent"] + r["unfinished"] for r in rs])
            md.append("| %s | %s | %.0f | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s "
                      "| %s | %s | %s | %s |"
                      % (sc, load_label(load), mean([r["offered"] for r in rs]),
                         spread([r["goodput"] for r in rs], f0),
                         100 * agg(sc, load, "goodput") / cap, kind("breaker"),
                         kind("early_drop"), kind("deadline_refusal"), kind("timeout"),
                         "%.0f (%.0f %%)" % (other, 100 * other / meas) if other else "0",
                         spread([r["p50_ms"] for r in rs], fms),
                         spread([r["p99_ms"] for r in rs], fms),
                         spread([r["amplification"] for r in rs], f2),
                         f2(mean([r["tier_ratio"][1] for r in rs])),
                         f2(mean([r["tier_ratio"][2] for r in rs])),
                         f0(mean([r["retries"] for r in rs])) if rs[0]["have_res"] else "n/a",
                         f0(mean([r["denials"] for r in rs])) if rs[0]["have_res"] else "n/a"))
    md.append("")

    # ---- targets
    md.append("## Issue 13 targets\n")
    lines = []
    d12 = cells.get(("default", "1.2"))
    d08 = cells.get(("default", "0.8"))
    if d12:
        g = mean([r["goodput"] for r in d12])
        p99 = mean([r["p99_ms"] for r in d12])
        amp = mean([r["amplification"] for r in d12])
        base = min([r["p99_ms"] for r in d08 if r["p99_ms"] is not None], default=None) if d08 else None
        ok_g = g >= 0.95 * cap
        lines.append("- (c) *default* at 1.2x: goodput %.0f/s = %.0f %% of capacity "
                     "(target >= 95 %%): **%s**." % (g, 100 * g / cap, "met" if ok_g else "not met"))
        if p99 is not None and base:
            lines.append("- (c) p99 at 1.2x %.1f ms vs its under-load (0.8x, the lowest "
                         "run) p99 %.1f ms = %.2fx (target <= 2x): **%s**."
                         % (p99, base, p99 / base, "met" if p99 <= 2 * base else "not met"))
        else:
            lines.append("- (c) p99 target: not computable (no successful call or no 0.8x cell).")
        lines.append("- (c) amplification at 1.2x %.2f (target <= 1.1): **%s**."
                     % (amp, "met" if amp <= 1.1 else "not met"))
        statics = [(sc, mean([r["goodput"] for r in cells[(sc, "1.2")]]),
                    mean([r["p99_ms"] for r in cells[(sc, "1.2")]]))
                   for sc in STATIC if cells.get((sc, "1.2"))]
        statics = [s for s in statics if s[2] is not None]
        if statics and p99 is not None:
            best = max(statics, key=lambda s: s[1])
            dom_best = g >= best[1] and p99 <= best[2]
            dom_all = all(g >= s[1] and p99 <= s[2] for s in statics)
            lines.append("- (c) vs the best static breaker at 1.2x (by goodput: %s, "
                         "%.0f/s, p99 %.1f ms): default %.0f/s, p99 %.1f ms: beats it "
                         "on both at once: **%s**; on both against every static "
                         "placement: **%s**."
                         % (best[0], best[1], best[2], g, p99,
                            "yes" if dom_best else "no", "yes" if dom_all else "no"))
    else:
        lines.append("- (c): no *default* cell at 1.2x.")
    def storm_key(sc):
        m = re.match(r"storm-a(\d+)-i(\d+)$", sc)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    storms = sorted({sc for (sc, _) in cells if sc.startswith("storm")}, key=storm_key)
    if storms:
        lines.append("- (b) the storm scenarios (a breaker of max_requests %d at tier 3 "
                     "refuses most calls to t3, so the retries show as attempts at t2 "
                     "per request x %d; t3's ratio is bounded by the breaker):\n"
                     % (st["storm_cb"], f1))
        lines.append("  | scenario | load | goodput/s | p99 ms | attempts at t2 | at t3 "
                     "| retries |")
        lines.append("  |---|---|---|---|---|---|---|")
        for sc in storms:
            for load in ("1.2", "spike"):
                rs = cells.get((sc, load))
                if rs:
                    lines.append("  | %s | %s | %.0f | %s | %.2f | %.2f | %s |"
                                 % (sc, load_label(load), mean([r["goodput"] for r in rs]),
                                    spread([r["p99_ms"] for r in rs], fms),
                                    mean([r["tier_ratio"][2] for r in rs]),
                                    mean([r["amplification"] for r in rs]),
                                    f0(mean([r["retries"] for r in rs]))
                                    if rs[0]["have_res"] else "n/a"))
        lines.append("")
        lines.append("  A storm shows as attempts growing with maxAttempts while goodput "
                     "does not grow with them.")
    md.extend(lines)
    md.append("")

    # ---- data and plots
    plots = []
    dat = os.path.join(out, "resilience-%s.dat" % date)
    blocks = []  # (name, rows)
    with open(dat, "w") as f:
        f.write("# blocks: goodput/p99 vs load per scenario (load goodput p99_ms "
                "amplification), then CDFs (latency_ms fraction) per scenario/load "
                "for ok and all calls; see the comment above each block\n")
        idx = 0
        gp_index = {}
        for sc in scenarios:
            rows = []
            for load in loads_of(sc):
                if load == "spike":
                    continue
                rows.append((float(load), agg(sc, load, "goodput"),
                             agg(sc, load, "p99_ms") or 0, agg(sc, load, "amplification")))
            if rows:
                f.write("# load %s\n" % sc)
                for row in rows:
                    f.write("%.2f %.1f %.3f %.3f\n" % row)
                f.write("\n\n")
                gp_index[sc] = idx
                idx += 1
        cdf_index = {}
        for (sc, load), rs in sorted(cells.items()):
            for what in ("ok", "all"):
                pts = mean_cdf([r["cdf_" + what] for r in rs])
                if not pts:
                    continue
                f.write("# cdf %s %s %s\n" % (sc, load, what))
                for x, y in pts:
                    f.write("%.4f %.4f\n" % (x / 1e3, y))
                f.write("\n\n")
                cdf_index[(sc, load, what)] = idx
                idx += 1
    gp = gnuplot_terminal("900,560")
    if gp:
        term, ext = gp

        def plot(name, title, xlabel, ylabel, series, extra=""):
            if not series:
                return
            fn = "resilience-%s-%s.%s" % (date, name, ext)
            script = ["set terminal %s" % term, "set output '%s'" % os.path.join(out, fn),
                      "set title \"%s\"" % title, "set xlabel '%s'" % xlabel,
                      "set ylabel '%s'" % ylabel, "set grid", "set key outside right",
                      extra, "plot " + ", ".join(series)]
            r = subprocess.run(["gnuplot"], input="\n".join(script), text=True,
                               capture_output=True)
            if r.returncode == 0:
                plots.append((title, fn))
            else:
                sys.stderr.write("gnuplot (%s): %s\n" % (name, r.stderr[-500:]))

        def cdf_series(keys):
            s = []
            for i, (sc, load) in enumerate(keys):
                for what, pt, dt in (("ok", 7, 1), ("all", 9, 2)):
                    k = (sc, load, what)
                    if k in cdf_index:
                        s.append("'%s' index %d using 1:2 with linespoints lc %d dt %d pt %d "
                                 "pi 10 ps 0.8 title '%s %s (%s)'"
                                 % (dat, cdf_index[k], i + 1, dt, pt, sc,
                                    load_label(load), "successful" if what == "ok" else "all"))
            return s
        cdf_extra = "set logscale x\nset yrange [0:1.02]\nset format x '%g'"
        placement = [s for s in ["none"] + STATIC + ["default"] if s in scenarios]
        plot("cdf-breakers", "Response time CDF at 1.2x capacity: breaker placement "
             "(circles: successful, triangles: all requests)",
             "response time (ms, log)", "fraction of requests",
             cdf_series([(s, "1.2") for s in placement]), cdf_extra)
        plot("cdf-storm", "Response time CDF at 1.2x capacity: retries with a "
             "max_requests %d breaker at tier 3" % st["storm_cb"],
             "response time (ms, log)", "fraction of requests",
             cdf_series([(s, "1.2") for s in storms] +
                        ([("default", "1.2")] if "default" in scenarios else [])), cdf_extra)
        plot("cdf-spike", "Response time CDF, load spike (base generator)",
             "response time (ms, log)", "fraction of requests",
             cdf_series([(s, "spike") for s in placement + storms]), cdf_extra)
        gp = ["'%s' index %d using 1:2 with linespoints lw 2 pt %d title '%s'"
              % (dat, gp_index[s], 5 + i, s) for i, s in enumerate(scenarios) if s in gp_index
              and not s.startswith("storm")]
        plot("goodput", "Goodput vs offered load (capacity %.0f/s)" % cap,
             "offered load / capacity", "successful requests/s", gp,
             "set yrange [0:%f]\nset xrange [0.7:1.3]\nset arrow from graph 0, first %f to graph 1, first %f nohead dt 2"
             % (cap * 1.3, cap, cap))
        pp = ["'%s' index %d using 1:3 with linespoints lw 2 pt %d title '%s'"
              % (dat, gp_index[s], 5 + i, s) for i, s in enumerate(scenarios) if s in gp_index
              and not s.startswith("storm")]
        plot("p99", "p99 of successful requests vs offered load",
             "offered load / capacity", "p99 (ms, log)", pp,
             "set logscale y\nset xrange [0.7:1.3]")
        # amplification: a bar per scenario at 1.2x and at the spike
        bars = os.path.join(out, "resilience-%s-ampl.dat" % date)
        with open(bars, "w") as f:
            f.write("# scenario amplification_1.2x amplification_spike\n")
            for sc in scenarios:
                a = agg(sc, "1.2", "amplification") if cells.get((sc, "1.2")) else 0
                b = agg(sc, "spike", "amplification") if cells.get((sc, "spike")) else 0
                f.write("%s %.3f %.3f\n" % (sc, a or 0, b or 0))
        plot("amplification", "Retry amplification at t3 (1.0 = no retry, nothing lost)",
             "", "attempts at t3 / (requests x %d)" % (f1 * f2_),
             ["'%s' using 2:xtic(1) title '1.2x'" % bars, "'' using 3 title 'spike'"],
             "set style data histograms\nset style fill solid 0.6\nset xtics rotate by -30\n"
             "set yrange [0:*]\nset arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2")
    md.append("## Plots\n")
    for title, fn in plots:
        md.append("![%s](%s)\n" % (title, fn))
    if not plots:
        md.append("(gnuplot not found: no plots.)\n")
    md.append("Data: `resilience-%s.dat` (goodput, p99, amplification per load; the "
              "CDFs), every generator output and layer dump: `resilience-%s-raw/`.\n"
              % (date, date))
    with open(os.path.join(out, "resilience-%s.md" % date), "w") as f:
        f.write("\n".join(md))


def main():
    a = sys.argv
    if len(a) == 5 and a[1] == "cell":
        cell_line(a[2], int(a[3]), int(a[4]))
    elif len(a) == 5 and a[1] == "report":
        report(a[2], a[3], a[4])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
