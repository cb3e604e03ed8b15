"""``latscope gate``: is a candidate slower than a baseline? (``docs/gate.md``)

Each side is a capture file, or a selection of runs from a results store. The verdict comes
from :func:`latscope.analysis.gate.gate`; this module only turns arguments into that call and
writes its renderings. Exit status: 0 pass, 1 regression, 2 usage error (raised as
LatscopeError, which the CLI prints as one line), 3 undecidable.
"""

import os
import sys

from latscope import LatscopeError
from latscope.analysis import api, gate, store
from latscope.capture.files import outputs

HELP = "decide whether a candidate's latencies regressed against a baseline's (CI gate)"

DESCRIPTION = """\
Compare a candidate with a baseline per measurement and percentile, with the analysis'
distribution-free intervals, against a budget (--budget FILE.toml; default +5 % at p50 and at
p99). A percentile the samples cannot bound is not judged: the output names the packets it
needs. Exit status: 0 pass, 1 regression, 2 usage error, 3 undecidable."""


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.add_argument("baseline_file", nargs="?", metavar="BASELINE",
                        help="baseline capture (.lsc, .sr, .vcd, .csv)")
    parser.add_argument("candidate_file", nargs="?", metavar="CANDIDATE",
                        help="candidate capture")
    parser.add_argument("--store", metavar="DIR",
                        help="read both sides from this results store (see --baseline)")
    parser.add_argument("--baseline", metavar="COND",
                        help="with --store: the baseline runs, an SQL condition on the runs' "
                             "columns and labels, e.g. \"commit='abc'\"")
    parser.add_argument("--candidate", metavar="COND",
                        help="with --store: the candidate runs, e.g. \"commit='def'\"")
    parser.add_argument("--budget", metavar="FILE.toml",
                        help="what counts as slower (docs/gate.md); default: +5 %% at p50 and "
                             "p99 for every measurement both sides have")
    parser.add_argument("--measure", nargs="+", metavar="NAME",
                        help="judge only these measurements (and stages)")
    parser.add_argument("--definitions", metavar="FILE.toml",
                        help="measurement definitions for captures (default: the capture's own, "
                             "else the standard ones)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (ns)")
    parser.add_argument("--junit", metavar="FILE.xml",
                        help="also write JUnit XML (one test case per check) for CI")
    parser.add_argument("--markdown", metavar="FILE.md",
                        help="also write a Markdown summary for a pull-request comment")
    parser.add_argument("--force", action="store_true",
                        help="replace existing --junit and --markdown files")


def _sides(args):
    """``(baseline, candidate, baseline label, candidate label)``: latencies per measurement."""
    files = [f for f in (args.baseline_file, args.candidate_file) if f]
    if args.store:
        if files:
            raise LatscopeError(f"gate takes two captures or --store with --baseline and "
                                f"--candidate, not both (got {', '.join(files)})")
        if not (args.baseline and args.candidate):
            raise LatscopeError("gate --store needs --baseline COND and --candidate COND, such "
                                "as --baseline \"commit='abc'\"")
        base = store.select(args.store, where=args.baseline, measures=args.measure)
        cand = store.select(args.store, where=args.candidate, measures=args.measure)
        return base.latencies, cand.latencies, args.baseline, args.candidate
    if args.baseline or args.candidate:
        raise LatscopeError("--baseline and --candidate select runs of a store: give --store DIR")
    if len(files) != 2:
        raise LatscopeError(f"gate needs a BASELINE and a CANDIDATE capture (or --store), not "
                            f"{len(files)} file(s)")
    sides = []
    for path in files:
        if not os.path.exists(path):
            raise LatscopeError(f"{path}: no such file")
        # every measurement and stage; --measure then picks among them (it may name a stage)
        a = api.analyze_file(path, definitions=args.definitions, packets=True)
        sides.append(store.analysis_latencies(a, args.definitions))
    return sides[0], sides[1], files[0], files[1]


def run(args):
    inputs = [f for f in (args.baseline_file, args.candidate_file, args.budget,
                          args.definitions) if f]
    for path in (args.junit, args.markdown):      # before the analyses, not after
        if path:
            outputs.check_output(path, inputs, force=args.force)
    if args.junit and args.markdown and outputs.same_file(args.junit, args.markdown) or \
            outputs.STDOUT in (args.junit, args.markdown):
        raise LatscopeError("--junit and --markdown need two files (the verdict uses standard "
                            "output)")
    budget = gate.load_budget(args.budget) if args.budget else gate.DEFAULT_BUDGET
    base, cand, base_label, cand_label = _sides(args)
    if args.measure:
        budget = gate.Budget(budget.rules, budget.min_effect_ns, budget.confidence,
                             tuple(args.measure), budget.overrides)
    result = gate.gate(base, cand, budget, baseline_label=base_label,
                       candidate_label=cand_label)
    if args.junit:
        _write(args.junit, gate.render_junit(result), args.force)
    if args.markdown:
        _write(args.markdown, gate.render_markdown(result), args.force)
    print(gate.render_json(result) if args.json else gate.render_text(result))
    return gate.exit_status(result.verdict)


def _write(path, text, force):
    with outputs.open_output(path, force=force) as f:
        f.write(text)
    print(f"wrote {path}", file=sys.stderr)
