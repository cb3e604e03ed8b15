"""Host side of frame-aware capture: FRAME records tied to the edges of their DV pulses.

The records are decoded by :mod:`latscope.gateware.codec` (``FRAME_DTYPE``, ``COUNTER_DTYPE``, from
the ``FrameRecord`` and ``CounterRecord`` layouts; ``docs/stream-format.md`` section 8). This
module places each record on the capture's time line: frame ``k`` of a direction is the ``k``-th
pulse of its RX_DV / CRS_DV / TX_EN channel (:func:`place_frames`), and continues the 32-bit
``frame_index`` past its wrap (:func:`unwrap_frame_index`).
"""

import dataclasses

import numpy as np

from latscope.gateware.codec import FLAGS, FRAME_DTYPE

__all__ = ["frame_header", "FramePlacement", "place_frames", "FramePlacer", "PlacedFrames",
           "frame_edge_times", "capture_placement", "direction_channels", "HOST_FRAME_DTYPE",
           "unwrap_frame_index", "unwrap_frame_index_blocks"]


def frame_header(records, headers, i):
    """The kept bytes of record ``i``."""
    return bytes(headers[i, :int(records["header_len"][i])])


#: Channel roles whose rising edges number the frames of each direction (RX: RX_DV on MII,
#: CRS_DV on RMII; TX: TX_EN).
DIRECTION_ROLES = {0: ("rx_dv", "crs_dv"), 1: ("tx_en",)}


def direction_channels(channel_names, channel=None, rising=None):
    """``{direction: channel}`` from a capture's ``{channel: role}`` names.

    A capture may name both MII's ``rx_dv`` and RMII's ``crs_dv`` (the ECPIX-5's default names
    cover both buses, and only the bus the sniffer taps has pulses). Given the capture's events
    (``channel``, ``rising``), the candidate with the most rising edges is taken; without them,
    or on a tie, the lowest channel number.

    >>> names = {0: "rx_dv", 1: "tx_en", 2: "crs_dv"}
    >>> direction_channels(names)
    {0: 0, 1: 1}
    >>> import numpy as np
    >>> direction_channels(names, np.array([2, 2, 1, 0]), np.array([True, True, True, False]))
    {0: 2, 1: 1}
    """
    counts = None
    if channel is not None and rising is not None:
        channel = np.asarray(channel)
        counts = np.bincount(channel[np.asarray(rising, bool)].astype(np.int64),
                             minlength=max((int(c) for c in channel_names), default=-1) + 1)
    out = {}
    for d, roles in DIRECTION_ROLES.items():
        candidates = [ch for ch, role in sorted(channel_names.items()) if role in roles]
        if not candidates:
            continue
        if counts is not None:
            out[d] = max(candidates, key=lambda ch: (counts[ch] if ch < len(counts) else 0, -ch))
        else:
            out[d] = candidates[0]
    return out


#: Bit time of the two MII/RMII line rates, ns (IEEE 802.3 clauses 22 and 24; RMII 1.2).
_BIT_NS = (10.0, 100.0)
#: Bytes of preamble and SFD before a frame's destination MAC on the wire (IEEE 802.3 4.2.5).
_PREAMBLE_SFD = 8
#: Bytes a pulse may fall short of its frame at the other end: RMII 1.2 s5.3.2 lets the PHY drop
#: CRS_DV (carrier lost) while data still sits in its elasticity FIFO; the first pulse then ends
#: early and CRS_DV toggles until the data ends. The FIFO holds at most 16 bits for 1522-byte
#: frames at +-100 ppm (RMII 1.2 s5.4 elasticity), so 4 bytes is generous.
_EARLY_DROP = 4
#: The PHY's clock (+-100 ppm, IEEE 802.3 22.2.2.1) against the instrument's (+-100 ppm or better).
_CLOCK_TOLERANCE = 200e-6
#: Records whose ``frame_index`` runs this far from the visible pulses are searched for a better
#: alignment (a capture armed after frames had already been counted, a glitch split).
_MAX_SHIFT = 16


@dataclasses.dataclass
class FramePlacement:
    """Start and end ticks of each frame record (-1: unplaced) and why records are unplaced.

    ``reasons`` maps a reason (``"no edges"``, ``"count mismatch"``, ``"overflow at t=..."``,
    ``"duration vs length"``) to the number of records it left unplaced; ``notes`` are facts that
    unplaced nothing but qualify the tie (the DV pulse count against the COUNTERS totals)."""
    start: np.ndarray
    end: np.ndarray
    reasons: dict
    notes: list

    @property
    def unplaced(self):
        return int(np.count_nonzero((self.start < 0) | (self.end < 0)))

    def summary(self):
        """One line for a user, empty when every record is placed and nothing is noted."""
        return _summary(self.unplaced, len(self.start), self.reasons, self.notes)


def _summary(unplaced, n, reasons, notes):
    parts = []
    if unplaced:
        why = ", ".join(f"{reason}: {count}" for reason, count in reasons.items())
        parts.append(f"{unplaced} of {n} frame record(s) unplaced "
                     f"(not tied to DV edges; left out of frame stages) [{why}]")
    return "; ".join(parts + notes)


def _fits(duration_ns, length, odd_nibble):
    """Whether a DV pulse of ``duration_ns`` can carry a frame of ``length`` bytes at 10 or
    100 Mb/s. Longest: preamble + SFD + frame (+ a dribble nibble), plus one nibble of edge
    quantisation (MII samples on a 4-bit clock). Shortest: the frame alone (RX_DV may rise as
    late as the SFD, IEEE 802.3 22.2.2.6, and the glitch filter shifts both edges alike) less an
    RMII early carrier drop and one nibble. A length that saturated (65,535) has no upper bound."""
    ok = np.zeros(len(duration_ns), bool)
    length = length.astype(np.float64)
    for bit in _BIT_NS:
        nibble = 4 * bit
        hi = (8 * bit * (_PREAMBLE_SFD + length) * (1 + _CLOCK_TOLERANCE)
              + nibble * (1 + odd_nibble))
        hi = np.where(length >= 0xFFFF, np.inf, hi)
        lo = 8 * bit * (length - _EARLY_DROP) * (1 - _CLOCK_TOLERANCE) - nibble
        ok |= (duration_ns >= lo) & (duration_ns <= hi)
    return ok


def _misfits(p, p_start, p_end, length, odd, tick_hz):
    """Which records (``length``, ``odd`` nibble) cannot be pulses ``p`` (no such pulse, or one
    without both edges: no verdict)."""
    pc = np.clip(p, 0, len(p_start) - 1)
    s, e = p_start[pc], p_end[pc]
    known = (p >= 0) & (p < len(p_start)) & (s >= 0) & (e >= 0)
    return known & ~_fits((e - s) * 1e9 / tick_hz, length, odd)


def place_frames(records, time, channel, rising, channel_of, *, tick_hz=None, losses=(),
                 counters=None):
    """Tie each frame record to its direction's DV pulse, or leave it unplaced.

    The gateware numbers frames by ``frame_index`` since the timestamp reset and the edge
    capture sees each frame as one DV pulse, so frame ``k`` is pulse ``k``. What breaks the count
    is detected rather than trusted:

    * a frame in progress at the reset (or at arming): the sniffer counts it but only its fall is
      captured. When a channel's first edge is a falling edge, that fall ends pulse 0 (no start:
      the record's start stays -1) and rise ``k - 1`` starts frame ``k``;
    * frames counted but not seen (a capture armed after the reset while frames were on the wire)
      or seen twice (an unfiltered RMII CRS_DV toggling at a frame's end): with ``tick_hz``, each
      pulse's duration is checked against its record's length (:func:`_fits`). From the first
      record that does not fit, every constant shift of up to ``_MAX_SHIFT`` pulses is tried; the
      shift is kept only if it is the single one under which every later record fits, otherwise
      the records from there on are unplaced ("duration vs length");
    * edges lost in a LOSS span (``losses``: ``(first_time, span)``; a loss does not say which
      channel lost edges): a record whose pulse is at or after the first loss may have been given
      a later frame's pulse, so it is unplaced ("overflow at t=...").

    Returns
    -------
    FramePlacement
    """
    n = len(records)
    start = np.full(n, -1, np.int64)
    end = np.full(n, -1, np.int64)
    why = np.zeros(n, np.int8)          # index into the reason names below; 0: no verdict yet
    names = ["", "count mismatch", "duration vs length", "overflow", "no edges"]
    notes = []
    time = np.asarray(time, np.int64)
    channel = np.asarray(channel)
    rising = np.asarray(rising, bool)
    first_loss = min((int(t) for t, _ in losses), default=None)
    if first_loss is not None:
        at = f"{first_loss / tick_hz:.6f} s" if tick_hz else f"tick {first_loss}"
        names[3] = f"overflow at t={at}"
    for d, ch in channel_of.items():
        mine = np.flatnonzero(records["direction"] == d)
        if not len(mine):
            continue
        on = channel == ch
        t_on, r_on = time[on], rising[on]
        rises, falls = t_on[r_on], t_on[~r_on]
        lead = len(t_on) > 0 and not r_on[0]       # a pulse in progress when capture began
        j = np.searchsorted(falls, rises, side="right")
        ends = falls[np.minimum(j, len(falls) - 1)] if len(falls) else np.zeros(len(rises))
        p_start = np.concatenate([[-1] if lead else [], rises]).astype(np.int64)
        p_end = np.concatenate([falls[:1] if lead else [],
                                np.where(j < len(falls), ends, -1)]).astype(np.int64)
        k = records["frame_index"][mine].astype(np.int64)
        order = np.argsort(k, kind="stable")
        mine, k = mine[order], k[order]
        if not len(p_start):
            why[mine] = 4
            continue
        p = k.copy()
        lost = np.zeros(len(k), bool)
        if tick_hz:
            length = records["length"][mine].astype(np.int64)
            odd = (records["flags"][mine].astype(np.int64) & FLAGS["odd_nibble"]) != 0

            bad = _misfits(k, p_start, p_end, length, odd, tick_hz)
            if bad.any():
                first = int(np.argmax(bad))
                tail = slice(first, None)
                fitting = [s for s in range(-_MAX_SHIFT, _MAX_SHIFT + 1)
                           if s and not _misfits(k[tail] + s, p_start, p_end, length[tail],
                                                odd[tail], tick_hz).any()
                           and np.any((k[tail] + s >= 0) & (k[tail] + s < len(p_start)))]
                if len(fitting) == 1:
                    p[tail] += fitting[0]
                    notes.append(f"{'RX' if d == 0 else 'TX'} frame records from index "
                                 f"{int(k[first])} on are tied to DV pulses {fitting[0]:+d} "
                                 f"from their count: the one shift every pulse duration fits")
                else:
                    lost[tail] = True
                    why[mine[tail]] = 2
        inside = ~lost & (p >= 0) & (p < len(p_start))
        pc = np.clip(p, 0, len(p_start) - 1)
        start[mine] = np.where(inside, p_start[pc], -1)
        end[mine] = np.where(inside, p_end[pc], -1)
        why[mine[~lost & ~inside]] = 1
        if first_loss is not None:
            # at or after the first loss a pulse may be a later frame's: its own may be lost
            after = inside & (np.maximum(start[mine], end[mine]) >= first_loss)
            why[mine[after]] = 3
            start[mine[after]] = end[mine[after]] = -1
        if counters is not None and len(counters) and first_loss is None:
            seen = counters["frames_seen"][counters["direction"] == d].astype(np.int64)
            if len(seen) and int(seen.max()) > len(p_start):
                notes.append(f"{'RX' if d == 0 else 'TX'}: {len(p_start)} DV pulses but the FPGA "
                             f"counted {int(seen.max())} frames (COUNTERS)")
    reasons = {}
    for code in range(1, len(names)):
        count = int(np.count_nonzero(why == code))
        if count:
            reasons[names[code]] = count
    rest = (why == 0) & ((start < 0) | (end < 0))
    for label, sel in (("in progress at the start", rest & (start < 0) & (end >= 0)),
                       ("in progress at the end", rest & (start >= 0) & (end < 0)),
                       ("no edges", rest & (start < 0) & (end < 0))):
        if sel.any():
            reasons[label] = reasons.get(label, 0) + int(np.count_nonzero(sel))
    return FramePlacement(start, end, reasons, notes)


def frame_edge_times(records, time, channel, rising, channel_of, **checks):
    """``(start, end)`` ticks of each frame record: :func:`place_frames` without the reasons
    (``checks``: its ``tick_hz``, ``losses``, ``counters``).

    >>> import numpy as np
    >>> rec = np.zeros(2, FRAME_DTYPE); rec["frame_index"] = [1, 0]
    >>> t = np.array([10, 20, 30, 45]); ch = np.zeros(4, np.uint8)
    >>> rise = np.array([True, False, True, False])
    >>> [a.tolist() for a in frame_edge_times(rec, t, ch, rise, {0: 0})]
    [[30, 10], [45, 20]]
    """
    placed = place_frames(records, time, channel, rising, channel_of, **checks)
    return placed.start, placed.end


def capture_placement(cap, events=None):
    """:func:`place_frames` for an open ``Capture``: its FRAME records, its DV channels, its
    tick rate, LOSS spans and COUNTERS."""
    records, _ = cap.frames()
    if events is None:          # only the DV channels' edges, chunk by chunk (verify's memory)
        dv = [ch for ch, role in cap.channel_names.items()
              if role in {r for roles in DIRECTION_ROLES.values() for r in roles}]
        cols = [[], [], []]
        for chunk in cap.iter_chunks():
            keep = np.isin(chunk.channel, dv)
            for col, values in zip(cols, (chunk.time, chunk.channel, chunk.rising),
                                   strict=True):
                col.append(values[keep])
        time, channel, rising = (np.concatenate(c) if c else np.empty(0) for c in cols)
    else:
        time, channel, rising = events.time, events.channel, events.rising
    channels = direction_channels(cap.channel_names, channel, rising)
    return place_frames(records, time, channel, rising, channels,
                        tick_hz=float(cap.metadata["tick_hz"]),
                        losses=[(r.first_time, r.span) for r in cap.losses],
                        counters=cap.frame_counters())


#: ``FRAME_DTYPE`` as a capture file's reader returns it: ``frame_index`` is 64-bit, unwrapped
#: past the record's 32 bits (:func:`unwrap_frame_index`). Files store
#: :data:`~latscope.gateware.codec.FRAME_DTYPE`.
HOST_FRAME_DTYPE = np.dtype([(name, np.int64 if name == "frame_index" else FRAME_DTYPE[name])
                             for name in FRAME_DTYPE.names])


def unwrap_frame_index(records):
    """``records`` as :data:`HOST_FRAME_DTYPE`, each direction's ``frame_index`` continued past
    2**32.

    The gateware's frame index is 32 bits: at 100 Mb/s line rate (148,810 frames/s) it wraps after
    about 8 h. Records of one direction arrive in order, so a step back by more than 2**31 is a
    wrap (the index continues at 2**32 + raw), and a step forward by more than 2**31 is a step back
    across one (a record out of order); smaller steps back (a timestamp reset) are kept as they
    are.

    >>> rec = np.zeros(5, FRAME_DTYPE)
    >>> rec["frame_index"] = [2**32 - 2, 2**32 - 1, 0, 7, 1]
    >>> rec["direction"] = [0, 0, 0, 1, 0]
    >>> unwrap_frame_index(rec)["frame_index"].tolist()
    [4294967294, 4294967295, 4294967296, 7, 4294967297]
    """
    return next(unwrap_frame_index_blocks([records]))


def unwrap_frame_index_blocks(blocks):
    """:func:`unwrap_frame_index` over consecutive blocks of records (the FRMS chunks of a file,
    read one at a time): yields each block as :data:`HOST_FRAME_DTYPE`, numbered as the whole
    would be.

    >>> rec = np.zeros(4, FRAME_DTYPE); rec["frame_index"] = [2**32 - 1, 0, 1, 2]
    >>> [b["frame_index"].tolist() for b in unwrap_frame_index_blocks([rec[:1], rec[1:]])]
    [[4294967295], [4294967296, 4294967297, 4294967298]]
    """
    last = {}           # direction -> (raw index, wraps) of its last record so far
    for records in blocks:
        records = np.asarray(records)
        out = records.astype(HOST_FRAME_DTYPE)
        for d in (0, 1):
            mine = np.flatnonzero(records["direction"] == d)
            if not len(mine):
                continue
            raw = records["frame_index"][mine].astype(np.int64)
            prev_raw, prev_wraps = last.get(d, (raw[0], 0))
            step = np.diff(np.concatenate(([prev_raw], raw)))
            wraps = prev_wraps + np.cumsum((step < -(1 << 31)).astype(np.int64)
                                           - (step > (1 << 31)))
            index = raw + (wraps << 32)
            out["frame_index"][mine] = np.where(index < 0, raw, index)
            last[d] = (int(raw[-1]), int(wraps[-1]))
        yield out


@dataclasses.dataclass
class PlacedFrames:
    """Records :class:`FramePlacer` has tied to their pulses: ``records``
    (:data:`HOST_FRAME_DTYPE`), their ``index`` in the capture's stream of records, and their
    ``start`` and ``end`` ticks (both known)."""
    records: np.ndarray
    index: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def concat(cls, parts):
        parts = [p for p in parts if len(p.index)]
        if not parts:
            return cls(np.zeros(0, HOST_FRAME_DTYPE), *(np.zeros(0, np.int64) for _ in range(3)))
        return cls(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("records", "index", "start", "end")))


class _Direction:
    """The pulses of one direction's DV channel and the records of that direction not yet tied."""

    def __init__(self, d):
        self.d = d
        self.channel = None
        self.seen = False             # an edge of the channel has been seen
        self.p_start = np.zeros(0, np.int64)     # complete pulses from index base on
        self.p_end = np.zeros(0, np.int64)
        self.base = 0
        self.complete = 0             # pulses with both edges known (or a lead fall)
        self.rises = np.zeros(0, np.int64)       # rises still waiting for their fall
        self.rec = np.zeros(0, HOST_FRAME_DTYPE)     # records read, not yet tied
        self.idx = np.zeros(0, np.int64)
        self.last_k = -1
        self.mode = "order"           # order, search (after a misfit), shift, lost
        self.shift = 0
        self.candidates = None


class FramePlacer:
    """:func:`place_frames` in one pass over a capture: pulses are numbered as their edges arrive
    (:meth:`feed`), records are read from ``blocks`` (an iterator of :data:`HOST_FRAME_DTYPE`
    arrays in stream order) only as far as the pulses have come, and each record is handed on
    (:class:`PlacedFrames`) as soon as its pulse is complete. Memory holds the records and pulses
    not yet tied.

    It decides as :func:`place_frames` does, with three differences that only captures whose
    records do not tie by count can show: the DV channel of a direction (when the names offer
    both ``rx_dv`` and ``crs_dv``) is the one with the most rising edges in the first chunk that
    has any; after a misfit, the one fitting shift is taken once :attr:`CONFIRM` records fit it
    (and no other), and the records are left unplaced when :attr:`HOLD` records leave more
    than one; a record that misfits after a shift was taken is left unplaced with those after
    it (not every record from the first misfit). A note says when any of these happened.
    """

    #: Records that must fit a lone remaining shift before it is taken.
    CONFIRM = 1024
    #: Records held while several shifts still fit, before the tail is given up.
    HOLD = 1 << 16
    #: Records read ahead of the pulses (of either direction) before reading waits.
    READ_AHEAD = 1 << 16

    def __init__(self, blocks, channel_names, *, tick_hz=None, losses=(), counters=None):
        self._blocks = iter(blocks)
        self._exhausted = False
        self._read = 0
        self.tick_hz = tick_hz
        self.counters = counters
        self.first_loss = min((int(t) for t, _ in losses), default=None)
        self.names = ["", "count mismatch", "duration vs length", "overflow", "no edges"]
        if self.first_loss is not None:
            at = f"{self.first_loss / tick_hz:.6f} s" if tick_hz else f"tick {self.first_loss}"
            self.names[3] = f"overflow at t={at}"
        self.candidates = {d: [ch for ch, role in sorted(channel_names.items()) if role in roles]
                           for d, roles in DIRECTION_ROLES.items()}
        self.dirs = {d: _Direction(d) for d in DIRECTION_ROLES}
        self.why = np.zeros(len(self.names), np.int64)
        self.rest = {"in progress at the start": 0, "in progress at the end": 0, "no edges": 0}
        self.notes = []
        self.total = 0
        self.max_time = None         # latest start or end of any record tied (even in part)

    # --- input ---------------------------------------------------------------------------------
    def feed(self, time, channel, rising):
        """Number the DV pulses of one chunk of events; returns the records now tied."""
        time = np.asarray(time, np.int64)
        channel = np.asarray(channel)
        rising = np.asarray(rising, bool)
        out = []
        for d, st in self.dirs.items():
            if st.channel is None and self.candidates[d]:
                counts = {ch: int(np.count_nonzero((channel == ch) & rising))
                          for ch in self.candidates[d]}
                seen = [ch for ch in self.candidates[d] if np.any(channel == ch)]
                if seen:
                    st.channel = max(self.candidates[d], key=lambda ch: (counts[ch], -ch))
            if st.channel is None:
                continue
            on = channel == st.channel
            self._pulses(st, time[on], rising[on])
            out.append(self._place(st))
        return PlacedFrames.concat(out)

    def _pulses(self, st, t, r):
        if not len(t):
            return
        starts, ends = [], []
        if not st.seen:
            st.seen = True
            if not r[0]:            # a pulse in progress when capture began: its fall only
                starts.append(np.array([-1], np.int64))
                ends.append(t[:1])
        rises = np.concatenate([st.rises, t[r]])
        falls = t[~r]
        j = np.searchsorted(falls, rises, side="right")
        done = j < len(falls)
        starts.append(rises[done])
        ends.append(falls[j[done]])
        st.rises = rises[~done]
        new_start = np.concatenate(starts)
        st.p_start = np.concatenate([st.p_start, new_start])
        st.p_end = np.concatenate([st.p_end, np.concatenate(ends)])
        st.complete += len(new_start)

    def _read_more(self):
        """Read the next block of records; False when there is none."""
        if self._exhausted:
            return False
        block = next(self._blocks, None)
        if block is None:
            self._exhausted = True
            return False
        index = np.arange(self._read, self._read + len(block), dtype=np.int64)
        self._read += len(block)
        self.total += len(block)
        for d, st in self.dirs.items():
            mine = block["direction"] == d
            if not mine.any():
                continue
            if not self.candidates[d]:          # no DV channel for this direction at all
                self.rest["no edges"] += int(np.count_nonzero(mine))
                continue
            st.rec = np.concatenate([st.rec, block[mine]])
            st.idx = np.concatenate([st.idx, index[mine]])
            st.last_k = int(block["frame_index"][mine][-1])
        other = ~np.isin(block["direction"], list(self.dirs))
        self.rest["no edges"] += int(np.count_nonzero(other))
        return True

    # --- placement -----------------------------------------------------------------------------
    def _pulse(self, st, p):
        """Start and end of pulses ``p`` (kept ones; -1 where unknown)."""
        q = p - st.base
        ok = (q >= 0) & (q < len(st.p_start))
        qc = np.clip(q, 0, max(len(st.p_start) - 1, 0))
        s = np.where(ok, st.p_start[qc], -1) if len(st.p_start) else np.full(len(p), -1)
        e = np.where(ok, st.p_end[qc], -1) if len(st.p_end) else np.full(len(p), -1)
        return s, e

    def _misfit(self, st, rec, p):
        """Records that cannot be pulses ``p`` (pulses known), as :func:`_misfits`."""
        s, e = self._pulse(st, p)
        known = (s >= 0) & (e >= 0) & (p >= 0) & (p < st.complete)
        length = rec["length"].astype(np.int64)
        odd = (rec["flags"].astype(np.int64) & FLAGS["odd_nibble"]) != 0
        return known & ~_fits((e - s) * 1e9 / self.tick_hz, length, odd)

    def _place(self, st, final=False):
        """Tie the records whose pulses are complete (``final``: every record read)."""
        while not final and (st.last_k + st.shift < st.complete + _MAX_SHIFT
                             and sum(len(x.rec) for x in self.dirs.values()) < self.READ_AHEAD):
            if not self._read_more():
                break
        out = []
        if st.mode == "search":
            self._search(st, final)
        if st.mode in ("order", "shift") and len(st.rec):
            p = st.rec["frame_index"] + st.shift
            ready = p < st.complete if not final else np.ones(len(p), bool)
            n = int(np.argmin(ready)) if not ready.all() else len(p)
            rec, idx, p = st.rec[:n], st.idx[:n], p[:n]
            bad = self._misfit(st, rec, p) if self.tick_hz else np.zeros(n, bool)
            if bad.any():
                first = int(np.argmax(bad))
                out.append(self._tie(st, rec[:first], idx[:first], p[:first]))
                tail_rec, tail_idx = st.rec[first:], st.idx[first:]
                st.rec, st.idx = tail_rec, tail_idx
                if st.mode == "shift":
                    self.notes.append(f"{'RX' if st.d == 0 else 'TX'} frame records from index "
                                      f"{int(rec['frame_index'][first])} on misfit the shift "
                                      f"taken before: left unplaced")
                    st.mode = "lost"
                else:
                    st.mode = "search"
                    st.candidates = [s for s in range(-_MAX_SHIFT, _MAX_SHIFT + 1) if s]
                    self._search(st, final)
                    if st.mode in ("order", "shift"):
                        return PlacedFrames.concat(out + [self._place(st, final)])
            else:
                out.append(self._tie(st, rec, idx, p))
                st.rec, st.idx = st.rec[n:], st.idx[n:]
        if st.mode == "lost" and len(st.rec):
            self.why[2] += len(st.rec)
            st.rec, st.idx = st.rec[:0], st.idx[:0]
        self._trim(st)
        return PlacedFrames.concat(out)

    def _search(self, st, final):
        """After a misfit: keep the shifts every held record fits; take a lone one once enough
        records confirm it, give the records up when none is left."""
        k = st.rec["frame_index"].astype(np.int64)
        alive = []
        for s in st.candidates:
            p = k + s
            if self._misfit(st, st.rec, p).any():
                continue
            alive.append(s)
        if final:       # a shift under which no record has a pulse ties nothing
            n_pulses = st.complete + len(st.rises)
            alive = [s for s in alive if np.any((k + s >= 0) & (k + s < n_pulses))]
        st.candidates = alive
        verdicts = np.count_nonzero(k + (alive[0] if alive else 0) < st.complete)
        known_all = final
        if not alive:
            st.mode = "lost"
            return
        if len(alive) == 1 and (known_all or verdicts >= self.CONFIRM):
            s = alive[0]
            st.mode, st.shift = "shift", s
            self.notes.append(f"{'RX' if st.d == 0 else 'TX'} frame records from index "
                              f"{int(k[0])} on are tied to DV pulses {s:+d} from their count: "
                              f"the one shift every pulse duration fits")
            return
        if known_all or len(st.rec) >= self.HOLD:
            st.mode = "lost"

    def _tie(self, st, rec, idx, p):
        s, e = self._pulse(st, p)
        inside = (p >= st.base) & (p < st.complete + len(st.rises))
        # pulses still rising at the end of the capture: their start only
        pend = inside & (p >= st.complete)
        if pend.any():
            s[pend] = st.rises[p[pend] - st.complete]
            e[pend] = -1
        self.why[1] += int(np.count_nonzero(~inside))
        s, e = np.where(inside, s, -1), np.where(inside, e, -1)
        if self.first_loss is not None:
            after = inside & (np.maximum(s, e) >= self.first_loss)
            self.why[3] += int(np.count_nonzero(after))
            s, e = np.where(after, -1, s), np.where(after, -1, e)
        both = (s >= 0) & (e >= 0)
        self.rest["in progress at the start"] += int(np.count_nonzero((s < 0) & (e >= 0)))
        self.rest["in progress at the end"] += int(np.count_nonzero((s >= 0) & (e < 0)))
        top = np.maximum(s, e)
        if len(top) and top.max() >= 0:
            self.max_time = max(self.max_time or 0, int(top.max()))
        return PlacedFrames(rec[both], idx[both], s[both], e[both])

    def _trim(self, st):
        """Drop the pulses no record still needs."""
        if st.mode == "search" or not len(st.p_start):
            keep_from = st.base if st.mode == "search" else st.complete
        else:
            keep_from = st.complete
        if len(st.rec):
            keep_from = min(keep_from, int(st.rec["frame_index"][0]) + st.shift - _MAX_SHIFT)
        elif not self._exhausted:
            keep_from = min(keep_from, st.last_k + 1 + st.shift - _MAX_SHIFT)
        cut = min(max(0, keep_from - st.base), len(st.p_start))
        if cut:
            st.p_start, st.p_end = st.p_start[cut:], st.p_end[cut:]
            st.base += cut

    def progress(self):
        """A tick before which every record still to come is tied: records tied later all start
        at or after it (``None``: no limit from the records)."""
        limit = None
        for st in self.dirs.values():
            if st.channel is None or st.mode == "lost":
                continue
            if st.mode == "search":
                q = st.base
            elif len(st.rec):
                q = int(st.rec["frame_index"][0]) + st.shift
            elif not self._exhausted:
                q = st.last_k + 1 + st.shift
            else:
                continue
            q = max(q, 0)
            if q < st.complete:
                s, e = self._pulse(st, np.array([q]))
                t = int(s[0]) if s[0] >= 0 else int(e[0])
            elif q - st.complete < len(st.rises):
                t = int(st.rises[q - st.complete])
            else:
                continue
            limit = t if limit is None else min(limit, t)
        return limit

    def finish(self):
        """Tie every remaining record (pulses still rising end at -1); returns the records tied
        and the :class:`FramePlacement`-style ``(unplaced, reasons, notes)``."""
        while self._read_more():
            pass
        out = []
        for d, st in self.dirs.items():
            if st.channel is None:
                # no edge on any candidate channel: as place_frames, no pulses at all
                n = len(st.rec)
                if self.candidates[d]:
                    self.why[4] += n
                st.rec, st.idx = st.rec[:0], st.idx[:0]
                continue
            out.append(self._place(st, final=True))
            n_pulses = st.complete + len(st.rises)
            if self.counters is not None and len(self.counters) and self.first_loss is None:
                seen = self.counters["frames_seen"][self.counters["direction"] == d]
                if len(seen) and int(seen.max()) > n_pulses:
                    self.notes.append(f"{'RX' if d == 0 else 'TX'}: {n_pulses} DV pulses but the "
                                      f"FPGA counted {int(seen.max())} frames (COUNTERS)")
        reasons = {}
        for code in range(1, len(self.names)):
            if self.why[code]:
                reasons[self.names[code]] = int(self.why[code])
        for label, count in self.rest.items():
            if count:
                reasons[label] = reasons.get(label, 0) + count
        unplaced = int(sum(reasons.values()))
        return PlacedFrames.concat(out), unplaced, reasons, list(self.notes)

    def summary(self, unplaced, reasons, notes):
        """:meth:`FramePlacement.summary` of the finished placement."""
        return _summary(unplaced, self.total, reasons, notes)
