"""``latscope analyze``: per-packet latencies and statistics of a capture."""

import json
import sys

from latscope import LatscopeError
from latscope.analysis import api, store
from latscope.analysis.ambiguity import ambiguity_lines
from latscope.analysis.forensics import format_forensics
from latscope.analysis.hdr import write_hlog_for
from latscope.analysis.outputs import hgrm_paths, hgrm_text, write_per_packet
from latscope.analysis.stats import bound_hints
from latscope.capture.files import outputs
from latscope.commands.analyses import (
    DEFINITIONS_HELP,
    MARKERS_HELP,
    UNITS,
    add_window_arguments,
    definitions,
    marker_line,
    warn_integrity,
    window_line,
)
from latscope.userio import check_input

_MAP_HELP = ("for .sr files: channel map ROLE=PROBE,... e.g. rx_dv=D0,m_isr=D1 "
             "(default: the probe names)")


def add_arguments(p):
    p.description = ("Pair start and stop edges per packet (never across a loss) and print every "
                     "measurement's statistics: n, mean, 3σ, min, percentiles with confidence "
                     "intervals, max, packet delay variation, and missed/spurious/lost counts. "
                     "FILE is a latscope capture (.lsc) or a sigrok session (.sr).")
    p.epilog = UNITS
    p.add_argument("file", metavar="FILE", help="a capture (.lsc), a sigrok session (.sr), or a "
                   "latscope export (.vcd, .csv)")
    p.add_argument("--definitions", metavar="FILE.toml", help=DEFINITIONS_HELP)
    p.add_argument("--markers", metavar="MAP", help=MARKERS_HELP)
    p.add_argument("--measure", nargs="+", metavar="NAME",
                   help="only these measurements (default: every one the capture supports)")
    p.add_argument("--map", dest="mapping", metavar="MAP", help=_MAP_HELP)
    add_window_arguments(p)
    p.add_argument("--hlog", metavar="FILE.hlog",
                   help="also write each measurement's histogram in HdrHistogram's .hlog format "
                        "(values in ns, 3 significant digits)")
    p.add_argument("--per-packet", metavar="FILE",
                   help="also write every packet's identity, latencies (ns) and pairing status "
                        "to FILE: CSV for .csv, Parquet for .parquet")
    p.add_argument("--hgrm", metavar="FILE.hgrm",
                   help="also write each measurement's percentile distribution as "
                        "HdrHistogram's text (values in µs), read by its plotter; with several "
                        "measurements, one FILE.<name>.hgrm each")
    p.add_argument("--explain", type=int, metavar="N",
                   help="also print, per measurement, the N slowest packets (and every one "
                        "beyond p99.9) with the edges in the window before each: its own frame, "
                        "the other frames on the wire both ways, interrupts and markers, and the "
                        "earlier requests still queued")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --hlog, --per-packet or --hgrm file (never the "
                        "capture itself)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (every figure in ns) instead of tables")
    p.add_argument("--store", metavar="DIR",
                   help="also append every packet's stage latencies and the run's metadata to "
                        "the results store DIR (Parquet, docs/results-store.md; created if new)")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                   help="a label for the stored run, e.g. commit=abc123 (repeatable; with --store)")


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


def run(args):
    check_input(args.file, "capture file")
    labels = store.parse_labels(args.label)   # a bad label fails before any work
    if args.label and not args.store:
        raise LatscopeError("--label labels a stored run: give --store DIR too")
    if args.explain is not None and args.explain < 1:
        raise LatscopeError(f"--explain must be a positive number of packets, not "
                            f"{args.explain!r}")
    for out in (args.hlog, args.per_packet, args.hgrm):
        if out:          # the tables use standard output: these need a file
            outputs.check_output(out, [args.file], force=args.force, allow_stdout=False)
    a = api.analyze_file(args.file, definitions=definitions(args.definitions),
                         measures=args.measure, mapping=args.mapping, progress=_progress(),
                         markers=args.markers, ns_histograms=bool(args.hlog),
                         start_s=args.start, stop_s=args.stop,
                         packets=bool(args.store or args.per_packet or args.hgrm
                                      or args.explain is not None))
    warn_integrity(args.command, [a])
    _warn_placement(args.command, [a])
    # nothing is written for an analysis that ends in "no measurement could be computed"
    computed = bool(a.result.stats) or args.json
    if args.hlog and computed:
        write_hlog_for(a, args.hlog, force=args.force)
    if args.per_packet and computed:
        rows = write_per_packet(a.result, args.per_packet, inputs=[args.file], force=args.force)
        print(f"wrote {rows:,} packets to {args.per_packet}", file=sys.stderr)
    if args.hgrm and computed:
        names = [n for n, s in a.stats.items() if s.n]
        for name, path in hgrm_paths(args.hgrm, names).items():
            with outputs.open_output(path, [args.file], force=args.force) as f:
                f.write(hgrm_text(a.latencies_ns(name)))
            print(f"wrote {path}", file=sys.stderr)
    if args.store and computed:
        stored = store.store_analysis(args.store, a, labels=labels,
                                      definitions=definitions(args.definitions))
        print(f"stored as run {stored.run_id} in {args.store}", file=sys.stderr)
    if args.json:
        print(json.dumps(a.to_dict(), indent=2, allow_nan=False))
        return 0
    r = a.result
    print(f"{a.path}: {a.label}, {r.events:,} events over {r.duration_s:.3f} s, "
          f"{len(r.losses)} loss span(s)")
    print(f"resolution {r.resolution_ns:.3f} ns per tick (each latency exact to ±1 tick); "
          f"each table's unit is in its headers")
    print(marker_line(a))
    if window_line(a):
        print(window_line(a))
    print()
    # tables and plots: analyze --json needs neither
    from latscope.analysis import report
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
    for line in dut_time_lines(r.metadata.get("dut_beside_wire") or ()):
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
    if args.explain:
        for name, s in r.stats.items():
            if s.n:
                print()
                print(format_forensics(api.explain(a, name, top=args.explain)))
    return 0


def dut_time_lines(rows):
    """One line per Zephyr time quantity beside its wire stage (``dut_beside_wire``)."""
    out = []
    for row in rows:
        if row["dut_mean_ns"] is None or row["wire_mean_ns"] is None:
            continue
        out.append(f"Zephyr {row['quantity']} (n={row['dut_n']}, {row['what']}): mean "
                   f"{row['dut_mean_ns'] / 1e3:.3f} µs (whole µs per packet, floored) vs wire "
                   f"{row['stage']} {row['wire_mean_ns'] / 1e3:.3f} µs (n={row['wire_n']}): "
                   f"{row['difference_ns'] / 1e3:+.3f} µs")
    return out


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


def _warn_placement(command, analyses):
    """One warning line per input whose frame records could not all be tied to their DV edges
    (``capture.frames.place_frames``): how many, and why."""
    for a in analyses:
        rx_valid = (a.result.metadata or {}).get("rx_valid")
        if rx_valid:          # RMII: the definitions' rx_dv is read from crs_dv
            print(f"latscope {command}: {a.path}: rx_dv measurements read {rx_valid}",
                  file=sys.stderr)
        fa = getattr(a.result, "frames", None)
        note = getattr(fa, "placement_note", "") if fa is not None else ""
        if note:
            print(f"latscope {command}: warning: {a.path}: {note}", file=sys.stderr)
