"""The window of a capture that the exporters (sigrok ``.sr``, VCD, CSV) share, the CSV exporter,
and the time and rate parsers of ``latscope import`` and ``latscope export``.

See ``docs/sigrok.md`` for the conventions (which sample an edge lands on, initial levels, what an
exported file cannot show) and the checks made on hostile input.
"""

import dataclasses
import json
import re
from fractions import Fraction

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.outputs import open_output
from latscope.capture.files.reimport import DESCRIPTOR_TAG, export_descriptor
from latscope.capture.files.sigrok_write import ExportSummary

__all__ = ["Window", "make_window", "parse_time", "parse_rate", "export_csv", "exact_rate",
           "window_ticks"]

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


def exact_rate(value):
    """``tick_hz`` from metadata (int or float) as an exact Fraction (a float by its shortest
    decimal form, which is what a person wrote)."""
    return Fraction(value) if isinstance(value, int) else Fraction(repr(float(value)))


def window_ticks(start_s, stop_s, tick_hz):
    """The ticks ``[start, stop)`` of the times ``t`` with ``start_s <= t / tick_hz < stop_s``
    (``--from``/``--to``, seconds since the instrument's timestamp reset; ``None``: open), as
    ``export``, ``analyze`` and ``report`` apply them.

    >>> window_ticks(Fraction(3, 2000), None, 800_000_000), window_ticks(None, 1e-6, 1000)
    ((1200000, None), (None, 1))
    """
    rate = tick_hz if isinstance(tick_hz, Fraction) else exact_rate(tick_hz)

    def ceil(seconds):     # a float by its shortest decimal form, as exact_rate reads one
        exact = seconds if isinstance(seconds, (int, Fraction)) else Fraction(repr(float(seconds)))
        value = exact * rate
        return -(-value.numerator // value.denominator)
    for name, value in (("--from", start_s), ("--to", stop_s)):
        if value is not None and value < 0:
            raise LatscopeError(f"{name} must be a time since the timestamp reset (>= 0), "
                                f"not {float(value)!r} s")
    start = None if start_s is None else ceil(start_s)
    stop = None if stop_s is None else ceil(stop_s)
    if start is not None and stop is not None and stop <= start:
        raise LatscopeError(f"the window is empty: --to must be later than --from "
                            f"({float(start_s)!r} s), not "
                            f"{float(stop_s)!r} s")
    return start, stop


@dataclasses.dataclass
class Window:
    """The part of a capture an exporter writes.

    Attributes
    ----------
    capture : latscope.capture.files.capfile.Capture
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
    capture : latscope.capture.files.capfile.Capture
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
    tick_hz = exact_rate(capture.metadata["tick_hz"])
    first, last = capture.first_time, capture.last_time
    if start is None:
        start = max(0, first - 1) if first is not None else 0
    if stop is None:
        stop = last + 1 if last is not None else start + 1
    if stop <= start:
        raise LatscopeError(f"the window is empty: --to ({stop} ticks) is not after --from "
                            f"({start} ticks)")
    if last is not None and start > last:
        # before anything is written: the capture (from the timestamp reset to its last event)
        # holds nothing after its end
        raise LatscopeError(
            f"the window must start within the capture (0 s to {float(last / tick_hz):.6f} s), "
            f"not at {float(start / tick_hz):.6f} s")
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


def export_csv(window, output, *, force=False):
    """Write the window's events as CSV: a first line ``# latscope {...}`` (the capture's tick
    rate, roles and marker meanings, see :mod:`latscope.capture.files.reimport`), then
    ``time_ns,channel,edge`` (channel is the role, edge is ``rising`` or ``falling``; time since
    the instrument's timestamp reset). ``output`` is written under
    :mod:`latscope.capture.files.outputs`'s policy (``"-"``: standard output); ``force`` replaces an
    existing file, never the window's capture itself.

    Returns
    -------
    latscope.capture.files.sigrok_write.ExportSummary
    """
    fmt = _ns_formatter(window.tick_hz)
    names = np.array(window.names, dtype=object)
    edge = np.array(["falling", "rising"], dtype=object)
    count = 0
    descriptor = export_descriptor(window, "export csv")
    with open_output(output, [window.capture.path], force=force,
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
