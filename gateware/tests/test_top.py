"""The whole core in the Amaranth simulator: pins and commands in, bytes out, decoded by the host
decoder. Expected event times come from the stimulus itself (an edge presented in capture clock
cycle ``k`` at lane ``l`` is tick ``k * lanes + l``; the front end's offset is 0 ticks), so these
tests check the capture front end, the FIFO crossing, the encoder, the framer and the decoder
together, exactly."""

import random

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Module, ResetSignal, Value
from amaranth.sim import Simulator

from latscope.capture.link.stream import StreamDecoder
from latscope.gateware.codec import parse_identify
from latscope.gateware.eth.model import DEFAULT_NET
from latscope.gateware.linkword import word_bytes
from latscope.gateware.protocol import EthSpeed, Opcode, Status
from latscope.gateware.stream_bench import send_commands
from latscope.gateware.top import LatscopeCore

CH, LANES = 3, 2
NAMES = ["rx_dv", "tx_en", "m_isr"]


def core(**kwargs):
    params = dict(channels=CH, lanes=LANES, counter_width=16, max_glitch=2, heartbeat_shift=8,
                  fifo_depth=16, capture_hz=100_000_000, channel_names=NAMES, max_payload=64,
                  board="sim")
    params.update(kwargs)
    return LatscopeCore(**params)


class OneClock(Elaboratable):
    """Drives the core's ``capture`` domain from ``sync``, as a board with one clock does for
    ``async_fifo=False``."""

    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = self.dut
        m.domains.capture = capture = ClockDomain()
        m.d.comb += [capture.clk.eq(ClockSignal("sync")), capture.rst.eq(ResetSignal("sync"))]
        return m


def stimulus(rng, n_edges, *, start_cycle, gap=(1, 40)):
    """Random level changes: list of (tick, channel, new level), ticks relative to power-up."""
    tick, levels, edges = start_cycle * LANES, [0] * CH, []
    for _ in range(n_edges):
        tick += rng.randrange(*gap)
        ch = rng.randrange(CH)
        levels[ch] ^= 1
        edges.append((tick, ch, levels[ch]))
    return edges


def run(dut, commands, *, edges=(), cycles, tx_stall=None, clocks=(10e-9, 13e-9),
        after_command=None, top=None, lanes=LANES):
    """Simulate: ``commands`` are sent first (each waits for its reply), then ``edges`` play on
    the pins from their ticks on (``top``: a design holding ``dut``, simulated instead of it).
    Returns the decoded result and the bytes."""
    out = bytearray()
    state = {"replies": 0, "go": False}

    async def host(ctx):
        await send_commands(ctx, dut, commands, state, after_command=after_command)
        state["go"] = True

    async def sink(ctx):
        decoder = StreamDecoder()
        cycle = 0
        async for _, _, valid, ready, word in ctx.tick("sync").sample(
                dut.tx.valid, dut.tx.ready, Value.cast(dut.tx.payload)):
            cycle += 1
            stalled = tx_stall is not None and tx_stall[0] <= cycle < tx_stall[1]
            ctx.set(dut.tx.ready, not stalled)
            if valid and ready:
                data = word_bytes(word, dut.link_bytes)
                out.extend(data)
                state["replies"] += len(decoder.feed(data).replies)

    async def pins(ctx):
        level_of = [0] * CH
        pending = list(edges)
        cycle = 0
        while not state["go"]:
            await ctx.tick("capture")
            cycle += 1
        assert not pending or pending[0][0] // lanes > cycle, "stimulus starts too early"
        while cycle < cycles:
            samples = 0
            for lane in range(lanes):
                while pending and pending[0][0] <= cycle * lanes + lane:
                    _, ch, level = pending.pop(0)
                    level_of[ch] = level
                for ch in range(CH):
                    samples |= level_of[ch] << (lane * CH + ch)
            ctx.set(dut.samples, samples)
            await ctx.tick("capture")
            cycle += 1

    if clocks[1] is None:
        sim = Simulator(OneClock(dut))
        sim.add_clock(clocks[0])
    else:
        sim = Simulator(top or dut)
        sim.add_clock(clocks[0], domain="capture")
        sim.add_clock(clocks[1], domain="sync")
    sim.add_testbench(host)
    sim.add_process(sink)
    sim.add_testbench(pins)
    sim.run()
    return StreamDecoder().feed(bytes(out)), bytes(out)


def expected_events(edges, rise_en=0b111, fall_en=0b111):
    keep = [(t, ch, lv) for t, ch, lv in edges if (rise_en if lv else fall_en) >> ch & 1]
    return [t for t, _, _ in keep], [ch for _, ch, _ in keep], [bool(lv) for _, _, lv in keep]


def assert_all_events(result, edges):
    """Both set-up commands accepted and every edge decoded at its tick, none lost."""
    assert [r.status for r in result.replies] == [Status.OK, Status.OK]
    times, channels, rising = expected_events(edges)
    assert result.time.tolist() == times
    assert result.channel.tolist() == channels
    assert result.rising.tolist() == rising
    assert result.losses == [] and result.frames_bad == result.frames_missing == 0


def test_commands_and_events_two_clocks():
    dut = core(fifo_depth=32)   # the bursts below need more than 16 entries
    edges = stimulus(random.Random(1), 120, start_cycle=600)
    commands = [(Opcode.IDENTIFY, b""), (Opcode.SET_EDGES, b"\x07\x00\x05\x00"),
                (Opcode.ARM, b"\x01"), (Opcode.STATUS, b""), (Opcode.SET_GLITCH, b"\x07\x01")]
    result, _ = run(dut, commands, edges=edges, cycles=edges[-1][0] // LANES + 700)
    assert [(r.command_seq, r.opcode, r.status) for r in result.replies] == [
        (0, Opcode.IDENTIFY, Status.OK), (1, Opcode.SET_EDGES, Status.OK),
        (2, Opcode.ARM, Status.OK), (3, Opcode.STATUS, Status.OK),
        (4, Opcode.SET_GLITCH, Status.BAD_ARGUMENT)]
    info = parse_identify(result.replies[0].data)
    assert info["channel_names"] == NAMES and info["tick_hz"] == 200_000_000
    assert info["fifo_depth"] == 32 and info["heartbeat_shift"] == 8
    status = np.frombuffer(result.replies[3].data, result.heartbeats.dtype)[0]
    assert status["status"] == 1              # armed; no Ethernet link (eth_present 0)
    times, channels, rising = expected_events(edges, rise_en=0b111, fall_en=0b101)
    assert result.time.tolist() == times
    assert result.channel.tolist() == channels
    assert result.rising.tolist() == rising
    assert result.frames_bad == result.frames_missing == result.bytes_skipped == 0
    assert result.losses == []
    assert len(result.heartbeats) >= 4
    # one heartbeat per 2**8 cycles, written in the first cycle without an event from then on
    hb = result.heartbeats["time"].astype(np.int64)
    period = 256 * LANES
    assert np.array_equal(hb // period, np.arange(len(hb)) + hb[0] // period)
    assert np.all(hb % period < 16)


@pytest.mark.slow
def test_pipelined_core_carries_30m_events_per_s_at_the_boards_clocks():
    # The ECPIX-5's clocks (capture 200 MHz, link 48 MHz) and its pipelined encoder, the link
    # taking a byte every link cycle (the Ethernet streamer's side): a sustained 30 M events/s
    # (clusters of three edges 2 ticks apart every 40 ticks, so 4 bytes per 3 events: 40 MB/s of
    # tokens), 4,500 events over 150 us. FIFO and frames as on the board (1,024 entries, 1,024
    # token bytes): a heartbeat closes the EVENTS frame being filled and waits for the other
    # buffer, so the encoder may stall for a whole frame's send time (~1,050 link cycles, ~650
    # entries at this rate), which the FIFO must hide. Every event decoded by the host decoder
    # at its stimulus tick, none lost. A heartbeat every 2**14 capture cycles (the board:
    # 2**20), and the run lasts until the one after the last event, which closes the last
    # EVENTS frame, and two frames' send time after it. (The sustained figure, from runs ten
    # times what the buffers hide: the links bench, latscope/bench/linkbench.py.)
    shift = 14
    dut = core(pipelined_encoder=True, capture_hz=200_000_000, max_payload=1024,
               counter_width=24, heartbeat_shift=shift, fifo_depth=1024)
    ticks_per_s = 200e6 * LANES
    start, levels, edges = 600 * LANES, [0] * CH, []
    for k in range(1500):
        for ch in range(CH):
            levels[ch] ^= 1
            edges.append((start + 40 * k + 2 * ch, ch, levels[ch]))
    rate = len(edges) / ((edges[-1][0] - edges[0][0] + 40 - 4) / ticks_per_s)
    assert 29.9e6 < rate < 30.1e6
    commands = [(Opcode.SET_EDGES, b"\x07\x00\x07\x00"), (Opcode.ARM, b"\x01")]
    last_cycle = edges[-1][0] // LANES
    result, _ = run(dut, commands, edges=edges,
                    cycles=((last_cycle >> shift) + 1 << shift) + 10_000,
                    clocks=(5e-9, 1 / 48e6))
    assert_all_events(result, edges)


@pytest.mark.slow
def test_two_byte_path_carries_30m_events_per_s_worst_case_at_the_boards_clocks():
    # The Ethernet build's link path (pipelined encoder, framer and tx two bytes per link cycle)
    # at the ECPIX-5's clocks and tick (4 lanes at 200 MHz: 1.25 ns), the link taking a word
    # every link cycle (the Ethernet streamer's FIFO, read at 125 MHz a byte per cycle). The
    # worst case of the links bench: an edge every 26 ticks (30.8 M events/s) on the next
    # channel in turn, so every delta needs a 2-byte EVENT token (16..1023 ticks): 61.5 MB/s of
    # tokens, more than a byte per 48 MHz link cycle carries. 20,000 events over 650 us: more
    # than the FIFO (1,024 entries) and the framer's two buffers (1,024 bytes each) could hide
    # at the byte path's rate (~23.4 M events/s on this stimulus: they fill in ~290 us), so a
    # lossless run needs the two-byte path. Every event decoded at its stimulus tick, none lost.
    shift, lanes, period, n = 14, 4, 26, 20_000
    dut = core(pipelined_encoder=True, link_bytes=2, lanes=lanes, capture_hz=200_000_000,
               max_payload=1024, counter_width=24, heartbeat_shift=shift, fifo_depth=1024)
    ticks_per_s = 200e6 * lanes
    start, levels, edges = 600 * lanes, [0] * CH, []
    for k in range(n):
        levels[k % CH] ^= 1
        edges.append((start + period * k, k % CH, levels[k % CH]))
    span_s = (edges[-1][0] - edges[0][0] + period) / ticks_per_s
    assert 30.5e6 < n / span_s < 31e6
    commands = [(Opcode.SET_EDGES, b"\x07\x00\x07\x00"), (Opcode.ARM, b"\x01")]
    last_cycle = edges[-1][0] // lanes
    result, data = run(dut, commands, edges=edges, lanes=lanes,
                       cycles=((last_cycle >> shift) + 1 << shift) + 10_000,
                       clocks=(5e-9, 1 / 48e6))
    assert_all_events(result, edges)
    # the stream the run needed: more than the byte path's 48 MB/s (2 B/event of tokens plus
    # the frames' headers and CRCs)
    assert len(data) / n * (n / span_s) > 1.25 * 48e6


def test_overflow_is_counted_exactly():
    dut = core(fifo_depth=4)
    edges = stimulus(random.Random(2), 150, start_cycle=400, gap=(1, 6))
    result, _ = run(dut, [(Opcode.ARM, b"\x01")], edges=edges,
                    cycles=edges[-1][0] // LANES + 1500, tx_stall=(300, 900))
    lost = sum(r.lost for r in result.losses if r.cause == "overflow")
    assert lost > 0 and result.overflow_lost_events == lost
    assert len(result.time) + lost == len(edges)
    assert result.link_lost_events == 0
    assert set(zip(result.time.tolist(), result.channel.tolist(), strict=True)) \
        <= {(t, ch) for t, ch, _ in edges}
    for record in result.losses:
        assert record.span > 0 and record.first_time >= edges[0][0]
    assert result.heartbeats["lost"][-1] == lost


def test_reset_time_single_clock():
    """async_fifo=False, one clock for both domains; RESET_TIME restarts time and counts."""
    dut = core(async_fifo=False)
    edges = stimulus(random.Random(3), 40, start_cycle=900)
    commands = [(Opcode.ARM, b"\x01"), (Opcode.RESET_TIME, b"")]
    result, _ = run(dut, commands, edges=edges, cycles=edges[-1][0] // LANES + 700,
                    clocks=(10e-9, None))
    assert [r.status for r in result.replies] == [Status.OK, Status.OK]
    assert result.resets == 1 and result.losses == []
    assert result.heartbeats["epoch"][-1] == 1
    times, channels, _ = expected_events(edges)
    got = result.time
    assert result.channel.tolist() == channels
    # the same edges, shifted by the reset point: the offsets between events are unchanged
    assert np.array_equal(np.diff(got), np.diff(times))
    assert 0 < got[0] < times[0]


def test_fast_forward_ports():
    dut = core(async_fifo=False, fast_forward=True)
    assert {"ff_skip", "quiescent", "ff_limit"} <= set(dut.signature.members)
    out = bytearray()
    trace = []

    async def bench(ctx):
        ctx.set(dut.tx.ready, 1)
        for cycle in range(200):
            quiescent, limit = ctx.get(dut.quiescent), ctx.get(dut.ff_limit)
            trace.append(quiescent)
            if cycle == 120:
                assert quiescent == 1 and 0 < limit < 256
                ctx.set(dut.ff_skip, limit)       # jump to just before the next heartbeat
            *_, valid, byte = await ctx.tick().sample(dut.tx.valid, dut.tx.payload)
            ctx.set(dut.ff_skip, 0)
            if valid:
                out.append(byte)

    sim = Simulator(OneClock(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # quiescent only once the power-up heartbeat (cycle 0) has been sent and the link is idle
    assert trace[0] == 0 and trace[120] == 1
    result = StreamDecoder().feed(bytes(out))
    # the heartbeat of cycle 256 (512 ticks) came out within 200 clock cycles, thanks to the skip
    assert result.heartbeats["time"].tolist() == [0, 512]


@pytest.mark.parametrize("kwargs,message", [
    (dict(fifo_depth=12), "FIFO depth must be a power of two >= 4, not 12"),
    (dict(async_fifo=1), "async_fifo must be a bool, not 1"),
    (dict(pipelined_encoder=1), "pipelined_encoder must be a bool, not 1"),
    (dict(fast_forward="yes"), "fast_forward must be a bool, not 'yes'"),
])
def test_constructor_validation(kwargs, message):
    with pytest.raises(TypeError, match=message):
        core(**kwargs)


class EthStatusDriver(Elaboratable):
    """The core with its ``eth_status`` input held at ``value`` (what the board's in-band status
    reader presents; ``gateware/tests/test_eth_inband.py`` tests the reader)."""

    def __init__(self, dut, value):
        self.dut, self.value = dut, value

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = self.dut
        m.d.comb += self.dut.eth_status.as_value().eq(self.value)
        return m


@pytest.mark.parametrize("link,speed,full_duplex", [(1, EthSpeed.MBPS_1000, 1),
                                                    (1, EthSpeed.MBPS_100, 0), (0, 0, 0)])
def test_status_reports_the_ethernet_link(link, speed, full_duplex):
    """An Ethernet core's STATUS carries the PHY's link state in HeartbeatStatus (bit 3
    eth_present, 4 eth_link, 5-6 eth_speed, 7 eth_full_duplex: docs/stream-format.md), from the
    in-band status nibble's bits (RXD[0] link, RXD[2:1] speed, RXD[3] duplex)."""
    dut = core(net=DEFAULT_NET)
    nibble = link | speed << 1 | full_duplex << 3
    result, _ = run(dut, [(Opcode.STATUS, b"")], cycles=20, top=EthStatusDriver(dut, nibble))
    (reply,) = result.replies
    assert (reply.opcode, reply.status) == (Opcode.STATUS, Status.OK)
    status = np.frombuffer(reply.data, result.heartbeats.dtype)[0]["status"]
    assert status == 1 << 3 | link << 4 | speed << 5 | full_duplex << 7
