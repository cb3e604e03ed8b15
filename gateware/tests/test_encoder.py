"""The encoder against the reference model (:class:`latscope.gateware.model_stream.LinkModel`):
random entries in, the same units out, byte for byte, under random backpressure."""

import random

import pytest
from amaranth.sim import Simulator

from latscope.gateware.encoder import Encoder
from latscope.gateware.encoder_pipelined import PipelinedEncoder
from latscope.gateware.model_stream import ENTRY_RESET, Entry, LinkModel, pack_entry
from latscope.gateware.protocol import EntryKind


def random_entries(rng, n, *, channels, lanes, counter_width):
    wrap = 1 << counter_width
    entries, cycle = [], 0
    for _ in range(n):
        r = rng.random()
        cycle += rng.choice([0, 1, 2, 7, 300, wrap // 3]) + 1
        if r < 0.08:
            entries.append(Entry(EntryKind.TICK, cycle % wrap))
        elif r < 0.14:
            entries.append(Entry(EntryKind.OVERFLOW, cycle % wrap,
                                 count=rng.randrange(1, 1 << 40), span=rng.randrange(wrap)))
        elif r < 0.16:
            entries.append(Entry(ENTRY_RESET, 0))
            cycle = 0
        else:
            bits = channels * lanes
            entries.append(Entry(EntryKind.EVENTS, cycle % wrap, rng.randrange(1, 1 << bits),
                                 rng.randrange(1 << bits)))
    return entries


def run_encoder(entries, *, channels, lanes, counter_width, seed, high_water=0, status=0,
                time_width=64, encoder=Encoder, cycles=None, link_bytes=1):
    extra = {} if link_bytes == 1 else {"link_bytes": link_bytes}
    dut = encoder(channels=channels, lanes=lanes, counter_width=counter_width,
                  time_width=time_width, **extra)
    rng = random.Random(seed)
    units, current = [], bytearray()
    params = dict(channels=channels, lanes=lanes, counter_width=counter_width)
    done = []

    async def source(ctx):
        ctx.set(dut.hb_high_water, high_water)
        ctx.set(dut.hb_status.as_value(), status)
        for entry in entries:
            ctx.set(dut.entries.payload.as_value(), pack_entry(entry, **params))
            ctx.set(dut.entries.valid, 1)
            await ctx.tick().until(dut.entries.ready)
            ctx.set(dut.entries.valid, 0)
            if rng.random() < 0.3:
                await ctx.tick().repeat(rng.randrange(1, 4))
        await ctx.tick().until(dut.idle)
        done.append(True)

    async def sink(ctx):
        meta = None
        while not done:
            ctx.set(dut.units.ready, rng.random() < 0.6)
            _, _, valid, ready, item = await ctx.tick().sample(
                dut.units.valid, dut.units.ready, dut.units.payload)
            if not (valid and ready):
                continue
            if item.first:
                assert not current
                meta = (bool(item.heartbeat), int(item.base_time), int(item.event_index))
                length = int(item.length)
            current.append(int(item.data) & 0xFF)
            if link_bytes == 2 and item.two:
                current.append(int(item.data) >> 8)
            if item.last:
                assert len(current) == length
                units.append(meta[:1] + (bytes(current),) + meta[1:] + (bool(item.flush),))
                current.clear()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink, background=True)
    sim.run()
    return units


@pytest.mark.parametrize("channels,lanes,counter_width,seed,time_width", [
    (8, 2, 12, 1, 64),     # the 12-bit counter wraps every few entries
    (3, 1, 40, 2, 64),     # big gaps: TIME tokens
    (2, 4, 20, 3, 64),
    # 48-bit time (the iCEBreaker's): the same bytes while the time stays below 2**48 ticks
    # (150 entries at most 2**40 ticks apart reach at most 1.6e14 < 2.8e14)
    (3, 1, 40, 2, 48),
    (8, 2, 24, 4, 48),
])
def test_units_match_model(channels, lanes, counter_width, seed, time_width):
    rng = random.Random(seed)
    entries = random_entries(rng, 150, channels=channels, lanes=lanes,
                             counter_width=counter_width)
    model = LinkModel(channels=channels, lanes=lanes, counter_width=counter_width,
                      record_units=True)
    model.run(entries, fifo_high_water=77, status=0b101)
    units = run_encoder(entries, channels=channels, lanes=lanes, counter_width=counter_width,
                        seed=seed, high_water=77, status=0b101, time_width=time_width)
    assert units == model.units
    kinds = {u[1][0] >> 4 for u in units if not u[0]}
    if counter_width == 40:
        assert 0xC in kinds        # TIME tokens were exercised
    assert 0xD in kinds            # OVERFLOW tokens were exercised


@pytest.mark.parametrize("channels,lanes,counter_width,seed,time_width,link_bytes", [
    (8, 2, 12, 1, 64, 1), (3, 1, 40, 2, 64, 1), (2, 4, 20, 3, 64, 1), (3, 1, 40, 2, 48, 1),
    (8, 2, 24, 4, 48, 1),
    (8, 4, 48, 5, 64, 1),     # the ECPIX-5's shape
    # two bytes per cycle (the Ethernet build's link path): the same units, byte for byte
    (8, 2, 12, 1, 64, 2), (3, 1, 40, 2, 64, 2), (8, 4, 48, 5, 64, 2),
])
def test_pipelined_units_match_model(channels, lanes, counter_width, seed, time_width,
                                     link_bytes):
    # The pipelined encoder (gateware/encoder_pipelined.py) against the same reference, on the
    # same random entries and backpressure as the two-stage encoder above.
    rng = random.Random(seed)
    entries = random_entries(rng, 150, channels=channels, lanes=lanes,
                             counter_width=counter_width)
    model = LinkModel(channels=channels, lanes=lanes, counter_width=counter_width,
                      record_units=True)
    model.run(entries, fifo_high_water=77, status=0b101)
    units = run_encoder(entries, channels=channels, lanes=lanes, counter_width=counter_width,
                        seed=seed, high_water=77, status=0b101, time_width=time_width,
                        encoder=PipelinedEncoder, link_bytes=link_bytes)
    assert units == model.units
    kinds = {u[1][0] >> 4 for u in units if not u[0]}
    if counter_width == 40:
        assert 0xC in kinds        # TIME tokens were exercised
    assert 0xD in kinds            # OVERFLOW tokens were exercised


@pytest.mark.parametrize("encoder", [Encoder, PipelinedEncoder])
def test_status_outputs_follow_entries(encoder):
    entries = [Entry(EntryKind.EVENTS, 5, 0b11, 0b01), Entry(EntryKind.OVERFLOW, 9, count=4),
               Entry(EntryKind.TICK, 12)]
    dut = encoder(channels=2, lanes=1, counter_width=8)
    seen = {}

    async def bench(ctx):
        ctx.set(dut.units.ready, 1)
        for entry in entries:
            ctx.set(dut.entries.payload.as_value(),
                    pack_entry(entry, channels=2, lanes=1, counter_width=8))
            ctx.set(dut.entries.valid, 1)
            await ctx.tick().until(dut.entries.ready)
            ctx.set(dut.entries.valid, 0)
        await ctx.tick().until(dut.idle)
        seen.update(time=ctx.get(dut.time), events=ctx.get(dut.events), lost=ctx.get(dut.lost),
                    epoch=ctx.get(dut.epoch))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # two events at cycle 5, four lost, last entry at cycle 12 with one lane: time 12 ticks
    assert seen == {"time": 12, "events": 2, "lost": 4, "epoch": 0}


@pytest.mark.parametrize("edges", [0b1, 0b11])
def test_pipelined_encoder_forms_one_event_per_cycle(edges):
    # Back-to-back entries one cycle apart (one-byte EVENT tokens: deltas below 8 ticks), the
    # framer always ready: every cycle gives one byte, so one event per link cycle, whether each
    # entry holds one edge or two.
    n = 200
    per_entry = bin(edges).count("1")
    entries = [Entry(EntryKind.EVENTS, 10 + k, edges, edges * (k & 1)) for k in range(n)]
    dut = PipelinedEncoder(channels=2, lanes=1, counter_width=16)
    seen = {"bytes": 0, "first": None, "last": None}

    async def source(ctx):
        for entry in entries:
            ctx.set(dut.entries.payload.as_value(),
                    pack_entry(entry, channels=2, lanes=1, counter_width=16))
            ctx.set(dut.entries.valid, 1)
            await ctx.tick().until(dut.entries.ready)
        ctx.set(dut.entries.valid, 0)
        await ctx.tick().until(dut.idle)

    async def sink(ctx):
        ctx.set(dut.units.ready, 1)
        cycle = 0
        async for _, _, valid in ctx.tick().sample(dut.units.valid):
            cycle += 1
            if valid:
                seen["bytes"] += 1
                seen["first"] = seen["first"] or cycle
                seen["last"] = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink, background=True)
    sim.run()
    # the first event's delta (10 ticks) takes a continuation byte; every other one is 1 byte
    assert seen["bytes"] == n * per_entry + 1
    assert seen["last"] - seen["first"] + 1 == seen["bytes"]     # no idle cycle in between


@pytest.mark.parametrize("kwargs,message", [
    (dict(channels=9), "Channel count must be an integer in 1..8, not 9"),
    (dict(channels=True), "Channel count must be an integer in 1..8, not True"),
    (dict(lanes=0), "Lane count must be an integer in 1..8, not 0"),
    (dict(counter_width=64), "Counter width must be an integer in 8..63, not 64"),
    (dict(time_width=40), "Time width must be an integer in 48..64, not 40"),
])
@pytest.mark.parametrize("encoder", [Encoder, PipelinedEncoder])
def test_constructor_validation(kwargs, message, encoder):
    with pytest.raises(TypeError, match=message.replace(".", r"\.")):
        encoder(**kwargs)
