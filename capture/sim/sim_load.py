"""The simulated bench under load: the measured stream beside background traffic on a real wire.

Part of :mod:`latscope.capture.sim.simbench`. :func:`simulate_load` builds every frame on the DUT's
receive wire (the measured requests, class ``hp``, and background frames, class ``bg``, at a share
of the line rate with mixed sizes: :mod:`~latscope.capture.sim.sim_wire`) and on its transmit wire
(the echoed replies), and runs a model of the DUT's CPU over them:

* **interrupts**: one per received frame, or one per ``coalesce_frames`` frames / ``coalesce_us``
  after the first waiting one (interrupt moderation); an interrupt cannot start before the
  previous one has finished (it is one CPU);
* **driver** (interrupt level): handles the frames of its interrupt in arrival order. With the
  stack, each frame is copied out of the MAC (the profile's ``rx.copy - rx.isr`` at that frame's
  size) and queued to the stack; a full queue (``stack_queue``) drops the frame. With the fast
  track (profiles with ``rx.fast``) a measured frame is delivered from driver context at once
  (its ``rx.fast - rx.isr``), background frames still go to the stack (copied as Ethernet Lite
  with device memory does: the fast track is built on it);
* **stack** (thread level, below the driver): takes queued frames in order, each costing the
  profile's ``rx.udp - rx.copy`` at its size; a measured frame's ``rx.udp`` marker rises when the
  stack is done with it; the echo follows ``app`` later, ``tx.wire`` before its first bit;
* **loss**: each frame is lost below the driver with ``drop_probability``;
* **queued bursts** (``burst`` > 1 or ``app_busy_us`` > 0): the measured requests leave in bursts of
  ``burst``, back to back on the wire, a burst every ``burst`` request periods (the same mean
  rate); one in-order app thread takes each request at its delivery marker (``rx.udp``, or
  ``rx.fast`` for the fast track) and sends its echo; its send returns when the echo starts on the
  wire (no TX thread), then it works ``app_busy_us`` more, and the next delivery waits for it.
  The stack's delivery is the app's receive callback in the stack thread, so the stack waits
  with it; the fast track's driver hands the request over and goes on (its ``rx.fast`` marker
  rises when the app thread takes it). So the requests of a burst queue behind each other (the
  truth's ``queue_ns``: how long the app thread made each wait), as
  :func:`~latscope.capture.sim.sim_dut.simulate`'s ``Traffic(mode="burst")``.

Per-frame costs at background sizes are interpolated linearly in frame size between the profile
family's sizes (the paper's 64, 256 and 1024 B columns) and extended past 1024 B with the slope
of the last two (a copy costs per byte). Not modelled: interrupts preempting the stack thread
(the stack's finish times are early by the interrupts' time in between). A measured frame uses
its own correlated draw (:func:`~latscope.capture.sim.sim_dut.draw_chain`), so with no load the
stages are those of :func:`~latscope.capture.sim.sim_dut.simulate`. The run holds the wire's frames
(:attr:`LoadRun.wire`) so an engine can play them through the sniffers' reference model.
"""

import dataclasses
import importlib.resources
import os

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.vcd import change_lines
from latscope.capture.link.rules import rules_from_dict
from latscope.capture.sim import sim_wire as wire
from latscope.capture.sim.sim_dut import (
    InstrumentTiming,
    SimRun,
    Traffic,
    ceil_grid,
    draw_chain,
    stimulus_of_edges,
)
from latscope.capture.sim.sim_profile import (
    FCS_BYTES,
    MII_CLOCK_NS,
    RX_DV,
    TX_EN,
    ProfileError,
    load_profile,
    profile_files,
    read_toml,
)
from latscope.gateware.model_sniffer import mii_nibbles, rmii_dibits

__all__ = ["LoadScenario", "LoadRun", "load_scenario", "list_scenarios", "simulate_load",
           "SCENARIO_FILE", "PROBE_PORT", "BACKGROUND_PORT", "CLASSES", "default_frames_config",
           "write_pins_vcd", "probe_frame", "request_offset_ns"]

SCENARIO_FILE = "under-load"
#: UDP port of the measured stream (the DUT's echo port) and of the background traffic (discard).
PROBE_PORT = 5000
BACKGROUND_PORT = 9
#: Class names of the bench's rule table (:func:`default_frames_config`).
CLASSES = ("other", "hp", "bg")


@dataclasses.dataclass(frozen=True)
class LoadScenario:
    """What else is on the wire and how the DUT shares its CPU (``profiles/under-load.toml``)."""
    name: str = "bg0"
    load: float = 0.0
    mix: str = "imix"
    probe_rate_pps: float = 1000.0
    coalesce_frames: int = 1
    coalesce_us: float = 0.0
    stack_queue: int = 16
    drop_probability: float = 1e-4
    burst: int = 1
    app_busy_us: float = 0.0

    @property
    def queued(self):
        """Requests come in bursts, or the app thread works after its send: the in-order app
        thread is modelled (module docstring, "queued bursts")."""
        return self.burst > 1 or self.app_busy_us > 0

    def __post_init__(self):
        checks = [(0 <= self.load <= 0.95, "load must be 0 to 0.95 of the line rate"),
                  (self.mix == "imix", "mix must be \"imix\""),
                  (0 < self.probe_rate_pps <= 100_000, "probe_rate_pps must be 0 < r <= 100,000"),
                  (isinstance(self.coalesce_frames, int) and 1 <= self.coalesce_frames <= 256,
                   "coalesce_frames must be an integer 1..256"),
                  (0 <= self.coalesce_us <= 10_000, "coalesce_us must be 0..10,000"),
                  (isinstance(self.stack_queue, int) and 1 <= self.stack_queue <= 4096,
                   "stack_queue must be an integer 1..4096"),
                  (0 <= self.drop_probability <= 0.1, "drop_probability must be 0..0.1"),
                  (isinstance(self.burst, int) and not isinstance(self.burst, bool)
                   and 1 <= self.burst <= 1000, "burst must be an integer 1..1000"),
                  (0 <= self.app_busy_us <= 10_000, "app_busy_us must be 0..10,000")]
        for ok, message in checks:
            if not ok:
                raise ProfileError(f"load scenario {self.name}: {message}")

    def metadata(self):
        return dataclasses.asdict(self)


def _scenario_file():
    return importlib.resources.files("latscope.capture.sim") / "profiles" / f"{SCENARIO_FILE}.toml"


def list_scenarios():
    """Names of the shipped load scenarios."""
    return list(read_toml(_scenario_file(), SCENARIO_FILE).get("scenario", {}))


def load_scenario(spec):
    """A load scenario: a shipped name (``bg60``, see :func:`list_scenarios`), ``FILE.toml:NAME``,
    or a number: that share of the line rate with the defaults."""
    import pathlib
    if isinstance(spec, LoadScenario):
        return spec
    spec = os.fspath(spec)
    try:
        share = float(spec)
    except ValueError:
        share = None
    if share is not None:
        return LoadScenario(name=f"load-{share:g}", load=share)
    path, name = _scenario_file(), spec
    if ".toml:" in spec:
        file, _, name = spec.partition(".toml:")
        path = pathlib.Path(file + ".toml")
        if not path.exists():
            raise ProfileError(f"load scenario file {path} does not exist")
    tables = read_toml(path, spec).get("scenario", {})
    if name not in tables:
        raise ProfileError(f"unknown load scenario {spec!r}; shipped: "
                           f"{', '.join(list_scenarios())} (or FILE.toml:NAME, or a share such "
                           f"as 0.6)")
    base = dict(tables.get("bg0", {}))
    base.update(tables[name])
    fields = {f.name for f in dataclasses.fields(LoadScenario)}
    unknown = sorted(set(base) - fields)
    if unknown:
        raise ProfileError(f"load scenario {name}: unknown key {unknown[0]!r}")
    for key in ("load", "probe_rate_pps", "coalesce_us", "drop_probability", "app_busy_us"):
        if key in base and isinstance(base[key], int) and not isinstance(base[key], bool):
            base[key] = float(base[key])
    return LoadScenario(name=name, **base)


def default_frames_config():
    """The rule table the bench's captures use unless the config has one: receive frames to the
    echo port and transmit frames from it are ``hp`` (recorded), other IPv4 frames ``bg`` (counted
    only), the rest ``other`` (counted only)."""
    return rules_from_dict({
        "classes": list(CLASSES), "record": ["hp"],
        "rx": [{"class": "hp", "dst_port": PROBE_PORT}, {"class": "bg", "ethertype": 0x0800}],
        "tx": [{"class": "hp", "src_port": PROBE_PORT}, {"class": "bg", "ethertype": 0x0800}]},
        "simulated bench")


@dataclasses.dataclass
class LoadRun(SimRun):
    """A :class:`~latscope.capture.sim.sim_dut.SimRun` with the wire: ``wire[d]`` (0 receive, 1
    transmit) holds ``frames`` (bytes, destination MAC through FCS), ``start_ns``/``end_ns``
    (first and last bit, ns since tick 0) in wire order."""
    wire: dict = None
    scenario: LoadScenario = None


def request_offset_ns(k, scenario):
    """Intended send time of measured request ``k`` (ns after the first request's): one every
    ``1 / probe_rate_pps`` s, or, with ``burst`` > 1, the ``burst`` requests of a burst all at its
    start (the wire sends them back to back), a burst every ``burst`` periods."""
    burst = scenario.burst
    return (np.asarray(k) // burst) * burst * (1e9 / scenario.probe_rate_pps)


def _family_costs(profile):
    """Per-frame costs (ns) as functions of frame size: driver copy, stack, fast delivery.

    From the profile family's sizes; the fast track's background copies come from el-dm."""
    files = profile_files()

    def table(family):
        if family not in files:
            raise ProfileError(f"{family}: no such profile family for the load model")
        data = read_toml(files[family], family)
        sizes = sorted(int(s) for s in data.get("size", {}))
        return [load_profile(f"{family}-{s}") for s in sizes]

    def fit(profiles, a, b):
        x = np.array([p.size for p in profiles], float)
        y = np.array([(p.stages[b].mean_ns - p.stages[a].mean_ns) for p in profiles])
        x = x + FCS_BYTES

        def cost(size):      # linear between the sizes, extended past the largest by its slope
            if size <= x[-1] or len(x) < 2:
                return float(np.interp(size, x, y))
            return float(y[-1] + (y[-1] - y[-2]) / (x[-1] - x[-2]) * (size - x[-1]))
        return cost

    stack_family = "el-dm" if "rx.fast" in profile.stages else profile.family
    base = table(stack_family)
    return _memo(fit(base, "rx.isr", "rx.copy")), _memo(fit(base, "rx.copy", "rx.udp"))


def _memo(function):
    cache = {}

    def cached(size):
        size = int(size)
        if size not in cache:
            cache[size] = function(size)
        return cache[size]
    return cached


def simulate_load(profile, packets, scenario="bg0", *, seed=0, timing=None):
    """Simulate ``packets`` measured requests of ``profile`` under ``scenario``.

    Returns a :class:`LoadRun`: ``stimulus`` (RX_DV, TX_EN and marker edges for the instrument),
    ``truth`` as :func:`~latscope.capture.sim.sim_dut.simulate` gives it for the measured requests
    (stages of dropped requests are NaN, ``dropped`` marks them), plus ``bg_frames``,
    ``bg_dropped``, ``interrupts``; and ``wire``.

    >>> run = simulate_load("fast-track-64", 50, "bg30", seed=1)
    >>> run.n_packets, len(run.wire[1]["frames"]) <= 50, len(run.wire[0]["frames"]) > 50
    (50, True, True)
    """
    if isinstance(profile, (str, os.PathLike)):
        profile = load_profile(profile)
    scenario = load_scenario(scenario)
    if isinstance(packets, bool) or not isinstance(packets, (int, np.integer)) or packets < 1:
        raise LatscopeError(f"packet count must be a positive integer, not {packets!r}")
    timing = timing or InstrumentTiming()
    n = int(packets)
    rng = np.random.default_rng(seed)
    cpu = profile.cpu_ns
    fast = "rx.fast" in profile.stages
    mii_phase = rng.uniform(0, MII_CLOCK_NS)
    cpu_phase = rng.uniform(0, cpu)
    pulse = max(1, round(profile.marker_pulse_ns / cpu)) * cpu
    copy_cost, stack_cost = _family_costs(profile)
    size = profile.size + FCS_BYTES

    # --- the receive wire: paced requests and background frames, one FIFO onto the wire
    period = 1e9 / scenario.probe_rate_pps
    origin = 4 * MII_CLOCK_NS
    intended = origin + request_offset_ns(np.arange(n), scenario)
    duration = n * period + 2 * period
    bg_t, bg_size = wire.background_frames(rng, scenario.load, duration)
    ready = np.concatenate([intended, origin + bg_t])
    sizes = np.concatenate([np.full(n, size), bg_size]).astype(np.int64)
    probe = np.concatenate([np.arange(n), np.full(len(bg_t), -1)])
    order = np.argsort(ready, kind="stable")
    ready, sizes, probe = ready[order], sizes[order], probe[order]
    rx_start, rx_end = wire.serialize(ready, sizes, phase_ns=mii_phase)
    m = len(ready)
    lost = rng.random(m) < scenario.drop_probability

    # --- per-request draws: the profile's correlated chain (totals from RX_DV falling)
    chain = draw_chain(rng, profile, profile.rx_chain, n)
    for j in range(1, chain.shape[1]):
        chain[:, j] = np.maximum(chain[:, j], chain[:, j - 1] + 2 * cpu)
    app = draw_chain(rng, profile, ("app",), n)[:, 0]
    tx_stages = ("tx.wire", "tx.xmit") if "tx.xmit" in profile.stages else ("tx.wire",)
    tx = draw_chain(rng, profile, tx_stages, n)
    if len(tx_stages) == 2:
        tx[:, 0] = np.maximum(tx[:, 0], tx[:, 1] + 2 * cpu)
    isr_bg = draw_chain(rng, profile, ("rx.isr",), m)[:, 0]
    col = {s: j for j, s in enumerate(profile.rx_chain)}

    # --- the CPU: interrupts (driver) above the stack thread; with queued bursts, the app thread
    app_thread = _AppThread(scenario, profile, app, tx, size, cpu, cpu_phase, mii_phase, pulse,
                            n) if scenario.queued else None
    marks = {s: np.full(n, np.nan) for s in profile.rx_chain}
    isr_marks = []
    dropped_req = np.zeros(n, bool)
    bg_dropped = 0
    isr_free = -np.inf           # the driver's interrupt is done (CPU free for the next one)
    stack_free = -np.inf         # the stack has finished its current frame
    queue_done = []              # stack completion times of frames still queued
    batch = []
    received = np.flatnonzero(~lost)
    for position, i in enumerate(received):
        batch.append(i)
        nxt = received[position + 1] if position + 1 < len(received) else None
        # moderation: wait for coalesce_frames frames, at most coalesce_us after the first
        timer = 1000.0 * scenario.coalesce_us if scenario.coalesce_us > 0 else np.inf
        deadline = rx_end[batch[0]] + timer
        full = len(batch) >= scenario.coalesce_frames
        if not full and nxt is not None and rx_end[nxt] <= deadline:
            continue                     # the interrupt waits for more frames
        fire = rx_end[batch[-1]] if full or not np.isfinite(deadline) else deadline
        k0 = probe[batch[0]]
        entry = fire + (chain[k0, col["rx.isr"]] if k0 >= 0 else isr_bg[batch[0]])
        entry = ceil_grid(max(entry, isr_free), cpu, cpu_phase)
        isr_marks.append(entry)
        t = entry              # the driver's work follows the entry (the pulse is the marker's)
        for f in batch:
            k = probe[f]
            if k >= 0 and fast:      # delivered from driver context: no stack
                deliver = t + chain[k, col["rx.fast"]] - chain[k, col["rx.isr"]]
                marks["rx.fast"][k] = ceil_grid(deliver, cpu, cpu_phase)
                marks["rx.isr"][k] = entry
                t = marks["rx.fast"][k] + pulse
                if app_thread is not None:       # handed over: the driver does not wait
                    marks["rx.fast"][k] = app_thread.take(k, marks["rx.fast"][k])
                continue
            copied = t + (chain[k, col["rx.copy"]] - chain[k, col["rx.isr"]] if k >= 0
                          else float(copy_cost(sizes[f])))
            t = copied
            queue_done = [d for d in queue_done if d > copied]
            if len(queue_done) >= scenario.stack_queue:      # the stack's queue is full
                if k >= 0:
                    dropped_req[k] = True
                else:
                    bg_dropped += 1
                continue
            begin = max(copied, stack_free)
            cost = (chain[k, col["rx.udp"]] - chain[k, col["rx.copy"]] if k >= 0
                    else float(stack_cost(sizes[f])))
            stack_free = begin + cost
            queue_done.append(stack_free)
            if k >= 0:
                marks["rx.isr"][k] = entry
                marks["rx.copy"][k] = ceil_grid(copied, cpu, cpu_phase)
                marks["rx.udp"][k] = ceil_grid(stack_free, cpu, cpu_phase)
                if app_thread is not None:
                    marks["rx.udp"][k] = app_thread.take(k, marks["rx.udp"][k])
                stack_free = marks["rx.udp"][k] + pulse
                queue_done[-1] = stack_free          # it holds the stack until then
        isr_free = max(t, entry + pulse) + 2 * cpu   # the rx.isr pulses never overlap
        batch = []
    for k in np.flatnonzero(lost & (probe >= 0)):
        dropped_req[probe[k]] = True

    # --- replies on the transmit wire
    ok = ~dropped_req
    req_idx = np.full(n, -1)
    req_idx[probe[probe >= 0]] = np.flatnonzero(probe >= 0)
    reply = np.flatnonzero(ok)
    tx_start = np.full(n, np.nan)
    tx_end = np.full(n, np.nan)
    if app_thread is not None:           # sent in order by the app thread
        send = app_thread.send
        tx_start[reply] = app_thread.tx_start[reply]
        tx_end[reply] = tx_start[reply] + wire.wire_ns(size)
        queue = app_thread.queue
    else:
        send = ceil_grid(marks[profile.reply_after] + app, cpu, cpu_phase)
        want_tx = send + tx[:, 0]
        reply = reply[np.argsort(want_tx[reply], kind="stable")]
        s, e = wire.serialize(want_tx[reply], np.full(len(reply), size), phase_ns=mii_phase)
        tx_start[reply], tx_end[reply] = s, e
        queue = np.zeros(n)
    xmit = ceil_grid(tx_start - tx[:, 1], cpu, cpu_phase) if len(tx_stages) == 2 else None

    # --- edges
    edges = [(rx_start, RX_DV, True), (rx_end, RX_DV, False),
             (tx_start[reply], TX_EN, True), (tx_end[reply], TX_EN, False)]
    ch_isr = profile.marker_channel("rx.isr")
    isr_marks = np.array(isr_marks)
    edges += [(isr_marks, ch_isr, True), (isr_marks + pulse, ch_isr, False)]
    stage_ns = {}
    req_end = rx_end[req_idx]
    for stage in profile.rx_chain:
        stage_ns[stage] = np.where(ok, marks[stage] - req_end, np.nan)
        if stage == "rx.isr":
            continue
        ch = profile.marker_channel(stage)
        edges += [(marks[stage][ok], ch, True), (marks[stage][ok] + pulse, ch, False)]
    ch = profile.marker_channel("tx.send")
    edges += [(send[ok], ch, True), (send[ok] + pulse, ch, False)]
    stage_ns["tx.wire"] = np.where(ok, tx_start - send, np.nan)
    if xmit is not None:
        ch = profile.marker_channel("tx.xmit")
        edges += [(xmit[ok], ch, True), (xmit[ok] + pulse, ch, False)]
        stage_ns["tx.xmit"] = np.where(ok, tx_start - xmit, np.nan)
    stage_ns["node.e2e"] = np.where(ok, tx_start - req_end, np.nan)

    lead_ns = timing.lead_ticks * timing.tick_ns
    times = np.concatenate([np.asarray(t, float) for t, _, _ in edges]) + lead_ns
    channel = np.concatenate([np.full(len(t), c, np.uint8) for t, c, _ in edges])
    rising = np.concatenate([np.full(len(t), r, bool) for t, _, r in edges])
    ticks = np.ceil(times / timing.tick_ns - 1e-9).astype(np.int64)
    order = np.lexsort((channel, ticks))
    times, channel, rising, ticks = (a[order] for a in (times, channel, rising, ticks))
    stimulus = stimulus_of_edges(ticks, channel, rising)

    # --- the frames themselves
    # Background frames of one size are one frame (zeros after the UDP header: not latscope
    # traffic, so no traffic magic and nothing pairs them), so the engine parses each size once.
    run_id = int(seed) & 0xFFFF
    background = {int(b): wire.udp_frame(int(b), 0, dst_port=BACKGROUND_PORT,
                                         src_port=BACKGROUND_PORT, traffic=False)
                  for b in np.unique(bg_size)}
    rx_frames = [probe_frame(int(sizes[f]), int(probe[f]), intended[probe[f]], run_id)
                 if probe[f] >= 0 else background[int(sizes[f])]
                 for f in range(m)]
    tx_frames = [probe_frame(size, int(k), intended[k], run_id, reply=True) for k in reply]
    wire_runs = {0: {"frames": rx_frames, "start_ns": rx_start + lead_ns,
                     "end_ns": rx_end + lead_ns, "probe": probe},
                 1: {"frames": tx_frames, "start_ns": tx_start[reply] + lead_ns,
                     "end_ns": tx_end[reply] + lead_ns, "probe": reply}}

    truth = {"time": ticks, "channel": channel, "rising": rising, "time_ns": times,
             "rx_start_ns": rx_start[req_idx] + lead_ns, "rx_end_ns": req_end + lead_ns,
             "tx_start_ns": tx_start + lead_ns, "tx_end_ns": tx_end + lead_ns,
             "queue_ns": queue, "dropped": dropped_req,
             "bg_frames": np.array(int(np.count_nonzero(probe < 0))),
             "bg_dropped": np.array(bg_dropped), "interrupts": np.array(len(isr_marks))}
    for stage, value in stage_ns.items():
        truth[f"stage/{stage}"] = value
    traffic = Traffic(mode="paced", rate_pps=scenario.probe_rate_pps)
    meta = {"profile": profile.name, "family": profile.family, "frame_bytes": profile.size,
            "packets": n, "seed": int(seed), "tick_hz": timing.tick_hz,
            "capture_hz": timing.capture_hz, "lanes": timing.lanes,
            "lead_ticks": timing.lead_ticks, "markers": profile.markers,
            "stages": list(stage_ns), "traffic": dataclasses.asdict(traffic),
            "load": scenario.metadata(), "wire": "mii",
            "mii_phase_ns": mii_phase, "cpu_phase_ns": cpu_phase, "tick_offset": None}
    return LoadRun(profile, timing, traffic, stimulus, truth, meta, wire=wire_runs,
                   scenario=scenario)


class _AppThread:
    """The in-order app thread of a queued-burst run (module docstring): :meth:`take` is called
    with each delivered request in order and returns when the thread takes it (its delivery
    marker), computing the echo's send and wire start on the way."""

    def __init__(self, scenario, profile, app, tx, size, cpu, cpu_phase, mii_phase, pulse, n):
        if profile.reply_after not in ("rx.udp", "rx.fast"):
            raise LatscopeError(f"queued bursts need a profile that replies after rx.udp or "
                                f"rx.fast, not {profile.reply_after!r}")
        self.app, self.tx, self.size = app, tx, size
        self.cpu, self.cpu_phase, self.mii_phase = cpu, cpu_phase, mii_phase
        self.busy_ns = 1000.0 * scenario.app_busy_us
        self.gap = pulse + 2 * cpu           # markers of one channel never overlap
        self.send = np.full(n, np.nan)
        self.tx_start = np.full(n, np.nan)
        self.queue = np.zeros(n)
        self.free = -np.inf                  # the app thread is back from its previous request
        self.wire_free = -np.inf             # the transmit wire is free (after the gap)

    def take(self, k, delivered):
        """Request ``k`` is delivered at ``delivered`` (ns, on the CPU grid); returns when the
        app thread takes it (ns, on the CPU grid: its delivery marker)."""
        taken = max(delivered, ceil_grid(self.free, self.cpu, self.cpu_phase))
        self.queue[k] = taken - delivered
        send = ceil_grid(taken + self.app[k], self.cpu, self.cpu_phase)
        start = max(send + self.tx[k, 0], self.wire_free)
        # the PHY clock grid, as wire.serialize places frames
        start = np.ceil((start - self.mii_phase) / MII_CLOCK_NS - 1e-9) * MII_CLOCK_NS \
            + self.mii_phase
        self.send[k], self.tx_start[k] = send, start
        self.wire_free = start + float(wire.wire_ns(self.size)) + wire.IFG_NS
        self.free = start + self.busy_ns + self.gap
        return taken


def probe_frame(size, seq, intended_ns, run_id, *, reply=False):
    """A frame of the measured stream: request ``seq`` (to the DUT's echo port) or, with
    ``reply``, its echo (from it), carrying the traffic payload with ``intended_ns``."""
    ends = dict(src=wire.DUT, dst=wire.HOST) if reply else {}
    return wire.udp_frame(int(size), int(seq), dst_port=PROBE_PORT, src_port=PROBE_PORT,
                          run_id=run_id, intended_ns=int(intended_ns), **ends)


def write_pins_vcd(run, path, *, interface="mii", carrier_early=0):
    """Write a :class:`LoadRun`'s pins as a Value Change Dump, one 1-bit wire per role, times in
    ps. No clocks: a reader samples the data in the middle of each bit time (``latscope
    replay-pins`` generates the PHY clock phase-locked to the rising edge of valid).
    # Ref: IEEE Std 1364-2005 §18; IEEE Std 802.3-2018 §22.2 (MII); RMII 1.2 §5.

    ``interface="mii"``: ``rx_dv``, ``tx_en`` and the data pins ``rxd0``..``rxd3``,
    ``txd0``..``txd3`` (each nibble from the start of its 40 ns bit time, 0 while idle).
    ``interface="rmii"``: ``crs_dv`` with ``RXD[1:0]`` (dibits of 20 ns; ``CRS_DV`` toggles over
    the last ``carrier_early`` nibbles of each received frame, :func:`sim_wire.rmii_cycles`) and
    ``tx_en`` with ``TXD[1:0]``. Both: the profile's markers ``m0``..``m4``.
    """
    if interface not in ("mii", "rmii"):
        raise LatscopeError(f"interface must be mii or rmii, not {interface!r}")
    t = run.truth
    roles = {1: "tx_en"} if interface == "rmii" else {0: "rx_dv", 1: "tx_en"}
    roles.update({3 + i: f"m{i}" for i in range(5) if f"m{i}" in run.profile.markers})
    changes = []            # (time_ps, role, level)
    for ch, role in roles.items():
        sel = t["channel"] == ch
        ps = np.rint(t["time_ns"][sel] * 1000).astype(np.int64)
        changes += list(zip(ps.tolist(), [role] * len(ps), t["rising"][sel].astype(int).tolist(),
                            strict=True))

    def add(role, at, level):
        prev = np.concatenate([[0], level[:-1]])
        k = np.flatnonzero(level != prev)
        changes.extend((int(at[i]), role, int(level[i])) for i in k)

    width = 4 if interface == "mii" else 2
    for d, prefix in ((0, "rxd"), (1, "txd")):
        w = run.wire[d]
        for frame, start in zip(w["frames"], w["start_ns"], strict=True):
            if interface == "mii":
                units = np.array([x for _, _, x in mii_nibbles(frame)] + [0], np.int64)
                step = wire.MII_CLOCK_NS
            else:
                pins = rmii_dibits(frame, carrier_early=carrier_early if d == 0 else 0)
                units = np.array([x for _, x in pins] + [0], np.int64)
                step = wire.RMII_CLOCK_NS
                if d == 0:
                    dv = np.array([v for v, _ in pins] + [0], np.int64)
            at = np.rint((start + np.arange(len(units)) * step) * 1000).astype(np.int64)
            for bit in range(width):
                add(f"{prefix}{bit}", at, (units >> bit) & 1)
            if interface == "rmii" and d == 0:
                add("crs_dv", at, dv)
    data_roles = [f"{p}{b}" for p in ("rxd", "txd") for b in range(width)]
    names = (["crs_dv"] if interface == "rmii" else []) + list(roles.values()) + data_roles
    ident = {name: chr(33 + i) for i, name in enumerate(names)}
    changes.sort(key=lambda c: (c[0], names.index(c[1])))
    lines = ["$comment latscope simulated bench: pins of a run under load "
             f"({run.profile.name}, {run.scenario.name}, seed {run.meta['seed']}) $end",
             "$timescale 1ps $end", "$scope module latscope $end"]
    lines += [f"$var wire 1 {ident[n]} {n} $end" for n in names]
    lines += ["$upscope $end", "$enddefinitions $end", "#0", "$dumpvars"]
    lines += [f"0{ident[n]}" for n in names]
    lines.append("$end")
    lines += change_lines((ps, ident[name], level) for ps, name, level in changes)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
