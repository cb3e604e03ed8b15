"""``latscope bench``: run the benchmarks (:mod:`latscope.bench`) and print a table of figures
per section."""

import json

from latscope.bench import SECTIONS, format_table, run_sections


def add_arguments(parser):
    parser.description = ("Run every part's benchmarks and print one table per part. Figures "
                          "are measured on this machine now; ratios compare against a baseline "
                          "run in the same process.")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    parser.add_argument("--only", choices=list(SECTIONS), help="one section")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def _print_section(part, result):
    print(format_table(result["title"], result["rows"]), flush=True)
    print(f"\n({part} section took {result['seconds']} s)\n", flush=True)


def run(args):
    results = run_sections(only=args.only, quick=args.quick,
                           report=None if args.json else _print_section)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    return 0
