"""``latscope analyze``, ``latscope compare`` and ``latscope report``."""

import json
import os
import sys

from latscope import LatscopeError
from latscope.analysis import api, report
from latscope.analysis.definitions import load_definitions

__all__ = ["register", "cmd_analyze", "cmd_compare", "cmd_report"]

_UNITS = ("Units: tables print microseconds (3 decimals); --json gives nanoseconds in keys ending "
          "in _ns. Percentiles are order statistics (the ceil(q n)-th smallest value) with 95 % "
          "distribution-free confidence intervals from the binomial; a bound is '-' (null in "
          "JSON) when the sample is too small to have one. The resolution (one instrument tick) is "
          "printed with every table.")

_DEFS_HELP = ("measurement definitions (TOML, see docs/analysis.md); default: those stored in the "
              "capture, else the standard ones (rx.isr = rx_dv falling -> m_isr rising, rx.copy, "
              "rx.udp, rx.fast, tx.wire = m_send rising -> tx_en rising, tx.xmit)")
_MAP_HELP = ("for .sr files: channel map ROLE=PROBE,... e.g. rx_dv=D0,m_isr=D1 "
             "(default: the probe names)")


def register(subparsers):
    p = subparsers.add_parser(
        "analyze", help="per-packet latencies and statistics of a capture",
        description="Pair start and stop edges per packet (never across a loss) and print every "
                    "measurement's statistics: n, mean, 3σ, min, percentiles with confidence "
                    "intervals, max, packet delay variation, and missed/spurious/lost counts. "
                    "FILE is a latscope capture (.lsc) or a sigrok session (.sr).",
        epilog=_UNITS)
    p.add_argument("file", metavar="FILE")
    p.add_argument("--definitions", metavar="FILE.toml", help=_DEFS_HELP)
    p.add_argument("--measure", nargs="+", metavar="NAME",
                   help="only these measurements (default: every one the capture supports)")
    p.add_argument("--map", dest="mapping", metavar="MAP", help=_MAP_HELP)
    p.add_argument("--hlog", metavar="FILE.hlog",
                   help="also write each measurement's histogram in HdrHistogram's .hlog format "
                        "(values in ns, 3 significant digits)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (every figure in ns) instead of tables")
    p.set_defaults(func=cmd_analyze)

    p = subparsers.add_parser(
        "compare", help="compare captures or configurations",
        description="Compare captures. --by config (default): each capture against the first: "
                    "difference of means (Welch 95 % interval), of p50/p99/p99.9 (distribution-"
                    "free intervals), Mann-Whitney rank test with effect sizes. --by size: fit "
                    "latency = fixed + per-byte cost per configuration over frame sizes (from the "
                    "captures' metadata) and give the effective bandwidth in MB/s.",
        epilog=_UNITS)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--by", choices=("config", "size"), default="config",
                   help="what varies between the captures (default: config)")
    p.add_argument("--definitions", metavar="FILE.toml", help=_DEFS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (figures in ns)")
    p.set_defaults(func=cmd_compare)

    p = subparsers.add_parser(
        "report", help="write an HTML and Markdown report of captures",
        description="Write DIR/report.html (self-contained, plots embedded) and DIR/report.md "
                    "(with PNG files): Table-I-style mean ± 3σ, percentile tables with confidence "
                    "intervals, log-scale histograms, CDF/CCDF, time series, per-configuration "
                    "distributions, stage waterfall, differences, and the packet-size regression "
                    "when the captures span several frame sizes.",
        epilog=_UNITS)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write into")
    p.add_argument("--definitions", metavar="FILE.toml", help=_DEFS_HELP)
    p.set_defaults(func=cmd_report)


def _defs(args):
    return load_definitions(args.definitions) if args.definitions else None


def _progress():
    """A progress line on stderr for long analyses (only on a terminal)."""
    if not sys.stderr.isatty():
        return None
    state = {"shown": False}

    def show(done, total):
        if total >= 5_000_000:
            state["shown"] = True
            print(f"\ranalysing: {done / max(total, 1):6.1%} of {total:,} events", end="",
                  file=sys.stderr, flush=True)
            if done >= total:
                print(file=sys.stderr)
    return show


def cmd_analyze(args):
    a = api.analyze_file(args.file, definitions=_defs(args), measures=args.measure,
                         mapping=args.mapping, progress=_progress())
    for problem in a.result.metadata.get("problems", []):
        print(f"latscope analyze: warning: {args.file} is damaged: {problem}; the analysis "
              f"covers the readable part", file=sys.stderr)
    if args.hlog:
        write_hlog_for(a, args.hlog)
    if args.json:
        print(json.dumps(a.to_dict(), indent=2, allow_nan=False))
        return 0
    r = a.result
    print(f"{a.path}: {a.label}, {r.events:,} events over {r.duration_s:.3f} s, "
          f"{len(r.losses)} loss span(s)")
    print(f"times in µs; resolution {r.resolution_ns:.3f} ns per tick (each latency exact to "
          f"±1 tick)")
    print()
    if r.stats:
        print(report.stats_table(r.stats))
    if r.stages:
        print()
        print("stages (differences on the same packet):")
        print(report.stats_table(r.stages))
    for name, why in r.unavailable.items():
        print(f"{name}: not computed: {why}")
    if r.frames is not None:
        print()
        print(frames_table(r.frames, r.metadata))
    if not r.stats:
        raise LatscopeError(f"{args.file}: no measurement could be computed")
    return 0


def frames_table(fa, metadata):
    """Per-class counts of the frame analysis (requests paired with replies by sequence
    number; stages are in the tables above as ``<stage>[<class>]``)."""
    lines = ["frames by class (received requests paired with replies by sequence number):",
             f"{'class':>8} {'requests':>9} {'replied':>8} {'dropped':>8} {'unknown':>8} "
             f"{'dup':>5} {'reorder':>8} {'FCS err':>8}  counted on the FPGA (rx frames/bytes)"]
    for cls, c in fa.classes.items():
        rx = c.counted.get("rx")
        counted = f"{rx['frames']}/{rx['octets']}" if rx else "-"
        lines.append(f"{api.class_label(cls, metadata):>8} {c.requests:>9} {c.replied:>8} "
                     f"{c.dropped:>8} {c.unknown:>8} {c.duplicates:>5} {c.reordered:>8} "
                     f"{c.fcs_errors:>8}  {counted}")
    if fa.unplaced:
        lines.append(f"{fa.unplaced} frame record(s) had no edges in the capture and were left "
                     f"out")
    return "\n".join(lines)


def write_hlog_for(analysis, path):
    """Write every measurement's histogram of an :class:`api.Analysis` to an ``.hlog`` file."""
    from latscope.analysis.hdr import write_hlog
    r = analysis.result
    hists = [(name, 0.0, max(r.duration_s, 1e-3), s.histogram.to_hdrh(scale=s.tick_ns))
             for name, s in r.stats.items() if s.n]
    write_hlog(path, hists, comment=f"latscope {analysis.label}: values in ns, one interval per "
                                    f"measurement (tag), resolution {r.resolution_ns:.3f} ns")


def _load_all(args, packets=True):
    missing = [f for f in args.files if not os.path.exists(f)]
    if missing:
        raise LatscopeError(f"no such file: {', '.join(missing)}")
    return [api.analyze_file(f, definitions=_defs(args), packets=packets) for f in args.files]


def cmd_compare(args):
    analyses = _load_all(args)
    if args.by == "size":
        fits = report.size_fits(analyses)
        if args.json:
            import dataclasses
            print(json.dumps([{"configuration": fam, "measurement": name,
                               **dataclasses.asdict(f)} for fam, name, f in fits], indent=2))
        else:
            print("latency = fixed cost + per-byte cost × frame size (least squares over every "
                  "packet; 95 % intervals)")
            print()
            print(report.size_table(fits))
        return 0
    comps = report.compare_analyses(analyses)
    if args.json:
        print(json.dumps({"baseline": analyses[0].label,
                          "comparisons": [{"configuration": label, "measurement": name,
                                           **c.to_dict()} for label, name, c in comps]},
                         indent=2))
        return 0
    print(report.table_one(analyses))
    print()
    print(f"differences against {analyses[0].label} (µs; 95 % intervals):")
    print(report.comparison_table(comps, analyses[0].label))
    return 0


def cmd_report(args):
    analyses = _load_all(args)
    written = report.write_report(analyses, args.output)
    print(f"wrote {written[0]} and {written[1]} ({len(written) - 2} figures)", file=sys.stderr)
    return 0
