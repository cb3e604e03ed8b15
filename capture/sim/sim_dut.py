"""The DUT model of the simulated bench: per packet, the MII edges and marker pulses a profile's
latencies give (:func:`simulate`), the ground truth, and the check of decoded events against it.

Part of :mod:`latscope.capture.sim.simbench` (import from there).
"""

import dataclasses
import json
import math
import os

import numpy as np
from scipy import special

from latscope import LatscopeError
from latscope.capture.files import capfile
from latscope.capture.files.outputs import replacing
from latscope.capture.sim.sim_profile import (
    BYTE_NS,
    FCS_BYTES,
    MII_CLOCK_NS,
    PREAMBLE_SFD_BYTES,
    RX_DV,
    TX_EN,
    Profile,
    body_params,
    load_profile,
)
from latscope.gateware.model_capture import Stimulus


@dataclasses.dataclass(frozen=True)
class Traffic:
    """How requests arrive.

    ``mode="echo"`` (default): one packet in flight; the host sends the next request
    ``host_turnaround_us + Exponential(turnaround_jitter_us)`` after the echo's last bit.
    ``mode="paced"``: requests leave every ``1 / rate_pps`` s (intended send times), but never
    before the previous echo has left the wire plus the turnaround (one in flight), so a too-high
    rate queues and the delay shows in the truth's ``queue_ns``.
    ``mode="burst"``: ``burst`` requests leave back to back (one inter-frame gap apart), faster
    than the DUT serves them; the next burst leaves the turnaround after the burst's last echo.
    The DUT serves them in order, one packet at a time per stage and one app thread whose send
    returns when its frame starts on the wire, so later requests of a burst wait (the truth's
    ``queue_ns``: how long the app thread made each wait). ``app_busy_us`` (burst mode) is the
    app thread's further work per request after its send returns, so a DUT that serves faster
    than the wire delivers can be made to queue.
    """
    mode: str = "echo"
    host_turnaround_us: float = 20.0
    turnaround_jitter_us: float = 5.0
    rate_pps: float = 0.0
    burst: int = 1
    app_busy_us: float = 0.0

    def __post_init__(self):
        if self.mode not in ("echo", "paced", "burst"):
            raise LatscopeError(f"traffic mode must be 'echo', 'paced' or 'burst', not "
                                f"{self.mode!r}")
        if not self.app_busy_us >= 0:
            raise LatscopeError(f"app busy time must be >= 0 µs, not {self.app_busy_us!r}")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise LatscopeError(f"burst must be a whole number of requests >= 1, not "
                                f"{self.burst!r}")
        if not self.host_turnaround_us >= 1.0:
            raise LatscopeError(f"host turnaround must be at least 1 µs (the IFG), not "
                                f"{self.host_turnaround_us!r}")
        if not self.turnaround_jitter_us >= 0:
            raise LatscopeError(f"turnaround jitter must be >= 0 µs, not "
                                f"{self.turnaround_jitter_us!r}")
        if self.mode == "paced" and not self.rate_pps > 0:
            raise LatscopeError(f"paced traffic needs a rate above 0 packets/s, not "
                                f"{self.rate_pps!r}")


@dataclasses.dataclass(frozen=True)
class InstrumentTiming:
    """The simulated instrument's sampling: ``capture_hz`` capture clock, ``lanes`` samples per
    clock (so a tick is ``1 / (capture_hz * lanes)`` s). Default: the ECPIX-5 build, 200 MHz with
    2:1 input gearing (4 lanes), 1.25 ns ticks (:data:`X1_TIMING` is the 3.125 ns ``ecpix5-x1``
    build). ``lead_ticks`` of idle precede the first edge."""
    capture_hz: float = 200e6
    lanes: int = 4
    lead_ticks: int = 4096

    def __post_init__(self):
        if not self.capture_hz > 0:
            raise LatscopeError(f"capture clock must be above 0 Hz, not {self.capture_hz!r}")
        if self.lanes not in (1, 2, 4):
            raise LatscopeError(f"lanes must be 1, 2 or 4, not {self.lanes!r}")

    @property
    def tick_hz(self):
        return self.capture_hz * self.lanes

    @property
    def tick_ns(self):
        return 1e9 / self.tick_hz

    @classmethod
    def for_tick_hz(cls, tick_hz):
        """The timing of the board build whose ticks are ``tick_hz`` (8e8: ``ecpix5``, 3.2e8:
        ``ecpix5-x1``); for re-simulating a capture made with either."""
        for timing in (cls(), X1_TIMING):
            if timing.tick_hz == tick_hz:
                return timing
        raise LatscopeError(f"no simulated-bench timing has {tick_hz!r} ticks per second")


#: The 3.125 ns build (``ecpix5-x1``: 160 MHz, IDDRX1F, 2 lanes); the committed bench fixtures
#: were made with it.
X1_TIMING = InstrumentTiming(capture_hz=160e6, lanes=2)


@dataclasses.dataclass
class SimRun:
    """A simulated run: the stimulus for the instrument and the ground truth.

    ``truth`` maps names to arrays (see :func:`simulate`); ``meta`` is JSON-ready."""
    profile: Profile
    timing: InstrumentTiming
    traffic: Traffic
    stimulus: Stimulus
    truth: dict
    meta: dict

    @property
    def n_packets(self):
        return len(self.truth["rx_start_ns"])

    @property
    def n_events(self):
        return len(self.truth["time"])

    @property
    def end_tick(self):
        return int(self.stimulus.ticks[-1]) if len(self.stimulus.ticks) else 0

    def truth_arrays(self):
        """Arrays for :meth:`latscope.capture.files.capfile.CaptureWriter.attach_truth` (name
        ``"simbench"``), with the metadata as a JSON string under ``meta``."""
        arrays = {key.replace("/", "_"): value for key, value in self.truth.items()}
        arrays["meta"] = np.array(json.dumps(self.meta))
        return arrays

    def save_truth(self, capture_path, **extra_meta):
        """Write the ground truth beside a capture (``capfile.truth_path``), atomically."""
        self.meta.update(extra_meta)
        target = capfile.truth_path(capture_path)
        # complete or not at all: a full disk leaves no partial side file behind
        try:
            with replacing(target, [capture_path], force=True) as temp:
                with open(temp, "wb") as f:
                    np.savez_compressed(f, **{f"simbench/{k}": v
                                              for k, v in self.truth_arrays().items()})
        except OSError as error:
            if error.filename is None:          # say which file (a full disk names none)
                raise OSError(error.errno, error.strerror, target) from None
            raise
        return target


# --- The DUT model -------------------------------------------------------------------------------

def draw_chain(rng, profile, stages, n):
    """Correlated totals (ns) of the given stages: Gaussian copula (equicorrelation
    ``profile.correlation``) over shifted-gamma marginals; columns in ``stages`` order."""
    rho = profile.correlation
    common = rng.standard_normal(n)
    own = rng.standard_normal((n, len(stages)))
    z = math.sqrt(rho) * common[:, None] + math.sqrt(1 - rho) * own
    u = special.ndtr(z)
    u = np.clip(u, 1e-16, 1 - 1e-16)
    out = np.empty((n, len(stages)))
    for j, stage in enumerate(stages):
        shift, scale = body_params(profile, stage)
        out[:, j] = shift + scale * special.gammaincinv(profile.gamma_shape, u[:, j])
    return out


def _draw_tails(rng, profile, n, steps):
    """Per packet: tail kind (0 none, i+1 for ``profile.tails[i]``), the step it hits and its
    extra delay in ns."""
    kind = np.zeros(n, np.int8)
    extra = np.zeros(n)
    u = rng.random(n)
    edge = 0.0
    for i, tail in enumerate(profile.tails):
        hit = (u >= edge) & (u < edge + tail.probability)
        edge += tail.probability
        kind[hit] = i + 1
        extra[hit] = 1000.0 * (tail.min_us + rng.exponential(tail.mean_extra_us, hit.sum()))
    step = rng.integers(0, steps, n)
    return kind, step, extra


def ceil_grid(t, grid, phase):
    """``t`` (ns) moved up to the next edge of a clock of period ``grid`` whose edges lie at
    ``phase`` + k·``grid``."""
    return np.ceil((t - phase) / grid) * grid + phase


def simulate(profile, packets, *, seed=0, traffic=None, timing=None):
    """Simulate ``packets`` echoed packets of ``profile``.

    Parameters
    ----------
    profile : Profile or str
        The DUT configuration (a name is passed to :func:`load_profile`).
    packets : int
        Number of request/echo pairs, at least 1.
    seed : int
        Seed of the random generator; the same seed gives the same run.
    traffic : Traffic, optional
        Arrival process; default one packet in flight (echo).
    timing : InstrumentTiming, optional
        The instrument's sampling; default :class:`InstrumentTiming` (200 MHz x 4 lanes,
        1.25 ns ticks).

    Returns
    -------
    SimRun
        ``stimulus`` for the instrument and ``truth``: expected events ``time`` (ticks),
        ``channel``, ``rising``, ``time_ns`` (exact, ns since tick 0) and ``packet`` (index); per
        packet ``rx_start_ns``, ``rx_end_ns``, ``tx_start_ns``, ``tx_end_ns``, ``queue_ns``, for
        every stage S ``stage/S`` (true latency, ns) and ``ticks/S`` (latency in ticks the
        instrument must report), ``tail_rx``, ``tail_tx`` (tail kind, 0 = none) and
        ``clipped`` (stage order was enforced).

    Examples
    --------
    >>> run = simulate("el-dm-64", 100, seed=1)
    >>> run.n_packets, run.n_events
    (100, 1400)
    """
    if isinstance(profile, (str, os.PathLike)):
        profile = load_profile(profile)
    if isinstance(packets, bool) or not isinstance(packets, (int, np.integer)) or packets < 1:
        raise LatscopeError(f"packet count must be a positive integer, not {packets!r}")
    traffic = traffic or Traffic()
    timing = timing or InstrumentTiming()
    n = int(packets)
    rng = np.random.default_rng(seed)
    cpu = profile.cpu_ns
    mii_phase = rng.uniform(0, MII_CLOCK_NS)
    cpu_phase = rng.uniform(0, cpu)
    wire_ns = (PREAMBLE_SFD_BYTES + profile.size + FCS_BYTES) * BYTE_NS
    pulse = max(1, round(profile.marker_pulse_ns / cpu)) * cpu

    # Receive chain: stage totals from rx_dv falling, ordered.
    rx = draw_chain(rng, profile, profile.rx_chain, n)
    rx_kind, rx_step, rx_extra = _draw_tails(rng, profile, n, len(profile.rx_chain))
    steps = np.arange(len(profile.rx_chain))
    rx += np.where(steps[None, :] >= rx_step[:, None], rx_extra[:, None], 0.0)
    clipped = np.zeros(n, bool)
    for j in range(1, rx.shape[1]):      # enforce order: at least 2 CPU cycles apart
        low = rx[:, j - 1] + 2 * cpu
        clipped |= rx[:, j] < low
        rx[:, j] = np.maximum(rx[:, j], low)
    app = draw_chain(rng, profile, ("app",), n)[:, 0]
    # Transmit chain: send -> (xmit) -> first bit; totals measured back from the wire.
    tx_stages = ("tx.wire", "tx.xmit") if "tx.xmit" in profile.stages else ("tx.wire",)
    tx = draw_chain(rng, profile, tx_stages, n)
    tx_kind, tx_step, tx_extra = _draw_tails(rng, profile, n, len(tx_stages))
    # A tail before xmit delays send->wire only; after xmit it delays both.
    tx[:, 0] += tx_extra
    if len(tx_stages) == 2:
        tx[:, 1] += np.where(tx_step == 1, tx_extra, 0.0)
        low = tx[:, 1] + 2 * cpu
        clipped |= tx[:, 0] < low
        tx[:, 0] = np.maximum(tx[:, 0], low)

    # Per-packet durations relative to rx start (grid re-timing adds < 40 ns; margins cover it).
    reply_col = profile.rx_chain.index(profile.reply_after)
    last_marker = np.max(rx, axis=1) + pulse
    busy = wire_ns + np.maximum(last_marker, rx[:, reply_col] + app + tx[:, 0] + wire_ns)
    busy += 2 * MII_CLOCK_NS + 2 * cpu
    turnaround = 1000.0 * (traffic.host_turnaround_us
                           + (rng.exponential(traffic.turnaround_jitter_us, n)
                              if traffic.turnaround_jitter_us > 0 else 0.0))
    span = busy + turnaround          # from this request's start to the earliest next start
    origin = MII_CLOCK_NS * 4
    if traffic.mode == "burst":
        rx_start, marks, send, tx_start, xmit, queue = _burst_timeline(
            traffic, rx, app, tx, reply_col, turnaround, wire_ns, pulse, cpu, mii_phase,
            cpu_phase, origin)
    elif traffic.mode == "echo":
        earliest = np.concatenate([[0.0], np.cumsum(span[:-1])])
        start = origin + earliest
        queue = np.zeros(n)
    else:
        intended = origin + np.arange(n) * (1e9 / traffic.rate_pps)
        c = np.concatenate([[0.0], np.cumsum(span[:-1])])   # start_i = C_i + max_j<=i (a_j - C_j)
        start = c + np.maximum.accumulate(intended - c)
        queue = start - intended
    if traffic.mode != "burst":
        rx_start = ceil_grid(start, MII_CLOCK_NS, mii_phase)
        marks = ceil_grid(rx_start[:, None] + wire_ns + rx, cpu, cpu_phase)
        send = ceil_grid(marks[:, reply_col] + app, cpu, cpu_phase)
        tx_start = ceil_grid(send + tx[:, 0], MII_CLOCK_NS, mii_phase)
        xmit = ceil_grid(tx_start - tx[:, 1], cpu, cpu_phase) if len(tx_stages) == 2 else None
    elif len(tx_stages) != 2:
        xmit = None
    rx_end = rx_start + wire_ns
    tx_end = tx_start + wire_ns

    # Edges per channel: (time_ns, channel, rising, packet).
    edges = [(rx_start, RX_DV, True), (rx_end, RX_DV, False),
             (tx_start, TX_EN, True), (tx_end, TX_EN, False)]
    stage_ns = {}
    for j, stage in enumerate(profile.rx_chain):
        ch = profile.marker_channel(stage)
        edges += [(marks[:, j], ch, True), (marks[:, j] + pulse, ch, False)]
        stage_ns[stage] = marks[:, j] - rx_end
    ch = profile.marker_channel("tx.send")
    edges += [(send, ch, True), (send + pulse, ch, False)]
    stage_ns["tx.wire"] = tx_start - send
    if xmit is not None:
        ch = profile.marker_channel("tx.xmit")
        edges += [(xmit, ch, True), (xmit + pulse, ch, False)]
        stage_ns["tx.xmit"] = tx_start - xmit

    lead_ns = timing.lead_ticks * timing.tick_ns
    times = np.concatenate([t for t, _, _ in edges]) + lead_ns
    channel = np.concatenate([np.full(n, c, np.uint8) for _, c, _ in edges])
    rising = np.concatenate([np.full(n, r, bool) for _, _, r in edges])
    packet = np.tile(np.arange(n, dtype=np.int32), len(edges))
    ticks = np.ceil(times / timing.tick_ns - 1e-9).astype(np.int64)
    order = np.lexsort((channel, ticks))
    times, channel, rising, packet, ticks = (a[order] for a in (times, channel, rising, packet,
                                                                ticks))
    stimulus = stimulus_of_edges(ticks, channel, rising)

    def tick_of(t):
        return np.ceil((t + lead_ns) / timing.tick_ns - 1e-9).astype(np.int64)

    truth = {"time": ticks, "channel": channel, "rising": rising, "time_ns": times,
             "packet": packet, "rx_start_ns": rx_start + lead_ns, "rx_end_ns": rx_end + lead_ns,
             "tx_start_ns": tx_start + lead_ns, "tx_end_ns": tx_end + lead_ns,
             "queue_ns": queue, "tail_rx": rx_kind, "tail_tx": tx_kind, "clipped": clipped}
    ends = {"tx.wire": tick_of(tx_start)}
    for stage, value in stage_ns.items():
        truth[f"stage/{stage}"] = value
        if stage.startswith("rx."):
            truth[f"ticks/{stage}"] = tick_of(marks[:, profile.rx_chain.index(stage)]) \
                - tick_of(rx_end)
        elif stage == "tx.wire":
            truth[f"ticks/{stage}"] = ends["tx.wire"] - tick_of(send)
        else:
            truth[f"ticks/{stage}"] = ends["tx.wire"] - tick_of(xmit)
    meta = {"profile": profile.name, "family": profile.family, "frame_bytes": profile.size,
            "packets": n, "seed": int(seed), "tick_hz": timing.tick_hz,
            "capture_hz": timing.capture_hz, "lanes": timing.lanes,
            "lead_ticks": timing.lead_ticks, "markers": profile.markers,
            "stages": list(stage_ns), "traffic": dataclasses.asdict(traffic),
            "mii_phase_ns": mii_phase, "cpu_phase_ns": cpu_phase,
            "tick_offset": None}
    return SimRun(profile, timing, traffic, stimulus, truth, meta)


#: Inter-frame gap at 100 Mb/s (12 bytes), ns.
IFG_NS = 12 * BYTE_NS


def _burst_timeline(traffic, rx, app, tx, reply_col, turnaround, wire_ns, pulse, cpu, mii_phase,
                    cpu_phase, origin):
    """Times (ns) of a burst run, packet by packet: requests of a burst back to back; each
    receive stage serves frames in order (a marker at least a pulse and two CPU cycles after the
    previous frame's marker of that stage); one app thread takes a request only after its send
    for the previous one has returned (when that frame starts on the wire: no TX thread); the
    wire sends one frame at a time. Returns ``rx_start``, ``marks``
    (per stage column), ``send``, ``tx_start``, ``xmit`` (None without tx.xmit) and ``queue``
    (how long the app thread delayed each request)."""
    n, n_rx = rx.shape
    gap = pulse + 2 * cpu
    rx_start = np.empty(n)
    marks = np.empty((n, n_rx))
    send = np.empty(n)
    tx_start = np.empty(n)
    xmit = np.empty(n) if tx.shape[1] == 2 else None
    queue = np.zeros(n)
    t = origin
    for i in range(n):
        if i and i % traffic.burst == 0:            # a new burst: after the last echo
            t = tx_start[i - 1] + wire_ns + turnaround[i]
        elif i:
            t = rx_start[i - 1] + wire_ns + IFG_NS
        rx_start[i] = ceil_grid(t, MII_CLOCK_NS, mii_phase)
        end = rx_start[i] + wire_ns
        for j in range(n_rx):
            at = ceil_grid(end + rx[i, j], cpu, cpu_phase)
            low = marks[i, j - 1] + 2 * cpu if j else at
            if i:
                low = max(low, marks[i - 1, j] + gap)
            if j == reply_col and i:
                # the app thread is still in the previous send, which returns once the frame
                # is on its way to the wire (no TX thread)
                low = max(low, tx_start[i - 1] + 1000.0 * traffic.app_busy_us + gap)
                queue[i] = max(0.0, low - at)
            marks[i, j] = max(at, ceil_grid(low, cpu, cpu_phase))
        send[i] = ceil_grid(marks[i, reply_col] + app[i], cpu, cpu_phase)
        start = send[i] + tx[i, 0]
        if i:
            start = max(start, tx_start[i - 1] + wire_ns + IFG_NS)
        tx_start[i] = ceil_grid(start, MII_CLOCK_NS, mii_phase)
        if xmit is not None:
            x = ceil_grid(tx_start[i] - tx[i, 1], cpu, cpu_phase)
            x = max(x, send[i] + 2 * cpu, xmit[i - 1] + gap if i else x)
            xmit[i] = ceil_grid(x, cpu, cpu_phase)
            tx_start[i] = max(tx_start[i], ceil_grid(xmit[i] + 2 * cpu, MII_CLOCK_NS,
                                                      mii_phase))
    return rx_start, marks, send, tx_start, xmit, queue


def stimulus_of_edges(ticks, channel, rising):
    """Merge edges sorted by tick into a :class:`Stimulus` (levels from each distinct tick on):
    the pin activity the instrument must see for these edges. Raises :class:`LatscopeError` when
    two edges of one channel fall in one tick; an edge list that does not alternate per channel
    is a programming error (``AssertionError``)."""
    if len(ticks) > 1:
        same = (ticks[1:] == ticks[:-1]) & (channel[1:] == channel[:-1])
        if same.any():
            raise LatscopeError("two edges of one channel fall in one instrument tick; the "
                                "pulse is shorter than the instrument resolution")
    toggles = (np.uint16(1) << channel.astype(np.uint16)).astype(np.uint16)
    levels = np.bitwise_xor.accumulate(toggles) if len(toggles) else toggles
    last = np.ones(len(ticks), bool)
    last[:-1] = ticks[1:] != ticks[:-1]
    stim_ticks = ticks[last].astype(np.int64)
    stim_values = levels[last].astype(np.uint16)
    # Consistency: the level after a rising edge has the bit set.
    if len(channel) and not np.array_equal((levels >> channel.astype(np.uint16)) & 1,
                                           rising.astype(np.uint16)):
        raise AssertionError("edge list does not alternate per channel")
    return Stimulus(stim_ticks, stim_values)


def compare_to_truth(time, channel, rising, truth, *, tolerance_ticks=1):
    """Check decoded events against the ground truth.

    The decoded time base may start at a different tick (the instrument's time reset and the
    moment the bench started the stimulus); one constant offset, taken from the first event, is
    removed. Returns a dict: ``offset`` (ticks), ``missing`` and ``extra`` (event counts),
    ``max_error`` (ticks), ``ok`` (no missing or extra event, every error within the tolerance).
    """
    time = np.asarray(time, np.int64)
    channel = np.asarray(channel, np.uint8)
    rising = np.asarray(rising, bool)
    t_time = np.asarray(truth["time"], np.int64)
    t_channel = np.asarray(truth["channel"], np.uint8)
    t_rising = np.asarray(truth["rising"], bool)
    result = {"decoded": len(time), "expected": len(t_time)}
    if not len(time) or not len(t_time):
        result.update(offset=0, missing=len(t_time), extra=len(time), max_error=0,
                      ok=len(time) == len(t_time))
        return result
    offset = int(time[0] - t_time[0])
    # Match per (channel, edge) stream in order: both sides are time-sorted.
    missing = extra = 0
    max_error = 0
    for ch in np.unique(np.concatenate([channel, t_channel])):
        for edge in (False, True):
            a = time[(channel == ch) & (rising == edge)] - offset
            b = t_time[(t_channel == ch) & (t_rising == edge)]
            m = min(len(a), len(b))
            missing += max(0, len(b) - len(a))
            extra += max(0, len(a) - len(b))
            if m:
                max_error = max(max_error, int(np.max(np.abs(a[:m] - b[:m]))))
    result.update(offset=offset, missing=missing, extra=extra, max_error=max_error,
                  ok=missing == 0 and extra == 0 and max_error <= tolerance_ticks)
    return result


