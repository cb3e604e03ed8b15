"""Check and calibrate the instrument without a device under test (``latscope selftest``).

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
* :func:`run_selftest` drives an :class:`~latscope.capture.link.session.Instrument`;
  :func:`selftest` and :func:`calibrate` open the instrument (or the simulated one of
  :mod:`latscope.capture.sim.selftest_bench`), run it and judge the result.

The user documentation is ``docs/selftest.md``.
"""

import dataclasses
import time as _time

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.outputs import check_output
from latscope.capture.link import calibration, deskew, open_port, session
from latscope.capture.link.transport import DEFAULT_BAUD, TransportClosed
from latscope.capture.sim.delay_bench import DelayBench
from latscope.capture.sim.selftest_bench import open_simulated_instrument
from latscope.gateware import lane_order, protocol

__all__ = [
    "ChannelCheck", "PatternCheck", "LoopbackCheck", "check_pattern", "analyse_loopback",
    "trim_to_complete", "SelftestCapture", "run_selftest", "selftest", "calibrate",
    "lag_measure", "align_sub_tick", "DEFAULT_HIGH", "DEFAULT_LOW", "DEFAULT_EDGES",
    "SUB_TICK_EDGES",
]

#: Default pattern, ticks. Both odd, so rising and falling edges fall on different DDR lanes, and
#: slow enough that 8 channels stay far below the 12 Mbaud link's ~540,000 events/s on every board
#: (ECPIX-5: 62.5 µs period, 8 channels x 2 edges -> 256,000 events/s).
DEFAULT_HIGH = 10001
DEFAULT_LOW = 9999
#: Edges per channel collected when neither ``--edges`` nor ``--duration`` is given.
DEFAULT_EDGES = 200
#: Edges per channel in each run of the sub-tick sweep (half of them rising, the ones compared).
SUB_TICK_EDGES = 32
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


# --- sub-tick alignment ---------------------------------------------------------------------------

def lag_measure(instrument, identity, channels, *, high_ticks, low_ticks, edges=SUB_TICK_EDGES,
                timeout=30.0):
    """The ``measure(taps, reference)`` of :mod:`latscope.capture.link.deskew` on an instrument
    with the self-test output fanned out to ``channels``: sets each channel's delay line to
    ``taps`` (0 where not given; only changed settings are sent), runs the pattern for ``edges``
    edges per channel and returns each channel's lag behind ``reference`` in whole ticks (the
    median over the rising edges, matched by order: :func:`calibration.measure_offsets`)."""
    chans = sorted(set(channels))
    current = {}

    def measure(taps, reference):
        for ch in chans:
            setting = int(taps.get(ch, 0))
            if current.get(ch) != setting:
                instrument.set_delay(ch, setting)
                current[ch] = setting
        cap = run_selftest(instrument, identity, channels=[], high_ticks=high_ticks,
                           low_ticks=low_ticks, loopback=chans, edges=edges, timeout=timeout)
        if cap.losses:          # edges are matched by order: a lost one would shift the lags
            raise LatscopeError(f"the instrument lost {sum(x.lost for x in cap.losses)} events "
                                f"during the sub-tick sweep; use longer --high/--low")
        up = cap.rising
        lag = calibration.measure_offsets(cap.time[up], cap.channel[up], up[up], channels=chans,
                                          min_edges=max(2, edges // 4))
        offsets = dict(zip(lag.channels, lag.offsets, strict=True))
        return {ch: offsets[ch] - offsets[reference] for ch in chans}

    return measure


def align_sub_tick(instrument, identity, channels, *, high_ticks, low_ticks,
                   edges=SUB_TICK_EDGES, timeout=30.0):
    """Align ``channels`` below one tick with the instrument's input delay lines
    (:func:`latscope.capture.link.deskew.align` over :func:`lag_measure`) and leave the delay
    lines at the settings found; returns the
    :class:`~latscope.capture.link.deskew.SubTickAlignment`. Refused in one line
    (:class:`LatscopeError`) by an instrument without delay lines."""
    chans = sorted(set(channels))
    for ch in chans:                # refused here, before any run, where there are none
        instrument.set_delay(ch, 0)
    measure = lag_measure(instrument, identity, chans, high_ticks=high_ticks,
                          low_ticks=low_ticks, edges=edges, timeout=timeout)
    result = deskew.align(measure, chans, tick_ps=1e12 / identity["tick_hz"])
    for ch, taps in zip(result.channels, result.taps, strict=True):
        instrument.set_delay(ch, taps)
    return result


# --- runs on an instrument ----------------------------------------------------------------------

def calibrate(output, port=None, *, simulated=False, engine="auto", cable=None,
              baud=DEFAULT_BAUD, channels, high_ticks=DEFAULT_HIGH, low_ticks=DEFAULT_LOW,
              edges=DEFAULT_EDGES, duration=None, timeout=30.0, force=False, sub_tick=False,
              cable_ps=None, sim_tap_ps=protocol.DELAY_TAP_PS, jitter_ps=0.0):
    """Measure per-channel timing offsets through a fan-out cable from the self-test output pin
    to every channel of ``channels`` and write them to ``output`` (for
    ``latscope capture --calibration``); returns a JSON-ready result dict.

    ``port``: the instrument's serial device or ``udp://HOST[:PORT]``; with ``simulated``, the
    self-test bench on ``engine`` with the simulated ``cable`` (channel -> extra delay, ticks;
    default: every channel of ``channels``, no extra delay). ``edges`` per channel, or run for
    ``duration`` seconds (``edges=None``); give up after ``timeout`` seconds. ``output`` is
    checked before the instrument starts; ``force`` replaces an existing file.

    ``sub_tick``: first align the channels below one tick with the input delay lines
    (:func:`align_sub_tick`); the offsets are then measured at those settings, and the file
    holds both. Simulated, this runs on the delay-line bench
    (:class:`~latscope.capture.sim.delay_bench.DelayBench`) with the fan-out cable's delays
    ``cable_ps`` (channel -> ps; default 0 on every channel of ``channels``) and delay cells of
    ``sim_tap_ps`` per tap, the self-test pin's edges jittering by ``jitter_ps`` (rms).
    """
    check_output(output, force=force)
    handle = None
    if simulated and sub_tick:
        transport = DelayBench(dict.fromkeys(channels, 0) if cable_ps is None else cable_ps,
                               tap_ps=sim_tap_ps, jitter_ps=jitter_ps)
        port = "delay-line bench"
    else:
        if simulated:   # the simulated instrument with a simulated fan-out cable on the channels
            port, handle = open_simulated_instrument(
                engine, cable=dict.fromkeys(channels, 0) if cable is None else cable)
        try:
            transport = open_port(port, baud)
        except BaseException:
            if handle is not None:
                handle.close()
            raise
    alignment = None
    try:
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        if sub_tick:
            alignment = align_sub_tick(instrument, identity, channels, high_ticks=high_ticks,
                                       low_ticks=low_ticks, timeout=timeout)
        cap = run_selftest(instrument, identity, channels=[], high_ticks=high_ticks,
                           low_ticks=low_ticks, loopback=channels, edges=edges,
                           duration=duration, timeout=timeout)
    finally:
        transport.close()
        if handle is not None:
            handle.close()
    measured = calibration.measure_offsets(cap.time, cap.channel, cap.rising, channels=channels)
    calibration.write_calibration(output, measured, identity=identity, force=force,
                                  sub_tick=alignment)
    result = {"instrument": dict(identity), "simulated": bool(simulated), "port": port,
              "stopped": cap.reason, "calibration": measured.to_dict(), "file": output,
              "ok": True}
    if alignment is not None:
        result["sub_tick"] = alignment.to_dict()
        if simulated:
            result["sub_tick"]["model"] = {
                "cable_ps": {str(c): ps for c, ps in sorted(transport.timing.skew_ps.items())},
                "tap_ps": sim_tap_ps}
    return result


def selftest(port=None, *, simulated=False, engine="auto", baud=DEFAULT_BAUD, channels,
             high_ticks=DEFAULT_HIGH, low_ticks=DEFAULT_LOW, loopback=None, reference=None,
             edges=DEFAULT_EDGES, duration=None, timeout=30.0, warn=None):
    """Run the self-test pattern on ``channels`` (and, with ``loopback``, through a cable from
    the self-test output pin to that channel) and judge it; returns a JSON-ready result dict
    (``ok``, ``pattern``, ``loopback``, the instrument's identity).

    ``port``: the instrument's serial device or ``udp://HOST[:PORT]``; with ``simulated``, the
    self-test bench on ``engine`` (no loop-back cable). ``reference``: the pattern channel the
    loop-back delay is measured against. ``edges`` per channel, or run for ``duration`` seconds
    (``edges=None``); give up after ``timeout`` seconds. ``warn`` is called with a line when
    the pattern makes more events than the link carries.
    """
    if simulated and loopback is not None:
        raise LatscopeError("--loopback needs a cable from the self-test output pin to a channel "
                            "input, and the simulated bench has none (its simulator does not "
                            "connect selftest_out to an input); run --sim without --loopback, or "
                            "on a board with the cable fitted")
    handle = None
    if simulated:
        port, handle = open_simulated_instrument(engine)
    transport = None
    try:
        transport = open_port(port, baud)
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        tick_hz = identity["tick_hz"]
        least = max(2, int(identity.get("lanes") or 1))   # model_capture.selftest_min_ticks
        if min(high_ticks, low_ticks) < least:
            raise LatscopeError(f"--high and --low must be at least {least} ticks on this "
                                f"{identity.get('lanes')}-lane instrument, not {high_ticks} and "
                                f"{low_ticks}")
        involved = len(channels) + (loopback is not None)
        rate = 2 * involved * tick_hz / (high_ticks + low_ticks)
        capacity = baud / 10 / BYTES_PER_EVENT
        if str(port).startswith("udp://"):
            capacity = 119e6 / BYTES_PER_EVENT       # 1000BASE-T UDP payload, bytes/s
        if not simulated and rate > 0.5 * capacity and warn is not None:
            warn(f"the pattern makes {rate:,.0f} events/s, more than half of what the link "
                 f"carries (~{capacity:,.0f}/s); expect FIFO overflow, use longer --high/--low")
        cap = run_selftest(instrument, identity, channels=channels, high_ticks=high_ticks,
                           low_ticks=low_ticks, loopback=loopback, edges=edges,
                           duration=duration, timeout=timeout)
    finally:
        if transport is not None:
            transport.close()
        if handle is not None:
            handle.close()
    check = check_pattern(cap.time, cap.channel, cap.rising,
                          channels=channels, high_ticks=high_ticks, low_ticks=low_ticks,
                          losses=cap.losses, min_edges=max(4, edges or 4))
    result = {
        "instrument": {k: v for k, v in identity.items()},
        "simulated": bool(simulated),
        "port": port,
        "stopped": cap.reason,
        "seconds": round(cap.seconds, 3),
        "frames_bad": cap.frames_bad,
        "pattern": check.to_dict(),
        "loopback": None,
    }
    ok = check.ok
    if loopback is not None:
        lb = analyse_loopback(cap.time, cap.channel, cap.rising, loop_channel=loopback,
                              lanes=int(identity.get("lanes") or 2),
                              high_ticks=high_ticks, low_ticks=low_ticks, reference=reference)
        result["loopback"] = lb.to_dict()
        ok = ok and lb.ok
    result["ok"] = ok
    return result
