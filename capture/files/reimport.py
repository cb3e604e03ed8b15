"""Reading back what ``latscope export`` wrote as VCD or CSV, with the capture's description.

Every export carries a *descriptor*: the capture's tick rate, channel roles, marker meanings
and label (:func:`export_descriptor`). A VCD holds it in a ``$comment latscope {...} $end`` in
its header, a CSV in a first line ``# latscope {...}``, a sigrok file in its ``[latscope]``
metadata group (``marker m3=tx.xmit``; see :mod:`latscope.capture.files.sigrok`). Importing or
analysing an export therefore gives the same measurements as the original: the marker meanings
come back with the events (issue 9: ``m3 = tx.xmit`` must not come back as ``rx.fast``).

A VCD or CSV without a descriptor (from another tool) is read too; its tick rate must then be
given, and its markers with ``--markers`` where a measurement needs them.
"""

import csv
import io
import json
import os
import re
from fractions import Fraction

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.capfile import CaptureWriter
from latscope.capture.files.outputs import check_output, replacing
from latscope.capture.files.provenance import imported_metadata, provenance, with_step
from latscope.userio import os_error_message

__all__ = ["export_descriptor", "ExportedEvents", "read_vcd", "read_csv", "read_export",
           "import_export", "DESCRIPTOR_TAG"]

#: Marks the descriptor in a VCD ``$comment`` and a CSV's first line.
DESCRIPTOR_TAG = "latscope"

_TIMESCALE = re.compile(r"\s*(1|10|100)\s*(s|ms|us|ns|ps|fs)\s*")
_UNIT = {"s": Fraction(1), "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6),
         "ns": Fraction(1, 10**9), "ps": Fraction(1, 10**12), "fs": Fraction(1, 10**15)}


def export_descriptor(window, step=None):
    """The descriptor of an export of ``window`` (a :class:`latscope.capture.files.interop.Window`):
    ``tick_hz`` (exact, as ``"num/den"`` text when not whole), ``channels`` (output index ->
    role), ``markers`` (role -> meaning, only the exported marker channels), ``label``,
    ``source_file`` and ``provenance`` (:mod:`latscope.capture.files.provenance`, with ``step``,
    e.g. ``"export vcd"``, as its last step when given)."""
    metadata = window.capture.metadata or {}
    prov = provenance(metadata)
    tick = window.tick_hz
    markers = {role: meaning for role, meaning in (window.capture.markers or {}).items()
               if role in window.names}
    return {"tick_hz": int(tick) if tick.denominator == 1 else f"{tick.numerator}/"
                                                                f"{tick.denominator}",
            "channels": {str(i): name for i, name in enumerate(window.names)},
            "markers": markers, "label": metadata.get("label") or metadata.get("config"),
            "source_file": os.path.basename(window.capture.path),
            "provenance": with_step(prov, step, window.capture.path) if step else prov}


class ExportedEvents:
    """Events read from an export: ``time`` (int64 ticks), ``channel`` (uint8 output index),
    ``rising`` (bool), ``tick_hz`` (int), ``channel_names``, ``markers`` (``None`` when the file
    does not say), ``metadata`` (for a capture file's ``META``) and ``initial`` levels."""

    def __init__(self, time, channel, rising, tick_hz, channel_names, markers, metadata,
                 initial=None):
        self.time, self.channel, self.rising = time, channel, rising
        self.tick_hz, self.channel_names, self.markers = tick_hz, channel_names, markers
        self.metadata, self.initial = metadata, initial or {}


def _descriptor(text, path):
    try:
        value = json.loads(text)
    except ValueError as error:
        raise LatscopeError(f"{path}: the latscope descriptor is not valid JSON ({error})") \
            from None
    if not isinstance(value, dict):
        raise LatscopeError(f"{path}: the latscope descriptor is not a JSON object")
    return value


def _tick_hz(descriptor, override, path):
    value = override if override is not None else (descriptor or {}).get("tick_hz")
    if value is None:
        raise LatscopeError(f"{path}: the file does not say its tick rate (it was not written "
                            f"by latscope export); give it with --samplerate")
    try:
        rate = Fraction(value)
    except (ValueError, TypeError, ZeroDivisionError):
        raise LatscopeError(f"{path}: tick rate {value!r} is not a number") from None
    if rate <= 0 or rate.denominator != 1 or rate > 10**13:
        raise LatscopeError(f"{path}: tick rate {value!r} must be a whole number of Hz between "
                            f"1 and 1e13")
    return int(rate)


def _metadata(descriptor, tick_hz, names, markers, kind, path):
    meta = {"tick_hz": tick_hz, "channels": {str(i): n for i, n in enumerate(names)},
            "source": kind, "source_file": os.path.basename(path)}
    if markers is not None:
        meta["markers"] = markers
    if descriptor and descriptor.get("label"):
        meta["label"] = descriptor["label"]
    return imported_metadata(meta, (descriptor or {}).get("provenance"))


def _text(path, what):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise LatscopeError(f"cannot read {os_error_message(error)}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LatscopeError(f"{path}: not a text file; expected {what}") from None


def read_vcd(path, *, tick_hz=None):
    """Read a VCD of 1-bit wires (as ``latscope export --format vcd`` writes, or any VCD whose
    signals are scalars). Each change of a wire is an edge at the tick ``round(time *
    timescale * tick_hz)``; the ``$dumpvars`` values are initial levels, not edges.

    Returns
    -------
    ExportedEvents
    """
    path = os.fspath(path)
    text = _text(path, "a VCD file")
    descriptor = None
    timescale = None
    codes = {}                  # identifier code -> output channel
    names = []
    header, sep, body = text.partition("$enddefinitions")
    if not sep:
        raise LatscopeError(f"{path}: not a VCD file (no $enddefinitions)")
    for match in re.finditer(r"\$(\w+)(.*?)\$end", header, re.S):
        keyword, content = match.group(1), match.group(2).strip()
        if keyword == "comment" and content.startswith(DESCRIPTOR_TAG + " {"):
            descriptor = _descriptor(content[len(DESCRIPTOR_TAG):], path)
        elif keyword == "timescale":
            m = _TIMESCALE.fullmatch(content)
            if not m:
                raise LatscopeError(f"{path}: unsupported $timescale {content!r}")
            timescale = int(m.group(1)) * _UNIT[m.group(2)]
        elif keyword == "var":
            parts = content.split()
            if len(parts) < 4:
                raise LatscopeError(f"{path}: malformed $var {content!r}")
            if parts[1] != "1":
                continue                            # vectors and reals: not edges
            if parts[2] not in codes:
                codes[parts[2]] = len(names)
                names.append(parts[3])
    if timescale is None:
        raise LatscopeError(f"{path}: the VCD has no $timescale")
    if not names:
        raise LatscopeError(f"{path}: the VCD has no 1-bit signals")
    if len(names) > 256:
        raise LatscopeError(f"{path}: {len(names)} signals; latscope captures hold at most 256")
    if descriptor and isinstance(descriptor.get("channels"), dict):
        roles = {int(k): str(v) for k, v in descriptor["channels"].items() if str(k).isdigit()}
        names = [roles.get(i, n) for i, n in enumerate(names)]
    rate = _tick_hz(descriptor, tick_hz, path)
    per_unit = timescale * rate                      # ticks per timescale unit
    times, channels, risings = [], [], []
    levels = [None] * len(names)
    initial = {}
    now = None
    in_dump = False
    for token in body.split()[1:] if body.startswith("$end") else body.split():
        if token.startswith("#"):
            try:
                now = int(token[1:])
            except ValueError:
                raise LatscopeError(f"{path}: bad time {token!r}") from None
            continue
        if token in ("$dumpvars", "$dumpall", "$dumpon", "$dumpoff"):
            in_dump = True
            continue
        if token == "$end":
            in_dump = False
            continue
        if token[0] in "01xXzZ" and token[1:] in codes:
            channel = codes[token[1:]]
            value = token[0]
            if value not in "01":
                continue
            level = int(value)
            if in_dump or levels[channel] is None:
                levels[channel] = level
                initial[names[channel]] = level
                continue
            if level == levels[channel]:
                continue
            if now is None:
                raise LatscopeError(f"{path}: a value change before the first time")
            levels[channel] = level
            times.append(now)
            channels.append(channel)
            risings.append(bool(level))
    scaled = [t * per_unit for t in times]
    ticks = np.array([int(round(x)) for x in scaled], dtype=np.int64)
    if len(ticks) and np.any(ticks[1:] < ticks[:-1]):
        raise LatscopeError(f"{path}: times go backwards")
    markers = (descriptor or {}).get("markers") if descriptor else None
    meta = _metadata(descriptor, rate, names, markers, "vcd", path)
    return ExportedEvents(ticks, np.array(channels, np.uint8), np.array(risings, bool), rate,
                          dict(enumerate(names)), markers, meta, initial)


def read_csv(path, *, tick_hz=None):
    """Read ``time_ns,channel,edge`` CSV (as ``latscope export --format csv`` writes); the tick
    of each event is ``round(time_ns * tick_hz / 1e9)``.

    Returns
    -------
    ExportedEvents
    """
    path = os.fspath(path)
    text = _text(path, "CSV text")
    descriptor = None
    lines = text.splitlines()
    while lines and lines[0].startswith("#"):
        first = lines.pop(0)[1:].strip()
        if first.startswith(DESCRIPTOR_TAG + " {"):
            descriptor = _descriptor(first[len(DESCRIPTOR_TAG):], path)
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header = next(reader, None)
    if header != ["time_ns", "channel", "edge"]:
        raise LatscopeError(f"{path}: expected the header time_ns,channel,edge, found "
                            f"{','.join(header or [])!r}")
    rate = _tick_hz(descriptor, tick_hz, path)
    names = []
    if descriptor and isinstance(descriptor.get("channels"), dict):
        names = [str(v) for _, v in sorted((int(k), v) for k, v in
                                           descriptor["channels"].items() if str(k).isdigit())]
    index = {n: i for i, n in enumerate(names)}
    per_ns = Fraction(rate, 10**9)
    times, channels, risings = [], [], []
    for number, row in enumerate(reader, start=2):
        if len(row) != 3 or row[2] not in ("rising", "falling"):
            raise LatscopeError(f"{path}: line {number} is not time_ns,channel,rising|falling")
        try:
            t = Fraction(row[0])
        except (ValueError, ZeroDivisionError):
            raise LatscopeError(f"{path}: line {number}: {row[0]!r} is not a time in ns") \
                from None
        if row[1] not in index:
            if len(names) >= 256:
                raise LatscopeError(f"{path}: more than 256 channels")
            index[row[1]] = len(names)
            names.append(row[1])
        times.append(round(t * per_ns))
        channels.append(index[row[1]])
        risings.append(row[2] == "rising")
    ticks = np.array(times, dtype=np.int64)
    if len(ticks) and np.any(ticks[1:] < ticks[:-1]):
        raise LatscopeError(f"{path}: times go backwards")
    markers = (descriptor or {}).get("markers") if descriptor else None
    meta = _metadata(descriptor, rate, names, markers, "csv", path)
    return ExportedEvents(ticks, np.array(channels, np.uint8), np.array(risings, bool), rate,
                          dict(enumerate(names)), markers, meta)


def read_export(path, *, tick_hz=None):
    """:func:`read_vcd` or :func:`read_csv` by the file's suffix."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix == ".vcd":
        return read_vcd(path, tick_hz=tick_hz)
    if suffix == ".csv":
        return read_csv(path, tick_hz=tick_hz)
    raise LatscopeError(f"{path}: not a .vcd or .csv file")


def import_export(source, output, *, tick_hz=None, force=False):
    """Write the events of a VCD or CSV export into a capture file; returns the events read.

    ``output`` is written under :mod:`latscope.capture.files.outputs`'s policy: it appears only when
    complete and may never be ``source`` itself; ``force`` replaces an existing file."""
    # before reading anything
    check_output(output, [source], force=force, allow_stdout=False)
    events = read_export(source, tick_hz=tick_hz)
    meta = imported_metadata(events.metadata, events.metadata.get("provenance"), "import",
                             source)
    with replacing(output, [source], force=force, allow_stdout=False) as path:
        writer = CaptureWriter(path, meta, fsync=False, overwrite=True)
        try:
            writer.append_events(events.time, events.channel, events.rising)
            writer.close(reason="imported")
        except BaseException:
            writer.abandon()
            raise
    return events
