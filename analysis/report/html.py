"""``latscope report``: a self-contained HTML page (figures embedded as PNG) and the same content as
Markdown with PNG files beside it.

Layout: a SIMULATED banner when any input comes from the simulated bench (fixed, so it is on every
printed page too; every figure made from such captures also says so); the answer first (what was
measured, p50 and p99 with intervals per capture, the ranking, each comparison's verdict as a
sentence, one figure: :mod:`latscope.analysis.report.summary`); a table of contents; then the
detail: the inputs with their warnings; the glossary and error budget; the Table I form; the
paper's values next to ours for the paper's profiles; per measurement a percentile table and its
figures; the receive-path waterfall and stage table; comparisons grouped the way the captures
are organised; the packet-size regression; every measurement of each capture; the provenance.
Long tables are collapsed (``<details>``) and each table can be downloaded as CSV (a ``data:``
link). Figures are drawn in parallel worker processes when there are several.
"""

import base64
import html
import os
import pickle
import re
import subprocess
import sys

from latscope import LatscopeError
from latscope.analysis.forensics import frames_summary
from latscope.analysis.grouping import display_labels, family, is_simulated, load_condition
from latscope.analysis.report import figures, summary
from latscope.analysis.report.labels import has_classes, integrity_note, on_first_screen
from latscope.analysis.report.tables import (
    Table,
    class_comparison_table,
    common_names,
    compare_grouped,
    grouped_comparison_tables,
    make_frames_table,
    make_percentile_table,
    make_size_table,
    make_stage_table,
    make_stats_table,
    make_table_one,
    paper_table,
    resolution_note,
    size_data,
    size_fits,
    waterfall_data,
)
from latscope.capture.files.outputs import open_output

__all__ = ["write_report", "input_warnings", "forensics_table"]

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;max-width:1180px;
 margin:0 auto;padding:0 16px 40px;color:#222;line-height:1.4}
h1{margin-top:72px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:36px}
.banner{position:fixed;top:0;left:0;right:0;background:#b00020;color:#fff;padding:8px 16px;
 font-weight:600;z-index:10;box-shadow:0 1px 4px rgba(0,0,0,.3)}
.scroll{overflow-x:auto;margin:12px 0}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;padding:4px 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px}td{white-space:nowrap}
th{font-size:11px;max-width:110px}.ci{color:#666;font-size:10.5px}
th{background:#f3f3f3;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
td.num{text-align:right}td.txt{text-align:left}
td.long{white-space:normal;min-width:16em;max-width:36em}
.note{font-size:12px;color:#555;max-width:1000px}
figure{margin:16px 0}figure img{max-width:100%;height:auto}
figcaption{font-size:12px;color:#555}
.warn{color:#8a4b00}.warnings li{font-size:13px}
.answer{font-size:15px}.answer li{margin:3px 0}
nav.toc{columns:2;font-size:13px;background:#f7f7f7;padding:8px 16px;border:1px solid #e4e4e4}
nav.toc li{break-inside:avoid}
details{margin:8px 0}summary{cursor:pointer;font-size:13px;color:#333}
a.csv{font-size:11px;margin-left:6px}
dl.gloss dt{font-weight:600;margin-top:8px}dl.gloss dd{margin-left:20px;font-size:13px;
 max-width:1000px}
@media (max-width:900px){nav.toc{columns:1}}
@media print{.banner{position:fixed}h2{break-after:avoid}figure{break-inside:avoid}}
"""


def input_warnings(analyses, extra=None):
    """Per capture (index), the warnings to show: damage the reader found (``problems`` in the
    result's metadata, and the file reader's verdict from :func:`~latscope.analysis.report.
    labels.integrity_note`) and any given in ``extra`` (``{path or label: [text]}``; a hook for
    callers that check inputs further)."""
    out = {}
    for i, a in enumerate(analyses):
        items = [f"damaged: {p}" for p in (a.result.metadata or {}).get("problems", [])]
        note = integrity_note(a)        # the file reader's verdict: damaged or not finalised
        if note:
            items.append(note)
        if extra:
            items += list(extra.get(a.path, [])) + list(extra.get(a.label, []))
        if items:
            out[i] = items
    return out


def _inputs_table(analyses, labels, simulated, warned):
    rows = []
    for i, (a, label) in enumerate(zip(analyses, labels, strict=True)):
        r = a.result
        lost = sum(int(getattr(x, "lost", 0)) for x in (r.losses or []))
        rows.append([label, os.path.basename(a.path) if a.path else "-",
                     "simulated" if simulated[i] else "measured",
                     a.size if a.size is not None else "-", f"{r.events:,}",
                     f"{r.duration_s:.3f}", f"{lost:,}",
                     f"{len(warned.get(i, []))} (see below)" if i in warned else "none"])
    return Table("inputs", ["capture", "file", "source", "frame bytes", "events",
                            "duration s", "events lost", "warnings"], rows)


def _detail_text(a):
    lines = []
    for name, s in a.stats.items():
        if not s.n:
            continue
        bits = [f"{name}: IQR {s.iqr_ns:.1f} ns, MAD {s.mad_ns:.1f} ns, "
                f"peak-to-peak {s.peak_to_peak_ns:.1f} ns"]
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
    return lines


def _draw_all(jobs, workers):
    """PNG bytes per job stem, drawn in ``workers`` child interpreters when there are several
    figures (:mod:`latscope.analysis.report.worker`, jobs in and PNGs out as pickles on the
    pipes). Children rather than a multiprocessing pool: a pool's "spawn" re-runs the caller's
    main script (a script without a ``__main__`` guard would recurse) and "fork" is unsafe in
    threaded callers. A child that fails leaves its share to this process."""
    if workers <= 1 or len(jobs) < 4:
        return dict(figures.draw_job(job) for job in jobs)
    order = sorted(jobs, key=lambda j: -len(j[2].get("labels", j[2].get("fits", []))))
    shares = [order[k::workers] for k in range(workers)]
    children = []
    for share in shares:
        child = subprocess.Popen([sys.executable, "-m", "latscope.analysis.report.worker"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        children.append((child, share))
    # feed every child before reading any, so they draw at the same time
    for child, share in children:
        try:
            pickle.dump(share, child.stdin)
            child.stdin.close()
        except OSError:
            pass
    out = {}
    for child, share in children:
        try:
            result = pickle.load(child.stdout)
        except Exception:            # the child died: draw its share here
            result = [figures.draw_job(job) for job in share]
        child.stdout.close()
        child.wait()
        out.update(result)
    return out


#: Verdict sentences shown on the first screen; the rest are one click away.
LEAD_VERDICTS = 8
#: Tables with more rows than this are collapsed (``<details>``) under their caption.
COLLAPSE_ROWS = 12


def _anchor(title):
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


def _table_html(table, stem):
    """A table with its CSV download link, collapsed when long."""
    data = base64.b64encode(table.csv().encode("utf-8")).decode()
    link = (f"<a class='csv' download='{html.escape(stem)}.csv' "
            f"href='data:text/csv;charset=utf-8;base64,{data}'>CSV</a>")
    inner = f"<div class='scroll'>{table.html()}</div>"
    if table.collapsed or (table.collapsed is None and len(table.rows) > COLLAPSE_ROWS):
        return (f"<details><summary>{html.escape(table.title)} ({len(table.rows)} rows) "
                f"</summary>{inner}</details>{link}")
    return inner + link


def _definition_list(items):
    return ("<dl class='gloss'>" + "".join(f"<dt id='term-{_anchor(t)}'>{html.escape(t)}</dt>"
                                            f"<dd>{html.escape(d)}</dd>" for t, d in items)
            + "</dl>")


def forensics_table(label, f):
    """A :class:`Table` of one :class:`~latscope.analysis.forensics.Forensics`: per slow packet
    its latency, rank, the queue ahead of it, the frames on the wire and the last edges before
    its stop."""
    rows = []
    for p in f.packets:
        own = next((w for w in p.frames if w.own), None)
        last = "; ".join(f"{e.t_ns / 1000:+.3f} {e.channel} {'↑' if e.rising else '↓'}"
                         for e in p.events[-6:])
        rows.append([p.rank, p.packet, f"{p.start_s:.6f}", f"{p.latency_ns / 1000:.3f}",
                     f"{p.faster_fraction:.2%}", "yes" if p.beyond_p999 else "no", p.queued,
                     own.describe(f.unrecorded) if own is not None else "-",
                     frames_summary(p, f.unrecorded), last])
    p999 = (f"p99.9 {f.p999_ns / 1000:.3f} µs" if f.p999_ns is not None else
            "too few packets for p99.9")
    return Table(f"{label} {f.measurement}: the {len(f.packets)} slowest of {f.n:,} packets "
                 f"(µs; p50 {f.p50_ns / 1000:.3f} µs, {p999}; window from {f.before_ns / 1000:.3g}"
                 f" µs before each start to its stop)",
                 ["rank", "packet", "at s", "latency µs", "slower than", "beyond p99.9",
                  "requests queued ahead", "its own frame",
                  "other frames on the wire (direction, class, size or duration × count)",
                  "last edges (µs from its start)"], rows, "µs",
                 collapsed=not (any(p.beyond_p999 for p in f.packets)
                                or f.unrecorded is not None))


#: What ``write_report(figure_set=...)`` draws: every measurement's figures, or only those of
#: the measurements the first screen leads with.
FIGURE_SETS = ("all", "headline")


def write_report(analyses, out_dir, *, warnings=None, workers=None, command=None,
                 forensics=None, figure_set="all"):
    """Write ``report.html`` (self-contained) and ``report.md`` (+ PNGs) into ``out_dir``.

    Parameters
    ----------
    analyses : list of Analysis
        With per-packet records (comparisons and regressions need them).
    warnings : dict, optional
        Extra warnings per input, ``{path or label: [text]}``, shown with the input and next to
        every figure and table made from it.
    workers : int, optional
        Processes drawing figures (default: the CPU count, at most 4).
    command : str, optional
        The command line that made the report, for the provenance block.
    forensics : dict, optional
        ``{capture label: [Forensics]}`` (:func:`latscope.analysis.forensics.explain`): the
        slowest packets of each and the window before each, shown in their own section.
    figure_set : {"all", "headline"}
        Draw every measurement's figures, or only those of the headline measurements (the
        others keep their tables, and their sections say how to draw them), whose p50 and p99
        dots are then the summary figure's alone.

    Returns
    -------
    list of str
        The files written: ``report.html``, ``report.md``, then the PNGs.
    """
    if not analyses:
        raise LatscopeError("no captures to report on")
    if figure_set not in FIGURE_SETS:
        raise LatscopeError(f"Figure set must be one of {', '.join(FIGURE_SETS)}, not "
                            f"{figure_set!r}")
    os.makedirs(out_dir, exist_ok=True)
    # each file appears complete or not at all, and never in place of a capture reported on
    inputs = [a.path for a in analyses if a.path]
    # configurations together, sizes ascending within each (first appearance orders families)
    families = list(dict.fromkeys(family(a) for a in analyses))
    analyses = sorted(analyses, key=lambda a: (families.index(family(a)),
                                               a.size if a.size is not None else -1))
    labels = display_labels(analyses)
    simulated = [is_simulated(a.metadata) for a in analyses]
    groups = [family(a) for a in analyses]
    warned = input_warnings(analyses, warnings)
    names = common_names(analyses)
    with_packets = all(a.result.packets is not None for a in analyses)
    any_sim = any(simulated)
    lead_names = summary.headline_names(names)
    grouped = compare_grouped(analyses) if len(analyses) >= 2 and with_packets else []
    verdicts = summary.verdicts(grouped, simulated=any_sim)

    # (title, [Table, paragraph str, ("ul", [str]) or ("dl", [(term, text)])],
    #  [(stem, alt)], warning text or None, collapsed)
    sections = []

    def warn_for(indices):
        hit = [labels[i] for i in indices if i in warned]
        return (f"Made from capture(s) with warnings: {', '.join(hit)} (see Inputs)."
                if hit else None)

    drawn = names if figure_set == "all" else lead_names
    jobs = figures.figure_jobs(analyses, labels, drawn, groups, simulated)
    if figure_set == "headline" and lead_names:
        # their p50 and p99 dots are the summary figure's, which draws them all at once
        jobs = [job for job in jobs if job[1] != "dots"]
    # the answer first: the headline measurements' p50 and p99 per capture, in one figure (a
    # frame capture by its per-class measurements only)
    lead_rows = [(labels[i], a.stats[n], n) for n in lead_names
                 for i, a in enumerate(analyses) if n in a.stats and summary.bounded(a.stats[n])
                 and on_first_screen(a, n)]
    if lead_rows:
        jobs.append(("summary", "dots", figures.dots_data(lead_rows, ", ".join(lead_names),
                                                          any_sim),
                     f"{', '.join(lead_names)}: p50 and p99 per capture with 95 % confidence "
                     f"intervals, fastest at the top of each measurement"))
    sim_text = ((" (SIMULATED: the simulated bench's model of the DUT, not hardware)"
                 if all(simulated) else f" ({sum(simulated)} SIMULATED: the simulated bench's "
                 f"model of the DUT, not hardware)") if any_sim else "")
    n_lead = sum(a.stats[n].n for a in analyses for n in lead_names if n in a.stats
                 and on_first_screen(a, n))
    n_loaded = sum(1 for a in analyses if load_condition(a.metadata))
    if n_loaded:
        sim_text += f", {n_loaded} of them under background load"
    answer = [f"{len(analyses)} capture(s){sim_text}, {n_lead:,} packet latencies of the "
              f"headline measurement(s). {summary.measured_sentence(analyses, lead_names)} "
              f"Every measurement is defined in the Glossary."]
    # the first screen: p50 verdicts on the application's delivery, where the sample bounds it
    delivery = [n for n in lead_names if not n.startswith("tx.wire")] or lead_names
    # a frame capture's plain stages (paired by order across classes) stay in the detail
    with_classes = {labels[i] for i, a in enumerate(analyses) if has_classes(a)}

    def first_screen(v):
        name = v.measurement.split(" ")[0]
        return name in delivery and ("[" in name or not {v.base, v.other} & with_classes)
    order = {"fast": 0, "mac": 1, "repeat": 2, "size": 3}
    lead_verdicts = [v.sentence for v in sorted(verdicts, key=lambda v: order.get(v.kind, 4))
                     if v.percent == 50.0 and v.lower_ns is not None and v.upper_ns is not None
                     and first_screen(v) and not v.condition]
    # the fast track against the stack under background load: its own verdicts, p50 and p99
    loaded = [v for v in verdicts if v.condition and v.kind == "fast" and first_screen(v)]
    parts = answer
    window = summary.window_text(analyses)
    if window:
        parts.append(window)
    # the headline first: the fast track against the stack under load, then the rankings
    for cond in dict.fromkeys(v.condition for v in loaded):
        mine = [v.sentence for v in loaded if v.condition == cond]
        parts.append(f"The fast track against the stack under {cond}, on the measured "
                     f"requests' delivery to the application (95 % intervals, p50 and p99):")
        parts.append(("ul", mine))
    ranking = summary.ranking_sentences(analyses, labels, lead_names)
    if ranking:
        parts.append("The ranking at p50 (< where the intervals are apart, ≈ where the sample "
                     "cannot order them):")
        parts.append(("ul", ranking))
    if lead_verdicts:
        idle = [n for n in delivery if any(n in a.stats and a.stats[n].n and
                                           not load_condition(a.metadata) for a in analyses)]
        parts.append(f"Verdicts at p50 on {', '.join(idle or delivery)} (95 % intervals; p99 "
                     f"and every other measurement under Comparisons):")
        parts.append(("ul", lead_verdicts[:LEAD_VERDICTS]))
        if len(lead_verdicts) > LEAD_VERDICTS:
            parts.append(("details", f"{len(lead_verdicts) - LEAD_VERDICTS} more verdicts at "
                                     f"p50", lead_verdicts[LEAD_VERDICTS:]))
    left_off = summary.unbounded_note(analyses, labels, lead_names)
    if left_off:
        parts.append(left_off)
    parts.append(summary.headline_table(analyses, labels, lead_names))
    sections.append(("What was measured and what it found", parts,
                     [("summary", jobs[-1][3])] if lead_rows else [],
                     warn_for(range(len(analyses))), False))
    sections.append(("Inputs", [_inputs_table(analyses, labels, simulated, warned),
                                resolution_note({f"{a.label}/{k}": s for a in analyses
                                                  for k, s in a.stats.items()})], [], None,
                     False))
    if warned:
        items = [f"{labels[i]}: {w}" for i, ws in warned.items() for w in ws]
        sections.append(("Warnings", [("ul", items)], [], None, False))
    shown = list(names) + [n for a in analyses for n in a.stages if a.stages[n].n
                           and n not in names]
    shown = list(dict.fromkeys(shown))
    sections.append(("Glossary", ["Every measurement on this page, with the edges that start "
                                  "and stop it, and the statistics used:",
                                  ("dl", summary.glossary(analyses, shown)),
                                  "Error budget of these captures:",
                                  ("dl", summary.error_budget(analyses))], [], None, False))
    sections.append(("Table I form (mean ± 3σ)", [make_table_one(analyses, labels=labels)], [],
                     warn_for(range(len(analyses))), False))
    paper = paper_table(analyses, labels)
    if paper is not None:
        sections.append(("The paper's Table I and ours", [paper], [], None, False))
    by_name = {}
    for stem, _kind, data, alt in jobs:
        if stem != "summary":
            by_name.setdefault(data["name"], []).append((stem, alt))
    for name in names:
        members = [i for i, a in enumerate(analyses) if name in a.stats and a.stats[name].n]
        parts = [make_percentile_table(analyses, name, labels)]
        if name not in drawn:
            parts.append(f"This report draws the figures of the headline measurements only; "
                         f"`latscope report` of these captures draws {name}'s too.")
        sections.append((name, parts, by_name.get(name, []), warn_for(members), False))
    frames = make_frames_table(analyses, labels)
    if frames is not None:
        within = [t for t in (class_comparison_table(a) for a in analyses) if t is not None]
        sections.append(("Frames by class", [frames] + within, [], None, False))
    stage = make_stage_table(analyses, labels)
    jobs.append(("waterfall", "waterfall", waterfall_data(analyses),
                 "receive path: mean time of each stage after RX_DV falls, per capture"))
    sections.append(("Receive path: stage waterfall", [stage] if stage else [],
                     [("waterfall", jobs[-1][3])], warn_for(range(len(analyses))), False))
    if forensics:
        tables = [forensics_table(labels[i], f) for i, a in enumerate(analyses)
                  for f in forensics.get(a.label, [])]
        if tables:
            intro = ("For the slowest packets of each capture, what happened in the window "
                     "before each: the requests still queued ahead of it, its own frame, the "
                     "other frames on the wire in both directions (RX_DV and TX_EN pulses, with "
                     "class and size in bytes from the capture's frame records; a frame the "
                     "capture does not record shows its duration) and the last edges "
                     "(frames, interrupts, markers) before its stop. Tables with packets beyond "
                     "p99.9, or from captures with frame records, are open; the others are "
                     "folded. `latscope analyze --explain N` "
                     "prints every edge of each window.")
            sections.append(("Why the slowest packets were slow", [intro] + tables, [], None,
                             False))
    if grouped:
        tables = grouped_comparison_tables(grouped)
        intro = ("Comparisons follow how the captures are organised: MACs at equal frame size, "
                 "frame sizes within a MAC, the fast track against the stack, repeats of one "
                 "configuration. Each row: other − baseline; Mann-Whitney p and Cliff's δ say "
                 "whether the whole distribution moved.")
        shown_first = set(lead_verdicts) | {v.sentence for v in loaded}
        rest = [v.sentence for v in verdicts if v.sentence not in shown_first]
        more = [("details", f"every other verdict ({len(rest)})", rest)] if rest else []
        sections.append(("Comparisons", [intro] + more + tables, [], None, False))
    sized = [a for a in analyses if a.size is not None and a.result.packets is not None]
    if len({a.size for a in sized}) >= 2:
        try:
            fits = size_fits(sized)
        except LatscopeError:
            fits = None
        if fits:
            jobs.append(("size", "size", size_data(sized, fits),
                         "mean latency against frame size with the fitted line per "
                         "configuration and measurement"))
            sections.append(("Packet-size regression", [make_size_table(fits)],
                             [("size", jobs[-1][3])], None, False))
    sections.append(("Every measurement of each capture", ["Each capture's measurements and "
                                                            "stages, one click each:"], [], None,
                     False))
    for i, (a, label) in enumerate(zip(analyses, labels, strict=True)):
        parts = [make_stats_table(a.stats, title=f"{label}: every measurement")]
        stage = make_stage_table([a], [label])
        if stage:
            parts.append(stage)
        parts += _detail_text(a)
        sections.append((f"{label}: every measurement", parts, [], warn_for([i]), True))
    general, prov_table = summary.provenance_rows(analyses, labels, command=command)
    sections.append(("Provenance", [("dl", general), prov_table], [], None, False))

    workers = workers or min(4, os.cpu_count() or 1)
    pngs = _draw_all(jobs, workers)
    written = []
    for stem, png in pngs.items():
        path = os.path.join(out_dir, f"{stem}.png")
        with open_output(path, inputs, force=True, mode="wb") as f:
            f.write(png)
        written.append(path)

    n_sim = sum(simulated)
    banner = (f"SIMULATED: {n_sim} of {len(analyses)} captures come from the simulated bench "
              f"(their metadata says so): their latencies come from a model of the DUT, not "
              f"from hardware." if n_sim else None)
    md = ["# latscope report", ""]
    body = []
    if banner:
        md += [f"**{banner}**", ""]
        body.append(f"<div class='banner' role='note'>{html.escape(banner)}</div>")
    body.append("<h1>latscope report</h1>")
    body.append(f"<p>Captures: {html.escape(', '.join(labels))}.</p>")
    md += [f"Captures: {', '.join(labels)}.", ""]
    anchors = []
    for title, *_ in sections:          # unique ids, even where two titles read alike
        anchor = _anchor(title)
        while anchor in anchors:
            anchor += "-2"
        anchors.append(anchor)
    toc = [(title, anchor) for (title, _p, _f, _w, collapsed), anchor
           in zip(sections, anchors, strict=True) if not collapsed]
    n_table = 0
    for k, ((title, parts, figs, warning, collapsed), anchor) in enumerate(
            zip(sections, anchors, strict=True)):
        level = 3 if collapsed else 2          # a capture's own section sits under its h2
        md += [f"{'#' * level} {title}", ""]
        body.append(f"<h{level} id='{anchor}'>{html.escape(title)}</h{level}>")
        if warning:
            md += [f"> warning: {warning}", ""]
            body.append(f"<p class='warn'>⚠ {html.escape(warning)}</p>")
        if collapsed:
            body.append(f"<details><summary>show {html.escape(title)}</summary>")
        block = []          # the section's figures, first in the answer, after tables elsewhere
        for stem, alt in figs:
            if stem not in pngs:
                continue
            label = f"{alt}{' (SIMULATED)' if banner else ''}"
            md_fig = [f"![{label}]({stem}.png)", ""]
            html_fig = (f"<figure><img alt=\"{html.escape(label)}\" src=\"data:image/png;"
                        f"base64,{base64.b64encode(pngs[stem]).decode()}\"><figcaption>"
                        f"{html.escape(alt)}</figcaption></figure>")
            block.append((md_fig, html_fig))
        for part in parts:
            if isinstance(part, Table):
                n_table += 1
                md += [part.markdown(), ""]
                body.append(_table_html(part, f"{anchor}-{n_table}"))
            elif isinstance(part, tuple) and part[0] == "ul":
                md += [f"- {p}" for p in part[1]] + [""]
                body.append("<ul class='warnings'>" + "".join(
                    f"<li>{html.escape(p)}</li>" for p in part[1]) + "</ul>")
            elif isinstance(part, tuple) and part[0] == "dl":
                md += [f"- **{t}**: {d}" for t, d in part[1]] + [""]
                body.append(_definition_list(part[1]))
            elif isinstance(part, tuple) and part[0] == "details":
                md += [f"{part[1]}:", ""] + [f"- {p}" for p in part[2]] + [""]
                body.append(f"<details><summary>{html.escape(part[1])}</summary><ul>"
                            + "".join(f"<li>{html.escape(p)}</li>" for p in part[2])
                            + "</ul></details>")
            else:
                md += [part, ""]
                body.append(f"<p class='{'answer' if k == 0 else 'note'}'>"
                            f"{html.escape(part)}</p>")
        for md_fig, html_fig in block:
            md += md_fig
            body.append(html_fig)
        if collapsed:
            body.append("</details>")
        if k == 0:          # the contents follow the answer
            md += ["## Contents", ""] + [f"- {t}" for t, _ in toc[1:]] + [""]
            body.append("<nav class='toc' aria-label='contents'><strong>Contents</strong><ol>"
                        + "".join(f"<li><a href='#{a}'>{html.escape(t)}</a></li>"
                                  for t, a in toc[1:]) + "</ol></nav>")
    md_path = os.path.join(out_dir, "report.md")
    with open_output(md_path, inputs, force=True) as f:
        f.write("\n".join(md))
    html_path = os.path.join(out_dir, "report.html")
    title = "latscope report" + (" (SIMULATED)" if banner else "")
    with open_output(html_path, inputs, force=True) as f:
        f.write(f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
                f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
                + "\n".join(body) + "</body></html>")
    return [html_path, md_path] + written
