"""``latscope selftest``: check and calibrate the instrument without a device under test.

The gateware has a self-test generator (``Opcode.SELFTEST``, ``gateware/capture.py``): a pattern
``high`` ticks high and ``low`` ticks low, repeating, injected into the selected channels right
after the input synchronisers (so it is timed exactly like a pin) and, with flag bit 1, driven on
the board's self-test output pin for a loop-back cable. This module runs it and judges the result:

* :func:`check_pattern` (arrays in, :class:`PatternCheck` out): every channel saw only pattern
  edges, alternating, spaced exactly ``high``/``low`` ticks, every channel at the same ticks, and
  nothing was lost.
* :func:`analyse_loopback` (arrays in, :class:`LoopbackCheck` out): the pattern as it came back
  through a cable on one channel: pin-to-pin delay against the internal pattern, high and low
  durations, and the DDR lane-order verdict of :func:`latscope.gateware.lane_order.check_loopback`.
* :func:`run_selftest` drives an :class:`~latscope.capture.session.Instrument`; :func:`register`
  adds the command. ``--sim`` runs the real gateware compiled by Verilator
  (:class:`SelftestBenchEngine`), idle (no DUT traffic), served on a pseudo-terminal so the
  hardware code path runs unchanged.

The user documentation is ``docs/selftest.md``.
"""

import dataclasses
import json
import sys
import threading
import time as _time

import numpy as np

from latscope import LatscopeError
from latscope.gateware import protocol

__all__ = [
    "ChannelCheck", "PatternCheck", "LoopbackCheck", "check_pattern", "analyse_loopback",
    "trim_to_complete", "SelftestCapture", "run_selftest", "SelftestBenchEngine",
    "open_simulated_instrument", "register", "cmd_selftest",
    "DEFAULT_HIGH", "DEFAULT_LOW", "DEFAULT_EDGES",
]

#: Default pattern, ticks. Both odd, so rising and falling edges fall on different DDR lanes, and
#: slow enough that 8 channels stay far below the 12 Mbaud link's ~540,000 events/s on every board
#: (ECPIX-5: 62.5 µs period, 8 channels x 2 edges -> 256,000 events/s).
DEFAULT_HIGH = 10001
DEFAULT_LOW = 9999
#: Edges per channel collected when neither ``--edges`` nor ``--duration`` is given.
DEFAULT_EDGES = 200
#: Bytes per event the stream costs in the worst realistic case (docs/stream-format.md, "Size").
BYTES_PER_EVENT = 2.2


def _check_ticks(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 2 <= value <= 0xFFFF:
        raise ValueError(f"{name} time of the self-test pattern must be an integer from 2 to "
                         f"65535 ticks, not {value!r}")
    return int(value)


def _check_channel(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value < protocol.NUM_CHANNELS:
        raise ValueError(f"{name} must be a channel from 0 to {protocol.NUM_CHANNELS - 1}, "
                         f"not {value!r}")
    return int(value)


def _events(time, channel, rising):
    time = np.asarray(time)
    channel = np.asarray(channel)
    rising = np.asarray(rising)
    if time.ndim != 1 or channel.shape != time.shape or rising.shape != time.shape:
        raise ValueError("Event time, channel and rising must be 1-D arrays of the same length")
    if time.size and not np.issubdtype(time.dtype, np.integer):
        raise TypeError("Event times must be integers (ticks)")
    time = time.astype(np.int64)
    if time.size > 1 and np.any(np.diff(time) < 0):
        raise ValueError("Event times must be non-decreasing")
    return time, channel.astype(np.int64), rising.astype(bool)


def _minmax(values):
    return (int(values.min()), int(values.max())) if len(values) else (None, None)


# --- the pattern check ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ChannelCheck:
    """What one channel saw of the internal self-test pattern.

    Attributes
    ----------
    channel : int
    edges, rising : int
        Edges seen, and how many of them rising.
    high_min, high_max, low_min, low_max : int or None
        Extremes of the rise-to-fall (high) and fall-to-rise (low) intervals, ticks (``None`` when
        the channel has no such interval).
    bad_spacing : int
        Intervals between alternating edges that differ from the pattern's high or low time.
    bad_direction : int
        Consecutive edges of the same direction (an edge is missing or extra).
    off_pattern : int
        Edges at a tick (or with a direction) that most channels under test do not share.
    missed : int
        Edges most channels under test have that this channel lacks.
    lag_ticks : int or None
        Most common signed distance from an off-pattern edge to the nearest shared edge of the
        same direction (e.g. 1 for a channel one tick late); ``None`` without off-pattern edges.
    problems : tuple of str
        One sentence per failed condition; empty when ``ok``.
    """
    channel: int
    edges: int
    rising: int
    high_min: int | None
    high_max: int | None
    low_min: int | None
    low_max: int | None
    bad_spacing: int
    bad_direction: int
    off_pattern: int
    missed: int
    lag_ticks: int | None
    problems: tuple

    @property
    def errors(self):
        """Sum of the error counts (spacing, direction, off-pattern, missed)."""
        return self.bad_spacing + self.bad_direction + self.off_pattern + self.missed

    @property
    def ok(self):
        return not self.problems

    def to_dict(self):
        return {**dataclasses.asdict(self), "problems": list(self.problems),
                "errors": self.errors, "ok": self.ok}


@dataclasses.dataclass(frozen=True)
class PatternCheck:
    """Verdict of :func:`check_pattern`.

    Attributes
    ----------
    high_ticks, low_ticks : int
        The pattern checked against.
    channels : tuple of ChannelCheck
        One per channel under test, in channel order.
    lost : int
        Events the loss records say are missing (overflow and link).
    losses : tuple of dict
        The loss records (``first_time``, ``span``, ``lost``, ``cause``).
    foreign : int
        Edges on channels not under test.
    problems : tuple of str
        Failed conditions that concern the whole run (loss, foreign edges).
    """
    high_ticks: int
    low_ticks: int
    channels: tuple
    lost: int
    losses: tuple
    foreign: int
    problems: tuple

    @property
    def ok(self):
        """True when every channel passed and nothing was lost."""
        return not self.problems and all(c.ok for c in self.channels)

    def to_dict(self):
        return {"high_ticks": self.high_ticks, "low_ticks": self.low_ticks,
                "channels": [c.to_dict() for c in self.channels], "lost": self.lost,
                "losses": list(self.losses), "foreign": self.foreign,
                "problems": list(self.problems), "ok": self.ok}


def _loss_dict(loss):
    cause = getattr(loss, "cause", "?")
    return {"first_time": int(loss.first_time), "span": int(loss.span), "lost": int(loss.lost),
            "cause": str(getattr(cause, "value", cause))}


def check_pattern(time, channel, rising, *, channels, high_ticks, low_ticks, losses=(),
                  min_edges=4):
    """Check captured edges against the internal self-test pattern.

    The pattern is ``high_ticks`` high then ``low_ticks`` low, repeating, on every channel in
    ``channels`` at the same ticks. Each channel must show only alternating edges, every
    rise-to-fall interval exactly ``high_ticks`` and every fall-to-rise interval exactly
    ``low_ticks``, at least ``min_edges`` edges, and the same edges (tick and direction) as the
    other channels. Shared edges are those of a strict majority of the channels under test, so a
    single faulty channel among three or more is named; with two channels any disagreement
    flags both, with one channel simultaneity is not checked. Any loss record fails the run.

    Give events of a window that every channel covers completely (see :func:`trim_to_complete`):
    arming and disarming act on all channels in the same capture cycle, so such a window starts
    and ends with the same edges on every channel.

    Parameters
    ----------
    time : array of int
        Event times, ticks, non-decreasing.
    channel : array of int
        Event channels.
    rising : array of bool
        Event directions (True = rising).
    channels : iterable of int
        Channels the pattern was injected into (at least one, each 0..7).
    high_ticks, low_ticks : int
        The pattern, ticks (2..65535).
    losses : iterable of LossRecord
        Loss records of the capture (anything with ``first_time``, ``span``, ``lost``,
        ``cause``).
    min_edges : int
        Fewest edges a channel must show (at least 3: one high and one low interval).

    Returns
    -------
    PatternCheck

    Examples
    --------
    >>> t = np.repeat([10, 17, 22, 29], 2); ch = np.tile([0, 1], 4)
    >>> r = np.repeat([True, False, True, False], 2)
    >>> check_pattern(t, ch, r, channels=[0, 1], high_ticks=7, low_ticks=5).ok
    True
    """
    time, channel, rising = _events(time, channel, rising)
    chans = sorted({_check_channel("Channel under test", c) for c in channels})
    if not chans:
        raise ValueError("At least one channel must be under test")
    high = _check_ticks("High", high_ticks)
    low = _check_ticks("Low", low_ticks)
    if isinstance(min_edges, bool) or not isinstance(min_edges, (int, np.integer)) \
            or min_edges < 3:
        raise ValueError(f"Minimum edge count must be an integer of at least 3, not {min_edges!r}")
    loss_list = tuple(_loss_dict(x) for x in losses)
    lost = sum(x["lost"] for x in loss_list)

    selected = np.isin(channel, chans)
    foreign = int(np.count_nonzero(~selected))
    keys = time * 2 + rising            # an edge: its tick and direction
    n = len(chans)
    ref = np.zeros(0, np.int64)
    if n >= 2:
        uniq, counts = np.unique(keys[selected], return_counts=True)
        ref = uniq[counts > n // 2]      # shared by a strict majority

    results = []
    for ch in chans:
        on = channel == ch
        t, r, k = time[on], rising[on], keys[on]
        gaps = np.diff(t)
        alternating = r[1:] != r[:-1]
        want = np.where(r[:-1], high, low)
        high_gaps = gaps[alternating & r[:-1]]
        low_gaps = gaps[alternating & ~r[:-1]]
        bad_spacing = int(np.count_nonzero(alternating & (gaps != want)))
        bad_direction = int(np.count_nonzero(~alternating))
        problems = []
        off_pattern = missed = 0
        lag = None
        if n >= 2:
            off = ~np.isin(k, ref)
            off_pattern = int(np.count_nonzero(off))
            missed = int(np.count_nonzero(~np.isin(ref, k)))
            if off_pattern:
                lags = []
                for direction in (False, True):
                    ref_t = ref[(ref & 1) == direction] >> 1
                    mine = t[off & (r == direction)]
                    if len(ref_t) and len(mine):
                        i = np.clip(np.searchsorted(ref_t, mine), 1, len(ref_t) - 1) \
                            if len(ref_t) > 1 else np.zeros(len(mine), np.int64)
                        left = ref_t[np.maximum(i - 1, 0)]
                        right = ref_t[i]
                        d = np.where(np.abs(mine - left) <= np.abs(mine - right), mine - left,
                                     mine - right)
                        lags.append(d)
                if lags:
                    values, counts = np.unique(np.concatenate(lags), return_counts=True)
                    lag = int(values[np.argmax(counts)])
        if len(t) < min_edges:
            problems.append(f"only {len(t)} edges, at least {min_edges} needed")
        elif not len(high_gaps) or not len(low_gaps):
            problems.append("no complete high and low interval")
        if bad_direction:
            problems.append(f"{bad_direction} pairs of consecutive edges in the same direction "
                            f"(an edge missing or extra)")
        if bad_spacing:
            problems.append(f"{bad_spacing} intervals differ from {high} high / {low} low ticks")
        if off_pattern:
            where = f" (mostly {lag:+d} ticks)" if lag else ""
            problems.append(f"{off_pattern} edges not shared with the other channels{where}")
        if missed:
            problems.append(f"{missed} edges of the other channels missing")
        hmin, hmax = _minmax(high_gaps)
        lmin, lmax = _minmax(low_gaps)
        results.append(ChannelCheck(
            channel=ch, edges=len(t), rising=int(np.count_nonzero(r)), high_min=hmin,
            high_max=hmax, low_min=lmin, low_max=lmax, bad_spacing=bad_spacing,
            bad_direction=bad_direction, off_pattern=off_pattern, missed=missed, lag_ticks=lag,
            problems=tuple(problems)))
    problems = []
    if lost:
        causes = ", ".join(sorted({x["cause"] for x in loss_list}))
        records = f"{len(loss_list)} record" + ("s" if len(loss_list) != 1 else "")
        hint = ("; the pattern makes events faster than the link carries: lengthen the high "
                "and low times" if "overflow" in causes else "")
        problems.append(f"{lost} events lost ({causes}) in {records}{hint}")
    if foreign:
        problems.append(f"{foreign} edges on channels not under test")
    return PatternCheck(high_ticks=high, low_ticks=low, channels=tuple(results), lost=lost,
                        losses=loss_list, foreign=foreign, problems=tuple(problems))


def trim_to_complete(time, channel, rising):
    """Drop the events of the last tick received.

    An EVENTS frame may close between the channels of one capture cycle (``docs/stream-format.md``
    section 2), so when a capture stops, the last tick may be incomplete on some channels. Every
    earlier tick is complete. Returns ``(time, channel, rising)``.
    """
    time, channel, rising = _events(time, channel, rising)
    if not len(time):
        return time, channel, rising
    keep = time < time[-1]
    return time[keep], channel[keep], rising[keep]


# --- the loop-back analysis ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LoopbackCheck:
    """Verdict of :func:`analyse_loopback`.

    Attributes
    ----------
    channel : int
        The channel wired to the self-test output pin.
    reference : int or None
        The channel that captured the internal pattern (``None``: no delay measured).
    edges : int
        Edges seen on ``channel``.
    high_min, high_max, low_min, low_max : int or None
        Measured high and low durations on ``channel``, ticks.
    exact : float
        Fraction of intervals on ``channel`` equal to the pattern (0..1; 0 without intervals).
    delay_rising, delay_falling : tuple of int or None
        ``(min, max)`` pin-to-pin delay of rising and falling edges, ticks, modulo the pattern
        period: loop-back edge time minus the reference channel's edge of the same direction.
    delay_ticks : int or None
        The delay when every edge of both directions agrees, else ``None``.
    lane_order : LaneOrderResult
        The verdict of :func:`latscope.gateware.lane_order.check_loopback`.
    problems : tuple of str
        Failed conditions; empty when ``ok``.
    """
    channel: int
    reference: int | None
    edges: int
    high_min: int | None
    high_max: int | None
    low_min: int | None
    low_max: int | None
    exact: float
    delay_rising: tuple | None
    delay_falling: tuple | None
    delay_ticks: int | None
    lane_order: object
    problems: tuple

    @property
    def ok(self):
        return not self.problems

    def to_dict(self):
        lo = self.lane_order
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "lane_order"}
        out["problems"] = list(self.problems)
        out["lane_order"] = {"order": lo.order.value, "match_in_order": lo.match_in_order,
                             "match_swapped": lo.match_swapped, "intervals": lo.intervals,
                             "edges_per_lane": list(lo.edges_per_lane), "reason": lo.reason}
        out["ok"] = self.ok
        return out


def analyse_loopback(time, channel, rising, *, loop_channel, high_ticks, low_ticks,
                     reference=None, min_intervals=16, lanes=2):
    """Analyse the self-test pattern that came back through a cable on ``loop_channel``.

    The loop-back channel takes its pin (not the internal pattern); the self-test output pin
    drives it. Its edges are judged by :func:`latscope.gateware.lane_order.check_loopback` (lane
    order), its intervals against the pattern, and, with a ``reference`` channel that captured the
    internal pattern at the same time, its delay: loop-back edge minus the reference's edge of the
    same direction, modulo the period ``high_ticks + low_ticks`` (use a period longer than the
    delay). The run passes when the lanes are in order, every interval equals the pattern and the
    delay is one constant for both directions.

    Parameters
    ----------
    time, channel, rising : arrays
        The captured events (ticks, channel, True = rising).
    loop_channel : int
        Channel wired to the self-test output pin.
    high_ticks, low_ticks : int
        The pattern, ticks.
    reference : int or None
        Channel carrying the internal pattern, or ``None``.
    min_intervals : int
        Fewer loop-back intervals give an inconclusive lane-order verdict.
    lanes : int
        Samples per capture clock of the instrument (2, or 4 on the ECP5 2:1 build).

    Returns
    -------
    LoopbackCheck
    """
    from latscope.gateware import lane_order
    time, channel, rising = _events(time, channel, rising)
    loop = _check_channel("Loop-back channel", loop_channel)
    if reference is not None:
        reference = _check_channel("Reference channel", reference)
        if reference == loop:
            raise ValueError(f"The reference channel must differ from the loop-back channel "
                             f"({loop})")
    high = _check_ticks("High", high_ticks)
    low = _check_ticks("Low", low_ticks)
    period = high + low
    on = channel == loop
    t, r = time[on], rising[on]
    problems = []
    if len(t) > 1 and np.any(np.diff(t) == 0):
        raise ValueError(f"Channel {loop} has two edges at one tick")
    verdict = lane_order.check_loopback(t, r, high, low, min_intervals=min_intervals,
                                        lanes=lanes)
    gaps = np.diff(t)
    alternating = r[1:] != r[:-1]
    want = np.where(r[:-1], high, low)
    exact = float(np.mean(alternating & (gaps == want))) if len(gaps) else 0.0
    hmin, hmax = _minmax(gaps[alternating & r[:-1]])
    lmin, lmax = _minmax(gaps[alternating & ~r[:-1]])
    delays = {}
    if reference is not None:
        for direction in (True, False):
            ref_t = time[(channel == reference) & (rising == direction)]
            mine = t[r == direction]
            if len(ref_t) and len(mine):
                delays[direction] = (mine - ref_t[0]) % period
    d_rise = _minmax(delays[True]) if True in delays else None
    d_fall = _minmax(delays[False]) if False in delays else None
    values = np.unique(np.concatenate(list(delays.values()))) if delays else np.zeros(0)
    delay = int(values[0]) if len(values) == 1 and len(delays) == 2 else None
    if not len(t):
        problems.append(f"no edge on channel {loop}: check the cable from the self-test pin")
    if verdict.order is not lane_order.LaneOrder.IN_ORDER:
        problems.append(f"lane order {verdict.order.value}: {verdict.reason}")
    if len(gaps) and exact < 1.0:
        problems.append(f"{int(round((1 - exact) * len(gaps)))} of {len(gaps)} intervals differ "
                        f"from {high} high / {low} low ticks")
    if reference is not None and len(t):
        if len(delays) < 2:
            problems.append(f"no delay: reference channel {reference} and channel {loop} do not "
                            f"both show rising and falling edges")
        elif delay is None:
            problems.append(f"the delay is not constant: rising {d_rise[0]}..{d_rise[1]}, "
                            f"falling {d_fall[0]}..{d_fall[1]} ticks")
    return LoopbackCheck(channel=loop, reference=reference, edges=len(t), high_min=hmin,
                         high_max=hmax, low_min=lmin, low_max=lmax, exact=exact,
                         delay_rising=d_rise, delay_falling=d_fall, delay_ticks=delay,
                         lane_order=verdict, problems=tuple(problems))


# --- running it on an instrument -----------------------------------------------------------------

@dataclasses.dataclass
class SelftestCapture:
    """Events of a self-test run (``time``, ``channel``, ``rising`` arrays), its loss records,
    bad frames, wall seconds and why it stopped."""
    time: np.ndarray
    channel: np.ndarray
    rising: np.ndarray
    losses: list
    frames_bad: int
    seconds: float
    reason: str


def run_selftest(instrument, identity, *, channels, high_ticks, low_ticks, loopback=None,
                 edges=None, duration=None, timeout=30.0, clock=_time.monotonic):
    """Run the self-test pattern on an identified ``instrument`` and collect the edges.

    Sequence: disarm; enable both edge directions on the channels involved only; glitch filters
    off on them; SELFTEST on (mask ``channels``, drive the output pin when ``loopback`` is given);
    RESET_TIME; ARM; read until every channel has ``edges`` edges (or ``duration`` seconds, or
    ``timeout`` seconds); disarm; SELFTEST off. The last tick received is dropped
    (:func:`trim_to_complete`).

    Parameters
    ----------
    instrument : Instrument
    identity : dict
        The IDENTIFY answer (``channels``).
    channels : iterable of int
        Channels that take the internal pattern.
    high_ticks, low_ticks : int
    loopback : int, iterable of int, or None
        Channel(s) wired to the self-test output pin (keep their pins; edges enabled); several
        for the per-channel calibration (``--calibrate``, a fan-out cable).
    edges : int or None
        Stop when every channel involved has more than this many edges.
    duration : float or None
        Stop after this many seconds of host wall time.
    timeout : float
        Give up waiting for ``edges`` after this many seconds.

    Returns
    -------
    SelftestCapture
    """
    from latscope.capture.transport import TransportClosed
    chans = sorted(set(channels))
    n = int(identity.get("channels") or protocol.NUM_CHANNELS)
    if loopback is None:
        looped = set()
    elif isinstance(loopback, (int, np.integer)):
        looped = {int(loopback)}
    else:
        looped = {int(c) for c in loopback}
    involved = sorted(set(chans) | looped)
    for ch in involved:
        if not 0 <= ch < n:
            raise LatscopeError(f"channel {ch} does not exist: the instrument has channels "
                                f"0..{n - 1}")
    mask = sum(1 << c for c in chans)
    enable = sum(1 << c for c in involved)
    instrument.disarm()
    instrument.set_edges(enable, enable)
    for ch in involved:
        instrument.set_glitch(ch, 0)
    instrument.selftest(True, drive_pin=bool(looped), channels=mask,
                        high_ticks=high_ticks, low_ticks=low_ticks)
    instrument.reset_time()
    instrument.discard()
    instrument.decoder.expect_reset()
    parts, losses = [], []
    frames_bad = 0
    counts = dict.fromkeys(involved, 0)
    reason = ""

    def take(results):
        nonlocal frames_bad
        for res in results:
            if len(res.time):
                parts.append((np.asarray(res.time), np.asarray(res.channel),
                              np.asarray(res.rising)))
                ch, k = np.unique(np.asarray(res.channel), return_counts=True)
                for c, m in zip(ch.tolist(), k.tolist(), strict=True):
                    counts[c] = counts.get(c, 0) + m
            losses.extend(res.losses)
            frames_bad += res.frames_bad

    start = clock()
    try:
        instrument.arm()
        start = clock()
        while True:
            take(instrument.read(0.05))
            elapsed = clock() - start
            if duration is not None and elapsed >= duration:
                reason = f"{duration:g} s elapsed"
                break
            if edges is not None and all(counts[c] > edges for c in involved):
                reason = f"{edges} edges per channel collected"
                break
            if duration is None and elapsed >= timeout:
                reason = (f"timed out after {timeout:g} s with "
                          f"{min(counts.values())} edges on the slowest channel")
                break
    except KeyboardInterrupt:
        reason = "interrupted (Ctrl-C)"
    seconds = clock() - start
    try:
        instrument.disarm()
        instrument.selftest(False, channels=mask, high_ticks=high_ticks, low_ticks=low_ticks)
        take(instrument.read(0.0))
    except (TransportClosed, LatscopeError) as error:
        reason += f"; could not switch the self-test off ({error})"
    if parts:
        time = np.concatenate([p[0] for p in parts])
        channel = np.concatenate([p[1] for p in parts])
        rising = np.concatenate([p[2] for p in parts])
    else:
        time, channel, rising = np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, bool)
    time, channel, rising = trim_to_complete(time, channel, rising)
    if edges is not None:   # the same window on every channel: up to the tick of edge `edges`
        per = [time[channel == c] for c in involved]
        if all(len(p) >= edges for p in per):
            cut = max(int(p[edges - 1]) for p in per)
            keep = time <= cut
            time, channel, rising = time[keep], channel[keep], rising[keep]
    return SelftestCapture(time=time, channel=channel, rising=rising, losses=losses,
                           frames_bad=frames_bad, seconds=seconds, reason=reason)


# --- the simulated instrument --------------------------------------------------------------------

class SelftestBenchEngine:
    """The simulated instrument for self-test: the real gateware (``LatscopeCore`` compiled by
    :mod:`latscope.gateware.verilator`, with the simulated bench's parameters), idle pins (no DUT
    traffic), for :class:`latscope.capture.ptyserve.PtyServer`.

    Time advances in steps of ``step_cycles`` capture cycles, a new step only once the simulator
    has finished the previous one (it reports its cycle count after each), so host commands are
    answered within one step however slowly the simulator runs. (The simulated bench's own engine
    lets time run at wall-clock pace, which the simulator can follow only while the core
    fast-forwards; with the self-test on it never does.)

    ``cable`` (channel -> ticks) fits a simulated fan-out cable (the harness's CABLE command): each
    listed channel sees the self-test output pin that many ticks late, in place of its idle pin,
    so ``--calibrate`` can run; without it no channel is connected to ``selftest_out``.
    """
    name = "verilator"

    def __init__(self, *, step_cycles=1 << 15, cable=None):
        from latscope.capture import simbench
        from latscope.gateware import verilator
        if isinstance(step_cycles, bool) or not isinstance(step_cycles, int) or step_cycles < 1:
            raise ValueError(f"Step must be a positive number of cycles, not {step_cycles!r}")
        self._v = verilator
        self.timing = simbench.InstrumentTiming()
        self.step_cycles = step_cycles
        self.command_cycles = simbench.COMMAND_CYCLES
        instrument = verilator.VerilatorInstrument(
            capture_hz=int(self.timing.capture_hz), lanes=self.timing.lanes,
            channel_names=simbench.CHANNEL_ROLES, **simbench.CORE_PARAMS)
        self.proc = instrument.open()
        self.cable = dict(cable or {})
        if self.cable:
            self.proc.write(verilator.Commands().cable(
                self.cable, channels=simbench.CORE_PARAMS["channels"], lanes=self.timing.lanes))
        self._lock = threading.Lock()
        self._requested = 0
        self.started = False
        self.finished = False

    def metadata(self):
        meta = {"simulated": True, "engine": self.name, "traffic": "none (self-test bench)"}
        if self.cable:
            meta["cable_delay_ticks"] = {str(ch): d for ch, d in sorted(self.cable.items())}
        return meta

    def host_bytes(self, data):
        with self._lock:
            self._requested += self.command_cycles
            self.proc.write(self._v.Commands().rx(data).run(self.command_cycles).stats())

    def read(self, max_bytes, timeout=0.0):
        data = self.proc.read_bytes(max_bytes, timeout=timeout)
        if not data:
            with self._lock:
                done = self.proc.stats.get("total_cycles", 0)
                if done >= self._requested:
                    self._requested = done + self.step_cycles
                    self.proc.write(self._v.Commands().run(self.step_cycles).stats())
        return data

    def close(self):
        try:
            self.proc.close_input()
        except OSError:
            pass
        try:
            self.proc.__exit__(None, None, None)
        except Exception:   # noqa: BLE001 - shutting down
            pass


class _SimHandle:
    def __init__(self, engine, server):
        self.engine, self.server, self.path = engine, server, server.path

    def close(self):
        self.server.close()


def open_simulated_instrument(engine="auto", *, cable=None):
    """Start the self-test bench (:class:`SelftestBenchEngine`) on a pseudo-terminal.

    Parameters
    ----------
    engine : {"auto", "verilator"}
        The simulated bench's reference-model engine cannot serve: its capture model
        (``capture_entries_fast``) does not model the self-test generator.
    cable : dict, optional
        A simulated fan-out cable, channel -> delay in ticks (:class:`SelftestBenchEngine`).

    Returns
    -------
    (str, handle)
        The pty path, and a handle to ``close()`` afterwards.
    """
    from latscope.capture.ptyserve import PtyServer
    if engine not in ("auto", "verilator"):
        raise LatscopeError(f"self-test on the simulated bench needs the verilator engine (the "
                            f"reference-model engine does not model the self-test generator); "
                            f"not {engine!r}")
    try:
        bench = SelftestBenchEngine(cable=cable)
    except ImportError as error:
        raise LatscopeError(f"the simulated instrument needs Verilator: {error}") from None
    server = PtyServer(bench)
    return server.path, _SimHandle(bench, server)


# --- the command ---------------------------------------------------------------------------------

EPILOG = """\
exit status: 0 pass; 1 fail (the table says which channel and why); 2 error (bad option, port,
incompatible instrument). Times are in ticks of the instrument (1 / (capture_hz * lanes): 1.25 ns
on the ECPIX-5, 3.125 ns on its x1 build, 10.417 ns on the iCEBreaker). On 4-lane instruments
--high and --low must be at least 4 ticks. Documentation: docs/selftest.md."""


def _channel_list(text):
    out = set()
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            values = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise LatscopeError(f"--channels takes numbers and ranges such as 0-3,5, not "
                                f"{text!r}") from None
        for v in values:
            if not 0 <= v < protocol.NUM_CHANNELS:
                raise LatscopeError(f"--channels: channel {v} is outside "
                                    f"0..{protocol.NUM_CHANNELS - 1}")
            out.add(v)
    if not out:
        raise LatscopeError("--channels names no channel")
    return sorted(out)


def register(subparsers):
    """Add ``latscope selftest`` to ``subparsers``."""
    p = subparsers.add_parser(
        "selftest", help="check the instrument with its internal pattern (no DUT needed)",
        description="Run the instrument's self-test pattern generator (high TICKS, low TICKS, "
                    "repeating) on the selected channels and check that every channel saw only "
                    "the pattern's edges, exactly spaced, all channels at the same tick, with "
                    "nothing lost. With --loopback, also drive the self-test output pin and "
                    "measure the pattern coming back through a cable: pin-to-pin delay, "
                    "high/low durations and the DDR lane order.",
        epilog=EPILOG)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--port", metavar="DEVICE",
                     help="serial device of the instrument, e.g. /dev/ttyUSB1, or "
                          "udp://HOST[:PORT] for the ECPIX-5's Ethernet link")
    src.add_argument("--sim", action="store_true",
                     help="the simulated instrument: the real gateware compiled by Verilator, "
                          "with idle pins (no DUT traffic) and no loop-back cable")
    p.add_argument("--sim-engine", choices=("auto", "verilator"), default="auto",
                   help="simulator for --sim (default auto = verilator; the reference-model "
                        "engine does not model the self-test generator)")
    p.add_argument("--baud", type=int, default=12_000_000,
                   help="serial rate in bit/s (default 12000000; ignored by ptys)")
    p.add_argument("--channels", default=None, metavar="LIST",
                   help="channels that take the internal pattern, e.g. 0-3,6 (default: all; "
                        "with --loopback, all but the loop-back channel)")
    p.add_argument("--high", type=int, default=DEFAULT_HIGH, metavar="TICKS",
                   help=f"pattern high time in ticks, 2..65535 (default {DEFAULT_HIGH})")
    p.add_argument("--low", type=int, default=DEFAULT_LOW, metavar="TICKS",
                   help=f"pattern low time in ticks, 2..65535 (default {DEFAULT_LOW}); keep at "
                        "least one of --high/--low odd so edges fall on both DDR lanes")
    limit = p.add_mutually_exclusive_group()
    limit.add_argument("--edges", type=int, metavar="N",
                       help=f"check N edges per channel (default {DEFAULT_EDGES})")
    limit.add_argument("--duration", type=float, metavar="S",
                       help="run for S seconds of host wall time instead")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="give up waiting for --edges after S seconds (default 30)")
    p.add_argument("--loopback", type=int, metavar="CHANNEL",
                   help="drive the self-test output pin and measure it on CHANNEL, wired to it "
                        "by a short cable (docs/selftest.md)")
    p.add_argument("--reference", type=int, metavar="CHANNEL",
                   help="channel whose internal pattern the loop-back delay is measured against "
                        "(default: the lowest pattern channel)")
    p.add_argument("--calibrate", metavar="FILE",
                   help="measure per-channel timing offsets with the self-test output pin wired "
                        "to every --channels input at once (equal-length fan-out cable) and write "
                        "them to FILE for `latscope capture --calibration FILE`")
    p.add_argument("--sim-skew", metavar="TICKS,...",
                   help="with --sim --calibrate: the simulated fan-out cable's extra delay per "
                        "channel of --channels, in ticks (0..1000, default all 0), to emulate "
                        "channel skew")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=cmd_selftest)


def _plan(args):
    """Validated (pattern channels, loop-back channel, reference) from the options."""
    for name in ("high", "low"):
        value = getattr(args, name)
        if not 2 <= value <= 0xFFFF:
            raise LatscopeError(f"--{name} must be 2..65535 ticks, not {value}")
    if args.high % 2 == 0 and args.low % 2 == 0:
        print("latscope selftest: warning: --high and --low are both even, so every edge falls "
              "on one DDR lane and a lane swap would not show", file=sys.stderr)
    if args.edges is not None and args.edges < 4:
        raise LatscopeError(f"--edges must be at least 4, not {args.edges}")
    if args.duration is not None and not args.duration > 0:
        raise LatscopeError(f"--duration must be positive, not {args.duration}")
    loop = args.loopback
    if loop is not None and not 0 <= loop < protocol.NUM_CHANNELS:
        raise LatscopeError(f"--loopback: channel {loop} is outside 0..{protocol.NUM_CHANNELS - 1}")
    chans = _channel_list(args.channels) if args.channels else list(range(protocol.NUM_CHANNELS))
    if loop is not None:
        if args.channels and loop in chans:
            raise LatscopeError(f"--loopback channel {loop} must not be in --channels: it takes "
                                f"its pin, not the internal pattern")
        chans = [c for c in chans if c != loop]
    reference = args.reference
    if reference is not None:
        if loop is None:
            raise LatscopeError("--reference needs --loopback")
        if reference not in chans:
            raise LatscopeError(f"--reference {reference} must be one of the pattern channels "
                                f"{chans}")
    elif loop is not None and chans:
        reference = chans[0]
    if not chans:
        raise LatscopeError("no channel left for the internal pattern")
    return chans, loop, reference


def _calibrate(args):
    """``latscope selftest --calibrate FILE``: per-channel offsets through a fan-out cable."""
    from latscope.capture import calibration, session
    from latscope.capture.transport import open_port
    if args.loopback is not None:
        raise LatscopeError("--calibrate and --loopback are separate runs: use one of them")
    chans = _channel_list(args.channels) if args.channels else list(range(protocol.NUM_CHANNELS))
    edges = args.edges if args.duration is None and args.edges is not None else \
        (DEFAULT_EDGES if args.duration is None else None)
    port, handle = args.port, None
    if args.sim:   # the simulated instrument with a simulated fan-out cable on --channels
        port, handle = open_simulated_instrument(args.sim_engine,
                                                 cable=_sim_cable(args.sim_skew, chans))
    elif args.sim_skew is not None:
        raise LatscopeError("--sim-skew needs --sim")
    try:
        transport = open_port(port, args.baud)
    except BaseException:
        if handle is not None:
            handle.close()
        raise
    try:
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        cap = run_selftest(instrument, identity, channels=[], high_ticks=args.high,
                           low_ticks=args.low, loopback=chans, edges=edges,
                           duration=args.duration, timeout=args.timeout)
    finally:
        transport.close()
        if handle is not None:
            handle.close()
    measured = calibration.measure_offsets(cap.time, cap.channel, cap.rising, channels=chans)
    calibration.write_calibration(args.calibrate, measured, identity=identity)
    return {"instrument": dict(identity), "simulated": bool(args.sim), "port": port,
            "stopped": cap.reason, "calibration": measured.to_dict(), "file": args.calibrate,
            "ok": True}


def _sim_cable(text, chans):
    """The simulated cable for ``--sim-skew``: channel -> delay ticks over ``chans``."""
    if text is None:
        return dict.fromkeys(chans, 0)
    try:
        delays = [int(part) for part in text.split(",")]
    except ValueError:
        raise LatscopeError(f"--sim-skew must be comma-separated tick counts, not {text!r}") \
            from None
    if len(delays) != len(chans):
        raise LatscopeError(f"--sim-skew lists {len(delays)} delays for {len(chans)} channels "
                            f"{chans}")
    if any(not 0 <= d <= 1000 for d in delays):
        raise LatscopeError(f"--sim-skew delays must be 0..1000 ticks, not {text!r}")
    return dict(zip(chans, delays, strict=True))


def selftest(args):
    """Run ``latscope selftest`` with parsed ``args``; returns a JSON-ready result dict."""
    from latscope.capture import session
    from latscope.capture.transport import open_port
    if getattr(args, "calibrate", None):
        return _calibrate(args)
    if getattr(args, "sim_skew", None) is not None:
        raise LatscopeError("--sim-skew needs --sim --calibrate")
    chans, loop, reference = _plan(args)
    if args.sim and loop is not None:
        raise LatscopeError("--loopback needs a cable from the self-test output pin to a channel "
                            "input, and the simulated bench has none (its simulator does not "
                            "connect selftest_out to an input); run --sim without --loopback, or "
                            "on a board with the cable fitted")
    edges = args.edges if args.duration is None and args.edges is not None else \
        (DEFAULT_EDGES if args.duration is None else None)
    handle = None
    port = args.port
    if args.sim:
        port, handle = open_simulated_instrument(args.sim_engine)
    transport = None
    try:
        transport = open_port(port, args.baud)
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        tick_hz = identity["tick_hz"]
        least = max(2, int(identity.get("lanes") or 1))   # model_capture.selftest_min_ticks
        if min(args.high, args.low) < least:
            raise LatscopeError(f"--high and --low must be at least {least} ticks on this "
                                f"{identity.get('lanes')}-lane instrument, not {args.high} and "
                                f"{args.low}")
        involved = len(chans) + (loop is not None)
        rate = 2 * involved * tick_hz / (args.high + args.low)
        capacity = args.baud / 10 / BYTES_PER_EVENT
        if str(port).startswith("udp://"):
            capacity = 119e6 / BYTES_PER_EVENT       # 1000BASE-T UDP payload, bytes/s
        if not args.sim and rate > 0.5 * capacity:
            print(f"latscope selftest: warning: the pattern makes {rate:,.0f} events/s, more "
                  f"than half of what the link carries (~{capacity:,.0f}/s); "
                  f"expect FIFO overflow, use longer --high/--low", file=sys.stderr)
        cap = run_selftest(instrument, identity, channels=chans, high_ticks=args.high,
                           low_ticks=args.low, loopback=loop, edges=edges,
                           duration=args.duration, timeout=args.timeout)
    finally:
        if transport is not None:
            transport.close()
        if handle is not None:
            handle.close()
    check = check_pattern(cap.time, cap.channel, cap.rising,
                          channels=chans, high_ticks=args.high, low_ticks=args.low,
                          losses=cap.losses, min_edges=max(4, edges or 4))
    result = {
        "instrument": {k: v for k, v in identity.items()},
        "simulated": bool(args.sim),
        "port": port,
        "stopped": cap.reason,
        "seconds": round(cap.seconds, 3),
        "frames_bad": cap.frames_bad,
        "pattern": check.to_dict(),
        "loopback": None,
    }
    ok = check.ok
    if loop is not None:
        lb = analyse_loopback(cap.time, cap.channel, cap.rising, loop_channel=loop,
                              lanes=int(identity.get("lanes") or 2),
                              high_ticks=args.high, low_ticks=args.low, reference=reference)
        result["loopback"] = lb.to_dict()
        ok = ok and lb.ok
    result["ok"] = ok
    return result


def _range(lo, hi):
    if lo is None:
        return "-"
    return f"{lo}" if lo == hi else f"{lo}..{hi}"


def format_report(result):
    """The human-readable report of a :func:`selftest` result."""
    ident = result["instrument"]
    if "calibration" in result:
        c = result["calibration"]
        tick_ns = 1e9 / ident["tick_hz"]
        lines = [f"calibration {c['edges']} edges per channel; offsets (ticks late against the "
                 f"median channel; {tick_ns:.3f} ns each):"]
        for ch, off, spread in zip(c["channels"], c["offsets_ticks"], c["spread_ticks"],
                                   strict=True):
            lines.append(f"  channel {ch}: {off:+d} ticks (spread {spread})")
        lines.append(f"written to {result['file']}")
        return "\n".join(lines)
    pat = result["pattern"]
    tick_ns = 1e9 / ident["tick_hz"]
    names = ident.get("channel_names") or []
    high, low = pat["high_ticks"], pat["low_ticks"]
    lines = [
        f"instrument  {ident.get('board', '?')}{' (simulated)' if result['simulated'] else ''}, "
        f"tick {tick_ns:.3f} ns, protocol {ident.get('protocol_version', '?')}",
        f"pattern     {high} ticks high ({high * tick_ns / 1e3:.3f} µs), {low} ticks low "
        f"({low * tick_ns / 1e3:.3f} µs); stopped: {result['stopped']}",
        "",
        f"{'channel':>7}  {'role':<7} {'edges':>6}  {'high':>13}  {'low':>13}  {'errors':>6}  "
        f"verdict",
    ]
    for c in pat["channels"]:
        role = names[c["channel"]] if c["channel"] < len(names) else ""
        lines.append(f"{c['channel']:>7}  {role:<7} {c['edges']:>6}  "
                     f"{_range(c['high_min'], c['high_max']):>13}  "
                     f"{_range(c['low_min'], c['low_max']):>13}  {c['errors']:>6}  "
                     f"{'PASS' if c['ok'] else 'FAIL: ' + '; '.join(c['problems'])}")
    lost = ", ".join(f"{x['lost']} {x['cause']}" for x in pat["losses"]) or "none"
    lines.append(f"\nlost        {lost}")
    for problem in pat["problems"]:
        lines.append(f"FAIL        {problem}")
    lb = result.get("loopback")
    if lb:
        lo = lb["lane_order"]
        if lb["delay_ticks"] is not None:
            delay = f"{lb['delay_ticks']} ticks ({lb['delay_ticks'] * tick_ns:.3f} ns)"
        elif lb["delay_rising"] is None and lb["delay_falling"] is None:
            delay = "not measured"
        else:
            delay = (f"not constant: rising {_range(*(lb['delay_rising'] or (None, None)))}, "
                     f"falling {_range(*(lb['delay_falling'] or (None, None)))} ticks")
        lines += [
            "",
            f"loop-back   channel {lb['channel']}, {lb['edges']} edges"
            + (f", delay vs channel {lb['reference']}: {delay} (modulo the {high + low}-tick "
               f"period)" if lb["reference"] is not None else ""),
            f"            high {_range(lb['high_min'], lb['high_max'])} ticks, low "
            f"{_range(lb['low_min'], lb['low_max'])} ticks, {lb['exact']:.0%} exact",
            f"lane order  {lo['order']}: {lo['reason']} (edges per lane "
            f"{'/'.join(str(n) for n in lo['edges_per_lane'])})",
        ]
        for problem in lb["problems"]:
            lines.append(f"FAIL        {problem}")
    lines.append("")
    lines.append("PASS" if result["ok"] else "FAIL")
    return "\n".join(lines)


def cmd_selftest(args):
    """Handler of ``latscope selftest``: 0 pass, 1 fail."""
    result = selftest(args)
    if args.json:
        print(json.dumps(result, sort_keys=True, default=str))
    else:
        print(format_report(result))
    return 0 if result["ok"] else 1
