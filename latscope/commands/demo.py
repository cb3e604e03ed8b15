"""``latscope demo``: the paper's configurations on the simulated bench, captured and compared
(:mod:`latscope.capture.sim.demo`), and two captures under background load
(:mod:`latscope.capture.sim.demo_load`)."""

import json
import os
import sys
import time

import numpy as np

from latscope import LatscopeError
from latscope.analysis import api
from latscope.analysis.compare import compare_samples
from latscope.analysis.report import summary
from latscope.analysis.report.labels import class_label
from latscope.analysis.report.tables import compare_grouped
from latscope.analysis.stats import n_required
from latscope.capture.files.outputs import check_output_folder, open_output
from latscope.capture.sim import demo_load, simbench
from latscope.capture.sim.demo import DEFAULT_PACKETS, QUICK_PACKETS, run_demo


def _log(message):
    print(message, file=sys.stderr, flush=True)


# --- the comparison table -------------------------------------------------------------------------

def _paper(profile, stage):
    spec = profile.stages.get(stage)
    if spec is None or spec.source.startswith("assumption"):
        return ""
    return f"{spec.mean_us:.2f} ± {spec.three_sigma_us:.2f}"


class Analyses(dict):
    """Each capture analysed once, on first use, with its per-packet records (the report's
    comparisons need them): ``{path: Analysis}``."""

    def __missing__(self, path):
        self[path] = analysis = api.analyze_file(path, packets=True)
        return analysis


def _stats_of(analysis):
    """Per-stage statistics from :mod:`latscope.analysis` (ns)."""
    out = {}
    for name, s in analysis.stats.items():
        if not s.n:
            continue
        out[name] = {"n": s.n, "mean": s.mean_ns, "three_sigma": s.three_sigma_ns,
                     "p50": s.quantiles[50].value_ns, "p99": s.quantiles[99].value_ns,
                     "p999": s.quantiles[99.9].value_ns, "max": s.max_ns,
                     "resolution": s.resolution_ns,
                     "bounded": {p: s.quantiles[p].upper_ns is not None for p in (99, 99.9)}}
    return out


def comparison_rows(results, analyses=None):
    """Rows (dicts) of the comparison table: per capture and stage, the measured statistics in µs
    and the paper's Table I value where the profile takes one from it. ``analyses``: an
    :class:`Analyses` to take the captures' analyses from (and keep them in)."""
    analyses = Analyses() if analyses is None else analyses
    rows = []
    for r in results:
        profile = simbench.load_profile(r["profile"])
        stats = _stats_of(analyses[r["path"]])
        for stage in profile.stages:
            s = stats.get(stage)
            if s is None:
                continue
            rows.append({"config": profile.name, "stage": stage, "n": int(s["n"]),
                         "mean_us": s["mean"] / 1e3, "three_sigma_us": s["three_sigma"] / 1e3,
                         "p50_us": s["p50"] / 1e3, "p99_us": s["p99"] / 1e3,
                         "p999_us": s["p999"] / 1e3, "max_us": s["max"] / 1e3,
                         "resolution_ns": s["resolution"], "paper": _paper(profile, stage),
                         "p99_bounded": s["bounded"][99], "p999_bounded": s["bounded"][99.9],
                         "source": "analysis"})
    return rows


def format_table(rows):
    """The comparison table as text (µs; the paper's x̄ ± 3σ where Table I has the cell)."""
    headers = ("config", "stage", "n", "mean ± 3σ", "p50", "p99", "p99.9", "max", "paper")
    cells = [headers]

    def value(r, key):      # † where the sample does not bound the percentile
        return f"{r[key + '_us']:.3f}" + ("" if r.get(key + "_bounded", True) else "†")
    for r in rows:
        cells.append((r["config"], r["stage"], f"{r['n']:,}",
                      f"{r['mean_us']:.2f} ± {r['three_sigma_us']:.2f}", f"{r['p50_us']:.3f}",
                      value(r, "p99"), value(r, "p999"), f"{r['max_us']:.2f}",
                      r["paper"] or "-"))
    widths = [max(len(c[i]) for c in cells) for i in range(len(headers))]
    lines = []
    for k, row in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if 2 <= i <= 7 else c.ljust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    if any(not r.get(k, True) for r in rows for k in ("p99_bounded", "p999_bounded")):
        lines.append(f"† the sample does not bound this percentile (a two-sided 95 % interval "
                     f"needs ≥ {n_required(0.99):,} packets for p99, ≥ {n_required(0.999):,} for "
                     f"p99.9): a value of these packets, not a conclusion")
    return "\n".join(lines)


# --- under load -----------------------------------------------------------------------------------

#: Stages per class in the order a request meets them, and which of the fast track's stages each
#: of the stack's is compared with (the fast track delivers at ``rx.fast`` where the stack
#: delivers at ``rx.udp``; it has no ``rx.copy``).
STAGE_ORDER = ("rx.isr", "rx.copy", "rx.udp", "rx.fast", "tx.send", "tx.xmit", "node.e2e")
LEAD_STAGES = (("rx.isr", "rx.isr"), ("rx.udp", "rx.fast"), ("tx.send", "tx.send"),
               ("tx.xmit", "tx.xmit"), ("node.e2e", "node.e2e"))
#: Confidence of the lead's intervals.
LEAD_CONFIDENCE = 0.95


def _analyse(row, analyses):
    """``(row with its per-class figures, {(class, stage): latencies ns})``."""
    analysis = analyses[row["path"]]
    fa = analysis.result.frames
    hp = fa.classes.get(1)
    row = dict(row, requests=hp.requests if hp else 0, replied=hp.replied if hp else 0,
               dropped=hp.dropped if hp else 0)
    for key, name in (("deliver", row["deliver_stage"]), ("e2e", "node.e2e[hp]")):
        s = analysis.stats.get(name)
        row[key] = None if s is None or not s.n else {
            "n": s.n, "p50": s.p50_ns / 1e3, "p99": s.p99_ns / 1e3, "max": s.max_ns / 1e3,
            "p99_bounded": s.quantiles[99.0].upper_ns is not None}
    classes, samples = {}, {}
    ns_per_tick = 1e9 / fa.tick_hz
    for cls, report in sorted(fa.classes.items()):
        label = class_label(cls, analysis.result.metadata)
        stages = {}
        names = sorted(set(report.stats) | set(report.ambiguous),
                       key=lambda n: (STAGE_ORDER.index(n) if n in STAGE_ORDER
                                      else len(STAGE_ORDER), n))
        for stage in names:
            s = report.stats.get(stage)
            stages[stage] = {
                "n": s.n if s is not None else 0,
                "p50": s.p50_ns / 1e3 if s is not None and s.n else None,
                "p99": s.p99_ns / 1e3 if s is not None and s.n else None,
                "max": s.max_ns / 1e3 if s is not None and s.n else None,
                "p99_bounded": bool(s is not None and s.n
                                    and s.quantiles[99.0].upper_ns is not None),
                "ambiguous": int(report.ambiguous.get(stage, 0)),
                "coalesced": int(report.coalesced.get(stage, 0))}
            if stage in report.samples:
                samples[(label, stage)] = report.samples[stage][1] * ns_per_tick
        classes[label] = {"requests": report.requests, "replied": report.replied,
                          "dropped": report.dropped, "unknown": report.unknown,
                          "stages": stages}
    row["classes"] = classes
    return row, samples


def analyse_under_load(row, analyses=None):
    """A capture of :func:`latscope.capture.sim.demo_load.run_under_load` with its per-class
    figures: requests, replies and drops of class ``hp``, the delivery and end-to-end stages
    (µs), and ``classes``: per class (by name) its counts and every stage's n, p50, p99 and max
    (µs) with its ambiguous and coalesced requests. ``analyses``: as :func:`comparison_rows`."""
    return _analyse(row, Analyses() if analyses is None else analyses)[0]


def fast_track_lead(stack, fast, *, cls="hp", confidence=LEAD_CONFIDENCE):
    """The fast track's lead over the stack per stage of class ``cls``: stack minus fast track
    (positive: the fast track is earlier), in µs, for the mean (Welch interval) and the p50 and
    p99 (distribution-free intervals), from :func:`latscope.analysis.compare.compare_samples`.

    ``stack``, ``fast``: ``{(class, stage): latencies ns}`` of each capture. Returns one dict per
    stage both have (:data:`LEAD_STAGES`): ``stage`` (the stack's), ``fast_stage``, ``n_stack``,
    ``n_fast``, ``mean``, ``p50``, ``p99`` (each ``{"lead", "lower", "upper"}``, a bound
    ``None`` where the samples are too small for it) and ``confidence``.
    """
    def us(value):
        return None if value is None else value / 1e3
    out = []
    for stage, fast_stage in LEAD_STAGES:
        a, b = fast.get((cls, fast_stage)), stack.get((cls, stage))
        if a is None or b is None or len(a) < 2 or len(b) < 2:
            continue
        c = compare_samples(a, b, confidence=confidence, percentiles=(50.0, 99.0))
        row = {"stage": stage, "fast_stage": fast_stage, "n_stack": c.n_other,
               "n_fast": c.n_baseline, "confidence": confidence,
               "mean": {"lead": us(c.mean_diff_ns), "lower": us(c.mean_lower_ns),
                        "upper": us(c.mean_upper_ns)}}
        for p in (50.0, 99.0):
            q = c.percentiles[p]
            row[f"p{p:g}"] = {"lead": us(q.diff_ns), "lower": us(q.lower_ns),
                              "upper": us(q.upper_ns)}
        out.append(row)
    return out


def under_load_rows(out_dir, analyses=None, **options):
    """The two captures under load (:func:`~latscope.capture.sim.demo_load.run_under_load`, same
    options), each analysed per class (:func:`analyse_under_load`; ``analyses`` as
    :func:`comparison_rows`); the fast track's row also holds ``lead``, its lead over the stack
    per stage (:func:`fast_track_lead`)."""
    return with_lead(demo_load.run_under_load(out_dir, **options), analyses)


def with_lead(rows, analyses=None):
    """Rows of :func:`~latscope.capture.sim.demo_load.capture_under_load` analysed as
    :func:`under_load_rows` has them (each per class, the fast track's with its ``lead``)."""
    analyses = Analyses() if analyses is None else analyses
    analysed = [_analyse(r, analyses) for r in rows]
    rows = [row for row, _ in analysed]
    samples = {row["profile"]: s for row, s in analysed}
    stack_name, fast_name = demo_load.PROFILES
    if stack_name in samples and fast_name in samples:
        fast_row = next(r for r in rows if r["profile"] == fast_name)
        fast_row["lead"] = fast_track_lead(samples[stack_name], samples[fast_name])
    return rows


def _us(value):
    if value is None:
        return "-"
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _interval(entry):
    return (f"{_us(entry['lead'])} [{_us(entry['lower'])}, {_us(entry['upper'])}]")


def format_load_table(rows, idle=None, verdicts=None):
    """The per-class tables: one line per capture (requests, drops, background counted), every
    stage of every class with its ambiguous requests (and the idle capture's delivery stage of
    the same profile, from the main demo, when ``idle`` maps profile -> {stage: stats}; a p99 its
    sample does not bound marked †), the fast track's lead over the stack per stage with its
    intervals, then the ``verdicts`` (:func:`load_verdicts`)."""
    lines = [f"{'configuration':<16} {'load':>5} {'burst':>5} {'class':>5} {'req':>6} "
             f"{'replied':>7} {'drop':>5} {'unknown':>7} {'bg counted':>11}"]
    for r in rows:
        for label, c in r.get("classes", {}).items():
            lines.append(f"{r['profile']:<16} {r['load']:>5.0%} {r.get('burst', 1):>5} "
                         f"{label:>5} {c['requests']:>6} {c['replied']:>7} {c['dropped']:>5} "
                         f"{c['unknown']:>7} {r['counted_bg']:>11,}")
    lines.append("")
    lines.append(f"{'configuration':<16} {'class':>5} {'stage':<9} {'n':>6} {'p50 µs':>8} "
                 f"{'p99 µs':>8} {'max µs':>8} {'ambiguous':>9}")
    for r in rows:
        if idle and r["profile"] in idle:
            s = idle[r["profile"]]
            stage = r["deliver_stage"].split("[")[0]
            lines.append(f"{r['profile'] + ' idle':<16} {'-':>5} {stage:<9} {'':>6} "
                         f"{_us(s['p50']):>8} {_us(s['p99']):>8} {'':>8} {'':>9}")
        for label, c in r.get("classes", {}).items():
            for stage, s in c["stages"].items():
                p99 = _us(s["p99"]) + ("" if s.get("p99_bounded", True) or s["p99"] is None
                                       else "†")
                lines.append(f"{r['profile']:<16} {label:>5} {stage:<9} {s['n']:>6,} "
                             f"{_us(s['p50']):>8} {p99:>8} {_us(s['max']):>8} "
                             f"{s['ambiguous']:>9}")
    stack, fast = (next((r for r in rows if r["profile"] == p), None) for p in demo_load.PROFILES)
    lead = (fast or {}).get("lead")
    if lead:
        confidence = lead[0]["confidence"]
        lines.append("")
        lines.append(f"fast track's lead over the stack, class hp (stack minus fast track, µs; "
                     f"[{confidence:.0%} interval], '-' where too few requests bound it)")
        lines.append(f"{'stage':<19} {'mean':>22} {'p50':>22} {'p99':>22}")
        for e in lead:
            name = e["stage"] if e["stage"] == e["fast_stage"] else \
                f"{e['stage']}/{e['fast_stage']}"
            lines.append(f"{name:<19} {_interval(e['mean']):>22} {_interval(e['p50']):>22} "
                         f"{_interval(e['p99']):>22}")
    if stack and fast and stack["deliver"] and fast["deliver"]:
        bursts = f" in bursts of {fast['burst']}" if fast.get("burst", 1) > 1 else ""
        lines.append(f"fast track under {fast['load']:.0%} load{bursts}: delivery p50 "
                     f"{stack['deliver']['p50'] - fast['deliver']['p50']:.2f} µs and p99 "
                     f"{stack['deliver']['p99'] - fast['deliver']['p99']:.2f} µs earlier than "
                     f"the stack")
    if any(s["p99"] is not None and not s.get("p99_bounded", True)
           for r in rows for c in r.get("classes", {}).values() for s in c["stages"].values()):
        lines.append(f"† p99 not bounded by the sample (needs ≥ {n_required(0.99):,} requests): "
                     f"a value of these requests, not a conclusion")
    lines += list(verdicts or ())
    return "\n".join(lines)


def load_verdicts(rows, analyses=None):
    """The fast track against the stack under load, on the delivery of the measured requests
    (class ``hp``) at p50 and p99: one sentence each with its 95 % interval, or saying the
    sample cannot tell (:func:`latscope.analysis.report.summary.verdicts`). ``analyses``: as
    :func:`comparison_rows`."""
    cache = Analyses() if analyses is None else analyses
    analyses = [cache[r["path"]] for r in rows]
    if len(analyses) < 2:
        return []
    grouped = compare_grouped(analyses)
    return [v.sentence for v in summary.verdicts(grouped, simulated=True)
            if v.kind == "fast" and v.measurement.split(" ")[0] in
            {r["deliver_stage"] for r in rows}]


def idle_figures(results, analyses=None):
    """``{profile: {"p50", "p99"} µs}`` of the delivery stage from the main demo's captures
    (``analyses`` as :func:`comparison_rows`)."""
    analyses = Analyses() if analyses is None else analyses
    out = {}
    for r in results:
        if r["profile"] not in demo_load.PROFILES:
            continue
        stage = "rx.fast" if r["profile"].startswith("fast-track") else "rx.udp"
        s = analyses[r["path"]].stats.get(stage)
        if s is not None and s.n:
            out[r["profile"]] = {"p50": s.p50_ns / 1e3, "p99": s.p99_ns / 1e3,
                                 "max": float(np.nan),
                                 "p99_bounded": s.quantiles[99.0].upper_ns is not None}
    return out


# --- the command ----------------------------------------------------------------------------------

def add_arguments(parser):
    parser.description = ("Simulate the paper's DUT configurations (GEM, Ethernet Lite DM/SO, "
                          "fast track; 64/256/1024-byte frames), drive the real gateware in "
                          "simulation, capture its bytes through a pseudo-terminal exactly as "
                          "from a board, then print a comparison table (latencies in µs; the "
                          "instrument resolution is one tick, 1.25 ns) beside the paper's Table I "
                          "and write the report (the headline measurements' figures; `latscope "
                          "report` of its captures draws every measurement's).")
    parser.add_argument("--packets", type=int, default=None,
                        help=f"packets over all configurations (default {DEFAULT_PACKETS:,}; "
                             f"--quick: {QUICK_PACKETS:,})")
    parser.add_argument("--out", default="demo-output",
                        help="directory for the captures, truth files, report and summary.json "
                             "(what --json prints) (default ./demo-output)")
    parser.add_argument("--quick", action="store_true", help="a small run, for a smoke test")
    parser.add_argument("--profiles", default=None,
                        help="comma-separated profiles (default: all shipped: "
                             f"{', '.join(simbench.list_profiles())})")
    parser.add_argument("--engine", choices=("auto",) + simbench.ENGINES, default="auto",
                        help="simulator. auto (default): every packet through the real gateware "
                             "compiled by Verilator (about 2,000 packets/s per capture, two "
                             "captures at a time, after the one-time compilation, which the "
                             "first run announces), or, when "
                             "Verilator or a C++ compiler is missing, the gateware's bit-exact "
                             "reference models (it says so); verilator: the real gateware, and "
                             "fail if it cannot be built; model: the reference models only; "
                             "amaranth: the real gateware in the Amaranth simulator (very slow: "
                             "a few packets). Every capture must reproduce the simulation's "
                             "ground truth exactly, or the command fails")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="captures in parallel (default: 2, or 1 on a single core)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--no-report", action="store_true",
                        help="print the table only, do not write the report")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--no-load", action="store_true",
                        help="skip the two captures under 60 %% background load with requests "
                             "in queued bursts (fast track against the stack, every stage per "
                             "class, the fast track's lead per stage with intervals; "
                             "capture/sim/demo_load.py), which run when --profiles is not given")


def run(args):
    started = time.monotonic()
    check_output_folder(args.out, force=True)      # the demo's folder is rewritten each run
    profiles = simbench.list_profiles() if not args.profiles else \
        [p.strip() for p in args.profiles.split(",") if p.strip()]
    for name in profiles:
        simbench.load_profile(name)     # fail early on a bad name
    if args.jobs < 1:
        raise LatscopeError(f"--jobs must be at least 1, not {args.jobs}")
    packets = args.packets or (QUICK_PACKETS if args.quick else DEFAULT_PACKETS)
    if packets < len(profiles):
        raise LatscopeError(f"--packets must be at least {len(profiles)} (one per profile)")
    _log(f"latscope demo: {len(profiles)} configurations, {packets:,} packets in all, "
         f"{args.jobs} at a time, into {args.out}/")
    under_load = None
    if not args.no_load and args.profiles is None:
        # the fast track against the stack under load, per class (with the default profiles),
        # in the same workers after the configurations' captures
        under_load = {"out_dir": os.path.join(args.out, "under-load"), "seed": args.seed,
                      "packets": 200 if args.quick else demo_load.PACKETS}
        _log(f"latscope demo: then {len(demo_load.PROFILES)} captures under "
             f"{demo_load.SCENARIO} background load on the simulated wire (reference models)")
    analyses = Analyses()           # each capture analysed once, as it finishes
    outcome = run_demo(profiles, packets, args.out, engine=args.engine, jobs=args.jobs,
                       seed=args.seed, on_result=lambda r: analyses[r["path"]],
                       under_load=under_load)
    results, load_rows = outcome if under_load is not None else (outcome, [])
    capture_s = sum(r["seconds"] for r in results) / max(1, min(args.jobs, len(results)))
    rows = comparison_rows(results, analyses)
    load_rows = with_lead(load_rows, analyses)
    report = None
    if not args.no_report:
        # the under-load pair is in the report too: its verdicts lead the first screen; the
        # figures of the headline measurements only (`latscope report` draws every one)
        _log(f"latscope demo: writing the report of {len(results) + len(load_rows)} captures")
        written = api.write_analyses_report([analyses[r["path"]] for r in results + load_rows],
                                            args.out, figure_set="headline")
        report = [str(p) for p in (written if isinstance(written, (list, tuple))
                                   else [written])]
    total = time.monotonic() - started
    bad = [r["profile"] for r in results if not r["check"]["ok"]]
    bad += [f"{r['profile']} under {r['scenario']}" for r in load_rows if not r["check"]["ok"]]
    verdicts = load_verdicts(load_rows, analyses) if load_rows else []
    outcome = {"captures": results, "engine": results[0]["engine"], "table": rows,
               "report": report, "under_load": load_rows, "under_load_verdicts": verdicts,
               "capture_seconds": round(capture_s, 1), "seconds": round(total, 1)}
    with open_output(os.path.join(args.out, "summary.json"), force=True) as f:
        json.dump(outcome, f, indent=2, default=str)
        f.write("\n")
    if args.json:
        print(json.dumps(outcome, indent=2, default=str))
    else:
        resolution = rows[0]["resolution_ns"] if rows else float("nan")
        print(f"\nSIMULATED: latency per configuration and stage on the simulated bench, µs "
              f"(instrument resolution {resolution:.3f} ns; 'paper' is Table I's x̄ ± 3σ of "
              f"512 samples; each profile is built from that mean and 3σ, so 'mean' agrees with "
              f"'paper' by construction: the agreement checks the bench, not the hardware)")
        print(format_table(rows))
        n_packets = sum(r["packets"] for r in results)
        n_events = sum(r["events"] for r in results)
        engine_text = {"model": "the gateware's reference models",
                       "verilator": "the real gateware (Verilator)",
                       "amaranth": "the real gateware (Amaranth simulator)"}
        print(f"\n{n_packets:,} packets, {n_events:,} events captured in about "
              f"{capture_s:.1f} s on "
              f"{engine_text.get(results[0]['engine'], results[0]['engine'])}; "
              f"total {total:.1f} s")
        if load_rows:
            first = load_rows[0]
            bursts = (f" in queued bursts of {first['burst']} (the app thread busy "
                      f"{first['app_busy_us']:g} µs after each send)"
                      if first.get("burst", 1) > 1 else "")
            print(f"\nSIMULATED: the fast track against the stack under "
                  f"{first['load']:.0%} background load (IMIX, counted on the FPGA as "
                  f"class bg), measured stream{bursts} recorded as class hp; frames paired by "
                  f"sequence number, markers in order: a request whose marker the edges cannot "
                  f"decide is counted ambiguous and left out of its stage")
            print(format_load_table(load_rows, idle_figures(results, analyses), verdicts))
        exact = sum(r["check"]["ok"] for r in results)
        print(f"{exact}/{len(results)} captures reproduce the simulation's ground truth exactly "
              f"(every event, within one tick)")
        if report:
            main_files = [p for p in report if p.endswith((".html", ".md"))] or report[:1]
            print(f"report: {', '.join(main_files)} ({len(report)} files in {args.out})")
    if bad:
        raise LatscopeError(f"captures differ from the simulation's ground truth: "
                            f"{', '.join(bad)}")
    return 0
