#!/usr/bin/env python3
"""The chain testbed's report (run by examples/testbed/run.sh).

  report.py report RAW_DIR OUT_DIR DATE
      reads RAW_DIR/capacity.json, settings.json and, per cell
      <lb>-<load>/, the generator's gen.json and the layers' layer-*.json
      (one run), or run<k>/gen.json and run<k>/layer-*.json (RUNS > 1);
      writes OUT_DIR/testbed-DATE.md, the data file testbed-DATE.dat and the
      plots testbed-DATE-p99.png and testbed-DATE-goodput.png (gnuplot; SVG
      when pngcairo is missing, none when gnuplot is missing).
  report.py normalize-bench BENCH_JSON RATE DURATION
      turns sluice-bench --json output into testbed_gen's keys (stdout).
"""
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys

LAYERS = ["gateway", "A", "B", "C"]
# The generator's failure kinds (sluice-bench --json "kinds", testbed_gen
# --json "kinds").
GEN_KINDS = ["early_drop", "deadline_refusal", "timeout", "other"]
# The target of issue 6 for the latency of an early drop, us.
DROP_TARGET_US = 1000.0


def normalize_bench(path, rate, duration):
    """sluice-bench --json (open loop) onto testbed_gen's keys.

    With "kinds" in the result (failures classed by code and message, with
    their latency), the counts come from it. Without (an older
    sluice-bench), errors are known by code only: in this chain
    RESOURCE_EXHAUSTED comes only from a strategy's local drop (the layers
    use no server admission), so it counts as early drops; DEADLINE_EXCEEDED
    cannot be split into timeouts and deadline refusals (all are counted as
    timeouts), and the latency of the drops is unknown."""
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
    kinds = r.get("kinds", b.get("kinds"))
    if isinstance(kinds, dict):
        out["kinds"] = kinds
        k = lambda name, key: (kinds.get(name) or {}).get(key, 0)
        out["early_drops"] = k("early_drop", "n")
        out["deadline_drops"] = k("deadline_refusal", "n")
        out["timeouts"] = k("timeout", "n")
        out["drop_p99_ms"] = k("early_drop", "p99_us") / 1e3
    json.dump(out, sys.stdout)
    print()


def gen_view(g):
    """The generator's failure counts of one run. From "kinds" when the
    generator gave it (sluice-bench with kinds, testbed_gen), else from the
    codes (older sluice-bench: no deadline refusals, no drop latency)."""
    kinds = g.get("kinds")
    codes = g.get("codes", {})
    if isinstance(kinds, dict):
        k = lambda name: kinds.get(name) or {}
        early = k("early_drop")
        return {"source": "kinds",
                "early": early.get("n", 0),
                "drop_p99_ms": early.get("p99_us", 0) / 1e3 if early.get("n") else None,
                "drop_max_ms": early.get("max_us", 0) / 1e3 if early.get("n") else None,
                "refusals": k("deadline_refusal").get("n", 0),
                "timeouts": k("timeout").get("n", 0),
                "other": k("other").get("n", 0)}
    bench = "sluice-bench" in g.get("generator", "")
    other = sum(v for c, v in codes.items()
                if c not in ("OK", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"))
    other += codes.get("RESOURCE_EXHAUSTED", 0) - g["early_drops"]
    return {"source": "codes",
            "early": g["early_drops"],
            "drop_p99_ms": None if bench or not g["early_drops"] else g.get("drop_p99_ms", 0),
            "drop_max_ms": None,
            "refusals": None if bench else g.get("deadline_drops", 0),
            "timeouts": g["timeouts"],
            "other": other}


class Hist:
    """Merged log-linear histograms ([lo_ns, hi_ns, count] buckets, as
    examples/testbed/hist.h writes them). A percentile is the upper bound of
    the bucket holding it (at most ~3 % above the true value), clamped to
    the exact max."""

    def __init__(self):
        self.buckets = {}
        self.max_us = 0.0
        self.min_us = None

    def add(self, h):
        if not h or not h.get("n"):
            return
        for lo, hi, c in h.get("buckets", []):
            self.buckets[(lo, hi)] = self.buckets.get((lo, hi), 0) + c
        self.max_us = max(self.max_us, h.get("max_us", 0))
        mn = h.get("min_us")
        if mn is not None:
            self.min_us = mn if self.min_us is None else min(self.min_us, mn)

    def merge(self, other):
        for key, c in other.buckets.items():
            self.buckets[key] = self.buckets.get(key, 0) + c
        self.max_us = max(self.max_us, other.max_us)
        if other.min_us is not None:
            self.min_us = other.min_us if self.min_us is None else min(self.min_us, other.min_us)

    @property
    def n(self):
        return sum(self.buckets.values())

    def pct_us(self, p):
        total = self.n
        if total == 0:
            return None
        rank = max(1, min(total, math.ceil(p * total / 100.0)))
        seen = 0
        for (lo, hi) in sorted(self.buckets):
            seen += self.buckets[(lo, hi)]
            if seen >= rank:
                v = min(hi / 1e3, self.max_us)
                return max(v, self.min_us or 0.0)
        return self.max_us


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
    local drops by reason and their latency (from the layer's own timing of
    its downstream calls, when the dump has it), calls that expired in the
    layer's queue."""
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
                                  "limits": [], "has_kinds": False,
                                  "local_drop": Hist(), "early_drop": Hist(),
                                  "deadline_refusal": Hist(),
                                  "decided": Hist()})
        a["skipped"] += d["skipped"]
        a["received"] += d["received"]
        a["served"] += d["served"]
        a["queue_wait_us"] += d["queue_wait_us_mean"] * (d["served"] + d["skipped"])
        a["queue_n"] += d["served"] + d["skipped"]
        a["queue_max"] = max(a["queue_max"], d["queue_max"])
        kinds = d.get("kinds")
        if isinstance(kinds, dict):
            a["has_kinds"] = True
            for k in ("early_drop", "deadline_refusal"):
                a[k].add(kinds.get(k))
                a["local_drop"].add(kinds.get(k))
            a["decided"].add(d.get("drop_decided"))
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


def slowest_drop_layer(agg):
    """(layer, p99 us, max us, n) of the layer whose local drops had the
    highest p99; None when no layer has drop timing, (None, ...) when no
    layer dropped."""
    if not any(a["has_kinds"] for a in agg.values()):
        return None
    best = (None, None, None, 0)
    for kind in LAYERS:
        a = agg.get(kind)
        if a is None or not a["has_kinds"] or a["local_drop"].n == 0:
            continue
        h = a["local_drop"]
        p99 = h.pct_us(99)
        if best[1] is None or p99 > best[1]:
            best = (kind, p99, h.max_us, h.n)
    return best


def gnuplot_terminal(size):
    """(terminal, file extension) for plots of size "W,H": pngcairo when
    gnuplot has it, else SVG; None without gnuplot."""
    if not shutil.which("gnuplot"):
        return None
    terms = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True,
                           text=True)
    if "pngcairo" in terms.stdout + terms.stderr:
        return "pngcairo size %s font 'sans,10'" % size, "png"
    return "svg size %s" % size, "svg"


def fmt_ms(x):
    return "%.1f" % x if x >= 10 else "%.2f" % x


def fmt_us(x):
    if x is None:
        return "-"
    return "%.0f" % x if x >= 100 else "%.1f" % x


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def spread(xs, fmt, unit=""):
    """mean, and min-max when there are several runs."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    m = fmt(mean(xs))
    if len(xs) == 1:
        return m + unit
    return "%s%s [%s-%s]" % (m, unit, fmt(min(xs)), fmt(max(xs)))


def run_dirs(cell):
    """One run: the cell itself; several: cell/run1, run2 ..."""
    if os.path.exists(os.path.join(cell, "gen.json")):
        return [cell]
    runs = glob.glob(os.path.join(cell, "run*"))
    runs = [r for r in runs if os.path.exists(os.path.join(r, "gen.json"))]
    return sorted(runs, key=lambda r: int(re.sub(r"\D", "", os.path.basename(r)) or 0))


def report(raw, out, date):
    cap = json.load(open(os.path.join(raw, "capacity.json")))
    st = json.load(open(os.path.join(raw, "settings.json")))
    capacity = float(cap["capacity"])
    strategies = st["strategies"].split()
    loads = st["loads"].split()
    cells = {}
    for lb in strategies:
        for load in loads:
            runs = []
            for d in run_dirs(os.path.join(raw, "%s-%s" % (lb, load))):
                g = json.load(open(os.path.join(d, "gen.json")))
                runs.append({"gen": g, "view": gen_view(g),
                             "layers": layer_summary(d)})
            if runs:
                cells[(lb, load)] = runs
    multi = any(len(r) > 1 for r in cells.values())
    under = min(loads, key=float) if loads and float(min(loads, key=float)) < 1 else None
    over = max(loads, key=float) if loads and float(max(loads, key=float)) >= 1.5 else None
    any_kinds = any(r["view"]["source"] == "kinds" for rs in cells.values() for r in rs)
    any_layer_kinds = any(slowest_drop_layer(r["layers"]) is not None
                          for rs in cells.values() for r in rs)

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
    if multi:
        counts = sorted({(lb, len(rs)) for (lb, _), rs in cells.items()})
        md.append("Runs per cell: %s. The repetitions are interleaved (every "
                  "strategy's first run, then every second run ...), so a slow "
                  "drift of the machine's load spreads over the strategies. "
                  "Where a cell has several runs, a figure is their mean, "
                  "followed by [min-max].\n"
                  % ", ".join("%s %d" % c for c in counts))
    md.append("Capacity: **%.0f calls/s**, %s (computed from the weakest layer: "
              "%s calls/s%s).\n"
              % (capacity, cap["how"] if cap["how"] != "measured" else
                 "measured: the best goodput of a short ramp with lcc",
                 cap["computed"],
                 "; the sleeps overshoot, so the measured value is lower"
                 if cap["how"] == "measured" else ""))
    cols = ("Columns: *goodput* = successful calls/s (and % of capacity); "
            "latency percentiles of the successful calls; *early drops* = "
            "RESOURCE_EXHAUSTED \"dropped locally\" by some layer's strategy "
            "(share of offered calls); *gen drop p99* = their p99 latency as "
            "the generator sees it (from the call's intended start, so it "
            "includes the hops to the layer that dropped it and any lateness "
            "of the generator); *layer drop p99* = the p99 of the local drops "
            "(early drops and deadline refusals) at the layer where it is "
            "highest, timed by that layer from the start of its downstream "
            "call to the completion callback, and the layer; *deadline "
            "refusals* = DEADLINE_EXCEEDED \"dropped locally\" (a strategy saw "
            "the deadline could not be met); *timeouts* = other "
            "DEADLINE_EXCEEDED; *other* = any other error.")
    if any_kinds:
        cols += (" The generator classes failures by code and message "
                 "(`kinds` in its JSON).")
    if not all(r["view"]["source"] == "kinds" for rs in cells.values() for r in rs):
        cols += (" Where the generator (an sluice-bench without `kinds`) knows "
                 "errors by code only, every RESOURCE_EXHAUSTED counts as an "
                 "early drop (the layers use no server admission, so only a "
                 "strategy produces it), every DEADLINE_EXCEEDED as a timeout, "
                 "and the drops' latency and the deadline refusals are not "
                 "known (n/a).")
    md.append(cols + "\n")

    # ---- targets
    if over is not None:
        md.append("## Issue 6 targets at overload (%s x capacity)\n" % over)
        md.append("Targets: goodput >= 90 %% of the measured capacity; p99 of the "
                  "successful calls <= 2x the under-load (%s) p99 (the lowest "
                  "of that cell's runs: noise only raises a p99); early drops answer in < 1 ms (the p99 of "
                  "the local drops at every layer, as the layer times them; the "
                  "max is shown beside it).\n" % (under or "-"))
        md.append("| strategy | run | goodput | >= 90 % | p99 ms / under-load p99 ms "
                  "| <= 2x | slowest layer's drop p99 / max us | p99 < 1 ms | "
                  "gen drop p99 ms |")
        md.append("|---|---|---|---|---|---|---|---|---|")
        verdicts = []
        for lb in strategies:
            rs = cells.get((lb, over))
            if not rs:
                continue
            base = None
            if under and cells.get((lb, under)):
                # The lowest of the under-load runs: machine noise only
                # ever raises a p99, so the quietest run is the best
                # estimate (and the strictest reference).
                base = min((r["gen"]["p99_ms"] for r in cells[(lb, under)]
                            if r["gen"]["ok"] > 0), default=None)
            tally = {"goodput": 0, "p99": 0, "drop": 0, "drop_known": 0,
                     "dropmax": 0}
            worst_max = None
            for i, r in enumerate(rs):
                g, v = r["gen"], r["view"]
                share = g["goodput_rps"] / capacity
                ok_g = share >= 0.9
                tally["goodput"] += ok_g
                if g["ok"] > 0 and base:
                    ratio = g["p99_ms"] / base
                    ok_p = ratio <= 2.0
                    ptxt = "%s / %s = %.2fx" % (fmt_ms(g["p99_ms"]), fmt_ms(base), ratio)
                elif g["ok"] == 0:
                    ok_p = False
                    ptxt = "- (no successful call)"
                else:
                    ok_p = None
                    ptxt = "%s / - (no under-load cell)" % fmt_ms(g["p99_ms"])
                tally["p99"] += bool(ok_p)
                sl = slowest_drop_layer(r["layers"])
                if sl is None:
                    dtxt, dok = "n/a", "n/a"
                elif sl[0] is None:
                    dtxt, dok = "no local drops", "-"
                else:
                    tally["drop_known"] += 1
                    held = sl[1] < DROP_TARGET_US
                    tally["drop"] += held
                    tally["dropmax"] += sl[2] < DROP_TARGET_US
                    worst_max = sl[2] if worst_max is None else max(worst_max, sl[2])
                    dtxt = "%s: %s / %s (n %d)" % (sl[0], fmt_us(sl[1]), fmt_us(sl[2]), sl[3])
                    dok = "yes" if held else "**no**"
                md.append("| %s | %d | %.0f/s (%.0f %%) | %s | %s | %s | %s | %s | %s |"
                          % (lb, i + 1, g["goodput_rps"], 100 * share,
                             "yes" if ok_g else "**no**", ptxt,
                             "n/a" if ok_p is None else "yes" if ok_p else "**no**",
                             dtxt, dok,
                             fmt_ms(v["drop_p99_ms"]) if v["drop_p99_ms"] is not None else "n/a"))
            n = len(rs)
            line = ("- **%s**: goodput >= 90 %% in %d of %d runs; p99 <= 2x "
                    "under-load in %d of %d; " % (lb, tally["goodput"], n, tally["p99"], n))
            if tally["drop_known"]:
                line += ("early drops answered in < 1 ms (p99, every layer) in "
                         "%d of %d runs with drops: **%s**; the slowest single "
                         "drop took %s us (%s)."
                         % (tally["drop"], tally["drop_known"],
                            "held" if tally["drop"] == tally["drop_known"] else "did not hold",
                            fmt_us(worst_max),
                            "under 1 ms" if worst_max < DROP_TARGET_US else "over 1 ms"))
            elif any(slowest_drop_layer(r["layers"]) is not None for r in rs):
                line += "no layer dropped a call locally, so the < 1 ms target was not exercised."
            else:
                line += "drop latency not measured (layer dumps without `kinds`)."
            verdicts.append(line)
        md.append("")
        md.extend(verdicts)
        md.append("")

    # ---- summary
    md.append("## Summary\n")
    md.append("| strategy | load | offered/s | goodput/s | p50 ms | p99 ms | p99.9 ms "
              "| early drops | gen drop p99 ms | layer drop p99 us | deadline refusals "
              "| timeouts | other |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for lb in strategies:
        for load in loads:
            rs = cells.get((lb, load))
            if not rs:
                continue
            gs = [r["gen"] for r in rs]
            vs = [r["view"] for r in rs]
            okrs = [g for g in gs if g["ok"] > 0]
            n = mean(g.get("measured_calls") or 1 for g in gs)
            early = mean(v["early"] for v in vs)
            good = [g["goodput_rps"] for g in gs]
            sls = [slowest_drop_layer(r["layers"]) for r in rs]
            if all(s is None for s in sls):
                ltxt = "n/a"
            else:
                known = [s for s in sls if s is not None and s[0] is not None]
                if not known:
                    ltxt = "-"
                else:
                    w = max(known, key=lambda s: s[1])
                    ltxt = "%s (%s)" % (fmt_us(w[1]), w[0])
                    if len(rs) > 1:
                        ltxt = "max %s" % ltxt
            dp = [v["drop_p99_ms"] for v in vs]
            if all(v["source"] == "codes" and v["drop_p99_ms"] is None and
                   "sluice-bench" in g.get("generator", "") for v, g in zip(vs, gs)):
                dtxt = "n/a"
            elif all(x is None for x in dp):
                dtxt = "-"
            else:
                dtxt = spread(dp, fmt_ms)
            ref = [v["refusals"] for v in vs]
            md.append("| %s | %s (%s) | %.0f | %s (%.0f %%) | %s | %s | %s | %.0f (%.1f %%) "
                      "| %s | %s | %s | %.0f | %.0f |"
                      % (lb, name.get(load, load), load,
                         mean(g["offered_rps"] for g in gs),
                         spread(good, lambda x: "%.0f" % x),
                         100 * mean(good) / capacity,
                         spread([g["p50_ms"] for g in okrs], fmt_ms),
                         spread([g["p99_ms"] for g in okrs], fmt_ms),
                         spread([g["p999_ms"] for g in okrs], fmt_ms),
                         early, 100.0 * early / n, dtxt, ltxt,
                         "n/a" if all(x is None for x in ref) else "%.0f" % mean(ref),
                         mean(v["timeouts"] for v in vs),
                         mean(v["other"] for v in vs)))
    md.append("")

    if multi:
        md.append("### Each run\n")
        md.append("| strategy | load | run | goodput/s | p99 ms | early drops "
                  "| gen drop p99 ms | layer drop p99 / max us | deadline refusals "
                  "| timeouts |")
        md.append("|---|---|---|---|---|---|---|---|---|---|")
        for lb in strategies:
            for load in loads:
                for i, r in enumerate(cells.get((lb, load), [])):
                    g, v = r["gen"], r["view"]
                    sl = slowest_drop_layer(r["layers"])
                    md.append("| %s | %s | %d | %.0f | %s | %d | %s | %s | %s | %d |"
                              % (lb, load, i + 1, g["goodput_rps"],
                                 fmt_ms(g["p99_ms"]) if g["ok"] else "-",
                                 v["early"],
                                 fmt_ms(v["drop_p99_ms"]) if v["drop_p99_ms"] is not None else "n/a",
                                 "n/a" if sl is None else "-" if sl[0] is None else
                                 "%s / %s (%s)" % (fmt_us(sl[1]), fmt_us(sl[2]), sl[0]),
                                 "n/a" if v["refusals"] is None else str(v["refusals"]),
                                 v["timeouts"]))
        md.append("")

    # ---- per layer
    md.append("## Per layer\n")
    md.append("Each layer's channel to the next (summed over the layer's "
              "instances, from the stats each layer writes at exit, warm-up "
              "included): mean *algo* time (the pick decision, ns) and mean "
              "*strategy* time (decision until the request is handed to "
              "HTTP/2, us), weighted by calls sent; local drops (limit / "
              "deadline); *local drop p99 / max us*: the latency of those "
              "drops, timed by the layer from the start of the downstream call "
              "to its completion callback (instances merged; a percentile is "
              "exact to ~3 %%, the max exactly); *decided p99 us*: of that, "
              "the part until the strategy's decision, as the library reports "
              "it in the drop's message (\"decided in N us\", counted from the "
              "call's creation on the worker thread, so it includes the "
              "hand-off to the channel's loop); calls that expired while "
              "queued for a worker (*expired*); mean wait for a worker "
              "(*queue ms*).%s\n"
              % (" A load marked #k is the k-th run of that cell." if multi else ""))
    for lb in strategies:
        md.append("### %s\n" % lb)
        md.append("| load | layer | sent | algo ns | strategy us | drops limit | "
                  "drops deadline | local drop p99 / max us | decided p99 us | expired "
                  "| queue ms | states |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for load in loads:
            rs = cells.get((lb, load), [])
            for i, r in enumerate(rs):
                agg = r["layers"]
                lab = load if len(rs) == 1 else "%s #%d" % (load, i + 1)
                for kind in LAYERS + ["db"]:
                    a = agg.get(kind)
                    if a is None:
                        continue
                    if kind == "db":
                        md.append("| %s | db | - | - | - | - | - | - | - | %d | %s | - |"
                                  % (lab, a["skipped"], fmt_ms(a["queue_wait_ms"])))
                        continue
                    h = a["local_drop"]
                    if not a["has_kinds"]:
                        dl = dd = "n/a"
                    elif h.n == 0:
                        dl = dd = "-"
                    else:
                        dl = "%s / %s" % (fmt_us(h.pct_us(99)), fmt_us(h.max_us))
                        dd = fmt_us(a["decided"].pct_us(99)) if a["decided"].n else "-"
                    md.append("| %s | %s | %d | %.0f | %.1f | %d | %d | %s | %s | %d | %s | %s |"
                              % (lab, kind, a["sent"], a["algo_ns"],
                                 a["strategy_us"], a["drop_limit"],
                                 a["drop_deadline"], dl, dd, a["skipped"],
                                 fmt_ms(a["queue_wait_ms"]),
                                 " ".join(sorted(a["states"]))))
        md.append("")

    # ---- data and plots
    dat = os.path.join(out, "testbed-%s.dat" % date)
    with open(dat, "w") as f:
        f.write("# strategy blocks: offered/capacity offered_rps goodput_rps p50_ms "
                "p99_ms p999_ms early_drop_share goodput_min goodput_max p99_min "
                "p99_max runs (means over the cell's runs; latencies over the runs "
                "with successful calls)\n")
        for lb in strategies:
            f.write("# %s\n" % lb)
            for load in loads:
                rs = cells.get((lb, load))
                if not rs:
                    continue
                gs = [r["gen"] for r in rs]
                okrs = [g for g in gs if g["ok"] > 0]
                good = [g["goodput_rps"] for g in gs]
                p99 = [g["p99_ms"] for g in okrs] or [0.0]
                share = mean(r["view"]["early"] / (r["gen"].get("measured_calls") or 1)
                             for r in rs)
                f.write("%.3f %.1f %.1f %.3f %.3f %.3f %.4f %.1f %.1f %.3f %.3f %d\n"
                        % (mean(g["offered_rps"] for g in gs) / capacity,
                           mean(g["offered_rps"] for g in gs), mean(good),
                           mean([g["p50_ms"] for g in okrs]) or 0.0, mean(p99),
                           mean([g["p999_ms"] for g in okrs]) or 0.0, share,
                           min(good), max(good), min(p99), max(p99), len(rs)))
            f.write("\n\n")
    plots = []
    gp = gnuplot_terminal("800,500")
    if gp:
        term, ext = gp
        for what, col, lo, hi, ylabel, extra in (
                ("p99", 5, 10, 11, "p99 latency of successful calls (ms)", "set logscale y\n"),
                ("goodput", 3, 8, 9, "goodput (calls/s)",
                 "set key bottom center\nset yrange [0:%f]\nset arrow from graph 0, first %f to graph 1, first %f nohead dt 2\n"
                 "set label 'capacity' at graph 0.02, first %f offset 0,0.7\n"
                 % (capacity * 1.2, capacity, capacity, capacity))):
            png = "testbed-%s-%s.%s" % (date, what, ext)
            script = ["set terminal %s" % term,
                      "set output '%s'" % os.path.join(out, png),
                      "set title 'Chain testbed %s: %s vs offered load (capacity %.0f/s)%s'"
                      % (date, what, capacity, ", bars: min-max of the runs" if multi else ""),
                      "set xlabel 'offered load / capacity'",
                      "set ylabel '%s'" % ylabel,
                      "set key top left",
                      "set grid",
                      "set xrange [0:*]",
                      extra]
            style = ("using 1:%d:%d:%d with yerrorlines" % (col, lo, hi) if multi
                     else "using 1:%d with linespoints" % col)
            series = ", ".join(
                "'%s' index %d %s lw 2 pt %d title '%s'"
                % (dat, i, style, 5 + i, lb) for i, lb in enumerate(strategies))
            script.append("plot " + series)
            subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)
            plots.append((what, png))

    md.append("## Plots\n")
    for what, png in plots:
        md.append("![%s vs offered load](%s)\n" % (what, png))
    if not plots:
        md.append("(gnuplot not found: no plots.)\n")
    none = ["%s at %s%s" % (lb, load, "" if len(rs) == 1 else " (run %s)" %
                            ", ".join(str(i + 1) for i, r in enumerate(rs) if r["gen"]["ok"] == 0))
            for (lb, load), rs in sorted(cells.items())
            if any(r["gen"]["ok"] == 0 for r in rs)]
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
