"""Analysis by identity in one pass: :mod:`latscope.analysis.frames`' pairing, window by window.

:class:`FrameStream` takes the frame records a capture's reader has tied to their DV pulses
(``capture.files.frames.FramePlacer``) and the marker edges, chunk by chunk, and gives the
:class:`~latscope.analysis.frames.FrameAnalysis` that
:func:`~latscope.analysis.frames.analyze_frames` gives for the whole capture at once. Each
request is decided as soon as nothing still to come can change it, and its latencies go into
the bounded statistics of the plain analysis (:class:`~latscope.analysis.stats.LatencyAccumulator`):
memory follows what is still open (the requests within their reply window, the markers within
their window, a marker stage's open busy period), not the capture.

What stays open, and until when:

* a request, until its reply came (the first transmitted frame of its class with its sequence
  number, at or after its end) or until the data has passed its reply window: twice the longest
  reply seen so far, and at least :data:`~latscope.analysis.frames.DEFAULT_WINDOW_S`. Whether an
  unanswered request was dropped, unknown or truncated is decided at the end, with the final
  reply window, from its end time alone;
* a marker stage paired in order, until its busy period closes
  (:class:`~latscope.analysis.pairing.StreamPairer`, as the plain measurements);
* an interrupt marker that may serve several frames, and a marker with identity, until the data
  has passed the marker window after the frame (before the reply, for transmit markers);
* a marker channel, until its first :data:`DECIDE` markers (or those of its first second) tell
  whether it carries identity codes (:func:`~latscope.analysis.marker_identity.is_coded_channel`
  on them).

It differs from the whole-capture pairing only where that looks at the whole capture: a reply
later than the reply window reached so far is not paired; a paired request is ``unknown``
(a loss within its reply window) by the window reached when it is decided; duplicates are
counted against the sequence numbers seen so far (:data:`SEQ_INTERVALS` runs of them per class).
"""

import dataclasses

import numpy as np

from latscope.analysis.frames import (
    DEFAULT_WINDOW_S,
    MARKER_WINDOW_S,
    REPLY_CLASSES,
    SHARED_MARKERS,
    ClassReport,
    FrameAnalysis,
    counted_totals,
    pair_by_identity,
)
from latscope.analysis.marker_identity import (
    GAP_FACTOR,
    MarkerCodes,
    decode,
    group_starts,
    is_coded_channel,
)
from latscope.analysis.pairing import (
    AMBIGUOUS,
    MISSED,
    OK,
    TRUNCATED,
    UNDECIDED,
    LossIndex,
    StreamPairer,
    pair_sequence,
    pair_shared,
)
from latscope.analysis.stats import DEFAULT_EXACT_LIMIT, LatencyAccumulator

__all__ = ["FrameStream", "DECIDE", "SEQ_INTERVALS"]

#: Markers of a channel looked at before deciding whether it carries identity codes.
DECIDE = 256
#: Runs of sequence numbers remembered per class for duplicates (the oldest are forgotten).
SEQ_INTERVALS = 1 << 16
_FAR = np.iinfo(np.int64).max // 4


class _SeqSet:
    """Sequence numbers seen, as sorted runs ``[lo, hi]``."""

    def __init__(self):
        self.lo = np.zeros(0, np.int64)
        self.hi = np.zeros(0, np.int64)

    def contains(self, values):
        values = np.asarray(values, np.int64)
        k = np.searchsorted(self.lo, values, side="right") - 1
        kc = np.maximum(k, 0)
        return (k >= 0) & (self.hi[kc] >= values) if len(self.lo) else np.zeros(len(values), bool)

    def add(self, values):
        values = np.unique(np.asarray(values, np.int64))
        if not len(values):
            return
        lo = np.concatenate([self.lo, values])
        hi = np.concatenate([self.hi, values])
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
        reach = np.maximum.accumulate(hi)
        new = np.ones(len(lo), bool)
        new[1:] = lo[1:] > reach[:-1] + 1
        self.lo = lo[new]
        self.hi = np.maximum.reduceat(hi, np.flatnonzero(new))
        if len(self.lo) > SEQ_INTERVALS:
            self.lo, self.hi = self.lo[-SEQ_INTERVALS:], self.hi[-SEQ_INTERVALS:]


class _Markers:
    """One marker channel's markers as they become final: its rising edges, or (a channel
    carrying identity codes) each marker's first edge and identity."""

    def __init__(self, patience):
        self.patience = patience               # ticks a channel may stay undecided
        self.since = None
        self.coded = None                      # undecided until DECIDE markers
        self.edges = (np.zeros(0, np.int64), np.zeros(0, bool))   # not yet decoded
        self.undecided_rises = np.zeros(0, np.int64)
        self.groups = [np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8)]

    def add(self, t, r, complete):
        """Add edges (times before ``complete``, or every one with ``complete=None``); returns
        ``(times, ids or None, complete time of the channel's markers)`` now final."""
        t = np.concatenate([self.edges[0], t])
        r = np.concatenate([self.edges[1], r])
        final = complete is None
        cut = len(t)
        if not final:
            cut = self._open_group(t, r, complete)
        codes = decode(t[:cut], r[:cut])
        rises = t[:cut][r[:cut]]
        self.edges = (t[cut:], r[cut:])
        done = complete if cut == len(t) else int(t[cut])
        if self.coded is None:
            self.undecided_rises = np.concatenate([self.undecided_rises, rises])
            for k, col in enumerate((codes.time, codes.ident, codes.status)):
                self.groups[k] = np.concatenate([self.groups[k], col])
            if self.since is None:
                self.since = int(t[0]) if len(t) else complete
            waited = not final and complete - self.since > self.patience
            if len(self.groups[0]) < DECIDE and not final and not waited:
                first = self.undecided_rises[0] if len(self.undecided_rises) else done
                return np.zeros(0, np.int64), None, first if done is None else min(first, done)
            held = MarkerCodes(*self.groups)
            self.coded = is_coded_channel(held)
            if self.coded:
                return held.time, held.ident, done
            return self.undecided_rises, None, done
        if self.coded:
            return codes.time, codes.ident, done
        return rises, None, done

    @staticmethod
    def _open_group(t, r, complete):
        """Index of the first edge of the marker that may still grow (its code pulses may still
        come): the last marker's first rise, unless its last pulse has ended longer ago than a
        code's gap (then nothing is open, ``len(t)``)."""
        rise_at = np.flatnonzero(r[:-1] & ~r[1:])        # pulses: a rise followed by a fall
        if not len(rise_at):
            return int(np.argmax(r)) if r.any() else len(t)
        rise, fall = t[rise_at], t[rise_at + 1]
        starts = np.flatnonzero(group_starts(rise, fall))
        last = starts[-1]
        width = max(int(fall[-1] - rise[-1]), 1)
        pending = r[-1]                    # a rise still waiting for its fall
        if not pending and int(fall[-1]) + GAP_FACTOR * width < complete:
            return len(t)
        return int(rise_at[last])


class _Shared:
    """:func:`pair_shared` starts (frame ends) against stops (interrupt markers), decided once
    the data passed each start's window."""

    def __init__(self, window, losses):
        self.window, self.losses = window, losses
        self.starts = np.zeros(0, np.int64)
        self.ids = np.zeros(0, np.int64)
        self.stops = np.zeros(0, np.int64)
        self.carry = (None, 0)          # a stop already serving final starts, and how many

    def feed(self, starts, ids, stops, complete, end_time=None):
        self.starts = np.concatenate([self.starts, starts])
        self.ids = np.concatenate([self.ids, ids])
        self.stops = np.concatenate([self.stops, stops])
        n = len(self.starts) if complete is None else \
            int(np.searchsorted(self.starts + self.window, complete, side="left"))
        r = pair_shared(self.starts, self.stops, self.window, losses=self.losses,
                        end_time=end_time if complete is None else None)
        paired = r.stop_index >= 0
        t = np.where(paired, self.stops[np.maximum(r.stop_index, 0)], -1) if len(self.stops) \
            else np.full(len(self.starts), -1, np.int64)
        uses = np.bincount(r.stop_index[paired], minlength=len(self.stops))
        count = uses[np.maximum(r.stop_index, 0)] if len(self.stops) else np.zeros(len(t), int)
        count = count + np.where(paired & (t == self.carry[0]), self.carry[1], 0)
        shared = paired & (count > 1)
        out = (self.ids[:n], t[:n], r.status[:n], shared[:n])
        if n:
            last = t[:n][paired[:n]]
            if len(last):
                lt = int(last[-1])
                used = int(np.count_nonzero(t[:n] == lt))
                self.carry = (lt, used + (self.carry[1] if self.carry[0] == lt else 0))
        self.starts, self.ids = self.starts[n:], self.ids[n:]
        lo = int(self.starts[0]) if len(self.starts) else complete
        if lo is not None:
            if self.carry[0] is not None:
                lo = min(lo, self.carry[0])
            self.stops = self.stops[self.stops >= lo]
        return out


@dataclasses.dataclass
class _Stage:
    acc: LatencyAccumulator
    at: list
    values: list


class FrameStream:
    """Pairs frame records by sequence number and their markers, fed window by window.

    Parameters
    ----------
    tick_hz : int
    flags : dict
        The FrameFlags bits (``gateware.codec.FLAGS``; the caller has the record layouts).
    marker_meanings : iterable of str
        Meanings of the capture's marker channels (``rx.isr``, ``tx.send`` ...).
    losses : iterable of (first_time, span)
    counters : COUNTER_DTYPE array, optional
    magic : bool
        Requests and replies must carry the traffic magic (decided from every record first).
    seq_without_magic : bool
        Some record has a sequence number although none has the magic (for the note).
    reply_class : str
        One of :data:`~latscope.analysis.frames.REPLY_CLASSES`.
    confidence, exact_limit
        As :class:`~latscope.analysis.stats.LatencyAccumulator`.
    keep_samples : bool
        Keep every stage's latencies in :attr:`ClassReport.samples` (grows with the capture);
        without, they are kept while a stage has at most ``exact_limit`` of them (for
        comparisons between classes), then dropped.
    """

    def __init__(self, *, tick_hz, flags, marker_meanings=(), losses=(), counters=None,
                 magic=False, seq_without_magic=False, reply_class="same", confidence=0.95,
                 exact_limit=DEFAULT_EXACT_LIMIT, keep_samples=False,
                 marker_window_s=MARKER_WINDOW_S):
        if reply_class not in REPLY_CLASSES:
            raise ValueError(f"Reply class must be one of {', '.join(REPLY_CLASSES)}, "
                             f"not {reply_class!r}")
        self.flags = flags
        self.tick_hz = int(tick_hz)
        self.losses = LossIndex(losses)
        self.counters = counters
        self.magic = bool(magic)
        self.reply_class = reply_class
        self.confidence = confidence
        self.exact_limit = exact_limit
        self.keep_samples = keep_samples
        self.notes = []
        if not self.magic and seq_without_magic:
            self.notes.append("no frame record carries the traffic magic (gateware from before "
                              "FrameFlags traffic_magic, or a payload without latscope's layout): "
                              "every UDP frame holding a sequence number was taken as a request "
                              "or reply")
        if reply_class == "any":
            self.notes.append("replies were taken from every class of transmitted frame")
        self.meanings = [m for m in marker_meanings if m.startswith(("rx.", "tx."))]
        if list(marker_meanings):
            self.notes.append("marker stages per class are paired in order against the recorded "
                              "frames (or by marker identity) and tied to their request by its "
                              "sequence number; the plain ones (rx.udp, tx.wire ...) pair each "
                              "marker with the edges of every frame, recorded or not, so they "
                              "differ (or are ambiguous) where other traffic interleaves: compare "
                              "the per-class ones")
        self.mw = max(1, int(marker_window_s * tick_hz))
        self.channels = {m: _Markers(self.tick_hz) for m in self.meanings}
        self.identity = {}            # meaning -> (held times, held ids) once coded
        self.mdone = {m: None for m in self.meanings}     # markers final before this tick
        self.pairers = {}             # meaning -> StreamPairer or _Shared (plain channels)
        self.fifo = {}                # meaning -> ids fed as starts (rx) or stops (tx)
        self.tx_wait = {}             # meaning -> (ids, starts) of frames not yet fed
        self.tx_results = {m: (np.zeros(0, np.int64),) * 3 for m in self.meanings}
        self.default_window = int(DEFAULT_WINDOW_S * tick_hz)
        self.longest = 0
        self.staged_rx = []
        self.staged_tx = []
        self.staged_markers = {m: [] for m in self.meanings}
        self.rows = self._empty_rows()
        self.unanswered = []         # (cls, end) of requests no reply came for
        self.classes = {}
        self.stages = {}
        self.seqs = {}               # cls -> (request numbers, answered numbers)

    # --- rows: one per request, in order of its end ----------------------------------------
    def _empty_rows(self):
        z = np.zeros(0, np.int64)
        rows = {"id": z, "cls": z, "end": z, "seq": z, "reply": z, "rs": z}
        for m in self.meanings:
            rows[m + ":t"] = z
            rows[m + ":st"] = np.zeros(0, np.uint8)
            rows[m + ":sh"] = np.zeros(0, bool)
            rows[m + ":done"] = np.zeros(0, bool)
        return rows

    def _class(self, cls):
        if cls not in self.classes:
            self.classes[cls] = dict(requests=0, replied=0, fcs_errors=0, duplicates=0,
                                     reordered=0, top=-1, ambiguous={}, coalesced={})
            self.seqs[cls] = (_SeqSet(), _SeqSet())
        return self.classes[cls]

    def add(self, placed, markers, complete, end_time=None):
        """Feed the records tied and the marker edges of one chunk (``markers``: meaning ->
        ``(time, rising)``); every record and edge before ``complete`` has been fed
        (``complete=None``: the capture has ended, its last record tick ``end_time``)."""
        f = placed.records["flags"].astype(np.int64)
        d = placed.records["direction"]
        has_seq = (f & self.flags["seq_valid"]) != 0
        if self.magic:
            has_seq &= (f & self.flags["traffic_magic"]) != 0
        bad = ((f & self.flags["fcs_ok"]) == 0) | ((f & self.flags["rx_er"]) != 0)
        rx = d == 0
        for cls in np.unique(placed.records["cls"][rx]).tolist():
            c = self._class(cls)
            c["fcs_errors"] += int(np.count_nonzero(rx & bad & (placed.records["cls"] == cls)))
        # the received frames the firmware marks (as analysis.frames): the measured traffic's
        marked = (f & self.flags["traffic_magic"]) != 0 if self.magic else np.ones(len(f), bool)
        self.staged_rx.append((placed.index[rx], placed.end[rx], placed.records["cls"][rx],
                               placed.records["seq"][rx].astype(np.int64),
                               (has_seq & ~bad)[rx], marked[rx]))
        tx = (d == 1) & has_seq & ~bad
        self.staged_tx.append((placed.index[tx], placed.start[tx], placed.records["cls"][tx],
                               placed.records["seq"][tx].astype(np.int64)))
        for m in self.meanings:
            t, r = markers.get(m, (np.zeros(0, np.int64), np.zeros(0, bool)))
            self.staged_markers[m].append((np.asarray(t, np.int64), np.asarray(r, bool)))
        self._step(complete, end_time)

    def _release(self, staged, key, complete):
        cols = [np.concatenate(c) for c in zip(*staged, strict=True)]
        n = len(cols[0]) if complete is None else int(np.searchsorted(cols[key], complete))
        staged[:] = [tuple(c[n:] for c in cols)]
        return [c[:n] for c in cols]

    def _step(self, complete, end_time):
        rx_id, rx_end, rx_cls, rx_seq, is_req, marked = self._release(self.staged_rx, 1,
                                                                      complete)
        tx_id, tx_start, tx_cls, tx_seq = self._release(self.staged_tx, 1, complete)
        # requests join the rows
        req = is_req
        for cls in np.unique(rx_cls[req]).tolist():
            c = self._class(cls)
            mine = req & (rx_cls == cls)
            c["requests"] += int(np.count_nonzero(mine))
            seen, _ = self.seqs[cls]
            s = rx_seq[mine]
            c["duplicates"] += int(np.count_nonzero(seen.contains(s))) + len(s) - \
                len(np.unique(s))
            seen.add(s)
        n_new = int(np.count_nonzero(req))
        new = {"id": rx_id[req], "cls": rx_cls[req].astype(np.int64), "end": rx_end[req],
               "seq": rx_seq[req], "reply": np.full(n_new, -1, np.int64),
               "rs": np.full(n_new, -1, np.int64)}
        for m in self.meanings:
            new[m + ":t"] = np.full(n_new, -1, np.int64)
            new[m + ":st"] = np.full(n_new, MISSED, np.uint8)
            new[m + ":sh"] = np.zeros(n_new, bool)
            new[m + ":done"] = np.zeros(n_new, bool)
        self.rows = {k: np.concatenate([v, new[k]]) for k, v in self.rows.items()}
        self._replies(tx_id, tx_start, tx_cls, tx_seq, complete)
        for m in self.meanings:
            t, r = (np.concatenate(c) for c in zip(*self.staged_markers[m], strict=True))
            n = len(t) if complete is None else int(np.searchsorted(t, complete))
            self.staged_markers[m] = [(t[n:], r[n:])]
            times, ids, done = self.channels[m].add(t[:n], r[:n], complete)
            self.mdone[m] = done
            every = m in SHARED_MARKERS        # rx.isr serves every received frame
            self._markers(m, times, ids, rx_id if every else rx_id[marked],
                          rx_end if every else rx_end[marked], tx_id, tx_start, done, end_time)
        self._emit(complete, end_time)

    # --- replies -------------------------------------------------------------------------------
    def _key(self, cls, seq):
        return seq if self.reply_class == "any" else (np.asarray(cls, np.int64) << 40) | seq

    def _replies(self, tx_id, tx_start, tx_cls, tx_seq, complete):
        rows = self.rows
        waiting = np.flatnonzero(rows["reply"] == -1)
        chosen = np.zeros(len(tx_id), bool)
        chosen_by = {}
        if len(waiting) and len(tx_id):
            r = pair_sequence(rows["end"][waiting], self._key(rows["cls"][waiting],
                                                              rows["seq"][waiting]),
                              tx_start, self._key(tx_cls, tx_seq), _FAR)
            got = r.stop_index >= 0
            w, j = waiting[got], r.stop_index[got]
            rows["reply"][w] = tx_id[j]
            rows["rs"][w] = tx_start[j]
            if len(w):
                self.longest = max(self.longest, int((tx_start[j] - rows["end"][w]).max()))
            chosen[j] = True
            for cls in np.unique(rows["cls"][w]).tolist():
                mine = np.zeros(len(tx_id), bool)
                mine[j[rows["cls"][w] == cls]] = True
                chosen_by[cls] = mine
                self.seqs[cls][1].add(rows["seq"][w][rows["cls"][w] == cls])
        # a transmitted frame no request of a class chose, with a number that class answered
        for cls in self.classes:
            pool = (tx_cls == cls) if self.reply_class == "same" else np.ones(len(tx_id), bool)
            free = pool & ~chosen_by.get(cls, np.zeros(len(tx_id), bool))
            if free.any():
                self.classes[cls]["duplicates"] += int(np.count_nonzero(
                    self.seqs[cls][1].contains(tx_seq[free])))
        if complete is None:
            rows["reply"][rows["reply"] == -1] = -2
        else:
            horizon = max(2 * self.longest, self.default_window)
            late = (rows["reply"] == -1) & (rows["end"] + horizon < complete)
            rows["reply"][late] = -2

    # --- markers -------------------------------------------------------------------------------
    def _markers(self, m, times, ids, rx_id, rx_end, tx_id, tx_start, done, end_time):
        rx_side = m.startswith("rx.")
        if ids is not None or m in self.identity:
            held_t, held_i = self.identity.get(m, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            self.identity[m] = (np.concatenate([held_t, times]), np.concatenate([held_i, ids]))
            return
        if m not in self.pairers:
            if rx_side and m in SHARED_MARKERS:
                self.pairers[m] = _Shared(self.mw, self.losses)
            else:
                self.pairers[m] = StreamPairer([m], [self.mw], [None], self.losses)
            self.fifo[m] = np.zeros(0, np.int64)
        p = self.pairers[m]
        last = done is None
        limit = None if last else done
        if rx_side:
            if isinstance(p, _Shared):
                ids_, t, st, sh = p.feed(rx_end, rx_id, times, limit, end_time)
            else:
                self.fifo[m] = np.concatenate([self.fifo[m], rx_id])
                s, lat, status = p.feed(rx_end, [times], limit, end_time=end_time)
                n = len(s)
                ids_, self.fifo[m] = self.fifo[m][:n], self.fifo[m][n:]
                st = status[0]
                t = np.where(st == OK, s + lat[0], -1)
                sh = np.zeros(n, bool)
            self._set_rx(m, ids_, t, st, sh)
        else:
            # frames after the markers handed on wait: a marker still to come may be theirs
            ids, starts = (np.concatenate([a, b]) for a, b in zip(
                self.tx_wait.get(m, (tx_id[:0], tx_start[:0])), (tx_id, tx_start), strict=True))
            n = len(starts) if limit is None else int(np.searchsorted(starts, limit))
            self.tx_wait[m] = (ids[n:], starts[n:])
            self.fifo[m] = np.concatenate([self.fifo[m], ids[:n]])
            p.feed(times, [starts[:n]], limit, end_time=end_time)
            cls_, owner = p.final_stops[0]
            n = len(cls_)
            ids_, self.fifo[m] = self.fifo[m][:n], self.fifo[m][n:]
            st = np.where(owner >= 0, OK, np.where(cls_ == UNDECIDED, AMBIGUOUS, MISSED))
            old = self.tx_results[m]
            self.tx_results[m] = (np.concatenate([old[0], ids_]),
                                  np.concatenate([old[1], owner]),
                                  np.concatenate([old[2], st.astype(np.int64)]))

    def _set_rx(self, m, ids, t, st, sh):
        rows = self.rows
        k = np.searchsorted(rows["id"], ids)
        kc = np.minimum(k, max(len(rows["id"]) - 1, 0))
        hit = (k < len(rows["id"])) & (rows["id"][kc] == ids) if len(rows["id"]) else \
            np.zeros(len(ids), bool)
        k = k[hit]
        rows[m + ":t"][k] = t[hit]
        rows[m + ":st"][k] = st[hit]
        rows[m + ":sh"][k] = sh[hit]
        rows[m + ":done"][k] = True

    # --- decided requests into the statistics ---------------------------------------------------
    def _ready(self, complete):
        rows = self.rows
        ready = rows["reply"] != -1
        replied = rows["reply"] >= 0
        for m in self.meanings:
            done = self.mdone[m]
            if complete is not None and self.channels[m].coded is None:
                ready &= False
            elif m in self.identity:
                if complete is None:
                    continue
                if m.startswith("rx."):
                    ready &= rows["end"] + self.mw < done
                else:
                    ready &= ~replied | (rows["rs"] < done)
            elif m.startswith("rx."):
                ready &= rows[m + ":done"]
            else:
                ids = self.tx_results[m][0]
                k = np.searchsorted(ids, rows["reply"])
                have = (k < len(ids)) & (ids[np.minimum(k, max(len(ids) - 1, 0))] ==
                                         rows["reply"]) if len(ids) else \
                    np.zeros(len(k), bool)
                ready &= ~replied | have
        return int(np.argmin(ready)) if not ready.all() else len(ready)

    def _emit(self, complete, end_time):
        n = self._ready(complete)
        if not n and complete is not None:
            return
        rows = {k: v[:n] for k, v in self.rows.items()}
        self.rows = {k: v[n:] for k, v in self.rows.items()}
        window = 2 * self.longest if self.longest else self.default_window
        replied = rows["reply"] >= 0
        rs, end = rows["rs"], rows["end"]
        ok = replied & ~self.losses.intersects(rs - window, rs) if len(self.losses) else \
            replied.copy()
        for cls, e in zip(rows["cls"][rows["reply"] == -2].tolist(),
                          end[rows["reply"] == -2].tolist(), strict=True):
            self.unanswered.append((cls, e))
        lost = replied & ~ok
        for cls in np.unique(rows["cls"]).tolist():
            c = self._class(cls)
            mine = rows["cls"] == cls
            mok = mine & ok
            c["replied"] += int(np.count_nonzero(mok))
            c.setdefault("lost_replied", 0)
            c["lost_replied"] += int(np.count_nonzero(mine & lost))
            r = rs[mok]
            if len(r):
                top = np.maximum.accumulate(np.concatenate([[c["top"]], r]))
                c["reordered"] += int(np.count_nonzero(r < top[:-1]))
                c["top"] = int(top[-1])
                self._add(cls, "node.e2e", end[mok], r - end[mok])
            for m in self.meanings:
                self._stage(cls, m, rows, mine, mok)
        # tx results no request can still need: before the first open request's end
        lo = int(self.rows["end"][0]) if len(self.rows["end"]) else complete
        for m in self.meanings:
            ids, owner, st = self.tx_results[m]
            if lo is None:
                self.tx_results[m] = (ids[:0], owner[:0], st[:0])
            elif len(ids):
                wanted = self.rows["reply"][self.rows["reply"] >= 0]
                keep = ids >= (wanted.min() if len(wanted) else ids[-1] + 1)
                self.tx_results[m] = (ids[keep], owner[keep], st[keep])
            if m in self.identity and lo is not None:
                t, i = self.identity[m]
                keep = t >= lo - self.mw
                self.identity[m] = (t[keep], i[keep])

    def _stage(self, cls, m, rows, mine, mok):
        c = self.classes[cls]
        end = rows["end"]
        if m in self.identity:
            t, i = self.identity[m]
            values, at = pair_by_identity(m, t, i, end[mine], rows["seq"][mine], mok[mine],
                                          rows["rs"][mine], self.mw)
            self._add(cls, m, at, values)
            return
        if self.channels[m].coded is None:
            return
        if m.startswith("rx."):
            t, st, sh = rows[m + ":t"][mine], rows[m + ":st"][mine], rows[m + ":sh"][mine]
            # as analysis.frames: an unanswered request whose marker also serves a later one
            st = np.where((st == OK) & sh & ~mok[mine], AMBIGUOUS, st)
            good = st == OK
            values, at = t[good] - end[mine][good], end[mine][good]
        else:
            ids, owner, status = self.tx_results[m]
            k = np.searchsorted(ids, rows["reply"][mok])
            t, st = owner[k], status[k]
            sh = np.zeros(len(t), bool)
            good = (st == OK) & (t >= end[mok])
            values, at = rows["rs"][mok][good] - t[good], end[mok][good]
        # undecided near the capture's end (TRUNCATED) is undecided all the same
        c["ambiguous"][m] = c["ambiguous"].get(m, 0) + int(
            np.count_nonzero((st == AMBIGUOUS) | (st == TRUNCATED)))
        c["coalesced"][m] = c["coalesced"].get(m, 0) + int(np.count_nonzero(sh & good))
        self._add(cls, m, at, values)

    def _add(self, cls, stage, at, values):
        if not len(values):
            return
        key = (cls, stage)
        if key not in self.stages:
            self.stages[key] = _Stage(LatencyAccumulator(stage, self.tick_hz,
                                                         exact_limit=self.exact_limit), [], [])
        s = self.stages[key]
        s.acc.add(values, at)
        if s.at is not None and (self.keep_samples or s.acc.n <= self.exact_limit):
            s.at.append(np.asarray(at, np.int64))
            s.values.append(np.asarray(values, np.int64))
        else:
            s.at = s.values = None        # past exact_limit: the statistics alone

    # --- the end -------------------------------------------------------------------------------
    def finish(self, placed, end_time, unplaced=0):
        """Feed the last records tied (``placed``), decide everything still open and return
        the :class:`FrameAnalysis`; ``end_time``: the last tick of any record."""
        self.add(placed, {}, None, end_time)
        window = 2 * self.longest if self.longest else self.default_window
        classes = {}
        un = np.array(self.unanswered, np.int64).reshape(-1, 2)
        for cls in sorted(self.classes):
            c = self.classes[cls]
            e = un[un[:, 0] == cls, 1]
            lost = self.losses.intersects(e, e + window) if len(self.losses) else \
                np.zeros(len(e), bool)
            truncated = ~lost & (e + window > end_time) if end_time is not None else \
                np.zeros(len(e), bool)
            stats, samples, ambiguous, coalesced = {}, {}, {}, {}
            for (k, stage), s in self.stages.items():
                if k != cls or not s.acc.n:
                    continue
                stats[stage] = s.acc.result(confidence=self.confidence)
                if stage in c["ambiguous"]:
                    stats[stage].counts.update(ambiguous=c["ambiguous"][stage],
                                               coalesced=c["coalesced"][stage])
                if s.at is not None:
                    samples[stage] = (np.concatenate(s.at), np.concatenate(s.values))
            order = ["node.e2e"] + self.meanings
            stats = {k: stats[k] for k in order if k in stats}
            samples = {k: samples[k] for k in order if k in samples}
            for m in self.meanings:
                if c["ambiguous"].get(m):
                    ambiguous[m] = c["ambiguous"][m]
                if c["coalesced"].get(m):
                    coalesced[m] = c["coalesced"][m]
            classes[cls] = ClassReport(
                cls=cls, stats=stats, requests=c["requests"], replied=c["replied"],
                dropped=int(np.count_nonzero(~lost & ~truncated)),
                unknown=int(np.count_nonzero(lost | truncated)) + c.get("lost_replied", 0),
                duplicates=c["duplicates"], reordered=c["reordered"],
                fcs_errors=c["fcs_errors"], counted=counted_totals(self.counters, cls),
                samples=samples, ambiguous=ambiguous, coalesced=coalesced)
        return FrameAnalysis(classes, unplaced, self.tick_hz, magic=self.magic,
                             reply_class=self.reply_class, notes=list(self.notes),
                             reply_window_s=window / self.tick_hz)

