"""Host side of the latscope wire protocol: find frames, check CRCs, decode tokens with NumPy.

The byte format is specified in ``docs/stream-format.md`` and defined by the layouts in
:mod:`latscope.gateware.protocol`; every offset, mask and dtype below is derived from those layouts,
the record dtypes and reply parsing by :mod:`latscope.gateware.codec`. What the decoder hands on
(:class:`~latscope.capture.events.DecodeResult`, loss records, replies) is defined in
:mod:`latscope.capture.events`.

:class:`StreamDecoder` is incremental (feed it whatever the transport returned) and vectorised: the
frames found in one :meth:`StreamDecoder.feed` are decoded together, token boundaries come from the
UTF-8-like continuation bytes, deltas are summed per token and times are a cumulative sum restarted
at each frame's ``base_time``. :func:`decode_reference` is a plain per-byte decoder of the same
format, kept as the benchmark baseline and as an independent check.
"""

import zlib
from typing import NamedTuple

import numpy as np

from latscope import LatscopeError
from latscope.capture.events import COUNTERS, DecodeResult, LossRecord, Reply
from latscope.gateware.codec import (
    COUNTER_BYTES,
    FRAME_BYTES,
    HEARTBEAT_DTYPE,
    decode_counter_records,
    decode_frame_records,
    layout_bytes,
    layout_dtype,
    layout_fields,
    parse_identify,
)
from latscope.gateware.protocol import (
    CONT_BITS,
    CRC_BYTES,
    EVENT_FIRST_BITS,
    EVENT_MAX_CONT,
    MAX_PAYLOAD_ACCEPTED,
    OVERFLOW_CONT,
    PROTOCOL_VERSION,
    SYNC,
    TIME_FIRST_BITS,
    TIME_MAX_CONT,
    EventsHeader,
    FrameHeader,
    FrameType,
    Opcode,
    Overflow,
    ReplyHeader,
    Status,
    Token,
)

__all__ = ["StreamDecoder", "decode_reference", "ScratchArrays"]


def _get(value, fields, name):
    offset, width = fields[name]
    return (value >> offset) & ((1 << width) - 1)


_FH = layout_fields(FrameHeader)
_FH_BYTES = layout_bytes(FrameHeader)
_EH = layout_fields(EventsHeader)
_EH_BYTES = layout_bytes(EventsHeader)
_RH = layout_fields(ReplyHeader)
_RH_BYTES = layout_bytes(ReplyHeader)
_OV = layout_fields(Overflow)
_SYNC = np.frombuffer(SYNC, np.uint8)
_KNOWN_TYPES = range(1, 15)     # 0 and 15 are never used (protocol.FrameType)
_CONT = int(Token.CONT)
_CONT_MASK_BYTE = int(Token.CONT_MASK)
_CONT_VALUE = (1 << CONT_BITS) - 1
_EV_LEAD_MASK = (1 << EVENT_FIRST_BITS) - 1
_TIME_LEAD_MASK = (1 << TIME_FIRST_BITS) - 1


def _empty_events():
    return np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, bool)


# --- frame search ---------------------------------------------------------------------------------

class _Frame(NamedTuple):
    type: int
    version: int
    seq: int
    start: int   # offset of the payload in the buffer
    length: int


def _header(buf, p):
    value = int.from_bytes(buf[p:p + _FH_BYTES], "little")
    return (_get(value, _FH, "type"), _get(value, _FH, "version"), _get(value, _FH, "seq"),
            _get(value, _FH, "length"))


def _try_frame(buf, p, final):
    """Examine a sync at ``p``: ``("frame", _Frame, end)``, ``("bad", ...)``, ``("skip", ...)``
    (not a plausible header), ``("more", ...)`` (need more bytes) or ``("truncated", ...)``."""
    n = len(buf)
    if p + _FH_BYTES > n:
        return ("truncated" if final else "more"), None, 0
    ftype, version, seq, length = _header(buf, p)
    if ftype not in _KNOWN_TYPES or length > MAX_PAYLOAD_ACCEPTED:
        return "skip", None, 0
    end = p + _FH_BYTES + length + CRC_BYTES
    if end > n:
        return ("truncated" if final else "more"), None, 0
    crc = int.from_bytes(buf[end - CRC_BYTES:end], "little")
    if zlib.crc32(buf[p + len(SYNC):end - CRC_BYTES]) != crc:
        return "bad", None, 0
    return "frame", _Frame(ftype, version, seq, p + _FH_BYTES, length), end


# --- bookkeeping shared by both decoders ----------------------------------------------------------

class _Ledger:
    """Sequence numbers, event index, heartbeats, losses: the per-frame state machine."""

    def __init__(self):
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.last_seq = None
        self.expected = None     # events emitted before the next frame, 64-bit
        self.known_time = 0      # every event up to this time has been accounted for
        self.overflow_seen = 0   # overflow losses reported by tokens since the last reset
        self.epoch = None

    def seq(self, seq, result):
        if self.last_seq is not None:
            result.frames_missing += (seq - self.last_seq - 1) & 0xFF
        self.last_seq = seq

    def _link_loss(self, lost, until, result):
        if lost > 0:
            result.losses.append(LossRecord(self.known_time, max(until - self.known_time, 0),
                                            lost, "link"))
            result.link_lost_events += lost

    def events_frame(self, base_time, index, count, last_time, overflows, result):
        """An EVENTS frame with ``count`` events, the last at ``last_time`` (None without events),
        and ``overflows`` a list of (lost, first_time, span)."""
        if self.expected is None:
            self.expected = index
            self.known_time = base_time
        else:
            gap = (index - self.expected) & 0xFFFFFFFF
            if gap < 1 << 31:
                self._link_loss(gap, base_time, result)
                self.expected += gap
                self.known_time = max(self.known_time, base_time)
            else:                          # index went back: a reset whose heartbeat was lost
                # The index counts events since the reset, so frames lost after the reset and
                # before this one held exactly ``index`` events: count them, never skip them.
                result.resets += 1
                self.expected, self.overflow_seen, self.known_time = 0, 0, 0
                self._link_loss(index, base_time, result)
                self.expected = index
                self.known_time = base_time
        for lost, first_time, span in overflows:
            result.losses.append(LossRecord(first_time, span, lost, "overflow"))
            result.overflow_lost_events += lost
            self.overflow_seen += lost
        self.expected += count
        if last_time is not None:
            self.known_time = last_time

    def heartbeat(self, events, lost, time, epoch, result):
        """A heartbeat's ``events``, ``lost``, ``time`` and ``epoch`` fields (ints)."""
        if (self.epoch is not None and epoch != self.epoch) \
                or (self.expected is not None and events < self.expected):
            result.resets += 1            # a timestamp reset (its count went back)
            self.expected = None
        self.epoch = epoch
        if self.expected is None:
            self.known_time = time
        else:
            self._link_loss(events - self.expected, time, result)
            if lost > self.overflow_seen:   # OVERFLOW tokens travelled in frames we lost
                result.losses.append(LossRecord(self.known_time, max(time - self.known_time, 0),
                                                lost - self.overflow_seen, "overflow"))
                result.overflow_lost_events += lost - self.overflow_seen
            self.known_time = max(self.known_time, time)
        self.overflow_seen = lost
        self.expected = events

    def seq_bulk(self, seqs, result):
        """:meth:`seq` for an array of sequence numbers in stream order."""
        if not len(seqs):
            return
        s = seqs.astype(np.int64)
        missing = int(((s[1:] - s[:-1] - 1) & 0xFF).sum())
        if self.last_seq is not None:
            missing += (int(s[0]) - self.last_seq - 1) & 0xFF
        result.frames_missing += missing
        self.last_seq = int(s[-1])

    def frames_bulk(self, is_events, headers, tokens, hbs, result):
        """:meth:`events_frame` and :meth:`heartbeat` for many frames, in stream order.

        ``is_events`` tells, per frame, whether it is the next EVENTS frame (``headers[i]``,
        ``tokens.counts[i]``...) or the next heartbeat (``hbs[j]``). An EVENTS frame that holds
        events and no OVERFLOW token, and whose index is exactly the one the frame before it
        leaves expected, changes only ``expected`` (by its count) and ``known_time`` (to its last
        event): runs of such frames are applied at once; every other frame takes the exact path.
        """
        m = len(is_events)
        if not m:
            return
        counts = tokens.counts
        index = headers["event_index"].astype(np.int64)
        mod = np.int64(0xFFFFFFFF)
        index_after = np.empty(m, np.int64)      # the event index each frame leaves expected
        index_after[is_events] = (index + counts) & mod
        index_after[~is_events] = hbs["events"].astype(np.uint64).view(np.int64) & mod
        evpos = np.flatnonzero(is_events)
        plain = counts > 0
        if tokens.overflows:
            plain[list(tokens.overflows)] = False
        simple = np.zeros(m, bool)
        inner = evpos > 0
        simple[evpos[inner]] = plain[inner] & (index_after[evpos[inner] - 1] == index[inner])
        ev_no = (np.cumsum(is_events) - 1).tolist()
        csum = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=csum[1:])
        last = np.zeros(len(counts), np.int64)
        last[counts > 0] = tokens.time[csum[1:][counts > 0] - 1]
        exact = np.flatnonzero(~simple).tolist()
        need = np.zeros(m, bool)
        need[exact] = True
        ev_exact = np.flatnonzero(need[evpos])
        ev_rows = {e: (b, i, c, t) for e, b, i, c, t in zip(
            ev_exact.tolist(), headers["base_time"][ev_exact].tolist(),
            index[ev_exact].tolist(), counts[ev_exact].tolist(), last[ev_exact].tolist(),
            strict=True)}
        hb_rows = list(zip(*(hbs[k].tolist() for k in ("events", "lost", "time", "epoch")),
                           strict=True))
        csum_l, last_l = csum.tolist(), last.tolist()
        prev = -1
        for r in exact + [m]:
            if r - prev > 1:                   # frames prev+1 .. r-1: a run of simple ones
                e0, e1 = ev_no[prev + 1], ev_no[r - 1]
                self.expected += csum_l[e1 + 1] - csum_l[e0]
                self.known_time = last_l[e1]
            if r == m:
                break
            if is_events[r]:
                e = ev_no[r]
                base, idx, count, last_time = ev_rows[e]
                self.events_frame(base, idx, count, last_time if count else None,
                                  tokens.overflows.get(e, []), result)
            else:                              # heartbeats before it: r - (EVENTS before it)
                self.heartbeat(*hb_rows[r - ev_no[r] - 1], result)
            prev = r

    def finish(self, result):
        for name in COUNTERS:
            self.counters[name] += getattr(result, name)
        return result


def _reply(buf, fr):
    if fr.length < _RH_BYTES:
        return None
    raw = bytes(buf[fr.start:fr.start + fr.length])
    value = int.from_bytes(raw[:_RH_BYTES], "little")
    return Reply(_get(value, _RH, "command_seq"), _get(value, _RH, "opcode"),
                 _get(value, _RH, "status"), raw[_RH_BYTES:])


def _overflow_value(conts):
    value = 0
    for i, byte in enumerate(bytes(conts)):
        value |= (byte & _CONT_VALUE) << (CONT_BITS * i)
    return (_get(value, _OV, "lost"), _get(value, _OV, "first_time"), _get(value, _OV, "span"))


# --- the vectorised decoder -----------------------------------------------------------------------

#: Zero bytes kept after the buffer so that fixed-size records can be read at any offset.
_PAD = 32


def _record_view(arr, dtype, n):
    """``n`` overlapping records of ``dtype``, one starting at every byte of ``arr`` (which holds
    at least ``n - 1 + dtype.itemsize`` bytes), for gathering records at arbitrary offsets."""
    return np.ndarray((n,), dtype=dtype, buffer=arr, strides=(1,))


#: Header fields are read as one little-endian word per candidate sync.
_FH_WORD = np.dtype("<u8")
assert _FH_BYTES <= _FH_WORD.itemsize
_EH_DTYPE = layout_dtype(EventsHeader, view=True)
assert max(_FH_WORD.itemsize, _EH_DTYPE.itemsize, HEARTBEAT_DTYPE.itemsize, 4) <= _PAD


def _event_table():
    """Contribution of one byte of an EVENT token to its delta, by the byte's position ``k`` in the
    token (0 for the lead byte) and value: entry ``k << 8 | byte``."""
    k, byte = np.divmod(np.arange((EVENT_MAX_CONT + 1) << 8, dtype=np.uint64), np.uint64(256))
    shift = np.where(k == 0, 0, EVENT_FIRST_BITS + CONT_BITS * (k.astype(np.int64) - 1))
    value = np.where(k == 0, byte & np.uint64(_EV_LEAD_MASK), byte & np.uint64(_CONT_VALUE))
    return value << shift.astype(np.uint64)


_EV_BYTE = _event_table()


def _class_tables():
    """Per lead byte: the fewest and the most continuation bytes its token may have."""
    least = np.full(256, 99, np.int64)   # continuation bytes and reserved leads: never valid
    most = np.full(256, -1, np.int64)
    for lead in range(256):
        if lead & Token.EVENT_MASK == Token.EVENT:
            least[lead], most[lead] = 0, EVENT_MAX_CONT
        elif lead & Token.TIME_MASK == Token.TIME:
            least[lead], most[lead] = 1, TIME_MAX_CONT
        elif lead == Token.OVERFLOW:
            least[lead] = most[lead] = OVERFLOW_CONT
    return least, most


_LEAST_CONT, _MOST_CONT = _class_tables()
_EVENT_MASK, _TIME_MASK, _TIME, _OVERFLOW = (int(Token.EVENT_MASK), int(Token.TIME_MASK),
                                             int(Token.TIME), int(Token.OVERFLOW))


class ScratchArrays:
    """Work arrays kept between calls of one decoder.

    Freshly allocated arrays of a few megabytes are page-faulted in (and zeroed by the kernel) on
    every call, which costs more than the arithmetic done on them; reusing them makes each step
    one pass over memory that is already mapped. Arrays above ``limit`` bytes are not kept.
    """

    def __init__(self, limit=1 << 24):
        self.limit = limit
        self._arrays = {}

    def __call__(self, name, n, dtype):
        """An uninitialised array of ``n`` elements of ``dtype``, reused under ``name``."""
        dtype = np.dtype(dtype)
        have = self._arrays.get(name)
        if have is not None and have.dtype == dtype and len(have) >= n:
            return have[:n]
        array = np.empty(n, dtype)
        if n * dtype.itemsize <= self.limit:
            self._arrays[name] = array
        return array


class _Tokens(NamedTuple):
    """Decoded token bytes of many EVENTS frames (see :func:`_decode_tokens`)."""
    time: np.ndarray       # int64, every event in order
    channel: np.ndarray    # uint8
    rising: np.ndarray     # bool
    counts: np.ndarray     # events per frame
    overflows: dict        # frame -> [(lost, first_time, span), ...]


def _decode_tokens(tok, frame_offsets, base_times, scratch=None):
    """Decode the token bytes of many EVENTS frames at once.

    ``tok`` holds the frames' token bytes back to back, frame ``f`` starting at
    ``frame_offsets[f]`` (ascending). Returns ``(bad, tokens)``: ``bad`` is None, or a bool array
    marking frames with protocol errors (such frames must be dropped and the call repeated without
    them; ``tokens`` is then None); ``tokens`` is a :class:`_Tokens`. ``scratch`` is the
    :class:`ScratchArrays` of the caller, if it has one.

    Token boundaries are the non-continuation bytes. Each byte's contribution to its token's delta
    comes from a table indexed by its position in the token and its value; one running sum over all
    bytes (restarted at each frame's ``base_time``) gives every token's time at its last byte. The
    rare TIME and OVERFLOW tokens, and the validity checks of tokens longer than an EVENT, are
    handled only for the tokens that need them.
    """
    scratch = scratch or ScratchArrays(limit=0)
    nframes = len(frame_offsets)
    n = len(tok)
    if not nframes:
        return None, _Tokens(*_empty_events(), np.empty(0, np.intp), {})
    frame_offsets = np.asarray(frame_offsets, np.intp)
    byte = np.bitwise_and(tok, _CONT_MASK_BYTE, out=scratch("byte", n, np.uint8))
    starts = np.not_equal(byte, _CONT, out=scratch("starts", n, bool))
    nonempty = frame_offsets < np.append(frame_offsets[1:], n)
    heads = frame_offsets[nonempty]
    if not starts[heads].all():      # a frame's first byte must begin a token
        bad = np.zeros(nframes, bool)
        bad[np.flatnonzero(nonempty)[~starts[heads]]] = True
        return bad, None
    # From here every frame begins with a token, so token boundaries never cross frames.
    sidx = np.flatnonzero(starts)
    ntok = len(sidx)
    first = np.searchsorted(sidx, frame_offsets)     # first token of each frame
    tlen = scratch("tlen", ntok, np.intp)
    np.subtract(sidx[1:], sidx[:-1], out=tlen[:-1])
    if ntok:
        tlen[-1] = n - sidx[-1]
    lead = np.take(tok, sidx)
    other = np.empty(0, np.intp)     # TIME and OVERFLOW tokens: rare
    if ntok and (int(lead.max()) >= _EVENT_MASK or int(tlen.max()) > EVENT_MAX_CONT + 1):
        check = np.flatnonzero((lead >= _EVENT_MASK) | (tlen > EVENT_MAX_CONT + 1))
        conts = tlen[check] - 1
        invalid = (conts < _LEAST_CONT[lead[check]]) | (conts > _MOST_CONT[lead[check]])
        if invalid.any():
            bad = np.zeros(nframes, bool)
            bad[np.searchsorted(first, check[invalid], "right") - 1] = True
            return bad, None
        other = check           # valid, so these are exactly the non-EVENT tokens
    # Per byte: its position in its token (continuation bytes right after a start, capped at
    # EVENT_MAX_CONT, which is exact inside EVENT tokens), then its contribution to the delta.
    cont = np.logical_not(starts, out=scratch("cont", n, bool))
    run = scratch("run", n, bool)
    run[:] = cont
    position = scratch("position", n, np.uint8)
    position[:] = cont
    for k in range(1, EVENT_MAX_CONT):
        run[k:] &= cont[:-k]      # run[0] is False: the first byte starts a token
        position += run
    index = scratch("index", n, np.uint16)
    index[:] = position
    index <<= 8
    index |= tok
    # ``summed[0]`` stays 0 and ``summed[1 + i]`` becomes the running sum at byte ``i``, so the
    # time of a token is ``summed[start of the next token]``.
    summed = scratch("summed", n + 1, np.uint64)
    summed[0] = 0
    # (mode="clip": every index is in range, and the default mode buffers ``out``)
    delta = np.take(_EV_BYTE, index, out=summed[1:], mode="clip")
    overflows = {}
    if len(other):
        # The bytes of TIME and OVERFLOW tokens add nothing but a TIME token's advance.
        lens = tlen[other]
        at = np.repeat(sidx[other] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        delta[at] = 0
        padded = np.zeros(n + TIME_MAX_CONT + 1, np.uint8)
        padded[:n] = tok
        tpos = other[(lead[other] & _TIME_MASK) == _TIME]
        s = sidx[tpos]
        value = (padded[s] & _TIME_LEAD_MASK).astype(np.uint64)
        for k in range(1, TIME_MAX_CONT + 1):
            part = np.where(tlen[tpos] > k, padded[s + k] & _CONT_VALUE, 0).astype(np.uint64)
            value |= part << np.uint64(TIME_FIRST_BITS + CONT_BITS * (k - 1))
        delta[s] = value
        opos = other[lead[other] == _OVERFLOW]
        for f, t in zip((np.searchsorted(first, opos, "right") - 1).tolist(), opos.tolist(),
                        strict=True):
            s = sidx[t]
            overflows.setdefault(f, []).append(_overflow_value(tok[s + 1:s + 1 + OVERFLOW_CONT]))
    # time = base + running sum within the frame: one running sum over all bytes, with each
    # frame's first byte adjusted by (its base - the running sum before it), all modulo 2**64.
    ends = np.append(first[1:], ntok)
    if ntok:
        sums = np.add.reduceat(delta, heads)
        before = np.zeros(len(heads), np.uint64)
        np.cumsum(sums[:-1], out=before[1:])
        offset = np.asarray(base_times, np.uint64)[nonempty] - before
        adjust = offset.copy()
        adjust[1:] -= offset[:-1]
        delta[heads] += adjust
    np.cumsum(delta, out=delta)
    time = np.empty(ntok, np.uint64)
    np.take(summed, sidx[1:], out=time[:-1], mode="clip")
    if ntok:
        time[-1] = summed[n]
    time = time.view(np.int64)
    if len(other):
        ev = np.flatnonzero(lead < _EVENT_MASK)
        time, lead = time[ev], lead[ev]
        counts = np.diff(np.searchsorted(ev, np.append(first, ntok)))
    else:
        counts = ends - first
    channel = (lead >> 4) & 0x7
    rising = (lead & 0x08) != 0
    return None, _Tokens(time, channel, rising, counts, overflows)


class StreamDecoder:
    """Incremental decoder of the device-to-host byte stream.

    Parameters
    ----------
    lanes : int, optional
        Samples per capture clock, if known; otherwise taken from the first IDENTIFY reply seen
        (it is only reported back, as :attr:`lanes`: times are already in ticks).

    Notes
    -----
    Each call is vectorised at both layers: candidate sync words are found with NumPy and all
    their headers parsed at once; a short Python walk over the candidates (one step per frame,
    with one ``zlib.crc32`` per frame) applies the exact resynchronisation rules; the frames' tokens
    are decoded together; and the sequence/loss ledger is applied in bulk to runs of EVENTS frames
    that continue each other exactly (consecutive event index, no OVERFLOW token), falling back to
    the per-frame state machine (shared with :func:`decode_reference`) for heartbeats, the first
    frame after any anomaly, index gaps and overflow records.

    Examples
    --------
    >>> from latscope.gateware.model_stream import LinkModel, Entry
    >>> model = LinkModel(channels=8, lanes=2, counter_width=48)
    >>> stream = model.run([Entry(0, 100, edges=0b1, levels=0b1), Entry(1, 1 << 20)])
    >>> result = StreamDecoder().feed(stream)
    >>> result.time.tolist(), result.channel.tolist(), result.rising.tolist()
    ([200], [0], [True])
    """

    def __init__(self, *, lanes=None):
        if lanes is not None and (not isinstance(lanes, int) or lanes < 1):
            raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
        self.lanes = lanes
        self._buf = bytearray()
        self._ledger = _Ledger()
        self._scratch = ScratchArrays()

    @property
    def counters(self):
        """Running totals of every counter (names in :data:`~latscope.capture.events.COUNTERS`)
        since construction."""
        return dict(self._ledger.counters)

    def feed(self, data):
        """Decode ``data`` appended to any partial frame kept from earlier calls."""
        self._buf += data
        return self._decode(final=False)

    def expect_reset(self):
        """Declare that the instrument's time base was just reset and nothing decoded so far
        belongs to the capture that follows: the event index is then known to restart at 0, so
        events in frames lost before the first one received are counted, not silently skipped.
        Call it after RESET_TIME's reply, with the instrument disarmed."""
        ledger = self._ledger
        ledger.expected, ledger.known_time, ledger.overflow_seen = 0, 0, 0

    def finish(self):
        """End of stream: decode what is left; a frame cut short is counted as ``truncated``."""
        return self._decode(final=True)

    def _decode(self, final):
        buf = self._buf
        n = len(buf)
        result = DecodeResult()
        scratch = self._scratch
        arr = scratch("buffer", n + _PAD, np.uint8)
        arr[:n] = np.frombuffer(buf, np.uint8) if n else 0
        arr[n:] = 0
        if n > 1:
            is_sync = np.equal(arr[:n - 1], _SYNC[0], out=scratch("sync", n - 1, bool))
            is_sync &= np.equal(arr[1:n], _SYNC[1], out=scratch("sync1", n - 1, bool))
            cands = np.flatnonzero(is_sync)
        else:
            cands = np.empty(0, np.intp)
        # Every candidate's header at once (bytes past the buffer read as zeros: such
        # candidates are cut short and never looked at further).
        word = _record_view(arr, _FH_WORD, n)[cands]
        ftype, version, seq, length = (
            ((word >> np.uint64(_FH[k][0])) & np.uint64((1 << _FH[k][1]) - 1)).astype(np.intp)
            for k in ("type", "version", "seq", "length"))
        plausible = (ftype >= _KNOWN_TYPES.start) & (ftype < _KNOWN_TYPES.stop) \
            & (length <= MAX_PAYLOAD_ACCEPTED)
        end = cands + (_FH_BYTES + CRC_BYTES) + length
        crc = _record_view(arr, np.dtype("<u4"), n + 1)[np.clip(end - CRC_BYTES, 0, n)]
        after = np.searchsorted(cands, end)       # first candidate at or after each frame's end
        # The walk: the same rules as decode_reference, one step per candidate examined.
        accepted = []
        pos = 0            # first byte not yet consumed
        keep = n           # first byte to keep for the next call
        with memoryview(buf) as view:     # released before the buffer is trimmed
            c_l, p_l, e_l, a_l, crc_l = (cands.tolist(), plausible.tolist(), end.tolist(),
                                         after.tolist(), crc.tolist())
            i, ncand = 0, len(c_l)
            sync_len, header_end = len(SYNC), _FH_BYTES
            while i < ncand:
                p = c_l[i]
                if p + header_end > n or (p_l[i] and e_l[i] > n):
                    if not final:
                        keep = p
                        break
                    result.truncated += 1
                elif p_l[i]:
                    e = e_l[i]
                    if zlib.crc32(view[p + sync_len:e - CRC_BYTES]) == crc_l[i]:
                        result.bytes_skipped += p - pos
                        accepted.append(i)
                        pos = e
                        i = a_l[i]
                        continue
                    result.frames_bad += 1
                i += 1
            else:
                if not final and n and buf[-1] == SYNC[0]:
                    keep = n - 1   # maybe the first byte of a sync
        keep = max(keep, pos)
        result.bytes_skipped += keep - pos
        if final:
            result.bytes_skipped += n - keep
            keep = n
        acc = np.array(accepted, np.intp)
        self._frames(arr, cands[acc] + _FH_BYTES, ftype[acc], version[acc], seq[acc],
                     length[acc], result)
        del self._buf[:keep]
        return self._ledger.finish(result)

    def _frames(self, arr, start, ftype, version, seq, length, result):
        """Apply the frames accepted by the walk (arrays, in stream order) to ``result``."""
        ok = version == PROTOCOL_VERSION
        ok &= (ftype != FrameType.EVENTS) | (length >= _EH_BYTES)
        result.frames_bad += int(len(ok) - np.count_nonzero(ok))
        good = np.flatnonzero(ok)
        events = good[ftype[good] == FrameType.EVENTS]
        while True:                            # drop frames with protocol errors and retry
            bad, tokens, headers = self._events(arr, start[events], length[events],
                                                self._scratch)
            if bad is None:
                break
            result.frames_bad += int(np.count_nonzero(bad))
            good = np.setdiff1d(good, events[bad], assume_unique=True)
            events = events[~bad]
        result.frames_ok += len(good)
        self._ledger.seq_bulk(seq[good], result)
        gtype, glen, gstart = ftype[good], length[good], start[good]
        is_ev = gtype == FrameType.EVENTS
        is_hb = (gtype == FrameType.HEARTBEAT) & (glen >= HEARTBEAT_DTYPE.itemsize)
        is_rep = (gtype == FrameType.REPLY) & (glen >= _RH_BYTES)
        is_fr = (gtype == FrameType.FRAME) & (glen >= FRAME_BYTES)
        is_ct = (gtype == FrameType.COUNTERS) & (glen >= COUNTER_BYTES)
        result.frames_unknown += int(len(good) - np.count_nonzero(is_ev | is_hb | is_rep
                                                                  | is_fr | is_ct))
        if is_fr.any():
            result.frames, result.frame_headers = decode_frame_records(arr, gstart[is_fr],
                                                                       glen[is_fr])
        if is_ct.any():
            result.frame_counters = decode_counter_records(arr, gstart[is_ct])
        hbs = _record_view(arr, HEARTBEAT_DTYPE, len(arr) - _PAD)[gstart[is_hb]]
        if len(hbs):
            result.heartbeats = hbs
        for s, ln in zip(gstart[is_rep].tolist(), glen[is_rep].tolist(), strict=True):
            reply = _reply(arr, _Frame(FrameType.REPLY, PROTOCOL_VERSION, 0, s, ln))
            result.replies.append(reply)
            if (reply.opcode == Opcode.IDENTIFY and reply.status == Status.OK
                    and self.lanes is None):
                try:
                    self.lanes = parse_identify(reply.data)["lanes"]
                except LatscopeError:
                    pass
        result.time, result.channel, result.rising = tokens.time, tokens.channel, tokens.rising
        # The ledger sees EVENTS frames and heartbeats, in stream order.
        self._ledger.frames_bulk(is_ev[is_ev | is_hb], headers, tokens, hbs, result)

    @staticmethod
    def _events(arr, start, length, scratch):
        """``(bad, tokens, headers)`` of EVENTS frames whose payloads begin at ``start``: see
        :func:`_decode_tokens`; ``headers`` are their EventsHeader records."""
        tok_start = start + _EH_BYTES
        tok_end = start + length
        offsets = np.zeros(len(start), np.intp)
        np.cumsum((tok_end - tok_start)[:-1], out=offsets[1:])
        tok = scratch("tokens", int((tok_end - tok_start).sum()), np.uint8)
        if len(start):
            np.concatenate([arr[a:b] for a, b in zip(tok_start.tolist(), tok_end.tolist(),
                                                     strict=True)], out=tok)
        headers = _record_view(arr, _EH_DTYPE, len(arr) - _PAD)[start]
        bad, tokens = _decode_tokens(tok, offsets, headers["base_time"], scratch)
        return bad, tokens, headers


# --- the reference decoder ------------------------------------------------------------------------

def decode_reference(stream):
    """Decode a complete byte stream one byte at a time, in plain Python.

    Same results as feeding ``stream`` to a new :class:`StreamDecoder` and calling ``finish()``,
    by an independent path (byte-wise frame search and token parsing); the benchmark baseline.
    """
    buf = bytes(stream)
    result = DecodeResult()
    ledger = _Ledger()
    times, channels, risings, hbs, records, counters = [], [], [], [], [], []
    p = pos = 0
    n = len(buf)
    while p + 1 < n:
        if buf[p] != SYNC[0] or buf[p + 1] != SYNC[1]:
            p += 1
            continue
        kind, fr, end = _try_frame(buf, p, True)
        if kind != "frame":
            result.truncated += kind == "truncated"
            result.frames_bad += kind == "bad"
            p += 1
            continue
        result.bytes_skipped += p - pos
        p = pos = end
        if fr.version != PROTOCOL_VERSION or (fr.type == FrameType.EVENTS
                                              and fr.length < _EH_BYTES):
            result.frames_bad += 1
            continue
        if fr.type == FrameType.EVENTS:
            parsed = _reference_tokens(buf, fr)
            if parsed is None:
                result.frames_bad += 1
                continue
            base, index, ev, overflows = parsed
            result.frames_ok += 1
            ledger.seq(fr.seq, result)
            times += [e[0] for e in ev]; channels += [e[1] for e in ev]
            risings += [e[2] for e in ev]
            ledger.events_frame(base, index, len(ev), ev[-1][0] if ev else None, overflows, result)
            continue
        result.frames_ok += 1
        ledger.seq(fr.seq, result)
        if fr.type == FrameType.HEARTBEAT and fr.length >= HEARTBEAT_DTYPE.itemsize:
            hb = np.frombuffer(buf[fr.start:fr.start + HEARTBEAT_DTYPE.itemsize],
                               HEARTBEAT_DTYPE)[0]
            hbs.append(hb)
            ledger.heartbeat(*(int(hb[k]) for k in ("events", "lost", "time", "epoch")), result)
        elif fr.type == FrameType.REPLY and fr.length >= _RH_BYTES:
            result.replies.append(_reply(buf, fr))
        elif fr.type == FrameType.FRAME and fr.length >= FRAME_BYTES:
            records.append((fr.start, fr.length))
        elif fr.type == FrameType.COUNTERS and fr.length >= COUNTER_BYTES:
            counters.append(fr.start)
        else:
            result.frames_unknown += 1
    result.bytes_skipped += n - pos
    result.time = np.array(times, np.int64)
    result.channel = np.array(channels, np.uint8)
    result.rising = np.array(risings, bool)
    if hbs:
        result.heartbeats = np.array(hbs, HEARTBEAT_DTYPE)
    arr = np.frombuffer(buf, np.uint8)
    if records:
        result.frames, result.frame_headers = decode_frame_records(
            arr, [r[0] for r in records], [r[1] for r in records])
    if counters:
        result.frame_counters = decode_counter_records(arr, counters)
    return result


def _reference_tokens(buf, fr):
    header = int.from_bytes(buf[fr.start:fr.start + _EH_BYTES], "little")
    base, index = _get(header, _EH, "base_time"), _get(header, _EH, "event_index")
    time, events, overflows = base, [], []
    p, end = fr.start + _EH_BYTES, fr.start + fr.length
    while p < end:
        lead = buf[p]
        q = p + 1
        while q < end and buf[q] & _CONT_MASK_BYTE == _CONT:
            q += 1
        conts = buf[p + 1:q]
        if lead & Token.EVENT_MASK == Token.EVENT and len(conts) <= EVENT_MAX_CONT:
            delta = lead & _EV_LEAD_MASK
            for i, byte in enumerate(conts):
                delta |= (byte & _CONT_VALUE) << (EVENT_FIRST_BITS + CONT_BITS * i)
            time = (time + delta) & 0xFFFFFFFFFFFFFFFF
            events.append((time - (1 << 64) if time >> 63 else time, (lead >> 4) & 7,
                           bool(lead & 8)))
        elif lead & Token.TIME_MASK == Token.TIME and 1 <= len(conts) <= TIME_MAX_CONT:
            delta = lead & _TIME_LEAD_MASK
            for i, byte in enumerate(conts):
                delta |= (byte & _CONT_VALUE) << (TIME_FIRST_BITS + CONT_BITS * i)
            time = (time + delta) & 0xFFFFFFFFFFFFFFFF
        elif lead == Token.OVERFLOW and len(conts) == OVERFLOW_CONT:
            overflows.append(_overflow_value(conts))
        else:
            return None     # continuation byte without a lead, reserved lead, bad length
        p = q
    return base, index, events, overflows
