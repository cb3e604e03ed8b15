"""What ``latscope analyze``, ``compare`` and ``report`` share: help texts, loading the
captures, and the warnings about their integrity and marker maps."""

import os
import sys

from latscope import LatscopeError
from latscope.analysis import api
from latscope.analysis.definitions import MarkerMap, load_definitions
from latscope.capture.files.interop import parse_time
from latscope.userio import check_input

UNITS = ("Units: tables print microseconds (3 decimals); --json gives nanoseconds in keys ending "
         "in _ns. Percentiles are order statistics (the ceil(q n)-th smallest value) with 95 % "
         "distribution-free confidence intervals from the binomial; a bound is '-' (null in JSON) "
         "when the sample is too small to have one. The resolution (one instrument tick) is "
         "printed with every table.")

DEFINITIONS_HELP = ("measurement definitions (TOML, see docs/analysis.md); default: those stored "
                    "in the capture, else the standard ones (rx.isr = rx_dv falling -> m_isr "
                    "rising, rx.copy, rx.udp, rx.fast, tx.wire = m_send rising -> tx_en rising, "
                    "tx.xmit)")
MARKERS_HELP = ("marker meanings CHANNEL=MEANING,... e.g. m0=rx.isr,m3=tx.xmit, or 'default' for "
                "the Zephyr app's table (m0=rx.isr,m1=rx.copy,m2=rx.udp,m3=rx.fast,m4=tx.send); "
                "default: those the file carries (captures, and latscope's own .sr/.vcd/.csv "
                "exports). Without either, a capture with marker channels m0..m4 is refused, "
                "never analysed with a guessed map; the map used is printed with its source")


def add_window_arguments(p):
    """``--from``/``--to`` as ``latscope export`` has them (``args.start``, ``args.stop``:
    seconds as Fractions, or ``None``)."""
    p.add_argument("--from", dest="start", metavar="TIME", type=parse_time,
                   help="analyse only events at or after TIME since the timestamp reset, e.g. "
                        "1.5ms, 200us, 250ns or 0.1 (seconds), as export --from cuts a window; "
                        "applied before any statistics (default: the capture's start)")
    p.add_argument("--to", dest="stop", metavar="TIME", type=parse_time,
                   help="analyse only events before TIME (exclusive), same units (default: the "
                        "capture's end)")


def window_line(analysis):
    """One line saying which ``--from``/``--to`` window an analysis was cut to, or ``""``."""
    w = api.window_of(analysis)
    if not w:
        return ""
    lo = "the start" if w["from_s"] is None else f"{w['from_s']:.9g} s"
    hi = "the end" if w["to_s"] is None else f"{w['to_s']:.9g} s"
    return (f"window: events from {lo} to {hi} (--from/--to; {w['events']:,} events), applied "
            f"before the statistics")


def definitions(path):
    """The measurement definitions of ``--definitions FILE`` (``None``: the capture's own)."""
    return load_definitions(path) if path else None


def marker_line(analysis):
    """Which marker map an analysis used, and why, in one line."""
    used = analysis.metadata.get("marker_map")
    return MarkerMap(**used).describe() if used else "markers: -"


def warn_integrity(command, analyses):
    """One warning line per damaged or unfinished input (see :func:`api.integrity_note`)."""
    for a in analyses:
        note = api.integrity_note(a)
        if note:
            print(f"latscope {command}: warning: {a.path}: {note}", file=sys.stderr)


def load_all(command, files, *, definitions_file=None, markers=None, packets=True, start_s=None,
             stop_s=None):
    """Analyse every file of ``files`` (each must exist and be readable), saying on stderr which
    marker map each used; ``start_s``/``stop_s``: the ``--from``/``--to`` window."""
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise LatscopeError(f"no such file: {', '.join(missing)}")
    for f in files:
        check_input(f, "capture file")
    defs = definitions(definitions_file)
    analyses = [api.analyze_file(f, definitions=defs, packets=packets, markers=markers,
                                 start_s=start_s, stop_s=stop_s) for f in files]
    for a in analyses:          # which marker map each input used, and why
        print(f"latscope {command}: {a.path}: {marker_line(a)}", file=sys.stderr)
    return analyses
