"""Timing models of the channel inputs below one tick: the ``DELAYF`` cell and the input register.

These are the models ``latscope selftest --calibrate --sub-tick`` is simulated with
(``capture/sim/delay_bench.py``, ``gateware/tests/test_delay.py``):

* :class:`DelayfModel`: the ECP5 ``DELAYF`` cell as Lattice's simulation library describes it
  (``DELAYF`` "Simulation Library File for DELAYF in ECP5U/M, LIFMD"): a 7-bit counter loaded with
  ``DEL_VALUE`` while ``LOADN`` is low, stepped by one on each falling edge of ``MOVE`` (up when
  the cell's direction flag is 0, down when 1; the flag takes ``DIRECTION`` at that same falling
  edge, after the step, so a step uses the direction of the previous one; ``LOADN`` clears it),
  held at its ends (``CFLAG``); delay ``counter * tap_ps``. Lattice's model uses 25 ps per step;
  here the step is a parameter, because the silicon's varies with process, voltage and
  temperature (the data sheet gives no tolerance for it), which is why the calibration measures
  it against the tick instead of trusting it.
* :func:`sampled_tick`: an input register sampling at tick boundaries (``IDDRX2F``, four samples
  per capture clock): an edge reaching the register at ``t`` ps is first seen at tick
  ``ceil(t / tick_ps)``.
* :class:`ChannelTiming`: a board's channels under the self-test fan-out cable: each channel's
  extra delay (``skew_ps``: pins, traces, cable), its delay cell's step and setting, so an edge
  leaving the self-test pin at ``t`` ps is stamped at ``ceil((t + skew_ps[c] + taps[c] *
  tap_ps[c]) / tick_ps)`` on channel ``c``.
"""

import math
from dataclasses import dataclass, field

from .protocol import DELAY_TAP_PS, DELAY_TAPS

__all__ = ["DelayfModel", "sampled_tick", "ChannelTiming"]


class DelayfModel:
    """The ``DELAYF`` cell's counter and delay, clocked by :meth:`step` once per control-clock
    cycle with the values of its control inputs in that cycle.

    Parameters
    ----------
    tap_ps : float
        Delay of one step, ps (Lattice's model: 25).
    del_value : int
        ``DEL_VALUE``: the counter after a load.
    """

    def __init__(self, *, tap_ps=DELAY_TAP_PS, del_value=0):
        if not tap_ps > 0:
            raise ValueError(f"Tap delay must be positive, not {tap_ps!r}")
        if not 0 <= del_value < DELAY_TAPS:
            raise ValueError(f"DEL_VALUE must be 0..{DELAY_TAPS - 1}, not {del_value!r}")
        self.tap_ps, self.del_value = tap_ps, del_value
        self.counter = del_value
        self.down = 0                      # the cell's direction flag (drn)
        self._move = 0

    @property
    def cflag(self):
        """The counter is at its end in the current direction (a move is ignored)."""
        return int(self.counter == (0 if self.down else DELAY_TAPS - 1))

    @property
    def delay_ps(self):
        """Delay from ``A`` to ``Z`` above the cell's fixed insertion delay, ps."""
        return self.counter * self.tap_ps

    def step(self, *, loadn, move, direction):
        """Apply one cycle's control values."""
        move_en = int(bool(move) and not self.cflag)
        fell = self._move and not move_en
        self._move = move_en
        if not loadn:
            self.counter, self.down = self.del_value, 0
            return
        if fell:
            if self.down:
                self.counter = max(self.counter - 1, 0)
            else:
                self.counter = min(self.counter + 1, DELAY_TAPS - 1)
            self.down = int(bool(direction))


def sampled_tick(t_ps, tick_ps):
    """The tick at which an input register sampling at every tick boundary first sees an edge
    that reaches it at ``t_ps`` (an edge exactly on a boundary is sampled there).

    >>> sampled_tick(1250, 1250), sampled_tick(1251, 1250), sampled_tick(0.5, 1250)
    (1, 2, 1)
    """
    return math.ceil(t_ps / tick_ps)


@dataclass
class ChannelTiming:
    """The board's channel inputs below one tick, for a self-test fan-out cable.

    Attributes
    ----------
    tick_ps : float
        Length of a tick.
    skew_ps : dict
        Channel -> delay from the self-test pin to the channel's delay cell beyond the common
        part, ps (pins, traces, cable, input buffer). Only these channels see the cable.
    tap_ps : dict
        Channel -> the channel's delay step, ps (default :data:`DELAY_TAP_PS` for every channel).
    taps : dict
        Channel -> the channel's delay setting (default 0).
    """
    tick_ps: float
    skew_ps: dict
    tap_ps: dict = field(default_factory=dict)
    taps: dict = field(default_factory=dict)

    def delay_ps(self, channel):
        """Total delay of ``channel`` after the self-test pin, ps."""
        return (self.skew_ps[channel]
                + self.taps.get(channel, 0) * self.tap_ps.get(channel, DELAY_TAP_PS))

    def tick(self, channel, t_ps):
        """The tick at which ``channel`` stamps an edge leaving the self-test pin at ``t_ps``."""
        return sampled_tick(t_ps + self.delay_ps(channel), self.tick_ps)
