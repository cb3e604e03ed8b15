"""A one-line live progress display for captures, on stderr, refreshed about 4 times a second."""

import sys
import time as _time

__all__ = ["CaptureProgress"]


def _si(value):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{unit}"
    return f"{value:.0f}"


class CaptureProgress:
    """Show elapsed time, events, events/s, bytes/event and loss counts of a running capture.

    Parameters
    ----------
    stream : file
        Where to draw (default ``sys.stderr``).
    enabled : bool or None
        ``None``: draw only when ``stream`` is a terminal.
    interval : float
        Seconds between redraws.
    """

    def __init__(self, stream=None, enabled=None, interval=0.25, clock=_time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.interval = interval
        self.clock = clock
        self._last = None
        self._last_events = 0
        self._last_time = None
        self._rate = 0.0
        self._drawn = False

    def line(self, outcome):
        """The text of the progress line for a :class:`~latscope.capture.session.CaptureOutcome`."""
        per_event = outcome.bytes / outcome.events if outcome.events else 0.0
        return (f"{outcome.seconds:7.1f} s  {_si(outcome.events):>8} events  "
                f"{_si(self._rate):>8} ev/s  {per_event:5.2f} B/ev  "
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
