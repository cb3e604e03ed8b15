"""The simulated bench: a model of the device under test driving the real gateware in simulation.

A *profile* (``capture/profiles/*.toml``, one file per MAC configuration of the 2018 paper, one
table per frame size) gives every stage's latency distribution. :func:`simulate` draws, for each
packet, the MII activity (``RX_DV`` for the request, ``TX_EN`` for the echoed reply, with preamble,
SFD, frame, FCS and inter-frame gap timing on the 40 ns MII clock grid) and the DUT's marker pulses
(on the CPU clock grid), turns the edges into instrument ticks and merges them into a
:class:`Stimulus` for the gateware. It keeps the ground truth: every edge's exact time, the ticks at
which the instrument must report it, and every packet's true stage latencies.

An *engine* then plays the stimulus through the instrument and produces the instrument's bytes;
:mod:`latscope.capture.ptyserve` serves them on a pseudo-terminal, so ``latscope capture --port``
runs exactly the hardware code path. Engines: ``verilator`` (the real gateware, compiled by
:mod:`latscope.gateware.verilator`, idle time skipped by the core's fast-forward: about 2,000
echo packets, 3·10^4 events, per second and capture), ``amaranth`` (the real gateware in the
Amaranth simulator: slow, only for tiny runs), ``model`` (the gateware's Python reference models,
:mod:`latscope.gateware.model_capture` + :mod:`latscope.gateware.model_stream`, two to three times
faster than Verilator). Everything simulated is labelled so in the capture's metadata.

Model choices, and where every number comes from, are in ``docs/simulated-bench.md``.
"""

import dataclasses
import importlib.resources
import json
import math
import os
import tomllib

import numpy as np
from scipy import special

from latscope import LatscopeError

__all__ = [
    "ProfileError", "StageSpec", "TailSpec", "Profile", "Traffic", "InstrumentTiming",
    "Stimulus", "SimRun", "list_profiles", "load_profile", "simulate", "compare_to_truth",
    "CHANNEL_ROLES", "MII_CLOCK_NS", "PREAMBLE_SFD_BYTES", "FCS_BYTES", "IFG_NS",
    "ENGINES", "open_engine", "open_simulated_port",
]

# Ref: IEEE Std 802.3-2018 §22.2 (MII): RX_DV/TX_EN change on RX_CLK/TX_CLK, 25 MHz at 100 Mb/s;
# one byte is two nibbles (80 ns); preamble 7 B + SFD 1 B precede the frame; IFG is 96 bit times.
MII_CLOCK_NS = 40.0
BYTE_NS = 80.0
PREAMBLE_SFD_BYTES = 8
FCS_BYTES = 4          # the paper's sizes exclude preamble, SFD and FCS (§III)
IFG_NS = 960.0

#: Instrument channel roles, by index (project-wide convention).
CHANNEL_ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")
RX_DV, TX_EN = 0, 1
MARKERS = ("m0", "m1", "m2", "m3", "m4")
MARKER_MEANINGS = ("rx.isr", "rx.copy", "rx.udp", "rx.fast", "tx.send", "tx.xmit")
RX_STAGES = ("rx.isr", "rx.copy", "rx.udp", "rx.fast")
TX_STAGES = ("tx.wire", "tx.xmit")
#: The marker meaning whose rising edge starts each stage (RX stages end on a marker instead).
_STAGE_MARKER = {"rx.isr": "rx.isr", "rx.copy": "rx.copy", "rx.udp": "rx.udp",
                 "rx.fast": "rx.fast", "tx.wire": "tx.send", "tx.xmit": "tx.xmit"}

PROFILE_DIR = "profiles"


class ProfileError(LatscopeError):
    """A profile is missing, unreadable or inconsistent."""


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """Target distribution of one latency: mean and 3σ in µs, as Table I reports them."""
    mean_us: float
    three_sigma_us: float
    source: str = ""

    @property
    def sigma_ns(self):
        return self.three_sigma_us * 1000.0 / 3.0

    @property
    def mean_ns(self):
        return self.mean_us * 1000.0


@dataclasses.dataclass(frozen=True)
class TailSpec:
    """A rare extra delay: with ``probability`` per packet and direction, one step of the chain
    (chosen uniformly) and every later step are delayed by
    ``min_us + Exponential(mean_extra_us)``."""
    name: str
    probability: float
    min_us: float
    mean_extra_us: float
    source: str = ""


@dataclasses.dataclass(frozen=True)
class Profile:
    """One DUT configuration at one frame size (e.g. ``gem-64``); see docs/simulated-bench.md."""
    name: str
    family: str
    title: str
    source: str
    size: int
    cpu_hz: float
    markers: dict
    rx_chain: tuple
    reply_after: str
    gamma_shape: float
    correlation: float
    marker_pulse_ns: float
    app: StageSpec
    tails: tuple
    stages: dict
    path: str = ""

    @property
    def cpu_ns(self):
        return 1e9 / self.cpu_hz

    def marker_channel(self, meaning):
        """Instrument channel index of the marker that carries ``meaning``."""
        for marker, value in self.markers.items():
            if value == meaning:
                return CHANNEL_ROLES.index(marker)
        raise ProfileError(f"profile {self.name}: no marker carries {meaning!r}")

    def metadata(self):
        """JSON-ready description for capture metadata."""
        return {"name": self.name, "family": self.family, "title": self.title,
                "source": self.source, "frame_bytes": self.size, "cpu_hz": self.cpu_hz,
                "stages": {k: dataclasses.asdict(v) for k, v in self.stages.items()},
                "tails": [dataclasses.asdict(t) for t in self.tails]}


@dataclasses.dataclass(frozen=True)
class Traffic:
    """How requests arrive.

    ``mode="echo"`` (default): one packet in flight; the host sends the next request
    ``host_turnaround_us + Exponential(turnaround_jitter_us)`` after the echo's last bit.
    ``mode="paced"``: requests leave every ``1 / rate_pps`` s (intended send times), but never
    before the previous echo has left the wire plus the turnaround (one in flight), so a too-high
    rate queues and the delay shows in the truth's ``queue_ns``.
    """
    mode: str = "echo"
    host_turnaround_us: float = 20.0
    turnaround_jitter_us: float = 5.0
    rate_pps: float = 0.0

    def __post_init__(self):
        if self.mode not in ("echo", "paced"):
            raise LatscopeError(f"traffic mode must be 'echo' or 'paced', not {self.mode!r}")
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


try:   # the gateware's own stimulus type, when its reference model is present
    from latscope.gateware.model_capture import Stimulus
except ImportError:   # pragma: no cover - only before the gateware model exists
    @dataclasses.dataclass
    class Stimulus:
        """Pin activity: ``values[i]`` (bit ch = level of channel ch) holds from ``ticks[i]`` on
        (all zero before ``ticks[0]``); ticks strictly increase. Tick = cycle * lanes + lane."""
        ticks: np.ndarray
        values: np.ndarray


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
        """Arrays for :meth:`latscope.capture.capfile.CaptureWriter.attach_truth` (name
        ``"simbench"``), with the metadata as a JSON string under ``meta``."""
        arrays = {key.replace("/", "_"): value for key, value in self.truth.items()}
        arrays["meta"] = np.array(json.dumps(self.meta))
        return arrays

    def save_truth(self, capture_path, **extra_meta):
        """Write the ground truth beside a capture (``capfile.truth_path``), atomically."""
        from latscope.capture import capfile
        self.meta.update(extra_meta)
        target = capfile.truth_path(capture_path)
        temp = target + ".tmp"
        with open(temp, "wb") as f:
            np.savez_compressed(f, **{f"simbench/{k}": v
                                      for k, v in self.truth_arrays().items()})
        os.replace(temp, target)
        return target


# --- Profiles -------------------------------------------------------------------------------------

def _profile_files():
    root = importlib.resources.files("latscope.capture") / PROFILE_DIR
    return {p.name[:-5]: p for p in root.iterdir() if p.name.endswith(".toml")}


def list_profiles():
    """Names of the shipped profiles (``family-size``), in a stable order: the paper's MAC columns
    (GEM, EL DM, EL SO), then the fast track; sizes ascending."""
    order = {"gem": 0, "el-dm": 1, "el-so": 2, "fast-track": 3}
    names = []
    for family, path in sorted(_profile_files().items(), key=lambda kv: (order.get(kv[0], 9),
                                                                          kv[0])):
        data = _read_toml(path, family)
        sizes = sorted(int(s) for s in data.get("size", {}))
        names += [f"{family}-{s}" for s in sizes]
    return names


def _read_toml(path, label):
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as error:
        raise ProfileError(f"profile {label}: {path} is not valid TOML: {error}") from None
    except OSError as error:
        raise ProfileError(f"profile {label}: cannot read {path}: {error.strerror}") from None


def load_profile(spec):
    """Load a profile.

    Parameters
    ----------
    spec : str or os.PathLike
        A shipped profile ``FAMILY-SIZE`` (e.g. ``"gem-64"``, see :func:`list_profiles`), or a
        TOML file ``PATH.toml`` (if it holds one size) or ``PATH.toml:SIZE``.

    Returns
    -------
    Profile

    Raises
    ------
    ProfileError
        Unknown profile, unreadable or invalid TOML, missing or inconsistent fields; the message
        names the file and the field.
    """
    import pathlib
    spec = os.fspath(spec)
    size = None
    if spec.endswith(".toml") or ".toml:" in spec:
        file, _, size_text = spec.partition(".toml")
        path = pathlib.Path(file + ".toml")
        size_text = size_text.lstrip(":")
        if size_text:
            size = size_text
        family = path.stem
        if not path.exists():
            raise ProfileError(f"profile file {path} does not exist")
    else:
        files = _profile_files()
        family, _, size = spec.rpartition("-")
        if family not in files or not size:
            raise ProfileError(f"unknown profile {spec!r}; shipped profiles: "
                               f"{', '.join(list_profiles())} (or give a FILE.toml[:SIZE])")
        path = files[family]
    data = _read_toml(path, spec)
    return _parse_profile(data, family, size, str(path))


def _need(table, key, kind, where):
    if key not in table:
        raise ProfileError(f"{where}: missing {key!r}")
    value = table[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProfileError(f"{where}: {key!r} must be {kind.__name__}, not {value!r}")
    return value


def _stage(table, where):
    if not isinstance(table, dict):
        raise ProfileError(f"{where}: must be a table with mean_us and three_sigma_us, "
                           f"not {table!r}")
    mean = _need(table, "mean_us", float, where)
    three_sigma = _need(table, "three_sigma_us", float, where)
    if not mean > 0:
        raise ProfileError(f"{where}: mean_us must be positive, not {mean!r}")
    if not 0 < three_sigma < 3 * mean:
        raise ProfileError(f"{where}: three_sigma_us must be positive and below 3 x mean_us, "
                           f"not {three_sigma!r}")
    return StageSpec(mean, three_sigma, str(table.get("source", "")))


def _parse_profile(data, family, size, path):
    where = f"profile {path}"
    head = data.get("profile")
    if not isinstance(head, dict):
        raise ProfileError(f"{where}: missing [profile] table")
    sizes = data.get("size")
    if not isinstance(sizes, dict) or not sizes:
        raise ProfileError(f"{where}: missing [size.N] tables")
    if size is None:
        if len(sizes) != 1:
            raise ProfileError(f"{where}: holds sizes {', '.join(sizes)}; choose one with "
                               f"{path}:SIZE")
        size = next(iter(sizes))
    if str(size) not in sizes:
        raise ProfileError(f"{where}: no size {size}; it has {', '.join(sizes)}")
    try:
        size_bytes = int(size)
    except ValueError:
        raise ProfileError(f"{where}: size must be a byte count, not {size!r}") from None
    if not 46 <= size_bytes <= 1514:
        raise ProfileError(f"{where}: frame size must be 46..1514 bytes, not {size_bytes}")
    name = _need(head, "name", str, where)
    markers = _need(head, "markers", dict, where)
    for marker, meaning in markers.items():
        if marker not in MARKERS:
            raise ProfileError(f"{where}: markers: {marker!r} is not one of {', '.join(MARKERS)}")
        if meaning not in MARKER_MEANINGS:
            raise ProfileError(f"{where}: markers.{marker}: unknown meaning {meaning!r}; known: "
                               f"{', '.join(MARKER_MEANINGS)}")
    if len(set(markers.values())) != len(markers):
        raise ProfileError(f"{where}: markers: a meaning is carried by two markers")
    rx_chain = tuple(_need(head, "rx_chain", list, where))
    if not rx_chain or any(s not in RX_STAGES for s in rx_chain):
        raise ProfileError(f"{where}: rx_chain must list RX stages from {', '.join(RX_STAGES)}, "
                           f"not {list(rx_chain)!r}")
    reply_after = _need(head, "reply_after", str, where)
    if reply_after not in rx_chain:
        raise ProfileError(f"{where}: reply_after {reply_after!r} is not in rx_chain")
    shape = _need(head, "gamma_shape", float, where)
    if not 0.5 <= shape <= 1000:
        raise ProfileError(f"{where}: gamma_shape must be within 0.5..1000, not {shape!r}")
    rho = _need(head, "correlation", float, where)
    if not 0 <= rho < 1:
        raise ProfileError(f"{where}: correlation must be within [0, 1), not {rho!r}")
    pulse = _need(head, "marker_pulse_ns", float, where)
    if not 5 <= pulse <= 2000:
        raise ProfileError(f"{where}: marker_pulse_ns must be within 5..2000, not {pulse!r}")
    cpu_hz = _need(head, "cpu_hz", float, where)
    if not 1e6 <= cpu_hz <= 10e9:
        raise ProfileError(f"{where}: cpu_hz must be within 1 MHz..10 GHz, not {cpu_hz!r}")
    app = _stage(head.get("app"), f"{where}: [profile.app]")
    tails = []
    for n, tail in enumerate(head.get("tail", [])):
        tw = f"{where}: [[profile.tail]] #{n + 1}"
        prob = _need(tail, "probability", float, tw)
        if not 0 <= prob <= 0.1:
            raise ProfileError(f"{tw}: probability must be within 0..0.1, not {prob!r}")
        tails.append(TailSpec(_need(tail, "name", str, tw), prob, _need(tail, "min_us", float, tw),
                              _need(tail, "mean_extra_us", float, tw),
                              str(tail.get("source", ""))))
    if sum(t.probability for t in tails) > 0.1:
        raise ProfileError(f"{where}: tail probabilities add up to more than 0.1")
    table = sizes[str(size)]
    sw = f"{where}: [size.{size}]"
    stages = {}
    for stage in list(rx_chain) + ["tx.wire", "tx.xmit"]:
        if stage not in table:
            if stage == "tx.xmit":
                continue
            raise ProfileError(f"{sw}: missing stage {stage!r}")
        stages[stage] = _stage(table[stage], f"{sw} {stage!r}")
    for stage in table:
        if stage not in stages:
            raise ProfileError(f"{sw}: unknown or unused stage {stage!r}; stages used: "
                               f"{', '.join(stages)}")
    for stage in stages:
        if _STAGE_MARKER[stage] not in markers.values():
            raise ProfileError(f"{where}: stage {stage!r} needs a marker carrying "
                               f"{_STAGE_MARKER[stage]!r}")
    means = [stages[s].mean_us for s in rx_chain]
    if means != sorted(means) or len(set(means)) != len(means):
        listed = ", ".join(f"{s}={m}" for s, m in zip(rx_chain, means, strict=True))
        raise ProfileError(f"{sw}: rx_chain stage means must increase ({listed})")
    if "tx.xmit" in stages and not stages["tx.xmit"].mean_us < stages["tx.wire"].mean_us:
        raise ProfileError(f"{sw}: tx.xmit mean must be below tx.wire mean (xmit follows send)")
    profile = Profile(
        name=f"{family}-{size_bytes}", family=family, title=str(head.get("title", name)),
        source=str(head.get("source", "")), size=size_bytes, cpu_hz=cpu_hz, markers=dict(markers),
        rx_chain=rx_chain, reply_after=reply_after, gamma_shape=shape, correlation=rho,
        marker_pulse_ns=pulse, app=app, tails=tuple(tails), stages=stages, path=path)
    # The bodies are drawn with the clock-grid quantisation subtracted (see _body_params): the
    # target 3σ must exceed what the grid alone adds.
    for stage in stages:
        _body_params(profile, stage)
    return profile


# --- The DUT model -------------------------------------------------------------------------------

def _grid_ns(profile, stage):
    """Clock grid on which the stage's end is re-timed: tx.wire ends on TX_CLK (40 ns), the others
    on the CPU clock. Re-timing adds a Uniform(0, grid) delay, which the body compensates."""
    return MII_CLOCK_NS if stage == "tx.wire" else profile.cpu_ns


def _body_params(profile, stage):
    """(shift, scale) of the shifted gamma body: mean and variance equal the target's after the
    Uniform(0, grid) of re-timing is added (mean -/+ grid/2, variance - grid**2/12)."""
    spec = profile.stages[stage] if stage in profile.stages else profile.app
    grid = _grid_ns(profile, stage)
    variance = spec.sigma_ns ** 2 - grid ** 2 / 12
    if variance <= 0:
        raise ProfileError(f"profile {profile.path or profile.name}: {stage}: 3σ of "
                           f"{spec.three_sigma_us} µs is "
                           f"below what the {grid:g} ns clock grid alone gives")
    k = profile.gamma_shape
    scale = math.sqrt(variance / k)
    # tx.xmit *starts* on the CPU grid (its end is the wire edge), so re-timing shortens it.
    bias = -grid / 2 if stage == "tx.xmit" else grid / 2
    shift = spec.mean_ns - bias - k * scale
    return shift, scale


def _draw_chain(rng, profile, stages, n):
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
        shift, scale = _body_params(profile, stage)
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


def _ceil_grid(t, grid, phase):
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
    rx = _draw_chain(rng, profile, profile.rx_chain, n)
    rx_kind, rx_step, rx_extra = _draw_tails(rng, profile, n, len(profile.rx_chain))
    steps = np.arange(len(profile.rx_chain))
    rx += np.where(steps[None, :] >= rx_step[:, None], rx_extra[:, None], 0.0)
    clipped = np.zeros(n, bool)
    for j in range(1, rx.shape[1]):      # enforce order: at least 2 CPU cycles apart
        low = rx[:, j - 1] + 2 * cpu
        clipped |= rx[:, j] < low
        rx[:, j] = np.maximum(rx[:, j], low)
    app = _draw_chain(rng, profile, ("app",), n)[:, 0]
    # Transmit chain: send -> (xmit) -> first bit; totals measured back from the wire.
    tx_stages = ("tx.wire", "tx.xmit") if "tx.xmit" in profile.stages else ("tx.wire",)
    tx = _draw_chain(rng, profile, tx_stages, n)
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
    if traffic.mode == "echo":
        earliest = np.concatenate([[0.0], np.cumsum(span[:-1])])
        start = origin + earliest
        queue = np.zeros(n)
    else:
        intended = origin + np.arange(n) * (1e9 / traffic.rate_pps)
        c = np.concatenate([[0.0], np.cumsum(span[:-1])])   # start_i = C_i + max_j<=i (a_j - C_j)
        start = c + np.maximum.accumulate(intended - c)
        queue = start - intended
    rx_start = _ceil_grid(start, MII_CLOCK_NS, mii_phase)
    rx_end = rx_start + wire_ns
    marks = _ceil_grid(rx_end[:, None] + rx, cpu, cpu_phase)
    send = _ceil_grid(marks[:, reply_col] + app, cpu, cpu_phase)
    tx_start = _ceil_grid(send + tx[:, 0], MII_CLOCK_NS, mii_phase)
    tx_end = tx_start + wire_ns
    xmit = _ceil_grid(tx_start - tx[:, 1], cpu, cpu_phase) if len(tx_stages) == 2 else None

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
    stimulus = _stimulus(ticks, channel, rising)

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


def _stimulus(ticks, channel, rising):
    """Merge sorted edges into a :class:`Stimulus` (levels from each distinct tick on)."""
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


# --- Engines: the instrument that sees the stimulus -----------------------------------------------

ENGINES = ("verilator", "amaranth", "model")

#: Parameters of the simulated instrument (the ECPIX-5 build's capture side, board name "sim").
CORE_PARAMS = dict(channels=8, counter_width=48, max_glitch=15, heartbeat_shift=20,
                   fifo_depth=1024)
#: Capture cycles the bench runs after each host command so that the gateware answers it.
COMMAND_CYCLES = 4096
#: Stimulus changes per chunk written to an engine (bounded memory, host commands interleave).
CHUNK_CHANGES = 1 << 15


class _HostCommands:
    """Splits the host's byte stream into COMMAND frames: ``feed(data)`` yields
    ``(seq, payload)`` for each complete frame with a good CRC, ``(None, None)`` for a bad one."""

    def __init__(self):
        import zlib

        from latscope.gateware import protocol
        self._crc = zlib.crc32
        self._sync = protocol.SYNC
        self._buffer = bytearray()

    def feed(self, data):
        buf = self._buffer
        buf += data
        while True:
            at = buf.find(self._sync)
            if at < 0:
                del buf[:max(0, len(buf) - 1)]
                return
            del buf[:at]
            if len(buf) < 6:
                return
            length = int.from_bytes(buf[4:6], "little")
            if length > 64:
                del buf[:2]
                yield None, None
                continue
            if len(buf) < 6 + length + 4:
                return
            body = bytes(buf[2:6 + length])
            crc = int.from_bytes(buf[6 + length:10 + length], "little")
            if self._crc(body) != crc or (buf[2] & 0x0F) != 4:
                del buf[:2]
                yield None, None
                continue
            del buf[:10 + length]
            yield body[1], body[4:]


def _chunks(stimulus, lanes, chunk=CHUNK_CHANGES):
    """Split a stimulus at cycle boundaries: yields ``(start_tick, ticks - start_tick, values,
    end_tick - start_tick, initial)``; consecutive chunks tile time exactly."""
    ticks, values = stimulus.ticks, stimulus.values
    n = len(ticks)
    start, initial, i = 0, 0, 0
    while i < n:
        j = min(n, i + chunk)
        if j < n:   # end the chunk at the start of the cycle holding change j
            end = int(ticks[j]) // lanes * lanes
            while j > i and int(ticks[j - 1]) >= end:
                j -= 1
            if j == i:       # a whole chunk inside one cycle cannot happen (lanes <= 4)
                j, end = i + 1, (int(ticks[i]) // lanes + 1) * lanes
        else:
            end = (int(ticks[-1]) // lanes + 2) * lanes
        yield (start, ticks[i:j] - start, values[i:j], end - start, initial)
        initial = int(values[j - 1])
        start, i = end, j


class _Engine:
    """Common state of an engine: the run it plays and whether it has started or finished."""
    name = "?"

    def __init__(self, run):
        self.run = run
        self.started = False          # the host armed the instrument; the stimulus is playing
        self.finished = False         # every byte the stimulus causes has been produced
        self.tick_offset = None       # instrument tick of stimulus tick 0, when the engine knows
        self.link_rate = None         # bytes/s of the instrument's link (None: as fast as possible)

    def metadata(self):
        return {"simulated": True, "engine": self.name}


class ModelEngine(_Engine):
    """The gateware's Python reference models: the capture front-end's
    (:func:`latscope.gateware.model_capture.capture_entries_fast`: entries from the stimulus, no
    overflow) and the link side's (:class:`latscope.gateware.model_stream.LinkModel`: entries to
    bytes; :class:`~latscope.gateware.model_stream.CommandModel`: replies). About 10 µs of Python
    per event; starts at once (nothing to compile)."""
    name = "model"

    def __init__(self, run):
        super().__init__(run)
        from latscope.gateware import model_stream as ms
        self._ms = ms
        timing = run.timing
        self.lanes, self.channels = timing.lanes, CORE_PARAMS["channels"]
        self.hb = CORE_PARAMS["heartbeat_shift"]
        identify = ms.identify_data(
            lanes=timing.lanes, capture_hz=int(timing.capture_hz), board="sim",
            channel_names=CHANNEL_ROLES, **CORE_PARAMS)
        self.link = ms.LinkModel(channels=self.channels, lanes=self.lanes,
                                 counter_width=CORE_PARAMS["counter_width"])
        self.commands = ms.CommandModel(channels=self.channels,
                                        max_glitch=CORE_PARAMS["max_glitch"], identify=identify,
                                        lanes=self.lanes)
        self.parser = _HostCommands()
        self.cycle = 0                  # capture cycles since the last timestamp reset
        self._out = bytearray()
        self._pending = None            # iterator over lists of entries of the stimulus
        self._last_wall = None

    def host_bytes(self, data):
        from latscope.gateware.protocol import Opcode, Status
        for seq, payload in self.parser.feed(data):
            if seq is None:
                self.link.reply(0, 0, Status.BAD_FRAME)
                continue
            status_data = b""
            if payload[:1] == bytes([Opcode.STATUS]):
                status_data = self._ms.to_bytes(self._ms.Heartbeat, self.link.heartbeat_fields(
                    status=self.commands.config["armed"]))
            opcode, status, reply = self.commands.handle(payload, status_data=status_data)
            self.link.reply(seq, opcode, status, reply)
            if status == Status.OK and opcode == Opcode.RESET_TIME:
                self.link.entry(self._ms.Entry(self._ms.ENTRY_RESET, 0))
                self.cycle = 0
            if status == Status.OK and opcode == Opcode.ARM and payload[1] == 1 \
                    and not self.started:
                self.started = True
                start = self.cycle + 16
                self.tick_offset = start * self.lanes
                self._pending = self._stimulus_entries(start)
        self._out += self.link.output
        self.link.output.clear()

    def _stimulus_entries(self, start_cycle, chunk=4096):
        """Lists of entries for the stimulus played from ``start_cycle`` on (ticks included)."""
        from latscope.gateware import model_capture as mc
        cfg = self.commands.config
        stim = self.run.stimulus
        shifted = mc.Stimulus(stim.ticks + start_cycle * self.lanes, stim.values)
        end = int(shifted.ticks[-1]) // self.lanes + 2 if len(stim.ticks) else start_cycle + 2
        latency = mc.pipeline(self.lanes, CORE_PARAMS["max_glitch"]).latency
        entries = mc.capture_entries_fast(
            shifted, mc.Config(armed=True, rise_en=cfg["rise_en"], fall_en=cfg["fall_en"],
                               glitch=tuple(cfg["glitch"])),
            channels=self.channels, lanes=self.lanes, counter_width=CORE_PARAMS["counter_width"],
            max_glitch=CORE_PARAMS["max_glitch"], heartbeat_shift=self.hb,
            n_cycles=end + latency + 1)
        # Ticks up to now were already sent while idle.
        entries = entries[(entries["kind"] != mc.TICK) | (entries["cycle"] > self.cycle)]
        Entry = self._ms.Entry
        for i in range(0, len(entries), chunk):
            part = entries[i:i + chunk]
            yield [Entry(int(k), int(c), int(e), int(v)) for k, c, e, v in
                   zip(part["kind"], part["cycle"], part["edges"], part["levels"],
                       strict=True)]
        self.cycle = max(self.cycle, end)

    def _ticks_until(self, cycle):
        """TICK entries for the multiples of 2**hb in (self.cycle, cycle]."""
        step = 1 << self.hb
        first = self.cycle // step + 1
        return [self._ms.Entry(1, k * step) for k in range(first, cycle // step + 1)]

    def _advance(self, cycle):
        for entry in self._ticks_until(cycle):
            self.link.entry(entry)
        self.cycle = max(self.cycle, cycle)

    def read(self, max_bytes, timeout=0.0):
        import time as _t
        if not self._out and self._pending is not None:
            entries = next(self._pending, None)
            if entries is None:
                self._pending = None
                # Run on past the next heartbeat so that the last EVENTS frame is sent.
                self._advance(((self.cycle >> self.hb) + 1) << self.hb)
                self.finished = True
            else:
                for entry in entries:
                    self.link.entry(entry)
                self.cycle = max(self.cycle, entries[-1].cycle)
            self._out += self.link.output
            self.link.output.clear()
        elif not self._out:
            now = _t.monotonic()
            if self._last_wall is not None:   # idle: time passes as on the bench
                self._advance(self.cycle + int((now - self._last_wall)
                                               * self.run.timing.capture_hz))
                self._out += self.link.output
                self.link.output.clear()
            self._last_wall = now
        data = bytes(self._out[:max_bytes])
        del self._out[:max_bytes]
        if not data and timeout:
            _t.sleep(min(timeout, 0.01))
        return data

    def close(self):
        pass


class VerilatorEngine(_Engine):
    """The real gateware (:class:`latscope.gateware.top.LatscopeCore`) compiled with Verilator
    (:mod:`latscope.gateware.verilator`); idle stretches are skipped by the core's fast-forward,
    including those with a partly filled EVENTS frame waiting for its next unit, so an echo
    packet (14 edges over ~8,000 capture cycles) costs ~460 evaluated cycles, ~0.4 ms.

    ``link="fast"`` takes a byte from the core every cycle (the simulated run then takes as long as
    the events need, not as long as a 12 Mbaud UART would); ``link="uart"`` accepts one byte per
    ``capture_hz / 1.2e6`` cycles, the FT2232H's 12 Mbaud 8N1 rate, so FIFO overflow behaves as on
    the board (slower to simulate). ``binary``: a simulator binary already built for this core
    (``VerilatorInstrument.build()``), so that runs started together use one build even if the
    gateware sources change meanwhile; default: build (or find in the cache) now."""
    name = "verilator"

    def __init__(self, run, *, link="fast", binary=None):
        super().__init__(run)
        import threading

        from latscope.gateware import verilator
        if link not in ("fast", "uart"):
            raise LatscopeError(f"link must be 'fast' or 'uart', not {link!r}")
        if binary is not None:
            from pathlib import Path
            binary = Path(binary)
            if not binary.is_file():
                raise LatscopeError(f"no simulator binary at {binary}")
        self._v = verilator
        timing = run.timing
        self.instrument = verilator.VerilatorInstrument(
            capture_hz=int(timing.capture_hz), lanes=timing.lanes, channel_names=CHANNEL_ROLES,
            **CORE_PARAMS)
        if binary is not None:
            self.instrument._binary = binary
        self.proc = self.instrument.open()
        _mark_used(self.instrument.component)
        self.link = link
        throttle = max(1, round(timing.capture_hz / 1.2e6)) if link == "uart" else 1
        self.proc.write(self._v.Commands().throttle(throttle))
        self.parser = _HostCommands()
        self._lock = threading.Lock()
        self._feeder = None
        self._fed = False
        self._quiet_since = None
        self._last_wall = None
        self._closing = False
        self.error = None

    def metadata(self):
        return {**super().metadata(), "link": self.link}

    def host_bytes(self, data):
        from latscope.gateware.protocol import Opcode
        arm = any(seq is not None and payload[:2] == bytes([Opcode.ARM, 1])
                  for seq, payload in self.parser.feed(data))
        with self._lock:
            if self.started and not self._fed:
                self.proc.write(self._v.Commands().rx(data))   # the stimulus keeps time running
            else:
                # STATS makes the harness flush its output now: the reply leaves at once.
                self.proc.write(self._v.Commands().rx(data).run(COMMAND_CYCLES).stats())
        if arm and not self.started:
            import threading
            self.started = True
            self._feeder = threading.Thread(target=self._feed, name="simbench-feed", daemon=True)
            self._feeder.start()

    def _feed(self):
        timing = self.run.timing
        try:
            # Small chunks: the harness flushes its output whenever it waits for input, so the
            # host sees events (and replies) about every chunk.
            for _, ticks, values, end, initial in _chunks(self.run.stimulus, timing.lanes,
                                                              chunk=2048):
                commands = self._v.stimulus_commands(ticks, values, lanes=timing.lanes,
                                                     channels=CORE_PARAMS["channels"],
                                                     end_tick=end, initial=initial)
                with self._lock:
                    self.proc.write(commands)
            with self._lock:   # past the next heartbeat, so the last EVENTS frame is sent
                self.proc.write(self._v.Commands().run(
                    (1 << CORE_PARAMS["heartbeat_shift"]) + COMMAND_CYCLES).stats())
        except LatscopeError as error:
            self.error = error
        except (ValueError, OSError):
            # the capture stopped (Ctrl-C, SIGTERM, a limit) and closed the harness's input
            # while this thread was still feeding it: nothing to report
            if not self._closing:
                raise
        self._fed = True

    def read(self, max_bytes, timeout=0.0):
        import time as _t
        data = self.proc.read_bytes(max_bytes, timeout=timeout)
        if self._fed:    # finished: the whole stimulus was sent and the output is quiet
            now = _t.monotonic()
            if data or self._quiet_since is None:
                self._quiet_since = now
            elif now - self._quiet_since > 0.5:
                self.finished = True
        if not data and (not self.started or self._fed):
            now = _t.monotonic()
            if self._last_wall is not None and now - self._last_wall > 0.05:
                # At most one heartbeat period per step, so a command that arrives next is
                # answered within milliseconds of wall time.
                cycles = min(int((now - self._last_wall) * self.run.timing.capture_hz),
                             1 << CORE_PARAMS["heartbeat_shift"])
                with self._lock:   # idle: time passes as on the bench (heartbeats keep coming)
                    self.proc.write(self._v.Commands().run(cycles))
                self._last_wall = now
            elif self._last_wall is None:
                self._last_wall = now
        return data

    def close(self):
        self._closing = True          # before the input closes: the feeder then stops quietly
        try:
            self.proc.close_input()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.__exit__(None, None, None)
        except Exception:   # noqa: BLE001 - shutting down
            pass


def _mark_used(component, depth=3):
    """The Verilator binary is cached, so the core object built to name it is (rightly) never
    elaborated; keep Amaranth from warning about it (and its parts) when it is collected."""
    if depth and hasattr(component, "_MustUse__used"):
        component._MustUse__used = True
        for value in vars(component).values():
            _mark_used(value, depth - 1)


def open_engine(run, engine="auto", *, link="fast", log=None, binary=None):
    """Start an engine that plays ``run`` (a :class:`SimRun`).

    Parameters
    ----------
    engine : {"auto", "verilator", "amaranth", "model"}
        ``auto`` takes Verilator when the gateware and a C++ compiler are present, else the
        reference models (and says so through ``log``).
    link : {"fast", "uart"}
        Verilator only: the link's byte rate in simulated time (see :class:`VerilatorEngine`).
    log : callable, optional
        Receives one-line messages for the user (which engine, why a fallback).
    binary : path, optional
        Verilator only: the simulator binary to run (see :class:`VerilatorEngine`).
    """
    if engine not in ("auto",) + ENGINES:
        raise LatscopeError(f"engine must be one of auto, {', '.join(ENGINES)}, not {engine!r}")
    log = log or (lambda message: None)
    if engine in ("auto", "verilator"):
        try:
            return VerilatorEngine(run, link=link, binary=binary)
        except (ImportError, LatscopeError) as error:
            if engine == "verilator":
                raise LatscopeError(f"the Verilator engine is not available: {error}") from None
            log(f"simulated bench: Verilator engine unavailable ({error}); "
                "using the gateware's reference models")
            return ModelEngine(run)
    if engine == "amaranth":
        return AmaranthEngine(run)
    return ModelEngine(run)


class AmaranthEngine(_Engine):
    """The real gateware (:class:`latscope.gateware.top.LatscopeCore`) in the Amaranth simulator.

    About 1.5·10^3 evaluated cycles/s here, so only for tiny runs (at most :attr:`MAX_EVENTS`
    events); the core is the one the other engines simulate (:data:`CORE_PARAMS`), and its
    fast-forward port skips the idle time between edges, as in Verilator.
    """
    name = "amaranth"
    MAX_EVENTS = 2000
    HEARTBEAT_SHIFT = CORE_PARAMS["heartbeat_shift"]

    def __init__(self, run):
        super().__init__(run)
        if run.n_events > self.MAX_EVENTS:
            raise LatscopeError(f"the Amaranth-simulator engine runs about 10^3 cycles/s: use it "
                                f"for at most {self.MAX_EVENTS} events (this run has "
                                f"{run.n_events}); use the verilator or model engine")
        import queue
        import threading

        from amaranth.hdl import DomainRenamer, Module
        from amaranth.sim import Simulator

        from latscope.gateware.top import LatscopeCore
        timing = run.timing
        params = dict(CORE_PARAMS, heartbeat_shift=self.HEARTBEAT_SHIFT)
        self.core = LatscopeCore(async_fifo=False, fast_forward=True, board="sim",
                                 capture_hz=int(timing.capture_hz), lanes=timing.lanes,
                                 channel_names=CHANNEL_ROLES, **params)
        m = Module()
        m.submodules.core = DomainRenamer({"capture": "sync"})(self.core)
        self._sim = Simulator(m)
        self._sim.add_clock(1 / timing.capture_hz, domain="sync")
        self._sim.add_testbench(self._bench)
        self._schedule = _cycle_words(run.stimulus, timing.lanes, CORE_PARAMS["channels"])
        self._host = queue.Queue()
        self._out = queue.Queue()
        self._queue_empty = queue.Empty
        self._pending = b""
        self._stop = threading.Event()
        self.error = None
        self._thread = threading.Thread(target=self._run, name="simbench-amaranth", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            self._sim.run()
        except BaseException as error:   # noqa: BLE001 - reported by read()
            self.error = error
        self._out.put(None)

    async def _bench(self, ctx):
        import collections
        import time as _t

        from latscope.gateware.protocol import Opcode
        core = self.core
        cycles, words = self._schedule
        parser = _HostCommands()
        rx = collections.deque()
        out = bytearray()
        start = None         # cycle at which the stimulus starts
        k = 0                # next entry of the schedule
        cycle = 0
        end = None           # cycle after which the run is flushed
        last_wall = last_flush = _t.monotonic()
        ctx.set(core.tx.ready, 1)
        while not self._stop.is_set():
            try:
                while True:
                    data = self._host.get_nowait()
                    rx.extend(data)
                    if start is None and any(seq is not None and p[:2] == bytes([Opcode.ARM, 1])
                                             for seq, p in parser.feed(data)):
                        start = cycle + COMMAND_CYCLES
                        self.started = True
            except self._queue_empty:
                pass
            while start is not None and k < len(cycles) and start + cycles[k] <= cycle:
                ctx.set(core.samples, int(words[k]))
                k += 1
            if start is not None and k == len(cycles) and end is None:
                end = cycle + (2 << self.HEARTBEAT_SHIFT)
            ctx.set(core.rx.valid, 1 if rx else 0)
            ctx.set(core.rx.payload, rx[0] if rx else 0)
            skip = 0
            if not rx and ctx.get(core.quiescent):
                limit = ctx.get(core.ff_limit)
                if start is not None and k < len(cycles):
                    limit = min(limit, start + int(cycles[k]) - cycle - 1)
                elif start is None or (end is not None and cycle >= end):
                    # Idle: wait for the host a little, then let time pass as on the bench.
                    if out:
                        self._out.put(bytes(out))
                        out.clear()
                    _t.sleep(0.01)
                    now = _t.monotonic()
                    limit = min(limit, int((now - last_wall) * self.run.timing.capture_hz))
                    last_wall = now
                skip = max(0, limit)
            ctx.set(core.ff_skip, skip)
            _, _, tx_valid, tx_data, rx_ready = await ctx.tick().sample(
                core.tx.valid, core.tx.payload, core.rx.ready)
            ctx.set(core.ff_skip, 0)
            if tx_valid:
                out.append(tx_data)
            if rx and rx_ready:
                rx.popleft()
            cycle += 1 + skip
            if len(out) >= 256 or (out and _t.monotonic() - last_flush > 0.05):
                # in chunks, but a reply (or a few events) waits at most ~50 ms of wall time
                self._out.put(bytes(out))
                out.clear()
                last_flush = _t.monotonic()
            if end is not None and cycle >= end and not self.finished:
                if out:
                    self._out.put(bytes(out))
                    out.clear()
                self.finished = True
        if out:
            self._out.put(bytes(out))

    def host_bytes(self, data):
        self._host.put(bytes(data))

    def read(self, max_bytes, timeout=0.0):
        if not self._pending:
            try:
                chunk = self._out.get(timeout=timeout) if timeout else self._out.get_nowait()
            except self._queue_empty:
                chunk = b""
            if chunk is None:
                self._out.put(None)
                if self.error is not None:
                    raise LatscopeError(f"the Amaranth simulation failed: {self.error!r}")
                chunk = b""
            self._pending = chunk
        data, self._pending = self._pending[:max_bytes], self._pending[max_bytes:]
        return data

    def metadata(self):
        return {**super().metadata(), "heartbeat_shift": self.HEARTBEAT_SHIFT}

    def close(self):
        self._stop.set()
        self._thread.join(30)


def _cycle_words(stimulus, lanes, channels):
    """The sample word (bit ``lane*channels + ch``) from each listed cycle (relative to the
    stimulus start) on: ``(cycles, words)``; a change cycle mixes lanes, the next one holds."""
    ticks = np.asarray(stimulus.ticks, np.int64)
    values = np.asarray(stimulus.values, np.int64)
    if not len(ticks):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    all_ticks = np.concatenate([[-1], ticks])
    all_values = np.concatenate([[0], values])
    change = np.unique(ticks // lanes)
    word = np.zeros(len(change), np.int64)
    for lane in range(lanes):
        idx = np.searchsorted(all_ticks, change * lanes + lane, side="right") - 1
        word |= all_values[idx] << (lane * channels)
    last = all_values[np.searchsorted(all_ticks, change * lanes + lanes - 1, side="right") - 1]
    steady = sum(last << (lane * channels) for lane in range(lanes))
    cycles = np.concatenate([change, change + 1])
    words = np.concatenate([word, steady])
    order = np.argsort(cycles, kind="stable")
    cycles, words = cycles[order], words[order]
    keep = np.ones(len(cycles), bool)    # a change at c+1 replaces the steady word of c
    keep[:-1] = cycles[1:] != cycles[:-1]
    return cycles[keep], words[keep]


# --- `latscope capture --sim` --------------------------------------------------------------------

#: Packets simulated by ``latscope capture --sim`` when ``--packets`` is not given.
DEFAULT_PACKETS = 1_000


def add_sim_arguments(parser):
    """Add the simulated-bench options to a ``latscope capture`` parser: ``--sim PROFILE``,
    ``--sim-engine``, ``--sim-seed``, ``--sim-rate``."""
    parser.add_argument(
        "--sim", metavar="PROFILE",
        help="capture from the simulated bench instead of a port: a DUT model with PROFILE's "
             f"latencies (one of {', '.join(list_profiles())}, or FILE.toml[:SIZE]) drives the "
             "real gateware in simulation, served on a pseudo-terminal; --packets N (default "
             f"{DEFAULT_PACKETS:,}) echoed packets are simulated and all their events captured; "
             "the ground truth is written beside the capture (FILE.truth.npz)")
    parser.add_argument("--sim-engine", choices=("auto",) + ENGINES, default="auto",
                        help="simulator for --sim (default auto: Verilator, else the reference "
                             "models)")
    parser.add_argument("--sim-seed", type=int, default=0,
                        help="random seed of the DUT model for --sim (default 0)")
    parser.add_argument("--sim-link", choices=("pty", "udp"), default="pty",
                        help="serve --sim on a pseudo-terminal (the UART path, default) or as "
                             "the ECPIX-5's UDP datagrams on 127.0.0.1 (the Ethernet path)")
    parser.add_argument("--sim-rate", type=float, default=None, metavar="BYTES_PER_S",
                        help="serve the simulated instrument's bytes at most this fast (default: "
                             "as fast as the capture reads; 1.2e6 is the boards' 12 Mbaud link)")


class SimulatedPort:
    """Handle returned by :func:`open_simulated_port`: the pty server, the run and its engine.

    ``metadata`` is for the capture's metadata (``instrument.simulated`` and the engine),
    ``markers`` the profile's marker meanings, ``label``/``dut``/``scenario`` describe the run;
    ``expected_events`` is the number of events the instrument must report."""

    def __init__(self, run, engine, server, output=None):
        self.run, self.engine, self.server, self.output = run, engine, server, output
        self.path = server.path
        self.markers = dict(run.profile.markers)
        self.label = run.profile.name
        self.dut = f"simulated: {run.profile.title}"
        self.scenario = (f"{run.traffic.mode}, {run.n_packets} x {run.profile.size} B UDP "
                         f"frames (simulated)")
        self.expected_events = run.n_events
        self.metadata = {"instrument": {"simulated": True, "engine": engine.name},
                         "simbench": {**run.meta, "engine": engine.metadata()}}

    def close(self):
        """Stop the simulation and update the ground truth's metadata (engine, tick offset)."""
        try:
            self.server.close()
        finally:
            if self.output:
                self.run.save_truth(self.output, engine=self.engine.name,
                                    tick_offset=self.engine.tick_offset)


def open_simulated_port(args):
    """Start the simulated bench for ``latscope capture --sim PROFILE``.

    Reads ``args.sim`` (profile), ``args.packets`` (default :data:`DEFAULT_PACKETS`),
    ``args.output`` (the capture file: the ground truth goes to ``capfile.truth_path`` beside it)
    and the options of :func:`add_sim_arguments`. So that the capture holds every event of the
    simulated packets, it sets ``args.events`` to the expected event count and ``args.packets``
    to ``None`` (a packet limit would stop at the last ``RX_DV`` fall, before that packet's
    markers and echo).

    Returns
    -------
    (str, SimulatedPort)
        The pty path to open as a serial port (``udp://127.0.0.1:PORT`` with ``--sim-link udp``),
        and the handle (``close()`` it after the capture).
    """
    import sys

    from latscope.capture.ptyserve import PtyServer
    packets = getattr(args, "packets", None) or DEFAULT_PACKETS
    run = simulate(args.sim, int(packets), seed=getattr(args, "sim_seed", 0) or 0)
    output = getattr(args, "output", None) or getattr(args, "out", None)
    if output:
        run.save_truth(output)

    def log(message):
        print(message, file=sys.stderr, flush=True)
    engine = open_engine(run, getattr(args, "sim_engine", "auto") or "auto", log=log)
    if getattr(args, "sim_link", "pty") == "udp":
        from latscope.capture.udp import UdpServer
        server = UdpServer(engine, rate=getattr(args, "sim_rate", None))
        server.path = server.url
    else:
        server = PtyServer(engine, rate=getattr(args, "sim_rate", None))
    if getattr(args, "events", None) is None:
        args.events = run.n_events
        args.packets = None
    return server.path, SimulatedPort(run, engine, server, output)
