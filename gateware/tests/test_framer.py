"""The framer (with the encoder in front of it) against the reference model, byte for byte, under
random backpressure on both sides; replies slipped in between frames; frames decoded by the host
decoder."""

import random

import pytest
from amaranth.hdl import Module, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from latscope.capture.link.stream import StreamDecoder
from latscope.gateware.encoder import Encoder
from latscope.gateware.encoder_pipelined import PipelinedEncoder
from latscope.gateware.framer import Framer, ReplyByte
from latscope.gateware.linkword import word_bytes
from latscope.gateware.model_stream import ENTRY_RESET, Entry, LinkModel, pack_entry
from latscope.gateware.protocol import EntryKind

P = dict(channels=4, lanes=2, counter_width=12)



async def until_high(ctx, signal, domain="sync"):
    """Tick until ``signal`` is 1 at a clock edge (like ``tick().until()``, but safe to abandon
    when a background testbench is stopped at the end of a simulation)."""
    while True:
        *_, value = await ctx.tick(domain).sample(signal)
        if value:
            return

class LinkSide(wiring.Component):
    """Encoder and framer; with two link bytes the pipelined encoder (the Ethernet build's)."""

    def __init__(self, max_payload, link_bytes=1):
        self.encoder = (Encoder(**P) if link_bytes == 1
                        else PipelinedEncoder(**P, link_bytes=link_bytes))
        self.framer = Framer(max_payload=max_payload, link_bytes=link_bytes)
        super().__init__({"entries": In(stream.Signature(self.encoder.entry_layout)),
                          "replies": In(stream.Signature(ReplyByte)),
                          "tx": Out(self.framer.tx.signature)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.encoder, m.submodules.framer = self.encoder, self.framer
        wiring.connect(m, wiring.flipped(self.entries), self.encoder.entries)
        wiring.connect(m, self.encoder.units, self.framer.units)
        wiring.connect(m, wiring.flipped(self.replies), self.framer.replies)
        wiring.connect(m, self.framer.tx, wiring.flipped(self.tx))
        return m


def random_entries(rng, n):
    entries, cycle = [], 0
    for _ in range(n):
        r = rng.random()
        cycle = (cycle + rng.choice([1, 2, 5, 300, 1500])) % 4096
        if r < 0.1:
            entries.append(Entry(EntryKind.TICK, cycle))
        elif r < 0.15:
            entries.append(Entry(EntryKind.OVERFLOW, cycle, count=rng.randrange(1, 1000),
                                 span=rng.randrange(0, 50)))
        elif r < 0.17:
            entries.append(Entry(ENTRY_RESET, 0))
            cycle = 0
        else:
            entries.append(Entry(EntryKind.EVENTS, cycle, rng.randrange(1, 256),
                                 rng.randrange(256)))
    entries.append(Entry(EntryKind.TICK, (cycle + 1) % 4096))
    return entries


def simulate(entries, *, max_payload, seed, replies=(), expect, link_bytes=1):
    dut = LinkSide(max_payload, link_bytes)
    rng = random.Random(seed)
    got = bytearray()

    async def source(ctx):
        for entry in entries:
            ctx.set(dut.entries.payload.as_value(), pack_entry(entry, **P))
            ctx.set(dut.entries.valid, 1)
            await until_high(ctx, dut.entries.ready)
            ctx.set(dut.entries.valid, 0)
            if rng.random() < 0.5:
                for _ in range(rng.randrange(1, 3)):
                    await ctx.tick()

    async def replier(ctx):
        for payload in replies:
            await ctx.tick().repeat(rng.randrange(50, 400))
            for byte in payload:
                ctx.set(dut.replies.payload, {"data": byte, "length": len(payload)})
                ctx.set(dut.replies.valid, 1)
                await until_high(ctx, dut.replies.ready)
            ctx.set(dut.replies.valid, 0)

    async def sink(ctx):
        while len(got) < expect:
            ctx.set(dut.tx.ready, rng.random() < 0.7)
            _, _, valid, ready, word = await ctx.tick().sample(dut.tx.valid, dut.tx.ready,
                                                               Value.cast(dut.tx.payload))
            if valid and ready:
                got.extend(word_bytes(word, link_bytes))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(replier)
    sim.add_testbench(sink)
    sim.run()
    return bytes(got)


@pytest.mark.parametrize("link_bytes", [1, 2])
@pytest.mark.parametrize("max_payload,seed", [(40, 1), (29, 2), (128, 3)])
def test_bytes_match_model(max_payload, seed, link_bytes):
    entries = random_entries(random.Random(seed), 60)
    model = LinkModel(**P, max_payload=max_payload)
    expected = model.run(entries)
    assert simulate(entries, max_payload=max_payload, seed=seed, expect=len(expected),
                    link_bytes=link_bytes) == expected


@pytest.mark.parametrize("link_bytes", [1, 2])
def test_replies_between_frames(link_bytes):
    entries = random_entries(random.Random(4), 80)
    model = LinkModel(**P, max_payload=40)
    events_only = model.run(entries)
    replies = [bytes([1, 2, 0]), bytes([2, 1, 0]) + b"identify-data", bytes([3, 7, 4])]
    extra = sum(len(r) + 10 for r in replies)
    data = simulate(entries, max_payload=40, seed=4, replies=replies,
                    expect=len(events_only) + extra, link_bytes=link_bytes)
    result = StreamDecoder().feed(data)
    assert [bytes([r.command_seq, r.opcode, r.status]) + r.data for r in result.replies] \
        == replies
    assert result.frames_missing == 0 and result.frames_bad == 0     # one seq counter, no gaps
    # the events are those of the model's stream, whatever the replies' places
    alone = StreamDecoder().feed(events_only)
    assert result.time.tolist() == alone.time.tolist()
    assert result.channel.tolist() == alone.channel.tolist()
    assert result.losses == alone.losses


@pytest.mark.parametrize("value", [28, 4085, "1024"])
def test_constructor_validation(value):
    with pytest.raises(TypeError, match=rf"Maximum payload must be an integer in 29\.\.4084, "
                                        rf"not {value!r}"):
        Framer(max_payload=value)


def test_waiting_holds_a_partly_filled_frame_until_the_next_unit():
    """``waiting`` (what the core's fast-forward relies on) is 1 with a partly filled buffer and
    nothing to send, and such a buffer stays unsent however long nothing arrives; ``idle`` also
    needs the buffer empty. A heartbeat unit closes the buffer: both frames are sent."""
    dut = Framer(max_payload=40)
    seen = {}
    sent = []

    async def unit(ctx, data, *, first, last, length, heartbeat=0, flush=0):
        ctx.set(dut.units.payload, {"data": data, "first": first, "last": last, "flush": flush,
                                    "heartbeat": heartbeat, "length": length,
                                    "base_time": 0, "event_index": 0})
        ctx.set(dut.units.valid, 1)
        await until_high(ctx, dut.units.ready)
        ctx.set(dut.units.valid, 0)

    async def sink(ctx):
        ctx.set(dut.tx.ready, 1)
        while True:
            _, _, valid, byte, waiting = await ctx.tick().sample(dut.tx.valid, dut.tx.payload,
                                                                 dut.waiting)
            if valid:
                sent.append((byte, waiting))

    async def bench(ctx):
        await ctx.tick().repeat(2)
        seen["empty"] = (ctx.get(dut.idle), ctx.get(dut.waiting))
        await unit(ctx, 0x05, first=1, last=1, length=1)       # a one-byte EVENT token
        states = set()
        for _ in range(500):
            _, _, idle, waiting = await ctx.tick().sample(dut.idle, dut.waiting)
            states.add((idle, waiting))
        seen["partial"], seen["partial_sent"] = states, len(sent)
        # a heartbeat unit (28 bytes, the Heartbeat payload) with flush closes the EVENTS frame
        for i in range(28):
            await unit(ctx, i, first=int(i == 0), last=int(i == 27), length=28, heartbeat=1,
                       flush=int(i == 27))
        await ctx.tick().repeat(300)
        seen["end"] = (ctx.get(dut.idle), ctx.get(dut.waiting))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(sink, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert seen["empty"] == (1, 1)
    assert seen["partial"] == {(0, 1)} and seen["partial_sent"] == 0
    # EVENTS frame: 6 header + 12 EventsHeader + 1 token + 4 CRC bytes; HEARTBEAT: 6 + 28 + 4
    data = bytes(byte for byte, _ in sent)
    assert len(data) == (6 + 12 + 1 + 4) + (6 + 28 + 4)
    assert {waiting for _, waiting in sent} == {0}
    result = StreamDecoder().feed(data)
    assert result.frames_bad == result.frames_missing == 0 and len(result.time) == 1
    assert seen["end"] == (1, 1)
