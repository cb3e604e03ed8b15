"""A one-line live progress display for captures, on stderr, refreshed about 4 times a second."""

import sys
import time as _time

__all__ = ["CaptureProgress"]


def _si(value):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{unit}"
    return f"{value:.0f}"


def _clock_text(seconds):
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class CaptureProgress:
    """Show elapsed time, events, events/s, bytes/event and loss counts of a running capture,
    and with limits, the count against the nearest limit, its percentage and the time left.

    Parameters
    ----------
    stream : file
        Where to draw (default ``sys.stderr``).
    enabled : bool or None
        ``None``: draw only when ``stream`` is a terminal.
    interval : float
        Seconds between redraws.
    limits : Limits or None
        The capture's stop conditions (:class:`latscope.capture.link.session.Limits`). The line
        shows the one nearest to completion: ``packets 1.20k/20.00k  6.0%  ETA 0:12``. The ETA uses
        the average rate since the start, so it is there from the first redraw after the first
        counted item (within the first second); a duration limit's ETA is exact.
    """

    def __init__(self, stream=None, enabled=None, interval=0.25, clock=_time.monotonic,
                 limits=None):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.interval = interval
        self.clock = clock
        self.limits = limits
        self._last = None
        self._last_events = 0
        self._last_time = None
        self._rate = 0.0
        self._drawn = False

    def _limit_text(self, outcome):
        """``"packets 1.20k/20.00k  6.0%  ETA 0:12"`` for the limit nearest completion, or ''."""
        limits = self.limits
        if limits is None:
            return ""
        candidates = []       # (fraction done, text, seconds left or None)
        for name, done, limit in (("packets", outcome.packets, limits.packets),
                                  ("events", outcome.events, limits.events)):
            if limit:
                fraction = min(done / limit, 1.0)
                left = None
                if done and outcome.seconds > 0:
                    left = (limit - done) / (done / outcome.seconds)
                candidates.append((fraction, f"{name} {_si(done)}/{_si(limit)}", left))
        if limits.duration:
            fraction = min(outcome.seconds / limits.duration, 1.0)
            candidates.append((fraction, f"time {outcome.seconds:.0f}/{limits.duration:g} s",
                               limits.duration - outcome.seconds))
        if not candidates:
            return ""
        fraction, text, left = max(candidates, key=lambda c: c[0])
        eta = _clock_text(left) if left is not None else "-:--"
        return f"{text} {fraction:6.1%}  ETA {eta}  "

    def line(self, outcome):
        """The text of the progress line for a
        :class:`~latscope.capture.link.session.CaptureOutcome`."""
        per_event = outcome.bytes / outcome.events if outcome.events else 0.0
        return (f"{outcome.seconds:7.1f} s  {self._limit_text(outcome)}{_si(outcome.events):>8} "
                f"events  {_si(self._rate):>8} ev/s  {per_event:5.2f} B/ev  "
                f"overflow lost {outcome.lost_overflow}  link lost {outcome.lost_link}")

    def __call__(self, outcome):
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            return
        if self._last_time is not None and now > self._last_time:
            self._rate = (outcome.events - self._last_events) / (now - self._last_time)
        self._last, self._last_time, self._last_events = now, now, outcome.events
        if self.enabled:
            self.stream.write("\r\x1b[K" + self.line(outcome))
            self.stream.flush()
            self._drawn = True

    def done(self):
        """End the progress line so that later messages start on a fresh line."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
