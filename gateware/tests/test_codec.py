"""``gateware/codec.py``, the host's view of the wire format, tied to ``gateware/protocol.py``
and to the specification ``docs/stream-format.md``.

Every dtype is compared field by field with its layout (names, bit offsets, widths, size) and with
the document's table; command frames, IDENTIFY replies, SET_RULE arguments and FRAME/COUNTERS
records are built here from the document's tables alone (offsets and widths read from the
Markdown) and compared with what the codec makes or decodes. Random field values come from a
seeded generator; every comparison is exact.
"""

import doctest
import random
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from amaranth.lib import data

from latscope import LatscopeError
from latscope.gateware import codec, protocol
from latscope.gateware.codec import (
    COUNTER_BYTES,
    COUNTER_DTYPE,
    FLAGS,
    FRAME_BYTES,
    FRAME_DTYPE,
    HEADER_MAX,
    HEARTBEAT_DTYPE,
    decode_counter_records,
    decode_frame_records,
    delay_command,
    encode_command,
    layout_dtype,
    parse_identify,
    rule_command,
)
from latscope.gateware.model_stream import identify_data
from latscope.gateware.protocol import FrameType, Opcode

DOC = Path(__file__).resolve().parents[2] / "docs" / "stream-format.md"


def doc_tables():
    """``{heading: [row dicts]}`` for every ``### heading`` directly followed by a table."""
    tables, heading = {}, None
    lines = DOC.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("### "):
            heading = line[4:].strip()
        elif heading and line.startswith("|") and not lines[i - 1].startswith("|"):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, (c.strip() for c in row.strip().strip("|")
                                              .split("|")), strict=True)))
            tables[heading] = rows
            heading = None
    return tables


TABLES = doc_tables()


def documented(name):
    """``[(field, offset, width)]`` of the document's table for layout ``name``, in bits."""
    return [(r["field"], int(r["offset"]), int(r["width"])) for r in TABLES[name]]


def pack_documented(name, values):
    """Little-endian bytes of layout ``name`` with ``values``, placed by the document's table."""
    rows = documented(name)
    size = max(offset + width for _, offset, width in rows)
    word = 0
    for field, offset, width in rows:
        value = values.get(field, 0)
        assert 0 <= value < 1 << width, (field, value)
        word |= value << offset
    return word.to_bytes(size // 8, "little")


def random_values(name, rng):
    return {field: rng.randrange(1 << width) for field, _, width in documented(name)
            if field != "reserved"}


def test_module_doctests():
    result = doctest.testmod(codec)
    assert result.attempted > 0 and result.failed == 0


# --- dtypes against layouts and the document ------------------------------------------------------

def test_host_dtype_matches_layout():
    layout = data.Layout.cast(protocol.Heartbeat)
    assert HEARTBEAT_DTYPE.itemsize * 8 == layout.size
    for name, f in layout:
        dtype, offset = HEARTBEAT_DTYPE.fields[name]
        assert (offset * 8, dtype.itemsize * 8) == (f.offset, f.width)


@pytest.mark.parametrize("name", ["Heartbeat", "EventsHeader"])
def test_view_dtypes_are_the_documented_bytes(name):
    """A view dtype places each field exactly where the document's table puts it."""
    dtype = layout_dtype(getattr(protocol, name), view=True)
    rows = documented(name)
    assert list(dtype.names) == [field for field, _, _ in rows]
    for field, offset, width in rows:
        column, at = dtype.fields[field]
        assert (8 * at, 8 * column.itemsize) == (offset, width)
        assert column.kind == "u" and column.byteorder in "<|="
    assert 8 * dtype.itemsize == max(o + w for _, o, w in rows) \
        == data.Layout.cast(getattr(protocol, name)).size
    if name == "Heartbeat":
        assert dtype == HEARTBEAT_DTYPE


@pytest.mark.parametrize(("name", "dtype", "nbytes", "extra"), [
    ("FrameRecord", FRAME_DTYPE, FRAME_BYTES, ["header_len"]),
    ("CounterRecord", COUNTER_DTYPE, COUNTER_BYTES, []),
])
def test_widened_dtypes_hold_every_documented_field(name, dtype, nbytes, extra):
    """One column per documented field but ``reserved``, in table order, each the smallest
    unsigned integer holding the field's width; packed; size of the wire record in bytes."""
    layout = data.Layout.cast(getattr(protocol, name))
    rows = documented(name)
    assert [(f, o, w) for f, o, w in rows] == [(f, x.offset, x.width) for f, x in layout]
    fields = [(f, w) for f, _, w in rows if f != "reserved"]
    assert list(dtype.names) == [f for f, _ in fields] + extra
    for field, width in fields:
        column = dtype.fields[field][0]
        assert column.kind == "u" and 8 * column.itemsize >= width
        assert column.itemsize == 1 or 4 * column.itemsize < width
    assert dtype.itemsize == sum(dtype.fields[n][0].itemsize for n in dtype.names)   # packed
    assert 8 * nbytes == layout.size == max(o + w for _, o, w in rows)


def test_flags_are_the_documented_bits():
    rows = documented("FrameFlags")
    assert FLAGS == {f: ((1 << w) - 1) << o for f, o, w in rows if f != "reserved"}


def test_a_bit_field_layout_is_no_view():
    with pytest.raises(TypeError, match="must have only whole-byte fields"):
        layout_dtype(protocol.FrameRecord, view=True)


# --- encode_command: section 1 (frames) and section 5 (commands) ---------------------------------

def test_encode_command_is_a_valid_frame():
    data = encode_command(200, Opcode.SET_EDGES, b"\x03\x00\x01\x00")
    assert data[:2] == b"\xe7\x1a"
    assert data[2] == FrameType.COMMAND | 1 << 4 and data[3] == 200
    assert int.from_bytes(data[4:6], "little") == 5
    assert int.from_bytes(data[-4:], "little") == zlib.crc32(data[2:-4])
    with pytest.raises(ValueError, match=r"command sequence number must be 0\.\.255, not 256"):
        encode_command(256, Opcode.ARM)


def test_encode_command_builds_the_documented_frame():
    """FrameHeader from its table (sync word and version from the Constants table, COMMAND from
    the FrameType table), CommandHeader's opcode, the arguments, then CRC-32/ISO-HDLC over the
    bytes after the sync word, little-endian (section 1)."""
    constants = {r["name"]: int(r["value"], 0) for r in TABLES["Constants"]}
    types = {r["name"]: int(r["value"]) for r in TABLES["FrameType"]}
    opcodes = {r["name"]: int(r["value"], 0) for r in TABLES["Opcode"]}
    rng = random.Random(5)
    for seq, name, args in [(0, "IDENTIFY", b""), (255, "ARM", b"\x01"),
                            (17, "SET_EDGES", bytes(rng.randrange(256) for _ in range(4))),
                            (3, "SELFTEST", b"\x01\x03\x00\x04\x00\x06\x00")]:
        payload = pack_documented("CommandHeader", {"opcode": opcodes[name]}) + args
        header = pack_documented("FrameHeader", {
            "sync": constants["SYNC_WORD"], "type": types["COMMAND"],
            "version": constants["PROTOCOL_VERSION"], "seq": seq, "length": len(payload)})
        sync = header[:2]
        assert sync == b"\xe7\x1a"                       # "i.e. the bytes E7 1A"
        crc = zlib.crc32(header[2:] + payload).to_bytes(constants["CRC_BYTES"], "little")
        assert encode_command(seq, opcodes[name], args) == header + payload + crc


# --- parse_identify: IdentifyReply and the IDENTIFY row of the Opcode table -----------------------

def test_parse_identify():
    raw = identify_data(channels=2, lanes=2, counter_width=48, max_glitch=15, heartbeat_shift=20,
                        fifo_depth=1024, capture_hz=160_000_000, board="ecpix5",
                        channel_names=["rx_dv", "tx_en"], source_hash=0x0123456789ABCDEF)
    info = parse_identify(raw)
    assert info["board"] == "ecpix5" and info["channel_names"] == ["rx_dv", "tx_en"]
    assert info["tick_hz"] == 320_000_000 and info["source_hash"] == 0x0123456789ABCDEF
    assert info["protocol_version"] == 1 and info["fifo_depth"] == 1024
    with pytest.raises(LatscopeError, match="IDENTIFY reply has 3 bytes, expected at least 24"):
        parse_identify(b"abc")
    with pytest.raises(LatscopeError, match="IDENTIFY reply text is malformed"):
        parse_identify(raw[:24] + b"nonsense")
    with pytest.raises(LatscopeError, match="names 1 channels but reports 2"):
        parse_identify(raw[:24] + b"board=x;channels=a")


def test_parse_identify_reads_the_documented_reply():
    """A reply built from the IdentifyReply table with random field values and the text form the
    Opcode table gives (``board=<name>;channels=<n0>,<n1>,...``) parses to those values; the
    tick rate is ``capture_hz * lanes`` (the document's definition of a tick)."""
    identify = next(r for r in TABLES["Opcode"] if r["name"] == "IDENTIFY")
    text_form = re.search(r"`(board=.*?)`", identify["reply data"]).group(1)
    assert text_form == "board=<name>;channels=<n0>,<n1>,..."
    rng = random.Random(9)
    for _ in range(20):
        values = random_values("IdentifyReply", rng)
        values["channels"] = rng.randrange(0, 9)
        names = [f"ch{i}" for i in range(values["channels"])]
        text = f"board=b{values['lanes']};channels={','.join(names)}"
        info = parse_identify(pack_documented("IdentifyReply", values) + text.encode())
        assert {k: info[k] for k in values} == values
        assert info["board"] == f"b{values['lanes']}" and info["channel_names"] == names
        assert info["tick_hz"] == values["capture_hz"] * values["lanes"]


# --- SET_DELAY arguments --------------------------------------------------------------------------

def test_delay_command_is_the_documented_argument():
    """SET_DELAY: "u8 channel, u8 taps (0..127)", taps below the DELAY_TAPS constant."""
    row = next(r for r in TABLES["Opcode"] if r["name"] == "SET_DELAY")
    assert row["arguments (bytes)"].startswith("u8 channel, u8 taps (0..127): ")
    constants = {r["name"]: int(r["value"], 0) for r in TABLES["Constants"]}
    assert constants["DELAY_TAPS"] == 128
    for channel, taps in [(0, 0), (5, 100), (7, constants["DELAY_TAPS"] - 1)]:
        opcode, args = delay_command(channel, taps)
        assert opcode == int(row["value"], 0) and args == bytes([channel, taps])
    with pytest.raises(ValueError, match="channel must be 0..7 and taps 0..127, not 0, 128"):
        delay_command(0, 128)
    with pytest.raises(ValueError, match="channel must be 0..7 and taps 0..127, not 8, 0"):
        delay_command(8, 0)


# --- SET_RULE arguments ---------------------------------------------------------------------------

def test_rule_command_is_the_documented_argument():
    """SET_RULE: "u8 (direction << 7) + rule index, then ClassRule (9 bytes)"."""
    row = next(r for r in TABLES["Opcode"] if r["name"] == "SET_RULE")
    assert row["arguments (bytes)"] == "u8 (direction << 7) + rule index, then ClassRule (9 bytes)"
    rng = random.Random(2)
    for _ in range(50):
        direction, index = rng.randrange(2), rng.randrange(128)
        rule = random_values("ClassRule", rng)
        opcode, args = rule_command(direction, index, **rule)
        assert opcode == int(row["value"], 0)
        assert args == bytes([direction << 7 | index]) + pack_documented("ClassRule", rule)
        assert len(args) == 1 + 9
    with pytest.raises(ValueError, match="direction must be 0 or 1 and index 0..127, not 2, 0"):
        rule_command(2, 0)


# --- FRAME and COUNTERS records -------------------------------------------------------------------

def test_frame_records_decode_the_documented_payload():
    """FRAME payloads built from the FrameRecord table (random values), followed by kept frame
    bytes, at arbitrary offsets of a buffer: every field comes back, and ``header_len`` is the
    kept bytes, at most HEADER_MAX and never past the frame's ``length``."""
    rng = random.Random(4)
    buf, starts, lengths, expect = bytearray(b"\x55" * 3), [], [], []
    for _ in range(40):
        values = random_values("FrameRecord", rng)
        kept = rng.choice([0, 1, 24, HEADER_MAX, HEADER_MAX + 6])
        values["length"] = rng.choice([values["length"], rng.randrange(0, 80)])
        extra = bytes(rng.randrange(256) for _ in range(kept))
        starts.append(len(buf))
        payload = pack_documented("FrameRecord", values) + extra
        lengths.append(len(payload))
        buf += payload + bytes(rng.randrange(256) for _ in range(rng.randrange(5)))
        expect.append((values, extra[:min(kept, HEADER_MAX, values["length"])]))
    records, headers = decode_frame_records(np.frombuffer(bytes(buf), np.uint8), starts, lengths)
    assert records.dtype == FRAME_DTYPE and headers.shape == (40, HEADER_MAX)
    for rec, head, (values, kept) in zip(records, headers, expect, strict=True):
        assert {k: int(rec[k]) for k in values} == values
        assert int(rec["header_len"]) == len(kept)
        assert bytes(head[:len(kept)]) == kept and not head[len(kept):].any()
    empty, no_headers = decode_frame_records(np.zeros(4, np.uint8), [], [])
    assert empty.dtype == FRAME_DTYPE and len(empty) == 0 and no_headers.shape == (0, HEADER_MAX)


def test_counter_records_decode_the_documented_payload():
    rng = random.Random(6)
    rows = [random_values("CounterRecord", rng) for _ in range(30)]
    raw = b"".join(pack_documented("CounterRecord", v) for v in rows)
    assert len(raw) == 30 * COUNTER_BYTES
    records = decode_counter_records(np.frombuffer(raw, np.uint8),
                                     np.arange(30) * COUNTER_BYTES)
    assert records.dtype == COUNTER_DTYPE
    assert [{k: int(r[k]) for k in v} for r, v in zip(records, rows, strict=True)] == rows
    assert len(decode_counter_records(np.zeros(4, np.uint8), [])) == 0
