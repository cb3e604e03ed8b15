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

__all__ = ["frame_header", "FramePlacement", "place_frames", "frame_edge_times",
           "capture_placement", "direction_channels", "HOST_FRAME_DTYPE", "unwrap_frame_index"]


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
        parts = []
        if self.unplaced:
            why = ", ".join(f"{reason}: {n}" for reason, n in self.reasons.items())
            parts.append(f"{self.unplaced} of {len(self.start)} frame record(s) unplaced "
                         f"(not tied to DV edges; left out of frame stages) [{why}]")
        return "; ".join(parts + self.notes)


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
    records = np.asarray(records)
    out = records.astype(HOST_FRAME_DTYPE)
    for d in (0, 1):
        mine = np.flatnonzero(records["direction"] == d)
        if len(mine) < 2:
            continue
        raw = records["frame_index"][mine].astype(np.int64)
        step = np.diff(raw)
        wraps = np.concatenate(([0], np.cumsum((step < -(1 << 31)).astype(np.int64)
                                               - (step > (1 << 31)))))
        index = raw + (wraps << 32)
        out["frame_index"][mine] = np.where(index < 0, raw, index)
    return out
