#!/usr/bin/env python3
"""The chain testbed's report (run by examples/testbed/run.sh).

  report.py report RAW_DIR OUT_DIR DATE
      reads RAW_DIR/capacity.json, settings.json, <lb>-<load>/gen.json and
      <lb>-<load>/layer-*.json; writes OUT_DIR/testbed-DATE.md, the data
      file testbed-DATE.dat and the plots testbed-DATE-p99.png and
      testbed-DATE-goodput.png (gnuplot; SVG when pngcairo is missing).
  report.py normalize-bench BENCH_JSON RATE DURATION
      turns sluice-bench --json output into testbed_gen's keys (stdout).
"""
import glob
import json
import os
import re
import subprocess
import sys

LAYERS = ["gateway", "A", "B", "C"]


def normalize_bench(path, rate, duration):
    """sluice-bench --json (open loop) onto testbed_gen's keys. sluice-bench
    counts errors by code only: in this chain RESOURCE_EXHAUSTED comes only
    from a strategy's local drop (the layers use no server admission), so it
    counts as early drops; DEADLINE_EXCEEDED cannot be split into timeouts
    and deadline refusals (all are counted as timeouts), and the latency of
    the drops is unknown."""
    b = json.load(open(path))
    r = b["result"]
    codes = dict(r.get("errors_by_code", {}))
    codes["OK"] = r["ok"]
    lat = r.get("latency_us", {})
    secs = float(r.get("seconds", duration))
    out = {
        "generator": "sluice-bench open-loop poisson",
        "rate": float(rate),
        "duration_s": secs,
        "measured_calls": r["ok"] + r["errors"],
        "offered_rps": (r["ok"] + r["errors"]) / secs,
        "ok": r["ok"],
        "goodput_rps": r["ok"] / secs,
        "early_drops": codes.get("RESOURCE_EXHAUSTED", 0),
        "deadline_drops": 0,
        "timeouts": codes.get("DEADLINE_EXCEEDED", 0),
        "p50_ms": lat.get("p50", 0) / 1e3,
        "p90_ms": lat.get("p90", 0) / 1e3,
        "p99_ms": lat.get("p99", 0) / 1e3,
        "p999_ms": lat.get("p999", 0) / 1e3,
        "max_ms": lat.get("max", 0) / 1e3,
        "drop_p99_ms": 0,
        "late_starts": r.get("late", 0),
        "unfinished": r.get("unfinished", 0),
        "codes": codes,
    }
    json.dump(out, sys.stdout)
    print()


def last_dump(path):
    """The last JSON line of a layer's stats file (the exit dump)."""
    last = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    last = json.loads(line)
                except ValueError:
                    pass
    return last


def layer_summary(cell):
    """Per layer kind: calls sent downstream, weighted algo/strategy time,
    local drops by reason, calls that expired in the layer's queue."""
    agg = {}
    for path in sorted(glob.glob(os.path.join(cell, "layer-*.json"))):
        d = last_dump(path)
        if d is None:
            continue
        kind = re.sub(r"\d+$", "", d["layer"])
        a = agg.setdefault(kind, {"sent": 0, "algo_w": 0.0, "strat_w": 0.0,
                                  "drop_limit": 0, "drop_deadline": 0,
                                  "drop_other": 0, "skipped": 0,
                                  "received": 0, "served": 0,
                                  "queue_wait_us": 0.0, "queue_n": 0,
                                  "queue_max": 0, "states": set(),
                                  "limits": []})
        a["skipped"] += d["skipped"]
        a["received"] += d["received"]
        a["served"] += d["served"]
        a["queue_wait_us"] += d["queue_wait_us_mean"] * (d["served"] + d["skipped"])
        a["queue_n"] += d["served"] + d["skipped"]
        a["queue_max"] = max(a["queue_max"], d["queue_max"])
        ch = d.get("channel")
        if ch is None:
            continue
        a["drop_limit"] += ch["dropped_limit"] + ch["dropped_path_limit"] + ch["dropped_wait"]
        a["drop_deadline"] += ch["dropped_deadline"]
        a["drop_other"] += ch["dropped_unavailable"]
        for dest in ch["dests"]:
            a["sent"] += dest["sent"]
            a["algo_w"] += dest["algo_ns"] * dest["sent"]
            a["strat_w"] += dest["strategy_us"] * dest["sent"]
            a["states"].add(dest["lb_state"])
            a["limits"].append(dest["limit"])
    for a in agg.values():
        a["algo_ns"] = a["algo_w"] / a["sent"] if a["sent"] else 0
        a["strategy_us"] = a["strat_w"] / a["sent"] if a["sent"] else 0
        a["queue_wait_ms"] = a["queue_wait_us"] / a["queue_n"] / 1e3 if a["queue_n"] else 0
    return agg


def fmt_ms(x):
    return "%.1f" % x if x >= 10 else "%.2f" % x


def report(raw, out, date):
    cap = json.load(open(os.path.join(raw, "capacity.json")))
    st = json.load(open(os.path.join(raw, "settings.json")))
    capacity = float(cap["capacity"])
    strategies = st["strategies"].split()
    loads = st["loads"].split()
    cells = {}
    for lb in strategies:
        for load in loads:
            cell = os.path.join(raw, "%s-%s" % (lb, load))
            gp = os.path.join(cell, "gen.json")
            if not os.path.exists(gp):
                continue
            cells[(lb, load)] = (json.load(open(gp)), layer_summary(cell))

    name = {"0.3": "under-load", "1.0": "high-load", "2.0": "overload"}
    md = []
    md.append("# Chain testbed, %s\n" % date)
    md.append("Generated by `examples/testbed/run.sh` (see `README.md` here for "
              "how and the caveats). Commit `%s`, %d cores (%s), every "
              "process on one machine.\n" % (st["commit"], st["cores"], st["cpu"]))
    md.append("Chain: generator -> %s; the weakest layer is **%s** (%d workers x "
              "%d us per instance). Other inner layers %d workers x %d us, gateway "
              "%d x %d us, database %d x %d us (service time simulated by sleeping "
              "worker threads). Payload %d B, deadline %d ms set by the generator "
              "and propagated along the chain. %s s per cell after %s s of "
              "warm-up, a fresh chain per cell. Generator: %s (open loop, Poisson "
              "arrivals, latency from the intended start time).\n"
              % (st["instances"].replace(" ", " -> "), st["weak"],
                 st["weak_workers"], st["weak_service_us"], st["workers"],
                 st["service_us"], st["gw_workers"], st["gw_service_us"],
                 st["db_workers"], st["db_service_us"], st["size"],
                 st["deadline_ms"], st["duration"], st["warmup"],
                 st["generator"]))
    md.append("Capacity: **%.0f calls/s**, %s (computed from the weakest layer: "
              "%s calls/s%s).\n"
              % (capacity, cap["how"] if cap["how"] != "measured" else
                 "measured: the best goodput of a short ramp with lcc",
                 cap["computed"],
                 "; the sleeps overshoot, so the measured value is lower"
                 if cap["how"] == "measured" else ""))
    md.append("Columns: *goodput* = successful calls/s (and % of capacity); "
              "latency percentiles of the successful calls; *early drops* = "
              "RESOURCE_EXHAUSTED \"dropped locally\" by some layer's strategy "
              "(share of offered calls; their p99 latency as seen by the "
              "generator); *deadline refusals* = DEADLINE_EXCEEDED \"dropped "
              "locally\" (a strategy saw the deadline could not be met); "
              "*timeouts* = other DEADLINE_EXCEEDED; *other* = any other "
              "error. With sluice-bench as the generator, errors are known by code "
              "only: every RESOURCE_EXHAUSTED counts as an early drop (the layers "
              "use no server admission, so only a strategy produces it), every "
              "DEADLINE_EXCEEDED as a timeout, and the drops' latency is not "
              "known (n/a).\n")

    md.append("## Summary\n")
    md.append("| strategy | load | offered/s | goodput/s | p50 ms | p99 ms | p99.9 ms "
              "| early drops | drop p99 ms | deadline refusals | timeouts | other |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for lb in strategies:
        for load in loads:
            if (lb, load) not in cells:
                continue
            g, _ = cells[(lb, load)]
            n = g.get("measured_calls") or 1
            other = sum(v for k, v in g.get("codes", {}).items()
                        if k not in ("OK", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"))
            other += g["codes"].get("RESOURCE_EXHAUSTED", 0) - g["early_drops"]
            bench = "sluice-bench" in g.get("generator", "")
            md.append("| %s | %s (%s) | %.0f | %.0f (%.0f %%) | %s | %s | %s | %d (%.1f %%) "
                      "| %s | %s | %d | %d |"
                      % (lb, name.get(load, load), load, g["offered_rps"],
                         g["goodput_rps"], 100 * g["goodput_rps"] / capacity,
                         fmt_ms(g["p50_ms"]), fmt_ms(g["p99_ms"]),
                         fmt_ms(g["p999_ms"]), g["early_drops"],
                         100.0 * g["early_drops"] / n,
                         "n/a" if bench else
                         fmt_ms(g.get("drop_p99_ms", 0)) if g["early_drops"] else "-",
                         "n/a" if bench else str(g["deadline_drops"]),
                         g["timeouts"], other))
    md.append("")

    md.append("## Per layer\n")
    md.append("Each layer's channel to the next (summed over the layer's "
              "instances, from the stats each layer writes at exit, warm-up "
              "included): mean *algo* time (the pick decision, ns) and mean "
              "*strategy* time (decision until the request is handed to "
              "HTTP/2, us), weighted by calls sent; local drops (limit / "
              "deadline); calls that expired while queued for a worker "
              "(*expired*); mean wait for a worker (*queue ms*).\n")
    for lb in strategies:
        md.append("### %s\n" % lb)
        md.append("| load | layer | sent | algo ns | strategy us | drops limit | "
                  "drops deadline | expired | queue ms | states |")
        md.append("|---|---|---|---|---|---|---|---|---|---|")
        for load in loads:
            if (lb, load) not in cells:
                continue
            _, agg = cells[(lb, load)]
            for kind in LAYERS + ["db"]:
                a = agg.get(kind)
                if a is None:
                    continue
                if kind == "db":
                    md.append("| %s | db | - | - | - | - | - | %d | %s | - |"
                              % (load, a["skipped"], fmt_ms(a["queue_wait_ms"])))
                    continue
                md.append("| %s | %s | %d | %.0f | %.1f | %d | %d | %d | %s | %s |"
                          % (load, kind, a["sent"], a["algo_ns"],
                             a["strategy_us"], a["drop_limit"],
                             a["drop_deadline"], a["skipped"],
                             fmt_ms(a["queue_wait_ms"]),
                             " ".join(sorted(a["states"]))))
        md.append("")

    # Plots.
    dat = os.path.join(out, "testbed-%s.dat" % date)
    with open(dat, "w") as f:
        f.write("# strategy blocks: offered/capacity offered_rps goodput_rps p50_ms p99_ms p999_ms early_drop_share\n")
        for lb in strategies:
            f.write("# %s\n" % lb)
            for load in loads:
                if (lb, load) not in cells:
                    continue
                g, _ = cells[(lb, load)]
                n = g.get("measured_calls") or 1
                f.write("%.3f %.1f %.1f %.3f %.3f %.3f %.4f\n"
                        % (g["offered_rps"] / capacity, g["offered_rps"],
                           g["goodput_rps"], g["p50_ms"], g["p99_ms"],
                           g["p999_ms"], g["early_drops"] / n))
            f.write("\n\n")
    terms = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True,
                           text=True)
    listing = terms.stdout + terms.stderr
    if "pngcairo" in listing:
        term, ext = "pngcairo size 800,500 font 'sans,10'", "png"
    else:
        term, ext = "svg size 800,500", "svg"
    plots = []
    for what, col, ylabel, extra in (
            ("p99", 5, "p99 latency of successful calls (ms)", "set logscale y\n"),
            ("goodput", 3, "goodput (calls/s)",
             "set yrange [0:%f]\nset arrow from graph 0, first %f to graph 1, first %f nohead dt 2\n"
             "set label 'capacity' at graph 0.02, first %f offset 0,0.7\n"
             % (capacity * 1.2, capacity, capacity, capacity))):
        png = "testbed-%s-%s.%s" % (date, what, ext)
        script = ["set terminal %s" % term,
                  "set output '%s'" % os.path.join(out, png),
                  "set title 'Chain testbed %s: %s vs offered load (capacity %.0f/s)'"
                  % (date, what, capacity),
                  "set xlabel 'offered load / capacity'",
                  "set ylabel '%s'" % ylabel,
                  "set key top left",
                  "set grid",
                  "set xrange [0:*]",
                  extra]
        series = ", ".join(
            "'%s' index %d using 1:%d with linespoints lw 2 pt %d title '%s'"
            % (dat, i, col, 5 + i, lb) for i, lb in enumerate(strategies))
        script.append("plot " + series)
        subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)
        plots.append((what, png))

    md.append("## Plots\n")
    for what, png in plots:
        md.append("![%s vs offered load](%s)\n" % (what, png))
    none = ["%s at %s" % (lb, load) for (lb, load), (g, _) in sorted(cells.items())
            if g["ok"] == 0]
    if none:
        md.append("No successful call (so no latency point in the p99 plot): %s.\n"
                  % ", ".join(none))
    md.append("Data: `testbed-%s.dat`; every generator output and layer "
              "dump: `testbed-%s-raw/`.\n" % (date, date))
    with open(os.path.join(out, "testbed-%s.md" % date), "w") as f:
        f.write("\n".join(md))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "report" and len(sys.argv) == 5:
        report(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "normalize-bench":
        normalize_bench(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
