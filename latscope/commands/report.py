"""``latscope report``: an HTML and Markdown report of captures."""

import os
import sys

from latscope.analysis import report
from latscope.capture.files.outputs import check_output_folder, output_folder
from latscope.commands.analyses import (
    DEFINITIONS_HELP,
    MARKERS_HELP,
    UNITS,
    load_all,
    warn_integrity,
)


def add_arguments(p):
    p.description = ("Write DIR/report.html (self-contained, plots embedded) and DIR/report.md "
                     "(with PNG files): Table-I-style mean ± 3σ (and the paper's Table I beside it "
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
    p.add_argument("--force", action="store_true",
                   help="write into a folder that already holds files (the report's files are "
                        "replaced)")


def run(args):
    # before the analyses, not after
    check_output_folder(args.output, args.files, force=args.force)
    analyses = load_all(args.command, args.files, definitions_file=args.definitions,
                        markers=args.markers)
    warn_integrity(args.command, analyses)
    with output_folder(args.output, args.files, force=args.force) as folder:
        written = report.write_report(analyses, folder)
    written = [os.path.join(args.output, os.path.basename(path)) for path in written]
    print(f"wrote {written[0]} and {written[1]} ({len(written) - 2} figures)", file=sys.stderr)
    return 0
