"""``docs/stream-format.md``, ``gateware/protocol.py`` and the host decoder, tied together.

The tables of the document are parsed and compared with the layouts and enums (``test_codec.py``
compares the host's dtypes with the layouts); and bytes produced by simulating ``LatscopeCore`` are
decoded by both host decoders and compared with what the capture front end wrote into the FIFO,
run through the reference model."""

import random
from pathlib import Path

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from latscope.capture.link.stream import StreamDecoder, decode_reference
from latscope.gateware import protocol
from latscope.gateware.codec import encode_command
from latscope.gateware.model_stream import Entry, LinkModel, echo_traffic
from latscope.gateware.protocol import EntryKind, Opcode
from latscope.gateware.stream_bench import send_bytes
from latscope.gateware.top import LatscopeCore

DOC = Path(__file__).resolve().parents[2] / "docs" / "stream-format.md"
LAYOUTS = ["FrameHeader", "EventsHeader", "Overflow", "Heartbeat", "HeartbeatStatus",
           "CommandHeader", "ReplyHeader", "IdentifyReply",
           "FrameRecord", "FrameFlags", "CounterRecord", "ClassRule"]
ENUMS = ["FrameType", "Opcode", "Status", "EthSpeed"]


def doc_tables():
    """``{heading: [row dicts]}`` for every ``### heading`` followed by a Markdown table."""
    tables, heading, rows, header = {}, None, None, None
    for line in DOC.read_text().splitlines():
        if line.startswith("### "):
            heading, rows, header = line[4:].strip(), None, None
            continue
        if heading and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header, rows = cells, []
                tables[heading] = rows
            elif not set("".join(cells)) <= set("-: "):
                rows.append(dict(zip(header, cells, strict=True)))
        elif rows is not None and not line.startswith("|"):
            heading, rows, header = (heading if rows == [] else None), None, None
    return tables


def integer(text):
    return int(text.strip("`").replace(",", ""), 0)


@pytest.mark.parametrize("name", LAYOUTS)
def test_layout_tables_match_protocol(name):
    rows = doc_tables()[name]
    layout = data.Layout.cast(getattr(protocol, name))
    documented = [(r["field"], integer(r["offset"]), integer(r["width"])) for r in rows]
    defined = [(field, f.offset, f.width) for field, f in layout]
    assert documented == defined


@pytest.mark.parametrize("name", ENUMS)
def test_enum_tables_match_protocol(name):
    rows = doc_tables()[name]
    documented = {r["name"]: integer(r["value"]) for r in rows}
    assert documented == {m.name: m.value for m in getattr(protocol, name)}


def test_constants_and_tokens_match_protocol():
    tables = doc_tables()
    constants = {r["name"]: integer(r["value"]) for r in tables["Constants"]}
    assert constants == {name: getattr(protocol, name) for name in constants}
    assert set(constants) >= {"PROTOCOL_VERSION", "SYNC_WORD", "MAX_PAYLOAD", "CRC_BYTES"}
    tokens = {r["token"]: r for r in tables["Tokens"]}
    T = protocol.Token
    masks = {"EVENT": (T.EVENT_MASK, T.EVENT), "TIME": (T.TIME_MASK, T.TIME),
             "OVERFLOW": (0xFF, T.OVERFLOW)}
    for name, (mask, value) in masks.items():
        doc_mask, doc_value = (integer(x) for x in tokens[name]["lead byte mask/value"].split("/"))
        assert (doc_mask, doc_value) == (mask, value)
    assert integer(tokens["EVENT"]["lead bits"]) == protocol.EVENT_FIRST_BITS
    assert integer(tokens["TIME"]["lead bits"]) == protocol.TIME_FIRST_BITS
    assert tokens["EVENT"]["continuation bytes"].startswith(f"0..{protocol.EVENT_MAX_CONT} ")
    assert tokens["TIME"]["continuation bytes"].startswith(f"1..{protocol.TIME_MAX_CONT} ")
    assert tokens["OVERFLOW"]["continuation bytes"].startswith(f"{protocol.OVERFLOW_CONT} ")
    assert integer(tokens["OVERFLOW"]["max value bits"]) \
        == protocol.OVERFLOW_CONT * protocol.CONT_BITS == data.Layout.cast(protocol.Overflow).size
    assert integer(tokens["EVENT"]["max value bits"]) \
        == protocol.EVENT_FIRST_BITS + protocol.EVENT_MAX_CONT * protocol.CONT_BITS


def test_default_payload_table_matches_protocol():
    rows = doc_tables()["Default payload"]
    documented = {r["name"]: integer(r["value"]) for r in rows}
    assert documented == {name: getattr(protocol, name) for name in documented}
    assert set(documented) >= {"TRAFFIC_MAGIC", "TRAFFIC_SEQ_OFFSET", "TRAFFIC_HEADER_BYTES"}


def test_frame_records_are_whole_bytes():
    """FRAME and COUNTERS payloads and the SET_RULE argument are byte strings of fixed size."""
    for layout, size in [(protocol.FrameRecord, 30), (protocol.CounterRecord, 24),
                         (protocol.ClassRule, 9), (protocol.FrameFlags, 2)]:
        assert data.Layout.cast(layout).size == 8 * size


def test_bytes_per_event_realistic():
    """The figure quoted in docs/stream-format.md section 2 (2.2 bytes/event), measured with the
    reference model on 3000 echo periods (about 24,000 events, fixed seed)."""
    entries, n = echo_traffic(3000)
    model = LinkModel(channels=8, lanes=2, counter_width=48)
    model.run(entries)
    model.entry(Entry(EntryKind.TICK, entries[-1].cycle + 1))
    result = StreamDecoder().feed(bytes(model.output))
    assert len(result.time) == n
    per_event = len(model.output) / n
    assert abs(per_event - 2.2) < 0.05
    assert per_event <= 3.0          # the target


@pytest.mark.parametrize("lanes", [2, 4])
def test_simulated_core_decodes(lanes):
    """Random pin activity through LatscopeCore (two clocks); the bytes it sends are decoded by
    both host decoders and compared with the FIFO entries run through the reference model.
    With 4 lanes a second channel may change in the same capture cycle (often at the same
    lane), so simultaneous edges must come out distinct and in order."""
    channels = 3
    dut = LatscopeCore(channels=channels, lanes=lanes, counter_width=12, max_glitch=0,
                       heartbeat_shift=7, fifo_depth=16, capture_hz=100_000_000,
                       channel_names=["a", "b", "c"], max_payload=48)
    rng = random.Random(11)
    out, written = bytearray(), []
    done = []

    async def host(ctx):
        await send_bytes(ctx, dut.rx, encode_command(1, Opcode.ARM, b"\x01"))

    async def sink(ctx):
        async for _, _, valid, ready, byte in ctx.tick("sync").sample(
                dut.tx.valid, dut.tx.ready, dut.tx.payload):
            ctx.set(dut.tx.ready, rng.random() < 0.9)
            if valid and ready:
                out.append(byte)

    async def fifo_tap(ctx):
        front = dut.front
        async for _, _, en, rdy, entry in ctx.tick("capture").sample(
                front.fifo_w_en, front.fifo_w_rdy, front.fifo_w_data):
            if en and rdy:
                written.append(entry.as_value().value)

    async def pins(ctx):
        levels = [0] * channels
        for cycle in range(3000):
            samples = 0
            change = cycle > 300 and rng.random() < 0.12
            ch, at = rng.randrange(channels), rng.randrange(lanes)
            also = None
            if lanes == 4 and change and rng.random() < 0.5:
                also = ((ch + 1) % channels, at if rng.random() < 0.5 else rng.randrange(lanes))
            for lane in range(lanes):
                if change and lane == at:
                    levels[ch] ^= 1                 # the channel changes at this lane
                if also is not None and lane == also[1]:
                    levels[also[0]] ^= 1
                for c in range(channels):
                    samples |= levels[c] << (lane * channels + c)
            ctx.set(dut.samples, samples)
            await ctx.tick("capture")
        done.append(True)

    sim = Simulator(dut)
    sim.add_clock(10e-9, domain="capture")
    sim.add_clock(9e-9, domain="sync")
    sim.add_testbench(host)
    sim.add_process(sink)
    sim.add_process(fifo_tap)
    sim.add_testbench(pins)
    sim.run()

    result = StreamDecoder().feed(bytes(out))
    reference = decode_reference(bytes(out))
    assert np.array_equal(result.time, reference.time)
    assert np.array_equal(result.channel, reference.channel)
    assert result.losses == reference.losses
    assert result.frames_bad == 0 and result.bytes_skipped == 0
    # (217 decoded and 86 lost to overflow with this seed: the encoder takes 5 link cycles per
    # entry's first event, for 48 MHz on iCE40, and the 16-entry FIFO's write side sees reads a
    # few cycles late, so bursts overflow it; the link sends a byte per cycle, 40 times the UART)
    assert len(result.time) > 150 and result.overflow_lost_events > 0

    # the same entries through the reference model give the same events and heartbeats
    layout = dut.encoder.entry_layout
    model = LinkModel(channels=channels, lanes=lanes, counter_width=12, max_payload=48)
    for value in written:
        fields = {name: (value >> f.offset) & ((1 << f.width) - 1) for name, f in layout}
        payload = fields["payload"]
        bits = channels * lanes
        model.entry(Entry(fields["kind"], fields["cycle"], payload & ((1 << bits) - 1),
                          payload >> bits & ((1 << bits) - 1), payload & ((1 << 40) - 1),
                          payload >> 40 & 0xFFF))
    expected = StreamDecoder().feed(bytes(model.output))
    # (the model emits frames as they close; the gateware was still sending the last ones)
    n = min(len(expected.time), len(result.time))
    assert n > 150 and np.array_equal(result.time[:n], expected.time[:n])
    assert np.array_equal(result.channel[:n], expected.channel[:n])
    assert np.array_equal(result.rising[:n], expected.rising[:n])
    m = min(len(expected.heartbeats), len(result.heartbeats))
    assert m > 10
    for key in ("time", "events", "lost", "epoch"):
        assert np.array_equal(result.heartbeats[key][:m], expected.heartbeats[key][:m])
    assert result.losses == expected.losses[:len(result.losses)]
    assert done
    # ordered: time never goes back; at one tick, channels ascend (the encoder walks the bits)
    same = np.diff(result.time) == 0
    assert np.all(np.diff(result.time) >= 0)
    assert np.all(np.diff(result.channel.astype(int))[same] > 0)
    if lanes == 4:   # the scenario really put several edges into one capture cycle / one tick
        assert np.any(np.diff(result.time // lanes) == 0) and np.any(same)
