"""Host side of the latscope wire protocol: find frames, check CRCs, decode tokens with NumPy.

The byte format is specified in ``docs/stream-format.md`` and defined by the layouts in
:mod:`latscope.gateware.protocol`; every offset, mask and dtype below is derived from those layouts.

:class:`StreamDecoder` is incremental (feed it whatever the transport returned) and vectorised: the
frames found in one :meth:`StreamDecoder.feed` are decoded together, token boundaries come from the
UTF-8-like continuation bytes, deltas are summed per token and times are a cumulative sum restarted
at each frame's ``base_time``. :func:`decode_reference` is a plain per-byte decoder of the same
format, kept as the benchmark baseline and as an independent check.
"""

import zlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from amaranth.lib import data

from latscope import LatscopeError
from latscope.gateware.protocol import (
    CONT_BITS,
    CRC_BYTES,
    EVENT_FIRST_BITS,
    EVENT_MAX_CONT,
    MAX_PAYLOAD_ACCEPTED,
    OVERFLOW_CONT,
    PROTOCOL_VERSION,
    SYNC,
    SYNC_WORD,
    TIME_FIRST_BITS,
    TIME_MAX_CONT,
    CommandHeader,
    EventsHeader,
    FrameHeader,
    FrameType,
    Heartbeat,
    IdentifyReply,
    Opcode,
    Overflow,
    ReplyHeader,
    Status,
    Token,
)

__all__ = ["LossRecord", "Reply", "DecodeResult", "StreamDecoder", "decode_reference",
           "encode_command", "parse_identify", "HEARTBEAT_DTYPE", "COUNTERS"]


def _fields(layout):
    """``{name: (bit offset, width)}`` of a layout's top-level fields."""
    return {name: (f.offset, f.width) for name, f in data.Layout.cast(layout)}


def _nbytes(layout):
    return data.Layout.cast(layout).size // 8


def _get(value, fields, name):
    offset, width = fields[name]
    return (value >> offset) & ((1 << width) - 1)


def _dtype(layout):
    """A little-endian NumPy structured dtype matching a byte-aligned layout."""
    names, formats, offsets = [], [], []
    for name, (offset, width) in _fields(layout).items():
        if offset % 8 or width not in (8, 16, 32, 64):
            raise TypeError(f"field {name} of {layout} is not byte-aligned")
        names.append(name); formats.append(f"<u{width // 8}"); offsets.append(offset // 8)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": _nbytes(layout)})


_FH = _fields(FrameHeader)
_FH_BYTES = _nbytes(FrameHeader)
_EH = _fields(EventsHeader)
_EH_BYTES = _nbytes(EventsHeader)
_RH = _fields(ReplyHeader)
_RH_BYTES = _nbytes(ReplyHeader)
_OV = _fields(Overflow)
_IR = _fields(IdentifyReply)
_IR_BYTES = _nbytes(IdentifyReply)
_SYNC = np.frombuffer(SYNC, np.uint8)
_KNOWN_TYPES = range(1, 15)     # 0 and 15 are never used (protocol.FrameType)
_CONT = int(Token.CONT)
_CONT_MASK_BYTE = int(Token.CONT_MASK)
_CONT_VALUE = (1 << CONT_BITS) - 1
_EV_LEAD_MASK = (1 << EVENT_FIRST_BITS) - 1
_TIME_LEAD_MASK = (1 << TIME_FIRST_BITS) - 1

#: Structured dtype of decoded heartbeats, field for field the ``Heartbeat`` layout.
HEARTBEAT_DTYPE = _dtype(Heartbeat)
#: Names of the counters kept by :class:`StreamDecoder` and reported in :class:`DecodeResult`.
COUNTERS = ("frames_ok", "frames_bad", "frames_missing", "frames_unknown", "truncated",
            "bytes_skipped", "link_lost_events", "overflow_lost_events", "resets")


class LossRecord(NamedTuple):
    """Events known to be missing: ``lost`` of them, somewhere in ``[first_time, first_time +
    span]`` (ticks). ``cause`` is ``"overflow"`` (gateware FIFO full) or ``"link"`` (frames lost
    between board and host)."""
    first_time: int
    span: int
    lost: int
    cause: str


class Reply(NamedTuple):
    """A REPLY frame: the ``seq`` of the command it answers, its opcode, status and data bytes."""
    command_seq: int
    opcode: int
    status: int
    data: bytes


def _empty_events():
    return np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, bool)


@dataclass
class DecodeResult:
    """What one :meth:`StreamDecoder.feed` (or :meth:`~StreamDecoder.finish`) produced.

    ``time`` (int64 ticks since the instrument's timestamp reset; it restarts at 0 after a
    RESET_TIME, see ``resets``), ``channel`` (uint8) and ``rising`` (bool) are the events in stream
    order. ``losses`` are :class:`LossRecord`\\ s, ``heartbeats`` a :data:`HEARTBEAT_DTYPE` array,
    ``replies`` a list of :class:`Reply`. The counters (names in :data:`COUNTERS`) count this call
    only; :attr:`StreamDecoder.counters` holds the running totals.
    """
    time: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    channel: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))
    rising: np.ndarray = field(default_factory=lambda: np.empty(0, bool))
    losses: list = field(default_factory=list)
    heartbeats: np.ndarray = field(default_factory=lambda: np.empty(0, HEARTBEAT_DTYPE))
    replies: list = field(default_factory=list)
    frames_ok: int = 0
    frames_bad: int = 0
    frames_missing: int = 0
    frames_unknown: int = 0
    truncated: int = 0
    bytes_skipped: int = 0
    link_lost_events: int = 0
    overflow_lost_events: int = 0
    resets: int = 0

    @property
    def counters(self):
        """The counters as a dict."""
        return {name: getattr(self, name) for name in COUNTERS}

    @classmethod
    def concat(cls, results):
        """One result holding everything in ``results``, in order (counters summed)."""
        results = list(results)
        out = cls()
        if not results:
            return out
        out.time = np.concatenate([r.time for r in results])
        out.channel = np.concatenate([r.channel for r in results])
        out.rising = np.concatenate([r.rising for r in results])
        out.heartbeats = np.concatenate([r.heartbeats for r in results])
        for r in results:
            out.losses += r.losses
            out.replies += r.replies
            for name in COUNTERS:
                setattr(out, name, getattr(out, name) + getattr(r, name))
        return out


def encode_command(seq, opcode, args=b""):
    """Bytes of a COMMAND frame (host to device).

    Parameters
    ----------
    seq : int
        Sequence number, 0..255; the REPLY carries it back as ``command_seq``.
    opcode : int
        An :class:`~latscope.gateware.protocol.Opcode`.
    args : bytes
        The opcode's arguments (see ``docs/stream-format.md``).

    Examples
    --------
    >>> from latscope.gateware.protocol import Opcode
    >>> encode_command(1, Opcode.ARM, b"\\x01").hex()
    'e71a1401020002010152ddfb'
    """
    if not 0 <= seq <= 255:
        raise ValueError(f"command sequence number must be 0..255, not {seq!r}")
    payload = bytes([opcode]) + bytes(args)
    header = (SYNC_WORD << _FH["sync"][0] | int(FrameType.COMMAND) << _FH["type"][0]
              | PROTOCOL_VERSION << _FH["version"][0] | seq << _FH["seq"][0]
              | len(payload) << _FH["length"][0]).to_bytes(_FH_BYTES, "little")
    body = header[len(SYNC):] + payload
    return SYNC + body + zlib.crc32(body).to_bytes(CRC_BYTES, "little")


def parse_identify(reply_data):
    """Decode the data of an IDENTIFY reply into a dict.

    Holds every ``IdentifyReply`` field plus ``board`` (str), ``channel_names`` (list of str) and
    ``tick_hz`` (``capture_hz * lanes``). Raises :class:`~latscope.LatscopeError` on a short or
    malformed reply.
    """
    reply_data = bytes(reply_data)
    if len(reply_data) < _IR_BYTES:
        raise LatscopeError(f"IDENTIFY reply has {len(reply_data)} bytes, expected at least "
                            f"{_IR_BYTES}")
    value = int.from_bytes(reply_data[:_IR_BYTES], "little")
    info = {name: _get(value, _IR, name) for name in _IR}
    try:
        text = reply_data[_IR_BYTES:].decode()
        items = dict(part.split("=", 1) for part in text.split(";"))
        info["board"] = items["board"]
        info["channel_names"] = items["channels"].split(",") if items["channels"] else []
    except (UnicodeDecodeError, ValueError, KeyError) as error:
        raise LatscopeError(f"IDENTIFY reply text is malformed: {reply_data[_IR_BYTES:]!r}") \
            from error
    if len(info["channel_names"]) != info["channels"]:
        raise LatscopeError(f"IDENTIFY reply names {len(info['channel_names'])} channels but "
                            f"reports {info['channels']}")
    info["tick_hz"] = info["capture_hz"] * info["lanes"]
    return info


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

    def heartbeat(self, hb, result):
        events, lost, time, epoch = (int(hb[k]) for k in ("events", "lost", "time", "epoch"))
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

def _word_view(tok):
    """Overlapping little-endian 32-bit words starting at every byte of ``tok`` (padded)."""
    padded = np.zeros(len(tok) + 4, np.uint8)
    padded[:len(tok)] = tok
    return np.ndarray((len(tok),), dtype="<u4", buffer=padded, strides=(1,))


_LEN_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], np.uint32)


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


def _decode_tokens(tok, frame_offsets, base_times):
    """Decode the token bytes of many EVENTS frames at once.

    ``tok`` holds the frames' token bytes back to back, frame ``f`` starting at
    ``frame_offsets[f]``. Returns ``(bad_frames, time, channel, rising, event_frame, overflows)``
    where ``bad_frames`` is a bool array (protocol errors: such frames must be dropped and the call
    repeated without them), ``event_frame`` the frame of each event and ``overflows`` a list of
    ``(frame, lost, first_time, span)``.
    """
    nframes = len(frame_offsets)
    n = len(tok)
    bad = np.zeros(nframes, bool)
    starts = (tok & _CONT_MASK_BYTE) != _CONT
    frame_len = np.diff(np.append(frame_offsets, n))
    nonempty = frame_len > 0
    bad[nonempty] = ~starts[frame_offsets[nonempty]]
    sidx = np.flatnonzero(starts)
    ntok = len(sidx)
    tlen = np.empty(ntok, np.intp)
    np.subtract(sidx[1:], sidx[:-1], out=tlen[:-1])
    if ntok:
        tlen[-1] = n - sidx[-1]
    lead = tok[sidx]
    # first token of each frame (frame boundaries are token starts in valid frames)
    first = np.searchsorted(sidx, frame_offsets)
    fid = np.repeat(np.arange(nframes), np.diff(np.append(first, ntok)))
    conts = tlen - 1
    invalid = (conts < _LEAST_CONT[lead]) | (conts > _MOST_CONT[lead])
    if invalid.any():
        bad[fid[invalid]] = True
    if bad.any():
        return bad, None, None, None, None, None
    # event values: one unaligned 32-bit load per token, bytes beyond the token masked off
    words = _word_view(tok)[sidx] & _LEN_MASK[np.minimum(tlen, 4)]
    delta = ((words & _EV_LEAD_MASK)
             | ((words >> 8) & _CONT_VALUE) << EVENT_FIRST_BITS
             | ((words >> 16) & _CONT_VALUE) << (EVENT_FIRST_BITS + CONT_BITS)
             | ((words >> 24) & _CONT_VALUE) << (EVENT_FIRST_BITS + 2 * CONT_BITS)
             ).astype(np.uint64)
    other = np.flatnonzero(lead >= _EVENT_MASK)     # TIME and OVERFLOW tokens: rare
    overflows = []
    if len(other):
        padded = np.zeros(n + TIME_MAX_CONT + 1, np.uint8)
        padded[:n] = tok
        tpos = other[(lead[other] & _TIME_MASK) == _TIME]
        s = sidx[tpos]
        value = (padded[s] & _TIME_LEAD_MASK).astype(np.uint64)
        for k in range(1, TIME_MAX_CONT + 1):
            part = np.where(conts[tpos] >= k, padded[s + k] & _CONT_VALUE, 0).astype(np.uint64)
            value |= part << np.uint64(TIME_FIRST_BITS + CONT_BITS * (k - 1))
        delta[other] = 0
        delta[tpos] = value
        for t in other[lead[other] == _OVERFLOW].tolist():
            s = sidx[t]
            overflows.append((int(fid[t]),) + _overflow_value(tok[s + 1:s + 1 + OVERFLOW_CONT]))
    cum = np.cumsum(delta, dtype=np.uint64)
    # time = base + cum - (cum before the frame's first token)
    before = np.zeros(nframes, np.uint64)
    inner = first > 0
    before[inner] = cum[first[inner] - 1]
    offset = np.asarray(base_times, np.uint64) - before
    if len(other):
        ev = np.flatnonzero(lead < _EVENT_MASK)
        cum, fid, lead = cum[ev], fid[ev], lead[ev]
    cum += offset[fid]
    channel = (lead >> 4) & 0x7
    rising = (lead & 0x08) != 0
    return bad, cum.view(np.int64), channel, rising, fid, overflows


class StreamDecoder:
    """Incremental decoder of the device-to-host byte stream.

    Parameters
    ----------
    lanes : int, optional
        Samples per capture clock, if known; otherwise taken from the first IDENTIFY reply seen
        (it is only reported back, as :attr:`lanes`: times are already in ticks).

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

    @property
    def counters(self):
        """Running totals of every counter (names in :data:`COUNTERS`) since construction."""
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
        result = DecodeResult()
        arr = np.frombuffer(bytes(buf), np.uint8) if len(buf) else np.empty(0, np.uint8)
        cands = np.flatnonzero((arr[:-1] == _SYNC[0]) & (arr[1:] == _SYNC[1])) \
            if len(arr) > 1 else np.empty(0, np.intp)
        frames = []
        pos = 0            # first byte not yet consumed
        keep = len(buf)    # first byte to keep for the next call
        for p in cands.tolist():
            if p < pos:
                continue
            kind, fr, end = _try_frame(buf, p, final)
            if kind == "more":
                keep = p
                break
            if kind == "truncated":
                result.truncated += 1
            elif kind == "bad":
                result.frames_bad += 1
            elif kind == "frame":
                result.bytes_skipped += p - pos
                frames.append(fr)
                pos = end
        else:
            if not final and len(buf) and buf[-1] == SYNC[0]:
                keep = len(buf) - 1   # maybe the first byte of a sync
        keep = max(keep, pos)
        result.bytes_skipped += keep - pos
        if final:
            result.bytes_skipped += len(buf) - keep
            keep = len(buf)
        self._frames(arr, frames, result)
        del self._buf[:keep]
        return self._ledger.finish(result)

    def _frames(self, arr, frames, result):
        ledger = self._ledger
        good = []
        for fr in frames:
            if fr.version != PROTOCOL_VERSION:
                result.frames_bad += 1
            elif fr.type == FrameType.EVENTS and fr.length < _EH_BYTES:
                result.frames_bad += 1
            else:
                good.append(fr)
        events = [fr for fr in good if fr.type == FrameType.EVENTS]
        decoded = self._events(arr, events)
        while decoded[0] is not None:          # drop frames with protocol errors and retry
            bad = decoded[0]
            result.frames_bad += int(bad.sum())
            dropped = {events[i].start for i in np.flatnonzero(bad).tolist()}
            good = [fr for fr in good if fr.start not in dropped]
            events = [fr for fr in events if fr.start not in dropped]
            decoded = self._events(arr, events)
        _, time, channel, rising, counts, last_idx, headers, overflows = decoded
        hbs = []
        ev_no = 0
        for fr in good:
            result.frames_ok += 1
            ledger.seq(fr.seq, result)
            if fr.type == FrameType.EVENTS:
                base, index = headers[ev_no]
                count = int(counts[ev_no])
                last = int(time[last_idx[ev_no]]) if count else None
                ledger.events_frame(base, index, count, last, overflows.get(ev_no, []), result)
                ev_no += 1
            elif fr.type == FrameType.HEARTBEAT and fr.length >= HEARTBEAT_DTYPE.itemsize:
                hb = np.frombuffer(arr[fr.start:fr.start + HEARTBEAT_DTYPE.itemsize].tobytes(),
                                   HEARTBEAT_DTYPE)[0]
                hbs.append(hb)
                ledger.heartbeat(hb, result)
            elif fr.type == FrameType.REPLY and fr.length >= _RH_BYTES:
                reply = _reply(arr, fr)
                result.replies.append(reply)
                if (reply.opcode == Opcode.IDENTIFY and reply.status == Status.OK
                        and self.lanes is None):
                    try:
                        self.lanes = parse_identify(reply.data)["lanes"]
                    except LatscopeError:
                        pass
            else:
                result.frames_unknown += 1
        result.time, result.channel, result.rising = time, channel, rising
        if hbs:
            result.heartbeats = np.array(hbs, HEARTBEAT_DTYPE)

    @staticmethod
    def _events(arr, events):
        if not events:
            empty = _empty_events()
            return (None,) + empty + (np.empty(0, np.int64), np.empty(0, np.int64), [], {})
        headers = []
        for fr in events:
            value = int.from_bytes(arr[fr.start:fr.start + _EH_BYTES].tobytes(), "little")
            headers.append((_get(value, _EH, "base_time"), _get(value, _EH, "event_index")))
        lengths = np.array([fr.length - _EH_BYTES for fr in events])
        offsets = np.zeros(len(events), np.intp)
        np.cumsum(lengths[:-1], out=offsets[1:])
        tok = np.concatenate([arr[fr.start + _EH_BYTES:fr.start + fr.length] for fr in events])
        bad, time, channel, rising, evf, ovf = _decode_tokens(
            tok, offsets, [h[0] for h in headers])
        if bad.any():
            return (bad,) + (None,) * 7
        counts = np.bincount(evf, minlength=len(events))
        last_idx = np.cumsum(counts) - 1
        overflows = {}
        for f, lost, first_time, span in ovf:
            overflows.setdefault(f, []).append((lost, first_time, span))
        return None, time, channel.astype(np.uint8), rising, counts, last_idx, headers, overflows


# --- the reference decoder ------------------------------------------------------------------------

def decode_reference(stream):
    """Decode a complete byte stream one byte at a time, in plain Python.

    Same results as feeding ``stream`` to a new :class:`StreamDecoder` and calling ``finish()``,
    by an independent path (byte-wise frame search and token parsing); the benchmark baseline.
    """
    buf = bytes(stream)
    result = DecodeResult()
    ledger = _Ledger()
    times, channels, risings, hbs = [], [], [], []
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
            ledger.heartbeat(hb, result)
        elif fr.type == FrameType.REPLY and fr.length >= _RH_BYTES:
            result.replies.append(_reply(buf, fr))
        else:
            result.frames_unknown += 1
    result.bytes_skipped += n - pos
    result.time = np.array(times, np.int64)
    result.channel = np.array(channels, np.uint8)
    result.rising = np.array(risings, bool)
    if hbs:
        result.heartbeats = np.array(hbs, HEARTBEAT_DTYPE)
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


#: For callers that want the command opcode field's width without importing the gateware layout.
COMMAND_HEADER_BYTES = _nbytes(CommandHeader)
