"""Check and calibrate the instrument without a device under test (``latscope selftest``).

The gateware's self-test generator (``Opcode.SELFTEST``, ``gateware/capture.py``) makes a pattern
``high`` ticks high and ``low`` ticks low, repeating, on the selected channels and, for a
loop-back or fan-out cable, on the board's self-test output pin. This module runs it on an
instrument; :mod:`latscope.capture.selftest_check` judges the edges (its names are importable
from here too):

* :func:`run_selftest` drives an :class:`~latscope.capture.link.session.Instrument` and collects
  the pattern's edges.
* :func:`lag_measure` and :func:`align_sub_tick` align the channels below one tick with the input
  delay lines (:mod:`latscope.capture.link.deskew`).
* :func:`selftest` and :func:`calibrate` open the instrument (or the simulated one of
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
from latscope.capture.selftest_check import (
    ChannelCheck,
    LoopbackCheck,
    PatternCheck,
    analyse_loopback,
    check_pattern,
    trim_to_complete,
)
from latscope.capture.sim.delay_bench import DelayBench
from latscope.capture.sim.selftest_bench import open_simulated_instrument
from latscope.gateware import protocol

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
