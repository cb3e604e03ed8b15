"""Sub-tick channel alignment with the input delay lines (``latscope selftest --calibrate
--sub-tick``).

A channel's timestamps are whole ticks: an edge reaching the input register at ``a`` is stamped
``ceil(a / tick)``. With the self-test output fanned out to every channel, all channels see the
same edges, always at the same phase of the tick; raising one channel's delay line by ``T`` taps
moves its stamp one tick later exactly when ``a + T * tap`` passes the next tick boundary. So the
first such ``T`` (the *step*, :func:`find_steps`) locates ``a`` within one tap below that boundary,
and the second step, one tick further, measures the tap itself: ``tap = tick / (T2 - T1)``.
Measured against the tick, which the capture clock fixes, the tap's tolerance over process,
voltage and temperature does not enter.

Stamps are compared between channels within each run (the self-test pattern's phase against the
time base differs from run to run): ``measure(taps, reference)`` sets the delay lines and
returns each channel's lag behind ``reference`` in whole ticks, ``reference`` staying at its
setting while the others are swept. Steps are found by bisection, all channels at once (the stamp
never moves earlier when taps are added), so a channel's steps cost about 2 x 7 runs instead of a
sweep through 128 settings.

:func:`align` then gives each channel ``T1[c] - 1`` taps: every channel's next step is then one
tap away, so each samples within one of its taps before a tick boundary, and all channels sample at
the same phase of the tick within one tap, whatever each tap's size (no tap estimate enters the
alignment; it only converts taps to ps in the report). What remains between channels is whole
ticks, which the calibration's tick offsets correct exactly. It re-measures the steps at the new
settings to report the skew after alignment.
"""

from dataclasses import dataclass

import numpy as np

from latscope import LatscopeError
from latscope.gateware.protocol import DELAY_TAP_PS, DELAY_TAPS

__all__ = ["Steps", "find_steps", "SubTickAlignment", "align"]


@dataclass(frozen=True)
class Steps:
    """Result of :func:`find_steps` for the swept channels.

    Attributes
    ----------
    base : dict
        Channel -> lag behind the reference at the start settings, ticks.
    steps : dict
        Channel -> list, per level ``n`` (1, 2, ...), the fewest taps added to the start setting
        that make the channel's lag ``base + n``; None where the last setting does not reach it.
    """
    base: dict
    steps: dict


def find_steps(measure, channels, reference, *, start=None, levels=2, limit=DELAY_TAPS - 1):
    """Bisect, for every channel of ``channels`` but ``reference``, the taps at which its stamp
    moves 1, 2, ... ``levels`` ticks later than at its ``start`` setting.

    Parameters
    ----------
    measure : callable
        ``measure(taps, reference)`` -> ``{channel: lag}``: set every channel's delay line to
        ``taps[channel]`` and return lags behind ``reference`` in whole ticks.
    channels : sequence of int
    reference : int
        Stays at its start setting.
    start : dict, optional
        Channel -> setting to start from (default 0).
    levels : int
        Steps to find per channel.
    limit : int
        Highest setting.

    Returns
    -------
    Steps
    """
    start = {c: int((start or {}).get(c, 0)) for c in channels}
    swept = [c for c in channels if c != reference]
    base = measure(dict(start), reference)
    top = dict(start) | dict.fromkeys(swept, limit)
    highest = measure(top, reference)
    steps = {c: [] for c in swept}
    lo = dict(start)
    for level in range(1, levels + 1):
        bounds = {}
        for c in swept:
            if highest[c] - base[c] < level:
                steps[c].append(None)
            else:
                bounds[c] = [lo[c], limit]      # lag below base + level at [0], reached at [1]
        while any(hi - low > 1 for low, hi in bounds.values()):
            probe = dict(start)
            for c, (low, hi) in bounds.items():
                if hi - low > 1:
                    probe[c] = (low + hi) // 2
            lag = measure(probe, reference)
            for c, bound in bounds.items():
                if bound[1] - bound[0] > 1:
                    bound[lag[c] - base[c] >= level] = probe[c]
        for c, (_, hi) in bounds.items():
            steps[c].append(hi - start[c])
            lo[c] = hi
    return Steps(base={c: int(base[c]) for c in channels}, steps=steps)


@dataclass(frozen=True)
class SubTickAlignment:
    """Result of :func:`align` (channels in the order given).

    Attributes
    ----------
    channels : tuple of int
    tick_ps : float
    tap_ps : tuple of float
        Per channel, the measured tap (``tick / (T2 - T1)``), or the mean of the others' (or the
        nominal) where the second step was out of reach.
    tap_measured : tuple of bool
    steps : tuple of int
        Per channel, taps from 0 to its first step (``T1``).
    skew_before_ps : tuple of float
        Per channel, its arrival against the (lower) median channel's before alignment, ps (whole
        ticks included), each within half a tap of the truth.
    taps : tuple of int
        The settings chosen: ``T1 - 1``, one tap before each channel's step.
    steps_after : tuple of int
        Per channel, taps from its setting to its next step, measured again at the settings.
    skew_after_ps : tuple of float
        Per channel, its arrival at the settings against the (lower) median channel's, after the
        whole-tick offsets, ps (resolution one tap).
    offsets_ticks : tuple of int
        Per channel, whole ticks it lags the (lower) median channel at the settings.
    """
    channels: tuple
    tick_ps: float
    tap_ps: tuple
    tap_measured: tuple
    steps: tuple
    skew_before_ps: tuple
    taps: tuple
    steps_after: tuple
    skew_after_ps: tuple
    offsets_ticks: tuple

    @property
    def spread_before_ps(self):
        """Largest minus smallest ``skew_before_ps``."""
        return max(self.skew_before_ps) - min(self.skew_before_ps)

    @property
    def spread_after_ps(self):
        """Largest minus smallest ``skew_after_ps``."""
        return max(self.skew_after_ps) - min(self.skew_after_ps)

    def to_dict(self):
        return {"channels": list(self.channels), "tick_ps": self.tick_ps,
                "tap_ps": [round(v, 2) for v in self.tap_ps],
                "tap_measured": list(self.tap_measured), "steps": list(self.steps),
                "skew_before_ps": [round(v, 1) for v in self.skew_before_ps],
                "taps": list(self.taps), "steps_after": list(self.steps_after),
                "skew_after_ps": [round(v, 1) for v in self.skew_after_ps],
                "offsets_ticks": list(self.offsets_ticks),
                "spread_before_ps": round(self.spread_before_ps, 1),
                "spread_after_ps": round(self.spread_after_ps, 1)}


def _first_steps(measure, chans, *, start=None, levels=2):
    """Steps of every channel: all but the first against the first, then the first against the
    second (a channel cannot be swept against itself). Returns (lags behind chans[0] at the start
    settings, {channel: [T1, T2, ...]})."""
    a = find_steps(measure, chans, chans[0], start=start, levels=levels)
    b = find_steps(measure, chans[:2], chans[1], start=start, levels=levels)
    steps = dict(a.steps)
    steps[chans[0]] = b.steps[chans[0]]
    return a.base, steps


def _relative(values, lags):
    """Each value against the lower median of ``lags``' channel order (whole-tick reference)."""
    order = np.argsort(np.asarray(lags), kind="stable")
    ref = order[(len(lags) - 1) // 2]
    return [v - values[ref] for v in values], ref


def align(measure, channels, *, tick_ps, nominal_tap_ps=DELAY_TAP_PS, apply=None):
    """Measure every channel's phase, align them all with the delay lines, measure again.

    Parameters
    ----------
    measure : callable
        As for :func:`find_steps`.
    channels : sequence of int
        At least 2, all wired to the self-test output.
    tick_ps : float
    nominal_tap_ps : float
        Used only where no channel's tap could be measured.
    apply : callable, optional
        ``apply(taps)`` is called with the chosen settings (``measure`` receives them anyway).

    Returns
    -------
    SubTickAlignment
    """
    chans = list(dict.fromkeys(int(c) for c in channels))
    if len(chans) < 2:
        raise LatscopeError("sub-tick alignment needs at least 2 channels wired to the self-test "
                            "output")
    lags, steps = _first_steps(measure, chans)
    missing = [c for c in chans if steps[c][0] is None]
    if missing:
        raise LatscopeError(f"channel(s) {', '.join(map(str, missing))} did not move by a tick "
                            f"over {DELAY_TAPS} delay settings: is the self-test output wired "
                            f"to them, and does this build have input delay lines?")
    measured = {c: tick_ps / (s[1] - s[0]) for c, s in steps.items() if s[1] is not None}
    fallback = float(np.mean(list(measured.values()))) if measured else nominal_tap_ps
    tap = [measured.get(c, fallback) for c in chans]
    t1 = [steps[c][0] for c in chans]
    arrival = [lags[c] * tick_ps - (t1[i] - 0.5) * tap[i] for i, c in enumerate(chans)]
    before, _ = _relative(arrival, arrival)
    settings = {c: t1[i] - 1 for i, c in enumerate(chans)}
    if apply is not None:
        apply(dict(settings))
    lags_after, again = _first_steps(measure, chans, start=settings, levels=1)
    t1_after = [again[c][0] for c in chans]
    if None in t1_after:
        raise LatscopeError("a channel no longer steps after alignment: the delay lines did not "
                            "keep their settings")
    lag_after = [lags_after[c] for c in chans]
    # the lag parts cancel against the whole-tick offsets: what remains is below a tick
    phase = [-(t1_after[i] - 0.5) * tap[i] for i in range(len(chans))]
    offsets, ref = _relative(lag_after, lag_after)
    after = [p - phase[ref] for p in phase]
    return SubTickAlignment(
        channels=tuple(chans), tick_ps=float(tick_ps), tap_ps=tuple(tap),
        tap_measured=tuple(c in measured for c in chans), steps=tuple(t1),
        skew_before_ps=tuple(before), taps=tuple(settings[c] for c in chans),
        steps_after=tuple(t1_after), skew_after_ps=tuple(after),
        offsets_ticks=tuple(int(o) for o in offsets))
