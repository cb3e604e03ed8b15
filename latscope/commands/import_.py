"""``latscope import``: a sigrok ``.sr`` capture (or a latscope ``.vcd``/``.csv`` export) into a
latscope capture."""

import dataclasses
import time

from latscope import LatscopeError
from latscope.capture.files import outputs
from latscope.capture.files.interop import parse_rate
from latscope.capture.files.reimport import import_export
from latscope.capture.files.sigrok import SrLimits
from latscope.capture.files.sigrok_import import import_sr
from latscope.commands.output import FractionProgress, print_summary
from latscope.userio import check_input


def add_arguments(p):
    p.description = ("Import a sigrok session file (.sr, from any analyzer sigrok or PulseView "
                     "supports) as a latscope capture: one tick per sample (tick_hz = the file's "
                     "sample rate), one event per edge of each mapped probe. Streams in bounded "
                     "memory (a few tens of MB for any file size). The metadata is read as "
                     "libsigrok reads it (version-1 files, any key order, 'samplerate=2 mHz' is "
                     "2 MHz). Files without logic data (analog only), sample rates outside 1 Hz "
                     "to 10^12 Hz, and malformed or hostile files (zip bombs, unsafe member names, "
                     "inconsistent metadata, truncated chunks) are refused with a message and "
                     "exit status 2. A latscope export (.vcd, .csv, or .sr) comes back with its "
                     "tick rate, channel roles and marker meanings.")
    p.add_argument("file", metavar="FILE.sr", help="sigrok session file")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="capture file to create (.lsc)")
    p.add_argument("--map", metavar="ROLE=PROBE,...",
                   help="probes to import and their roles, e.g. rx_dv=D0,m_isr=D1; PROBE is a "
                        "probe name or an index (0 = probe1, bit 0). Unmapped probes are "
                        "ignored. Default: every named probe under its own name")
    p.add_argument("--samplerate", metavar="HZ", type=parse_rate,
                   help="sample rate to use instead of the file's (e.g. 100MHz; 1 Hz to "
                        "10^12 Hz); required when the file has none")
    p.add_argument("--allow-truncated", action="store_true",
                   help="import a file whose last chunk ends with a partial sample, dropping "
                        "that sample (default: refuse the file)")
    p.add_argument("--max-bytes", metavar="N", type=int, default=64 << 30,
                   help="refuse files whose logic data exceeds N bytes uncompressed "
                        "(default 64 GiB)")
    p.add_argument("--no-offset", action="store_true",
                   help="ignore the time offset latscope writes into its own exports (events "
                        "then start at sample 0)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args):
    if args.max_bytes < 1:
        raise LatscopeError(f"--max-bytes must be positive, not {args.max_bytes}")
    check_input(args.file, "file to import")
    outputs.check_output(args.output, [args.file], force=args.force, allow_stdout=False)
    if args.file.lower().endswith((".vcd", ".csv")):
        return _import_export(args)
    progress = FractionProgress("importing")
    try:
        summary = import_sr(args.file, args.output, args.map,
                            limits=SrLimits(max_total_bytes=args.max_bytes),
                            samplerate=args.samplerate, allow_truncated=args.allow_truncated,
                            force=args.force, use_offset=not args.no_offset,
                            progress=progress)
    finally:
        progress.done()
    record = dataclasses.asdict(summary)
    channels = ", ".join(f"{i}={role}" for i, role in summary.channels.items())
    print_summary(args.command, args.json, record, [
        f"imported {summary.samples:,} samples at {summary.samplerate:,} Hz from "
        f"{summary.source}",
        f"wrote {summary.events:,} events on channels {channels} to {summary.output} "
        f"({summary.seconds:.2f} s)"], summary.warnings)
    return 0


def _import_export(args):
    """``latscope import`` of a latscope VCD or CSV export (its descriptor gives the tick rate,
    roles and marker meanings; --samplerate supplies the tick rate of a foreign file)."""
    if args.map:
        raise LatscopeError("--map applies to .sr files; VCD and CSV signals keep their names")
    started = time.monotonic()
    events = import_export(args.file, args.output, tick_hz=args.samplerate,
                           force=args.force)
    channels = ", ".join(f"{i}={role}" for i, role in events.channel_names.items())
    markers = ", ".join(f"{k}={v}" for k, v in (events.markers or {}).items()) or \
        "none stored"
    record = {"source": args.file, "output": args.output, "tick_hz": events.tick_hz,
              "events": int(len(events.time)), "channels": events.channel_names,
              "markers": events.markers, "seconds": round(time.monotonic() - started, 3)}
    print_summary(args.command, args.json, record, [
        f"imported {len(events.time):,} events at {events.tick_hz:,} ticks/s from {args.file}",
        f"wrote channels {channels} (markers: {markers}) to {args.output}"], [])
    return 0
