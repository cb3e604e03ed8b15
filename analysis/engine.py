"""The analysis engine: events in, per-packet latencies and statistics out, chunk by chunk.

:class:`Analyzer` resolves measurement definitions against a capture's channels and markers,
pairs start and stop edges with :class:`~latscope.analysis.pairing.StreamPairer` (one per start
edge, so the stages of a packet stay together), and feeds the latencies into
:class:`~latscope.analysis.stats.LatencyAccumulator` s. It never reads files: the caller hands it
arrays, so memory is bounded by the chunk size plus the open packets of one window.

>>> import numpy as np
>>> from latscope.analysis.definitions import default_definitions
>>> time = np.array([0, 100, 130, 200, 300, 345])          # ticks
>>> channel = np.array([0, 0, 3, 3, 0, 3])                 # rx_dv, rx_dv, m0, m0, rx_dv, m0
>>> rising = np.array([1, 0, 1, 0, 0, 1], dtype=bool)
>>> r = analyze_events(time, channel, rising, tick_hz=100_000_000,
...                    definitions=default_definitions().select(["rx.isr"]))
>>> r.stats["rx.isr"].n, r.stats["rx.isr"].min_ns, r.stats["rx.isr"].max_ns
(2, 300.0, 450.0)
"""

import dataclasses
import math

import numpy as np

from latscope import LatscopeError
from latscope.analysis.definitions import MARKER_ALIASES, default_definitions, resolve_channel
from latscope.analysis.marker_identity import marker_rises
from latscope.analysis.pairing import (
    AMBIGUOUS,
    LOST_GAP,
    MISSED,
    OK,
    TRUNCATED,
    LossIndex,
    StreamPairer,
)
from latscope.analysis.stats import DEFAULT_EXACT_LIMIT, LatencyAccumulator
from latscope.capture.files.metadata import channel_offsets

__all__ = ["Analyzer", "AnalysisResult", "PacketTable", "analyze_events", "analyze_chunks"]


@dataclasses.dataclass
class PacketTable:
    """Per-packet records of one start edge: ``start`` ticks, and per measurement the latency in
    ticks (-1 where none) and the pair status (see :data:`pairing.STATUS_NAMES`)."""
    start_edge: str
    start: np.ndarray
    latency: dict
    status: dict


@dataclasses.dataclass
class AnalysisResult:
    """Named results of an analysis.

    Attributes
    ----------
    stats : dict of str -> LatencyStats
        Per measurement.
    stages : dict of str -> LatencyStats
        Per stage difference (``stop - start`` of two measurements on the same packet).
    counts : dict of str -> dict
        Per measurement: ``packets`` (start edges), ``ok``, ``missed``, ``lost_gap``,
        ``truncated``, ``ambiguous`` (packets whose stop the edges cannot decide, left out of
        the statistics: :func:`pairing.pair_in_order`), ``spurious``, ``duplicate``,
        ``lost_stops``, ``undecided`` (stops of the ambiguous packets).
    unavailable : dict of str -> str
        Measurements not computed, with the reason (a channel the capture lacks).
    packets : list of PacketTable or None
        Per-packet records, when asked for.
    tick_hz : int
    events : int
        Events analysed.
    losses : list of (first_time, span)
    duration_s : float
    metadata : dict
    """
    stats: dict
    stages: dict
    counts: dict
    unavailable: dict
    packets: list | None
    tick_hz: int
    events: int
    losses: list
    duration_s: float
    metadata: dict = dataclasses.field(default_factory=dict)
    frames: object = None       # analysis.frames.FrameAnalysis for captures with frame records
    frame_counters: object = None   # gateware.codec.COUNTER_DTYPE records (the FPGA's totals)

    @property
    def resolution_ns(self):
        return 1e9 / self.tick_hz

    @property
    def ambiguous(self):
        """``{measurement: packets}`` whose pairing could not be decided and that were left out
        of the statistics (plain and per-class measurements; only those with any)."""
        out = {}
        for name, s in self.stats.items():
            k = int((s.counts or {}).get("ambiguous", 0))
            if k:
                out[name] = k
        return out

    def to_dict(self):
        """JSON-ready dict: every figure in ns."""
        return {"tick_hz": self.tick_hz, "resolution_ns": self.resolution_ns,
                "events": self.events, "duration_s": self.duration_s,
                "losses": [{"first_time": a, "span": b} for a, b in self.losses],
                "measurements": {k: v.to_dict() for k, v in self.stats.items()},
                "stages": {k: v.to_dict() for k, v in self.stages.items()},
                "unavailable": dict(self.unavailable),
                "ambiguous": self.ambiguous,
                "frames": self.frames.to_dict() if self.frames is not None else None,
                "config": self.metadata.get("config"), "source": self.metadata.get("source"),
                "integrity": self.metadata.get("integrity"),
                "marker_map": self.metadata.get("marker_map")}


def _tick_hz(value):
    """Ticks per second as an int (capture metadata may hold it as a float such as 3.2e8)."""
    try:
        as_int = int(round(float(value)))
    except (TypeError, ValueError):
        as_int = 0
    if isinstance(value, bool) or as_int <= 0 or abs(float(value) - as_int) > 1e-6 * as_int:
        raise LatscopeError(f"tick_hz must be a positive whole number of ticks per second, "
                            f"not {value!r}")
    return as_int


def _loss_spans(losses):
    out = []
    for loss in losses or ():
        if isinstance(loss, dict):
            out.append((int(loss["first_time"]), int(loss["span"])))
        elif hasattr(loss, "first_time"):
            out.append((int(loss.first_time), int(loss.span)))
        else:
            first, span = loss[0], loss[1]
            out.append((int(first), int(span)))
    return out


class Analyzer:
    """Streaming analysis of one capture.

    Parameters
    ----------
    definitions : Definitions, optional
        Default: :func:`definitions.default_definitions`.
    tick_hz : int
        Instrument ticks per second.
    channel_names : dict, optional
        Channel index -> role (default: the instrument's standard roles).
    markers : dict, optional
        Marker role -> meaning (default: the standard marker table).
    losses : iterable, optional
        Loss records (objects or dicts with ``first_time`` and ``span``, or pairs), ticks.
    keep_packets : bool
        Keep per-packet records (memory grows with the capture).
    exact_limit : int
        Values kept per measurement for exact percentiles before switching to the histogram.
    confidence : float
        Confidence level of percentile intervals.
    require : iterable of str
        Measurements that must be computable (raise instead of skipping).
    ns_histograms : bool
        Keep each measurement's latencies in whole ns for ``.hlog`` export.
    metadata : dict, optional
        The capture's metadata, kept in the result (``not_measured`` points are not computed).
    offsets : array_like of int, optional
        Per channel index, ticks to subtract from that channel's edge times (the calibration
        offsets :func:`latscope.capture.files.open.open_events` parses); default: those stored in
        ``metadata`` (:func:`latscope.capture.files.metadata.channel_offsets`).
    coded_markers : iterable of str
        Marker channels (role, meaning or alias) whose markers carry an identity code
        (``docs/marker-identity.md``): only the first rising edge of each marker counts, the
        code pulses after it are not markers.
    """

    def __init__(self, definitions=None, *, tick_hz, channel_names=None, markers=None,
                 losses=(), keep_packets=False, exact_limit=DEFAULT_EXACT_LIMIT,
                 confidence=0.95, require=(), metadata=None, ns_histograms=False,
                 offsets=None, coded_markers=()):
        self.tick_hz = _tick_hz(tick_hz)
        self.definitions = definitions if definitions is not None else default_definitions()
        self.confidence = confidence
        self.keep_packets = keep_packets
        self.metadata = dict(metadata or {})
        self.loss_spans = _loss_spans(losses)
        self.losses = LossIndex(self.loss_spans)
        self.unavailable = {}
        resolved = {}
        # Points the DUT firmware reported it cannot mark on its board (GET_INFO not_measured,
        # e.g. rx.isr on native_sim): their stages are "not measured", never a pulse width.
        not_measured = set(self.metadata.get("not_measured") or ())
        for m in self.definitions.measurements:
            absent = [MARKER_ALIASES.get(c, c) for c in (m.start.channel, m.stop.channel)
                      if MARKER_ALIASES.get(c, c) in not_measured]
            if absent:
                self.unavailable[m.name] = (f"not measured: the DUT cannot mark {absent[0]} "
                                            f"on this board")
                continue
            a = resolve_channel(m.start.channel, channel_names, markers)
            b = resolve_channel(m.stop.channel, channel_names, markers)
            if a is None or b is None:
                missing = m.start.channel if a is None else m.stop.channel
                self.unavailable[m.name] = f"the capture has no channel for {missing!r}"
                continue
            if m.association == "sequence":
                self.unavailable[m.name] = "the capture carries no sequence numbers"
                continue
            resolved[m.name] = (m, (a, m.start.rising), (b, m.stop.rising))
        # chained stages whose predecessor is unavailable cannot be computed either
        changed = True
        while changed:
            changed = False
            for name, (m, _, _) in list(resolved.items()):
                if m.after and m.after not in resolved:
                    del resolved[name]
                    self.unavailable[name] = f"it is chained after {m.after!r}, not computed"
                    changed = True
        for name in require:
            if name in self.unavailable:
                raise LatscopeError(f"cannot compute {name}: {self.unavailable[name]}")
        # group by start edge; order each group so that 'after' stages come first
        groups = {}
        for m, start, stop in resolved.values():
            groups.setdefault(start, []).append((m, stop))
        self.groups = []
        for start, members in groups.items():
            ordered, placed = [], set()
            while len(ordered) < len(members):
                for m, stop in members:
                    if m.name not in placed and (m.after is None or m.after in placed):
                        ordered.append((m, stop))
                        placed.add(m.name)
            names = [m.name for m, _ in ordered]
            windows = [max(1, math.ceil(m.window_ns * self.tick_hz / 1e9)) for m, _ in ordered]
            after = [names.index(m.after) if m.after else None for m, _ in ordered]
            pairer = StreamPairer(names, windows, after, self.losses)
            label = str(ordered[0][0].start)
            self.groups.append({"start": start, "stops": [s for _, s in ordered],
                                "names": names, "pairer": pairer, "label": label,
                                "batches": [] if keep_packets else None})
        self.acc = {name: LatencyAccumulator(name, self.tick_hz, exact_limit=exact_limit,
                                             ns_histogram=ns_histograms)
                    for g in self.groups for name in g["names"]}
        self.counts = {name: dict(packets=0, ok=0, missed=0, lost_gap=0, truncated=0,
                                  ambiguous=0)
                       for name in self.acc}
        self.stage_defs = []
        for s in self.definitions.stages:
            ga = [g for g in self.groups if s.start in g["names"] and s.stop in g["names"]]
            if not ga:
                if s.start in self.acc and s.stop in self.acc:
                    raise LatscopeError(f"stage {s.name!r}: {s.start} and {s.stop} start on "
                                        f"different edges")
                self.unavailable[s.name] = f"needs both {s.start} and {s.stop}"
                continue
            self.stage_defs.append((s, ga[0]))
        self.stage_acc = {s.name: LatencyAccumulator(s.name, self.tick_hz,
                                                     exact_limit=exact_limit)
                          for s, _ in self.stage_defs}
        self.stage_disorder = {s.name: 0 for s, _ in self.stage_defs}
        self.stop_seen = dict.fromkeys(self.acc, 0)
        codes = set()
        for g in self.groups:
            codes.add(g["start"])
            codes.update(g["stops"])
        self.codes = sorted(codes)
        self._code_of = {c: np.uint8(c[0] * 2 + int(c[1])) for c in self.codes}
        self._lut = np.zeros(256, dtype=bool)
        for k in self._code_of.values():
            self._lut[k] = True
        # Per-channel timing offsets measured by `latscope selftest --calibrate` (stored in the
        # capture's metadata): each channel's edges are moved back by its offset before pairing.
        # An edge may then land before edges of other channels already seen, so only the time
        # up to the last event minus the largest positive offset counts as complete.
        n_codes = max((c[0] for c in self.codes), default=-1) + 1
        if offsets is None:
            self._offsets = channel_offsets(self.metadata, n_codes)
        else:
            self._offsets = np.zeros(max(n_codes, len(offsets)), np.int64)
            self._offsets[:len(offsets)] = offsets
        self._offset_lag = 0 if self._offsets is None else max(0, int(self._offsets.max(initial=0)))
        self._coded = {}
        for name in coded_markers:
            ch = resolve_channel(name, channel_names, markers)
            if ch is None:
                raise LatscopeError(f"coded marker must be a marker channel of the capture, "
                                    f"not {name!r}")
            self._coded[ch] = None            # the last pulse seen (marker_rises state)
        self.events = 0
        self.first_time = None
        self.last_time = None

    def feed(self, time, channel, rising):
        """Analyse one chunk of events (times non-decreasing, continuing the previous chunk)."""
        time = np.asarray(time, dtype=np.int64)
        if not time.size:
            return
        if self.last_time is not None and time[0] < self.last_time:
            raise LatscopeError("events must arrive in non-decreasing time order")
        if time.size > 1 and np.any(time[1:] < time[:-1]):
            raise LatscopeError("events must arrive in non-decreasing time order")
        channel = np.asarray(channel)
        rising = np.asarray(rising, dtype=bool)
        if channel.dtype != np.uint8:
            if channel.size and (channel.min() < 0 or channel.max() > 127):
                raise LatscopeError("channel numbers must be between 0 and 127")
            channel = channel.astype(np.uint8)
        self.events += int(time.size)
        if self.first_time is None:
            self.first_time = int(time[0])
        self.last_time = int(time[-1])
        if self._coded:
            time, channel, rising = self._drop_code_pulses(time, channel, rising)
        code = (channel << 1) | rising.view(np.uint8)
        # keep only the edges some measurement uses, then split them by (channel, edge)
        wanted = self._lut[code]
        time, code = time[wanted], code[wanted]
        if self._offsets is None:
            edges = {c: time[code == k] for c, k in self._code_of.items()}
        else:
            edges = {c: time[code == k] - self._offsets[c[0]] for c, k in self._code_of.items()}
        self._advance(edges, self.last_time - self._offset_lag)

    def _drop_code_pulses(self, time, channel, rising):
        """Keep, on coded marker channels, only the rising edge that begins each marker."""
        keep = np.ones(len(time), bool)
        for ch, state in self._coded.items():
            sel = np.flatnonzero(channel == ch)
            if len(sel):
                begins, self._coded[ch] = marker_rises(time[sel], rising[sel], state)
                keep[sel[rising[sel] & ~begins]] = False
        return time[keep], channel[keep], rising[keep]

    def _advance(self, edges, complete_time):
        for g in self.groups:
            empty = np.empty(0, dtype=np.int64)
            starts = edges.get(g["start"], empty) if edges else empty
            stops = [edges.get(s, empty) if edges else empty for s in g["stops"]]
            s, lat, status = g["pairer"].feed(
                starts, stops, complete_time,
                end_time=self.last_time if complete_time is None else None)
            for name, st in zip(g["names"], stops, strict=True):
                self.stop_seen[name] += len(st)
            if not len(s):
                continue
            for name, lv, st in zip(g["names"], lat, status, strict=True):
                ok = st == OK
                self.acc[name].add(lv[ok], s[ok])
                c = self.counts[name]
                c["packets"] += len(s)
                c["ok"] += int(ok.sum())
                c["missed"] += int(np.count_nonzero(st == MISSED))
                c["lost_gap"] += int(np.count_nonzero(st == LOST_GAP))
                c["truncated"] += int(np.count_nonzero(st == TRUNCATED))
                c["ambiguous"] += int(np.count_nonzero(st == AMBIGUOUS))
            for stage, group in self.stage_defs:
                if group is not g:
                    continue
                a = lat[g["names"].index(stage.start)]
                b = lat[g["names"].index(stage.stop)]
                both = (a >= 0) & (b >= 0)
                diff = b - a
                good = both & (diff >= 0)
                self.stage_disorder[stage.name] += int(np.count_nonzero(both & (diff < 0)))
                self.stage_acc[stage.name].add(diff[good], s[good])
            if g["batches"] is not None:
                g["batches"].append((s, lat, status))

    def finish(self):
        """Close the open packets and return the :class:`AnalysisResult`."""
        self._advance(None, None)
        stats = {}
        by_name = {m.name: m for m in self.definitions.measurements}
        for name, acc in self.acc.items():
            if not self.stop_seen[name]:
                self.unavailable[name] = f"no {by_name[name].stop} edge in the capture"
                continue
            counts = dict(self.counts[name])
            pc = next(g["pairer"].counts[name] for g in self.groups if name in g["names"])
            counts.update(pc)
            stats[name] = acc.result(confidence=self.confidence, counts=counts)
        stages = {}
        for stage, _ in self.stage_defs:
            if stage.start not in stats or stage.stop not in stats:
                self.unavailable[stage.name] = f"needs both {stage.start} and {stage.stop}"
                continue
            stages[stage.name] = self.stage_acc[stage.name].result(
                confidence=self.confidence,
                counts={"out_of_order": self.stage_disorder[stage.name]})
        packets = None
        if self.keep_packets:
            packets = []
            for g in self.groups:
                batches = g["batches"]
                start = np.concatenate([b[0] for b in batches]) if batches else \
                    np.empty(0, dtype=np.int64)
                lat, st = {}, {}
                for k, name in enumerate(g["names"]):
                    lat[name] = np.concatenate([b[1][k] for b in batches]) if batches else \
                        np.empty(0, dtype=np.int64)
                    st[name] = np.concatenate([b[2][k] for b in batches]) if batches else \
                        np.empty(0, dtype=np.uint8)
                packets.append(PacketTable(g["label"], start, lat, st))
        duration = ((self.last_time - self.first_time) / self.tick_hz
                    if self.first_time is not None else 0.0)
        return AnalysisResult(stats, stages, {k: v.counts for k, v in stats.items()},
                              self.unavailable, packets, self.tick_hz, self.events,
                              self.loss_spans, duration, self.metadata)


def analyze_chunks(chunks, **kwargs):
    """Analyse an iterable of ``(time, channel, rising)`` chunks; keyword arguments as
    :class:`Analyzer`. Returns an :class:`AnalysisResult`."""
    analyzer = Analyzer(**kwargs)
    for time, channel, rising in chunks:
        analyzer.feed(time, channel, rising)
    return analyzer.finish()


def analyze_events(time, channel, rising, **kwargs):
    """Analyse event arrays held in memory; keyword arguments as :class:`Analyzer`."""
    return analyze_chunks([(time, channel, rising)], **kwargs)

