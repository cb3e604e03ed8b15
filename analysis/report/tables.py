"""Tables (as text for the terminal and as structured :class:`Table` objects for the HTML report)
and the grouped comparisons behind ``latscope compare`` and ``latscope report``.

All figures come from the analysis results; this module only arranges and formats them. Every
table states its time unit, chosen for its data (:mod:`latscope.analysis.units`). The report
itself (HTML + Markdown) is written by :mod:`latscope.analysis.report.html`; the figures are
drawn by :mod:`latscope.analysis.report.figures`. Each ``make_*`` function returns a
:class:`Table`; the function of the same name without ``make_`` returns its Markdown.
"""

import csv
import dataclasses
import html
import io
import math
import re

import numpy as np

from latscope import LatscopeError
from latscope.analysis.grouping import (
    ComparisonGroup,
    comparison_groups,
    display_labels,
    family,
    is_simulated,
)
from latscope.analysis.report import figures
from latscope.analysis.report.labels import class_label, counted_only_classes
from latscope.analysis.report.paper import reference_for
from latscope.analysis.stats import PERCENTILES
from latscope.analysis.units import US, time_unit

__all__ = ["Table", "fmt_ns", "stats_table", "table_one", "percentile_table", "comparison_table",
           "size_table", "stage_table", "summary_text", "compare_analyses", "compare_grouped",
           "grouped_comparison_tables", "paper_table", "size_fits", "frames_table",
           "compare_classes", "class_comparison_table", "common_names", "resolution_note",
           "make_stats_table", "make_table_one", "make_percentile_table", "make_frames_table",
           "make_size_table", "make_stage_table", "size_data", "waterfall_data",
           "plot_histograms", "plot_spectrum", "plot_series", "plot_distributions",
           "plot_waterfall", "plot_size"]


def fmt_ns(value, unit="us"):
    """Format ns as µs (3 decimals) or ns; ``None``/NaN as ``-``.

    >>> fmt_ns(7480.0), fmt_ns(None), fmt_ns(12.5, "ns")
    ('7.480', '-', '12.5')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if unit == "ns":
        return f"{value:.1f}"
    return f"{value / 1000:.3f}"


#: Text cells longer than this wrap in HTML (class ``long``) rather than widen their table.
LONG_CELL = 60


def _cell_class(cell):
    if _numeric(cell):
        return "num"
    return "txt long" if len(str(cell)) > LONG_CELL else "txt"


@dataclasses.dataclass
class Table:
    """A titled table: ``headers`` and ``rows`` of cell text; ``unit`` names the time unit of its
    time columns (stated in the title); ``note`` is a sentence shown under it; ``collapsed``
    says whether the page folds it under its title (``None``: only when it is long)."""
    title: str
    headers: list
    rows: list
    unit: str = ""
    note: str = ""
    collapsed: bool | None = None

    def markdown(self, title=True):
        """Aligned Markdown table (numbers right-aligned), optionally under its title."""
        cells = [list(map(str, self.headers))] + [[str(c) for c in r] for r in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.headers))]
        lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True))
                 + " |", "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        for r in cells[1:]:      # numbers right-aligned, words left-aligned
            lines.append("| " + " | ".join(c.rjust(w) if _numeric(c) else c.ljust(w)
                                           for c, w in zip(r, widths, strict=True)) + " |")
        head = [f"{self.title}:", ""] if title and self.title else []
        tail = ["", self.note] if self.note else []
        return "\n".join(head + lines + tail)

    def csv(self):
        """The table as CSV text (header row first; an interval cell stays one quoted cell).

        >>> print(Table("t", ["a", "b"], [["x, y", 1]]).csv(), end="")
        a,b
        "x, y",1
        """
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.headers)
        writer.writerows(self.rows)
        return buf.getvalue()

    def html(self):
        """An HTML ``<table>`` with the title as its caption; numeric cells right-aligned, long
        text cells (over :data:`LONG_CELL` characters) wrapped."""
        out = [f"<table><caption>{html.escape(self.title)}</caption><thead><tr>"]
        out += [f"<th>{html.escape(str(h))}</th>" for h in self.headers]
        out.append("</tr></thead><tbody>")
        for row in self.rows:
            out.append("<tr>" + "".join(
                f"<td class='{_cell_class(c)}'>{_cell_html(c)}</td>"
                for c in row) + "</tr>")
        out.append("</tbody></table>")
        if self.note:
            out.append(f"<p class='note'>{html.escape(self.note)}</p>")
        return "".join(out)


_INTERVAL = re.compile(r"^(\S+) (\[[^\]]*\])$")


def _cell_html(cell):
    """A value with its interval (``7.480 [7.46, 7.50]``) on two lines, the interval smaller,
    so wide interval tables fit the page."""
    text = str(cell)
    m = _INTERVAL.match(text)
    if m:
        return f"{html.escape(m.group(1))}<br><span class='ci'>{html.escape(m.group(2))}</span>"
    return html.escape(text)


def _numeric(cell):
    text = str(cell).replace(",", "").replace("−", "-").split(" ")[0].lstrip("+-±<")
    try:
        float(text)
        return True
    except ValueError:
        return text == "-"


def _ci(q, unit):
    return f"[{unit.fmt(q.lower_ns)}, {unit.fmt(q.upper_ns)}]"


def _unit_of_stats(stats):
    return time_unit([s.mean_ns for s in stats.values() if s.n])


def stats_table(stats, unit=None):
    """Markdown table of one capture's measurements, percentiles with their intervals; the unit
    (chosen for the data unless given) is in every time column's header."""
    return make_stats_table(stats, unit).markdown(title=False)


def make_stats_table(stats, unit=None, title="measurements"):
    """:class:`Table` of one capture's measurements (see :func:`stats_table`)."""
    unit = unit or _unit_of_stats(stats)
    rows = []
    for name, s in stats.items():
        row = [name, f"{s.n:,}", unit.fmt(s.mean_ns), unit.fmt(s.three_sigma_ns),
               unit.fmt(s.min_ns)]
        for p in (50.0, 99.0, 99.9):
            q = s.quantiles[p]
            row.append(f"{unit.fmt(q.value_ns)} {_ci(q, unit)}")
        row += [unit.fmt(s.max_ns), unit.fmt(s.pdv_ns), s.counts.get("missed", 0),
                s.counts.get("spurious", 0), s.counts.get("lost_gap", 0)]
        rows.append(row)
    u = unit.name
    return Table(f"{title} ({u})", ["measurement", "n", f"mean {u}", f"3σ {u}", f"min {u}",
                                    f"p50 {u} [95% CI]", f"p99 {u} [95% CI]",
                                    f"p99.9 {u} [95% CI]", f"max {u}", f"PDV {u}", "missed",
                                    "spurious", "lost-gap"], rows, u)


def resolution_note(stats):
    """One sentence on the resolution of ``stats`` (a dict of LatencyStats): a tick, and the
    histogram's relative error where percentiles came from it."""
    notes = set()
    for s in stats.values():
        text = f"resolution {s.resolution_ns:.3f} ns (1 tick; each latency exact to ±1 tick)"
        if s.method == "histogram":
            text += f"; percentiles from the log-linear histogram (±{s.relative_error:.3%})"
        notes.add(text)
    return "; ".join(sorted(notes))


def common_names(analyses):
    """Measurement names with data in any of ``analyses``, in order of first appearance."""
    names = []
    for a in analyses:
        for name, s in a.stats.items():
            if s.n and name not in names:
                names.append(name)
    return names


def make_table_one(analyses, names=None, labels=None):
    """:class:`Table` of the origin paper's Table I form (see :func:`table_one`)."""
    names = names or common_names(analyses)
    labels = labels or display_labels(analyses)
    unit = time_unit([s.mean_ns for a in analyses for s in a.stats.values() if s.n])
    rows = []
    for a, label in zip(analyses, labels, strict=True):
        row = [label]
        for name in names:
            s = a.stats.get(name)
            row.append(f"{unit.fmt(s.mean_ns)} ± {unit.fmt(s.three_sigma_ns)}"
                       if s and s.n else "-")
        rows.append(row)
    return Table(f"mean ± 3σ ({unit.name}), the origin paper's Table I form",
                 ["configuration"] + list(names), rows, unit.name)


def table_one(analyses, names=None):
    """The origin paper's Table I form: mean ± 3σ per configuration and measurement (the unit,
    chosen for the data, is in the title)."""
    return make_table_one(analyses, names).markdown()


def make_percentile_table(analyses, name, labels=None):
    """:class:`Table` of one measurement's percentiles (see :func:`percentile_table`)."""
    labels = labels or display_labels(analyses)
    unit = time_unit([a.stats[name].quantiles[50.0].value_ns for a in analyses
                      if name in a.stats and a.stats[name].n])
    rows = []
    for a, label in zip(analyses, labels, strict=True):
        s = a.stats.get(name)
        if not s or not s.n:
            continue
        row = [label, f"{s.n:,}", unit.fmt(s.min_ns)]
        for p in PERCENTILES:
            q = s.quantiles[p]
            row.append(f"{unit.fmt(q.value_ns)} {_ci(q, unit)}")
        row.append(unit.fmt(s.max_ns))
        rows.append(row)
    return Table(f"{name}: percentiles ({unit.name}) with 95 % distribution-free intervals",
                 ["configuration", "n", "min"] + [f"p{p:g}" for p in PERCENTILES] + ["max"],
                 rows, unit.name)


def percentile_table(analyses, name):
    """Percentiles of one measurement per configuration with 95 % intervals (unit in title)."""
    return make_percentile_table(analyses, name).markdown()


def summary_text(analyses):
    """Table I (mean ± 3σ) plus percentile tables of every measurement, as Markdown text."""
    if not analyses:
        raise LatscopeError("no captures to summarise")
    parts = [table_one(analyses), ""]
    for name in common_names(analyses):
        parts += [percentile_table(analyses, name), ""]
    parts.append(resolution_note({f"{a.label}/{k}": s for a in analyses
                                   for k, s in a.stats.items()}))
    return "\n".join(parts)


def make_frames_table(analyses, labels=None):
    """Per capture and class of received frames: requests paired with replies by sequence number
    and what went wrong (``None`` when no capture has frame records)."""
    labels = labels or display_labels(analyses)
    rows = []
    for a, label in zip(analyses, labels, strict=True):
        fa = getattr(a.result, "frames", None)
        if fa is None:
            continue
        for cls, c in sorted(fa.classes.items()):
            rx = c.counted.get("rx")
            rows.append([label, class_label(cls, a.metadata), c.requests, c.replied, c.dropped,
                         c.unknown, c.duplicates, c.reordered, c.fcs_errors,
                         f"{rx['frames']:,}" if rx else "-"])
        for cls, totals in _counted_only(fa, a).items():
            rows.append([label, class_label(cls, a.metadata), "-", "-", "-", "-", "-", "-",
                         totals["fcs_errors"], f"{totals['frames']:,}"])
    if not rows:
        return None
    return Table("frames by class (requests paired with replies by sequence number)",
                 ["capture", "class", "requests", "replied", "dropped", "unknown", "dup",
                  "reordered", "FCS err", "rx frames counted on the FPGA"], rows,
                 note="dropped: no reply within the pairing window; unknown: the reply may "
                      "have been lost on the link or fall after the capture; classes counted "
                      "only (not recorded) show the FPGA's totals alone.")


def _counted_only(fa, a):
    """Last COUNTERS totals of receive classes that have counts but no recorded requests."""
    return counted_only_classes(fa, getattr(a.result, "frame_counters", None))


def frames_table(analyses):
    """Markdown of :func:`make_frames_table` (empty string when no capture has frame records)."""
    table = make_frames_table(analyses)
    return table.markdown() if table else ""


def compare_classes(analysis, *, confidence=0.95):
    """Within one capture with frame records: every stage two or more classes share (``node.e2e``,
    ``rx.udp`` ...), each class against the first (lowest-numbered) class that has it, e.g.
    ``hp`` against ``bg``. Returns a list of :class:`GroupComparison` (``other``/``base`` are the
    class names; the measurement is the stage)."""
    from latscope.analysis.compare import compare_samples  # why: scipy, only for comparisons
    fa = getattr(analysis.result, "frames", None)
    if fa is None:
        return []
    ns = 1e9 / fa.tick_hz
    stages = {}
    for cls, c in sorted(fa.classes.items()):
        for stage, (_, ticks) in c.samples.items():
            if len(ticks) >= 2:
                stages.setdefault(stage, []).append((cls, np.asarray(ticks) * ns))
    rows = []
    for stage, members in stages.items():
        (base_cls, base), others = members[0], members[1:]
        for cls, values in others:
            rows.append(GroupComparison(
                class_label(cls, analysis.metadata), class_label(base_cls, analysis.metadata),
                stage, stage, compare_samples(base, values, confidence=confidence)))
    return rows


def class_comparison_table(analysis, *, confidence=0.95):
    """:func:`compare_classes` as a :class:`Table` (``None`` with fewer than two classes)."""
    rows = compare_classes(analysis, confidence=confidence)
    if not rows:
        return None
    unit = time_unit([abs(r.comparison.mean_diff_ns) for r in rows])
    return Table(f"classes compared within {analysis.label} ({unit.name}; "
                 f"{confidence:.0%} intervals)", _comparison_headers(unit.name),
                 _comparison_rows(rows, unit), unit=unit.name)


# --- comparisons --------------------------------------------------------------------------------
def compare_analyses(analyses, *, baseline=0, confidence=0.95):
    """Every measurement of every analysis against one baseline analysis.

    Returns
    -------
    list of (label, measurement, Comparison)
    """
    from latscope.analysis.compare import compare_samples  # why: scipy, only for comparisons
    if len(analyses) < 2:
        raise LatscopeError("compare needs at least two captures")
    labels = display_labels(analyses)
    base = analyses[baseline]
    out = []
    for a, label in zip(analyses, labels, strict=True):
        if a is base:
            continue
        for name in common_names([base]):
            if name in a.stats and a.stats[name].n >= 2 and base.stats[name].n >= 2:
                out.append((label, name, compare_samples(base.latencies_ns(name),
                                                         a.latencies_ns(name),
                                                         confidence=confidence)))
    return out


@dataclasses.dataclass
class GroupComparison:
    """One row of a grouped comparison: ``other`` against ``base`` (display labels), measurement
    ``base_name`` of the baseline against ``other_name`` of the other capture."""
    other: str
    base: str
    base_name: str
    other_name: str
    comparison: object

    @property
    def measurement(self):
        return self.base_name if self.base_name == self.other_name else \
            f"{self.other_name} vs {self.base_name}"


def compare_grouped(analyses, *, confidence=0.95, by="group"):
    """Comparisons organised like the captures (:func:`latscope.analysis.grouping.
    comparison_groups`): MACs at equal frame size, sizes within a MAC, the fast track against
    the stack, repeats. ``by="first"``: one group, each capture against the first.

    Returns
    -------
    list of (ComparisonGroup, list of GroupComparison)
    """
    from latscope.analysis.compare import compare_samples  # why: scipy, only for comparisons
    if len(analyses) < 2:
        raise LatscopeError("compare needs at least two captures")
    labels = display_labels(analyses)
    if by == "first":
        groups = [ComparisonGroup(f"each capture against {labels[0]}", "first",
                                  tuple(range(len(analyses))))]
    else:
        groups = comparison_groups(analyses)

    def names_of(i):
        return [n for n, s in analyses[i].stats.items() if s.n >= 2]
    out = []
    for group in groups:
        b = group.members[0]
        base = analyses[b]
        rows = []
        for o in group.members[1:]:
            for base_name, other_name in group.measurement_pairs(names_of):
                rows.append(GroupComparison(
                    labels[o], labels[b], base_name, other_name,
                    compare_samples(base.latencies_ns(base_name),
                                    analyses[o].latencies_ns(other_name),
                                    confidence=confidence)))
        if rows:
            out.append((group, rows))
    return out


def _comparison_rows(rows, unit):
    out = []
    for r in rows:
        c = r.comparison
        row = [f"{r.other} − {r.base}", r.measurement,
               f"{unit.fmt(c.mean_diff_ns)} [{unit.fmt(c.mean_lower_ns)}, "
               f"{unit.fmt(c.mean_upper_ns)}]"]
        for p in (50.0, 99.0, 99.9):
            q = c.percentiles[p]
            row.append(f"{unit.fmt(q.diff_ns)} [{unit.fmt(q.lower_ns)}, {unit.fmt(q.upper_ns)}]")
        p = f"{c.p_value:.2g}" if c.p_value > 0 else "<1e-300"
        row += [p, f"{c.prob_superiority:.3f}", f"{c.cliffs_delta:+.3f}"]
        out.append(row)
    return out


def _comparison_headers(u):
    return ["comparison", "measurement", f"Δmean {u} [95% CI]", f"Δp50 {u} [95% CI]",
            f"Δp99 {u} [95% CI]", f"Δp99.9 {u} [95% CI]", "Mann-Whitney p",
            "P(other > base)", "Cliff's δ"]


def grouped_comparison_tables(grouped):
    """One :class:`Table` per group of :func:`compare_grouped`, titled by the group."""
    tables = []
    for group, rows in grouped:
        unit = time_unit([r.comparison.mean_diff_ns for r in rows])
        base = rows[0].base
        note = ""
        if group.kind == "fast":
            note = ("rx.fast (fast track) is compared with rx.udp (stack): both mark the "
                    "payload reaching the application.")
        tables.append(Table(f"{group.title}: differences against {base} ({unit.name}; "
                            f"95 % intervals)", _comparison_headers(unit.name),
                            _comparison_rows(rows, unit), unit.name, note))
    return tables


def comparison_table(comparisons, base_label):
    """Markdown table of :func:`compare_analyses` output (differences; unit in the headers)."""
    rows = [GroupComparison(label, base_label, name, name, c) for label, name, c in comparisons]
    unit = time_unit([r.comparison.mean_diff_ns for r in rows])
    return Table("", _comparison_headers(unit.name), _comparison_rows(rows, unit),
                 unit.name).markdown(title=False)


# --- the paper's Table I next to ours -----------------------------------------------------------
def paper_table(analyses, labels=None):
    """For captures of the shipped paper profiles: the paper's Table I x̄ ± 3σ next to ours, or
    ``None`` when no capture comes from such a profile. The note says why 3σ differs. The
    paper's figures are reference data (:mod:`latscope.analysis.report.paper`)."""
    labels = labels or display_labels(analyses)
    rows, tails = [], {}
    for a, label in zip(analyses, labels, strict=True):
        reference = reference_for(a.metadata)
        if reference is None:
            continue
        for tail in reference.tails:
            tails[tail[0]] = tail
        for name, (mean_us, three_sigma_us) in reference.stages.items():
            s = a.stats.get(name)
            if s is None or not s.n:
                continue
            rows.append([label, name, f"{mean_us:.2f} ± {three_sigma_us:.2f}",
                         f"{s.mean_ns / 1e3:.2f} ± {s.three_sigma_ns / 1e3:.2f}",
                         _signed(s.mean_ns / 1e3 - mean_us, 3),
                         US.fmt(s.quantiles[50.0].value_ns), US.fmt(s.quantiles[99.9].value_ns),
                         US.fmt(s.max_ns), f"{s.n:,}"])
    if not rows:
        return None
    tail_text = "; ".join(f"{name}: probability {probability:g} per packet, "
                          f"+{min_us:g} µs + Exponential(mean {mean_extra_us:g} µs)"
                          for name, probability, min_us, mean_extra_us in tails.values())
    note = ("Each profile sets the body of every stage to the paper's mean and 3σ (512 samples "
            "per cell). Our 3σ is larger because the profiles also model rare tails the paper's "
            f"512 samples would rarely contain ({tail_text}): a tail of probability p adds "
            "about p·(delay)² to the variance, so a few slow packets widen 3σ while mean and "
            "median stay at the paper's values. The percentiles show the body and the tail "
            "separately.")
    return Table("the paper's Table I next to ours (µs; x̄ ± 3σ; the profiles are built from "
                 "the paper's x̄ and 3σ, so the means agree by construction)",
                 ["configuration", "measurement", "paper x̄ ± 3σ", "ours x̄ ± 3σ", "Δmean",
                  "ours p50", "ours p99.9", "ours max", "n"], rows, "µs", note)


# --- sizes and stages ---------------------------------------------------------------------------
def size_fits(analyses, *, confidence=0.95):
    """Packet-size regressions per configuration family and measurement.

    Returns
    -------
    list of (family, measurement, SizeFit)
    """
    from latscope.analysis.compare import size_regression  # why: scipy, only for regressions
    families = {}
    for a in analyses:
        if a.size is None:
            raise LatscopeError(f"{a.path or a.label}: the capture does not state its frame size "
                                f"(metadata 'frame_bytes'), so it cannot join a size regression")
        families.setdefault(family(a), []).append(a)
    out = []
    for fam, members in families.items():
        if len({m.size for m in members}) < 2:
            continue
        for name in common_names(members):
            xs, ys = [], []
            for m in members:
                if name in m.stats and m.stats[name].n:
                    lat = m.latencies_ns(name)
                    xs.append(np.full(len(lat), m.size))
                    ys.append(lat)
            if len({int(x[0]) for x in xs}) >= 2:
                out.append((fam, name, size_regression(np.concatenate(xs), np.concatenate(ys),
                                                       confidence=confidence)))
    if not out:
        raise LatscopeError("no configuration has captures at two or more frame sizes")
    return out


def make_size_table(fits):
    """:class:`Table` of :func:`size_fits` output (see :func:`size_table`)."""
    unit = time_unit([f.fixed_ns for _, _, f in fits])
    rows = []
    for fam, name, f in fits:
        if f.per_byte_lower_ns <= 0:       # the interval holds 0: no per-byte cost to invert
            bw = "no size dependence"
        else:
            bw = f"{f.bandwidth_mb_s:.1f} [{_num(f.bandwidth_lower_mb_s)}, " \
                 f"{_num(f.bandwidth_upper_mb_s)}]"
        rows.append([fam, name, ",".join(map(str, f.sizes)), f"{f.n:,}",
                     f"{unit.fmt(f.fixed_ns)} [{unit.fmt(f.fixed_lower_ns)}, "
                     f"{unit.fmt(f.fixed_upper_ns)}]",
                     f"{f.per_byte_ns:.3f} [{f.per_byte_lower_ns:.3f}, "
                     f"{f.per_byte_upper_ns:.3f}]", bw, f"{f.r_squared:.3f}"])
    return Table(f"latency = fixed + per-byte cost × frame size (fixed cost in {unit.name}; "
                 f"95 % intervals)",
                 ["configuration", "measurement", "sizes (B)", "n",
                  f"fixed cost {unit.name} [95% CI]", "per-byte ns/B [95% CI]",
                  "bandwidth MB/s [95% CI]", "R²"], rows, unit.name)


def size_table(fits):
    """Markdown table of :func:`size_fits` output."""
    return make_size_table(fits).markdown(title=False)


def _signed(value, decimals):
    """``+0.012`` / ``-0.004``; a value that rounds to zero prints as ``0.000`` (no sign)."""
    text = f"{value:+.{decimals}f}"
    return text[1:] if float(text) == 0 else text


def _num(v):
    return "-" if v is None else f"{v:.1f}"


def make_stage_table(analyses, labels=None):
    """:class:`Table` of every stage difference per configuration, or ``None`` when there are
    none (see :func:`stage_table`)."""
    labels = labels or display_labels(analyses)
    unit = time_unit([s.mean_ns for a in analyses for s in a.stages.values() if s.n])
    rows = []
    for a, label in zip(analyses, labels, strict=True):
        for name, s in a.stages.items():
            if s.n:
                rows.append([label, name, f"{s.n:,}", unit.fmt(s.mean_ns),
                             unit.fmt(s.three_sigma_ns), unit.fmt(s.quantiles[50.0].value_ns),
                             unit.fmt(s.quantiles[99.0].value_ns)])
    if not rows:
        return None
    u = unit.name
    return Table(f"stage differences on the same packet ({u})",
                 ["configuration", "stage", "n", f"mean {u}", f"3σ {u}", f"p50 {u}",
                  f"p99 {u}"], rows, u)


def stage_table(analyses):
    """Markdown table of every stage difference per configuration (unit in the headers)."""
    table = make_stage_table(analyses)
    return table.markdown(title=False) if table else \
        "No stage differences defined for these captures."


# --- figures (for notebooks; the report draws the same through report.figures) -----------------
def _figure_input(analyses):
    return (display_labels(analyses), [family(a) for a in analyses],
            [is_simulated(a.metadata) for a in analyses])


def _one_figure(analyses, name, kind):
    labels, groups, simulated = _figure_input(analyses)
    for _stem, k, data, _ in figures.figure_jobs(analyses, labels, [name], groups, simulated):
        if k == kind:
            return figures.draw(k, data)
    raise LatscopeError(f"no capture has measurement {name!r}")


def plot_histograms(analyses, name):
    """PNG: log-log histogram of one measurement per capture (empty bins not drawn)."""
    return _one_figure(analyses, name, "histogram")


def plot_spectrum(analyses, name):
    """PNG: latency against percentile, x = 1/(1-p) on a log scale (HdrHistogram's view)."""
    return _one_figure(analyses, name, "spectrum")


def plot_series(analyses, name):
    """PNG: windowed mean latency over capture time (drift, warm-up)."""
    return _one_figure(analyses, name, "series")


def plot_distributions(analyses, name):
    """PNG: percentiles with their 95 % intervals per capture."""
    return _one_figure(analyses, name, "percentiles")


def waterfall_data(analyses):
    """What the waterfall figure draws: per capture, the receive path's mean increments."""
    from latscope.analysis.compare import waterfall  # why: scipy, only for this figure
    labels, _, simulated = _figure_input(analyses)
    rows = []
    for a in analyses:
        rx = {k: s for k, s in a.stats.items() if k.startswith("rx.") and s.n}
        rows.append(waterfall(rx))
    return {"labels": labels, "rows": rows, "simulated": any(simulated)}


def plot_waterfall(analyses):
    """PNG: the receive path's stages (mean increments) per capture."""
    return figures.draw("waterfall", waterfall_data(analyses))


def size_data(analyses, fits):
    """What the size figure draws: per fit, the members' sizes and means and the fitted line."""
    _, _, simulated = _figure_input(analyses)
    out = []
    for fam, name, f in fits:
        members = [a for a in analyses if family(a) == fam and name in a.stats
                   and a.stats[name].n]
        out.append((fam, name, [a.size for a in members],
                    [a.stats[name].mean_ns for a in members], f.fixed_ns, f.per_byte_ns))
    return {"fits": out, "simulated": any(simulated)}


def plot_size(analyses, fits):
    """PNG: mean latency against frame size with the fitted line per configuration."""
    return figures.draw("size", size_data(analyses, fits))
