"""``latscope bench`` (and ``make bench``): every speed and memory figure the project claims.

Each part has a ``bench`` module with ``SECTION`` (a title) and ``run(quick)`` returning a list
of rows ``(figure, value, unit, note)``; where a baseline exists the row's note gives the ratio
against it, measured in the same run. This runner prints one table per section."""

import importlib
import json
import time

PART_BENCH_MODULES = ("latscope.gateware.bench", "latscope.gateware.linkbench",
                      "latscope.gateware.framebench",
                      "latscope.capture.bench", "latscope.analysis.bench")
#: Section names that are not the module's part (``--only NAME``).
_SECTION_NAMES = {"latscope.gateware.linkbench": "links", "latscope.gateware.framebench": "frames"}


def register(subparsers):
    parser = subparsers.add_parser(
        "bench", help="run the benchmarks and print a table of figures",
        description="Run every part's benchmarks and print one table per part. Figures are "
                    "measured on this machine now; ratios compare against a baseline run in the "
                    "same process.")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    parser.add_argument("--only", choices=["gateware", "links", "frames", "capture", "analysis"],
                        help="one section")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(func=main)


def _format_table(title, rows):
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


def main(args):
    results = {}
    for name in PART_BENCH_MODULES:
        part = _SECTION_NAMES.get(name, name.split(".")[1])
        if args.only and part != args.only:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            continue
        started = time.monotonic()
        rows = module.run(quick=args.quick)
        results[part] = {"title": module.SECTION, "rows": rows,
                         "seconds": round(time.monotonic() - started, 1)}
        if not args.json:
            print(_format_table(module.SECTION, rows), flush=True)
            print(f"\n({part} section took {results[part]['seconds']} s)\n", flush=True)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    return 0
