"""``latscope import`` (sigrok ``.sr`` to a capture) and ``latscope export`` (a capture window to
sigrok ``.sr``, VCD or CSV), and the window logic the exporters share.

See ``docs/sigrok.md`` for the conventions (which sample an edge lands on, initial levels, what an
exported file cannot show) and the checks made on hostile input.
"""

import dataclasses
import json
import os
import re
import sys
import time as _time
from fractions import Fraction

import numpy as np

from latscope import LatscopeError
from latscope.capture.outputs import open_output
from latscope.userio import check_input, check_output

__all__ = ["Window", "make_window", "parse_time", "parse_rate", "export_csv", "register"]

_TIME = re.compile(r"\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*"
                   r"(s|ms|us|µs|ns|ps)?\s*")
_TIME_UNITS = {None: 1, "s": 1, "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6),
               "µs": Fraction(1, 10**6), "ns": Fraction(1, 10**9), "ps": Fraction(1, 10**12)}


def parse_time(text):
    """Parse a time such as ``"1.5ms"``, ``"200 ns"``, ``"2e-3"`` (a bare number is seconds).

    Returns
    -------
    fractions.Fraction
        Seconds, exactly.

    Examples
    --------
    >>> parse_time("1.5ms"), parse_time("200ns"), parse_time("2")
    (Fraction(3, 2000), Fraction(1, 5000000), Fraction(2, 1))
    """
    match = _TIME.fullmatch(str(text))
    if not match:
        raise LatscopeError(f"not a time: {text!r} (use e.g. 1.5ms, 200ns, 3us or 0.1 for "
                            f"seconds)")
    return Fraction(match.group(1)) * _TIME_UNITS[match.group(2)]


def parse_rate(text):
    """Parse a rate in Hz: ``"200MHz"``, ``"200 MHz"``, ``"2e8"``, ``"1.5 kHz"``.

    Returns
    -------
    int
        Samples per second (must be a whole number).
    """
    match = re.fullmatch(r"\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*"
                         r"([kMG]?)(?:Hz)?\s*", str(text))
    if not match:
        raise LatscopeError(f"not a sample rate: {text!r} (use e.g. 200MHz or 200000000)")
    value = Fraction(match.group(1)) * {"": 1, "k": 10**3, "M": 10**6, "G": 10**9}[match.group(2)]
    if value.denominator != 1 or value < 1:
        raise LatscopeError(f"sample rate {text!r} is not a positive whole number of Hz")
    return int(value)


def _exact_rate(value):
    """``tick_hz`` from metadata (int or float) as an exact Fraction (a float by its shortest
    decimal form, which is what a person wrote)."""
    return Fraction(value) if isinstance(value, int) else Fraction(repr(float(value)))


@dataclasses.dataclass
class Window:
    """The part of a capture an exporter writes.

    Attributes
    ----------
    capture : latscope.capture.capfile.Capture
    tick_hz : fractions.Fraction
        Ticks per second, exact.
    start, stop : int
        The window ``[start, stop)`` in ticks.
    channels : list of int
        Capture channel indices exported; output channel ``i`` is ``channels[i]``.
    names : list of str
        Their roles (``ch<N>`` for a channel the metadata does not name).
    initial : list of int
        Level (0 or 1) of each exported channel at ``start``, after every edge at or before it.
        Before its first edge a channel is at the initial level the capture recorded (an import
        records each probe's first sample); failing that, the opposite of that edge; a channel
        with neither is 0.
    count : int
        Events with ``start < time < stop`` (the ones a level export can place).
    absorbed : int
        Events with ``time == start``: they only set the initial level.
    warnings : list of str
    """
    capture: object
    tick_hz: Fraction
    start: int
    stop: int
    channels: list
    names: list
    initial: list
    count: int
    absorbed: int
    warnings: list

    def blocks(self, include_start=False):
        """Yield ``(time, channel, rising)`` blocks of the window's events in time order, with
        ``channel`` renumbered to the output index. ``include_start`` adds the events at
        ``time == start`` (for event exports such as CSV)."""
        lookup = np.full(256, 255, np.uint8)
        lookup[self.channels] = np.arange(len(self.channels), dtype=np.uint8)
        low = self.start if include_start else self.start + 1
        for chunk in self.capture.iter_chunks():
            time = chunk.time
            if not len(time) or time[-1] < low:
                continue
            if time[0] >= self.stop:
                break
            begin = int(np.searchsorted(time, low, side="left"))
            end = int(np.searchsorted(time, self.stop, side="left"))
            if begin >= end:
                continue
            channel = lookup[chunk.channel[begin:end]]
            keep = channel != 255
            yield (np.array(time[begin:end][keep]), channel[keep],
                   np.array(chunk.rising[begin:end][keep], bool))


def make_window(capture, start=None, stop=None, channels=None):
    """Describe the window ``[start, stop)`` (ticks) of ``capture`` for an exporter.

    Parameters
    ----------
    capture : latscope.capture.capfile.Capture
    start, stop : int, optional
        Ticks. Defaults: one tick before the first event (so that edge is visible in a sampled
        export) and one tick after the last event.
    channels : str, optional
        Comma-separated roles or indices to export, in this order; default every channel that is
        named in the metadata or has events, by index.

    Returns
    -------
    Window
    """
    tick_hz = _exact_rate(capture.metadata["tick_hz"])
    first, last = capture.first_time, capture.last_time
    if start is None:
        start = max(0, first - 1) if first is not None else 0
    if stop is None:
        stop = last + 1 if last is not None else start + 1
    if stop <= start:
        raise LatscopeError(f"the window is empty: --to ({stop} ticks) is not after --from "
                            f"({start} ticks)")
    seen = set(capture.channel_names)
    # one pass: levels at the start, events in the window, channels present
    last_level = {}             # channel -> level after its last edge at or before start
    first_after = {}            # channel -> level before its first edge after start
    in_window = np.zeros(256, np.int64)     # events per channel, start < time < stop
    at_start = np.zeros(256, np.int64)      # events per channel at time == start
    for chunk in capture.iter_chunks():
        if not len(chunk.time):
            continue
        seen.update(np.unique(chunk.channel).tolist())
        time = chunk.time
        cut = int(np.searchsorted(time, start, side="right"))
        if cut:
            channel, rising = chunk.channel[:cut], chunk.rising[:cut]
            # last occurrence of each channel in this part
            reverse = channel[::-1]
            values, position = np.unique(reverse, return_index=True)
            for ch, pos in zip(values.tolist(), position.tolist(), strict=True):
                last_level[ch] = int(rising[cut - 1 - pos])
            edge = int(np.searchsorted(time, start, side="left"))
            at_start += np.bincount(channel[edge:], minlength=256)
        if cut < len(time):
            inside = int(np.searchsorted(time, stop, side="left"))
            if inside > cut:
                in_window += np.bincount(chunk.channel[cut:inside], minlength=256)
            channel, rising = chunk.channel[cut:], chunk.rising[cut:]
            values, position = np.unique(channel, return_index=True)
            for ch, pos in zip(values.tolist(), position.tolist(), strict=True):
                first_after.setdefault(ch, 1 - int(rising[pos]))
    if channels:
        chosen = []
        by_name = {name: index for index, name in capture.channel_names.items()}
        for item in channels.split(","):
            item = item.strip()
            if item in by_name:
                chosen.append(by_name[item])
            elif item.isdigit() and int(item) < 256:
                chosen.append(int(item))
            else:
                known = ", ".join(f"{i}={n}" for i, n in sorted(capture.channel_names.items()))
                raise LatscopeError(f"--channels: no channel {item!r}; the capture has {known}")
        if len(set(chosen)) != len(chosen):
            raise LatscopeError("--channels names a channel twice")
    else:
        chosen = sorted(seen)
    if not chosen:
        raise LatscopeError(f"{capture.path}: the capture has no channels to export")
    names = [capture.channel_names.get(ch, f"ch{ch}") for ch in chosen]
    count = int(in_window[chosen].sum())
    absorbed = int(at_start[chosen].sum())
    # before its first edge a channel is at the level the capture recorded for it at its start
    # (imports store the first sample's levels), else the opposite of that edge, else 0
    recorded = (capture.note or {}).get("initial_levels") or {}
    recorded = {index: int(recorded[name]) for index, name in capture.channel_names.items()
                if isinstance(recorded.get(name), (bool, int))}
    initial = [last_level.get(ch, recorded.get(ch, first_after.get(ch, 0))) for ch in chosen]
    warnings = []
    lost = [r for r in capture.losses if r.first_time < stop and r.first_time + r.span >= start]
    if lost:
        total = sum(r.lost for r in lost)
        warnings.append(f"{total} event(s) were lost inside the window ({len(lost)} loss "
                        f"record(s)); levels after a loss may be wrong")
    if capture.problems:
        warnings.append(f"the capture is damaged: {'; '.join(capture.problems)}")
    return Window(capture=capture, tick_hz=tick_hz, start=int(start), stop=int(stop),
                  channels=chosen, names=names, initial=initial, count=count,
                  absorbed=absorbed, warnings=warnings)


def _ns_formatter(tick_hz):
    """Return ``f(times) -> list of str``: tick times as nanoseconds, exact when the tick is a
    whole number of femtoseconds or coarser, else rounded to the nearest femtosecond."""
    per_tick = Fraction(10**9) / tick_hz
    decimals = next((d for d in range(7) if (per_tick * 10**d).denominator == 1), 6)
    scaled = per_tick * 10**decimals
    num, den = scaled.numerator, scaled.denominator

    def fmt(times):
        out = []
        for t in times.tolist():
            v = (2 * t * num + den) // (2 * den)
            if decimals:
                sign = "-" if v < 0 else ""
                whole, frac = divmod(abs(v), 10**decimals)
                out.append(f"{sign}{whole}.{frac:0{decimals}d}")
            else:
                out.append(str(v))
        return out
    return fmt


def export_csv(window, output, *, force=False, overwrite=False):
    """Write the window's events as CSV: a first line ``# latscope {...}`` (the capture's tick
    rate, roles and marker meanings, see :mod:`latscope.capture.reimport`), then
    ``time_ns,channel,edge`` (channel is the role, edge is ``rising`` or ``falling``; time since
    the instrument's timestamp reset). ``output`` is written under
    :mod:`latscope.capture.outputs`'s policy (``"-"``: standard output); ``force`` replaces an
    existing file, never the window's capture itself (``overwrite`` is its former name).

    Returns
    -------
    latscope.capture.sigrok_write.ExportSummary
    """
    from latscope.capture.sigrok_write import ExportSummary
    fmt = _ns_formatter(window.tick_hz)
    names = np.array(window.names, dtype=object)
    edge = np.array(["falling", "rising"], dtype=object)
    count = 0
    from latscope.capture.reimport import DESCRIPTOR_TAG, export_descriptor
    descriptor = export_descriptor(window, "export csv")
    with open_output(output, [window.capture.path], force=force or overwrite,
                     newline="") as handle:
        # the capture's description (tick rate, roles, marker meanings) travels with the data;
        # CSV readers skip it as a comment (pandas: comment="#")
        handle.write(f"# {DESCRIPTOR_TAG} "
                     f"{json.dumps(descriptor, sort_keys=True)}\n")
        handle.write("time_ns,channel,edge\n")
        for time, channel, rising in window.blocks(include_start=True):
            lines = [f"{t},{c},{e}\n" for t, c, e in
                     zip(fmt(time), names[channel], edge[rising.astype(np.intp)], strict=True)]
            handle.writelines(lines)
            count += len(lines)
    return ExportSummary(output=output, format="csv", start_tick=window.start,
                         stop_tick=window.stop, events=count, samples=None, samplerate=None,
                         channels=list(window.names), hidden_edges=0,
                         warnings=list(window.warnings))


# --- command line --------------------------------------------------------------------------------
class _Progress:
    """``done / total`` as a percentage on stderr, when stderr is a terminal, 4 times a second."""

    def __init__(self, label):
        self.label = label
        self.enabled = sys.stderr.isatty()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done, total):
        now = _time.monotonic()
        if not self.enabled or now - self.last < 0.25 or not total:
            return
        self.last = now
        sys.stderr.write(f"\r\x1b[K{self.label}: {100 * done / total:5.1f} % "
                         f"({done:,} of {total:,})")
        sys.stderr.flush()
        self.drawn = True

    def done(self):
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def register(subparsers):
    p = subparsers.add_parser(
        "import", help="turn a sigrok .sr capture (or a latscope .vcd/.csv export) into a "
                       "latscope capture",
        description="Import a sigrok session file (.sr, from any analyzer sigrok or PulseView "
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
    p.set_defaults(func=cmd_import)

    p = subparsers.add_parser(
        "export", help="write a capture window as sigrok .sr, VCD or CSV, or its frames as "
                       "pcapng",
        description="Export a time window of a capture for other tools: 'sr' for PulseView and "
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
    p.set_defaults(func=cmd_export)


def _print_summary(args, record, lines, warnings):
    if args.json:
        print(json.dumps(record, sort_keys=True, default=str))
    else:
        for line in lines:
            print(line)
    for warning in warnings:
        print(f"latscope {args.command}: warning: {warning}", file=sys.stderr)


def cmd_import(args):
    from latscope.capture.sigrok import SrLimits, import_sr
    if args.max_bytes < 1:
        raise LatscopeError(f"--max-bytes must be positive, not {args.max_bytes}")
    check_input(args.file, "file to import")
    check_output(args.output, force=args.force)
    if args.file.lower().endswith((".vcd", ".csv")):
        return _import_export(args)
    progress = _Progress("importing")
    try:
        summary = import_sr(args.file, args.output, args.map,
                            limits=SrLimits(max_total_bytes=args.max_bytes),
                            samplerate=args.samplerate, allow_truncated=args.allow_truncated,
                            overwrite=args.force, use_offset=not args.no_offset,
                            progress=progress)
    finally:
        progress.done()
    record = dataclasses.asdict(summary)
    channels = ", ".join(f"{i}={role}" for i, role in summary.channels.items())
    _print_summary(args, record, [
        f"imported {summary.samples:,} samples at {summary.samplerate:,} Hz from "
        f"{summary.source}",
        f"wrote {summary.events:,} events on channels {channels} to {summary.output} "
        f"({summary.seconds:.2f} s)"], summary.warnings)
    return 0


def _import_export(args):
    """``latscope import`` of a latscope VCD or CSV export (its descriptor gives the tick rate,
    roles and marker meanings; --samplerate supplies the tick rate of a foreign file)."""
    from latscope.capture.reimport import import_export
    if args.map:
        raise LatscopeError("--map applies to .sr files; VCD and CSV signals keep their names")
    started = _time.monotonic()
    events = import_export(args.file, args.output, tick_hz=args.samplerate,
                           overwrite=args.force)
    channels = ", ".join(f"{i}={role}" for i, role in events.channel_names.items())
    markers = ", ".join(f"{k}={v}" for k, v in (events.markers or {}).items()) or \
        "none stored"
    record = {"source": args.file, "output": args.output, "tick_hz": events.tick_hz,
              "events": int(len(events.time)), "channels": events.channel_names,
              "markers": events.markers, "seconds": round(_time.monotonic() - started, 3)}
    _print_summary(args, record, [
        f"imported {len(events.time):,} events at {events.tick_hz:,} ticks/s from {args.file}",
        f"wrote channels {channels} (markers: {markers}) to {args.output}"], [])
    return 0


_SUFFIXES = {"sr": ".sr", "vcd": ".vcd", "csv": ".csv", "pcapng": ".pcapng"}


def _ceil(value):
    return -(-value.numerator // value.denominator)


def _export_pcapng(args, output):
    from latscope.capture.capfile import open_capture
    from latscope.capture.pcapng import export_pcapng
    if args.channels:
        raise LatscopeError("--format pcapng writes frames, not channels: --channels does not "
                            "apply")
    with open_capture(args.file) as capture:
        tick_hz = _exact_rate(capture.metadata["tick_hz"])
        # the window holds the frames whose first edge t has from <= t / tick_hz < to
        start = None if args.start is None else _ceil(args.start * tick_hz)
        stop = None if args.stop is None else _ceil(args.stop * tick_hz)
        if start is not None and stop is not None and stop <= start:
            raise LatscopeError("--to must be later than --from")
        summary = export_pcapng(capture, output, overwrite=args.force, start_tick=start,
                                stop_tick=stop, resolution=args.tsresol or "ns")
    window = (f" ({summary.outside_window:,} outside --from/--to)"
              if summary.outside_window else "")
    _print_summary(args, dataclasses.asdict(summary), [
        f"wrote {summary.output} (pcapng): {summary.packets:,} frames{window}"],
        summary.warnings)
    return 0


def cmd_export(args):
    from latscope.capture.capfile import open_capture
    from latscope.capture.sigrok_write import export_sr
    from latscope.capture.vcd import export_vcd
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
    if os.path.abspath(output) == os.path.abspath(args.file):
        raise LatscopeError("the output file would replace the capture")
    check_input(args.file, "capture file")
    check_output(output, force=args.force)
    if fmt == "pcapng":
        return _export_pcapng(args, output)
    with open_capture(args.file) as capture:
        tick_hz = _exact_rate(capture.metadata["tick_hz"])
        # the window holds the ticks t with from <= t / tick_hz < to
        start = None if args.start is None else _ceil(args.start * tick_hz)
        stop = None if args.stop is None else _ceil(args.stop * tick_hz)
        window = make_window(capture, start, stop, args.channels)
        progress = _Progress("exporting")
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
                                    overwrite=args.force, progress=progress)
            elif fmt == "vcd":
                summary = export_vcd(window, output, overwrite=args.force)
            else:
                summary = export_csv(window, output, overwrite=args.force)
        finally:
            progress.done()
    record = dataclasses.asdict(summary)
    lines = [] if output == "-" else [
        f"wrote {summary.output} ({fmt}): {len(summary.channels)} channel(s) "
        f"{', '.join(summary.channels)}, ticks {summary.start_tick:,} to {summary.stop_tick:,}"
        + (f", {summary.samples:,} samples at {summary.samplerate:,} Hz"
           if summary.samples is not None else f", {summary.events:,} events")]
    _print_summary(args, record, lines, summary.warnings)
    return 0
