"""Tail forensics: why were the slowest packets slow?

For the slowest packets of one measurement (the ``top`` slowest, and every one beyond p99.9),
:func:`explain` lays out the window before each packet's stop: every edge in it (its own start
and stop, the other frames on the wire in both directions, interrupts and markers), the frames
on the wire as RX_DV/TX_EN (or CRS_DV) pulses with their durations, and the earlier packets of
the same measurement still in flight when it started (requests queued ahead of it).

Pure: arrays in (the packets' start ticks and latencies, the capture's edges), a
:class:`Forensics` out. ``latscope analyze --explain N`` prints it, :func:`latscope.analysis.
api.explain` reads a capture for it, and the report shows it.

>>> import numpy as np
>>> start = np.array([0, 1000, 2000, 3000])
>>> latency = np.array([100, 100, 900, 100])       # packet 2 is slow
>>> time = np.array([0, 100, 1000, 1100, 1500, 1600, 2000, 2900, 3000, 3100])
>>> channel = np.array([0, 3, 0, 3, 1, 1, 0, 3, 0, 3])
>>> rising = np.array([0, 1, 0, 1, 1, 0, 0, 1, 0, 1], dtype=bool)
>>> f = explain(start, latency, time, channel, rising, tick_hz=1_000_000_000,
...             channel_names=["rx_dv", "tx_en", "crs_dv", "m0"], measurement="rx.isr", top=1,
...             before_ns=600)
>>> p = f.packets[0]
>>> p.packet, p.latency_ns, [(e.t_ns, e.channel, e.rising) for e in p.events][:3]
(2, 900.0, [(-500.0, 'tx_en', True), (-400.0, 'tx_en', False), (0.0, 'rx_dv', False)])
>>> [(w.direction, w.start_ns, w.duration_ns, w.own) for w in p.frames]  # own: no rise here
[('tx', -500.0, 100.0, False), ('rx', 0.0, None, True)]
"""

import dataclasses

import numpy as np

from latscope import LatscopeError

__all__ = ["WindowEvent", "WireFrame", "SlowPacket", "Forensics", "FrameRecords", "slowest",
           "explain", "DV_CHANNELS", "format_forensics", "frames_summary"]

#: Channels whose pulses are frames on the wire, and their direction.
DV_CHANNELS = {"rx_dv": "rx", "crs_dv": "rx", "tx_en": "tx"}


@dataclasses.dataclass(frozen=True)
class WindowEvent:
    """One edge in a packet's window: ``t_ns`` after the packet's start (negative: before)."""
    t_ns: float
    channel: str
    rising: bool


@dataclasses.dataclass(frozen=True)
class WireFrame:
    """A frame on the wire in the window: ``direction`` ("rx" or "tx"), its first edge
    ``start_ns`` after the packet's start (its end where its start is not in the capture), and
    ``duration_ns`` (``None`` where its other edge is not in the capture; a frame the window
    cuts is completed from the edges beyond it). ``cls`` and ``length`` (bytes from the
    destination MAC through the FCS) come from the frame's FRAME record where the capture has
    one (``None`` otherwise: the class then is ``unrecorded``, the classes the capture counts
    but does not record, when known); ``own`` marks the packet's own frame (the received frame
    whose end starts it, or the reply whose start stops it)."""
    direction: str
    start_ns: float
    duration_ns: float | None
    cls: str | None = None
    length: int | None = None
    own: bool = False

    def describe(self, unrecorded=None):
        """``"rx hp 68 B"``, ``"tx 5.440 µs"`` (no record: the pulse's duration) ..."""
        what = self.cls if self.cls is not None else unrecorded
        size = (f"{self.length} B" if self.length is not None else
                f"{self.duration_ns / 1000:.3f} µs" if self.duration_ns is not None else
                "of unknown length")
        return " ".join(x for x in (self.direction, what, size) if x)


@dataclasses.dataclass(frozen=True)
class SlowPacket:
    """One slow packet: its index among the measurement's packets, start tick, latency, rank
    (1 = the slowest), the fraction of packets faster, whether it lies beyond p99.9, the
    earlier packets still in flight at its start (``queued``), and its window's edges and frames."""
    packet: int
    start_tick: int
    start_s: float
    latency_ns: float
    rank: int
    faster_fraction: float
    beyond_p999: bool
    queued: int
    events: tuple
    frames: tuple


@dataclasses.dataclass(frozen=True)
class Forensics:
    """The slow packets of one measurement: ``n`` packets measured, ``p50_ns`` and ``p999_ns``
    (``None`` below 1,000 packets, where no packet is "beyond p99.9" by count), the window
    before each packet's start (``before_ns``), and the :class:`SlowPacket` s, slowest first.
    ``unrecorded``: what a frame without a FRAME record is (e.g. ``"unrecorded (bg/other)"``),
    or ``None`` when the capture records no frames."""
    measurement: str
    n: int
    p50_ns: float
    p999_ns: float | None
    before_ns: float
    packets: tuple
    unrecorded: str | None = None


@dataclasses.dataclass(frozen=True)
class FrameRecords:
    """The capture's frame records, to name the pulses in a window: per record its first DV
    edge ``start`` (ticks; -1 where unplaced), ``direction`` (0 rx, 1 tx), class name ``cls``
    and ``length`` in bytes; ``unrecorded`` names the frames without a record."""
    start: np.ndarray
    direction: np.ndarray
    cls: np.ndarray
    length: np.ndarray
    unrecorded: str | None = None

    def lookup(self):
        """``{(direction, start tick): (class, length)}`` of the placed records."""
        names = {0: "rx", 1: "tx"}
        return {(names[int(d)], int(t)): (str(c), int(n))
                for t, d, c, n in zip(self.start, self.direction, self.cls, self.length,
                                      strict=True) if t >= 0}


def slowest(latency, top=10, beyond=None):
    """Indices of the ``top`` largest valid (>= 0) latencies and of every one above ``beyond``,
    slowest first; ties keep the earlier packet first.

    >>> slowest(np.array([5, -1, 9, 7, 9]), top=2).tolist()
    [2, 4]
    >>> slowest(np.array([5, 1, 9, 7]), top=1, beyond=4).tolist()
    [2, 3, 0]
    """
    latency = np.asarray(latency)
    valid = np.flatnonzero(latency >= 0)
    order = valid[np.argsort(-latency[valid], kind="stable")]
    keep = order[:top]
    if beyond is not None:
        keep = np.union1d(keep, order[latency[order] > beyond])
        keep = keep[np.argsort(-latency[keep], kind="stable")]
    return keep


#: How many events past a window's edge are searched for the other edge of a frame it cuts.
_REACH = 1 << 16


def _edge_beyond(time, channel, rising, index, ch, forward):
    """Tick of channel ``ch``'s next falling edge at or after ``index`` (``forward``), or of its
    last rising edge before ``index``; ``None`` within :data:`_REACH` events."""
    seg = slice(index, index + _REACH) if forward else slice(max(0, index - _REACH), index)
    hit = np.flatnonzero((np.asarray(channel[seg]) == ch)
                         & (np.asarray(rising[seg], dtype=bool) != forward))
    if not len(hit):
        return None
    return int(time[seg][hit[0] if forward else hit[-1]])


def _frames(time, channel, rising, a, b, s, tick_ns, names, latency_ns, records):
    """Pulses of the DV channels among the window's edges ``time[a:b]`` (sorted by start); a
    pulse the window cuts is completed from the edges beyond it; times in ns from the packet's
    start tick ``s``; ``records`` maps ``(direction, first edge tick)`` to a record's
    ``(class, length)``."""
    ticks = np.asarray(time[a:b])
    chs, rs = np.asarray(channel[a:b]), np.asarray(rising[a:b], dtype=bool)
    out = []

    def pulse(direction, rise, fall):
        cls, length = records.get((direction, rise), (None, None)) if rise is not None \
            else (None, None)
        start_ns = None if rise is None else (rise - s) * tick_ns
        end_ns = None if fall is None else (fall - s) * tick_ns
        own = (direction == "rx" and end_ns == 0) or (direction == "tx" and start_ns is not None
                                                      and start_ns == latency_ns)
        duration = None if start_ns is None or end_ns is None else end_ns - start_ns
        return WireFrame(direction, float(start_ns if start_ns is not None else end_ns),
                         duration, cls, length, own)
    for ch_index, name in enumerate(names):
        direction = DV_CHANNELS.get(name)
        if direction is None:
            continue
        sel = chs == ch_index
        tick, r = ticks[sel], rs[sel]
        k = 0
        if len(r) and not r[0]:          # the window opens inside a frame
            out.append(pulse(direction, _edge_beyond(time, channel, rising, a, ch_index, False),
                             int(tick[0])))
            k = 1
        while k < len(r):
            if r[k] and k + 1 < len(r) and not r[k + 1]:
                out.append(pulse(direction, int(tick[k]), int(tick[k + 1])))
                k += 2
            else:
                if r[k]:                 # the window closes inside a frame
                    out.append(pulse(direction, int(tick[k]),
                                     _edge_beyond(time, channel, rising, b, ch_index, True)))
                k += 1
    return tuple(sorted(out, key=lambda f: f.start_ns))


def frames_summary(packet, unrecorded=None):
    """The other frames on the wire in a packet's window, counted by direction, class and size:
    ``"rx hp 68 B ×2, rx unrecorded (bg/other) 5.440 µs ×1; tx hp 68 B ×1"`` (``"none"``)."""
    counts = {}
    for w in packet.frames:
        if not w.own:
            key = (w.direction, w.describe(unrecorded))
            counts[key] = counts.get(key, 0) + 1
    parts = []
    for direction in ("rx", "tx"):
        mine = [f"{text} ×{n}" for (d, text), n in counts.items() if d == direction]
        if mine:
            parts.append(", ".join(mine))
    return "; ".join(parts) or "none"


def explain(start, latency, time, channel, rising, *, tick_hz, channel_names, measurement,
            top=10, before_ns=None, records=None):
    """The slowest packets of one measurement, each with the window before it.

    Parameters
    ----------
    start, latency : array of int
        Per packet of the measurement: start tick and latency in ticks (-1 where none), as in a
        :class:`~latscope.analysis.engine.PacketTable`.
    time, channel, rising : arrays
        The capture's edges (sorted by time) covering at least every window; others are ignored.
    tick_hz : int
    channel_names : list of str
        Name per channel index.
    measurement : str
    top : int
        How many of the slowest to explain (every packet beyond p99.9 is added).
    before_ns : float, optional
        How far before its start a packet's window opens (default: its median latency, at
        least 10 µs): what was still being served when it arrived.
    records : FrameRecords, optional
        The capture's frame records: each pulse in a window that has one gets its class and
        length.

    Returns
    -------
    Forensics
    """
    if not (isinstance(top, (int, np.integer)) and top >= 1):
        raise LatscopeError(f"The number of packets to explain must be a positive integer, "
                            f"not {top!r}")
    start = np.asarray(start, dtype=np.int64)
    latency = np.asarray(latency, dtype=np.int64)
    time = np.asarray(time, dtype=np.int64)
    tick_ns = 1e9 / tick_hz
    ok = latency >= 0
    n = int(ok.sum())
    if not n:
        raise LatscopeError(f"{measurement} must have at least one measured packet to explain, "
                            f"not 0")
    values = np.sort(latency[ok])
    p50 = float(values[max(1, int(np.ceil(0.5 * n))) - 1]) * tick_ns
    p999 = float(values[int(np.ceil(0.999 * n)) - 1]) * tick_ns if n >= 1000 else None
    before = float(before_ns) if before_ns is not None else max(10_000.0, p50)
    beyond = None if p999 is None else p999 / tick_ns
    stops = np.where(ok, start + latency, -1)
    lookup = records.lookup() if records is not None else {}
    packets = []
    for rank, i in enumerate(slowest(latency, top, beyond), 1):
        s, lat = int(start[i]), int(latency[i])
        lo = s - int(round(before / tick_ns))
        a, b = np.searchsorted(time, [lo, s + lat], side="left")
        b = np.searchsorted(time, s + lat, side="right")
        ts = (time[a:b] - s) * tick_ns
        chs, rs = np.asarray(channel[a:b]), np.asarray(rising[a:b], dtype=bool)
        events = tuple(WindowEvent(float(t), channel_names[int(c)], bool(r))
                       for t, c, r in zip(ts, chs, rs, strict=True))
        earlier = slice(0, i)
        queued = int(np.count_nonzero(stops[earlier] > s))
        faster = float(np.count_nonzero(values < lat)) / n
        packets.append(SlowPacket(int(i), s, s / tick_hz, lat * tick_ns, rank, faster,
                                  p999 is not None and lat * tick_ns > p999, queued, events,
                                  _frames(time, channel, rising, a, b, s, tick_ns,
                                          channel_names, lat * tick_ns, lookup)))
    return Forensics(measurement, n, p50, p999, before, tuple(packets),
                     records.unrecorded if records is not None else None)


def format_forensics(f, *, max_events=40):
    """Text for the terminal: per slow packet a header line, then its window's edges."""
    head = (f"{f.measurement}: the {len(f.packets)} slowest of {f.n:,} packets (p50 "
            f"{f.p50_ns / 1000:.3f} µs"
            + (f", p99.9 {f.p999_ns / 1000:.3f} µs" if f.p999_ns is not None else
               ", no p99.9 below 1,000 packets") + f"); window: {f.before_ns / 1000:.3g} µs "
            f"before each start to its stop; times in µs from the start")
    lines = [head]
    for p in f.packets:
        rx = sum(1 for w in p.frames if w.direction == "rx")
        tx = sum(1 for w in p.frames if w.direction == "tx")
        lines.append(f"#{p.rank} packet {p.packet} at {p.start_s:.6f} s: {p.latency_ns / 1000:.3f}"
                     f" µs (slower than {p.faster_fraction:.2%}"
                     f"{', beyond p99.9' if p.beyond_p999 else ''}); {p.queued} earlier "
                     f"request(s) still queued; on the wire: {rx} rx, {tx} tx frame(s)")
        lines.append(f"    other frames on the wire: {frames_summary(p, f.unrecorded)}")
        shown = p.events[-max_events:]
        if len(p.events) > len(shown):
            lines.append(f"    ... {len(p.events) - len(shown)} earlier edge(s)")
        starts = {(w.direction, w.start_ns): w for w in p.frames}
        for e in shown:
            frame = starts.get((DV_CHANNELS.get(e.channel), e.t_ns)) if e.rising else None
            what = (f"  ({'its own frame: ' if frame.own else 'frame '}"
                    f"{frame.describe(f.unrecorded)})" if frame is not None else "")
            lines.append(f"    {e.t_ns / 1000:+10.3f}  {e.channel} "
                         f"{'rising' if e.rising else 'falling'}{what}")
    return "\n".join(lines)
