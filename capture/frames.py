"""Host side of frame-aware capture: FRAME and COUNTERS records as NumPy columns.

The layouts are ``FrameRecord``, ``FrameFlags`` and ``CounterRecord`` in
:mod:`latscope.gateware.protocol`; every offset and width below is derived from them
(``docs/stream-format.md`` section 8). Records are decoded all at once: a gather of the payload
bytes into a ``(n, size)`` array, then shifts and masks per field.
"""

import numpy as np
from amaranth.lib import data

from latscope.gateware.protocol import CounterRecord, FrameFlags, FrameRecord

__all__ = ["FRAME_DTYPE", "COUNTER_DTYPE", "FRAME_BYTES", "COUNTER_BYTES", "HEADER_MAX",
           "FLAGS", "decode_frame_records", "decode_counter_records", "empty_frames",
           "empty_counters", "frame_header"]

FRAME_BYTES = data.Layout.cast(FrameRecord).size // 8
COUNTER_BYTES = data.Layout.cast(CounterRecord).size // 8
#: Largest number of kept frame bytes a record can carry (gateware/sniffer.py MAX_HEADER_BYTES).
HEADER_MAX = 64
#: ``{flag name: bit mask}`` of the ``flags`` column.
FLAGS = {name: ((1 << f.width) - 1) << f.offset for name, f in data.Layout.cast(FrameFlags)
         if name != "reserved"}


def _fields(layout):
    return {name: (f.offset, f.width) for name, f in data.Layout.cast(layout)
            if name != "reserved"}


def _uint(width):
    return next(np.dtype(f"<u{n}") for n in (1, 2, 4, 8) if 8 * n >= width)


_FR = _fields(FrameRecord)
_CR = _fields(CounterRecord)
#: One decoded FRAME record per row; ``header_len`` is the number of kept bytes (see
#: :func:`frame_header`).
FRAME_DTYPE = np.dtype([(name, _uint(w)) for name, (_, w) in _FR.items()]
                       + [("header_len", np.uint8)])
COUNTER_DTYPE = np.dtype([(name, _uint(w)) for name, (_, w) in _CR.items()])


def empty_frames():
    return np.empty(0, FRAME_DTYPE), np.empty((0, HEADER_MAX), np.uint8)


def empty_counters():
    return np.empty(0, COUNTER_DTYPE)


def _unpack(raw, fields, dtype):
    """Fields of little-endian records (rows of ``raw``, uint8) into a structured array."""
    n = len(raw)
    out = np.zeros(n, dtype)
    if not n:
        return out
    for name, (offset, width) in fields.items():
        first, last = offset // 8, (offset + width - 1) // 8
        value = np.zeros(n, np.uint64)
        for i in range(first, last + 1):
            value |= raw[:, i].astype(np.uint64) << np.uint64(8 * (i - first))
        value >>= np.uint64(offset % 8)
        value &= np.uint64((1 << width) - 1)
        out[name] = value
    return out


def _gather(arr, starts, nbytes):
    idx = np.asarray(starts, np.intp)[:, None] + np.arange(nbytes, dtype=np.intp)
    return arr[idx]


def decode_frame_records(arr, starts, lengths):
    """FRAME payloads of ``lengths`` bytes at ``starts`` in the uint8 array ``arr`` (every
    length >= :data:`FRAME_BYTES`) to ``(records, headers)``: a :data:`FRAME_DTYPE` array and an
    ``(n, HEADER_MAX)`` uint8 array of kept frame bytes, zero past ``header_len``."""
    starts = np.asarray(starts, np.intp)
    lengths = np.asarray(lengths, np.intp)
    if not len(starts):
        return empty_frames()
    records = _unpack(_gather(arr, starts, FRAME_BYTES), _FR, FRAME_DTYPE)
    kept = np.minimum(lengths - FRAME_BYTES, HEADER_MAX)
    kept = np.minimum(kept, records["length"])      # bytes past the frame are padding
    records["header_len"] = kept
    headers = np.zeros((len(starts), HEADER_MAX), np.uint8)
    if kept.any():
        cols = np.arange(HEADER_MAX)
        mask = cols[None, :] < kept[:, None]
        src = np.minimum(starts[:, None] + FRAME_BYTES + cols[None, :], len(arr) - 1)
        headers[mask] = arr[src][mask]
    return records, headers


def decode_counter_records(arr, starts):
    """COUNTERS payloads at ``starts`` to a :data:`COUNTER_DTYPE` array."""
    starts = np.asarray(starts, np.intp)
    if not len(starts):
        return empty_counters()
    return _unpack(_gather(arr, starts, COUNTER_BYTES), _CR, COUNTER_DTYPE)


def frame_header(records, headers, i):
    """The kept bytes of record ``i``."""
    return bytes(headers[i, :int(records["header_len"][i])])


#: Channel roles whose rising edges number the frames of each direction (RX: RX_DV on MII,
#: CRS_DV on RMII; TX: TX_EN).
DIRECTION_ROLES = {0: ("rx_dv", "crs_dv"), 1: ("tx_en",)}


def frame_edge_times(records, time, channel, rising, channel_of):
    """Start and end ticks of each frame record, from its direction's DV edges.

    Frame ``frame_index`` of a direction starts at that channel's ``frame_index``-th rising edge
    (counting from 0 since the timestamp reset, which is where a capture starts) and ends at the
    next falling edge of the same channel.

    Parameters
    ----------
    records : FRAME_DTYPE array
    time, channel, rising : arrays
        The capture's events.
    channel_of : dict
        ``{direction: channel number}`` of the RX and TX valid signals (missing: unknown).

    Returns
    -------
    (start, end) : int64 arrays
        Ticks; -1 where the edge is not in the capture (lost, or a capture that did not start at
        a timestamp reset).

    Examples
    --------
    >>> import numpy as np
    >>> rec = np.zeros(2, FRAME_DTYPE); rec["frame_index"] = [1, 0]
    >>> t = np.array([10, 20, 30, 45]); ch = np.zeros(4, np.uint8)
    >>> rise = np.array([True, False, True, False])
    >>> [a.tolist() for a in frame_edge_times(rec, t, ch, rise, {0: 0})]
    [[30, 10], [45, 20]]
    """
    start = np.full(len(records), -1, np.int64)
    end = np.full(len(records), -1, np.int64)
    time = np.asarray(time, np.int64)
    for d, ch in channel_of.items():
        mine = np.flatnonzero(records["direction"] == d)
        if not len(mine):
            continue
        on = np.asarray(channel) == ch
        rises = time[on & np.asarray(rising)]
        falls = time[on & ~np.asarray(rising)]
        k = records["frame_index"][mine].astype(np.int64)
        ok = k < len(rises)
        s = np.where(ok, rises[np.minimum(k, max(len(rises) - 1, 0))] if len(rises) else -1, -1)
        j = np.searchsorted(falls, s, side="right")
        e = np.where(ok & (j < len(falls)), falls[np.minimum(j, max(len(falls) - 1, 0))]
                     if len(falls) else -1, -1)
        start[mine], end[mine] = s, e
    return start, end


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


def rule_command(direction, index, **rule):
    """Arguments of a SET_RULE command: ``(opcode, args)`` for ``encode_command``.

    ``rule`` holds ``ClassRule`` fields (``enable``, ``cls``, ``match_port``, ``port_lo`` ...).

    >>> from latscope.gateware.protocol import Opcode
    >>> op, args = rule_command(1, 2, enable=1, cls=3, match_pcp=1, pcp=5)
    >>> op == Opcode.SET_RULE, args.hex()
    (True, '82270000050000000000')
    """
    from latscope.gateware.protocol import ClassRule, Opcode
    if direction not in (0, 1) or not 0 <= index < 128:
        raise ValueError(f"direction must be 0 or 1 and index 0..127, not {direction}, {index}")
    value = data.Layout.cast(ClassRule).const(rule).as_value().value
    return Opcode.SET_RULE, bytes([direction << 7 | index]) + value.to_bytes(9, "little")


#: :data:`FRAME_DTYPE` as a capture file's reader returns it: ``frame_index`` is 64-bit, unwrapped
#: past the record's 32 bits (:func:`unwrap_frame_index`). Files store :data:`FRAME_DTYPE`.
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
