"""``latscope analyze``, ``latscope compare`` and ``latscope report``."""

import json
import os
import sys

from latscope import LatscopeError
from latscope.analysis import api
from latscope.analysis.ambiguity import ambiguity_lines
from latscope.analysis.definitions import load_definitions
from latscope.analysis.stats import bound_hints
from latscope.userio import check_input, check_output

__all__ = ["register", "cmd_analyze", "cmd_compare", "cmd_report"]

_UNITS = ("Units: tables print microseconds (3 decimals); --json gives nanoseconds in keys ending "
          "in _ns. Percentiles are order statistics (the ceil(q n)-th smallest value) with 95 % "
          "distribution-free confidence intervals from the binomial; a bound is '-' (null in "
          "JSON) when the sample is too small to have one. The resolution (one instrument tick) is "
          "printed with every table.")

_DEFS_HELP = ("measurement definitions (TOML, see docs/analysis.md); default: those stored in the "
              "capture, else the standard ones (rx.isr = rx_dv falling -> m_isr rising, rx.copy, "
              "rx.udp, rx.fast, tx.wire = m_send rising -> tx_en rising, tx.xmit)")
_MARKERS_HELP = ("marker meanings CHANNEL=MEANING,... e.g. m0=rx.isr,m3=tx.xmit, or 'default' for "
                 "the Zephyr app's table (m0=rx.isr,m1=rx.copy,m2=rx.udp,m3=rx.fast,m4=tx.send); "
                 "default: those the file carries (captures, and latscope's own .sr/.vcd/.csv "
                 "exports). Without either, a capture with marker channels m0..m4 is refused, "
                 "never analysed with a guessed map; the map used is printed with its source")
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
    p.add_argument("file", metavar="FILE", help="a capture (.lsc), a sigrok session (.sr), or a "
                   "latscope export (.vcd, .csv)")
    p.add_argument("--definitions", metavar="FILE.toml", help=_DEFS_HELP)
    p.add_argument("--markers", metavar="MAP", help=_MARKERS_HELP)
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
        description="Compare captures. --by group (default): as the captures are organised: "
                    "configurations (MACs) at equal frame size, frame sizes within a "
                    "configuration (against the smallest), the fast track against the stack "
                    "(rx.fast against rx.udp), repeated captures of one configuration; --by "
                    "first: each capture against the first. Each table gives the difference of "
                    "means (Welch 95 % interval), of p50/p99/p99.9 (distribution-free "
                    "intervals), the Mann-Whitney rank test with effect sizes. --by size: fit "
                    "latency = fixed + per-byte cost per configuration over frame sizes (from the "
                    "captures' metadata) and give the effective bandwidth in MB/s. Captures "
                    "with the same label are told apart by their paths.",
        epilog=_UNITS)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--by", choices=("group", "first", "size", "config"), default="group",
                   help="how to pair the captures (default: group; config is the former name "
                        "of first)")
    p.add_argument("--definitions", metavar="FILE.toml", help=_DEFS_HELP)
    p.add_argument("--markers", metavar="MAP", help=_MARKERS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (figures in ns)")
    p.set_defaults(func=cmd_compare)

    p = subparsers.add_parser(
        "report", help="write an HTML and Markdown report of captures",
        description="Write DIR/report.html (self-contained, plots embedded) and DIR/report.md "
                    "(with PNG files): Table-I-style mean ± 3σ (and the paper's Table I beside it "
                    "for the simulated bench's paper profiles), percentile tables with "
                    "confidence intervals, log-scale histograms, percentile spectra (latency "
                    "against 1/(1-p)), time series, per-configuration percentiles, stage "
                    "waterfall, comparisons grouped as the captures are organised, and the "
                    "packet-size regression when the captures span several frame sizes. "
                    "Captures from the simulated bench are marked SIMULATED on the page and on "
                    "every figure.",
        epilog=_UNITS)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write into")
    p.add_argument("--definitions", metavar="FILE.toml", help=_DEFS_HELP)
    p.add_argument("--markers", metavar="MAP", help=_MARKERS_HELP)
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
    check_input(args.file, "capture file")
    if args.hlog:        # --hlog replaces an existing file (there is no --force here)
        check_output(args.hlog, force=True)
    a = api.analyze_file(args.file, definitions=_defs(args), measures=args.measure,
                         mapping=args.mapping, progress=_progress(), markers=args.markers,
                         ns_histograms=bool(args.hlog))
    _warn_integrity(args, [a])
    _warn_placement(args, [a])
    if args.hlog:
        write_hlog_for(a, args.hlog)
    if args.json:
        print(json.dumps(a.to_dict(), indent=2, allow_nan=False))
        return 0
    r = a.result
    print(f"{a.path}: {a.label}, {r.events:,} events over {r.duration_s:.3f} s, "
          f"{len(r.losses)} loss span(s)")
    print(f"resolution {r.resolution_ns:.3f} ns per tick (each latency exact to ±1 tick); "
          f"each table's unit is in its headers")
    print(_marker_line(a))
    print()
    from latscope.analysis import report  # here: analyze --json needs no table code
    if r.stats:
        print(report.stats_table(r.stats))
        for name, s in r.stats.items():
            for hint in bound_hints(s):
                print(f"{name} {hint}")
    if r.stages:
        print()
        print("stages (differences on the same packet):")
        print(report.stats_table(r.stages))
    for name, why in r.unavailable.items():
        print(f"{name}: not computed: {why}")
    for line in ambiguity_lines(r, lambda cls: api.class_label(cls, r.metadata)):
        print(line)
    if r.frames is not None:
        print()
        print(frames_table(r.frames, r.metadata, r.frame_counters))
        classes = report.class_comparison_table(a)
        if classes is not None:
            print()
            print(classes.markdown())
    if not r.stats:
        raise LatscopeError(f"{args.file}: no measurement could be computed")
    return 0


def frames_table(fa, metadata, counters=None):
    """Per-class counts of the frame analysis (requests paired with replies by sequence
    number; stages are in the tables above as ``<stage>[<class>]``), then the classes the FPGA
    only counted (their totals from ``counters``, the COUNTERS records)."""
    lines = ["frames by class (received requests paired with replies by sequence number):",
             f"{'class':>8} {'requests':>9} {'replied':>8} {'dropped':>8} {'unknown':>8} "
             f"{'dup':>5} {'reorder':>8} {'FCS err':>8}  counted on the FPGA (rx frames/bytes)"]
    for cls, c in fa.classes.items():
        rx = c.counted.get("rx")
        counted = f"{rx['frames']}/{rx['octets']}" if rx else "-"
        lines.append(f"{api.class_label(cls, metadata):>8} {c.requests:>9} {c.replied:>8} "
                     f"{c.dropped:>8} {c.unknown:>8} {c.duplicates:>5} {c.reordered:>8} "
                     f"{c.fcs_errors:>8}  {counted}")
    for cls, totals in sorted(api.counted_only_classes(fa, counters).items()):
        lines.append(f"{api.class_label(cls, metadata):>8} {'-':>9} {'-':>8} {'-':>8} {'-':>8} "
                     f"{'-':>5} {'-':>8} {totals['fcs_errors']:>8}  "
                     f"{totals['frames']}/{totals['octets']} (counted only)")
    if fa.unplaced:
        why = ", ".join(f"{k}: {n}" for k, n in getattr(fa, "unplaced_reasons", {}).items())
        lines.append(f"{fa.unplaced} frame record(s) could not be tied to their DV edges and were "
                     f"left out" + (f" ({why})" if why else ""))
    lines.append("requests and replies: " + ("latscope traffic only (UDP payload with the "
                                               "traffic magic)" if fa.magic else
                                               "every UDP frame holding a sequence number")
                 + (", replies of the request's class" if fa.reply_class == "same" else
                    ", replies of any class"))
    lines += [f"note: {n}" for n in fa.notes]
    return "\n".join(lines)


def write_hlog_for(analysis, path):
    """Write every measurement's histogram of an :class:`api.Analysis` (made with
    ``ns_histograms=True``) to an ``.hlog`` file."""
    from latscope.analysis.hdr import write_hlog
    r = analysis.result
    if any(s.n and s.ns_histogram is None for s in r.stats.values()):
        raise LatscopeError("the analysis kept no histograms in ns; analyse with "
                            "ns_histograms=True to write an .hlog")
    hists = [(name, 0.0, max(r.duration_s, 1e-3), s.ns_histogram.to_hdrh())
             for name, s in r.stats.items() if s.n]
    write_hlog(path, hists, comment=f"latscope {analysis.label}: values in ns, one interval per "
                                    f"measurement (tag), resolution {r.resolution_ns:.3f} ns")


def _marker_line(analysis):
    from latscope.analysis.definitions import MarkerMap
    used = analysis.metadata.get("marker_map")
    return MarkerMap(**used).describe() if used else "markers: -"


def _warn_integrity(args, analyses):
    """One warning line per damaged or unfinished input (see :func:`api.integrity_note`)."""
    for a in analyses:
        note = api.integrity_note(a)
        if note:
            print(f"latscope {args.command}: warning: {a.path}: {note}", file=sys.stderr)


def _warn_placement(args, analyses):
    """One warning line per input whose frame records could not all be tied to their DV edges
    (``capture.frames.place_frames``): how many, and why."""
    for a in analyses:
        rx_valid = (a.result.metadata or {}).get("rx_valid")
        if rx_valid:          # RMII: the definitions' rx_dv is read from crs_dv
            print(f"latscope {args.command}: {a.path}: rx_dv measurements read {rx_valid}",
                  file=sys.stderr)
        fa = getattr(a.result, "frames", None)
        note = getattr(fa, "placement_note", "") if fa is not None else ""
        if note:
            print(f"latscope {args.command}: warning: {a.path}: {note}", file=sys.stderr)


def _load_all(args, packets=True):
    missing = [f for f in args.files if not os.path.exists(f)]
    if missing:
        raise LatscopeError(f"no such file: {', '.join(missing)}")
    for f in args.files:
        check_input(f, "capture file")
    analyses = [api.analyze_file(f, definitions=_defs(args), packets=packets,
                                 markers=args.markers) for f in args.files]
    for a in analyses:          # which marker map each input used, and why
        print(f"latscope {args.command}: {a.path}: {_marker_line(a)}", file=sys.stderr)
    return analyses


def cmd_compare(args):
    from latscope.analysis import report
    analyses = _load_all(args)
    _warn_integrity(args, analyses)
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
    grouped = report.compare_grouped(analyses, by="first" if args.by in ("first", "config")
                                     else "group")
    if args.json:
        groups = [{"title": group.title, "kind": group.kind, "baseline": rows[0].base,
                   "comparisons": [{"configuration": r.other, "baseline": r.base,
                                    "measurement": r.measurement, "baseline_measurement":
                                    r.base_name, "other_measurement": r.other_name,
                                    **r.comparison.to_dict()} for r in rows]}
                  for group, rows in grouped]
        print(json.dumps({"baseline": groups[0]["baseline"] if groups else None,
                          "groups": groups,
                          "inputs": [{"path": a.path, "label": a.label,
                                      "integrity": a.integrity} for a in analyses],
                          "comparisons": [dict(c, group=g["title"]) for g in groups
                                          for c in g["comparisons"]]}, indent=2))
        return 0
    print(report.table_one(analyses))
    frames = report.frames_table(analyses)
    if frames:
        print()
        print(frames)
    for table in report.grouped_comparison_tables(grouped):
        print()
        print(table.markdown())
    if not grouped:
        print("\nno two captures share a measurement to compare")
    return 0


def cmd_report(args):
    from latscope.analysis import report
    check_output(args.output, directory=True)        # before the analyses, not after
    analyses = _load_all(args)
    _warn_integrity(args, analyses)
    written = report.write_report(analyses, args.output)
    print(f"wrote {written[0]} and {written[1]} ({len(written) - 2} figures)", file=sys.stderr)
    return 0
