"""The 8N1 UART: exact bit timing of the transmitter, the receiver against a bit-banged line
(including the FT2232H's 12 Mbaud at 48 MHz, divisor 4), loopback under backpressure, framing
errors and overruns."""

import random

import pytest
from amaranth.sim import Simulator

from latscope.gateware.uart import UART, UARTReceiver, UARTTransmitter


def line_bits(byte):
    """The 10 line levels of one 8N1 character: start, data LSB first, stop."""
    return [0] + [byte >> i & 1 for i in range(8)] + [1]


@pytest.mark.parametrize("divisor", [1, 4, 7])
def test_transmitter_waveform(divisor):
    dut = UARTTransmitter(divisor=divisor)
    data = [0x55, 0x00, 0xFF, 0xA3]
    trace = []

    async def bench(ctx):
        await ctx.tick().repeat(3)
        for byte in data:
            ctx.set(dut.data.payload, byte)
            ctx.set(dut.data.valid, 1)
            await ctx.tick().until(dut.data.ready)
        ctx.set(dut.data.valid, 0)
        await ctx.tick().repeat(10 * divisor + 5)

    async def probe(ctx):
        async for _, _, tx in ctx.tick().sample(dut.tx):
            trace.append(tx)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(probe)
    sim.run()
    # back to back characters, each bit held exactly ``divisor`` cycles, idle high around them
    expected = [bit for byte in data for bit in line_bits(byte) for _ in range(divisor)]
    start = trace.index(0)
    assert trace[:start] == [1] * start
    assert trace[start:start + len(expected)] == expected
    assert set(trace[start + len(expected):]) == {1}


def run_line(divisor, levels, *, ready=lambda: True):
    """Drive ``rx`` with one level per cycle; return the bytes received and the error flags."""
    dut = UARTReceiver(divisor=divisor)
    got = []
    flags = {}

    async def bench(ctx):
        for level in levels:
            ctx.set(dut.rx, level)
            ctx.set(dut.data.ready, ready())
            _, _, valid, rdy, byte = await ctx.tick().sample(dut.data.valid, dut.data.ready,
                                                             dut.data.payload)
            if valid and rdy:
                got.append(byte)
        flags.update(overrun=ctx.get(dut.overrun), framing_error=ctx.get(dut.framing_error))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, flags


@pytest.mark.parametrize("divisor,idle", [(4, 0), (4, 3), (9, 1), (16, 0)])
def test_receiver(divisor, idle):
    rng = random.Random(divisor)
    data = [rng.randrange(256) for _ in range(30)] + [0x00, 0xFF]
    levels = [1] * 5
    for byte in data:
        levels += [b for b in line_bits(byte) for _ in range(divisor)] + [1] * idle
    got, flags = run_line(divisor, levels + [1] * 3 * divisor)
    assert got == data
    assert flags == {"overrun": 0, "framing_error": 0}


def test_receiver_framing_error_and_recovery():
    divisor = 4
    bad = [0] * 10 * divisor                    # a break: the stop bit is low
    good = [b for b in line_bits(0x5A) for _ in range(divisor)]
    got, flags = run_line(divisor, [1] * 4 + bad + [1] * 8 + good + [1] * 12)
    assert got == [0x5A]
    assert flags["framing_error"] == 1


def test_receiver_overrun():
    divisor = 4
    levels = [1] * 4
    for byte in (1, 2, 3):
        levels += [b for b in line_bits(byte) for _ in range(divisor)]
    got, flags = run_line(divisor, levels + [1] * 12, ready=lambda: False)
    assert got == [] and flags["overrun"] == 1


def test_loopback_with_backpressure():
    dut = UART(divisor=4)
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(40))
    got = bytearray()

    async def send(ctx):
        for byte in data:
            ctx.set(dut.tx_data.payload, byte)
            ctx.set(dut.tx_data.valid, 1)
            await ctx.tick().until(dut.tx_data.ready)
            ctx.set(dut.tx_data.valid, 0)
            if rng.random() < 0.3:
                await ctx.tick().repeat(rng.randrange(1, 30))

    async def wire(ctx):
        async for _, _, tx in ctx.tick().sample(dut.tx):
            ctx.set(dut.rx, tx)

    async def receive(ctx):
        while len(got) < len(data):
            ctx.set(dut.rx_data.ready, 1)
            _, _, valid, byte = await ctx.tick().sample(dut.rx_data.valid, dut.rx_data.payload)
            if valid:
                got.append(byte)

    sim = Simulator(dut)
    sim.add_clock(1 / 48e6)
    sim.add_testbench(send)
    sim.add_process(wire)
    sim.add_testbench(receive)
    sim.run()
    assert bytes(got) == data


@pytest.mark.parametrize("cls,value,least", [
    (UARTTransmitter, 0, 1), (UARTReceiver, 3, 4), (UART, 2, 4), (UART, 4.0, 1),
])
def test_divisor_validation(cls, value, least):
    with pytest.raises(TypeError, match=rf"Divisor must be an integer >= {least}, not {value!r}"):
        cls(divisor=value)


def test_receiver_in_a_faster_domain_at_12_mbaud():
    """The iCEBreaker's arrangement: 12 Mbaud sent from the 24 MHz link clock (divisor 2) and
    received in the 48 MHz capture clock (divisor 4), bytes crossing into the link clock, with the
    reader sometimes not ready. Exact: every byte, in order, no overrun or framing error."""
    from amaranth.hdl import ClockDomain, Module
    dut = UART(divisor=2, rx_divisor=4, rx_domain="capture")
    m = Module()
    m.domains.sync = ClockDomain("sync")
    m.domains.capture = ClockDomain("capture")
    m.submodules.uart = dut
    rng = random.Random(12)
    data = bytes(rng.randrange(256) for _ in range(60))
    got = bytearray()
    flags = {}

    async def send(ctx):
        for byte in data:
            ctx.set(dut.tx_data.payload, byte)
            ctx.set(dut.tx_data.valid, 1)
            await ctx.tick("sync").until(dut.tx_data.ready)
            ctx.set(dut.tx_data.valid, 0)
            if rng.random() < 0.2:
                await ctx.tick("sync").repeat(rng.randrange(1, 10))

    async def wire(ctx):                      # the line, as the receiver's pin sees it
        async for _, _, tx in ctx.tick("capture").sample(dut.tx):
            ctx.set(dut.rx, tx)

    async def receive(ctx):
        while len(got) < len(data):
            ctx.set(dut.rx_data.ready, rng.random() < 0.5)
            _, _, valid, ready, byte = await ctx.tick("sync").sample(
                dut.rx_data.valid, dut.rx_data.ready, dut.rx_data.payload)
            if valid and ready:
                got.append(byte)
        flags.update(overrun=ctx.get(dut.overrun), framing_error=ctx.get(dut.framing_error))

    sim = Simulator(m)
    sim.add_clock(1 / 24e6, domain="sync")
    sim.add_clock(1 / 48e6, domain="capture", phase=3e-9)
    sim.add_testbench(send)
    sim.add_process(wire)
    sim.add_testbench(receive)
    sim.run()
    assert bytes(got) == data
    assert flags == {"overrun": 0, "framing_error": 0}
