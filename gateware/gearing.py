"""ECP5 2:1 input gearing: four samples per capture clock from ``IDDRX2F`` (1.25 ns at 200 MHz).

``amaranth.lib.io.DDRBuffer`` lowers to ``IDDRX1F`` (two samples per clock); X2 gearing needs
Lattice's primitives, instantiated here as Lattice FPGA-TN-02035 ("ECP5 and ECP5-5G High-Speed I/O
Interface", generic DDR X2 receive) and LiteDRAM's ECP5 DDR PHY use them:

* an edge clock (``eclk``, 400 MHz) from a PLL through ``ECLKSYNCB``, whose ``STOP`` gates it;
* ``CLKDIVF`` (``DIV = "2.0"``) divides the edge clock into the capture clock (200 MHz), so the
  two are phase-aligned by construction;
* per pin an ``IB`` and an ``IDDRX2F`` (``D`` from the pad, ``ECLK``, ``SCLK`` = capture clock):
  every capture clock it presents four samples ``Q0..Q3`` taken on successive edges of ``eclk``.

The order of ``Q0..Q3`` in time and their latency are established against Lattice's own
simulation models in ``docs/lane-order.md`` (:mod:`latscope.gateware.lane_order_x2`): ``Q0`` is
the earliest sample, so lane ``j`` is ``Q<j>`` and ``tick = cycle * 4 + lane``.

Start-up (:class:`GearingStart`). ``IDDRX2F`` groups edge-clock samples into words with a counter
of its own, started by its reset. If two channels' counters started on different edges their
words would be shifted by two ticks against each other, so all ``IDDRX2F`` and the ``CLKDIVF``
must leave reset while the edge clock is stopped (TN-02035, "reset synchronization"): with
``STOP`` high, pulse ``RST``, then lower ``STOP`` so every counter sees the same first edge.
"""

from amaranth.hdl import Const, Instance, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In, Out

from latscope.gateware.delay import delayed_inputs

__all__ = ["LANES", "GearingStart", "GearedInput", "GearedOutput", "edge_clocks"]

#: Samples per capture clock with X2 gearing.
LANES = 4


class GearingStart(wiring.Component):
    """The start-up sequence of the X2 clocks, in a free-running slow domain (default ``sync``).

    After this domain's reset: ``stop`` and ``reset`` high for ``hold`` cycles, then ``reset``
    low for ``hold`` cycles with ``stop`` still high, then ``stop`` low; ``ready`` rises
    ``hold`` cycles later (the capture domain's reset is released from it).

    Parameters
    ----------
    hold : int
        Cycles of each step, at least 4 (``ECLKSYNCB`` takes ``STOP`` through four flops of the
        edge clock, far shorter than 4 cycles of the slow clock).
    """

    def __init__(self, *, hold=8):
        if not isinstance(hold, int) or isinstance(hold, bool) or hold < 4:
            self._MustUse__silence = True    # never constructed, so never "unused"
            raise ValueError(f"Hold time must be an integer of at least 4 cycles, not {hold!r}")
        self.hold = hold
        super().__init__({"stop": Out(1, init=1), "reset": Out(1, init=1), "ready": Out(1)})

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(4 * self.hold + 1))
        with m.If(count != 4 * self.hold):
            m.d.sync += count.eq(count + 1)
        m.d.sync += [
            self.reset.eq(count < self.hold),
            self.stop.eq(count < 2 * self.hold),
            self.ready.eq(count >= 3 * self.hold),
        ]
        return m


class GearedInput(wiring.Component):
    """``IDDRX2F`` on every bit of ``port``: ``i`` holds :data:`LANES` samples per capture clock,
    lane-major (bit ``lane * width + k`` is bit ``k`` at lane ``lane``), lane 0 the earliest.

    Parameters
    ----------
    port : amaranth.lib.io.PortLike
        The input pins (``dir="-"``).
    eclk, sclk : Value
        The edge clock (after ``ECLKSYNCB``) and the capture clock (``CLKDIVF`` output).
    reset : Value
        ``IDDRX2F.RST``, from :class:`GearingStart` (released while the edge clock is stopped).
    delay : DelayControl, optional
        Put a ``DELAYF`` between each pin's input buffer and its ``IDDRX2F``, controlled by this
        :class:`~latscope.gateware.delay.DelayControl` (:mod:`latscope.gateware.delay`).
    """

    def __init__(self, port, *, eclk, sclk, reset, delay=None):
        self.port, self.eclk, self.sclk, self.reset = port, eclk, sclk, reset
        self.delay = delay
        self.width = len(port)
        super().__init__({"i": Out(LANES * self.width)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.buf = buf = io.Buffer("i", self.port)
        pins = buf.i if self.delay is None else delayed_inputs(m, buf.i, self.delay)
        for k in range(self.width):
            q = [Signal(name=f"q{j}_{k}") for j in range(LANES)]
            m.submodules[f"iddrx2f_{k}"] = Instance(
                # ALIGNWD (word slip) stays unconnected: nextpnr has no route for a constant to
                # the IOLOGIC's SLIP input on every pin, and the silicon ties it low.
                "IDDRX2F", i_D=pins[k], i_ECLK=self.eclk, i_SCLK=self.sclk, i_RST=self.reset,
                o_Q0=q[0], o_Q1=q[1], o_Q2=q[2], o_Q3=q[3])
            for j in range(LANES):
                m.d.comb += self.i[j * self.width + k].eq(q[j])
        return m


class GearedOutput(wiring.Component):
    """``ODDRX2F`` on one output pin: ``o`` holds :data:`LANES` bits per capture clock, lane 0
    sent first (``D0``, Lattice: "first to be sent out"). Used for the self-test output."""

    def __init__(self, port, *, eclk, sclk, reset):
        self.port, self.eclk, self.sclk, self.reset = port, eclk, sclk, reset
        if len(port) != 1:
            raise ValueError(f"GearedOutput drives one pin, not {len(port)}")
        super().__init__({"o": In(LANES)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.buf = buf = io.Buffer("o", self.port)
        q = Signal()
        m.submodules.oddrx2f = Instance(
            "ODDRX2F", i_D0=self.o[0], i_D1=self.o[1], i_D2=self.o[2], i_D3=self.o[3],
            i_ECLK=self.eclk, i_SCLK=self.sclk, i_RST=self.reset, o_Q=q)
        m.d.comb += buf.o.eq(q)
        return m


def edge_clocks(m, *, eclk_in, start):
    """Add ``ECLKSYNCB`` and ``CLKDIVF`` to ``m``: returns ``(eclk, sclk)``; ``sclk`` drives the
    capture domain. ``start`` is the :class:`GearingStart` sequencing both."""
    eclk, sclk = Signal(), Signal()
    m.submodules.eclksyncb = Instance("ECLKSYNCB", i_ECLKI=eclk_in, i_STOP=start.stop,
                                      o_ECLKO=eclk)
    m.submodules.clkdivf = Instance("CLKDIVF", p_DIV="2.0", i_CLKI=eclk, i_RST=start.reset,
                                    i_ALIGNWD=Const(0), o_CDIVX=sclk)
    return eclk, sclk
