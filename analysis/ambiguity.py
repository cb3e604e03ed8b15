"""What the pairing could not decide, in words: lines for ``analyze`` and the report.

Pure: takes an :class:`~latscope.analysis.engine.AnalysisResult` and returns text. A packet is
*ambiguous* when its stop edge cannot be told from edges alone
(:func:`~latscope.analysis.pairing.pair_in_order`: a busy period whose starts and stops do not
match one to one); it is left out of the statistics. A request is *coalesced* when its interrupt
also served another frame (:func:`~latscope.analysis.pairing.pair_shared`); it is kept.

>>> from types import SimpleNamespace as NS
>>> r = NS(stats={"rx.udp": NS(counts={"packets": 400, "ambiguous": 58})}, frames=None)
>>> print(*ambiguity_lines(r))
rx.udp: 58 of 400 packets ambiguous (their marker could be another packet's: left out of the
    statistics)
"""

__all__ = ["ambiguity_lines"]


def ambiguity_lines(result, class_label=str):
    """One line per measurement or per-class stage with ambiguous or coalesced packets.

    Parameters
    ----------
    result : AnalysisResult
    class_label : callable
        Class number -> name, for the per-class stages of a frame analysis.
    """
    lines = []
    for name, s in result.stats.items():
        counts = s.counts or {}
        k = int(counts.get("ambiguous", 0))
        if k and "packets" in counts:
            lines.append(f"{name}: {k} of {counts['packets']} packets ambiguous (their marker "
                         f"could be another packet's: left out of the statistics)")
    fa = getattr(result, "frames", None)
    for cls, report in (fa.classes.items() if fa is not None else ()):
        label = class_label(cls)
        for stage, k in report.ambiguous.items():
            lines.append(f"{stage}[{label}]: {k} of {report.requests} requests ambiguous "
                         f"(left out of the stage)")
        for stage, k in report.coalesced.items():
            lines.append(f"{stage}[{label}]: {k} of {report.requests} requests share their "
                         f"marker with another frame (interrupt coalescing; kept)")
    return lines
