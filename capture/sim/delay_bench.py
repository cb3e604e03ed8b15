"""The delay-line bench: a simulated ECPIX-5 with input delay lines and a self-test fan-out cable
whose channels differ by less than a tick, for ``latscope selftest --sim --calibrate --sub-tick``.

:class:`DelayBench` is a :class:`~latscope.capture.link.transport.Transport`, so the host's code
runs unchanged against it. What it is made of:

* the command handler and the link are the gateware's reference models
  (:class:`~latscope.gateware.model_stream.CommandModel` with SET_DELAY,
  :class:`~latscope.gateware.model_stream.LinkModel`), which the gateware tests compare with the
  gateware byte for byte (``gateware/tests/test_control.py``, ``test_delay.py``);
* the channel inputs are the timing models of :mod:`latscope.gateware.model_delay`: the self-test
  generator's edges leave the output pin at tick boundaries (plus ``jitter_ps`` of Gaussian
  jitter), reach channel ``c`` after ``skew_ps[c]`` and its ``DELAYF`` setting times ``tap_ps``,
  and are stamped at ``ceil(t / tick_ps)`` by the input register;
* channels in the self-test mask take the pattern inside the gateware, at its tick exactly.

Time is simulated, not wall-clock: each read that finds no bytes waiting runs
``2**HEARTBEAT_SHIFT`` capture cycles (ending with a heartbeat, which closes the frame).
"""

import random
import zlib

from latscope.capture.link.transport import Transport
from latscope.gateware.codec import unpack
from latscope.gateware.model_capture import Entry
from latscope.gateware.model_delay import ChannelTiming
from latscope.gateware.model_stream import (
    ENTRY_RESET,
    CommandModel,
    LinkModel,
    identify_data,
    to_bytes,
)
from latscope.gateware.protocol import (
    DELAY_TAP_PS,
    SYNC,
    EntryKind,
    FrameHeader,
    FrameType,
    Heartbeat,
    Opcode,
    Status,
)

__all__ = ["DelayBench", "HEARTBEAT_SHIFT", "CHANNEL_ROLES"]

#: Heartbeat period of the bench, as a power of two of capture cycles (82 µs at 200 MHz).
HEARTBEAT_SHIFT = 14
#: Channel roles the bench reports (those of every board, gateware/boards.py).
CHANNEL_ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")
_CHANNELS = len(CHANNEL_ROLES)
_HEADER = FrameHeader.as_shape().size // 8


class DelayBench(Transport):
    """The simulated instrument (see the module docstring).

    Parameters
    ----------
    skew_ps : dict
        Channel -> the fan-out cable's delay to that channel beyond the common part, ps. Only
        these channels are wired to the self-test output.
    tap_ps : float or dict
        Each ``DELAYF`` step, ps (one value for all, or per channel); the silicon's is not the
        nominal :data:`~latscope.gateware.protocol.DELAY_TAP_PS`, which is what the calibration
        has to cope with.
    jitter_ps : float
        Standard deviation of the self-test pin's edge times, ps.
    seed : int
        Of the jitter and of the pattern's phase against the time base.
    capture_hz, lanes : int
        The sampling (default: the ECPIX-5 default build, 1.25 ns ticks).
    delay_lines : bool
        False: a build without input delay lines (SET_DELAY is UNKNOWN_OPCODE, as on the
        iCEBreaker and the x1 build).
    """

    def __init__(self, skew_ps, *, tap_ps=DELAY_TAP_PS, jitter_ps=0.0, seed=0,
                 capture_hz=200_000_000, lanes=4, delay_lines=True):
        for ch, ps in skew_ps.items():
            if not 0 <= ch < _CHANNELS or not 0 <= ps <= 100_000:
                raise ValueError(f"Cable delays must be 0..100000 ps on channels 0..7, "
                                 f"not {ps!r} on channel {ch!r}")
        taps_ps = dict(tap_ps) if isinstance(tap_ps, dict) else dict.fromkeys(skew_ps, tap_ps)
        self.lanes, self.tick_ps = lanes, 1e12 / (capture_hz * lanes)
        self.timing = ChannelTiming(tick_ps=self.tick_ps, skew_ps=dict(skew_ps), tap_ps=taps_ps)
        identify = identify_data(
            channels=_CHANNELS, lanes=lanes, counter_width=48, max_glitch=15,
            heartbeat_shift=HEARTBEAT_SHIFT, fifo_depth=1024, capture_hz=capture_hz,
            board="sim", channel_names=CHANNEL_ROLES)
        self.commands = CommandModel(channels=_CHANNELS, identify=identify, lanes=lanes,
                                     input_delay=delay_lines)
        self.link = LinkModel(channels=_CHANNELS, lanes=lanes, counter_width=48)
        self.jitter_ps = jitter_ps
        self._rng, self._seed = random.Random(seed), seed
        self._rx = bytearray()
        self.cycle = 0              # capture cycles since power-on
        self._zero = 0              # the cycle of the last RESET_TIME
        self._pattern = None        # (first rising tick, high, low) while the self-test runs
        self.closed = False

    # --- Transport ---------------------------------------------------------------------------
    def write(self, data):
        self._rx += data
        while True:
            start = self._rx.find(SYNC)
            if start < 0 or len(self._rx) - start < _HEADER:
                return
            del self._rx[:start]
            header = unpack(FrameHeader, int.from_bytes(self._rx[:_HEADER], "little"))
            end = _HEADER + header["length"] + 4
            if len(self._rx) < end:
                return
            frame, self._rx = bytes(self._rx[:end]), self._rx[end:]
            body = frame[len(SYNC):-4]
            if header["type"] != FrameType.COMMAND or \
                    zlib.crc32(body).to_bytes(4, "little") != frame[-4:]:
                self.link.reply(0, 0, Status.BAD_FRAME)
                continue
            self._execute(header["seq"], frame[_HEADER:-4])

    def read(self, max_bytes, timeout):
        if not self.link.output:
            self._run(1 << HEARTBEAT_SHIFT)
        data = bytes(self.link.output[:max_bytes])
        del self.link.output[:max_bytes]
        return data

    def close(self):
        self.closed = True

    # --- the instrument ----------------------------------------------------------------------
    def _execute(self, seq, payload):
        status = to_bytes(Heartbeat, self.link.heartbeat_fields())
        before = dict(self.commands.config)
        opcode, result, data = self.commands.handle(payload, status_data=status)
        self.link.reply(seq, opcode, result, data)
        if result != Status.OK:
            return
        cfg = self.commands.config
        if opcode == Opcode.RESET_TIME:
            self._zero = self.cycle
            self.link.entry(Entry(kind=ENTRY_RESET, cycle=0))
        elif opcode == Opcode.SELFTEST:
            if not cfg["selftest_on"]:
                self._pattern = None
            elif self._pattern is None or any(before[k] != cfg[k] for k in
                                              ("selftest_high", "selftest_low")):
                # the generator starts at an arbitrary phase against the time base
                first = (self.cycle + 1) * self.lanes + self._rng.randrange(self.lanes)
                self._pattern = (first, cfg["selftest_high"], cfg["selftest_low"])
        elif opcode == Opcode.SET_DELAY:
            self.timing.taps = dict(enumerate(self.commands.delay_taps))

    def _edges(self, first_tick, end_tick):
        """``{tick: [(channel, rising)]}`` of the pattern's edges stamped in the window."""
        cfg = self.commands.config
        out = {}
        if self._pattern is None or not cfg["armed"]:
            return out
        start, high, low = self._pattern
        period = high + low
        mask = cfg["selftest_mask"]
        wired = [c for c in self.timing.skew_ps if cfg["selftest_drive"] and not mask >> c & 1]
        reach = max([self.timing.delay_ps(c) for c in wired], default=0) / self.tick_ps + 2
        k = max(0, (first_tick - start - int(reach)) // period - 1)
        while True:
            rise = start + k * period
            if rise >= end_tick:
                break
            for tick, rising in ((rise, 1), (rise + high, 0)):
                enabled = cfg["rise_en"] if rising else cfg["fall_en"]
                t_ps = tick * self.tick_ps
                if self.jitter_ps:      # drawn per edge, the same in every window
                    t_ps += random.Random(self._seed * 1_000_003 + tick).gauss(
                        0.0, self.jitter_ps)
                stamps = [(c, tick) for c in range(_CHANNELS) if mask >> c & 1]
                stamps += [(c, self.timing.tick(c, t_ps)) for c in wired]
                for c, stamp in stamps:
                    if enabled >> c & 1 and first_tick <= stamp < end_tick:
                        out.setdefault(stamp, []).append((c, rising))
            k += 1
        return out

    def _run(self, cycles):
        """Run ``cycles`` capture cycles: the window's edges, then a heartbeat at its end."""
        first, end = self.cycle * self.lanes, (self.cycle + cycles) * self.lanes
        by_cycle = {}
        for tick, edges in sorted(self._edges(first, end).items()):
            cycle, lane = divmod(tick, self.lanes)
            bits = by_cycle.setdefault(cycle, [0, 0])
            for c, rising in edges:
                bit = 1 << (lane * _CHANNELS + c)
                bits[0] |= bit
                bits[1] |= bit if rising else 0
        for cycle, (edges, levels) in sorted(by_cycle.items()):
            self.link.entry(Entry(kind=EntryKind.EVENTS, cycle=cycle - self._zero, edges=edges,
                                  levels=levels))
        self.cycle += cycles
        self.link.entry(Entry(kind=EntryKind.TICK, cycle=self.cycle - self._zero))
