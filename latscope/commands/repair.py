"""``latscope repair``: a valid capture rebuilt from every intact chunk of a damaged one."""

import dataclasses

from latscope.capture.files import outputs
from latscope.capture.files.repair import repair
from latscope.commands.output import print_summary
from latscope.userio import check_input


def add_arguments(p):
    p.description = ("Write a new capture holding every intact chunk of a damaged one: the "
                     "metadata from its first readable copy (META, or its copies in the METC "
                     "and NOTE chunks), every readable event in file order, and one 'damage' "
                     "gap per skipped region, so analysis never pairs across it. The new file "
                     "verifies as intact and its metadata says it was repaired. The input is "
                     "never changed. Exit status 0: written; 2: not a capture, no readable "
                     "metadata, or a bad output.")
    p.add_argument("file", metavar="CAPTURE", help="the damaged capture file (.lsc)")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="the repaired capture to create (.lsc); never the input")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args):
    check_input(args.file, "capture file")
    outputs.check_output(args.output, [args.file], force=args.force, allow_stdout=False)
    summary = repair(args.file, args.output, force=args.force)
    skipped = (f"{summary.regions} damaged region(s) ({summary.skipped_bytes:,} bytes) "
               f"skipped, each a 'damage' gap" if summary.regions else "no damaged region")
    lines = [f"wrote {summary.output}: {summary.events:,} events in {summary.chunks} chunks "
             f"from {summary.source}",
             f"metadata from the {summary.metadata_from} chunk; {skipped}"
             + (f"; unreadable tail: {summary.truncated}" if summary.truncated else "")]
    warnings = [] if summary.finalised else [
        "the original was never finalised (no NOTE chunk); the repaired file is not either"]
    print_summary(args.command, args.json, dataclasses.asdict(summary), lines, warnings)
    return 0
