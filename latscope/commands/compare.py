"""``latscope compare``: compare captures or configurations."""

import dataclasses
import json

from latscope.analysis import report
from latscope.capture.files.provenance import describe, provenance
from latscope.commands.analyses import (
    DEFINITIONS_HELP,
    MARKERS_HELP,
    UNITS,
    load_all,
    warn_integrity,
)


def add_arguments(p):
    p.description = ("Compare captures. --by group (default): as the captures are organised: "
                     "configurations (MACs) at equal frame size, frame sizes within a "
                     "configuration (against the smallest), the fast track against the stack "
                     "(rx.fast against rx.udp), repeated captures of one configuration; --by "
                     "first: each capture against the first. Each table gives the difference of "
                     "means (Welch 95 % interval), of p50/p99/p99.9 (distribution-free "
                     "intervals), the Mann-Whitney rank test with effect sizes. --by size: fit "
                     "latency = fixed + per-byte cost per configuration over frame sizes (from the "
                     "captures' metadata) and give the effective bandwidth in MB/s. Captures "
                     "with the same label are told apart by their paths.")
    p.epilog = UNITS
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--by", choices=("group", "first", "size", "config"), default="group",
                   help="how to pair the captures (default: group; config is the former name "
                        "of first)")
    p.add_argument("--definitions", metavar="FILE.toml", help=DEFINITIONS_HELP)
    p.add_argument("--markers", metavar="MAP", help=MARKERS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (figures in ns)")


def run(args):
    analyses = load_all(args.command, args.files, definitions_file=args.definitions,
                        markers=args.markers)
    warn_integrity(args.command, analyses)
    if args.by == "size":
        fits = report.size_fits(analyses)
        if args.json:
            print(json.dumps([{"configuration": fam, "measurement": name,
                               **dataclasses.asdict(f)} for fam, name, f in fits], indent=2))
        else:
            print("latency = fixed cost + per-byte cost × frame size (least squares over every "
                  "packet; 95 % intervals)")
            print()
            print(report.size_table(fits))
        return 0
    grouped = report.compare_grouped(analyses, by="first" if args.by in ("first", "config")
                                     else "group")
    if args.json:
        groups = [{"title": group.title, "kind": group.kind, "baseline": rows[0].base,
                   "comparisons": [{"configuration": r.other, "baseline": r.base,
                                    "measurement": r.measurement, "baseline_measurement":
                                    r.base_name, "other_measurement": r.other_name,
                                    **r.comparison.to_dict()} for r in rows]}
                  for group, rows in grouped]
        print(json.dumps({"baseline": groups[0]["baseline"] if groups else None,
                          "groups": groups,
                          "inputs": [{"path": a.path, "label": a.label,
                                      "integrity": a.integrity,
                                      "provenance": provenance(a.metadata)}
                                     for a in analyses],
                          "comparisons": [dict(c, group=g["title"]) for g in groups
                                          for c in g["comparisons"]]}, indent=2))
        return 0
    for number, a in enumerate(analyses, 1):      # what each input is, before any figure
        print(f"#{number} {a.path or a.label}: {describe(provenance(a.metadata))}")
    print()
    print(report.table_one(analyses))
    frames = report.frames_table(analyses)
    if frames:
        print()
        print(frames)
    for table in report.grouped_comparison_tables(grouped):
        print()
        print(table.markdown())
    if not grouped:
        print("\nno two captures share a measurement to compare")
    return 0
