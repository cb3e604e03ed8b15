"""Analysis by identity: frames paired by their sequence numbers, per class.

A pure core (arrays in, named results out): :func:`analyze_frames` takes the FRAME records of a
capture (``gateware.codec.FRAME_DTYPE``), their start and end ticks (from their DV edges,
``capture.frames.frame_edge_times``), optional marker edges and COUNTERS records, and returns a
:class:`FrameAnalysis` with, for each class of received frame:

* ``node.e2e``: the end of a received frame (its RX_DV falling edge) to the start of the first
  transmitted frame of the same class with the same sequence number (TX_EN rising edge): the
  node's end-to-end latency on the wire, paired by identity rather than by order;
* marker stages chained from *their* frame: a receive marker (meaning ``rx.*``) is the first
  rising edge after the request's end and before the next request of the class ends; a transmit
  marker (``tx.*``) is the last rising edge before the reply starts and after the request ended;
* ``requests``, ``replied``, ``dropped`` (no reply within the window), ``unknown`` (the reply
  could have been lost on the link or fall after the end of the capture), ``duplicates`` (a reply or
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

from latscope.analysis.pairing import (
    DUPLICATE,
    LOST_GAP,
    MISSED,
    OK,
    TRUNCATED,
    LossIndex,
    pair_sequence,
)
from latscope.analysis.stats import describe

__all__ = ["ClassReport", "FrameAnalysis", "analyze_frames", "DEFAULT_WINDOW_S",
           "REPLY_CLASSES"]

#: A request without a reply this long after its end counts as dropped.
DEFAULT_WINDOW_S = 0.1
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

    def to_dict(self):
        return {"class": self.cls, "requests": self.requests, "replied": self.replied,
                "dropped": self.dropped, "unknown": self.unknown,
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

    def to_dict(self):
        return {"unplaced": self.unplaced, "unplaced_reasons": dict(self.unplaced_reasons),
                "pairing": {"magic": self.magic, "reply_class": self.reply_class,
                            "notes": list(self.notes)},
                "classes": {str(k): v.to_dict() for k, v in self.classes.items()}}


def _counted(counters, cls):
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
                   window_s=DEFAULT_WINDOW_S, confidence=0.95, magic=None, reply_class="same"):
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
    window_s : float
        Longest request-to-reply time; a request without a reply by then is dropped.
    magic : bool, optional
        Requests and replies must carry the traffic magic (FrameFlags ``traffic_magic``). Default:
        if any record does, so a capture from a sniffer that reports it pairs only latscope
        traffic, and one that does not pairs every UDP frame holding a sequence number.
    reply_class : str
        ``"same"`` (default): a reply is a transmitted frame of the request's class; ``"any"``:
        of any class (the transmit direction was not classified).

    Returns
    -------
    FrameAnalysis
    """
    if reply_class not in REPLY_CLASSES:
        raise ValueError(f"Reply class must be one of {', '.join(REPLY_CLASSES)}, "
                         f"not {reply_class!r}")
    # the flag bits come from the gateware layouts (amaranth): only frame captures import them
    from latscope.gateware.codec import FLAGS
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    placed = (start >= 0) & (end >= 0)
    window = int(window_s * tick_hz)
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
    classes = {}
    for cls in np.unique(records["cls"][rx]).tolist():
        tx = tx_all & (records["cls"] == cls) if reply_class == "same" else tx_all
        tx_idx = np.flatnonzero(tx)
        tx_idx = tx_idx[np.argsort(start[tx_idx], kind="stable")]
        tx_start, tx_seq = start[tx_idx], records["seq"][tx_idx].astype(np.int64)
        mine = np.flatnonzero(rx & (records["cls"] == cls))
        mine = mine[np.argsort(end[mine], kind="stable")]
        fcs_errors = int(np.count_nonzero(bad[mine]))
        req = mine[has_seq[mine] & ~bad[mine]]
        req_end, req_seq = end[req], records["seq"][req].astype(np.int64)
        pairs = pair_sequence(req_end, req_seq, tx_start, tx_seq, window,
                              losses=LossIndex(losses),
                              end_time=int(max(end.max(), start.max())) if len(end) else None)
        ok = pairs.status == OK
        reply_start = np.where(ok, tx_start[np.maximum(pairs.stop_index, 0)], -1)
        latency = reply_start[ok] - req_end[ok]
        stats, samples = {}, {}
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
        for meaning, times in (markers or {}).items():
            times = np.sort(np.asarray(times, np.int64))
            if meaning.startswith("rx."):
                nxt = np.append(req_end[1:], np.iinfo(np.int64).max)
                k = np.searchsorted(times, req_end, side="left")
                t = times[np.minimum(k, max(len(times) - 1, 0))] if len(times) else req_end
                good = (k < len(times)) & (t < nxt) & (t - req_end <= window)
                values, at = t[good] - req_end[good], req_end[good]
            elif meaning.startswith("tx."):
                k = np.searchsorted(times, reply_start[ok], side="right") - 1
                t = times[np.maximum(k, 0)] if len(times) else reply_start[ok]
                good = (k >= 0) & (t >= req_end[ok])
                values, at = reply_start[ok][good] - t[good], req_end[ok][good]
            else:
                continue
            if len(values):
                samples[meaning] = (at, values)
                stats[meaning] = describe(values, tick_hz, times=at, name=meaning,
                                          confidence=confidence)
        classes[cls] = ClassReport(
            cls=cls, stats=stats, requests=len(req), replied=int(np.count_nonzero(ok)),
            dropped=int(np.count_nonzero(pairs.status == MISSED)),
            unknown=int(np.count_nonzero((pairs.status == LOST_GAP)
                                         | (pairs.status == TRUNCATED))),
            duplicates=int(dup_requests + dup_replies), reordered=reordered,
            fcs_errors=fcs_errors, counted=_counted(counters, cls), samples=samples)
    return FrameAnalysis(classes, int(np.count_nonzero(~placed)), tick_hz, magic=magic,
                         reply_class=reply_class, notes=notes)
