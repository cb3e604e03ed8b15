"""The report's figures, drawn with Matplotlib from plain data (no analysis objects), so that they
can be drawn in worker processes.

Every figure follows the same rules: one time unit per figure chosen for its data
(:func:`latscope.analysis.units.time_unit`); every series differs from every other in colour *and*
line style (and marker, past 20 series); legends sit outside the axes, never over data or titles;
with many series the figure becomes small multiples, one panel per configuration family; a figure
made from simulated-bench captures says SIMULATED in its corner.

The ``*_data`` functions (pure) extract what a figure needs from :class:`~latscope.analysis.api.
Analysis` objects; ``draw(kind, data)`` returns PNG bytes.
"""

import io
import textwrap

import numpy as np

from latscope.analysis.report.labels import on_first_screen
from latscope.analysis.stats import n_required
from latscope.analysis.units import time_unit

__all__ = ["series_style", "figure_jobs", "draw", "SPECTRUM_PERCENTILES", "BODY_PERCENTS",
           "histogram_range", "dots_data", "supported_x", "bounded"]

#: The histogram's x range spans these percentiles of its series (the body); what lies beyond
#: is counted in a note on the panel, so one outlier never sets the range.
BODY_PERCENTS = (0.1, 99.9)

#: Percentiles marked on the percentile-spectrum plot's x axis.
SPECTRUM_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99, 99.999)

#: Okabe and Ito's colour-blind-safe palette (less its yellow, too pale on white), then two of
#: Paul Tol's muted colours; every series also differs in line style, so greyscale still reads.
_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
            "#999999", "#882255", "#44AA99"]
_LINESTYLES = ["-", "--", "-.", ":"]
_MARKERS = [None, "o", "s", "^", "D", "v"]
#: Series in one panel before a figure turns into small multiples (one panel per family).
MAX_SERIES_PER_PANEL = 6


def series_style(i):
    """Colour, line style and marker of series ``i``: consecutive series differ in colour and line
    style; the (colour, style) pair repeats only after 20 series, then the marker changes.

    >>> [series_style(i)[1] for i in range(5)]
    ['-', '--', '-.', ':', '-']
    >>> len({series_style(i) for i in range(100)})
    100
    """
    return (_COLOURS[i % len(_COLOURS)], _LINESTYLES[i % len(_LINESTYLES)],
            _MARKERS[(i // 20) % len(_MARKERS)] if i < 20 * len(_MARKERS) else
            f"${i}$")


# --- data extraction (pure) ---------------------------------------------------------------------
def _histogram_data(a, name):
    s = a.stats[name]
    low, high, count = s.histogram.nonzero()
    return {"low_ns": low * s.tick_ns, "high_ns": (high + 1) * s.tick_ns, "count": count}


def supported_x(n, percents=SPECTRUM_PERCENTILES):
    """The spectrum's x = 1/(1-p) of the highest of ``percents`` whose two-sided 95 % interval
    ``n`` values bound (:func:`latscope.analysis.stats.n_required`), or 1 when none: beyond it
    the line is drawn faint, as the sample no longer supports those percentiles.

    >>> [round(supported_x(n)) for n in (3, 10, 1200, 5000)]     # none, p50, p99, p99.9
    [1, 2, 100, 1000]
    """
    ok = [p for p in percents if n >= n_required(p / 100)]
    return 1 / (1 - max(ok) / 100) if ok else 1.0


def _spectrum_data(a, name, points=400):
    """Latency at percentile p for p from 0 to (n - 1/2)/n, log-spaced in 1/(1-p)."""
    s = a.stats[name]
    try:
        values = np.sort(a.latencies_ns(name))
    except Exception:               # no per-packet records: from the histogram's buckets
        values = None
    if values is not None and len(values):
        n = len(values)
        ranks = np.unique(np.round(n - np.geomspace(n, 1, points)).astype(np.int64))
        ranks = np.clip(ranks, 0, n - 1)
        p = (ranks + 0.5) / n
        return {"x": 1 / (1 - p), "value_ns": values[ranks], "n": n,
                "supported_x": supported_x(n)}
    low, high, count = s.histogram.nonzero()
    cum = np.cumsum(count) - count / 2
    p = cum / s.n
    return {"x": 1 / (1 - p), "value_ns": (high + 1) * s.tick_ns, "n": s.n,
            "supported_x": supported_x(s.n)}


def dots_data(rows, name, simulated):
    """Data for a sorted dot-and-interval figure: ``rows`` is ``[(label, stats)]`` of one
    measurement (or ``[(label, stats, group)]`` across several); within each group rows are
    sorted by p50, fastest at the top. Each row keeps p50 and p99 with their intervals."""
    out = []
    for row in rows:
        label, s = row[0], row[1]
        group = row[2] if len(row) > 2 else name
        q = {p: (s.quantiles[p].value_ns, s.quantiles[p].lower_ns, s.quantiles[p].upper_ns)
             for p in (50.0, 99.0) if p in s.quantiles}
        out.append({"label": label, "group": group, "q": q, "n": s.n})
    groups = list(dict.fromkeys(r["group"] for r in out))
    out.sort(key=lambda r: (groups.index(r["group"]), r["q"].get(50.0, (np.inf,))[0]))
    return {"name": name, "rows": out, "simulated": simulated}


def histogram_range(series, body=BODY_PERCENTS):
    """``(low_ns, high_ns)``: the x range of a histogram of ``series`` (dicts with ``low_ns``,
    ``high_ns``, ``count`` per bucket), spanning the lowest ``body[0]`` percentile to the highest
    ``body[1]`` percentile over the series, so no fewer than 0.1 % of any series' packets set it.

    >>> s = {"low_ns": np.array([100., 200., 40000.]), "high_ns": np.array([101., 201., 40001.]),
    ...      "count": np.array([600, 600, 1])}
    >>> histogram_range([s])
    (100.0, 201.0)
    """
    lows, highs = [], []
    for s in series:
        cum = np.cumsum(s["count"])
        total = cum[-1]
        k_lo = int(np.searchsorted(cum, total * body[0] / 100, side="left"))
        k_hi = int(np.searchsorted(cum, total * body[1] / 100, side="left"))
        lows.append(float(s["low_ns"][k_lo]))
        highs.append(float(s["high_ns"][min(k_hi, len(cum) - 1)]))
    return min(lows), max(highs)


def _series_data(a, name):
    s = a.stats[name]
    if not s.series:
        return None
    return {"time_s": np.asarray(s.series["time_s"]), "mean_ns": np.asarray(s.series["mean_ns"])}


def figure_jobs(analyses, labels, names, groups, simulated):
    """The report's figures as ``[(file stem, kind, data, alt text)]``, data ready for
    :func:`draw`. ``labels``: display label per analysis; ``groups``: family per analysis (small
    multiples); ``simulated``: a figure made from any simulated capture says so."""
    jobs = []
    for name in names:
        measured = [i for i, a in enumerate(analyses) if name in a.stats and a.stats[name].n]
        # a frame capture's plain stage pairs by order across classes: its table row stays,
        # its per-class stage is drawn instead
        by_order = [i for i in measured if not on_first_screen(analyses[i], name)]
        # a sample too small to bound its median has no shape to draw (its table row stays)
        members = [i for i in measured if bounded(analyses[i].stats[name]) and
                   i not in by_order]
        if not members:
            continue
        left = [f"{labels[i]} ({analyses[i].stats[name].n:,} packets)" for i in measured
                if i not in members and i not in by_order]
        left_text = (f"; left off, too few packets to bound the median: {', '.join(left)}"
                     if left else "")
        if by_order:
            left_text += (f"; left off, paired by order across classes (frame captures: see "
                          f"their per-class stages): {', '.join(labels[i] for i in by_order)}")
        sim = any(simulated[i] for i in members)
        base = {"name": name, "labels": [labels[i] for i in members],
                "panels": [groups[i] for i in members], "simulated": sim}
        safe = name.replace("/", "_")
        jobs.append((f"{safe}-hist", "histogram",
                     {**base, "series": [_histogram_data(analyses[i], name) for i in members]},
                     f"{name}: latency histogram per capture over the body of the data "
                     f"(p{BODY_PERCENTS[0]:g} to p{BODY_PERCENTS[1]:g}; packets beyond are "
                     f"counted on each panel){left_text}"))
        jobs.append((f"{safe}-spectrum", "spectrum",
                     {**base, "series": [_spectrum_data(analyses[i], name) for i in members]},
                     f"{name}: latency by percentile, x = 1/(1-p) on a log scale, one latency "
                     f"scale shared by every panel{left_text}"))
        jobs.append((f"{safe}-percentiles", "dots",
                     dots_data([(labels[i], analyses[i].stats[name]) for i in members], name,
                               sim),
                     f"{name}: p50 and p99 per capture with 95 % confidence intervals, sorted "
                     f"fastest first{left_text}"))
        series = [_series_data(analyses[i], name) for i in members]
        if any(x is not None for x in series):
            jobs.append((f"{safe}-series", "series", {**base, "series": series},
                         f"{name}: windowed mean latency over capture time{left_text}"))
    return jobs


def bounded(stats):
    """Whether ``stats`` (a :class:`~latscope.analysis.stats.LatencyStats`) has a two-sided
    interval at p50: the least a capture must have to be drawn, or ranked on the first screen."""
    q = stats.quantiles.get(50.0) if stats.n else None
    return q is not None and q.lower_ns is not None and q.upper_ns is not None


# --- drawing ------------------------------------------------------------------------------------
def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _png(fig):
    buf = io.BytesIO()
    # constrained layout already fits titles and outside legends: no second "tight" draw
    fig.savefig(buf, format="png", dpi=96)
    _plt().close(fig)
    return buf.getvalue()


def _mark_simulated(fig, simulated):
    if simulated:
        fig.text(0.995, 0.995, "SIMULATED", ha="right", va="top", fontsize=10, weight="bold",
                 color="#b00020", transform=fig.transFigure)


def _panels(data):
    """Small multiples: ``[(panel title or None, [series index])]``."""
    n = len(data["labels"])
    if n <= MAX_SERIES_PER_PANEL:
        return [(None, list(range(n)))]
    order = list(dict.fromkeys(data["panels"]))
    return [(p, [i for i in range(n) if data["panels"][i] == p]) for p in order]


def _legend(ax, ncol=1, above=False):
    """Legend outside the axes: to the right, or (small multiples) above the panel."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if above:
        ax.legend(handles, labels, fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.01),
                  borderaxespad=0, frameon=False, ncol=min(3, len(handles)))
    else:
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0, frameon=False, ncol=ncol)


def _figure(data, height=2.4, width=8.5, sharex=True):
    """A figure with one axes, or small multiples on a grid of two columns (one panel per
    family) when there are more than MAX_SERIES_PER_PANEL series.
    Returns ``fig, [(ax, panel title, series indices)], legend_above``."""
    plt = _plt()
    panels = _panels(data)
    if len(panels) == 1:
        fig, ax = plt.subplots(figsize=(width, 0.6 + height), layout="constrained")
        return fig, [(ax, panels[0][0], panels[0][1])], False
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(11.0, 0.6 + (height - 0.2) * rows),
                             squeeze=False, sharex=sharex, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    return fig, [(ax, title, idx) for ax, (title, idx) in zip(flat, panels, strict=False)], True


def _plain_log_axis(axis):
    """Log-axis ticks at 1, 2, 3, 5 x 10^k labelled as plain numbers (no 10^k notation)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    # no minor ticks: each costs a text layout pass, and the labelled ones suffice
    axis.set_minor_locator(NullLocator())


def _xlabel(panels, text):
    """The x label: under the axes, or once under a grid of small multiples."""
    if len(panels) == 1:
        panels[0][0].set_xlabel(text, fontsize=8)
        return
    for ax, _, _ in panels:
        ax.xaxis.set_tick_params(labelbottom=True)
    panels[0][0].figure.supxlabel(text, fontsize=8)


def _style_kwargs(i):
    colour, style, marker = series_style(i)
    return {"color": colour, "linestyle": style, "marker": marker, "markersize": 3}


def step_path(low, high, count):
    """x, y of a step outline over non-empty bins only: NaN breaks the line at empty bins."""
    xs, ys = [], []
    for k in range(len(count)):
        if k and low[k] > high[k - 1] * (1 + 1e-9):
            xs.append(np.nan)
            ys.append(np.nan)
        xs += [low[k], high[k]]
        ys += [count[k], count[k]]
    return np.array(xs, dtype=float), np.array(ys, dtype=float)


def _draw_histogram(data, per_decade=100):
    from matplotlib.ticker import NullLocator
    body_lo, body_hi = histogram_range(data["series"])
    unit = time_unit([body_lo, body_hi])
    lo = min(max(s["low_ns"].min(), 1e-3) for s in data["series"])
    hi = max(s["high_ns"].max() for s in data["series"]) * 1.0001
    # one set of log-spaced bins for every series (shapes comparable), mass kept per bin
    edges = np.geomspace(lo, hi, max(2, int(np.log10(hi / lo) * per_decade) + 2))
    fig, panels, above = _figure(data, sharex=False)
    notes = []              # per panel: the packets beyond its range, said under its axis
    for ax, _title, idx in panels:
        for i in idx:
            s = data["series"][i]
            weights, _ = np.histogram((s["low_ns"] + s["high_ns"]) / 2, bins=edges,
                                      weights=s["count"])
            keep = np.flatnonzero(weights > 0)
            x, y = step_path(edges[keep], edges[keep + 1], weights[keep])
            kw = _style_kwargs(i)
            kw["marker"] = None
            line = ax.plot(unit.scale(x), y, label=data["labels"][i], lw=1.3, **kw)[0]
            # a bin with empty neighbours is a short flat segment: mark it so it shows
            alone = keep[(~np.isin(keep - 1, keep)) & (~np.isin(keep + 1, keep))]
            if len(alone):
                centre = np.sqrt(edges[alone] * edges[alone + 1])
                ax.plot(unit.scale(centre), weights[alone], linestyle="none", marker="o",
                        ms=3.5, color=line.get_color(), mfc="none")
        ax.set(xscale="log", yscale="log", ylabel="packets per bin")
        ax.set_ylim(bottom=0.6)            # bins holding one packet stay above the axis line
        # each panel (family) spans its own series' body: one family's tens of µs do not
        # squeeze another's body; the unit stays the figure's
        panel_lo, panel_hi = histogram_range([data["series"][i] for i in idx])
        x_lo, x_hi = panel_lo / 1.05, panel_hi * 1.05
        ax.set_xlim(unit.scale(x_lo), unit.scale(x_hi))
        beyond = []
        for i in idx:
            s = data["series"][i]
            above_n = int(s["count"][s["low_ns"] > x_hi].sum())
            if above_n:
                beyond.append(f"{data['labels'][i]}: {above_n:,} beyond, max "
                              f"{unit.fmt(s['high_ns'].max())} {unit.name}")
        notes.append("; ".join(beyond))
        if x_hi / x_lo < 3:        # a narrow body: a linear axis gets readable ticks
            ax.set_xscale("linear")
            ax.set_xlim(unit.scale(x_lo), unit.scale(x_hi))
        else:
            _plain_log_axis(ax.xaxis)
        ax.yaxis.set_minor_locator(NullLocator())
        _legend(ax, above=above)
    label = (f"{data['name']} latency ({unit.name}), each panel p{BODY_PERCENTS[0]:g} to "
             f"p{BODY_PERCENTS[1]:g} of its data (log scale where it spans a factor of 3 or "
             f"more); {per_decade} bins per decade; circles: isolated bins")
    if len(panels) == 1:
        _xlabel(panels, label + (f"\nbeyond the range: {notes[0]}" if notes[0] else ""))
    else:
        _xlabel(panels, label)
        for (ax, _t, _i), note in zip(panels, notes, strict=True):
            if note:
                # wrapped: a note stays within its panel's width
                ax.set_xlabel("\n".join(textwrap.wrap(f"beyond the range: {note}", 90)),
                              fontsize=6.5, color="0.25")
    fig.suptitle(f"{data['name']}: histogram (empty bins not drawn)", fontsize=10, x=0.01,
                 ha="left")
    _mark_simulated(fig, data["simulated"])
    return _png(fig)


def _draw_spectrum(data):
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter, NullLocator
    unit = time_unit([np.median(s["value_ns"]) for s in data["series"]])
    fig, panels, above = _figure(data)
    top = max(s["x"].max() for s in data["series"])
    y_lo = unit.scale(min(max(s["value_ns"].min(), 1e-3) for s in data["series"]))
    y_hi = unit.scale(max(s["value_ns"].max() for s in data["series"]))
    ticks = [p for p in SPECTRUM_PERCENTILES if 1 / (1 - p / 100) <= top * 1.5]
    for ax, _title, idx in panels:
        for i in idx:
            s = data["series"][i]
            kw = _style_kwargs(i)
            kw["marker"] = None
            inside = s["x"] <= s["supported_x"]
            # solid as far as the sample bounds the percentiles, faint beyond
            line = ax.plot(s["x"][inside], unit.scale(s["value_ns"][inside]),
                           label=f"{data['labels'][i]} (n={s['n']:,})", lw=1.3,
                           drawstyle="steps-post", **kw)[0]
            tail = np.flatnonzero(~inside)
            if len(tail):
                k = max(tail[0] - 1, 0)       # join the faint part to the solid one
                ax.plot(s["x"][k:], unit.scale(s["value_ns"][k:]), lw=0.9, alpha=0.35,
                        drawstyle="steps-post", color=line.get_color(),
                        linestyle=line.get_linestyle())
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator([1 / (1 - p / 100) for p in ticks]))
        ax.xaxis.set_major_formatter(FixedFormatter([f"{p:g}%" for p in ticks]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="major", color="0.88", lw=0.6)
        # one log latency scale on every panel, so panels compare by eye and a long tail
        # does not flatten the body
        ax.set_yscale("log")
        ax.set_ylim(y_lo / 1.1, y_hi * 1.1)
        _plain_log_axis(ax.yaxis)
        ax.set_ylabel(f"latency ({unit.name}), log")
        _legend(ax, above=above)
    _xlabel(panels, "percentile (x = 1/(1-p), log scale: each step right is a tenfold rarer "
                    "packet); one latency scale on every panel; faint: percentiles the sample "
                    "does not bound")
    fig.suptitle(f"{data['name']}: percentile spectrum (the tail, as HdrHistogram plots it)",
                 fontsize=10, x=0.01, ha="left")
    _mark_simulated(fig, data["simulated"])
    return _png(fig)


def _draw_dots(data):
    """Sorted dot-and-interval: one row per capture (grouped by measurement where several),
    p50 and p99 in two panels on one unit, each dot with its 95 % interval; an open interval
    (no upper bound) is drawn as an arrow to the panel's edge."""
    plt = _plt()
    rows = data["rows"]
    n = len(rows)
    values = [v for r in rows for q in r["q"].values() for v in q if v is not None]
    unit = time_unit([r["q"][50.0][0] for r in rows if 50.0 in r["q"]] or values)
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 0.9 + 0.24 * n), sharey=True,
                             layout="constrained")
    groups = list(dict.fromkeys(r["group"] for r in rows))
    positive = [v for v in values if v > 0]
    wide = bool(positive) and max(positive) > 5 * min(positive)
    for ax, p in zip(axes, (50.0, 99.0), strict=True):
        for k, r in enumerate(rows):
            y = n - 1 - k
            if p not in r["q"]:
                continue
            v, lo, hi = r["q"][p]
            colour, style, _ = series_style(groups.index(r["group"]))
            open_top = hi is None
            lo = v if lo is None else lo
            hi = v if hi is None else hi
            ax.errorbar(unit.scale(v), y, xerr=[[unit.scale(v - lo)], [unit.scale(hi - v)]],
                        fmt="o", ms=4, capsize=2.5, color=colour, lw=1.2)
            if open_top:
                ax.annotate("no bound", (unit.scale(v), y), xytext=(6, -3),
                            textcoords="offset points", fontsize=6, color=colour)
        ax.set_title(f"p{p:g} ({unit.name})", fontsize=9, loc="left")
        ax.grid(True, axis="x", color="0.9", lw=0.6)
        if wide:        # values over more than a factor of 5: a log axis keeps each readable
            ax.set_xscale("log")
            _plain_log_axis(ax.xaxis)
        ax.set_xlabel(f"latency ({unit.name}){', log scale' if wide else ''}", fontsize=8)
    for k in range(1, n):           # a rule between measurements
        if rows[k]["group"] != rows[k - 1]["group"]:
            for ax in axes:
                ax.axhline(n - k - 0.5, color="0.6", lw=0.6)
    many = len(groups) > 1
    axes[0].set_yticks(range(n), [f"{r['label']} · {r['group']}" if many else r["label"]
                                  for r in reversed(rows)], fontsize=7)
    axes[0].set_ylim(-0.7, n - 0.3)
    fig.suptitle(f"{data['name']}: p50 and p99 with 95 % intervals, fastest at the top",
                 fontsize=10, x=0.01, ha="left")
    _mark_simulated(fig, data["simulated"])
    return _png(fig)


def _draw_series(data):
    unit = time_unit([np.median(s["mean_ns"]) for s in data["series"] if s is not None])
    fig, panels, above = _figure(data, height=1.9)
    for ax, _title, idx in panels:
        for i in idx:
            s = data["series"][i]
            if s is None:
                continue
            ax.plot(s["time_s"], unit.scale(s["mean_ns"]), label=data["labels"][i], lw=1,
                    **_style_kwargs(i))
        ax.set_ylabel(f"mean ({unit.name})")
        _legend(ax, above=above)
    _xlabel(panels, "capture time (s)")
    fig.suptitle(f"{data['name']}: windowed mean over capture time (drift, warm-up)",
                 fontsize=10, x=0.01, ha="left")
    _mark_simulated(fig, data["simulated"])
    return _png(fig)


def _draw_waterfall(data):
    """data: labels, rows [[(stage, start_ns, width_ns)]], simulated."""
    plt = _plt()
    n = len(data["labels"])
    unit = time_unit([start + width for row in data["rows"] for _, start, width in row])
    fig, ax = plt.subplots(figsize=(8.5, 1.0 + 0.3 * n), layout="constrained")
    stages = list(dict.fromkeys(stage for row in data["rows"] for stage, _, _ in row))
    hatches = ["", "//", "..", "xx", "\\\\", "++"]
    for r, row in enumerate(data["rows"]):
        y = n - 1 - r
        for stage, start, width in row:
            k = stages.index(stage)
            ax.barh(y, unit.scale(width), left=unit.scale(start), color=_COLOURS[k % 10],
                    hatch=hatches[k % len(hatches)], edgecolor="k", lw=0.4, height=0.7,
                    label=stage if r == next(j for j, rw in enumerate(data["rows"])
                                             if any(st == stage for st, _, _ in rw)) else None)
    ax.set_yticks(range(n), list(reversed(data["labels"])), fontsize=7)
    ax.set_xlabel(f"mean time after RX_DV falls ({unit.name})")
    fig.suptitle("receive path: stage waterfall (mean of each stage)", fontsize=10, x=0.01,
                 ha="left")
    _legend(ax)
    _mark_simulated(fig, data["simulated"])
    return _png(fig)


def _draw_size(data):
    """data: fits [(family, measurement, sizes, means_ns, fixed_ns, per_byte_ns)], simulated.
    One panel per measurement (configurations as series), two columns."""
    plt = _plt()
    unit = time_unit([m for f in data["fits"] for m in f[3]])
    names = list(dict.fromkeys(f[1] for f in data["fits"]))
    families = list(dict.fromkeys(f[0] for f in data["fits"]))
    rows = (len(names) + 1) // 2 if len(names) > 1 else 1
    cols = 2 if len(names) > 1 else 1
    fig, axes = plt.subplots(rows, cols, figsize=(11.0 if cols == 2 else 8.5, 0.6 + 2.3 * rows),
                             squeeze=False, sharex=True, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(flat, names, strict=False):
        for fam, measurement, sizes, means, fixed, per_byte in data["fits"]:
            if measurement != name:
                continue
            colour, style, marker = series_style(families.index(fam))
            ax.plot(sizes, unit.scale(np.asarray(means)), marker=marker or "o",
                    linestyle="none", color=colour, ms=4)
            grid = np.array([min(sizes), max(sizes)], dtype=float)
            ax.plot(grid, unit.scale(fixed + per_byte * grid), linestyle=style, color=colour,
                    lw=1.2, label=fam)
        ax.set_ylabel(f"{name} mean ({unit.name})", fontsize=8)
        ax.xaxis.set_tick_params(labelbottom=True)
        _legend(ax, above=True)
    fig.supxlabel("frame size (bytes)", fontsize=8)
    fig.suptitle("packet-size regression: fixed + per-byte cost per measurement (points: "
                 "means; lines: least-squares fit over every packet)", fontsize=10, x=0.01,
                 ha="left")
    _mark_simulated(fig, data["simulated"])
    return _png(fig)


def _draw_history(data):
    """data: name, by, keys, percentiles, series {p: [(value, lower, upper)]}, changes
    [(index, key)], simulated, alpha. One panel per percentile (scales differ), x = the runs."""
    plt = _plt()
    ps = data["percentiles"]
    unit = time_unit([v for p in ps for v, _, _ in data["series"][p] if v is not None])
    x = np.arange(len(data["keys"]))
    fig, axes = plt.subplots(len(ps), 1, figsize=(8.5, 0.8 + 1.7 * len(ps)), sharex=True,
                             squeeze=False, layout="constrained")
    for k, (ax, p) in enumerate(zip(axes[:, 0], ps, strict=True)):
        rows = data["series"][p]
        v = np.array([np.nan if r[0] is None else r[0] for r in rows])
        lo = np.array([np.nan if r[1] is None else r[1] for r in rows])
        hi = np.array([np.nan if r[2] is None else r[2] for r in rows])
        colour, style, marker = series_style(k)
        ax.fill_between(x, unit.scale(np.where(np.isnan(lo), v, lo)),
                        unit.scale(np.where(np.isnan(hi), v, hi)), color=colour, alpha=0.18,
                        lw=0, label="95 % CI" if k == 0 else None)
        ax.plot(x, unit.scale(v), color=colour, linestyle=style, marker=marker or "o", ms=3,
                lw=1.2, label=f"p{p:g}")
        for n, (index, _key) in enumerate(data["changes"]):
            ax.axvline(index - 0.5, color="#b00020", lw=1, linestyle="--",
                       label="change point" if n == 0 else None)
        ax.set_ylabel(f"p{p:g} ({unit.name})", fontsize=8)
        _legend(ax)
    ax = axes[-1, 0]
    step = max(1, len(x) // 20)
    ax.set_xticks(x[::step], [data["keys"][i] for i in x[::step]], rotation=45, ha="right",
                  fontsize=7)
    ax.set_xlabel(f"runs by {data['by']}; dashed: change points (false-alarm rate "
                  f"{data['alpha'] * 100:g} %)", fontsize=8)
    fig.suptitle(f"{data['name']}: percentiles over runs", fontsize=10, x=0.01, ha="left")
    _mark_simulated(fig, data["simulated"])
    return _png(fig)


_DRAW = {"history": _draw_history, "histogram": _draw_histogram, "spectrum": _draw_spectrum,
         "dots": _draw_dots, "series": _draw_series, "waterfall": _draw_waterfall,
         "size": _draw_size}


def draw(kind, data):
    """PNG bytes of one figure."""
    return _DRAW[kind](data)


def draw_job(job):
    """``draw`` for a ``(stem, kind, data, alt)`` job; returns ``(stem, png)`` (for pools)."""
    stem, kind, data, _alt = job
    return stem, draw(kind, data)

