"""The benchmarks behind ``latscope bench`` (and ``make bench``): every speed and memory figure
the project claims.

Each section is a module of this package with ``SECTION`` (a title) and ``run(quick)``
returning a list of rows ``(figure, value, unit, note)``; where a baseline exists the row's note
gives the ratio against it, measured in the same run. The command prints one table per section."""

import importlib
import time

#: Each section's name (``latscope bench --only NAME``) and module, in the order they run.
SECTIONS = {"gateware": "latscope.bench.gateware", "sim": "latscope.bench.simcpu",
            "links": "latscope.bench.linkbench",
            "frames": "latscope.bench.framebench", "capture": "latscope.bench.capture",
            "analysis": "latscope.bench.analysis", "store": "latscope.bench.store"}


def format_table(title, rows):
    """A section's rows as a Markdown table under its title."""
    headers = ("figure", "value", "unit", "note")
    cells = [headers] + [tuple(_fmt(c) for c in row) for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(4)]
    lines = [f"## {title}", ""]
    for n, row in enumerate(cells):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fmt(value):
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def run_sections(*, only=None, quick=False, report=None):
    """Run every section (or the one named ``only``, a key of :data:`SECTIONS`; its module is
    imported only then); returns ``{section: {"title", "rows", "seconds"}}``.
    ``report(section, result)`` is called with each section's result as soon as it is measured.
    """
    results = {}
    for part, name in SECTIONS.items():
        if only and part != only:
            continue
        module = importlib.import_module(name)
        started = time.monotonic()
        rows = module.run(quick=quick)
        results[part] = {"title": module.SECTION, "rows": rows,
                         "seconds": round(time.monotonic() - started, 1)}
        if report is not None:
            report(part, results[part])
    return results
