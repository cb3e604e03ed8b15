"""The bus sampler (``gateware/bus_sampler.py``) in front of a frame sniffer, in the Amaranth
simulator, against buses whose data changes an explicit delay ``d`` after each bus clock edge,
with ``d`` swept across the whole window each standard allows (MII receive, MII transmit, RMII):
every frame must decode exactly (all fields, FCS and the first 16 bytes) at every delay, at both
ECPIX-5 capture clocks (200 MHz and 160 MHz, DDR inputs: 2 samples per cycle). A sampler told to
pick outside the window must fail on the same stimulus, so the sweep can see a wrong pick.

The bus model: value ``v[i]`` is the one the receiver takes at edge ``i`` (``e[i] = phase +
i * period``); it holds from ``e[i-1] + d[i-1]`` until ``e[i] + d[i]``. The windows of ``d``:
MII receive 10..30 ns (10 ns hold after the edge, 10 ns setup before the next of 40 ns), MII
transmit 0..25 ns (IEEE 802.3 §22.3), RMII 2..14 ns (RMII 1.2): the limits themselves included.
The bus clock runs 100 ppm off its nominal period and each frame starts at a new random phase of
it against the capture clock.
"""

import random
import re
import zlib
from pathlib import Path

import pytest
from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Fragment, Module, Signal
from amaranth.sim import Simulator

from latscope.gateware.bus_sampler import TIMINGS, BusSampler, BusTiming, plan_pick
from latscope.gateware.model_sniffer import (
    FLAG_FIELDS,
    FRAME_FIELDS,
    mii_nibbles,
    parse_frame,
    rmii_dibits,
)
from latscope.gateware.sniffer import FrameSniffer

HEADER_BYTES = 16
#: delay windows of the data after the bus clock's rising edge, ns (module docstring)
DELAYS = {"mii_rx": (10.0, 30.0), "mii_tx": (0.0, 25.0), "rmii": (2.0, 14.0)}


def _frame(rng, size):
    body = bytes(rng.randrange(256) for _ in range(size - 4))
    return body + zlib.crc32(body).to_bytes(4, "little")


def _cycles(kind, frame):
    """Bus cycles of one frame as (dv, er, data) tuples, then the idle gap."""
    if kind == "rmii":
        return [(dv, 0, d) for dv, d in rmii_dibits(frame)] + [(0, 0, 0)] * 48
    return mii_nibbles(frame) + [(0, 0, 0)] * 24


def _entry(entry):
    rec = entry.record
    out = {f: int(getattr(rec, f)) for f in FRAME_FIELDS}
    out.update({f: int(getattr(rec.flags, f)) for f in FLAG_FIELDS})
    out["header"] = int(entry.header)
    return out


def _expected(frame):
    out = parse_frame(frame)
    out["header"] = int.from_bytes(frame[:HEADER_BYTES].ljust(HEADER_BYTES, b"\0"), "little")
    return out


def run_bus(kind, frames, delays, *, capture_hz, pick=None, seed=0):
    """Frames on a bus of ``kind`` whose data changes ``delays[i]`` ns after edge ``i`` (one delay
    per bus cycle), sampled by a BusSampler at ``capture_hz`` with 2 lanes, into a FrameSniffer
    clocked by the regenerated clock through a register, as the board wires it. Before each
    frame one bus clock cycle is stretched by a random fraction of a period (the bus idle), so
    each frame meets the capture clock at another phase. Returns the sniffer's entries."""
    timing = TIMINGS[kind]
    bits = 2 if kind == "rmii" else 4
    width = 2 + bits
    values, starts = [(0, 0, 0)] * 8, []
    for f in frames:
        starts.append(len(values))
        values += _cycles(kind, f)
    values += [(0, 0, 0)] * 8
    assert len(delays) == len(values)
    packed = [dv | er << 1 | d << 2 for dv, er, d in values]

    m = Module()
    m.submodules.sampler = sampler = BusSampler(timing, width=width, capture_hz=capture_hz,
                                                lanes=2, pick=pick)
    m.domains.phy = ClockDomain("phy", reset_less=True)
    m.d.comb += ClockSignal("phy").eq(sampler.out_clk)
    pins = Signal(width)
    m.d.phy += pins.eq(sampler.out_data)
    sniffer = FrameSniffer(interface="rmii" if kind == "rmii" else "mii",
                           header_bytes=HEADER_BYTES)
    m.submodules.sniffer = DomainRenamer({"sync": "phy"})(sniffer)
    m.d.comb += [sniffer.dv.eq(pins[0]), sniffer.er.eq(pins[1]), sniffer.data.eq(pins[2:])]

    rng = random.Random(seed)
    period = timing.period_ns * (1 + 100e-6)
    edges = [rng.uniform(0, period)]
    for i in range(1, len(values) + 1):
        edges.append(edges[-1] + period + (rng.uniform(0, period) if i in starts else 0.0))
    changes = [e + d for e, d in zip(edges, delays, strict=False)]   # v[i+1] from changes[i]
    cycle = 1e9 / capture_hz
    end = edges[-1] + timing.period_ns
    got = []

    def level(t, state):
        """Bus clock and packed data at time ``t`` (calls in time order)."""
        while state[0] < len(changes) and changes[state[0]] <= t:
            state[0] += 1
        while state[1] + 1 < len(edges) and edges[state[1] + 1] <= t:
            state[1] += 1
        clk = int(edges[state[1]] <= t < edges[state[1]] + period / 2)
        return clk, packed[min(state[0], len(packed) - 1)]

    async def bench(ctx):
        state = [0, 0]
        n = 0
        was_valid = 0
        while n * cycle < end:
            clks, datas = 0, 0
            for lane in range(2):
                clk, value = level(n * cycle + lane * cycle / 2, state)
                clks |= clk << lane
                datas |= value << (lane * width)
            ctx.set(sampler.clk, clks)
            ctx.set(sampler.data, datas)
            await ctx.tick()
            valid = ctx.get(sniffer.frames.valid)
            if valid and not was_valid:
                got.append(_entry(ctx.get(sniffer.frames.payload)))
            was_valid = valid
            n += 1

    sim = Simulator(m)
    sim.add_clock(cycle * 1e-9, domain="sync")
    sim.add_testbench(bench)
    sim.run()
    return got


def _stimulus(kind, rng, *, sweep_steps=9, extremes=3, uniform=2, size=(60, 64, 90)):
    """Frames and per-cycle delays: one frame per delay of a sweep from the window's start to
    its end (limits included); then ``extremes`` frames whose delay is the window's start or end
    at random each cycle (so a value may hold only the guaranteed window: changed at the
    latest after one edge, again at the earliest after the next); then ``uniform`` frames with
    a delay uniform in the window each cycle."""
    lo, hi = DELAYS[kind]
    kinds = [lo + (hi - lo) * k / (sweep_steps - 1) for k in range(sweep_steps)]
    kinds += ["extremes"] * extremes + ["uniform"] * uniform
    frames = [_frame(rng, rng.choice(size)) for _ in kinds]
    delays = [lo] * 8
    for frame, how in zip(frames, kinds, strict=True):
        n = len(_cycles(kind, frame))
        if how == "extremes":
            delays += [rng.choice((lo, hi)) for _ in range(n)]
        elif how == "uniform":
            delays += [rng.uniform(lo, hi) for _ in range(n)]
        else:
            delays += [how] * n
    delays += [lo] * 8
    return frames, delays


@pytest.mark.parametrize("capture_hz", [200e6, 160e6], ids=["200MHz", "160MHz"])
@pytest.mark.parametrize("kind", ["mii_rx", "mii_tx", "rmii"])
def test_frames_decode_exactly_across_the_whole_delay_window(kind, capture_hz):
    """Every frame of :func:`_stimulus` (14 frames: 9 fixed delays, 3 at the extremes, 2
    uniform), each at another phase of the capture clock, decodes exactly: all record fields,
    a good FCS and the first 16 bytes. Expected: parse_frame on the same bytes."""
    rng = random.Random(f"{kind}{capture_hz}")
    frames, delays = _stimulus(kind, rng)
    got = run_bus(kind, frames, delays, capture_hz=capture_hz, seed=rng.randrange(1 << 30))
    assert got == [_expected(f) for f in frames]
    assert all(g["fcs_ok"] for g in got)


@pytest.mark.parametrize("kind,bad_pick", [("mii_tx", 0), ("rmii", 3), ("mii_rx", 5)])
def test_a_pick_outside_the_window_is_caught_by_the_sweep(kind, bad_pick):
    """The same stimulus with the sample taken where the standard does not guarantee the data
    (MII transmit 0..2.5 ns after the edge, RMII 7.5..10 ns, MII receive 12.5..15 ns): frames
    are lost or corrupted, so the test above would see a wrong pick."""
    rng = random.Random(3)
    frames, delays = _stimulus(kind, rng, sweep_steps=2, extremes=2, uniform=0, size=(60,))
    plan = plan_pick(TIMINGS[kind], 2.5, pick=bad_pick)
    assert plan.margin_ns < 0
    got = run_bus(kind, frames, delays, capture_hz=200e6, pick=bad_pick)
    assert got != [_expected(f) for f in frames]


def test_planned_picks_and_margins():
    """Margins by hand from the windows (module docstring of bus_sampler): the pick k lands in
    [e + k*T, e + (k+1)*T). T = 2.5 ns (200 MHz, DDR) and 3.125 ns (160 MHz, DDR). Exact to
    1e-9 ns."""
    table = {
        ("mii_rx", 2.5): (0, 10.0, 7.5),        # [0, 2.5) in [-10, 10]
        ("mii_tx", 2.5): (12, 5.0, 7.5),        # [30, 32.5) in [25, 40]
        ("rmii", 2.5): (7, 3.5, 2.0),           # [17.5, 20) in [14, 22]
        ("mii_rx", 3.125): (0, 10.0, 6.875),    # [0, 3.125)
        ("mii_tx", 3.125): (10, 6.25, 5.625),   # [31.25, 34.375)
        ("rmii", 3.125): (5, 1.625, 3.25),      # [15.625, 18.75)
    }
    for (kind, sample_ns), (pick, early, late) in table.items():
        plan = plan_pick(TIMINGS[kind], sample_ns)
        assert plan.pick == pick, (kind, sample_ns)
        assert plan.early_ns == pytest.approx(early, abs=1e-9)
        assert plan.late_ns == pytest.approx(late, abs=1e-9)


def test_docs_state_the_planned_margins():
    """docs/boards.md's margin table: per bus, the margins before/after at 200 MHz and 160 MHz
    are plan_pick's."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "boards.md").read_text()
    rows = {"mii_rx": "| MII receive (`RX_CLK`) |", "mii_tx": "| MII transmit (`TX_CLK`) |",
            "rmii": "| RMII (`REF_CLK`, both directions) |"}
    for kind, head in rows.items():
        (line,) = [ln for ln in text.splitlines() if ln.startswith(head)]
        margins = re.findall(r"\| ([\d.]+) / ([\d.]+) ns \|", line)
        stated = [float(x) for pair in margins for x in pair]
        planned = [x for t in (2.5, 3.125)
                   for x in (plan_pick(TIMINGS[kind], t).early_ns,
                             plan_pick(TIMINGS[kind], t).late_ns)]
        assert stated == pytest.approx(planned, abs=1e-9), kind


def test_regenerated_clock_leaves_the_data_settled():
    """The sniffer's register sees out_data changed one capture cycle before its clock edge and
    unchanged for at least ``hold_ns`` after it: RMII at 160 MHz, the tightest, keeps > 10 ns."""
    s = BusSampler(TIMINGS["rmii"], width=6, capture_hz=160e6, lanes=2)
    Fragment.get(s, None)
    assert s.hold_ns == pytest.approx(20 - 3.125 - 6.25)
    assert s.high_cycles == 1
    s = BusSampler(TIMINGS["mii_tx"], width=5, capture_hz=200e6, lanes=2)
    Fragment.get(s, None)
    assert s.high_cycles == 3 and s.hold_ns == pytest.approx(40 - 2.5 - 5)


@pytest.mark.parametrize("kwargs,message", [
    (dict(timing="rmii", width=6, capture_hz=200e6), "Timing must be a BusTiming, not 'rmii'"),
    (dict(timing=TIMINGS["rmii"], width=0, capture_hz=200e6), "Width must be a positive"),
    (dict(timing=TIMINGS["rmii"], width=6, capture_hz=200e6, lanes=4), "Lanes must be 1 or 2"),
    (dict(timing=TIMINGS["rmii"], width=6, capture_hz=100e6, lanes=1),
     "Capture clock must sample RMII with a margin, not 100 MHz x 1 lanes"),
    (dict(timing=TIMINGS["rmii"], width=6, capture_hz=200e6, pick=-1), "Pick must be a non-neg"),
])
def test_constructor_validates(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        BusSampler(**kwargs)
    assert isinstance(TIMINGS["rmii"], BusTiming)
