"""``latscope doctor``: first-board bring-up in one command, with a verdict and a next step.

Steps, each a :class:`Step` (pass, fail, or skipped with the reason):

1. **identify** -- the instrument answers IDENTIFY; its protocol version equals the host's and its
   gateware version is the one this latscope was built with (:data:`GATEWARE_VERSION`).
2. **ethernet** -- on gateware with the Gigabit Ethernet link, the link state its PHY reports
   (RGMII in-band status in STATUS, :mod:`latscope.capture.link.ethlink`): it must be 1000 Mb/s
   full duplex, the only state the link carries datagrams in. Skipped on UART-only gateware.
3. **channels** -- the internal self-test pattern on every channel
   (:func:`latscope.capture.selftest.check_pattern`): every channel sees exactly the pattern, all
   at the same tick, nothing lost. A channel without edges is named "dead".
4. **loop-back** -- with the self-test output pin wired to the channel inputs (one cable, or a
   fan-out to all of them): on each wired channel the DDR lane order
   (:func:`latscope.gateware.lane_order.check_loopback`) and the high/low times, and between
   channels the pin-to-timestamp offset, which must be one constant (the same fixed delay on
   every channel, ``docs/boards.md``). Skipped without ``--loopback``.
5. **link soak** -- the pattern on every channel, fast enough to keep the link full, for
   ``--soak`` seconds (default 60): frames with bad CRCs and frames lost on the link must be
   zero. FIFO overflow is expected at this rate and only reported.

The pure part is :func:`judge` (measurements in, :class:`Verdict` out); :func:`run_doctor` drives
an :class:`~latscope.capture.link.session.Instrument`. ``--sim`` runs the real gateware in Verilator
(:class:`DoctorBenchEngine`) with a simulated loop-back cable; the tests inject faults there
(lanes swapped, a dead channel, a lossy link) and check that the verdict names each.
"""

import dataclasses
import random
import time as _time

import numpy as np

from latscope import LatscopeError
from latscope.capture.link import session
from latscope.capture.link.ethlink import GIGABIT_ADVICE, refusal
from latscope.capture.link.transport import DEFAULT_BAUD, SerialTransport
from latscope.capture.selftest import (
    analyse_loopback,
    check_pattern,
    run_selftest,
    trim_to_complete,
)
from latscope.capture.sim.ptyserve import PtyServer
from latscope.capture.sim.selftest_bench import SelftestBenchEngine
from latscope.gateware import lane_order, protocol
from latscope.gateware.model_stream import GATEWARE_VERSION  # what IDENTIFY should report
from latscope.gateware.verilator import SAMPLES_DTYPE

__all__ = ["Step", "Verdict", "judge_identity", "judge_ethernet", "judge_channels",
           "judge_loopback", "judge_soak", "run_doctor", "DoctorBenchEngine", "open_doctor_bench",
           "doctor", "GATEWARE_VERSION", "DEFAULT_SOAK_S"]

DEFAULT_SOAK_S = 60.0
#: The pattern of the channel and loop-back steps: an odd period (199 ticks), so successive edges
#: step through every lane of a cycle, with 2 lanes (DDR) as with 4 (ECP5 2:1 gearing).
PATTERN = (101, 98)
#: The soak pattern: on every channel, about ten times what a 12 Mbaud link carries on the
#: ECPIX-5 (8 ch x 2 edges / 14 ticks x 320 M ticks/s), so the link is never idle.
SOAK_PATTERN = (7, 7)


@dataclasses.dataclass
class Step:
    """One step of the doctor's run: ``ok`` True (pass), False (fail) or None (skipped)."""
    name: str
    ok: bool | None
    detail: str
    next_step: str = ""
    data: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Verdict:
    """All steps, and whether every step that ran passed."""
    steps: list

    @property
    def ok(self):
        return all(s.ok is not False for s in self.steps)

    def to_dict(self):
        return {"ok": self.ok, "steps": [dataclasses.asdict(s) for s in self.steps]}


# --- judging (pure) ------------------------------------------------------------------------------

def judge_identity(identity, *, host_protocol=protocol.PROTOCOL_VERSION,
                   host_gateware=GATEWARE_VERSION):
    """Step ``identify`` from an IDENTIFY answer (a dict, or the error message when it failed)."""
    if isinstance(identity, str):
        nxt = ("check the port and baud rate (the instrument's UART is the FTDI's last "
               "interface, docs/boards.md), that the board is programmed (`latscope gateware "
               "program`), and that no other program holds the port")
        if "protocol version" in identity:
            nxt = "rebuild and program the gateware of this latscope version (`latscope " \
                  "gateware build` then `program`), or install the matching latscope"
        return Step("identify", False, identity, nxt)
    proto = identity.get("protocol_version")
    gw = (identity.get("gateware_major"), identity.get("gateware_minor"))
    detail = (f"{identity.get('board', '?')}: protocol {proto}, gateware {gw[0]}.{gw[1]}, "
              f"{identity.get('channels')} channels, tick {1e9 / identity['tick_hz']:.3f} ns")
    if proto != host_protocol:
        return Step("identify", False, detail + f"; host speaks protocol {host_protocol}",
                    "program the gateware built by this latscope version")
    if gw != tuple(host_gateware):
        return Step("identify", False,
                    detail + f"; host expects gateware {host_gateware[0]}.{host_gateware[1]}",
                    "program the gateware built by this latscope version (`latscope gateware "
                    "build` then `program`)")
    return Step("identify", True, detail)


def judge_ethernet(link):
    """Step ``ethernet`` from the STATUS reply's
    :class:`~latscope.capture.link.ethlink.EthernetLink` (or the error message when STATUS
    failed)."""
    if isinstance(link, str):
        return Step("ethernet", False, f"no STATUS: {link}", "check the port and run the doctor "
                    "again")
    data = link.to_dict()
    if not link.present:
        return Step("ethernet", None, "not run: this gateware has no Ethernet link", data=data)
    why = refusal(link)
    if why is not None:
        return Step("ethernet", False, why, GIGABIT_ADVICE, data)
    return Step("ethernet", True, f"the PHY reports a link at {link.describe()}", data=data)


def judge_channels(check, channels):
    """Step ``channels`` from a :class:`~latscope.capture.selftest.PatternCheck`."""
    dead = [c["channel"] for c in check.to_dict()["channels"] if c["edges"] == 0]
    bad = [c for c in check.to_dict()["channels"] if not c["ok"]]
    data = {"dead": dead, "failing": [c["channel"] for c in bad]}
    if check.ok:
        return Step("channels", True, f"the internal pattern arrived exactly on channels "
                                      f"{_list(channels)}", data=data)
    if dead:
        return Step("channels", False, f"dead channel {_list(dead)}: no edge from the internal "
                                       f"pattern", "the capture path of that channel is broken "
                                       "in the gateware: rebuild and program it; if it persists "
                                       "report the build summary", data)
    problems = "; ".join(f"channel {c['channel']}: {', '.join(c['problems'])}" for c in bad)
    problems = problems or "; ".join(check.problems)
    return Step("channels", False, problems, "see `latscope selftest` for the full table; lost "
                "events mean the link was too slow for the pattern", data)


def judge_loopback(time, channel, rising, *, wired, high_ticks, low_ticks, lanes=2):
    """Step ``loop-back``: lane order and high/low times on each ``wired`` channel, and one
    pin-to-timestamp offset for all of them (each channel's first rising edge against the first
    wired channel's, modulo the pattern period)."""
    period = high_ticks + low_ticks
    per = {}
    swapped, dead, bad = [], [], []
    for ch in wired:
        lb = analyse_loopback(time, channel, rising, loop_channel=ch, high_ticks=high_ticks,
                              low_ticks=low_ticks, lanes=lanes)
        per[ch] = lb
        if lb.edges == 0:
            dead.append(ch)
        elif lb.lane_order.order is lane_order.LaneOrder.SWAPPED:
            swapped.append(ch)
        elif not lb.ok:
            bad.append(ch)
    firsts = {}
    for ch in wired:
        on = (channel == ch) & rising
        if np.any(on):
            firsts[ch] = int(np.asarray(time)[on][0])
    offsets = {}
    if firsts:
        base = firsts[min(firsts)]
        offsets = {ch: int((t - base + period // 2) % period - period // 2)
                   for ch, t in firsts.items()}
    skewed = [ch for ch, off in offsets.items() if off != 0]
    data = {"offset_ticks": offsets, "swapped": swapped, "dead": dead,
            "lane_order": {ch: lb.lane_order.order.value for ch, lb in per.items()}}
    if dead:
        return Step("loop-back", False, f"dead channel {_list(dead)}: no edge from the self-test "
                    f"pin", "check the cable from the self-test pin to that channel and the "
                    "connector pin (`latscope gateware boards`)", data)
    if swapped:
        return Step("loop-back", False, f"DDR lanes swapped on channel {_list(swapped)}: "
                    f"edges come back one tick out of order", "the gateware's lane order does "
                    "not match this FPGA: report it with the build summary; timestamps are off "
                    "by one tick on half the edges", data)
    if bad:
        problems = "; ".join(f"channel {ch}: {', '.join(per[ch].problems)}" for ch in bad)
        return Step("loop-back", False, problems, "shorten the loop-back cable and check its "
                    "ground", data)
    if skewed:
        return Step("loop-back", False, "pin-to-timestamp offset differs between channels: "
                    + ", ".join(f"ch {c} {offsets[c]:+d}" for c in sorted(offsets)),
                    "the channels do not share one fixed delay: use equal-length cables; "
                    "report it if they are", data)
    return Step("loop-back", True, f"lanes in order and one pin-to-timestamp offset on channels "
                                   f"{_list(wired)}", data=data)


def judge_soak(*, seconds, frames_ok, frames_bad, frames_lost, events, overflow_lost,
               wanted_s):
    """Step ``link soak`` from the decoder's counters over a soak of ``seconds``."""
    data = {"seconds": round(seconds, 2), "frames_ok": frames_ok, "frames_bad": frames_bad,
            "frames_lost": frames_lost, "events": events, "overflow_lost": overflow_lost}
    rate = f"{events / seconds:,.0f} events/s" if seconds > 0 else "no time"
    if frames_ok == 0:
        return Step("link soak", False, "no frame arrived during the soak",
                    "check the port, baud rate and cable", data)
    if frames_bad or frames_lost:
        return Step("link soak", False, f"lossy link: {frames_bad} frames with bad CRC, "
                    f"{frames_lost} frames lost of {frames_ok + frames_lost} in {seconds:.1f} s",
                    "use a shorter or better USB cable, a port without a hub, and check that "
                    "--baud matches the gateware (12 Mbaud); then run the doctor again", data)
    if seconds < wanted_s * 0.95:
        return Step("link soak", False, f"the soak stopped after {seconds:.1f} s of "
                    f"{wanted_s:g} s", "run it again", data)
    return Step("link soak", True, f"{frames_ok:,} frames in {seconds:.1f} s, none bad or lost "
                                   f"({rate}; {overflow_lost:,} events dropped by the FIFO at "
                                   f"this deliberately excessive rate)", data=data)


def _list(chs):
    return ", ".join(str(c) for c in chs)


# --- running (I/O) ------------------------------------------------------------------------------

def _soak(instrument, identity, *, seconds, clock=_time.monotonic):
    """Run the fast pattern on every channel for ``seconds``; return the counters."""
    n = int(identity.get("channels") or protocol.NUM_CHANNELS)
    mask = (1 << n) - 1
    high, low = SOAK_PATTERN
    decoder = instrument.decoder
    before = dict(decoder.counters)
    instrument.disarm()
    instrument.set_edges(mask, mask)
    for ch in range(n):
        instrument.set_glitch(ch, 0)
    instrument.selftest(True, channels=mask, high_ticks=high, low_ticks=low)
    instrument.reset_time()
    instrument.discard()
    decoder.expect_reset()
    events = 0
    start = clock()
    instrument.arm()
    while clock() - start < seconds:
        for res in instrument.read(0.05):
            events += len(res.time)
    elapsed = clock() - start
    instrument.disarm()
    idle = _idle_width(identity)
    instrument.selftest(False, channels=mask, high_ticks=idle, low_ticks=idle)
    after = dict(decoder.counters)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return dict(seconds=elapsed, frames_ok=int(delta.get("frames_ok", 0)),
                frames_bad=int(delta.get("frames_bad", 0)),
                frames_lost=int(delta.get("frames_missing", 0)), events=events,
                overflow_lost=int(delta.get("overflow_lost_events", 0)))


def _collect(instrument, identity, *, wired, high, low, edges, timeout, clock=_time.monotonic):
    """The loop-back run: the self-test pattern on the output pin only (no channel takes the
    internal pattern), both edges enabled on the ``wired`` channels, until each has ``edges``."""
    mask = sum(1 << c for c in wired)
    instrument.disarm()
    instrument.set_edges(mask, mask)
    for ch in wired:
        instrument.set_glitch(ch, 0)
    instrument.selftest(True, drive_pin=True, channels=0, high_ticks=high, low_ticks=low)
    instrument.reset_time()
    instrument.discard()
    instrument.decoder.expect_reset()
    parts = []
    counts = dict.fromkeys(wired, 0)
    instrument.arm()
    start = clock()
    # Until every wired channel has `edges`; a channel still silent when another has four times
    # as many is dead (all carry one pattern), so waiting longer would show nothing new.
    while clock() - start < timeout and not all(v > edges for v in counts.values()) \
            and not max(counts.values()) > 4 * edges:
        for res in instrument.read(0.05):
            if len(res.time):
                parts.append((np.asarray(res.time), np.asarray(res.channel),
                              np.asarray(res.rising)))
                for c in np.asarray(res.channel).tolist():
                    if c in counts:
                        counts[c] += 1
    instrument.disarm()
    idle = _idle_width(identity)
    instrument.selftest(False, channels=0, high_ticks=idle, low_ticks=idle)
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, bool)
    return trim_to_complete(np.concatenate([p[0] for p in parts]),
                            np.concatenate([p[1] for p in parts]),
                            np.concatenate([p[2] for p in parts]))


def run_doctor(instrument, *, loopback=(), soak_s=DEFAULT_SOAK_S, engine=None, edges=64,
               timeout=60.0):
    """Run every step on ``instrument``; returns a :class:`Verdict`.

    Parameters
    ----------
    instrument : Instrument
    loopback : sequence of int
        Channels wired to the self-test output pin (empty: skip the loop-back step).
    soak_s : float
        Link soak duration, seconds (0 skips it).
    engine : DoctorBenchEngine, optional
        The simulated instrument, told when its simulated cable carries the pattern.
    edges : int
        Edges per channel collected by the channel and loop-back steps.
    """
    steps = []
    try:
        identity = instrument.identify()
    except LatscopeError as error:
        steps.append(judge_identity(str(error)))
        for name in ("ethernet", "channels", "loop-back", "link soak"):
            steps.append(Step(name, None, "not run: the instrument did not identify"))
        return Verdict(steps)
    steps.append(judge_identity(identity))
    if steps[-1].ok is False:
        return Verdict(steps + [Step(n, None, "not run: versions differ")
                                for n in ("ethernet", "channels", "loop-back", "link soak")])
    try:
        steps.append(judge_ethernet(instrument.status()["ethernet"]))
    except LatscopeError as error:
        steps.append(judge_ethernet(str(error)))
    n = int(identity.get("channels") or protocol.NUM_CHANNELS)
    high, low = PATTERN
    chans = list(range(n))
    cap = run_selftest(instrument, identity, channels=chans, high_ticks=high, low_ticks=low,
                       edges=edges, timeout=timeout)
    check = check_pattern(cap.time, cap.channel, cap.rising, channels=chans, high_ticks=high,
                          low_ticks=low, losses=cap.losses, min_edges=max(4, edges))
    steps.append(judge_channels(check, chans))
    wired = sorted(set(loopback))
    if not wired:
        steps.append(Step("loop-back", None, "not run: give --loopback with the channels wired "
                          "to the self-test pin to check the DDR lane order and pin offset"))
    else:
        if engine is not None:
            engine.loopback(wired, high, low)
        try:
            t, c, r = _collect(instrument, identity, wired=wired, high=high, low=low,
                               edges=edges, timeout=timeout)
        finally:
            if engine is not None:
                engine.loopback((), high, low)
        steps.append(judge_loopback(t, c, r, wired=wired, high_ticks=high, low_ticks=low,
                                    lanes=int(identity.get("lanes") or 2)))
    if soak_s > 0:
        counters = _soak(instrument, identity, seconds=soak_s)
        steps.append(judge_soak(wanted_s=soak_s, **counters))
    else:
        steps.append(Step("link soak", None, "not run (--soak 0)"))
    return Verdict(steps)


# --- the simulated instrument with a loop-back cable and faults ----------------------------------

class DoctorBenchEngine:
    """The self-test bench (:class:`~latscope.capture.sim.selftest_bench.SelftestBenchEngine`: the
    real gateware in Verilator) with a simulated loop-back cable and injectable faults.

    The cable: while :meth:`loopback` is on, the wired channels' input pins carry the pattern
    ``high``/``low`` ticks (the harness does not connect the core's self-test output, so the
    cable is simulated at the pins; its phase is arbitrary, as a cable's delay is).

    Faults
    ------
    ``swap_lanes`` : the two DDR samples of each cycle arrive swapped (a wrong lane order).
    ``dead_channel`` : that channel's pin never changes (a broken pin or cable; the internal
    pattern, injected after the pin, still arrives).
    ``lossy_link`` : a byte in about every ``lossy_link`` bytes from the instrument is corrupted.
    """

    def __init__(self, *, swap_lanes=False, dead_channel=None, lossy_link=0, seed=1):
        self._inner = SelftestBenchEngine()
        self._v = self._inner._v
        self.name = "verilator"
        self.swap_lanes = bool(swap_lanes)
        self.dead_channel = dead_channel
        self.lossy_link = int(lossy_link)
        self._rng = random.Random(seed)
        self._wired, self._pattern = (), (2, 2)
        self._tick = 0                      # ticks simulated so far (our cable's time base)
        self.channels = 8
        self.lanes = self._inner.timing.lanes

    def loopback(self, wired, high, low):
        """Put the pattern on the ``wired`` channels' pins (empty: cable idle)."""
        self._wired, self._pattern = tuple(wired), (int(high), int(low))

    def metadata(self):
        meta = self._inner.metadata()
        meta["traffic"] = "none (doctor bench, simulated loop-back cable)"
        return meta

    def _advance(self, cycles):
        """Commands for ``cycles`` capture cycles with the cable's levels on the pins."""
        v = self._v
        start = self._tick
        self._tick += cycles * self.lanes
        wired = [c for c in self._wired if c != self.dead_channel]
        if not wired:
            return v.Commands().samples(0, cycles)
        high, low = self._pattern
        period = high + low
        first = start - start % period
        ticks, values = [], []
        mask = sum(1 << c for c in wired)
        t = first
        while t < self._tick:
            for edge, level in ((t, mask), (t + high, 0)):
                if start <= edge < self._tick:
                    ticks.append(edge - start)
                    values.append(level)
            t += period
        initial = mask if (start - first) < high else 0
        data = v.stimulus_commands(np.array(ticks, np.int64), np.array(values, np.int64),
                                   lanes=self.lanes, channels=self.channels,
                                   end_tick=cycles * self.lanes, initial=initial)
        if self.swap_lanes:
            data = _swap_lanes(data, self.channels, self.lanes)
        return v.Commands().raw(data)

    def host_bytes(self, data):
        inner = self._inner
        with inner._lock:
            inner._requested += inner.command_cycles
            inner.proc.write(self._v.Commands().rx(data)
                             .raw(bytes(self._advance(inner.command_cycles))).stats())

    def read(self, max_bytes, timeout=0.0):
        inner = self._inner
        data = inner.proc.read_bytes(max_bytes, timeout=timeout)
        if not data:
            with inner._lock:
                done = inner.proc.stats.get("total_cycles", 0)
                if done >= inner._requested:
                    inner._requested = done + inner.step_cycles
                    inner.proc.write(self._advance(inner.step_cycles).stats())
        if data and self.lossy_link:
            buf = bytearray(data)
            for i in range(len(buf)):
                if self._rng.randrange(self.lossy_link) == 0:
                    buf[i] ^= 0x5A
            data = bytes(buf)
        return data

    def close(self):
        self._inner.close()


def _swap_lanes(data, channels, lanes=2):
    """SAMPLES commands with the lanes of every word in reverse order (two lanes: exchanged)."""
    rec = np.frombuffer(data, dtype=SAMPLES_DTYPE).copy()
    word = rec["word"]
    mask = (1 << channels) - 1
    out = np.zeros_like(word)
    for lane in range(lanes):
        out |= ((word >> (lane * channels)) & mask) << ((lanes - 1 - lane) * channels)
    rec["word"] = out
    return rec.tobytes()


def _idle_width(identity):
    """High/low ticks for switching the pattern off: the shortest the gateware accepts
    (2, and at least one capture cycle: ``lanes`` ticks)."""
    return max(2, int(identity.get("lanes") or 2))


def open_doctor_bench(**faults):
    """Start :class:`DoctorBenchEngine` on a pseudo-terminal; returns (path, engine, handle)."""
    engine = DoctorBenchEngine(**faults)
    server = PtyServer(engine)
    return server.path, engine, server


# --- a run on an instrument ----------------------------------------------------------------------

def doctor(port=None, *, simulated=False, faults=(), baud=DEFAULT_BAUD, loopback=(),
           soak_s=DEFAULT_SOAK_S):
    """Check the instrument on ``port`` (or, with ``simulated``, the doctor's bench with its
    simulated loop-back cable and the named ``faults``: ``swap-lanes``, ``dead-channel``,
    ``lossy-link``) step by step; returns the :class:`Verdict`.

    ``loopback``: channels wired to the self-test output pin; ``soak_s``: link soak duration,
    seconds (0 skips it).
    """
    if soak_s < 0:
        raise LatscopeError(f"--soak must be 0 or more seconds, not {soak_s:g}")
    if faults and not simulated:
        raise LatscopeError("--fault needs --sim")
    engine = server = None
    if simulated:
        port, engine, server = open_doctor_bench(
            swap_lanes="swap-lanes" in faults,
            dead_channel=5 if "dead-channel" in faults else None,
            lossy_link=2000 if "lossy-link" in faults else 0)
    transport = None
    try:
        transport = SerialTransport(port, baud)
        # The simulator cannot skip time while the simulated cable toggles, and on a loaded
        # machine it answers slower than a board: give it longer per reply.
        instrument = session.Instrument(transport, reply_timeout=5.0 if simulated else 0.5)
        return run_doctor(instrument, loopback=loopback, soak_s=soak_s, engine=engine)
    finally:
        if transport is not None:
            transport.close()
        if server is not None:
            server.close()
