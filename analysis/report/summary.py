"""The report's answer and its reference sections, as plain data: the headline (p50 and p99 with
intervals per capture and measurement, the ranking, each comparison's verdict as a sentence), the
glossary (every measurement shown, the statistics, the error budget) and the provenance.

Pure: analysis results in, sentences, :class:`~latscope.analysis.report.tables.Table` objects and
``(term, text)`` pairs out; :mod:`latscope.analysis.report.html` lays them out.
"""

import dataclasses
import datetime
import math

import latscope
from latscope.analysis.definitions import (
    MARKER_ALIASES,
    default_definitions,
    parse_definitions,
)
from latscope.analysis.grouping import FAST_DELIVERY, STACK_DELIVERY, load_condition
from latscope.analysis.report.figures import bounded
from latscope.analysis.report.labels import on_first_screen
from latscope.analysis.report.tables import Table
from latscope.analysis.stats import n_required
from latscope.analysis.units import time_unit
from latscope.capture.files.metadata import channel_offsets
from latscope.capture.files.provenance import provenance

__all__ = ["Verdict", "HEADLINE_PERCENTS", "headline_table", "verdicts", "ranking_sentences",
           "headline_names", "measured_sentence", "bounded", "unbounded_note",
           "glossary", "error_budget",
           "provenance_rows", "window_text", "EDGE_WORDS", "MEASUREMENT_VERBS"]

#: The percentiles the first screen states (p99.9 and beyond stay in the detail tables, where
#: the sample bounds them).
HEADLINE_PERCENTS = (50.0, 99.0)

#: What each edge is, in words (channel names and marker meanings as the definitions use them).
EDGE_WORDS = {
    "rx_dv falling": "the end of the received frame at the PHY (RX_DV falling)",
    "rx_dv rising": "the start of the received frame at the PHY (RX_DV rising)",
    "crs_dv falling": "the end of the received frame at the RMII PHY (CRS_DV falling)",
    "tx_en rising": "the start of the reply at the PHY (TX_EN rising)",
    "tx_en falling": "the end of the reply at the PHY (TX_EN falling)",
    "rx.isr rising": "the firmware's entry into its receive interrupt handler (marker rx.isr "
                     "rising)",
    "rx.copy rising": "the driver's copy of the frame out of the MAC (marker rx.copy rising)",
    "rx.udp rising": "the payload's arrival in the application from the IP/UDP stack (marker "
                     "rx.udp rising)",
    "rx.fast rising": "the payload's arrival in the application through the fast track, "
                      "bypassing the stack (marker rx.fast rising)",
    "tx.send rising": "the application's hand-off of its reply to the stack (marker tx.send "
                      "rising)",
    "tx.xmit rising": "the driver's start of the MAC's transmission (marker tx.xmit rising)",
}

#: A verb phrase per measurement for verdict sentences ("X <verb> 1.2 µs sooner than Y").
MEASUREMENT_VERBS = {
    "rx.isr": "enters the receive interrupt",
    "rx.copy": "has the frame out of the MAC",
    "rx.udp": "delivers to the app",
    "rx.fast": "delivers to the app",
    "tx.wire": "puts the reply on the wire",
    "tx.xmit": "gets the frame from the driver to the wire",
    "rx.driver": "passes the driver stage",
    "rx.ipudp": "passes the IP/UDP stage",
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One comparison at one percentile: ``other - base`` is ``diff_ns`` [``lower_ns``,
    ``upper_ns``] (a bound ``None`` where the samples do not bound it); ``sentence`` says it;
    ``kind`` is the comparison group's (:class:`~latscope.analysis.grouping.ComparisonGroup`)."""
    kind: str
    base: str
    other: str
    measurement: str
    percent: float
    diff_ns: float
    lower_ns: float | None
    upper_ns: float | None
    sentence: str
    #: the background load both captures ran under, in words, or None (the group's condition)
    condition: str | None = None

    @property
    def decided(self):
        """Whether the interval excludes zero (the sign of the difference is known)."""
        return (self.lower_ns is not None and self.upper_ns is not None
                and (self.lower_ns > 0 or self.upper_ns < 0))


def _canonical(channel):
    return MARKER_ALIASES.get(channel, channel)


def _edge_words(endpoint):
    key = f"{_canonical(endpoint.channel)} {'rising' if endpoint.rising else 'falling'}"
    return EDGE_WORDS.get(key, f"the {'rising' if endpoint.rising else 'falling'} edge of "
                               f"{endpoint.channel}")


def headline_names(names):
    """The measurements the first screen leads with: the application's delivery (``rx.udp``,
    ``rx.fast``) and the transmit path's end when present, else every measurement.

    >>> headline_names(["rx.isr", "rx.copy", "rx.udp", "tx.wire"])
    ['rx.udp', 'tx.wire']
    >>> headline_names(["rx.isr", "rx.udp[hp]"])
    ['rx.udp[hp]']
    >>> headline_names(["rx.isr"])
    ['rx.isr']
    """
    lead = [n for n in names if n.split("[")[0] in (STACK_DELIVERY, FAST_DELIVERY, "tx.wire")]
    return lead or list(names)


def unbounded_note(analyses, labels, names):
    """A sentence naming the captures left off the first screen because their sample does not
    bound p50 of a headline measurement, or ``None``."""
    def by_class(a, n):      # rx.udp[hp] bounded: the capture's per-class figure stands for it
        return any(k.startswith(n + "[") and bounded(v) for k, v in a.stats.items())
    left = [f"{lab} {n} ({a.stats[n].n:,} packet{'s' if a.stats[n].n != 1 else ''})"
            for n in names for a, lab in zip(analyses, labels, strict=True)
            if n in a.stats and a.stats[n].n and not bounded(a.stats[n])
            and not by_class(a, n) and on_first_screen(a, n)]
    if not left:
        return None
    return ("Left off this summary because the sample does not bound even the median (see "
            "their own sections): " + ", ".join(left) + ".")


def _fmt_q(unit, q):
    if q is None:
        return "-"
    if q.upper_ns is None or q.lower_ns is None:
        return f"{unit.fmt(q.value_ns)} [no bound]"
    return f"{unit.fmt(q.value_ns)} [{unit.fmt(q.lower_ns)}, {unit.fmt(q.upper_ns)}]"


def headline_table(analyses, labels, names, confidence=0.95):
    """One :class:`Table`, one unit: per capture and measurement the packet count, p50 and p99
    with their distribution-free intervals ("no bound" where the sample has none); captures
    whose sample does not bound p50 are left out (:func:`unbounded_note` names them), and so
    are a frame capture's plain stages (:func:`on_first_screen`).

    Rows are sorted by measurement and load condition, then by p50 (fastest first), so the table
    is the ranking."""
    values = [a.stats[n].quantiles[50.0].value_ns for a in analyses for n in names
              if n in a.stats and a.stats[n].n and 50.0 in a.stats[n].quantiles]
    unit = time_unit(values or [1000.0])
    rows = []
    conditions = [load_condition(a.metadata) for a in analyses]
    for name in names:
        for cond in dict.fromkeys(conditions):     # ranked within one load condition
            members = [(a.stats[name], lab) for a, lab, c
                       in zip(analyses, labels, conditions, strict=True)
                       if c == cond and name in a.stats and bounded(a.stats[name])
                       and on_first_screen(a, name)]
            members.sort(key=lambda m: m[0].quantiles[50.0].value_ns if 50.0 in m[0].quantiles
                         else float("inf"))
            for rank, (s, lab) in enumerate(members, 1):
                rows.append([name, rank, lab, f"{s.n:,}"]
                            + [_fmt_q(unit, s.quantiles.get(p)) for p in HEADLINE_PERCENTS])
    conf = f"{confidence * 100:g} %"
    return Table(f"at a glance: p50 and p99 per capture ({unit.name}; {conf} intervals), "
                 f"fastest first", ["measurement", "rank", "capture", "packets",
                                    f"p50 {unit.name} [{conf} CI]", f"p99 {unit.name} "
                                    f"[{conf} CI]"], rows, unit.name)


def ranking_sentences(analyses, labels, names):
    """Per measurement, one sentence ranking the captures by p50: ``<`` where the two intervals
    are disjoint, ``≈`` where they overlap (the sample cannot order them). Captures under
    background load (:func:`~latscope.analysis.grouping.load_condition`) are ranked only among
    themselves, in a sentence of their own."""
    conditions = [load_condition(a.metadata) for a in analyses]
    out = []
    for cond in dict.fromkeys(conditions):
        mine = [i for i, c in enumerate(conditions) if c == cond]
        out += _ranking([analyses[i] for i in mine], [labels[i] for i in mine], names,
                        f" under {cond[1]}" if cond else "")
    return out


def _ranking(analyses, labels, names, under):
    out = []
    for name in names:
        members = [(a.stats[name].quantiles[50.0], lab)
                   for a, lab in zip(analyses, labels, strict=True)
                   if name in a.stats and bounded(a.stats[name]) and on_first_screen(a, name)]
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[0].value_ns)
        unit = time_unit([q.value_ns for q, _ in members])
        text = f"{members[0][1]} ({unit.fmt(members[0][0].value_ns)})"
        for (prev, _), (q, lab) in zip(members, members[1:], strict=False):
            apart = (prev.upper_ns is not None and q.lower_ns is not None
                     and prev.upper_ns < q.lower_ns)
            text += f" {'<' if apart else '≈'} {lab} ({unit.fmt(q.value_ns)})"
        out.append(f"{name} at p50{under} ({unit.name}), fastest first: {text}.")
    return out


def verdicts(grouped, percents=HEADLINE_PERCENTS, simulated=False):
    """A :class:`Verdict` per comparison of :func:`~latscope.analysis.report.tables.
    compare_grouped` and percentile, its sentence in the form "el-dm-64 delivers to the app
    4.34 µs [4.33, 4.35] sooner than gem-64 at p50" (SIMULATED appended for simulated
    captures); where the interval holds zero or is open, the sentence says the sample cannot
    tell."""
    out = []
    tag = " (SIMULATED)" if simulated else ""
    for group, rows in grouped:
        cond = getattr(group, "condition", None)
        under = f" under {cond}" if cond else ""
        for r in rows:
            c = r.comparison
            for p in percents:
                q = c.percentiles.get(p)
                if q is None:
                    continue
                name = r.other_name if r.other_name == r.base_name else \
                    f"{r.other_name} (vs {r.base_name})"
                verb = MEASUREMENT_VERBS.get(r.other_name.split("[")[0],
                                             f"reaches the end of {r.other_name}")
                unit = time_unit([abs(q.diff_ns)] if q.diff_ns else [1.0])
                if q.lower_ns is None or q.upper_ns is None:
                    # each side's interval is at sqrt(confidence), as compare_samples has it
                    need = n_required(p / 100, math.sqrt(c.confidence))
                    text = (f"{name} at p{p:g}{under}: {r.other} − {r.base} is "
                            f"{unit.fmt(q.diff_ns)} {unit.name} with no interval (needs ≥ "
                            f"{need:,} packets each), so no verdict{tag}")
                elif q.lower_ns > 0 or q.upper_ns < 0:
                    faster, slower = (r.other, r.base) if q.diff_ns < 0 else (r.base, r.other)
                    lo, hi = sorted((abs(q.lower_ns), abs(q.upper_ns)))
                    text = (f"{faster} {verb} {unit.fmt(abs(q.diff_ns))} {unit.name} "
                            f"[{unit.fmt(lo)}, {unit.fmt(hi)}] sooner than {slower} at "
                            f"p{p:g}{under}{tag}")
                else:
                    text = (f"{name} at p{p:g}{under}: no difference between {r.other} and "
                            f"{r.base} can be told ({unit.fmt(q.diff_ns)} {unit.name} "
                            f"[{unit.fmt(q.lower_ns)}, {unit.fmt(q.upper_ns)}]){tag}")
                out.append(Verdict(group.kind, r.base, r.other, name, p, q.diff_ns, q.lower_ns,
                                   q.upper_ns, text + ".", cond))
    return out


def _definitions_of(analyses):
    """The definitions behind the analyses: a capture's stored ones where it has them, the
    standard ones otherwise (merged by name, first seen wins)."""
    measurements, stages = {}, {}
    for a in analyses:
        stored = (a.metadata or {}).get("definitions")
        defs = parse_definitions(stored) if stored else default_definitions()
        for m in defs.measurements:
            measurements.setdefault(m.name, m)
        for s in defs.stages:
            stages.setdefault(s.name, s)
    return measurements, stages


def measured_sentence(analyses, names):
    """What the headline measurements are, in words: "rx.udp: from … to …; …"."""
    measurements, _ = _definitions_of(analyses)
    by_base = {}
    for name in names:                 # rx.udp and rx.udp[hp] share one definition
        by_base.setdefault(name.split("[")[0], []).append(name)
    out = []
    for base, members in by_base.items():
        m = measurements.get(base)
        if m is not None:
            out.append(f"{' and '.join(members)}, from {_edge_words(m.start)} to "
                       f"{_edge_words(m.stop)}")
    return "Measured: " + "; ".join(out) + "." if out else ""


def glossary(analyses, names, confidence=0.95):
    """``[(term, definition)]``: every measurement and stage in ``names`` (its start and stop
    edges in words, then as written in the definitions), then the statistics the page uses.
    The packets p99.9 and p99.99 need come from :func:`latscope.analysis.stats.n_required`."""
    measurements, stages = _definitions_of(analyses)
    out = []
    for name in names:
        if name in measurements:
            m = measurements[name]
            out.append((name, f"from {_edge_words(m.start)} to {_edge_words(m.stop)}. "
                              f"Definition: {m.start} → {m.stop} ({m.direction}, stop within "
                              f"{m.window_ns / 1000:g} µs)."))
        elif name in stages:
            s = stages[name]
            out.append((name, f"the part of the path between the stops of {s.start} and "
                              f"{s.stop}, per packet. Definition: {s.stop} − {s.start}."))
        elif name.startswith("node.e2e"):
            out.append((name, "from the end of a received request at the PHY (RX_DV falling) "
                              "to the start of its reply at the PHY (TX_EN rising), the two "
                              "frames paired by class and sequence number, not by order: the "
                              "node's end-to-end latency on the wire."))
        elif "[" in name and name.startswith("tx."):
            base, cls = name[:-1].split("[", 1)
            marker = EDGE_WORDS.get(f"{base} rising", f"the rising edge of marker {base}")
            out.append((name, f"for replies to requests of class {cls}: from {marker} to the "
                              f"start of the reply at the PHY (TX_EN rising), each marker "
                              f"paired in order with the replies."))
        elif "[" in name and name.split("[")[0] in measurements:
            base, cls = name[:-1].split("[", 1)
            m = measurements[base]
            out.append((name, f"{base} for requests of class {cls} only: from the end of the "
                              f"received request at the PHY (RX_DV falling) to "
                              f"{_edge_words(m.stop)}, each marker paired in order with the "
                              f"frames of that class."))
        else:
            out.append((name, "a measurement defined by the capture's own definitions."))
    conf = f"{confidence * 100:g} %"
    n999, n9999 = n_required(0.999, confidence), n_required(0.9999, confidence)
    n99 = n_required(0.99, confidence)
    out += [
        ("pN", "the latency that N % of the packets did not exceed (p50: the median; p99: one "
               "packet in a hundred is slower)."),
        ("interval [a, b]", f"a distribution-free {conf} confidence interval for the "
                            f"percentile: two order statistics of the sample chosen from the "
                            f"binomial distribution of the count below the true percentile. "
                            f"It assumes only independent packets, no distribution shape."),
        ("no bound", f"the sample is too small for the upper end of the interval: a two-sided "
                     f"{conf} interval for p99 needs ≥ {n99:,} packets, for p99.9 ≥ {n999:,} "
                     f"and for p99.99 ≥ {n9999:,} (the smallest n whose upper rank is within "
                     f"the sample). Below that, the sample's maximum says nothing about that "
                     f"percentile and no conclusion here rests on it."),
        ("Δ (difference)", f"other − baseline; its interval is distribution-free for "
                           f"percentiles (from each side's interval at √{conf}, so that both "
                           f"hold together at {conf}: a p99 difference needs ≥ "
                           f"{n_required(0.99, math.sqrt(confidence)):,} packets each) and "
                           f"Welch's t interval for the mean. An interval holding 0 means the "
                           f"sample cannot tell which is faster."),
        ("Mann-Whitney p, Cliff's δ", "whether the whole distribution moved: p is the two-sided "
                                      "test's probability under no shift; δ = 2·P(other > "
                                      "base) − 1, from −1 (always faster) to +1 (always "
                                      "slower)."),
        ("mean ± 3σ", "the form of the paper's Table I, shown for comparison only: latency is "
                      "not normal, and the percentiles above are what the sample supports."),
    ]
    return out


def error_budget(analyses):
    """``[(source, size in words)]``: what limits every latency on the page, per the captures'
    metadata: the timestamp tick, the channel skew after calibration, the MII/RMII clock grid,
    the marker pulse cost."""
    ticks = sorted({a.result.tick_hz for a in analyses})
    tick_text = ", ".join(f"{1e9 / t:g} ns ({t / 1e6:g} MHz)" for t in ticks)
    calibrated = [a.label for a in analyses if channel_offsets(a.metadata) is not None]
    if len(calibrated) == len(analyses):
        skew = ("every capture carries channel offsets from `latscope selftest --calibrate`, "
                "subtracted before pairing: what remains is within one tick per channel.")
    elif calibrated:
        skew = (f"calibrated: {', '.join(calibrated)} (within one tick after correction); the "
                f"others carry no channel offsets, so their pin-to-sample skew (docs/boards.md, "
                f"\"Channel-to-channel skew\") is not corrected.")
    else:
        skew = ("these captures carry no channel offsets: the pin-to-sample skew between "
                "channels (docs/boards.md, \"Channel-to-channel skew\") is not corrected; on "
                "the simulated bench every channel is sampled alike.")
    rmii = any("crs_dv" in (a.metadata.get("instrument", {}) or {}).get("channel_names", [])
               and a.metadata.get("phy") == "rmii" for a in analyses)
    grid = ("RX_DV and TX_EN change only on the MII clock: 40 ns at 100 Mb/s (25 MHz), 400 ns "
            "at 10 Mb/s; on RMII, CRS_DV on the 50 MHz reference clock, 20 ns. A latency "
            "starting or stopping at a PHY edge carries up to one period of this grid, "
            "uniformly spread, which widens the distribution's body, not its tail."
            + (" (These captures include RMII.)" if rmii else ""))
    pulse = [f"{a.label}: {a.metadata['marker_cost_ns']} ns" for a in analyses
             if "marker_cost_ns" in (a.metadata or {})]
    marker = ("a marker is a GPIO write in the firmware: each adds its own cost to the path it "
              "measures. " + ("Recorded: " + "; ".join(pulse) + "." if pulse else
                              "These captures do not record it (measure it with the firmware's "
                              "back-to-back marker test)."))
    return [("timestamp tick", f"{tick_text}: every edge is stamped to ±½ tick, so a latency "
                               f"(the difference of two stamps) is within ±1 tick."),
            ("channel skew after calibration", skew),
            ("MII/RMII clock grid", grid),
            ("marker pulse cost", marker)]


def window_text(analyses):
    """A sentence saying which ``--from``/``--to`` window the analyses were cut to
    (``metadata["window"]``, :func:`latscope.analysis.api.analyze_file`), or ``None`` for whole
    captures.

    >>> from types import SimpleNamespace as A
    >>> window_text([A(metadata={"window": {"from_s": 0.003, "to_s": None}})])[:57]
    'Window: only the events from 0.003 s to the end of each c'
    """
    windows = [(a.metadata or {}).get("window") for a in analyses]
    if not any(windows):
        return None
    spans = []
    for w in dict.fromkeys((w["from_s"], w["to_s"]) for w in windows if w):
        lo = "the start" if w[0] is None else f"{w[0]:.9g} s"
        hi = "the end" if w[1] is None else f"{w[1]:.9g} s"
        spans.append(f"from {lo} to {hi}")
    return (f"Window: only the events {' and '.join(spans)} of each capture (--from/--to), "
            f"applied before every statistic on this page.")


def provenance_rows(analyses, labels, *, command=None, now=None):
    """``(general, per_capture)``: ``general`` is ``[(key, value)]`` (date made, latscope
    version, command); ``per_capture`` a :class:`Table` with each input's data kind, file,
    start time, gateware and firmware build, profile, seed and engine, from
    :func:`latscope.capture.files.provenance.provenance` and the capture metadata."""
    now = now or datetime.datetime.now(datetime.UTC)
    general = [("made", now.strftime("%Y-%m-%d %H:%M:%S UTC")),
               ("latscope", latscope.__version__)]
    if command:
        general.append(("command", command))
    window = window_text(analyses)
    if window:
        general.append(("window", window))
    rows = []
    for a, lab in zip(analyses, labels, strict=True):
        md = a.metadata or {}
        prov = provenance(md)
        inst = md.get("instrument", {}) or {}
        gw = "-"
        if "gateware_major" in inst:
            gw = f"{inst['gateware_major']}.{inst.get('gateware_minor', 0)}"
            if inst.get("source_hash"):
                gw += f" ({inst['source_hash']:x})" if isinstance(inst["source_hash"], int) \
                    else f" ({inst['source_hash']})"
        fw = md.get("firmware") or md.get("build_info") or "not recorded"
        if isinstance(fw, dict):
            fw = ", ".join(f"{k} {v}" for k, v in fw.items())
        rows.append([lab, prov.get("data") or "-", prov.get("source_file") or
                     (a.path.rsplit("/", 1)[-1] if a.path else "-"),
                     prov.get("start_time") or "-", prov.get("tool") or "-",
                     prov.get("command") or "-", gw, str(fw),
                     prov.get("profile") or "-",
                     "-" if prov.get("seed") is None else str(prov["seed"]),
                     prov.get("engine") or "-"])
    table = Table("provenance of each input", ["capture", "data", "file", "started",
                                                "recorded by", "command", "gateware",
                                                "firmware build", "profile", "seed",
                                                "engine"], rows, collapsed=False)
    return general, table
