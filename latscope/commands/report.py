"""``latscope report``: an HTML and Markdown report of captures."""

import os
import sys

from latscope import LatscopeError
from latscope.analysis import api, report, store
from latscope.capture.files.outputs import check_output_folder, output_folder
from latscope.commands.analyses import (
    DEFINITIONS_HELP,
    MARKERS_HELP,
    UNITS,
    add_window_arguments,
    definitions,
    load_all,
    warn_integrity,
)


def add_arguments(p):
    p.description = ("Write DIR/report.html (self-contained, plots embedded) and DIR/report.md "
                     "(with PNG files). It answers first (what was measured, p50 and p99 with "
                     "intervals, the ranking, each comparison's verdict in a sentence, the fast "
                     "track against the stack under load where such captures are given), then "
                     "a table of contents, a glossary, the slowest packets with the frames and "
                     "edges before each, and the detail: Table-I-style mean ± 3σ (and the "
                     "paper's Table I beside it "
                     "for the simulated bench's paper profiles), percentile tables with "
                     "confidence intervals, log-scale histograms, percentile spectra (latency "
                     "against 1/(1-p)), time series, per-configuration percentiles, stage "
                     "waterfall, comparisons grouped as the captures are organised, and the "
                     "packet-size regression when the captures span several frame sizes. "
                     "Captures from the simulated bench are marked SIMULATED on the page and on "
                     "every figure.")
    p.epilog = UNITS
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write into")
    p.add_argument("--definitions", metavar="FILE.toml", help=DEFINITIONS_HELP)
    p.add_argument("--markers", metavar="MAP", help=MARKERS_HELP)
    add_window_arguments(p)
    p.add_argument("--explain", type=int, default=3, metavar="N",
                   help="show the N slowest packets of each capture's headline measurements "
                        "(and every one beyond p99.9) with the window before each "
                        "(default 3; 0 leaves the section out)")
    p.add_argument("--force", action="store_true",
                   help="write into a folder that already holds files (the report's files are "
                        "replaced)")
    p.add_argument("--store", metavar="DIR",
                   help="also append every capture's packets and run metadata to the results "
                        "store DIR, one run per capture (as analyze --store does)")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                   help="a label for the stored runs, e.g. commit=abc123 (repeatable; with "
                        "--store)")


def run(args):
    if args.explain < 0:
        raise LatscopeError(f"--explain must be a number of packets >= 0, not {args.explain!r}")
    labels = store.parse_labels(args.label)   # a bad label fails before any work
    if args.label and not args.store:
        raise LatscopeError("--label labels stored runs: give --store DIR too")
    # before the analyses, not after
    check_output_folder(args.output, args.files, force=args.force)
    analyses = load_all(args.command, args.files, definitions_file=args.definitions,
                        markers=args.markers, start_s=args.start, stop_s=args.stop)
    warn_integrity(args.command, analyses)
    if args.store:
        for a in analyses:
            stored = store.store_analysis(args.store, a, labels=labels,
                                          definitions=definitions(args.definitions))
            print(f"latscope report: {a.path}: stored as run {stored.run_id} in {args.store}",
                  file=sys.stderr)
    forensics = api.explain_headlines(analyses, top=args.explain)
    window = [f"--{flag} {float(value):.9g}" for flag, value
              in (("from", args.start), ("to", args.stop)) if value is not None]
    command = " ".join(["latscope", "report", *args.files, *window, "-o", args.output])
    with output_folder(args.output, args.files, force=args.force) as folder:
        written = report.write_report(analyses, folder, forensics=forensics, command=command)
    written = [os.path.join(args.output, os.path.basename(path)) for path in written]
    print(f"wrote {written[0]} and {written[1]} ({len(written) - 2} figures)", file=sys.stderr)
    return 0
