"""Value Change Dump export of a capture window, for GTKWave, Surfer and sigrok.

# Ref: IEEE Std 1364-2005 §18 (four-state VCD file format).

One 1-bit ``wire`` per exported channel, named by its role, in scope ``latscope``. Times are the
capture's ticks since the instrument's timestamp reset, converted exactly: the ``$timescale`` is
the coarsest of 1/10/100 s, ms, us, ns, ps, fs that divides the tick period (200 MHz ticks give
``1ns`` and times ``5 * tick``; 320 MHz ticks give ``1ps`` and ``3125 * tick``). When no such unit
exists (a 192 MHz tick is 5208.33 ps) the timescale is ``1fs`` and each time is rounded to the
nearest femtosecond: the error is at most 0.5 fs, edge order is kept, and ``round(time_fs *
tick_hz / 1e15)`` gives back the exact tick. The header's ``$comment`` states which case applies.
"""

import datetime
import json
import os
import re
from fractions import Fraction

import numpy as np

from latscope import __version__
from latscope.capture.files.outputs import open_output
from latscope.capture.files.reimport import DESCRIPTOR_TAG, export_descriptor
from latscope.capture.files.sigrok_write import ExportSummary

__all__ = ["choose_timescale", "vcd_identifier", "change_lines", "export_vcd"]

_UNITS = [("s", Fraction(1)), ("ms", Fraction(1, 10**3)), ("us", Fraction(1, 10**6)),
          ("ns", Fraction(1, 10**9)), ("ps", Fraction(1, 10**12)), ("fs", Fraction(1, 10**15))]


def choose_timescale(tick_hz):
    """Pick the VCD timescale for ticks of ``1 / tick_hz`` seconds.

    Parameters
    ----------
    tick_hz : fractions.Fraction or int

    Returns
    -------
    text : str
        The ``$timescale`` value, e.g. ``"1ns"``.
    per_tick : fractions.Fraction
        Timescale units per tick; an integer unless ``exact`` is false.
    exact : bool
        False when times must be rounded to the nearest femtosecond.

    Examples
    --------
    >>> choose_timescale(200_000_000)
    ('1ns', Fraction(5, 1), True)
    >>> choose_timescale(320_000_000)
    ('1ps', Fraction(3125, 1), True)
    >>> choose_timescale(192_000_000)[0::2]
    ('1fs', False)
    """
    period = 1 / Fraction(tick_hz)
    for name, unit in _UNITS:
        for multiple in (100, 10, 1):
            per_tick = period / (unit * multiple)
            if per_tick.denominator == 1:
                return f"{multiple}{name}", per_tick, True
    return "1fs", period / _UNITS[-1][1], False


def vcd_identifier(index):
    """The ``index``-th short VCD identifier code: ``!``, ``"``, ... ``~``, then two characters."""
    chars = [chr(c) for c in range(33, 127)]
    code = ""
    index += 1
    while index:
        index, digit = divmod(index - 1, len(chars))
        code = chars[digit] + code
    return code


def change_lines(changes):
    """The value-change lines of ``changes``, ``(time, identifier, value)`` in time order of one-bit
    wires: a ``#time`` line before the first change at each time.

    >>> change_lines([(0, "!", 1), (5, "!", 0), (5, '"', 1)])
    ['#0', '1!', '#5', '0!', '1"']
    """
    lines, last = [], None
    for time, identifier, value in changes:
        if time != last:
            lines.append(f"#{time}")
            last = time
        lines.append(f"{value}{identifier}")
    return lines


def _reference(name, used):
    ref = re.sub(r"[^A-Za-z0-9_]", "_", name) or "ch"
    if ref[0].isdigit():
        ref = "_" + ref
    candidate, n = ref, 1
    while candidate in used:
        n += 1
        candidate = f"{ref}_{n}"
    used.add(candidate)
    return candidate


def _converter(per_tick, exact):
    """Return ``f(times) -> list of int`` converting ticks to timescale units."""
    num, den = per_tick.numerator, per_tick.denominator
    if exact:
        def convert(times):
            if len(times) and int(np.abs(times).max()) < (1 << 62) // num:
                return (times.astype(np.int64) * num).tolist()
            return [t * num for t in times.tolist()]
    else:
        def convert(times):
            return [(2 * t * num + den) // (2 * den) for t in times.tolist()]
    return convert


def export_vcd(window, output, *, force=False):
    """Write a capture window as a VCD file.

    Parameters
    ----------
    window : latscope.capture.files.interop.Window
    output : str or os.PathLike
        The file to write, under :mod:`latscope.capture.files.outputs`'s policy (``"-"``: standard
        output).
    force : bool
        Replace an existing ``output`` (never the window's capture itself).

    Returns
    -------
    latscope.capture.files.sigrok_write.ExportSummary
        ``hidden_edges`` counts edges that do not change their channel's level (a VCD has only
        levels) or that repeat a channel at the same time.

    Notes
    -----
    ``$dumpvars`` at the window start holds the level of each channel after every edge at or
    before the start; later changes follow in time order; a last timestamp marks the window end.
    """
    output = os.fspath(output)
    timescale, per_tick, exact = choose_timescale(window.tick_hz)
    convert = _converter(per_tick, exact)
    codes = [vcd_identifier(i) for i in range(len(window.names))]
    used = set()
    refs = [_reference(name, used) for name in window.names]
    levels = list(window.initial)
    hidden = window.absorbed
    written = 0
    rounding = ("exact: one tick is " + f"{per_tick} x {timescale}" if exact else
                f"times rounded to the nearest fs (at most 0.5 fs); tick = "
                f"round(time_fs * {window.tick_hz} / 1e15)")
    descriptor = export_descriptor(window, "export vcd")
    with open_output(output, [window.capture.path], force=force,
                     encoding="ascii", newline="\n") as handle:
        handle.write(f"$date {datetime.datetime.now(datetime.timezone.utc).isoformat()} $end\n")
        handle.write(f"$version latscope {__version__} $end\n")
        handle.write(f"$comment tick_hz={window.tick_hz}; window ticks [{window.start}, "
                     f"{window.stop}) since the timestamp reset; {rounding} $end\n")
        # the capture's description (tick rate, roles, marker meanings) travels with the data
        handle.write(f"$comment {DESCRIPTOR_TAG} "
                     f"{json.dumps(descriptor, sort_keys=True)} $end\n")
        handle.write(f"$timescale {timescale} $end\n$scope module latscope $end\n")
        for code, ref, name in zip(codes, refs, window.names, strict=True):
            comment = f" $comment role {name} $end" if ref != name else ""
            handle.write(f"$var wire 1 {code} {ref} $end{comment}\n")
        handle.write("$upscope $end\n$enddefinitions $end\n")
        handle.write(f"#{convert(np.array([window.start]))[0]}\n$dumpvars\n")
        handle.writelines(f"{level}{code}\n" for level, code in zip(levels, codes, strict=True))
        handle.write("$end\n")
        last_time = None            # the last "#time" line written
        changed_now = set()         # channels already changed at last_time
        for time, channel, rising in window.blocks():
            lines = []
            for t, c, r in zip(convert(time), channel.tolist(), rising.tolist(), strict=True):
                r = int(r)
                if r == levels[c]:
                    hidden += 1         # no level change: nothing a VCD can show
                    continue
                if t != last_time:
                    lines.append(f"#{t}\n")
                    last_time, changed_now = t, set()
                elif c in changed_now:
                    hidden += 1         # a zero-width pulse: the reader keeps the last value
                changed_now.add(c)
                levels[c] = r
                lines.append(f"{r}{codes[c]}\n")
                written += 1
            handle.writelines(lines)
        end = convert(np.array([window.stop]))[0]
        if last_time is None or end > last_time:
            handle.write(f"#{end}\n")
    warnings = list(window.warnings)
    if hidden:
        warnings.append(f"{hidden} edge(s) do not change their channel's level and are not in "
                        f"the VCD (or fall exactly on the window start)")
    return ExportSummary(output=output, format="vcd", start_tick=window.start,
                         stop_tick=window.stop, events=written, samples=None, samplerate=None,
                         channels=list(window.names), hidden_edges=hidden, warnings=warnings)
