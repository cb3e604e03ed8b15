"""``latscope export``: a capture window as sigrok ``.sr``, VCD or CSV, or its frames as
pcapng."""

import dataclasses
import os

from latscope import LatscopeError
from latscope.capture.files import outputs
from latscope.capture.files.capfile import open_capture
from latscope.capture.files.interop import (
    exact_rate,
    export_csv,
    make_window,
    parse_rate,
    parse_time,
    window_ticks,
)
from latscope.capture.files.pcapng import export_pcapng
from latscope.capture.files.sigrok_write import export_sr
from latscope.capture.files.vcd import export_vcd
from latscope.commands.output import FractionProgress, print_summary
from latscope.userio import check_input


def add_arguments(p):
    p.description = ("Export a time window of a capture for other tools: 'sr' for PulseView and "
                     "sigrok-cli (sampled at --samplerate; every edge lands on the first sample "
                     "at or after it), 'vcd' for GTKWave and Surfer (exact times, one wire per "
                     "channel), 'csv' with columns time_ns,channel,edge, 'pcapng' for "
                     "Wireshark (the recorded frames of frame-aware capture whose first edge is "
                     "in the window, ps timestamps at that edge, direction in epb_flags, the "
                     "frame bytes kept by a --header-bytes build). Times are since the "
                     "instrument's timestamp reset.")
    p.add_argument("file", metavar="CAPTURE", help="capture file (.lsc)")
    p.add_argument("--format", choices=("sr", "vcd", "csv", "pcapng"),
                   help="output format (default: from the output file's suffix)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="file to write ('-' for standard output, csv only); default: the "
                        "capture's name with the format's suffix")
    p.add_argument("--from", dest="start", metavar="TIME", type=parse_time,
                   help="window start, e.g. 1.5ms, 200us, 250ns or 0.1 (seconds); default: one "
                        "tick before the first event")
    p.add_argument("--to", dest="stop", metavar="TIME", type=parse_time,
                   help="window end (exclusive), same units; default: one tick after the last "
                        "event")
    p.add_argument("--channels", metavar="LIST",
                   help="channels to export, by role or index, in this order (default: all)")
    p.add_argument("--samplerate", metavar="HZ", type=parse_rate,
                   help="sr only: samples per second, e.g. 200MHz (default: the capture's tick "
                        "rate, which keeps every edge exact)")
    p.add_argument("--tsresol", choices=("ps", "ns"),
                   help="pcapng only: timestamp unit (default ns, the nearest ns, which every "
                        "Wireshark reads; ps is exact for the ECP5 builds' 1.25 and 3.125 ns "
                        "ticks, but Wireshark 4.0 misreads ps stamps past 18.4 ms into a second)")
    p.add_argument("--max-samples", metavar="N", type=int, default=10**9,
                   help="sr only: refuse windows needing more samples (default 1e9; PulseView "
                        "holds about 1.07 x samples x unitsize bytes in memory)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


_SUFFIXES = {"sr": ".sr", "vcd": ".vcd", "csv": ".csv", "pcapng": ".pcapng"}


def _export_pcapng(args, output):
    if args.channels:
        raise LatscopeError("--format pcapng writes frames, not channels: --channels does not "
                            "apply")
    with open_capture(args.file) as capture:
        # the window holds the frames whose first edge t has from <= t / tick_hz < to
        start, stop = window_ticks(args.start, args.stop, capture.metadata["tick_hz"])
        summary = export_pcapng(capture, output, force=args.force, start_tick=start,
                                stop_tick=stop, resolution=args.tsresol or "ns")
    window = (f" ({summary.outside_window:,} outside --from/--to)"
              if summary.outside_window else "")
    print_summary(args.command, args.json, dataclasses.asdict(summary), [
        f"wrote {summary.output} (pcapng): {summary.packets:,} frames{window}"],
        summary.warnings)
    return 0


def run(args):
    fmt = args.format
    if fmt is None:
        suffix = os.path.splitext(args.output or "")[1].lower()
        fmt = next((f for f, s in _SUFFIXES.items() if s == suffix), None)
        if fmt is None:
            raise LatscopeError("give --format sr, vcd, csv or pcapng (or an output name "
                                "ending in .sr, .vcd, .csv or .pcapng)")
    output = args.output or os.path.splitext(args.file)[0] + _SUFFIXES[fmt]
    if output == "-" and fmt != "csv":
        raise LatscopeError(f"--format {fmt} cannot be written to standard output")
    if output == "-" and args.json:
        raise LatscopeError("--json cannot be combined with -o - (both use standard output)")
    if args.samplerate is not None and fmt != "sr":
        raise LatscopeError("--samplerate applies to --format sr only")
    if args.tsresol is not None and fmt != "pcapng":
        raise LatscopeError("--tsresol applies to --format pcapng only")
    check_input(args.file, "capture file")
    outputs.check_output(output, [args.file], force=args.force, allow_stdout=(fmt == "csv"))
    if fmt == "pcapng":
        return _export_pcapng(args, output)
    with open_capture(args.file) as capture:
        tick_hz = exact_rate(capture.metadata["tick_hz"])
        # the window holds the ticks t with from <= t / tick_hz < to
        start, stop = window_ticks(args.start, args.stop, tick_hz)
        window = make_window(capture, start, stop, args.channels)
        progress = FractionProgress("exporting")
        try:
            if fmt == "sr":
                samplerate = args.samplerate
                if samplerate is None:
                    if tick_hz.denominator != 1:
                        raise LatscopeError(f"the capture's tick rate {float(tick_hz)} Hz is not "
                                            f"a whole number of Hz; give --samplerate")
                    samplerate = int(tick_hz)
                if args.max_samples < 1:
                    raise LatscopeError(f"--max-samples must be positive, not "
                                        f"{args.max_samples}")
                summary = export_sr(window, output, samplerate, max_samples=args.max_samples,
                                    force=args.force, progress=progress)
            elif fmt == "vcd":
                summary = export_vcd(window, output, force=args.force)
            else:
                summary = export_csv(window, output, force=args.force)
        finally:
            progress.done()
    record = dataclasses.asdict(summary)
    lines = [] if output == "-" else [
        f"wrote {summary.output} ({fmt}): {len(summary.channels)} channel(s) "
        f"{', '.join(summary.channels)}, ticks {summary.start_tick:,} to {summary.stop_tick:,}"
        + (f", {summary.samples:,} samples at {summary.samplerate:,} Hz"
           if summary.samples is not None else f", {summary.events:,} events")]
    print_summary(args.command, args.json, record, lines, summary.warnings)
    return 0
