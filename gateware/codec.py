"""The host's view of the wire format: record dtypes, command encoding, reply and record parsing.

:mod:`latscope.gateware.protocol` defines every byte as ``data.Struct`` layouts; this module derives
what a host needs from those layouts and nothing else, so a change to a layout reaches the host
without a second edit. ``docs/stream-format.md`` is the prose specification and
``gateware/tests/test_codec.py`` ties this module to it. The host's stream decoder
(``capture/link/stream.py``), the gate-level simulations and the benches all use it.

One helper, :func:`layout_dtype`, turns a layout into a NumPy structured dtype: one column per
field, each the smallest unsigned integer that holds it. Where every field of a layout is whole
bytes (``Heartbeat``, ``EventsHeader``) that dtype *is* the wire record and views received bytes
directly; bit-field records (``FrameRecord``, ``CounterRecord``) are widened column by column with
:func:`unpack_records`.

>>> from latscope.gateware.protocol import Opcode
>>> frame = encode_command(1, Opcode.ARM, b"\\x01")
>>> frame.hex(" ")
'e7 1a 14 01 02 00 02 01 01 52 dd fb'
>>> HEARTBEAT_DTYPE.names
('time', 'events', 'lost', 'fifo_high_water', 'status', 'epoch')
>>> HEARTBEAT_DTYPE.itemsize, FRAME_BYTES, COUNTER_BYTES
(28, 30, 24)
"""

import zlib

import numpy as np
from amaranth.lib import data

from latscope import LatscopeError

from .protocol import (
    CRC_BYTES,
    DELAY_TAPS,
    NUM_CHANNELS,
    PROTOCOL_VERSION,
    SYNC,
    SYNC_WORD,
    ClassRule,
    CounterRecord,
    FrameFlags,
    FrameHeader,
    FrameRecord,
    FrameType,
    Heartbeat,
    IdentifyReply,
    Opcode,
)

__all__ = [
    "layout_fields", "layout_bytes", "layout_dtype", "unpack", "unpack_records",
    "HEARTBEAT_DTYPE", "FRAME_DTYPE", "COUNTER_DTYPE", "FRAME_BYTES", "COUNTER_BYTES",
    "HEADER_MAX", "FLAGS",
    "encode_command", "parse_identify", "rule_command", "delay_command",
    "decode_frame_records", "decode_counter_records", "empty_frames", "empty_counters",
]


def layout_fields(layout):
    """``{name: (bit offset, width)}`` of the top-level fields of ``layout``, in layout order.

    >>> layout_fields(FrameHeader)["length"]
    (32, 16)
    """
    return {name: (f.offset, f.width) for name, f in data.Layout.cast(layout)}


def layout_bytes(layout):
    """Size of ``layout`` in whole bytes (every wire record is a whole number of bytes)."""
    size = data.Layout.cast(layout).size
    if size % 8:
        raise TypeError(f"Layout size must be a whole number of bytes, not {size} bits")
    return size // 8


def unpack(layout, value):
    """Split the integer ``value`` of a ``layout`` into ``{name: int}`` of its top-level fields
    (nested layouts as their integer value).

    >>> unpack(FrameHeader, 0x0004_01_14_1AE7)
    {'sync': 6887, 'type': 4, 'version': 1, 'seq': 1, 'length': 4}
    """
    return {name: (value >> offset) & ((1 << width) - 1)
            for name, (offset, width) in layout_fields(layout).items()}


def _uint(width):
    return next(np.dtype(f"<u{n}") for n in (1, 2, 4, 8) if 8 * n >= width)


def layout_dtype(layout, *, extra=(), view=False):
    """The NumPy structured dtype of a layout's records.

    Parameters
    ----------
    layout : data.Struct or data.Layout
        A record of :mod:`~latscope.gateware.protocol`.
    extra : sequence of (str, dtype)
        Host-side columns appended after the layout's (``FRAME_DTYPE``'s ``header_len``).
    view : bool
        Require the dtype to be the wire record byte for byte (every field whole bytes of 8, 16,
        32 or 64 bits, none reserved), so ``np.frombuffer`` reads received payloads directly.
        ``TypeError`` otherwise.

    Returns
    -------
    numpy.dtype
        One packed little-endian column per top-level field except ``reserved``, each the
        smallest unsigned integer holding the field (a nested layout is one column), then
        ``extra``.

    Examples
    --------
    >>> from latscope.gateware.protocol import EventsHeader
    >>> layout_dtype(EventsHeader, view=True).descr
    [('base_time', '<u8'), ('event_index', '<u4')]
    """
    fields = {name: ow for name, ow in layout_fields(layout).items() if name != "reserved"}
    dtype = np.dtype([(name, _uint(width)) for name, (_, width) in fields.items()]
                     + list(extra))
    if view:
        wire = [(name, offset, width) for name, (offset, width) in layout_fields(layout).items()]
        ours = [(name, 8 * dtype.fields[name][1], 8 * dtype.fields[name][0].itemsize)
                for name in fields]
        if extra or wire != ours or dtype.itemsize * 8 != data.Layout.cast(layout).size:
            raise TypeError(f"Layout {layout!r} must have only whole-byte fields of 8, 16, 32 or "
                            f"64 bits to be viewed as a dtype, not {wire!r}")
    return dtype


def unpack_records(raw, layout, dtype):
    """Records of ``layout`` (rows of the uint8 array ``raw``, one record per row) widened into a
    structured array of ``dtype`` (from :func:`layout_dtype`; its extra columns are zero)."""
    n = len(raw)
    out = np.zeros(n, dtype)
    if not n:
        return out
    for name, (offset, width) in layout_fields(layout).items():
        if name not in dtype.names:
            continue
        first, last = offset // 8, (offset + width - 1) // 8
        value = np.zeros(n, np.uint64)
        for i in range(first, last + 1):
            value |= raw[:, i].astype(np.uint64) << np.uint64(8 * (i - first))
        value >>= np.uint64(offset % 8)
        value &= np.uint64((1 << width) - 1)
        out[name] = value
    return out


#: A HEARTBEAT payload (and STATUS reply data) as received: the ``Heartbeat`` layout.
HEARTBEAT_DTYPE = layout_dtype(Heartbeat, view=True)
#: Bytes of a FRAME record before its kept frame bytes, and of a COUNTERS payload.
FRAME_BYTES = layout_bytes(FrameRecord)
COUNTER_BYTES = layout_bytes(CounterRecord)
#: Largest number of kept frame bytes a record can carry (gateware/sniffer.py MAX_HEADER_BYTES).
HEADER_MAX = 64
#: One decoded FRAME record per row, fields widened to whole bytes; ``header_len`` is the number
#: of kept frame bytes (the rows of the second array :func:`decode_frame_records` returns).
FRAME_DTYPE = layout_dtype(FrameRecord, extra=[("header_len", np.uint8)])
#: One COUNTERS record per row, fields widened to whole bytes.
COUNTER_DTYPE = layout_dtype(CounterRecord)
#: ``{flag name: bit mask}`` of the ``flags`` column of :data:`FRAME_DTYPE`.
FLAGS = {name: ((1 << width) - 1) << offset
         for name, (offset, width) in layout_fields(FrameFlags).items() if name != "reserved"}

_FH = layout_fields(FrameHeader)
_FH_BYTES = layout_bytes(FrameHeader)
_IR_BYTES = layout_bytes(IdentifyReply)


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
    info = unpack(IdentifyReply, int.from_bytes(reply_data[:_IR_BYTES], "little"))
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


def rule_command(direction, index, **rule):
    """Arguments of a SET_RULE command: ``(opcode, args)`` for :func:`encode_command`.

    ``rule`` holds ``ClassRule`` fields (``enable``, ``cls``, ``match_port``, ``port_lo`` ...).

    >>> op, args = rule_command(1, 2, enable=1, cls=3, match_pcp=1, pcp=5)
    >>> op == Opcode.SET_RULE, args.hex()
    (True, '82270000050000000000')
    """
    if direction not in (0, 1) or not 0 <= index < 128:
        raise ValueError(f"direction must be 0 or 1 and index 0..127, not {direction}, {index}")
    value = data.Layout.cast(ClassRule).const(rule).as_value().value
    return Opcode.SET_RULE, bytes([direction << 7 | index]) + value.to_bytes(
        layout_bytes(ClassRule), "little")


def delay_command(channel, taps):
    """Arguments of a SET_DELAY command: ``(opcode, args)`` for :func:`encode_command`.

    >>> op, args = delay_command(3, 40)
    >>> op == Opcode.SET_DELAY, args.hex()
    (True, '0328')
    """
    if not 0 <= channel < NUM_CHANNELS or not 0 <= taps < DELAY_TAPS:
        raise ValueError(f"channel must be 0..{NUM_CHANNELS - 1} and taps 0..{DELAY_TAPS - 1}, "
                         f"not {channel}, {taps}")
    return Opcode.SET_DELAY, bytes([channel, taps])


def empty_frames():
    """No FRAME records: ``(records, headers)`` as :func:`decode_frame_records` returns them."""
    return np.empty(0, FRAME_DTYPE), np.empty((0, HEADER_MAX), np.uint8)


def empty_counters():
    """No COUNTERS records: an empty :data:`COUNTER_DTYPE` array."""
    return np.empty(0, COUNTER_DTYPE)


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
    records = unpack_records(_gather(arr, starts, FRAME_BYTES), FrameRecord, FRAME_DTYPE)
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
    """COUNTERS payloads at ``starts`` in the uint8 array ``arr`` to a :data:`COUNTER_DTYPE`
    array."""
    starts = np.asarray(starts, np.intp)
    if not len(starts):
        return empty_counters()
    return unpack_records(_gather(arr, starts, COUNTER_BYTES), CounterRecord, COUNTER_DTYPE)
