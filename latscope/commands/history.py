"""``latscope history``: a measurement's percentiles over the runs of a results store, with the
change points found in them (``docs/gate.md``, "The trend"). Arguments become one call of
:func:`latscope.analysis.history.store_history`."""

import json
import sys

from latscope import LatscopeError
from latscope.analysis import history
from latscope.analysis.gate import parse_percentile
from latscope.analysis.units import time_unit
from latscope.capture.files import outputs

HELP = "a measurement's percentiles over the runs of a results store, with change points"

DESCRIPTION = """\
Show a measurement's percentiles (with 95 % intervals) per run of a results store, or per value
of a label such as commit, and mark the change points. The change-point rule's penalty is
calibrated on the store's own packets so that a series without change shows one in about ALPHA
of cases."""


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.add_argument("store", metavar="DIR", help="a results store (analyze --store DIR)")
    parser.add_argument("--measure", required=True, metavar="NAME",
                        help="the measurement or stage, e.g. rx.udp")
    parser.add_argument("--by", default="time", metavar="time|LABEL",
                        help="one point per run in time order (default), or per value of a "
                             "label such as commit (its runs pooled)")
    parser.add_argument("--where", metavar="COND",
                        help="only runs matching this SQL condition, e.g. \"board='ecpix5'\"")
    parser.add_argument("--percentiles", default="p50,p99", metavar="LIST",
                        help="percentiles shown and searched for changes (default p50,p99)")
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="false-alarm rate of the change-point rule (default 0.05)")
    parser.add_argument("--resamples", type=int, default=100,
                        help="bootstrap resamples calibrating the rule (default 100)")
    parser.add_argument("--plot", metavar="FILE.png", help="write the figure")
    parser.add_argument("--force", action="store_true", help="replace an existing --plot file")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (ns)")


def run(args):
    percentiles = [parse_percentile(p) for p in args.percentiles.split(",") if p.strip()]
    if not percentiles:
        raise LatscopeError(f"--percentiles must list at least one, such as p50,p99, not "
                            f"{args.percentiles!r}")
    if args.plot:        # before the store is read, not after
        outputs.check_output(args.plot, force=args.force, allow_stdout=False)
    hist = history.store_history(args.store, args.measure, by=args.by, where=args.where,
                                 percentiles=percentiles, alpha=args.alpha,
                                 resamples=args.resamples)
    if args.plot:
        png = history.history_figure(hist)
        with outputs.open_output(args.plot, force=args.force, mode="wb") as f:
            f.write(png)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.json:
        print(json.dumps(hist.to_dict(), indent=2, allow_nan=False))
    else:
        print(render_text(hist))
    return 0


def render_text(hist):
    """The trend as a table, one line per point, change points marked above their point."""
    unit = time_unit([p.quantiles[q][0] for p in hist.points for q in hist.percentiles])
    head = f"{hist.by:<24} {'n':>9} " + " ".join(
        f"{f'p{q:g} ({unit.name})':>24}" for q in hist.percentiles)
    lines = [f"{hist.measure}: percentiles over {len(hist.points)} point(s) by {hist.by}, "
             f"95 % intervals", head]
    changes = {c.index: c for c in hist.changes}
    for i, p in enumerate(hist.points):
        if i in changes:
            c = changes[i]
            moves = ", ".join(f"p{q:g} {unit.fmt(c.before_ns[q])} -> {unit.fmt(c.after_ns[q])}"
                              for q in hist.percentiles)
            named = " ".join(f"{k}={v}" for k, v in c.labels.items()) or c.key
            lines.append(f"--- change point at {named}: {moves} {unit.name}")
        cells = []
        for q in hist.percentiles:
            v, lo, hi = p.quantiles[q]
            cells.append(f"{unit.fmt(v)} [{unit.fmt(lo)}, {unit.fmt(hi)}]".rjust(24))
        lines.append(f"{p.key:<24} {p.n:>9,} " + " ".join(cells))
    if hist.penalty is not None:
        lines.append(f"change points: {len(hist.changes)} (score {hist.score:.3g} against the "
                     f"penalty {hist.penalty:.3g}, calibrated for a {hist.alpha * 100:g} % "
                     f"false-alarm rate\n  on {hist.resamples} resamples of the runs' packets)")
    if hist.step_ns:
        lines.append("run-to-run step / a point's interval half-width (medians): "
                     + ", ".join(f"p{q:g} {unit.fmt(hist.step_ns[q])} / "
                                 f"{unit.fmt(hist.half_width_ns.get(q))} {unit.name}"
                                 for q in hist.percentiles))
    lines += [f"note: {n}" for n in hist.notes]
    return "\n".join(lines)
