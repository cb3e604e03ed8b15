"""Per-channel input delay lines (ECP5 ``DELAYF``): sub-tick alignment of the channels.

A tick of the ECPIX-5's 2:1 gearing is 1.25 ns; what the pins, the board and the input cells
add to each channel differs by a fraction of that, and the self-test calibration can only see it
through whole ticks. Each ECP5 I/O cell has a delay line between its input buffer and its input
register (Lattice FPGA-TN-02035, "ECP5 and ECP5-5G High-Speed I/O Interface", input delay
``DELAYF``/``DELAYG``): 128 settings (a 7-bit counter), :data:`~latscope.gateware.protocol.
DELAY_TAP_PS` (25 ps nominal, Lattice's simulation model) per setting. With ``DELAYF`` between
each channel's pad and its ``IDDRX2F`` the host can place every channel's sampling instant at the
same fraction of a tick (``latscope selftest --calibrate --sub-tick``).

The cell's interface (yosys ``techlibs/ecp5/cells_bb.v``, Lattice's simulation library):
``A`` (from the pad's input buffer, its only user), ``Z`` (to the input register's ``D``),
``LOADN`` (low: the counter loads ``DEL_VALUE``), ``MOVE`` (the counter steps by one on its
falling edge), ``DIRECTION`` (0: more delay, 1: less), ``CFLAG`` (the counter is at its end in
the current direction). nextpnr-ecp5 packs a ``DELAYF`` driven by a pad and driving an input
register into that pin's I/O logic (``ecp5/pack.cc``, ``pack_iologic``).

:class:`DelayControl` (link clock domain) turns the taps SET_DELAY set
(:class:`~latscope.gateware.control.Control` ``delay_taps``) into ``LOADN``/``MOVE`` sequences:
it only ever steps up from a load to 0 (a lower setting reloads first), so it never depends on
when the cell samples ``DIRECTION`` (Lattice's model takes the direction a move uses from the
previous move). :mod:`latscope.gateware.model_delay` holds the cell's behavioural model and the
sampling model the tests and the simulated instrument use. :func:`delayed_inputs` instantiates the
cells; the board layer (:class:`latscope.gateware.boards.BoardTop`) places them, the portable
core never does.
"""

from amaranth.hdl import Cat, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .checks import check, rejected
from .control import delay_layout

__all__ = ["DelayControl", "delayed_inputs"]


class DelayControl(wiring.Component):
    """Drives the ``LOADN``/``MOVE``/``DIRECTION`` inputs of one ``DELAYF`` per channel so that
    each cell's counter reaches ``taps``.

    After reset every cell is loaded (``LOADN`` low for one cycle: counter = ``DEL_VALUE`` = 0).
    Per channel, each cycle: a setting below the counter's reloads (``LOADN`` low, counter 0); one
    above it raises ``MOVE`` for one cycle and lowers it the next, the falling edge stepping the
    counter up by one. ``DIRECTION`` stays 0 (up). A change of ``n`` taps up takes ``2 n``
    cycles (at most 254, 5.3 µs at 48 MHz).

    Attributes
    ----------
    taps : In(delay_layout(channels))
        Wanted setting per channel.
    loadn, move, direction : Out(channels)
        To the cells (bit ``k`` to channel ``k``'s), registered.
    current : Out(delay_layout(channels))
        The setting each cell's counter holds (as this controller counts it).
    busy : Out(1)
        Some channel's counter has not reached its setting yet.
    """

    def __init__(self, *, channels=8):
        with rejected(self):
            check("Channel count", channels, 1, 8)
        self.channels = channels
        layout = delay_layout(channels=channels)
        super().__init__({
            "taps": In(layout), "loadn": Out(channels), "move": Out(channels),
            "direction": Out(channels), "current": Out(layout), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        loaded = Signal()                       # the cells have been loaded since reset
        m.d.sync += loaded.eq(1)
        busy = []
        for k in range(self.channels):
            want, have = self.taps[k], self.current[k]
            loadn, move = self.loadn[k], self.move[k]
            m.d.sync += [loadn.eq(1), move.eq(0)]
            with m.If(~loaded | (want < have)):
                m.d.sync += [loadn.eq(0), have.eq(0)]
            with m.Elif(want != have):
                with m.If(~move):
                    m.d.sync += move.eq(1)
                with m.Else():                  # MOVE falls: the cell steps up
                    m.d.sync += have.eq(have + 1)
            busy.append(want != have)
        m.d.comb += [self.direction.eq(0), self.busy.eq(~loaded | Cat(*busy).any())]
        return m


def delayed_inputs(m, pad, control, *, name="ch_delay"):
    """A ``DELAYF`` (``DEL_MODE="USER_DEFINED"``, ``DEL_VALUE=0``) on every bit of ``pad`` (the
    input buffers' outputs, each used by nothing else), controlled by ``control`` (a
    :class:`DelayControl` with as many channels); returns the delayed signal, one bit per pad
    bit, for the input registers' ``D``. ``CFLAG`` is left open: the controller never runs the
    counter past its end (settings are below ``DELAY_TAPS``)."""
    if len(pad) != control.channels:
        raise ValueError(f"Pad width must be the controller's {control.channels} channels, "
                         f"not {len(pad)}")
    out = Signal(len(pad), name=f"{name}_z")
    for k in range(len(pad)):
        m.submodules[f"{name}_{k}"] = Instance(
            "DELAYF", p_DEL_MODE="USER_DEFINED", p_DEL_VALUE=0,
            i_A=pad[k], i_LOADN=control.loadn[k], i_MOVE=control.move[k],
            i_DIRECTION=control.direction[k], o_Z=out[k])
    return out
