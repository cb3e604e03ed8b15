"""``latscope report``: a self-contained HTML page (figures embedded as PNG) and the same content as
Markdown with PNG files beside it.

Layout: a SIMULATED banner when any input comes from the simulated bench (fixed, so it is on every
printed page too; every figure made from such captures also says so); the inputs with their
warnings; the Table I form; the paper's values next to ours for the paper's profiles; per
measurement a percentile table and its figures; the receive-path waterfall and stage table;
comparisons grouped the way the captures are organised; the packet-size regression; every figure
of each capture. Figures are drawn in parallel worker processes when there are several.
"""

import base64
import html
import os
import pickle
import subprocess
import sys

from latscope import LatscopeError
from latscope.analysis.grouping import display_labels, family, is_simulated
from latscope.analysis.report import figures
from latscope.analysis.report.labels import integrity_note
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
from latscope.capture.files.provenance import describe, provenance

__all__ = ["write_report", "input_warnings"]

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
.note{font-size:12px;color:#555;max-width:1000px}
figure{margin:16px 0}figure img{max-width:100%;height:auto}
figcaption{font-size:12px;color:#555}
.warn{color:#8a4b00}.warnings li{font-size:13px}
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


def write_report(analyses, out_dir, *, warnings=None, workers=None):
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

    Returns
    -------
    list of str
        The files written: ``report.html``, ``report.md``, then the PNGs.
    """
    if not analyses:
        raise LatscopeError("no captures to report on")
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

    # (title, [Table or paragraph str], [(stem, alt)], warning text or None)
    sections = []

    def warn_for(indices):
        hit = [labels[i] for i in indices if i in warned]
        return (f"Made from capture(s) with warnings: {', '.join(hit)} (see Inputs)."
                if hit else None)

    sections.append(("Inputs", [_inputs_table(analyses, labels, simulated, warned),
                                resolution_note({f"{a.label}/{k}": s for a in analyses
                                                  for k, s in a.stats.items()})], [], None))
    if warned:
        items = [f"{labels[i]}: {w}" for i, ws in warned.items() for w in ws]
        sections.append(("Warnings", items, [], None))
    sections.append(("Summary", [make_table_one(analyses, labels=labels)], [],
                     warn_for(range(len(analyses)))))
    paper = paper_table(analyses, labels)
    if paper is not None:
        sections.append(("The paper's Table I and ours", [paper], [], None))
    jobs = figures.figure_jobs(analyses, labels, names, groups, simulated)
    by_name = {}
    for stem, _kind, data, alt in jobs:
        by_name.setdefault(data["name"], []).append((stem, alt))
    for name in names:
        members = [i for i, a in enumerate(analyses) if name in a.stats and a.stats[name].n]
        sections.append((name, [make_percentile_table(analyses, name, labels)],
                         by_name.get(name, []), warn_for(members)))
    frames = make_frames_table(analyses, labels)
    if frames is not None:
        within = [t for t in (class_comparison_table(a) for a in analyses) if t is not None]
        sections.append(("Frames by class", [frames] + within, [], None))
    stage = make_stage_table(analyses, labels)
    jobs.append(("waterfall", "waterfall", waterfall_data(analyses),
                 "receive path: mean time of each stage after RX_DV falls, per capture"))
    sections.append(("Receive path: stage waterfall", [stage] if stage else [],
                     [("waterfall", jobs[-1][3])], warn_for(range(len(analyses)))))
    if len(analyses) >= 2 and with_packets:
        grouped = compare_grouped(analyses)
        tables = grouped_comparison_tables(grouped)
        intro = ("Comparisons follow how the captures are organised: MACs at equal frame size, "
                 "frame sizes within a MAC, the fast track against the stack, repeats of one "
                 "configuration. Each row: other − baseline; Mann-Whitney p and Cliff's δ say "
                 "whether the whole distribution moved.")
        sections.append(("Comparisons", [intro] + tables, [], None))
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
                             [("size", jobs[-1][3])], None))
    for i, (a, label) in enumerate(zip(analyses, labels, strict=True)):
        parts = [make_stats_table(a.stats, title=f"{label}: every measurement")]
        stage = make_stage_table([a], [label])
        if stage:
            parts.append(stage)
        parts += _detail_text(a)
        sections.append((f"{label}: every measurement", parts, [], warn_for([i])))

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
    # what each capture's data is and where it came from, through every export and import
    origins = [f"{label}: {describe(provenance(a.metadata))}"
               for label, a in zip(labels, analyses, strict=True)]
    md += [f"- {line}" for line in origins] + [""]
    body.append("<ul class='provenance'>" + "".join(f"<li>{html.escape(line)}</li>"
                                                    for line in origins) + "</ul>")
    for title, parts, figs, warning in sections:
        md += [f"## {title}", ""]
        body.append(f"<h2>{html.escape(title)}</h2>")
        if warning:
            md += [f"> warning: {warning}", ""]
            body.append(f"<p class='warn'>⚠ {html.escape(warning)}</p>")
        if title == "Warnings":
            md += [f"- {p}" for p in parts] + [""]
            body.append("<ul class='warnings'>" + "".join(f"<li>{html.escape(p)}</li>"
                                                          for p in parts) + "</ul>")
            continue
        for part in parts:
            if isinstance(part, Table):
                md += [part.markdown(), ""]
                body.append(f"<div class='scroll'>{part.html()}</div>")
            else:
                md += [part, ""]
                body.append(f"<p class='note'>{html.escape(part)}</p>")
        for stem, alt in figs:
            if stem not in pngs:
                continue
            label = f"{alt}{' (SIMULATED)' if banner else ''}"
            md += [f"![{label}]({stem}.png)", ""]
            body.append(f"<figure><img alt=\"{html.escape(label)}\" src=\"data:image/png;base64,"
                        f"{base64.b64encode(pngs[stem]).decode()}\"><figcaption>"
                        f"{html.escape(alt)}</figcaption></figure>")
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
