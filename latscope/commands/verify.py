"""``latscope verify``: check a capture file's integrity and report its gaps."""

import json

from latscope.capture.files import integrity


def add_arguments(p):
    p.description = ("Check every chunk's CRC, truncation, event columns and time order, and "
                     "list every loss (FIFO overflow, link, damaged region) with its time span. "
                     "A damaged chunk does not hide the rest: reading resumes at the next valid "
                     "chunk. The status says whether the file was finalised (the capture ended "
                     "normally) apart from the damage. Exit status 0: intact (possibly not "
                     "finalised, with a warning); 1: damaged (what is still readable is "
                     "listed); 2: not a capture file.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args):
    report = integrity.verify(args.file)
    if args.json:
        print(json.dumps(report, sort_keys=True, default=str))
        return 0 if report["ok"] else 1
    status = {"intact": "OK", "intact, not finalised": "OK, NOT FINALISED",
              "damaged, finalised": "DAMAGED (finalised)",
              "damaged, not finalised": "DAMAGED, NOT FINALISED"}.get(report["state"], "DAMAGED")
    print(f"{report['path']}: {status}: {report['chunks']} good chunks, {report['events']} "
          f"events, format {report['format']}")
    if report.get("frames") or report.get("frame_counters"):
        print(f"  frames: {report['frames']} frame records, {report['frame_counters']} class "
              f"counter snapshots")
    for item in report["damage"]:
        print(f"  damage: {item}")
    if not report["ok"]:
        regions = report["damaged_regions"]
        print(f"  recoverable: {report['recoverable_events']} events in the readable chunks"
              + (f"; {len(regions)} damaged region(s) ({sum(r['bytes'] for r in regions)} "
                 f"bytes) skipped, reading resumed after each; each is a 'damage' gap below"
                 if regions else "")
              + (f"; {report['bytes_after_last_good_chunk']} bytes at the end are unreadable"
                 if report["truncated"] else ""))
    for item in report["warnings"]:
        print(f"  warning: {item}")
    if report["losses"]:
        print("  gaps (cause, events lost, from s, span s):")
        for r in report["losses"]:
            print(f"    {r['cause']:8} {r['lost']:>10}  {r['first_s']:.9f}  {r['span_s']:.9f}")
    else:
        print("  gaps: none; no event was lost")
    return 0 if report["ok"] else 1
