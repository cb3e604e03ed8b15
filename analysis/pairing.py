"""Vectorised pairing of start and stop edges into per-packet latencies.

The rule (``association = "next"``): a start at ``s`` pairs with the first stop at ``t >= s``
(or ``t >=`` the previous stage's stop, for chains) such that ``t - s <= window`` and ``t`` comes
before the next start. Each stop serves at most one start. A start without such a stop is
*missed*; a stop that serves no start is *spurious*, or a *duplicate* when it falls inside a paired
start's interval. Nothing is paired across a loss: a pair whose stop window ``[t - window, t]``
meets a loss, or an unpaired start whose window ``[s, s + window]`` meets one, is *lost-gap*
and excluded; so are unpaired stops whose window meets a loss. A start whose window reaches past
the end of the capture without a stop is *truncated*.

All functions work on int64 tick arrays in non-decreasing order and run in O(n log n) NumPy.

>>> import numpy as np
>>> r = pair_next(np.array([0, 100, 200]), np.array([10, 130, 135, 400]), window=50)
>>> r.stop_index.tolist(), r.status.tolist(), r.spurious, r.duplicate
([0, 1, -1], [0, 0, 1], 1, 1)
"""

import dataclasses

import numpy as np

__all__ = ["OK", "MISSED", "LOST_GAP", "TRUNCATED", "AMBIGUOUS", "STATUS_NAMES", "PAIRED",
           "DUPLICATE", "SPURIOUS", "LOST_STOP", "UNDECIDED", "PairResult", "LossIndex",
           "pair_next", "pair_in_order", "pair_shared", "pair_sequence", "StreamPairer"]

OK, MISSED, LOST_GAP, TRUNCATED, AMBIGUOUS = 0, 1, 2, 3, 4
PAIRED, DUPLICATE, SPURIOUS, LOST_STOP, UNDECIDED = 0, 1, 2, 3, 4
STATUS_NAMES = {OK: "ok", MISSED: "missed", LOST_GAP: "lost-gap", TRUNCATED: "truncated",
                AMBIGUOUS: "ambiguous"}
_NONE = np.iinfo(np.int64).max


class LossIndex:
    """Loss spans ``[first_time, first_time + span]`` (ticks), queried for overlap with intervals.

    Parameters
    ----------
    spans : iterable of (first_time, span)
    """

    def __init__(self, spans=()):
        spans = sorted((int(a), int(b)) for a, b in spans)
        if any(b < 0 for _, b in spans):
            raise ValueError("loss span must be non-negative")
        self.first = np.array([a for a, _ in spans], dtype=np.int64)
        self.end_max = np.maximum.accumulate(
            np.array([a + b for a, b in spans], dtype=np.int64)) if spans else self.first

    def __len__(self):
        return len(self.first)

    def intersects(self, lo, hi):
        """Boolean array: does ``[lo, hi]`` (elementwise, inclusive) meet any loss span?"""
        lo = np.asarray(lo, dtype=np.int64)
        if not len(self.first):
            return np.zeros(lo.shape, dtype=bool)
        k = np.searchsorted(self.first, hi, side="right")
        return (k > 0) & (self.end_max[np.maximum(k - 1, 0)] >= lo)


@dataclasses.dataclass
class PairResult:
    """Outcome of pairing one measurement.

    Attributes
    ----------
    stop_index : ndarray of int64
        Per start, the index of its stop in the stop array, or -1.
    status : ndarray of uint8
        Per start: :data:`OK`, :data:`MISSED`, :data:`LOST_GAP`, :data:`TRUNCATED` or
        :data:`AMBIGUOUS` (:func:`pair_in_order` cannot tell which stop is its own).
    stop_class : ndarray of uint8
        Per stop: :data:`PAIRED` (including pairs excluded as lost-gap), :data:`DUPLICATE`
        (unpaired, inside a paired start's interval), :data:`SPURIOUS`, :data:`LOST_STOP`
        (unpaired, its window meets a loss) or :data:`UNDECIDED` (it belongs to one of the
        ambiguous starts of its busy period).
    segment : ndarray of int64, optional
        Per start, its busy period (:func:`pair_in_order`; numbered from 1 in time order).
    tsegment : ndarray of int64, optional
        Per start, its run of starts less than a window apart (:func:`pair_in_order`; from 1).
    shared : ndarray of bool, optional
        Per start, its stop also serves another start (:func:`pair_shared`).
    """
    stop_index: np.ndarray
    status: np.ndarray
    stop_class: np.ndarray
    segment: np.ndarray = None
    tsegment: np.ndarray = None
    shared: np.ndarray = None

    @property
    def ambiguous(self):
        return int(np.count_nonzero(self.status == AMBIGUOUS))

    @property
    def spurious(self):
        return int(np.count_nonzero(self.stop_class == SPURIOUS))

    @property
    def duplicate(self):
        return int(np.count_nonzero(self.stop_class == DUPLICATE))

    @property
    def lost_stops(self):
        return int(np.count_nonzero(self.stop_class == LOST_STOP))


def pair_next(start, stop, window, *, origin=None, losses=None, end_time=None):
    """Pair each start with the next stop within ``window`` ticks and before the next start.

    Parameters
    ----------
    start, stop : array_like of int64
        Edge times in ticks, each sorted.
    window : int
        Largest accepted latency in ticks.
    origin : array_like of int64, optional
        Per start, the earliest time its stop may have (the previous stage's stop in a chain);
        ``-1`` or a value below the start means the start itself.
    losses : LossIndex, optional
        Loss spans; pairs near them are excluded (see the module docstring).
    end_time : int, optional
        Last time the capture covers; unpaired starts whose window reaches past it are truncated.

    Returns
    -------
    PairResult
    """
    start = np.asarray(start, dtype=np.int64)
    stop = np.asarray(stop, dtype=np.int64)
    losses = losses if losses is not None else LossIndex()
    search = start if origin is None else np.maximum(start, np.asarray(origin, dtype=np.int64))
    j = np.searchsorted(stop, search, side="left")
    have = j < len(stop)
    jc = np.minimum(j, max(len(stop) - 1, 0))
    t = stop[jc] if len(stop) else np.full(len(start), _NONE, dtype=np.int64)
    next_start = np.empty_like(start)
    next_start[:-1] = start[1:]
    next_start[-1:] = _NONE
    paired = have & (t - start <= window) & (t < next_start)
    stop_index = np.where(paired, jc, -1).astype(np.int64)
    status = _start_status(start, t, paired, window, losses, end_time)
    return PairResult(stop_index, status, _classify_stops(start, stop, stop_index[paired],
                                                          status, window, losses))


def _start_status(start, t, paired, window, losses, end_time):
    """Per start: OK when paired with the stop at ``t``, else MISSED; LOST_GAP when the interval
    it was (or would have been) paired over meets a loss; TRUNCATED when a missed start's window
    runs past the end of the capture."""
    status = np.where(paired, OK, MISSED).astype(np.uint8)
    if len(losses):
        lost = np.where(paired, losses.intersects(t - window, t),
                        losses.intersects(start, start + window))
        status[lost] = LOST_GAP
    if end_time is not None:
        status[(status == MISSED) & (start + window > end_time)] = TRUNCATED
    return status


def _classify_stops(start, stop, used_index, status, window, losses):
    """Per stop: 0 paired, 1 duplicate (inside a paired start's interval), 2 spurious, 3 lost."""
    cls = np.full(len(stop), SPURIOUS, dtype=np.uint8)
    cls[used_index] = PAIRED
    free = np.flatnonzero(cls != PAIRED)
    t = stop[free]
    if len(start):
        owner = np.maximum(np.searchsorted(start, t, side="right") - 1, 0)
        inside = (t >= start[owner]) & (status[owner] == OK) & (t - start[owner] <= window)
        cls[free[inside]] = DUPLICATE
    else:
        inside = np.zeros(len(t), dtype=bool)
    if len(losses):
        cls[free[~inside & losses.intersects(t - window, t)]] = LOST_STOP
    return cls


def pair_in_order(start, stop, window, *, origin=None, losses=None, end_time=None,
                  tainted=False):
    """Pair starts with stops in order, and say which pairings the edges cannot decide.

    The model: every start is served at most once, in order (one queue, one thread), each stop
    within ``window`` ticks of its start. The edges are cut into *busy periods*: a period opens at
    a start that finds the queue empty (every earlier start of the period already has its stop)
    or that comes more than ``window`` after the previous start, and collects the stops that
    arrive while starts are waiting. A period whose ``n`` starts meet exactly ``n`` stops pairs
    the ``k``-th start with the ``k``-th stop (a start queued behind another gets the second
    stop, never its predecessor's). A period of one start takes its first stop; later stops
    before the next start are *duplicates*. A period with no stop is *missed*. Any other period
    (fewer stops than starts: a drop or a missing marker somewhere in it; or more: a stray
    marker) leaves every start *ambiguous* (:data:`AMBIGUOUS`) and its stops *undecided*: which
    start lost its stop cannot be told from edges alone. Losses and the end of the capture are
    handled as in :func:`pair_next`; an ambiguous or missed period whose last window reaches
    past ``end_time`` is truncated.

    >>> r = pair_in_order([0, 10, 500], [50, 100, 530], window=200)   # 10 queued behind 0
    >>> r.stop_index.tolist(), r.status.tolist()
    ([0, 1, 2], [0, 0, 0])
    >>> r = pair_in_order([0, 10], [50], window=200)     # one of the two lost its stop: which?
    >>> r.status.tolist(), r.ambiguous
    ([4, 4], 2)

    A start without any stop within its window is missed whatever the order, and takes no part
    in the queue (so markers that never come do not hold a busy period open). With ``tainted``
    (a queue of unknown length may precede the first start, see :class:`StreamPairer`), every
    start before the first gap of more than a window between starts is ambiguous unless missed.

    O(n log n): one sort of the merged edges, then prefix sums (the queue length is a Lindley
    recursion, ``W = S - min(0, cummin(S))`` within each period of starts).
    """
    start = np.asarray(start, dtype=np.int64)
    stop = np.asarray(stop, dtype=np.int64)
    losses = losses if losses is not None else LossIndex()
    m = len(stop)
    j = np.searchsorted(stop, start, side="left")
    has = (j < m) & ((stop[np.minimum(j, max(m - 1, 0))] if m else start) - start <= window)
    if has.all():
        return _pair_in_order_core(start, stop, window, origin, losses, end_time, tainted)
    idx = np.flatnonzero(has)
    sub_origin = None if origin is None else np.asarray(origin, dtype=np.int64)[idx]
    r = _pair_in_order_core(start[idx], stop, window, sub_origin, losses, end_time, tainted)
    n = len(start)
    stop_index = np.full(n, -1, np.int64)
    stop_index[idx] = r.stop_index
    alone = np.flatnonzero(~has)
    status = np.empty(n, np.uint8)
    status[idx] = r.status
    status[alone] = _start_status(start[alone], start[alone], np.zeros(len(alone), bool),
                                  window, losses, end_time)
    segment = np.zeros(n, np.int64)
    segment[idx] = r.segment
    segment = np.maximum.accumulate(segment) if n else segment
    tsegment = np.zeros(n, np.int64)
    tsegment[idx] = r.tsegment
    tsegment = np.maximum.accumulate(tsegment) if n else tsegment
    return PairResult(stop_index, status, r.stop_class, segment=segment, tsegment=tsegment)


def _pair_in_order_core(start, stop, window, origin, losses, end_time, tainted=False):
    """:func:`pair_in_order` on starts that each have a stop within their window."""
    start = np.asarray(start, dtype=np.int64)
    stop = np.asarray(stop, dtype=np.int64)
    losses = losses if losses is not None else LossIndex()
    n, m = len(start), len(stop)
    if np.any(np.diff(start) < 0) or np.any(np.diff(stop) < 0):
        raise ValueError("start and stop times must be sorted")
    times = np.concatenate([start, stop])
    is_stop = np.concatenate([np.zeros(n, bool), np.ones(m, bool)])
    order = np.lexsort((is_stop, times))          # starts before stops at equal times
    ev_t, ev_stop = times[order], is_stop[order]
    ev_start = ~ev_stop
    low = np.iinfo(np.int64).min
    last_start = np.maximum.accumulate(np.where(ev_start, ev_t, low)) if len(ev_t) else ev_t
    in_window = ev_stop & (last_start > low) & (ev_t - last_start <= window)
    # periods of starts closer than a window apart: no stop can serve a start across the gap
    gap = np.ones(n, bool)
    gap[1:] = np.diff(start) > window
    ev_gap = np.zeros(len(ev_t), bool)
    ev_gap[ev_start] = gap
    tseg = np.cumsum(ev_gap)
    x = np.where(ev_start, 1, np.where(in_window, -1, 0)).astype(np.int64)
    level = np.cumsum(x)
    first = np.flatnonzero(ev_gap)
    base = np.zeros(len(first) + 1, np.int64)
    base[1:] = level[first] - x[first]
    big = 4 * (len(ev_t) + 1)
    cm = np.minimum.accumulate(level - big * tseg) + big * tseg if len(ev_t) else level
    queue = level - np.minimum(base[tseg], cm)                 # starts waiting after each edge
    before = np.zeros(len(ev_t), np.int64)
    before[1:] = queue[:-1]
    before[ev_gap] = 0
    busy_open = ev_start & (ev_gap | (before == 0))
    seg = np.cumsum(busy_open)                                 # busy period of each edge
    eff = in_window & (before > 0)
    extra = in_window & (before == 0)
    n_seg = np.bincount(seg[ev_start], minlength=seg[-1] + 1 if len(seg) else 1)
    size = len(n_seg)
    m_eff = np.bincount(seg[eff], minlength=size)
    m_extra = np.bincount(seg[extra], minlength=size)
    clean = (n_seg >= 1) & (m_eff == n_seg) & ((m_extra == 0) | (n_seg == 1))
    start_seg = np.empty(n, np.int64)
    start_seg[order[ev_start]] = seg[ev_start]
    stop_seg = np.empty(m, np.int64)
    stop_seg[order[ev_stop] - n] = seg[ev_stop]
    eff_stop = np.zeros(m, bool)
    eff_stop[order[eff] - n] = True
    # clean periods have as many stops as starts: the k-th start of them takes the k-th stop
    mine = clean[start_seg] if n else np.zeros(0, bool)
    theirs = eff_stop & clean[stop_seg]
    stop_index = np.full(n, -1, np.int64)
    stop_index[mine] = np.flatnonzero(theirs)
    paired = mine.copy()
    if origin is not None:
        origin = np.asarray(origin, dtype=np.int64)
        t = stop[np.maximum(stop_index, 0)] if m else stop_index
        early = paired & (t < origin)
        # a lone start in its period may take a later stop of the period, at or after origin
        lone = early & (n_seg[start_seg] == 1)
        j = np.searchsorted(stop, origin[lone], side="left")
        jc = np.minimum(j, max(m - 1, 0))
        fits = (j < m) & (stop_seg[jc] == start_seg[lone]) & (stop[jc] - start[lone] <= window)
        stop_index[np.flatnonzero(lone)] = np.where(fits, jc, -1)
        bad = early & ~lone
        stop_index[bad] = -1
        paired &= stop_index >= 0
    t = stop[np.maximum(stop_index, 0)] if m else np.zeros(n, np.int64)
    too_late = paired & (t - start > window)
    stop_index[too_late] = -1
    paired &= ~too_late
    decided = clean[start_seg] if n else np.zeros(0, bool)
    undecided = ~paired & ((~decided & (m_eff[start_seg] > 0)) | too_late
                           | (decided & (n_seg[start_seg] > 1)))
    start_tseg = np.empty(n, np.int64)
    start_tseg[order[ev_start]] = tseg[ev_start]
    if tainted:
        # an earlier queue of unknown length may still be served here: nothing is decided
        # until the first gap of a window between starts
        first = start_tseg == 1
        undecided |= first & paired
        stop_index[first] = -1
        paired &= ~first
        clean = clean.copy()
        clean[np.unique(start_seg[first])] = False
    status = np.where(paired, OK, np.where(undecided, AMBIGUOUS, MISSED)).astype(np.uint8)
    if len(losses):
        lost = np.where(paired, losses.intersects(t - window, t),
                        losses.intersects(start, start + window))
        status[lost] = LOST_GAP
    if end_time is not None and n:
        last = np.zeros(size, np.int64)
        np.maximum.at(last, start_seg, start)
        status[(status == MISSED) & (last[start_seg] + window > end_time)] = TRUNCATED
        status[(status == AMBIGUOUS) & (start + window > end_time)] = TRUNCATED
    cls = np.full(m, SPURIOUS, dtype=np.uint8)
    in_win_stop = np.zeros(m, bool)
    in_win_stop[order[in_window] - n] = True
    cls[in_win_stop & ~clean[stop_seg]] = UNDECIDED
    lone_owner = in_win_stop & clean[stop_seg] & (n_seg[stop_seg] == 1)
    cls[lone_owner] = DUPLICATE
    cls[stop_index[paired]] = PAIRED
    if len(losses):
        free = np.flatnonzero(cls == SPURIOUS)
        cls[free[losses.intersects(stop[free] - window, stop[free])]] = LOST_STOP
    return PairResult(stop_index, status, cls, segment=start_seg, tsegment=start_tseg)


def pair_shared(start, stop, window, *, losses=None, end_time=None):
    """Pair each start with the first stop at or after it within ``window``; a stop may serve
    several starts (an interrupt that handles every frame received before it entered: interrupt
    coalescing). Starts whose stop also serves another start are flagged in ``shared``.

    >>> r = pair_shared([0, 10, 500], [50, 520], window=100)
    >>> r.stop_index.tolist(), r.shared.tolist()
    ([0, 0, 1], [True, True, False])
    """
    start = np.asarray(start, dtype=np.int64)
    stop = np.asarray(stop, dtype=np.int64)
    losses = losses if losses is not None else LossIndex()
    j = np.searchsorted(stop, start, side="left")
    jc = np.minimum(j, max(len(stop) - 1, 0))
    t = stop[jc] if len(stop) else np.full(len(start), _NONE, dtype=np.int64)
    paired = (j < len(stop)) & (t - start <= window)
    stop_index = np.where(paired, jc, -1).astype(np.int64)
    status = _start_status(start, t, paired, window, losses, end_time)
    uses = np.bincount(stop_index[paired], minlength=len(stop))
    shared = paired & (uses[np.maximum(stop_index, 0)] > 1) if len(stop) else paired
    cls = np.full(len(stop), SPURIOUS, dtype=np.uint8)
    cls[stop_index[paired]] = PAIRED
    if len(losses):
        free = np.flatnonzero(cls == SPURIOUS)
        cls[free[losses.intersects(stop[free] - window, stop[free])]] = LOST_STOP
    return PairResult(stop_index, status, cls, shared=shared)


def pair_sequence(start, start_seq, stop, stop_seq, window, *, losses=None, end_time=None):
    """Pair starts and stops carrying the same sequence number (first such stop at or after the
    start, within ``window`` ticks).

    >>> r = pair_sequence([0, 10], [7, 8], [15, 30], [8, 7], window=100)
    >>> r.stop_index.tolist(), r.status.tolist()
    ([1, 0], [0, 0])
    """
    start = np.asarray(start, dtype=np.int64)
    stop = np.asarray(stop, dtype=np.int64)
    start_seq = np.asarray(start_seq, dtype=np.int64)
    stop_seq = np.asarray(stop_seq, dtype=np.int64)
    if start_seq.shape != start.shape or stop_seq.shape != stop.shape:
        raise ValueError("each time array needs a sequence array of the same length")
    losses = losses if losses is not None else LossIndex()
    order = np.lexsort((stop, stop_seq))
    seq_sorted, time_sorted = stop_seq[order], stop[order]
    # first stop with the same sequence and time >= start: search the (seq, time) pairs
    lo = np.searchsorted(seq_sorted, start_seq, side="left")
    hi = np.searchsorted(seq_sorted, start_seq, side="right")
    # within [lo, hi) times are sorted; advance to the first time >= start (vectorised bisection)
    left, right = lo.copy(), hi.copy()
    while np.any(left < right):
        active = left < right
        mid = (left + right) // 2
        go_right = active & (time_sorted[np.minimum(mid, len(stop) - 1)] < start)
        left = np.where(go_right, mid + 1, left)
        right = np.where(active & ~go_right, mid, right)
    have = left < hi
    t = time_sorted[np.minimum(left, max(len(stop) - 1, 0))] if len(stop) else \
        np.full(len(start), _NONE, dtype=np.int64)
    paired = have & (t - start <= window)
    stop_index = np.where(paired, order[np.minimum(left, max(len(stop) - 1, 0))] if len(stop)
                          else -1, -1).astype(np.int64)
    status = _start_status(start, t, paired, window, losses, end_time)
    cls = np.full(len(stop), SPURIOUS, dtype=np.uint8)
    cls[stop_index[paired]] = PAIRED
    # a free stop whose sequence number was paired is a duplicate
    free = np.flatnonzero(cls != PAIRED)
    dup = np.isin(stop_seq[free], start_seq[paired])
    cls[free[dup]] = DUPLICATE
    if len(losses):
        t = stop[free]
        cls[free[~dup & losses.intersects(t - window, t)]] = LOST_STOP
    return PairResult(stop_index, status, cls)


class StreamPairer:
    """Pairs the measurements that share one start edge, chunk by chunk, in bounded memory.

    Pairs by :func:`pair_in_order`. Open packets (starts whose window is not yet complete, and
    every start of the busy period they belong to, whose pairing depends on them) and the stops
    they may need are carried to the next chunk; everything older is final and handed back. A
    busy period stays open until its queue empties or its starts stop for a window, so memory
    follows the longest busy period, not the capture.

    Parameters
    ----------
    names : list of str
        Measurement names, ordered so that each ``after`` stage comes before its dependents.
    windows : list of int
        Window of each measurement, ticks.
    after : list of int or None
        Index (into ``names``) of the stage each measurement is chained after.
    losses : LossIndex
    """

    #: Starts an open busy period may hold before its packets are given up as ambiguous.
    MAX_OPEN = 1 << 16

    def __init__(self, names, windows, after, losses, max_open=MAX_OPEN):
        self.names = list(names)
        self.max_open = int(max_open)
        self.tainted = [False] * len(names)
        self.windows = [int(w) for w in windows]
        self.after = list(after)
        self.losses = losses
        self.horizon = max(self.windows)
        self.starts = np.empty(0, dtype=np.int64)
        self.stops = [np.empty(0, dtype=np.int64) for _ in names]
        self.counts = {name: dict(spurious=0, duplicate=0, lost_stops=0, undecided=0)
                       for name in names}
        #: Per measurement, after each :meth:`feed`: the stops it made final, in order, as
        #: ``(stop class, start time of the OK packet each serves or -1)``.
        self.final_stops = []

    def feed(self, starts, stops, complete_time, end_time=None):
        """Add new edges; return the packets now final.

        Parameters
        ----------
        starts : ndarray of int64
            New start edges (all later than or equal to those fed before).
        stops : list of ndarray of int64
            New stop edges, one array per measurement.
        complete_time : int or None
            Every edge earlier than this has been fed; None at the end of the capture.
        end_time : int, optional
            Last time of the capture (with ``complete_time=None``).

        Returns
        -------
        start : ndarray of int64
            Start time of each final packet.
        latency : list of ndarray of int64
            Per measurement, the latency in ticks, or -1 where there is no valid pair.
        status : list of ndarray of uint8
            Per measurement, the pair status of each packet.
        """
        s = np.concatenate([self.starts, starts]) if len(self.starts) else \
            np.asarray(starts, dtype=np.int64)
        ts = [np.concatenate([a, b]) if len(a) else np.asarray(b, dtype=np.int64)
              for a, b in zip(self.stops, stops, strict=True)]
        if complete_time is None:
            n_final = len(s)
        else:
            n_final = int(np.searchsorted(s + self.horizon, complete_time, side="left"))
        # pair everything held; results for starts beyond n_final are recomputed next time.
        # A start is final only with every start of its busy period (in every measurement); a
        # period holding more than max_open starts is given up: its packets are ambiguous, and
        # so is everything up to the next gap of a window between starts (tainted), whose
        # packets are then final as soon as their window is.
        n_window = n_final
        while True:
            results, stop_times = self._pair_all(s, ts, end_time if complete_time is None
                                                 else None)
            n_final, grew = n_window, False
            for k, r in enumerate(results):
                if n_window >= len(s):
                    continue
                if self.tainted[k] and r.tsegment[n_window] <= 1:
                    continue
                first = int(np.searchsorted(r.segment, r.segment[n_window], side="left"))
                if complete_time is not None and len(s) - first > self.max_open:
                    self.tainted[k] = grew = True
                    continue
                n_final = min(n_final, first)
            if not grew:
                break
        for k, r in enumerate(results):
            if self.tainted[k] and (n_final >= len(s) or r.tsegment[n_final] > 1):
                self.tainted[k] = False      # the tainted run of starts is all final
        cut = s[n_final] if n_final < len(s) else None
        latencies, statuses = [], []
        self.final_stops = []
        for k, r in enumerate(results):
            latencies.append(np.where(r.status == OK, stop_times[k] - s, -1)[:n_final])
            statuses.append(r.status[:n_final])
            # account the unpaired stops that are final (before the first open start)
            final = r.stop_class if cut is None else r.stop_class[ts[k] < cut]
            ok = np.flatnonzero(r.status[:n_final] == OK)
            owner = np.full(len(final), -1, np.int64)
            mine = r.stop_index[ok] < len(final)
            owner[r.stop_index[ok][mine]] = s[ok][mine]
            self.final_stops.append((final, owner))
            c = self.counts[self.names[k]]
            c["duplicate"] += int(np.count_nonzero(final == DUPLICATE))
            c["spurious"] += int(np.count_nonzero(final == SPURIOUS))
            c["lost_stops"] += int(np.count_nonzero(final == LOST_STOP))
            c["undecided"] += int(np.count_nonzero(final == UNDECIDED))
            self.stops[k] = ts[k][ts[k] >= cut] if cut is not None else ts[k][:0]
        self.starts = s[n_final:]
        return s[:n_final], latencies, statuses

    def _pair_all(self, s, ts, end_time):
        """Pair every measurement over the held starts (chained ones from their predecessor's
        stops)."""
        results, stop_times = [], []
        for k in range(len(self.names)):
            origin = None
            if self.after[k] is not None:
                origin = np.where(stop_times[self.after[k]] >= 0, stop_times[self.after[k]], -1)
            r = pair_in_order(s, ts[k], self.windows[k], origin=origin, losses=self.losses,
                              end_time=end_time, tainted=self.tainted[k])
            t = (np.where(r.stop_index >= 0, ts[k][np.maximum(r.stop_index, 0)], -1)
                 if len(ts[k]) else np.full(len(s), -1, dtype=np.int64))
            stop_times.append(np.where(r.status == OK, t, -1))
            results.append(r)
        return results, stop_times
