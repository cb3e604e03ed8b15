"""What the one pass over an event file (:func:`latscope.analysis.api.analyze_file`) carries
beside the :class:`~latscope.analysis.engine.Analyzer`: the ``--from``/``--to``
:class:`Window`, and for a frame capture the :class:`FramePass` that places its frame records
on their DV pulses and pairs them as the chunks arrive; :class:`RecordNames` places them again
for the forensics windows."""

import numpy as np

from latscope import LatscopeError
from latscope.analysis.definitions import resolve_channel
from latscope.analysis.engine import PacketTable
from latscope.analysis.forensics import FrameRecords
from latscope.analysis.frame_stream import FrameStream
from latscope.analysis.report.labels import class_label
from latscope.capture.events import Events
from latscope.capture.files.interop import window_ticks

__all__ = ["Window", "FramePass", "RecordNames", "reply_class", "unrecorded_classes"]


class Window:
    """``--from``/``--to`` applied to a file's chunks: :meth:`cut` keeps the events in
    ``[start, stop)`` ticks and notes the file's first and last event, :meth:`finish` records
    the window in the result's metadata (or refuses a window that held no event)."""

    def __init__(self, info, start_s, stop_s):
        self.start_s, self.stop_s = start_s, stop_s
        self.tick_hz = info.tick_hz
        self.start, self.stop = window_ticks(start_s, stop_s, info.tick_hz)
        self.first = self.last = None
        self.kept = 0

    @property
    def active(self):
        return self.start is not None or self.stop is not None

    def inside(self, time):
        """Boolean mask of ``time`` (ticks) within the window."""
        time = np.asarray(time)
        keep = np.ones(len(time), bool)
        if self.start is not None:
            keep &= time >= self.start
        if self.stop is not None:
            keep &= time < self.stop
        return keep

    def cut(self, chunks):
        for chunk in chunks:
            if not self.active:
                yield chunk
                continue
            if len(chunk.time):
                self.first = int(chunk.time[0]) if self.first is None else self.first
                self.last = int(chunk.time[-1])
            lo = 0 if self.start is None else int(np.searchsorted(chunk.time, self.start))
            hi = len(chunk.time) if self.stop is None else \
                int(np.searchsorted(chunk.time, self.stop))
            self.kept += max(0, hi - lo)
            yield Events(chunk.time[lo:hi], chunk.channel[lo:hi], chunk.rising[lo:hi])

    def losses(self, losses):
        """The loss records that meet the window."""
        if not self.active:
            return losses
        return [r for r in losses
                if (self.stop is None or r.first_time < self.stop)
                and (self.start is None or r.first_time + r.span >= self.start)]

    def finish(self, result):
        if not self.active:
            return
        if not self.kept:
            span = ("an empty file" if self.first is None else
                    f"{self.first / self.tick_hz:.6f} s to {self.last / self.tick_hz:.6f} s")
            raise LatscopeError(f"The --from/--to window must hold events of the capture "
                                f"({span}), not {_seconds(self.start_s, 'the start')} to "
                                f"{_seconds(self.stop_s, 'the end')}")
        result.metadata = dict(result.metadata, window={
            "from_s": None if self.start_s is None else float(self.start_s),
            "to_s": None if self.stop_s is None else float(self.stop_s),
            "start_tick": self.start, "stop_tick": self.stop, "events": self.kept})


def _seconds(value, open_end):
    return open_end if value is None else f"{float(value):.6f} s"


class FramePass:
    """Frame analysis in the one pass over a capture: its frame records tied to their DV pulses
    as the chunks arrive (``capture.files.frames.FramePlacer``, reading the records block by
    block) and paired by sequence number with the markers' edges
    (:class:`~latscope.analysis.frame_stream.FrameStream`), in memory bounded by what is still
    open. ``marker_meanings``: the map :func:`resolve_markers` settled on."""

    def __init__(self, source, marker_meanings, *, tick_hz, confidence, exact_limit,
                 keep_samples, window):
        from latscope.capture.files.frames import (  # why: amaranth, frame captures only
            FramePlacer,
        )
        from latscope.gateware.codec import FLAGS  # why: amaranth, frame captures only
        info = source.info
        meanings = marker_meanings or info.markers or {}
        self.marker_channels = {}
        for role, meaning in meanings.items():
            ch = resolve_channel(role, info.channel_names or None, meanings or None)
            if ch is not None:
                self.marker_channels[meaning] = ch
        # whether requests must carry the traffic magic depends on every record: read the
        # records (not the events) once before the pass
        magic = seq = False
        for block in info.frames:
            flags = block["flags"].astype(np.int64)
            magic |= bool(np.any(flags & FLAGS["traffic_magic"]))
            seq |= bool(np.any(flags & FLAGS["seq_valid"]))
        losses = [(r.first_time, r.span) for r in info.losses]
        # the window's records are placed among all of the capture's pulses (frame k is the k-th
        # pulse since the reset) and paired with the markers and losses inside the window
        inside = [(r.first_time, r.span) for r in window.losses(info.losses)]
        self.window = window
        self.info = info
        self.placer = FramePlacer(iter(info.frames), info.channel_names or {},
                                  tick_hz=float(info.metadata["tick_hz"]), losses=losses,
                                  counters=info.frame_counters)
        self.stream = FrameStream(tick_hz=tick_hz, flags=FLAGS,
                                  marker_meanings=list(self.marker_channels),
                                  losses=inside, counters=info.frame_counters, magic=magic,
                                  seq_without_magic=seq, reply_class=reply_class(info.metadata),
                                  confidence=confidence, exact_limit=exact_limit,
                                  keep_samples=keep_samples)

    #: Events handed on at a time: a file's chunks may be large, and what a step holds grows
    #: with the events in it.
    STEP = 1 << 15

    def add(self, chunk):
        for at in range(0, len(chunk.time), self.STEP):
            self._add(Events(*(col[at:at + self.STEP] for col in chunk)))

    def _add(self, chunk):
        placed = self._inside(self.placer.feed(chunk.time, chunk.channel, chunk.rising))
        markers = {}
        inside = self.window.inside(chunk.time)   # markers only in the --from/--to window
        for meaning, ch in self.marker_channels.items():
            mine = (chunk.channel == ch) & inside
            markers[meaning] = (np.asarray(chunk.time[mine]), np.asarray(chunk.rising[mine]))
        # every record and edge before this tick has been handed on, and (for truncation)
        # some record reaches it
        complete = int(chunk.time[-1])
        for limit in (self.placer.progress(), self.placer.max_time):
            if limit is not None:
                complete = min(complete, int(limit))
        self.stream.add(placed, markers, complete)

    def _inside(self, placed):
        """The records of ``placed`` whose first edge is inside the --from/--to window."""
        if not self.window.active:
            return placed
        keep = self.window.inside(placed.start)
        return type(placed)(placed.records[keep], placed.index[keep], placed.start[keep],
                            placed.end[keep])

    def finish(self, result):
        """Add each class's stages to ``result.stats`` as ``<stage>[<class>]``, so analyze,
        compare, report and the API show them like any measurement."""
        placed, unplaced, reasons, notes = self.placer.finish()
        end_time = self.placer.max_time if self.placer.max_time is not None else -1
        fa = self.stream.finish(self._inside(placed), end_time, unplaced)
        fa.unplaced_reasons = dict(reasons)
        fa.placement_note = self.placer.summary(unplaced, reasons, notes)
        result.frames = fa
        result.frame_counters = self.info.frame_counters   # the FPGA's per-class totals
        for cls, report in fa.classes.items():
            for stage, stats in report.stats.items():
                name = f"{stage}[{class_label(cls, result.metadata)}]"
                result.stats[name] = stats
                result.counts[name] = stats.counts
                if result.packets is not None:
                    at, ticks = report.samples[stage]
                    result.packets.append(PacketTable(name, at, {name: ticks},
                                                      {name: np.zeros(len(ticks), np.uint8)}))


class RecordNames:
    """The capture's frame records tied to their pulses in a pass over its events
    (``capture.files.frames.FramePlacer``), as the
    :class:`~latscope.analysis.forensics.FrameRecords` that name the pulses in a forensics
    window (class and size)."""

    def __init__(self, info, metadata):
        from latscope.capture.files.frames import (  # why: amaranth, frame captures only
            FramePlacer,
        )
        self.metadata = metadata
        self.placer = FramePlacer(iter(info.frames), info.channel_names or {},
                                  tick_hz=float(info.metadata["tick_hz"]),
                                  losses=[(r.first_time, r.span) for r in info.losses],
                                  counters=info.frame_counters)
        self.parts = []

    def feed(self, chunk):
        self.parts.append(self.placer.feed(chunk.time, chunk.channel, chunk.rising))

    def finish(self):
        placed = self.placer.finish()[0]
        parts = [p for p in (*self.parts, placed) if len(p.index)]
        start = np.concatenate([p.start for p in parts]) if parts else np.zeros(0, np.int64)
        rec = np.concatenate([p.records for p in parts]) if parts else placed.records[:0]
        return FrameRecords(start, np.asarray(rec["direction"]),
                            np.array([class_label(c, self.metadata) for c in rec["cls"]],
                                     dtype=object),
                            np.asarray(rec["length"]), unrecorded_classes(self.metadata))


def unrecorded_classes(metadata):
    """What a frame without a FRAME record is, from the capture config's ``[frames]`` table:
    ``"unrecorded (bg/other)"`` when it names the recorded classes, else ``"unrecorded"``.

    >>> unrecorded_classes({"frames": {"classes": {"0": "other", "1": "hp", "2": "bg"},
    ...                                "record": ["hp"]}})
    'unrecorded (other/bg)'
    """
    frames = (metadata or {}).get("frames") or {}
    recorded = set(frames.get("record") or ())
    others = [n for _, n in sorted((frames.get("classes") or {}).items(),
                                   key=lambda kv: int(kv[0])) if n not in recorded]
    return f"unrecorded ({'/'.join(others)})" if recorded and others else "unrecorded"


def reply_class(metadata):
    """How replies are limited by class (``analysis.frames.REPLY_CLASSES``): ``"any"`` when the
    capture config's ``[frames]`` table classified received frames but had no transmit rules (every
    transmitted frame is class 0, whatever the request's class), else ``"same"``.

    >>> reply_class({"frames": {"rules": {"rx": [{"cls": 1}], "tx": []}}}), reply_class({})
    ('any', 'same')
    """
    rules = (metadata.get("frames") or {}).get("rules") or {}
    return "any" if rules.get("rx") and not rules.get("tx") else "same"
