"""SET_NET in the command handler against CommandModel; the RGMII receive front end; the link
multiplexer switching the stream only between whole stream frames."""

import random

import pytest
from amaranth.hdl import ClockDomain, Module, Value
from amaranth.sim import Simulator

from latscope.capture.link.transport import encode_frame
from latscope.gateware.codec import encode_command
from latscope.gateware.control import Control
from latscope.gateware.eth import model
from latscope.gateware.eth.link import LinkMux
from latscope.gateware.eth.rgmii import RgmiiRxFront
from latscope.gateware.linkword import WordToBytes, word_bytes
from latscope.gateware.model_stream import CommandModel
from latscope.gateware.protocol import FrameType, Opcode, Status
from latscope.gateware.stream_bench import until_high

NAMES = ["a", "b", "c", "d"]




def _commands_through_control(dut, commands):
    replies = []

    async def host(ctx):
        for frame in commands:
            for byte in frame:
                ctx.set(dut.rx.payload, byte)
                ctx.set(dut.rx.valid, 1)
                await until_high(ctx, dut.rx.ready)
            ctx.set(dut.rx.valid, 0)
            await ctx.tick().repeat(200)

    async def device(ctx):
        ctx.set(dut.replies.ready, 1)
        current = bytearray()
        async for _c, _r, valid, data, length in ctx.tick().sample(
                dut.replies.valid, dut.replies.payload.data, dut.replies.payload.length):
            if valid:
                current.append(data)
                if len(current) == length:
                    replies.append((current[1], current[2]))
                    current = bytearray()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host)
    sim.add_process(device)
    state = {}

    async def final(ctx):
        await ctx.tick().repeat(200 * len(commands) + 400)
        if "net" in dut.signature.members:
            state.update(mac=ctx.get(dut.net.mac), ip=ctx.get(dut.net.ip),
                         port=ctx.get(dut.net.port))

    sim.add_testbench(final)
    sim.run()
    return replies, state


def test_set_net_matches_the_model():
    new = model.NetConfig(mac=0x024C530000AB, ip=model.parse_ipv4("10.1.2.3"), port=4000)
    args = [new.to_bytes(),                                      # OK
            bytes([0x01]) + new.to_bytes()[1:],                  # group MAC: BAD_ARGUMENT
            new.to_bytes()[:10] + b"\x00\x00",                   # port 0: BAD_ARGUMENT
            new.to_bytes()[:11]]                                 # 11 bytes: BAD_LENGTH
    commands = [encode_command(i, Opcode.SET_NET, a) for i, a in enumerate(args)]
    dut = Control(channels=4, capture_hz=48_000_000, channel_names=NAMES,
                  net=model.DEFAULT_NET)
    replies, state = _commands_through_control(dut, commands)
    ref = CommandModel(channels=4, net=model.DEFAULT_NET)
    expected = [ref.handle(bytes([Opcode.SET_NET]) + a)[:2] for a in args]
    assert replies == expected
    assert [s for _, s in replies] == [Status.OK, Status.BAD_ARGUMENT, Status.BAD_ARGUMENT,
                                       Status.BAD_LENGTH]
    assert model.NetConfig(**state) == ref.net == new


def test_set_net_unknown_without_ethernet():
    dut = Control(channels=4, capture_hz=48_000_000, channel_names=NAMES)
    replies, _ = _commands_through_control(
        dut, [encode_command(0, Opcode.SET_NET, model.DEFAULT_NET.to_bytes())])
    assert replies == [(Opcode.SET_NET, Status.UNKNOWN_OPCODE)]
    assert CommandModel(channels=4).handle(bytes([Opcode.SET_NET]) + bytes(12))[1] == \
        Status.UNKNOWN_OPCODE


def test_rx_front_strips_preamble_and_marks_last():
    frames = [bytes(random.Random(i).randrange(256) for _ in range(n)) for i, n in
              enumerate([64, 70, 100])]
    dut = RgmiiRxFront()
    got, current = [], bytearray()

    async def phy(ctx):
        for frame in frames:
            for byte in model.PREAMBLE + frame:
                ctx.set(dut.rise, (byte & 0xF) | 0x10)
                ctx.set(dut.fall, (byte >> 4) | 0x10)
                await ctx.tick()
            ctx.set(dut.rise, 0)
            ctx.set(dut.fall, 0)
            await ctx.tick().repeat(12)

    async def mac(ctx):
        nonlocal current
        async for _c, _r, valid, data, last in ctx.tick().sample(
                dut.bytes.valid, dut.bytes.payload.data, dut.bytes.payload.last):
            if valid:
                current.append(data)
                if last:
                    got.append(bytes(current))
                    current = bytearray()

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(phy)
    sim.add_process(mac)
    sim.run_until(8e-9 * 500)
    assert got == frames


@pytest.mark.parametrize("link_bytes", [1, 2])
def test_link_mux_switches_between_whole_frames(link_bytes):
    # With two link bytes the core's words are pairs, or single bytes (a reply's, or a frame's
    # odd last byte) anywhere after the header (the framer sends headers as whole words); the
    # UART gets their bytes one at a time.
    rng = random.Random(3)
    frames = [encode_frame(FrameType.EVENTS, i, bytes(rng.randrange(256)
                                                      for _ in range(rng.randrange(0, 60))))
              for i in range(60)]
    m = Module()
    m.domains.sync = ClockDomain()
    m.submodules.mux = mux = LinkMux(release_cycles=16, link_bytes=link_bytes)
    out = {"uart": bytearray(), "eth": bytearray()}
    to_core = bytearray()
    cmd = encode_command(1, Opcode.STATUS)

    async def core(ctx):
        for frame in frames:
            i = 0
            while i < len(frame):
                n = 1 if link_bytes == 1 or i + 1 == len(frame) or (
                    i >= 6 and rng.random() < 0.2) else 2
                chunk, i = frame[i:i + n], i + n
                ctx.set(mux.core_tx.valid, 1)
                ctx.set(Value.cast(mux.core_tx.payload),
                        int.from_bytes(chunk, "little") | (n == 2) << 16)
                await until_high(ctx, mux.core_tx.ready)
            ctx.set(mux.core_tx.valid, 0)
        await ctx.tick().repeat(4)         # the UART's side gives out the last word's bytes

    async def links(ctx):
        ctx.set(mux.uart_tx.ready, 1)
        ctx.set(mux.eth_tx.ready, 1)
        ctx.set(mux.core_rx.ready, 1)
        await ctx.tick().repeat(150)
        for source in (mux.eth_rx, mux.uart_rx, mux.eth_rx):   # mid-frame requests
            for byte in cmd:
                ctx.set(source.valid, 1)
                ctx.set(source.payload, byte)
                await until_high(ctx, source.ready)
            ctx.set(source.valid, 0)
            for _ in range(rng.randrange(300, 700)):     # safe to abandon at the end
                await ctx.tick()

    async def monitor(ctx):
        async for _c, _r, uv, ur, ub, ev, er, eb, rv, rb in ctx.tick().sample(
                mux.uart_tx.valid, mux.uart_tx.ready, mux.uart_tx.payload,
                mux.eth_tx.valid, mux.eth_tx.ready, Value.cast(mux.eth_tx.payload),
                mux.core_rx.valid, mux.core_rx.payload):
            if uv and ur:
                out["uart"].append(ub)
            if ev and er:
                out["eth"].extend(word_bytes(eb, link_bytes))
            if rv:
                to_core.append(rb)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(core)
    sim.add_testbench(links, background=True)
    sim.add_process(monitor)
    sim.run()
    assert bytes(to_core) == cmd * 3                # each command whole, from one link
    for name in ("uart", "eth"):
        data = bytes(out[name])
        lengths = model.stream_frame_lengths(data)
        assert sum(lengths) == len(data) and lengths, name     # whole frames only
    # every frame went to exactly one link, in order within each link
    assert sorted(model.stream_frame_lengths(bytes(out["uart"])) +
                  model.stream_frame_lengths(bytes(out["eth"]))) == sorted(len(f) for f in frames)


def test_word_to_bytes_keeps_every_byte_in_order():
    # Words of one or two bytes in, under random gaps, and random backpressure out: the bytes
    # in order, one per cycle while both sides keep up (the streamer's side of the Ethernet FIFO).
    rng = random.Random(5)
    words = [bytes(rng.randrange(256) for _ in range(rng.choice([1, 2, 2, 2])))
             for _ in range(400)]
    dut = WordToBytes()
    got = bytearray()

    async def source(ctx):
        for word in words:
            ctx.set(dut.i.valid, 1)
            ctx.set(Value.cast(dut.i.payload),
                    int.from_bytes(word, "little") | (len(word) == 2) << 16)
            await until_high(ctx, dut.i.ready)
            ctx.set(dut.i.valid, 0)
            if rng.random() < 0.2:
                await ctx.tick()

    async def sink(ctx):
        while len(got) < sum(map(len, words)):
            ctx.set(dut.o.ready, rng.random() < 0.8)
            _, _, valid, ready, byte = await ctx.tick().sample(dut.o.valid, dut.o.ready,
                                                               dut.o.payload)
            if valid and ready:
                got.append(byte)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    assert bytes(got) == b"".join(words)
