"""Judge the internal self-test pattern as it was captured: arrays in, verdicts out.

The gateware has a self-test generator (``Opcode.SELFTEST``, ``gateware/capture.py``): a pattern
``high`` ticks high and ``low`` ticks low, repeating, injected into the selected channels right
after the input synchronisers (so it is timed exactly like a pin) and, with flag bit 1, driven on
the board's self-test output pin for a loop-back cable. This module judges the edges it made;
:mod:`latscope.capture.selftest` runs it on an instrument:

* :func:`check_pattern` (arrays in, :class:`PatternCheck` out): every channel saw only pattern
  edges, alternating, spaced exactly ``high``/``low`` ticks, every channel at the same ticks, and
  nothing was lost.
* :func:`analyse_loopback` (arrays in, :class:`LoopbackCheck` out): the pattern as it came back
  through a cable on one channel: pin-to-pin delay against the internal pattern, high and low
  durations, and the DDR lane-order verdict of :func:`latscope.gateware.lane_order.check_loopback`.
* :func:`trim_to_complete` drops the last tick received, whose edges may be incomplete.

The user documentation is ``docs/selftest.md``.
"""

import dataclasses

import numpy as np

from latscope.gateware import lane_order, protocol

__all__ = [
    "ChannelCheck", "PatternCheck", "LoopbackCheck", "check_pattern", "analyse_loopback",
    "trim_to_complete",
]


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

