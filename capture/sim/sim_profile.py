"""Profiles of the simulated bench: one DUT configuration's stage latencies (``profiles/*.toml``).

Part of :mod:`latscope.capture.sim.simbench` (import from there); model choices and where every
number comes from are in ``docs/simulated-bench.md``.
"""

import dataclasses
import importlib.resources
import math
import os
import tomllib

from latscope import LatscopeError

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



# --- Profiles -------------------------------------------------------------------------------------

def profile_files():
    root = importlib.resources.files("latscope.capture.sim") / PROFILE_DIR
    # under-load.toml holds load scenarios (capture/sim/sim_load.py), not a DUT profile
    return {p.name[:-5]: p for p in root.iterdir()
            if p.name.endswith(".toml") and p.name != "under-load.toml"}


def list_profiles():
    """Names of the shipped profiles (``family-size``), in a stable order: the paper's MAC columns
    (GEM, EL DM, EL SO), then the fast track; sizes ascending."""
    order = {"gem": 0, "el-dm": 1, "el-so": 2, "fast-track": 3}
    names = []
    for family, path in sorted(profile_files().items(), key=lambda kv: (order.get(kv[0], 9),
                                                                          kv[0])):
        data = read_toml(path, family)
        sizes = sorted(int(s) for s in data.get("size", {}))
        names += [f"{family}-{s}" for s in sizes]
    return names


def read_toml(path, label):
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
        files = profile_files()
        family, _, size = spec.rpartition("-")
        if family not in files or not size:
            raise ProfileError(f"unknown profile {spec!r}; shipped profiles: "
                               f"{', '.join(list_profiles())} (or give a FILE.toml[:SIZE])")
        path = files[family]
    data = read_toml(path, spec)
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
    # The bodies are drawn with the clock-grid quantisation subtracted (see body_params): the
    # target 3σ must exceed what the grid alone adds.
    for stage in stages:
        body_params(profile, stage)
    return profile


# --- Stage bodies (the profile check needs them) ----------------------------------------------

def _grid_ns(profile, stage):
    """Clock grid on which the stage's end is re-timed: tx.wire ends on TX_CLK (40 ns), the others
    on the CPU clock. Re-timing adds a Uniform(0, grid) delay, which the body compensates."""
    return MII_CLOCK_NS if stage == "tx.wire" else profile.cpu_ns


def body_params(profile, stage):
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


