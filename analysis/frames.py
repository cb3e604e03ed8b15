"""Analysis by identity: frames paired by their sequence numbers, per class.

A pure core (arrays in, named results out): :func:`analyze_frames` takes the FRAME records of a
capture (``gateware.codec.FRAME_DTYPE``), their start and end ticks (from their DV edges,
``capture.frames.frame_edge_times``), optional marker edges and COUNTERS records, and returns a
:class:`FrameAnalysis` with, for each class of received frame:

* ``node.e2e``: the end of a received frame (its RX_DV falling edge) to the start of the first
  transmitted frame of the same class with the same sequence number (TX_EN rising edge): the
  node's end-to-end latency on the wire, paired by identity rather than by order;
* marker stages paired in order (:func:`~latscope.analysis.pairing.pair_in_order`): a receive
  marker (meaning ``rx.*``) against the ends of the received frames the firmware marks (those
  of latscope traffic where records carry the traffic magic, else every one), a transmit marker
  (``tx.*``) against the starts of every transmitted reply, so a request queued behind another
  never takes its predecessor's marker; a request whose marker the edges cannot decide is
  counted in ``ambiguous`` and left out of the stage. ``rx.isr`` is paired with the first
  interrupt at or after the frame's end, which may serve several frames (interrupt coalescing):
  each such frame is counted in ``coalesced`` and kept, except a request never answered, whose
  shared marker may be only the later request's (it was lost before the marker point): that
  one is counted ``ambiguous`` and left out;
* ``requests``, ``replied``, ``dropped`` (no reply within the reply window), ``unknown`` (the
  reply could have been lost on the link, or the capture ends within the reply window after the
  request), ``duplicates`` (a reply or
  request whose sequence number was already seen), ``reordered`` (a reply that left before the
  reply of an earlier request), ``fcs_errors`` (received frames of the class with a bad FCS or
  RX_ER) and, from COUNTERS records, the frames and bytes counted on the FPGA.

Only latscope's own traffic has a sequence number: when the sniffer reports the traffic magic
(FrameFlags ``traffic_magic``: the UDP payload begins with ``TRAFFIC_MAGIC``) on any record, the
requests and replies are the frames carrying it, so a background UDP frame long enough to hold
four bytes at the sequence offset is neither. A capture where no record has the flag (older
gateware, or a payload layout without the magic at a configured offset) falls back to every UDP
frame that holds a sequence number, and :attr:`FrameAnalysis.notes` says so.

>>> import numpy as np
>>> from latscope.gateware.codec import FRAME_DTYPE, FLAGS
>>> rec = np.zeros(4, FRAME_DTYPE)
>>> rec["direction"] = [0, 1, 0, 1]; rec["seq"] = [7, 7, 8, 8]
>>> rec["flags"] = FLAGS["seq_valid"] | FLAGS["fcs_ok"]
>>> start = np.array([0, 500, 1000, 1400]); end = np.array([100, 600, 1100, 1500])
>>> r = analyze_frames(rec, start, end, tick_hz=100_000_000)
>>> e2e = r.classes[0].stats["node.e2e"]
>>> e2e.n, e2e.min_ns, e2e.max_ns, r.classes[0].dropped
(2, 3000.0, 4000.0, 0)
"""

import dataclasses

import numpy as np

from latscope.analysis.marker_identity import CODE_BITS
from latscope.analysis.pairing import (
    AMBIGUOUS,
    DUPLICATE,
    LOST_GAP,
    MISSED,
    OK,
    TRUNCATED,
    UNDECIDED,
    LossIndex,
    pair_in_order,
    pair_sequence,
    pair_shared,
)
from latscope.analysis.stats import describe

__all__ = ["ClassReport", "FrameAnalysis", "analyze_frames", "DEFAULT_WINDOW_S",
           "REPLY_CLASSES", "MARKER_WINDOW_S", "SHARED_MARKERS", "counted_totals",
           "pair_by_identity"]

#: The reply window when the capture has no reply to measure it by (else twice the longest
#: request-to-reply time seen): a request without a reply this long after its end counts as
#: dropped, one closer to the end of the capture as unknown.
DEFAULT_WINDOW_S = 0.1
#: Longest marker-to-frame time of a marker stage (the definitions' ``window_ns``).
MARKER_WINDOW_S = 1e-3
#: Marker meanings paired with the first edge at or after the frame (one interrupt may serve
#: several frames); every other marker is paired in order, one marker per frame.
SHARED_MARKERS = ("rx.isr",)
#: How a request's class limits its replies: ``"same"``, transmitted frames of the request's class
#: (class names are shared by both directions' rule tables); ``"any"``, every transmitted frame (for
#: captures whose transmit direction was not classified).
REPLY_CLASSES = ("same", "any")

@dataclasses.dataclass
class ClassReport:
    """Results for one class of received (request) frames. Latencies are
    :class:`~latscope.analysis.stats.LatencyStats` keyed by stage name (``node.e2e``,
    ``rx.isr``, ...); counts are integers."""
    cls: int
    stats: dict
    requests: int
    replied: int
    dropped: int
    unknown: int
    duplicates: int
    reordered: int
    fcs_errors: int
    counted: dict
    samples: dict = dataclasses.field(default_factory=dict)   # stage -> (at ticks, ticks)
    #: stage -> requests whose marker could not be decided (left out of the stage)
    ambiguous: dict = dataclasses.field(default_factory=dict)
    #: stage -> requests whose marker also served another frame (kept, flagged)
    coalesced: dict = dataclasses.field(default_factory=dict)

    def to_dict(self):
        return {"class": self.cls, "requests": self.requests, "replied": self.replied,
                "dropped": self.dropped, "unknown": self.unknown,
                "ambiguous": dict(self.ambiguous), "coalesced": dict(self.coalesced),
                "duplicates": self.duplicates,
                "reordered": self.reordered, "fcs_errors": self.fcs_errors,
                "counted": self.counted,
                "stats": {k: v.to_dict() for k, v in self.stats.items()}}


@dataclasses.dataclass
class FrameAnalysis:
    """Per-class results (:class:`ClassReport` by class number), the records whose edges were
    not in the capture (``unplaced``), which frames had a sequence number (``magic``: only those
    with the traffic magic; else every UDP frame long enough), how replies were limited by class
    (``reply_class``, one of :data:`REPLY_CLASSES`) and sentences on the pairing (``notes``)."""
    classes: dict
    unplaced: int
    tick_hz: float
    #: ``{reason: records}`` of the unplaced records and one line for a user (empty when all
    #: are placed), from ``capture.frames.place_frames``.
    unplaced_reasons: dict = dataclasses.field(default_factory=dict)
    placement_note: str = ""
    magic: bool = False
    reply_class: str = "same"
    notes: list = dataclasses.field(default_factory=list)
    #: the reply window used (s): twice the longest reply time seen, or the one asked for
    reply_window_s: float = DEFAULT_WINDOW_S
    #: every frame record with its first DV edge (:class:`~latscope.analysis.forensics.
    #: FrameRecords`), set by the capture reader so tail forensics can name the frames on the wire
    placed: object = None

    def to_dict(self):
        return {"unplaced": self.unplaced, "unplaced_reasons": dict(self.unplaced_reasons),
                "pairing": {"magic": self.magic, "reply_class": self.reply_class,
                            "reply_window_s": self.reply_window_s,
                            "notes": list(self.notes)},
                "classes": {str(k): v.to_dict() for k, v in self.classes.items()}}


def counted_totals(counters, cls):
    """Last COUNTERS totals of ``cls`` per direction."""
    out = {}
    if counters is None:
        return out
    for d, name in ((0, "rx"), (1, "tx")):
        mine = counters[(counters["direction"] == d) & (counters["cls"] == cls)]
        if len(mine):
            last = mine[-1]
            out[name] = {k: int(last[k]) for k in ("frames", "octets", "fcs_errors", "dropped")}
    return out


def analyze_frames(records, start, end, *, tick_hz, markers=None, counters=None, losses=(),
                   window_s=None, confidence=0.95, magic=None, reply_class="same",
                   marker_window_s=MARKER_WINDOW_S, marker_ids=None):
    """Pair requests and replies by sequence number and compute per-class statistics.

    Parameters
    ----------
    records : FRAME_DTYPE array
    start, end : int64 arrays
        Each record's first and last DV edge, ticks; -1 where unknown (the record is skipped).
    tick_hz : float
    markers : dict of str -> int64 array, optional
        Rising-edge ticks of each marker, keyed by its meaning (``rx.isr``, ``tx.xmit`` ...).
    counters : COUNTER_DTYPE array, optional
    losses : iterable of (first_time, span)
        Event losses: a request whose reply window meets one is ``unknown``, not dropped.
    window_s : float, optional
        Longest request-to-reply time; a request without a reply by then is dropped, one whose
        window reaches past the end of the capture is unknown. Default: twice the longest
        request-to-reply time in the capture (:data:`DEFAULT_WINDOW_S` when nothing was
        answered), so the window follows the data.
    magic : bool, optional
        Requests and replies must carry the traffic magic (FrameFlags ``traffic_magic``). Default:
        if any record does, so a capture from a sniffer that reports it pairs only latscope
        traffic, and one that does not pairs every UDP frame holding a sequence number.
    reply_class : str
        ``"same"`` (default): a reply is a transmitted frame of the request's class; ``"any"``:
        of any class (the transmit direction was not classified).
    marker_window_s : float
        Longest time between a marker and its frame.
    marker_ids : dict of str -> int64 array, optional
        Per marker meaning whose markers carry identity (``docs/marker-identity.md``,
        :func:`~latscope.analysis.marker_identity.decode`), the decoded identity of each marker
        in ``markers[meaning]`` (-1 where none): that stage pairs with the request whose
        sequence number has the same low bits, not by order.

    Returns
    -------
    FrameAnalysis
    """
    if reply_class not in REPLY_CLASSES:
        raise ValueError(f"Reply class must be one of {', '.join(REPLY_CLASSES)}, "
                         f"not {reply_class!r}")
    from latscope.gateware.codec import FLAGS  # why: amaranth (record layouts), frame captures only
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    placed = (start >= 0) & (end >= 0)
    f = records["flags"].astype(np.int64)
    has_seq = (f & FLAGS["seq_valid"]) != 0
    has_magic = (f & FLAGS["traffic_magic"]) != 0
    notes = []
    if magic is None:
        magic = bool(has_magic.any())
        if not magic and has_seq.any():
            notes.append("no frame record carries the traffic magic (gateware from before "
                         "FrameFlags traffic_magic, or a payload without latscope's layout): "
                         "every UDP frame holding a sequence number was taken as a request or "
                         "reply")
    if magic:
        has_seq &= has_magic
    if reply_class == "any":
        notes.append("replies were taken from every class of transmitted frame")
    bad = ((f & FLAGS["fcs_ok"]) == 0) | ((f & FLAGS["rx_er"]) != 0)
    rx = placed & (records["direction"] == 0)
    tx_all = placed & (records["direction"] == 1) & has_seq & ~bad
    end_time = int(max(end.max(), start.max())) if len(end) else None
    loss_index = LossIndex(losses)
    marker_window = max(1, int(marker_window_s * tick_hz))
    # transmit markers against latscope's own replies (every class): a frame the DUT sends
    # without a marker (ARP, other traffic) would otherwise take a waiting marker
    # receive markers against the received frames the firmware marks: the measured traffic's
    # (the traffic magic, where records carry it: docs/zephyr-app.md, the driver shim marks
    # only datagrams to the app's ports), else every received frame; rx.isr (shared) serves all
    rx_marked = rx & has_magic if magic else rx
    marker_pairs = _pair_markers(markers or {}, rx, tx_all, start, end, marker_window,
                                 loss_index, end_time, rx_marked=rx_marked)
    if markers:
        notes.append("marker stages per class are paired in order against the recorded frames "
                     "(or by marker identity) and tied to their request by its sequence number; "
                     "the plain ones (rx.udp, tx.wire ...) pair each marker with the edges of "
                     "every frame, recorded or not, so they differ (or are ambiguous) where "
                     "other traffic interleaves: compare the per-class ones")
    per_class = {}
    longest = 0
    for cls in np.unique(records["cls"][rx]).tolist():
        tx = tx_all & (records["cls"] == cls) if reply_class == "same" else tx_all
        tx_idx = np.flatnonzero(tx)
        tx_idx = tx_idx[np.argsort(start[tx_idx], kind="stable")]
        mine = np.flatnonzero(rx & (records["cls"] == cls))
        mine = mine[np.argsort(end[mine], kind="stable")]
        req = mine[has_seq[mine] & ~bad[mine]]
        per_class[cls] = (tx_idx, mine, req)
        if window_s is None and len(req) and len(tx_idx):
            # every reply, however late: the reply window is then twice the longest of them
            wide = pair_sequence(end[req], records["seq"][req].astype(np.int64),
                                 start[tx_idx], records["seq"][tx_idx].astype(np.int64),
                                 np.iinfo(np.int64).max // 4)
            got = wide.status == OK
            if got.any():
                lat = start[tx_idx][wide.stop_index[got]] - end[req][got]
                longest = max(longest, int(lat.max()))
    if window_s is None:
        window = 2 * longest if longest else int(DEFAULT_WINDOW_S * tick_hz)
    else:
        window = int(window_s * tick_hz)
    classes = {}
    for cls, (tx_idx, mine, req) in per_class.items():
        tx_start, tx_seq = start[tx_idx], records["seq"][tx_idx].astype(np.int64)
        fcs_errors = int(np.count_nonzero(bad[mine]))
        req_end, req_seq = end[req], records["seq"][req].astype(np.int64)
        pairs = pair_sequence(req_end, req_seq, tx_start, tx_seq, window,
                              losses=loss_index, end_time=end_time)
        ok = pairs.status == OK
        reply = np.where(ok, tx_idx[np.maximum(pairs.stop_index, 0)] if len(tx_idx) else -1, -1)
        reply_start = np.where(ok, start[np.maximum(reply, 0)], -1)
        latency = reply_start[ok] - req_end[ok]
        stats, samples, ambiguous, coalesced = {}, {}, {}, {}
        if ok.any():
            samples["node.e2e"] = (req_end[ok], latency)
            stats["node.e2e"] = describe(latency, tick_hz, times=req_end[ok], name="node.e2e",
                                         confidence=confidence)
        # replies that left before the reply of an earlier request
        rs = reply_start[ok]
        reordered = int(np.count_nonzero(rs[1:] < np.maximum.accumulate(rs)[:-1])) \
            if len(rs) > 1 else 0
        # duplicates: repeated request numbers, and replies to a number already answered
        dup_requests = len(req_seq) - len(np.unique(req_seq))
        answered = np.isin(tx_seq, req_seq)
        dup_replies = int(np.count_nonzero((pairs.stop_class == DUPLICATE) & answered))
        for meaning, (frame_marker, frame_status, frame_shared) in marker_pairs.items():
            if meaning in (marker_ids or {}):
                values, at = pair_by_identity(meaning, markers[meaning], marker_ids[meaning],
                                          req_end, req_seq, ok, reply_start, marker_window)
                if len(values):
                    samples[meaning] = (at, values)
                    stats[meaning] = describe(values, tick_hz, times=at, name=meaning,
                                              confidence=confidence)
                continue
            if meaning.startswith("rx."):
                t, st, sh, at = (frame_marker[req], frame_status[req], frame_shared[req],
                                 req_end)
                # a request never answered whose marker also serves a later request: lost
                # before the marker point (the marker is the later one's) or after it (shared):
                # the edges cannot tell
                st = np.where((st == OK) & sh & ~ok, AMBIGUOUS, st)
                good = st == OK
                values = t[good] - req_end[good]
            else:
                idx = reply[ok]
                t, st, sh, at = (frame_marker[idx], frame_status[idx], frame_shared[idx],
                                 req_end[ok])
                # the marker must follow the request it answers
                good = (st == OK) & (t >= req_end[ok])
                values = reply_start[ok][good] - t[good]
            # undecided near the capture's end (TRUNCATED) is undecided all the same
            ambiguous[meaning] = int(np.count_nonzero((st == AMBIGUOUS) | (st == TRUNCATED)))
            coalesced[meaning] = int(np.count_nonzero(sh & good))
            at = at[good]
            if len(values):
                samples[meaning] = (at, values)
                stats[meaning] = describe(values, tick_hz, times=at, name=meaning,
                                          confidence=confidence)
                stats[meaning].counts.update(ambiguous=ambiguous[meaning],
                                             coalesced=coalesced[meaning])
        classes[cls] = ClassReport(
            cls=cls, stats=stats, requests=len(req), replied=int(np.count_nonzero(ok)),
            dropped=int(np.count_nonzero(pairs.status == MISSED)),
            unknown=int(np.count_nonzero((pairs.status == LOST_GAP)
                                         | (pairs.status == TRUNCATED))),
            duplicates=int(dup_requests + dup_replies), reordered=reordered,
            fcs_errors=fcs_errors, counted=counted_totals(counters, cls), samples=samples,
            ambiguous={k: v for k, v in ambiguous.items() if v},
            coalesced={k: v for k, v in coalesced.items() if v})
    return FrameAnalysis(classes, int(np.count_nonzero(~placed)), tick_hz, magic=magic,
                         reply_class=reply_class, notes=notes, reply_window_s=window / tick_hz)


def pair_by_identity(meaning, times, ids, req_end, req_seq, replied, reply_start, window):
    """One stage by marker identity: the marker whose code equals the low bits of the
    request's sequence number, first at or after the request's end (``rx.*``) or last before
    its reply starts and after its end (``tx.*``). Returns the latencies and request ends."""
    times = np.asarray(times, np.int64)
    ids = np.asarray(ids, np.int64)
    low = req_seq & ((1 << CODE_BITS) - 1)
    if meaning.startswith("rx."):
        r = pair_sequence(req_end, low, times, ids, window)
        good = r.status == OK
        t = times[r.stop_index[good]]
        return t - req_end[good], req_end[good]
    if not meaning.startswith("tx.") or not replied.any():
        return np.empty(0, np.int64), np.empty(0, np.int64)
    rs = reply_start[replied]
    # search backwards in time: negate, and the first "stop" at or after is the last before
    r = pair_sequence(-rs, low[replied], -times, ids, window)
    t = np.where(r.status == OK, times[np.maximum(r.stop_index, 0)], -1)
    good = (r.status == OK) & (t >= req_end[replied])
    return rs[good] - t[good], req_end[replied][good]


def _pair_markers(markers, rx, tx, start, end, window, losses, end_time, rx_marked=None):
    """Per marker meaning, per record: its marker tick, pair status and shared flag.

    Receive markers pair with the ends of the placed received frames ``rx_marked`` (default:
    every one, ``rx``; :data:`SHARED_MARKERS` always with every one), transmit markers with
    the starts of the transmitted frames ``tx`` (the marker comes first), in order
    (:func:`pair_in_order`); :data:`SHARED_MARKERS` with the first marker at or after the
    frame (:func:`pair_shared`). Records of the other direction, or unplaced, get -1 and MISSED.
    """
    out = {}
    n = len(start)
    for meaning, times in markers.items():
        times = np.sort(np.asarray(times, np.int64))
        marker = np.full(n, -1, np.int64)
        status = np.full(n, MISSED, np.uint8)
        shared = np.zeros(n, bool)
        if meaning.startswith("rx."):
            shared_marker = meaning in SHARED_MARKERS
            idx = np.flatnonzero(rx if shared_marker or rx_marked is None else rx_marked)
            idx = idx[np.argsort(end[idx], kind="stable")]
            pair = pair_shared if shared_marker else pair_in_order
            r = pair(end[idx], times, window, losses=losses, end_time=end_time)
            got = r.stop_index >= 0
            marker[idx[got]] = times[r.stop_index[got]]
            status[idx] = r.status
            if r.shared is not None:
                shared[idx] = r.shared
        elif meaning.startswith("tx."):
            idx = np.flatnonzero(tx)
            idx = idx[np.argsort(start[idx], kind="stable")]
            # the marker is the start, the frame the stop: each frame takes its marker
            r = pair_in_order(times, start[idx], window, losses=losses, end_time=end_time)
            got = r.status == OK
            marker[idx[r.stop_index[got]]] = times[got]
            status[idx] = np.where(r.stop_class == UNDECIDED, AMBIGUOUS, MISSED)
            status[idx[r.stop_index[got]]] = OK
        else:
            continue
        out[meaning] = (marker, status, shared)
    return out
