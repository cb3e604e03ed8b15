"""The DUT's MII/RMII bus sampled on the capture clock, where the interface's timing guarantees the
data is valid, for the frame sniffers.

# Ref: IEEE Std 802.3-2018 §22.3 (MII signal timing: TXD/TX_EN/TX_ER change 0..25 ns after
# TX_CLK rises; RXD/RX_DV/RX_ER valid from 10 ns before to 10 ns after RX_CLK rises);
# RMII Specification rev. 1.2, AC characteristics (outputs 2..14 ns after REF_CLK rises, inputs
# need 4 ns setup and 2 ns hold around it).

The bus clocks enter on general-purpose pins: clocking the sniffers' input registers with them
directly samples each bit one clock insertion delay (routing into the global network, several
ns and untimed) after the edge, which on RMII (2 ns hold) or MII transmit (data may change right
after the edge) can catch the next value. So the bus clock is a *data* input here, sampled with
the data bits on the capture clock (:class:`BusSampler`, ``lanes`` samples per capture cycle:
DDR input registers give 2), and each data sample is taken a fixed number ``k`` of samples after
the first sample that saw the bus clock high: the pick lands in ``[edge + k*T, edge + (k+1)*T)``
for a sample spacing ``T``, whatever the phase between the two clocks. :func:`plan_pick` chooses
``k`` to put that interval in the middle of the interval where the standard guarantees the data
stable (:data:`TIMINGS`) and states the margin on each side.

The picked values are held in capture-domain registers and a bus clock is regenerated from a
capture-domain flip-flop that rises one capture cycle after they change and stays high for
about half a bus period: the sniffers run on it unchanged, and their input registers see data
that changed one capture period before their clock edge and does not change again for at least
a bus period less one sample and one capture period after it (:attr:`BusSampler.hold_ns`).
The data registers of that domain are a crossing of kind ``forwarded_clock``
(:mod:`latscope.gateware.crossings`).
"""

import math
from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .checks import rejected

__all__ = ["BusTiming", "TIMINGS", "PickPlan", "plan_pick", "BusSampler"]


@dataclass(frozen=True)
class BusTiming:
    """Where one interface's data is stable, relative to the bus clock's rising edge ``e``.

    The value the receiver takes at edge ``e + period_ns`` (MII transmit, RMII) or at ``e``
    (MII receive) is stable from ``e + after_ns`` to ``e + before_ns``.
    """
    name: str
    period_ns: float
    after_ns: float
    before_ns: float
    source: str


#: The interfaces' guaranteed data-valid windows (module docstring, Ref).
TIMINGS = {
    # RXD valid 10 ns before to 10 ns after RX_CLK rises (25 MHz)
    "mii_rx": BusTiming("MII receive", 40.0, -10.0, 10.0,
                        "IEEE 802.3 §22.3: 10 ns setup, 10 ns hold at RX_CLK rising"),
    # TXD changes 0..25 ns after TX_CLK rises; the PHY takes it at the next rising edge
    "mii_tx": BusTiming("MII transmit", 40.0, 25.0, 40.0,
                        "IEEE 802.3 §22.3: TXD valid 0..25 ns after TX_CLK rising"),
    # outputs 2..14 ns after REF_CLK rises (50 MHz); they hold 2 ns past the next edge
    "rmii": BusTiming("RMII", 20.0, 14.0, 22.0,
                      "RMII 1.2: outputs 2..14 ns after REF_CLK rising"),
}


@dataclass(frozen=True)
class PickPlan:
    """Which sample after the detected edge is taken, and its margins, ns.

    ``pick``: samples after the first one that saw the bus clock high. ``early_ns``: from the
    start of the stable interval to the earliest the pick can fall; ``late_ns``: from the latest
    it can fall to the end of the interval. Both before the skew between the clock's and the
    data's input paths inside the FPGA is taken off.
    """
    pick: int
    sample_ns: float
    early_ns: float
    late_ns: float

    @property
    def margin_ns(self):
        return min(self.early_ns, self.late_ns)


def plan_pick(timing, sample_ns, *, pick=None):
    """The :class:`PickPlan` with the largest margin for ``timing`` (a :class:`BusTiming`) and
    samples ``sample_ns`` apart, or the plan of the given ``pick``.

    The edge lies in ``(t[i-1], t[i]]`` for the first sample ``t[i]`` that sees the clock high
    (a sample taken while the clock changes resolves to either level, which keeps this true), so
    sample ``i + k`` lies in ``[e + k*T, e + (k+1)*T)``.

    >>> plan_pick(TIMINGS["rmii"], 2.5)
    PickPlan(pick=7, sample_ns=2.5, early_ns=3.5, late_ns=2.0)
    >>> plan_pick(TIMINGS["mii_tx"], 2.5).pick, plan_pick(TIMINGS["mii_rx"], 2.5).margin_ns
    (12, 7.5)
    """
    def plan(k):
        return PickPlan(k, sample_ns, k * sample_ns - timing.after_ns,
                        timing.before_ns - (k + 1) * sample_ns)
    if pick is not None:
        return plan(pick)
    candidates = [plan(k) for k in range(math.ceil(timing.before_ns / sample_ns) + 1)]
    return max(candidates, key=lambda p: (round(p.margin_ns, 9), -p.pick))


class BusSampler(wiring.Component):
    """One bus clock and its data bits, sampled on the capture clock (``sync``: rename it).

    Parameters
    ----------
    timing : BusTiming
        The interface's data-valid window (:data:`TIMINGS`).
    width : int
        Data bits sampled with the clock (e.g. RX_DV, RX_ER and RXD[3:0]: 6).
    capture_hz : int or float
        The capture clock.
    lanes : int
        Samples per capture cycle (1, or 2 from DDR input registers).
    pick : int or None
        Override the planned pick (tests that show a wrong pick fails); ``None``: plan it.

    Attributes
    ----------
    clk : In(lanes)
        The bus clock's samples, lane 0 the earliest.
    data : In(width * lanes)
        The data's samples, lane ``l`` in bits ``l*width .. (l+1)*width - 1``.
    out_data : Out(width)
        The value picked at the last bus clock edge (registered).
    out_clk : Out(1)
        The regenerated bus clock (registered): rises one capture cycle after ``out_data``
        changes, high for :attr:`high_cycles` capture cycles.
    plan : PickPlan
    """

    def __init__(self, timing, *, width, capture_hz, lanes=2, pick=None):
        with rejected(self):
            if not isinstance(timing, BusTiming):
                raise TypeError(f"Timing must be a BusTiming, not {timing!r}")
            if not isinstance(width, int) or width < 1:
                raise ValueError(f"Width must be a positive integer, not {width!r}")
            if lanes not in (1, 2):
                raise ValueError(f"Lanes must be 1 or 2, not {lanes!r}")
            if not capture_hz > 0:
                raise ValueError(f"Capture clock must be a positive frequency, not "
                                 f"{capture_hz!r}")
            cycle_ns = 1e9 / capture_hz
            self.plan = plan_pick(timing, cycle_ns / lanes, pick=pick)
            if pick is None and self.plan.margin_ns <= 0:
                raise ValueError(f"Capture clock must sample {timing.name} with a margin, not "
                                 f"{capture_hz / 1e6:g} MHz x {lanes} lanes (best margin "
                                 f"{self.plan.margin_ns:g} ns)")
            if not isinstance(self.plan.pick, int) or self.plan.pick < 0:
                raise ValueError(f"Pick must be a non-negative integer, not {pick!r}")
        self.timing, self.width, self.lanes = timing, width, lanes
        self.cycle_ns = cycle_ns
        # shortest time between two edges the sampler sees: a bus period less one sample
        spacing = (timing.period_ns - self.plan.sample_ns) / cycle_ns
        self.high_cycles = max(1, math.floor(spacing / 2))
        super().__init__({
            "clk": In(lanes), "data": In(width * lanes),
            "out_data": Out(width), "out_clk": Out(1),
        })

    @property
    def hold_ns(self):
        """Least time from the regenerated clock's rising edge (at the capture register) to the
        next change of ``out_data``: a bus period less one sample and one capture period."""
        return self.timing.period_ns - self.plan.sample_ns - self.cycle_ns

    def elaborate(self, platform):
        m = Module()
        lanes, width, pick = self.lanes, self.width, self.plan.pick
        # one more stage after the input registers: a clock sample taken as the bus clock
        # changes settles here before the edge detector uses it
        clk_s, data_s, last = Signal(lanes), Signal(width * lanes), Signal()
        m.d.sync += [clk_s.eq(self.clk), data_s.eq(self.data), last.eq(clk_s[-1])]
        prev = Cat(last, clk_s[:-1])
        rise = Signal(lanes)
        m.d.comb += rise.eq(clk_s & ~prev)

        # the rising-edge flags of the last `pick` samples, oldest first; a flag `pick` samples
        # old marks the sample to take in this cycle's lane
        past = math.ceil(pick / lanes)
        flags = Signal(lanes * (past + 1))
        if past:
            hist = Signal(lanes * past)
            m.d.sync += hist.eq(Cat(hist, rise)[lanes:])
            m.d.comb += flags.eq(Cat(hist, rise))
        else:
            m.d.comb += flags.eq(rise)
        picked = Signal()
        for lane in range(lanes):
            with m.If(flags[lanes * past + lane - pick]):
                m.d.sync += self.out_data.eq(data_s.word_select(lane, width))
                m.d.comb += picked.eq(1)

        # the regenerated clock: up one cycle after out_data changes, down high_cycles later
        loaded = Signal()
        left = Signal(range(self.high_cycles + 1))
        m.d.sync += loaded.eq(picked)
        with m.If(loaded):
            m.d.sync += [self.out_clk.eq(1), left.eq(self.high_cycles - 1)]
        with m.Elif(left != 0):
            m.d.sync += left.eq(left - 1)
        with m.Else():
            m.d.sync += self.out_clk.eq(0)
        return m
