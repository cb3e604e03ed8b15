"""Markers that carry identity: the LSID-1 pulse code, decoded from a marker channel's edges.

The convention (``docs/marker-identity.md``; encoder in the portable C core,
``zephyr-app/lib/latscope_core/src/marker_code.c``): a marker is the usual pulse, whose rising
edge is the measurement point, followed by :data:`CODE_PULSES` code pulses: bits 0..7 of the
packet's sequence number, least significant first, then an odd parity bit. A ``0`` is a short
pulse (high as long as the marker pulse, one *unit* ``U``), a ``1`` a long one (high
:data:`LONG_UNITS` ``U``); each code pulse follows one ``U`` of low time. A plain marker is a
lone pulse. Decoding needs no clock: a code pulse is long when it is high for more than
:data:`LONG_THRESHOLD` times the marker pulse, and a pulse belongs to the marker before it while
its low gap is at most :data:`GAP_FACTOR` times the previous pulse's width.

Pure functions, arrays in and arrays out, the same for live, imported (``.sr``, ``.vcd``,
``.csv``) and replayed captures: they all reach the analysis as edge arrays.

>>> import numpy as np
>>> high, low = schedule(0xA5)
>>> t, r = edges_of_schedule(high, low, unit=40, at=1000)       # 40 ticks = 50 ns at 1.25 ns
>>> codes = decode(t, r)
>>> codes.time.tolist(), codes.ident.tolist(), codes.status.tolist()
([1000], [165], [0])
"""

import dataclasses

import numpy as np

__all__ = ["CODE_BITS", "CODE_PULSES", "LONG_UNITS", "LONG_THRESHOLD", "GAP_FACTOR",
           "IDLE_UNITS", "CODED", "PLAIN", "DAMAGED", "MarkerCodes", "schedule",
           "edges_of_schedule", "decode", "group_starts", "is_coded_channel"]

#: Sequence bits carried (the low byte), then one odd parity bit.
CODE_BITS = 8
#: Code pulses after the marker pulse.
CODE_PULSES = CODE_BITS + 1
#: High time of a ``1`` in units (a ``0`` and the marker pulse are one unit).
LONG_UNITS = 4
#: A code pulse is a ``1`` when high for more than this many marker-pulse widths.
LONG_THRESHOLD = 2.0
#: A pulse continues the code of the pulse before it while its low gap is at most this many
#: widths of that pulse; a longer gap starts a new marker.
GAP_FACTOR = 4
#: The encoder keeps a channel low at least this many units after a code (the next marker's
#: rising edge is then more than ``GAP_FACTOR * LONG_UNITS`` units after the code's last fall).
IDLE_UNITS = 32

CODED, PLAIN, DAMAGED = 0, 1, 2


@dataclasses.dataclass
class MarkerCodes:
    """Markers of one channel: rising tick of each marker pulse (the measurement point), its
    decoded identity (the sequence number's low :data:`CODE_BITS` bits, -1 when none) and status
    (:data:`CODED`, :data:`PLAIN`: a lone pulse, :data:`DAMAGED`: a pulse group that is not a
    valid code, e.g. a wrong count of pulses or a parity error)."""
    time: np.ndarray
    ident: np.ndarray
    status: np.ndarray

    @property
    def coded(self):
        return int(np.count_nonzero(self.status == CODED))

    @property
    def damaged(self):
        return int(np.count_nonzero(self.status == DAMAGED))


def schedule(seq):
    """High and low times, in units, of the marker pulse and its code pulses for ``seq``.

    ``high[0]`` is the marker pulse; ``low[k]`` is the low time after pulse ``k`` (the last one
    is the idle time the encoder keeps before the channel's next marker).

    >>> schedule(1)
    ([1, 4, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1, 32])
    """
    bits = [(int(seq) >> k) & 1 for k in range(CODE_BITS)]
    bits.append(1 ^ (sum(bits) & 1))                 # odd parity: an odd count of ones
    high = [1] + [LONG_UNITS if b else 1 for b in bits]
    low = [1] * CODE_PULSES + [IDLE_UNITS]
    return high, low


def edges_of_schedule(high, low, *, unit, at=0):
    """Edge ticks and directions of one schedule starting at tick ``at`` (``unit`` ticks per
    unit): what the instrument would timestamp."""
    t, out, rising = int(at), [], []
    for h, lo in zip(high, low, strict=True):
        out += [t, t + h * unit]
        rising += [True, False]
        t += (h + lo) * unit
    return np.array(out, np.int64), np.array(rising, bool)


def _pulses(time, rising):
    """Rise and fall ticks of each complete high pulse of one channel's edges."""
    time = np.asarray(time, np.int64)
    rising = np.asarray(rising, bool)
    r = np.flatnonzero(rising)
    r = r[(r + 1 < len(time))]
    r = r[~rising[r + 1]]                       # a rise followed by a fall
    return time[r], time[r + 1]


def group_starts(rise, fall):
    """Boolean per pulse: it begins a marker (its low gap is more than :data:`GAP_FACTOR`
    widths of the pulse before it, or it is the first)."""
    start = np.ones(len(rise), bool)
    if len(rise) > 1:
        width = fall[:-1] - rise[:-1]
        gap = rise[1:] - fall[:-1]
        start[1:] = gap > GAP_FACTOR * np.maximum(width, 1)
    return start


def decode(time, rising):
    """Decode the markers of one channel from its edges (ticks sorted; ``rising`` per edge).

    Returns
    -------
    MarkerCodes
    """
    rise, fall = _pulses(time, rising)
    starts = group_starts(rise, fall)
    first = np.flatnonzero(starts)
    group = np.cumsum(starts) - 1
    count = np.bincount(group, minlength=len(first)) if len(rise) else np.zeros(0, np.int64)
    width = fall - rise
    ref = width[first][group] if len(rise) else width
    long_ = width > LONG_THRESHOLD * np.maximum(ref, 1)
    pos = np.arange(len(rise)) - first[group] if len(rise) else np.zeros(0, np.int64)
    ident = np.full(len(first), -1, np.int64)
    status = np.where(count == 1, PLAIN, DAMAGED).astype(np.uint8)
    full = count == 1 + CODE_PULSES
    if full.any():
        sel = full[group] & (pos >= 1)
        bit = (pos[sel] - 1).astype(np.int64)
        value = np.zeros(len(first), np.int64)
        ones = np.zeros(len(first), np.int64)
        data = sel.copy()
        data[sel] = bit < CODE_BITS
        np.add.at(value, group[data], long_[data].astype(np.int64) << (pos[data] - 1))
        np.add.at(ones, group[sel], long_[sel].astype(np.int64))
        good = full & (ones % 2 == 1)
        ident[good] = value[good]
        status[good] = CODED
    return MarkerCodes(rise[first], ident, status)


def is_coded_channel(codes):
    """True when a channel carries identity: some marker decodes, and at least as many decode
    as are damaged (plain markers closer together than a code's gaps form groups that are not
    codes; a group of ten by chance with the right parity stays rare against them)."""
    return codes.coded > 0 and codes.coded >= codes.damaged


def marker_rises(time, rising, state=None):
    """Which rising edges of one channel begin a marker (the rest are code pulses), chunk by
    chunk: ``state`` is the ``(rise, fall)`` of the last complete pulse of the previous chunk
    (None at the start); returns the boolean mask over ``time`` (True only on rising edges that
    begin a marker) and the state for the next chunk.

    >>> t, r = edges_of_schedule(*schedule(3), unit=10, at=0)
    >>> mask, state = marker_rises(t, r)
    >>> t[mask].tolist(), int(mask.sum())
    ([0], 1)
    """
    time = np.asarray(time, np.int64)
    rising = np.asarray(rising, bool)
    if state is not None:
        t = np.concatenate([np.asarray(state, np.int64), time])
        r = np.concatenate([[True, False], rising])
    else:
        t, r = time, rising
    rise_pos = np.flatnonzero(r)
    fall_pos = np.flatnonzero(~r)
    k = np.searchsorted(fall_pos, rise_pos) - 1           # the last fall before each rise
    has = k >= 0
    j = fall_pos[np.maximum(k, 0)] if len(fall_pos) else np.zeros(len(rise_pos), np.int64)
    q = np.searchsorted(rise_pos, j) - 1                    # the rise of that fall's pulse
    has &= q >= 0
    rj = rise_pos[np.maximum(q, 0)] if len(rise_pos) else j
    width = np.maximum(t[j] - t[rj], 1)
    begins = ~has | (t[rise_pos] - t[j] > GAP_FACTOR * width)
    mask = np.zeros(len(t), bool)
    mask[rise_pos[begins]] = True
    if len(fall_pos):
        last_fall = fall_pos[-1]
        before = rise_pos[rise_pos < last_fall]
        if len(before):
            state = (int(t[before[-1]]), int(t[last_fall]))
    return (mask[2:] if len(t) > len(time) else mask), state
