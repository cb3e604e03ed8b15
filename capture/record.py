"""Record a capture file from any source: an instrument on a serial port or UDP, or the
simulated bench. The one function behind ``latscope capture``, ``latscope run`` and the demo.

The file is written in fsynced chunks and always finalised once recording has started: a stop
request (``stop``, Ctrl-C or SIGTERM) ends the capture cleanly. A signal before recording
started (while the instrument or the simulator is starting) raises, and no file is written.
"""

import functools
import signal
import sys

from latscope import LatscopeError, Terminated
from latscope.capture.files import capfile
from latscope.capture.files.outputs import check_output
from latscope.capture.link import open_port, session
from latscope.capture.link.calibration import INPUT_DELAY_KEY, load_calibration
from latscope.capture.link.transport import DEFAULT_BAUD
from latscope.capture.sim.sim_port import SimulatedSource

__all__ = ["record", "EARLY_STOP", "StopOnSignals"]

#: The message of the ``KeyboardInterrupt``/``Terminated`` raised when a signal comes before
#: recording started.
EARLY_STOP = "before recording started: no file was written"


class StopOnSignals:
    """While entered, SIGINT and SIGTERM set a stop reason instead of raising; calling the
    object returns that reason (or ``None``). A second Ctrl-C raises ``KeyboardInterrupt``.
    Outside the main thread no handler can be set, and the object only returns ``None``."""

    def __init__(self):
        self.reason = None
        self._old = {}

    def __call__(self):
        return self.reason

    def _handler(self, signum, frame):
        if signum == signal.SIGINT and self.reason:
            raise KeyboardInterrupt
        self.reason = "interrupted (Ctrl-C)" if signum == signal.SIGINT else \
            "interrupted (SIGTERM)"

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handler)
            except ValueError:      # not the main thread
                pass
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _before_recording():
    """Re-raise the signal being handled with :data:`EARLY_STOP` as its message."""
    raise type(sys.exc_info()[1])(EARLY_STOP) from None


def _check_ticks(identity, tick_hz):
    """The simulated instrument must tick as the simulation it plays (its ground truth is in
    those ticks)."""
    if abs(identity["tick_hz"] - tick_hz) > 1e-6 * tick_hz:
        raise LatscopeError(f"Simulated instrument ticks must be the model's {tick_hz:g} Hz, "
                            f"not {identity['tick_hz']!r}")


def record(source, output, *, config=None, limits=None, baud=DEFAULT_BAUD, overwrite=False,
           calibration=None, stop=None, progress=None, log=None):
    """Record events from ``source`` into the capture file ``output``.

    Parameters
    ----------
    source : str or SimulatedSource
        A serial device (a pty path works) or ``udp://HOST[:PORT]``; or the simulated bench
        (:class:`~latscope.capture.sim.sim_port.SimulatedSource`), started here and stopped after
        the capture, with its ground truth beside ``output``. The simulated bench describes its
        run: its label, DUT, scenario, markers and frame rules fill what ``config`` leaves
        empty, and without an event limit the capture holds every event of the simulated
        packets (a packet limit would stop at the last ``rx_dv`` fall, before that packet's
        markers and echo).
    output : str
        The capture file (``.lsc``).
    config : session.CaptureConfig or None
        Channel map, markers, glitch widths, edges, frame rules, label (default: the
        instrument's channel names, all edges).
    limits : session.Limits or None
        Stop conditions (default: none but ``stop`` and signals).
    baud : int
        Serial rate in bit/s (ignored by ptys and UDP).
    overwrite : bool
        Replace ``output`` if it exists.
    calibration : str or None
        A file from ``latscope selftest --calibrate``: per-channel offsets stored in the
        capture's metadata.
    stop : callable or None
        Returns a reason (str) when the capture must stop, checked with the signals.
    progress : CaptureProgress or None
        Shown while recording; its ``limits`` are set to the capture's.
    log : callable or None
        Lines the simulated bench reports while it starts (default: stderr).

    Returns
    -------
    session.CaptureOutcome

    Raises
    ------
    LatscopeError
        Before recording: bad output path, limits or source; no file is written.
    KeyboardInterrupt, Terminated
        A signal before recording started (message :data:`EARLY_STOP`); no file is written.
    """
    # before the instrument starts; the calibration file read is never the output
    check_output(output, [calibration] if calibration else (), force=overwrite,
                 allow_stdout=False)
    config = config if config is not None else session.CaptureConfig()
    limits = limits if limits is not None else session.Limits()
    handle = None
    port = source
    if isinstance(source, SimulatedSource):
        try:
            handle = source.open(output, log=log)
        except (KeyboardInterrupt, Terminated):
            _before_recording()
        port = handle.path
        if limits.events is None:
            limits = session.Limits(limits.duration, handle.expected_events, None)
            if limits.events is None:     # under load: known once the whole run is simulated
                handle.run.on_total = functools.partial(setattr, limits, "events")
        for key in ("label", "dut", "scenario"):
            if not getattr(config, key):
                setattr(config, key, getattr(handle, key))
        if not config.markers:
            config.markers = dict(handle.markers)
        if config.frames is None and handle.frames is not None:
            config.frames = handle.frames        # the simulated wire's rule table
    transport = None
    outcome = None
    try:
        try:
            transport = open_port(port, baud)
            instrument = session.Instrument(transport)
            over_ethernet = isinstance(port, str) and port.startswith("udp://")
            try:
                identity = instrument.identify()
            except LatscopeError as error:
                if over_ethernet and str(error).startswith("no reply"):
                    raise LatscopeError(f"{error} Over Ethernet the link must also be 1000 Mb/s "
                                        f"full duplex (RGB LED 0 blue; `latscope doctor` on the "
                                        f"board's UART shows it)") from None
                raise
            if over_ethernet:
                instrument.check_ethernet_link()
            if handle is not None:
                _check_ticks(identity, handle.run.timing.tick_hz)
            session.configure(instrument, config, identity)
        except (KeyboardInterrupt, Terminated):
            _before_recording()
        extra = dict(handle.metadata) if handle is not None else {}
        if calibration:
            extra.update(load_calibration(calibration, identity=identity))
            for ch, taps in enumerate(extra.get(INPUT_DELAY_KEY) or ()):
                instrument.set_delay(ch, taps)      # the settings the offsets belong to
        meta = session.capture_metadata(identity, config, port=port, extra=extra)
        # RX valid: rx_dv (MII) or crs_dv (RMII); only the tapped bus's channel has pulses
        rx_dv = [int(k) for k, role in meta["channels"].items() if role in ("rx_dv", "crs_dv")]
        if limits.packets is not None and not rx_dv:
            raise LatscopeError("--packets needs a channel whose role is rx_dv or crs_dv in the "
                                "channel map")
        if progress is not None:
            progress.limits = limits
        # from here a signal is a stop request: the file is created and always finalised
        with StopOnSignals() as signalled:
            def stopped():
                return signalled() or (stop() if stop is not None else None)
            writer = capfile.CaptureWriter(output, meta, overwrite=overwrite)
            outcome = session.run_capture(instrument, writer, limits=limits,
                                          rx_dv_channel=rx_dv or None,
                                          progress=progress, stop=stopped)
        if progress is not None:
            progress.done()
    finally:
        if transport is not None:
            transport.close()
        if handle is not None:
            try:
                handle.close()          # the simulated bench writes the ground truth here
            except OSError as error:    # a full disk after recording: the capture is kept
                if outcome is None:
                    raise
                outcome.reason += (f"; the ground truth beside it could not be written "
                                   f"({(error.strerror or str(error)).lower()})")
                outcome.exit_status = max(outcome.exit_status, session.EXIT_CRASH)
    return outcome
