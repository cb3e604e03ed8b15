"""RGMII in-band status into the link domain (``gateware/eth/inband.py``) against a PHY model: the
status nibble the RGMII v2.0 specification puts on RXD[3:0] while RX_CTL is idle, frames and
carrier events in between, the receive clock at each speed's rate (125, 25, 2.5 MHz) and
stopped. Expected values are the model's own statuses."""

import random

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from latscope.gateware.eth.inband import (
    SPEED_MBPS,
    STALE_CYCLES,
    InbandStatus,
    inband_nibble,
)

LINK_PERIOD = 1 / 48e6
#: Receive clock period per speed (RGMII v2.0: 125 MHz, 25 MHz, 2.5 MHz).
RX_PERIOD = {1000: 8e-9, 100: 40e-9, 10: 400e-9}


def test_nibble_encoding():
    """RXD[0] link, RXD[2:1] speed (00 10, 01 100, 10 1000 Mb/s), RXD[3] full duplex."""
    assert inband_nibble(link=1, speed_mbps=1000, full_duplex=1) == 0b1101
    assert inband_nibble(link=1, speed_mbps=100, full_duplex=0) == 0b0011
    assert inband_nibble(link=0, speed_mbps=10, full_duplex=0) == 0
    assert SPEED_MBPS == {0: 10, 1: 100, 2: 1000}
    with pytest.raises(ValueError, match="Stale cycles must be an integer >= 16, not 4"):
        InbandStatus(stale_cycles=4)


def phy_cycles(rng, statuses, cycles_each):
    """Receive-lane pairs ``(rise, fall)`` (RXD | RX_CTL << 4) of a PHY that sends each status in
    turn while idle, with frames (RX_CTL high, random data) and false-carrier events (RX_CTL high
    on the falling edge only, RXD 0xE) in between; each status's run ends idle, then ``None``."""
    out = []
    for status in statuses:
        start = len(out)
        while len(out) - start < cycles_each or out[-1] != (status, status):
            kind = rng.random()
            if kind < 0.2:          # a frame: data that would read as any status
                for _ in range(rng.randrange(8, 40)):
                    out.append((rng.randrange(16) | 16, rng.randrange(16) | 16))
            elif kind < 0.25:       # false carrier (RGMII: RX_DV 0, RX_ER 1, RXD 0x0E)
                out.extend([(0x0E, 0x0E | 16)] * rng.randrange(1, 4))
            else:
                out.extend([(status, status)] * rng.randrange(2, 12))
        out.append(None)            # a marker: the status above has been sent
    return out


def run(speed, statuses, *, stop_after=False, stale_cycles=256):
    """Drive the model's lanes on a receive clock at ``speed``; return, per status, the link
    domain's status once it was sent (read 8 receive + 8 link cycles later), every value the link
    domain showed, and (``stop_after``) the status after the receive clock stopped."""
    rng = random.Random(speed)
    dut = InbandStatus(stale_cycles=stale_cycles)
    m = Module()
    m.submodules.dut = dut
    m.domains.eth_rx = eth_rx = ClockDomain("eth_rx")
    m.domains.sync = ClockDomain("sync")
    lanes = phy_cycles(rng, statuses, 64)
    half = RX_PERIOD[speed] / 2
    shown, after, done = [], [], []
    state = {"running": True}

    async def rx_clock(ctx):
        while state["running"]:
            ctx.set(eth_rx.clk, 1)
            await ctx.delay(half)
            ctx.set(eth_rx.clk, 0)
            await ctx.delay(half)

    async def phy(ctx):
        for item in lanes:
            if item is None:
                await ctx.delay(8 * RX_PERIOD[speed] + 8 * LINK_PERIOD)
                after.append(ctx.get(dut.status.as_value()))
                continue
            await ctx.posedge(eth_rx.clk)
            ctx.set(dut.rise, item[0])
            ctx.set(dut.fall, item[1])
        if stop_after:
            state["running"] = False
            await ctx.delay((stale_cycles + 8) * LINK_PERIOD)
            after.append(ctx.get(dut.status.as_value()))
        state["running"] = False
        done.append(True)

    async def watch(ctx):
        while not done:
            value = ctx.get(dut.status.as_value())
            if not shown or shown[-1] != value:
                shown.append(value)
            await ctx.tick("sync")

    sim = Simulator(m)
    sim.add_clock(LINK_PERIOD, domain="sync")
    sim.add_process(rx_clock)
    sim.add_testbench(phy)
    sim.add_testbench(watch, background=True)
    sim.run()
    return after, shown


@pytest.mark.parametrize("speed", [1000, 100, 10])
def test_link_domain_shows_what_the_phy_says(speed):
    """At each receive clock rate: the link domain shows every status the PHY sent while idle,
    in order, and nothing else (not the frames' data, not the false-carrier code); before the
    first transfer it shows no link; when the receive clock stops the link reads down."""
    statuses = [inband_nibble(link=1, speed_mbps=speed, full_duplex=1),
                inband_nibble(link=0, speed_mbps=speed, full_duplex=1),
                inband_nibble(link=1, speed_mbps=speed, full_duplex=0)]
    after, shown = run(speed, statuses, stop_after=True)
    assert after[:3] == statuses
    # the stopped clock: same speed and duplex, link 0
    assert after[3] == statuses[2] & ~1
    assert shown[0] == 0
    assert [v for v in shown[1:]] == [*statuses, statuses[2] & ~1]


def test_stale_default_is_long_enough_for_the_slowest_clock():
    """The default staleness limit spans many transfers at 10 Mb/s's 2.5 MHz receive clock (a
    transfer: the request through two link flip-flops and the acknowledge back through two
    receive flip-flops, under 8 receive cycles)."""
    assert STALE_CYCLES * LINK_PERIOD > 100 * 8 * RX_PERIOD[10]
