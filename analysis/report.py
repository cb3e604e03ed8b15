"""Text tables and the HTML/Markdown report (plots with Matplotlib).

All figures come from the analysis results; this module only formats and draws. The HTML report is
self-contained (images embedded as base64 PNG); the Markdown report links PNG files written next to
it.
"""

import base64
import html
import io
import math
import os

import numpy as np

from latscope import LatscopeError
from latscope.analysis.compare import compare_samples, family_of, size_regression, waterfall
from latscope.analysis.stats import PERCENTILES

__all__ = ["fmt_ns", "stats_table", "table_one", "percentile_table", "comparison_table",
           "size_table", "stage_table", "summary_text", "compare_analyses", "size_fits",
           "write_report"]


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


def _table(headers, rows):
    cells = [list(map(str, headers))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for r in cells[1:]:
        lines.append("| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return "\n".join(lines)


def _ci(q):
    return f"[{fmt_ns(q.lower_ns)}, {fmt_ns(q.upper_ns)}]"


def stats_table(stats):
    """Markdown table of one capture's measurements (µs), percentiles with their intervals."""
    rows = []
    for name, s in stats.items():
        row = [name, s.n, fmt_ns(s.mean_ns), fmt_ns(s.three_sigma_ns), fmt_ns(s.min_ns)]
        for p in (50.0, 99.0, 99.9):
            q = s.quantiles[p]
            row.append(f"{fmt_ns(q.value_ns)} {_ci(q)}")
        row += [fmt_ns(s.max_ns), fmt_ns(s.pdv_ns),
                s.counts.get("missed", 0), s.counts.get("spurious", 0),
                s.counts.get("lost_gap", 0)]
        rows.append(row)
    return _table(["measurement", "n", "mean", "3σ", "min", "p50 [95% CI]", "p99 [95% CI]",
                   "p99.9 [95% CI]", "max", "PDV", "missed", "spurious", "lost-gap"], rows)


def _resolution_note(stats):
    notes = set()
    for s in stats.values():
        text = f"resolution {s.resolution_ns:.3f} ns (1 tick; each latency exact to ±1 tick)"
        if s.method == "histogram":
            text += f"; percentiles from the log-linear histogram (±{s.relative_error:.3%})"
        notes.add(text)
    return "; ".join(sorted(notes))


def table_one(analyses, names=None):
    """The origin paper's Table I form: mean ± 3σ (µs) per configuration and measurement."""
    names = names or _common_names(analyses)
    rows = []
    for a in analyses:
        row = [a.label]
        for name in names:
            s = a.stats.get(name)
            row.append(f"{fmt_ns(s.mean_ns)} ± {fmt_ns(s.three_sigma_ns)}" if s and s.n else "-")
        rows.append(row)
    return _table(["configuration"] + list(names), rows)


def percentile_table(analyses, name):
    """Percentiles of one measurement per configuration, µs, with 95 % intervals."""
    rows = []
    for a in analyses:
        s = a.stats.get(name)
        if not s or not s.n:
            continue
        row = [a.label, s.n, fmt_ns(s.min_ns)]
        for p in PERCENTILES:
            q = s.quantiles[p]
            row.append(f"{fmt_ns(q.value_ns)} {_ci(q)}")
        row.append(fmt_ns(s.max_ns))
        rows.append(row)
    return _table(["configuration", "n", "min"] + [f"p{p:g}" for p in PERCENTILES] + ["max"],
                  rows)


def _common_names(analyses):
    names = []
    for a in analyses:
        for name, s in a.stats.items():
            if s.n and name not in names:
                names.append(name)
    return names


def summary_text(analyses):
    """Table I (mean ± 3σ) plus percentile tables of every measurement, as Markdown text."""
    if not analyses:
        raise LatscopeError("no captures to summarise")
    parts = ["Mean ± 3σ (µs), the origin paper's Table I form:", "", table_one(analyses), ""]
    for name in _common_names(analyses):
        parts += [f"{name}: percentiles (µs) with 95 % distribution-free intervals:", "",
                  percentile_table(analyses, name), ""]
    parts.append(_resolution_note({f"{a.label}/{k}": s for a in analyses
                                   for k, s in a.stats.items()}))
    return "\n".join(parts)


def compare_analyses(analyses, *, baseline=0, confidence=0.95):
    """Every measurement of every analysis against the baseline analysis.

    Returns
    -------
    list of (label, measurement, Comparison)
    """
    if len(analyses) < 2:
        raise LatscopeError("compare needs at least two captures")
    base = analyses[baseline]
    out = []
    for a in analyses:
        if a is base:
            continue
        for name in _common_names([base]):
            if name in a.stats and a.stats[name].n >= 2 and base.stats[name].n >= 2:
                out.append((a.label, name, compare_samples(base.latencies_ns(name),
                                                           a.latencies_ns(name),
                                                           confidence=confidence)))
    return out


def comparison_table(comparisons, base_label):
    """Markdown table of :func:`compare_analyses` output (differences in µs)."""
    rows = []
    for label, name, c in comparisons:
        row = [f"{label} − {base_label}", name,
               f"{fmt_ns(c.mean_diff_ns)} [{fmt_ns(c.mean_lower_ns)}, {fmt_ns(c.mean_upper_ns)}]"]
        for p in (50.0, 99.0, 99.9):
            q = c.percentiles[p]
            row.append(f"{fmt_ns(q.diff_ns)} [{fmt_ns(q.lower_ns)}, {fmt_ns(q.upper_ns)}]")
        p = f"{c.p_value:.2g}" if c.p_value > 0 else "<1e-300"
        row += [p, f"{c.prob_superiority:.3f}", f"{c.cliffs_delta:+.3f}"]
        rows.append(row)
    return _table(["comparison", "measurement", "Δmean [95% CI]", "Δp50", "Δp99", "Δp99.9",
                   "Mann-Whitney p", "P(other>base)", "Cliff's δ"], rows)


def size_fits(analyses, *, confidence=0.95):
    """Packet-size regressions per configuration family and measurement.

    Returns
    -------
    list of (family, measurement, SizeFit)
    """
    families = {}
    for a in analyses:
        if a.size is None:
            raise LatscopeError(f"{a.path or a.label}: the capture does not state its frame size "
                                f"(metadata 'frame_bytes'), so it cannot join a size regression")
        families.setdefault(family_of(a.label, a.size), []).append(a)
    out = []
    for family, members in families.items():
        if len({m.size for m in members}) < 2:
            continue
        for name in _common_names(members):
            xs, ys = [], []
            for m in members:
                if name in m.stats and m.stats[name].n:
                    lat = m.latencies_ns(name)
                    xs.append(np.full(len(lat), m.size))
                    ys.append(lat)
            if len({int(x[0]) for x in xs}) >= 2:
                out.append((family, name, size_regression(np.concatenate(xs), np.concatenate(ys),
                                                          confidence=confidence)))
    if not out:
        raise LatscopeError("no configuration has captures at two or more frame sizes")
    return out


def size_table(fits):
    rows = []
    for family, name, f in fits:
        if f.per_byte_lower_ns <= 0:       # the interval holds 0: no per-byte cost to invert
            bw = "no size dependence"
        else:
            bw = f"{f.bandwidth_mb_s:.1f} [{_num(f.bandwidth_lower_mb_s)}, " \
                 f"{_num(f.bandwidth_upper_mb_s)}]"
        rows.append([family, name, ",".join(map(str, f.sizes)), f.n,
                     f"{fmt_ns(f.fixed_ns)} [{fmt_ns(f.fixed_lower_ns)}, "
                     f"{fmt_ns(f.fixed_upper_ns)}]",
                     f"{f.per_byte_ns:.3f} [{f.per_byte_lower_ns:.3f}, "
                     f"{f.per_byte_upper_ns:.3f}]", bw, f"{f.r_squared:.3f}"])
    return _table(["configuration", "measurement", "sizes (B)", "n", "fixed cost µs [95% CI]",
                   "per-byte ns [95% CI]", "bandwidth MB/s [95% CI]", "R²"], rows)


def _num(v):
    return "-" if v is None else f"{v:.1f}"


# --- figures ------------------------------------------------------------------------------------
def _figure():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _plain_log_ticks(*axes):
    from matplotlib.ticker import NullFormatter
    for ax in axes:
        ax.xaxis.set_minor_formatter(NullFormatter())


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _figure().close(fig)
    return buf.getvalue()


def plot_histograms(analyses, name):
    """Log-scale histogram (log x bins, log counts) of one measurement per configuration."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for a in analyses:
        s = a.stats.get(name)
        if not s or not s.n:
            continue
        low, high, count = s.histogram.nonzero()
        lo_ns, hi_ns = low * s.tick_ns, (high + 1) * s.tick_ns
        edges = np.geomspace(max(lo_ns.min(), s.tick_ns), hi_ns.max(), 80)
        weights, _ = np.histogram((lo_ns + hi_ns) / 2, bins=edges, weights=count)
        ax.stairs(np.maximum(weights, 0.5), edges, label=a.label)
    ax.set(xscale="log", yscale="log", xlabel=f"{name} latency (ns)", ylabel="packets",
           title=f"{name}: histogram (log-log)")
    _plain_log_ticks(ax)
    ax.legend(fontsize=7)
    return _png(fig)


def plot_ccdf(analyses, name):
    """CDF and CCDF (log y) of one measurement per configuration."""
    plt = _figure()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    for a in analyses:
        s = a.stats.get(name)
        if not s or not s.n:
            continue
        low, high, count = s.histogram.nonzero()
        x = (high + 1) * s.tick_ns
        cdf = np.cumsum(count) / s.n
        ax1.step(x, cdf, where="post", label=a.label)
        ccdf = np.maximum(1 - cdf, 0.5 / s.n)
        ax2.step(x, ccdf, where="post", label=a.label)
    ax1.set(xscale="log", xlabel=f"{name} (ns)", ylabel="CDF", title="CDF")
    ax2.set(xscale="log", yscale="log", xlabel=f"{name} (ns)", ylabel="P(latency > x)",
            title="CCDF (tail)")
    _plain_log_ticks(ax1, ax2)
    ax1.legend(fontsize=7)
    return _png(fig)


def plot_series(analyses, name):
    """Windowed mean latency over capture time (drift, warm-up)."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 3))
    for a in analyses:
        s = a.stats.get(name)
        if not s or not s.n or not s.series:
            continue
        ax.plot(s.series["time_s"], s.series["mean_ns"], ".-", ms=3, lw=0.8, label=a.label)
    ax.set(xlabel="capture time (s)", ylabel=f"{name} mean (ns)",
           title=f"{name}: windowed mean over time")
    ax.legend(fontsize=7)
    return _png(fig)


def plot_distributions(analyses, name):
    """Per-configuration percentiles (p50 ... p99.99) with their confidence intervals."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.45 * len(analyses)))
    marks = {50.0: "o", 90.0: "s", 99.0: "^", 99.9: "D", 99.99: "*"}
    labelled = set()
    for i, a in enumerate(analyses):
        s = a.stats.get(name)
        if not s or not s.n:
            continue
        ax.plot([s.min_ns, s.max_ns], [i, i], color="0.7", lw=1)
        for p, m in marks.items():
            q = s.quantiles[p]
            lo = q.lower_ns if q.lower_ns is not None else q.value_ns
            hi = q.upper_ns if q.upper_ns is not None else s.max_ns
            ax.errorbar(q.value_ns, i, xerr=[[q.value_ns - lo], [hi - q.value_ns]], fmt=m,
                        ms=5, capsize=2, color=f"C{list(marks).index(p)}",
                        label=None if p in labelled else f"p{p:g}")
            labelled.add(p)
    ax.set_yticks(range(len(analyses)), [a.label for a in analyses])
    ax.set(xscale="log", xlabel=f"{name} (ns); bars: 95 % CI (to the maximum where the sample "
                                f"has no upper bound)")
    ax.set_title(f"{name}: percentiles with 95 % CIs", pad=26)
    _plain_log_ticks(ax)
    ax.legend(fontsize=7, ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.08))
    return _png(fig)


def plot_waterfall(analyses):
    """Stage waterfall of the receive path per configuration (mean increments)."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.45 * len(analyses)))
    colours = {}
    for i, a in enumerate(analyses):
        rx = {k: s for k, s in a.stats.items() if k.startswith("rx.") and s.n}
        for name, start, width in waterfall(rx):
            colour = colours.setdefault(name, f"C{len(colours)}")     # one colour per stage
            ax.barh(i, width / 1000, left=start / 1000, edgecolor="k", lw=0.5, color=colour)
            ax.text((start + width / 2) / 1000, i, name, ha="center", va="center", fontsize=6)
    ax.set_yticks(range(len(analyses)), [a.label for a in analyses])
    ax.set(xlabel="mean time after RX_DV falls (µs)", title="receive path: stage waterfall")
    return _png(fig)


def plot_size(analyses, fits):
    """Latency against frame size with the fitted line per configuration."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 4))
    for family, name, f in fits:
        members = [a for a in analyses if family_of(a.label, a.size) == family]
        xs = [a.size for a in members if name in a.stats]
        ys = [a.stats[name].mean_ns / 1000 for a in members if name in a.stats]
        line = ax.plot(xs, ys, "o", label=f"{family} {name}")[0]
        grid = np.array([min(f.sizes), max(f.sizes)])
        ax.plot(grid, (f.fixed_ns + f.per_byte_ns * grid) / 1000, "-", color=line.get_color(),
                lw=0.8)
    ax.set(xlabel="frame size (bytes)", ylabel="mean latency (µs)",
           title="packet-size regression: fixed + per-byte cost")
    ax.legend(fontsize=6)
    return _png(fig)


def write_report(analyses, out_dir):
    """Write ``report.html`` (self-contained) and ``report.md`` (+ PNGs) into ``out_dir``.

    Returns
    -------
    list of str
        The files written.
    """
    if not analyses:
        raise LatscopeError("no captures to report on")
    os.makedirs(out_dir, exist_ok=True)
    sections = []     # (title, markdown text or None, [(figure name, png bytes)])
    sections.append(("Summary: mean ± 3σ (µs), Table I form", table_one(analyses), []))
    for name in _common_names(analyses):
        figs = [(f"{name}-hist", plot_histograms(analyses, name)),
                (f"{name}-cdf", plot_ccdf(analyses, name)),
                (f"{name}-series", plot_series(analyses, name)),
                (f"{name}-percentiles", plot_distributions(analyses, name))]
        sections.append((f"{name}: percentiles (µs) with 95 % intervals",
                         percentile_table(analyses, name), figs))
    sections.append(("Receive path: stage waterfall", stage_table(analyses),
                     [("waterfall", plot_waterfall(analyses))]))
    if len(analyses) >= 2 and all(a.result.packets is not None for a in analyses):
        comps = compare_analyses(analyses)
        sections.append((f"Differences against {analyses[0].label}",
                         comparison_table(comps, analyses[0].label), []))
    sized = [a for a in analyses if a.size is not None and a.result.packets is not None]
    if len({a.size for a in sized}) >= 2:
        try:
            fits = size_fits(sized)
        except LatscopeError:
            fits = None
        if fits:
            sections.append(("Packet-size regression", size_table(fits),
                             [("size", plot_size(sized, fits))]))
    from latscope.analysis.api import integrity_note  # issue 9 item 2 (damaged inputs)
    for a in analyses:
        warning = integrity_note(a)
        sections.append((f"{a.label}: every figure", (f"WARNING: {warning}\n\n" if warning
                                                      else "") + _detail_text(a), []))
    note = _resolution_note({f"{a.label}/{k}": s for a in analyses for k, s in a.stats.items()})
    note += "".join(f" WARNING: {w}." for w in map(integrity_note, analyses) if w)
    md = ["# latscope report", "", f"Captures: {', '.join(a.label for a in analyses)}.", "",
          note, ""]
    body = [f"<h1>latscope report</h1><p>Captures: "
            f"{html.escape(', '.join(a.label for a in analyses))}.</p>"
            f"<p>{html.escape(note)}</p>"]
    written = []
    for title, text, figs in sections:
        md += [f"## {title}", ""]
        body.append(f"<h2>{html.escape(title)}</h2>")
        if text:
            md += [text, ""]
            body.append(f"<pre>{html.escape(text)}</pre>")
        for fname, png in figs:
            safe = fname.replace("/", "_")
            path = os.path.join(out_dir, f"{safe}.png")
            with open(path, "wb") as f:
                f.write(png)
            written.append(path)
            md += [f"![{fname}]({safe}.png)", ""]
            body.append(f'<img alt="{html.escape(fname)}" src="data:image/png;base64,'
                        f'{base64.b64encode(png).decode()}">')
    md_path = os.path.join(out_dir, "report.md")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    html_path = os.path.join(out_dir, "report.html")
    with open(html_path, "w", encoding="utf-8") as f:
        f.write("<!DOCTYPE html><html><head><meta charset='utf-8'><title>latscope report</title>"
                "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
                "pre{font-size:12px;overflow-x:auto}img{max-width:100%}</style></head><body>"
                + "\n".join(body) + "</body></html>")
    return [html_path, md_path] + written


def stage_table(analyses):
    """Markdown table of every stage difference (µs) per configuration."""
    rows = []
    for a in analyses:
        for name, s in a.stages.items():
            if s.n:
                rows.append([a.label, name, s.n, fmt_ns(s.mean_ns), fmt_ns(s.three_sigma_ns),
                             fmt_ns(s.quantiles[50.0].value_ns),
                             fmt_ns(s.quantiles[99.0].value_ns)])
    if not rows:
        return "No stage differences defined for these captures."
    return _table(["configuration", "stage", "n", "mean", "3σ", "p50", "p99"], rows)


def _detail_text(a):
    lines = [stats_table(a.stats), ""]
    for name, s in a.stats.items():
        if not s.n:
            continue
        bits = [f"{name}: IQR {fmt_ns(s.iqr_ns, 'ns')} ns, MAD {fmt_ns(s.mad_ns, 'ns')} ns, "
                f"peak-to-peak {fmt_ns(s.peak_to_peak_ns, 'ns')} ns"]
        if s.drift:
            bits.append(f"drift {s.drift.slope_ns_per_s:.3g} ns/s "
                        f"[{s.drift.lower_ns_per_s:.3g}, {s.drift.upper_ns_per_s:.3g}]")
        if s.warmup:
            bits.append(f"warm-up {s.warmup.packets} packets")
        if s.worst:
            bits.append("worst: " + ", ".join(f"{v / 1000:.3f} µs at {t:.6f} s"
                                              for t, v in s.worst[:3]))
        lines.append("; ".join(bits))
    for name, why in a.result.unavailable.items():
        lines.append(f"{name}: not computed ({why})")
    return "\n".join(lines)
