"""Measurement definitions: what a latency is, declared as data.

A measurement is a start edge and a stop edge (each a channel and ``rising`` or ``falling``), a
direction, an association rule and a window. Definitions are written in TOML (the package's
``defaults.toml`` holds the standard ones), can be stored in a capture's metadata under
``"definitions"`` (the same tables as a dict), and resolve against a capture's channel names and
marker table, so a capture imported from sigrok with ``--map`` is analysed with the same text.

>>> d = parse_definitions({"measurement": {"rx.isr": {"span": "rx_dv falling -> m_isr rising"}}})
>>> m = d.measurements[0]
>>> (m.name, m.start.channel, m.start.rising, m.stop.channel, m.stop.rising, m.direction)
('rx.isr', 'rx_dv', False, 'm_isr', True, 'rx')
"""

import dataclasses
import os
import re
import tomllib

from latscope import LatscopeError
from latscope.userio import read_toml

__all__ = [
    "CHANNEL_ROLES", "DEFAULT_MARKERS", "MARKER_ALIASES", "Endpoint", "Measurement", "Stage",
    "Definitions", "parse_endpoint", "parse_definitions", "load_definitions", "default_definitions",
    "resolve_channel", "MarkerMap", "parse_markers", "resolve_markers", "MAX_WINDOW_NS",
]

#: Instrument channel index -> role (project-wide convention).
CHANNEL_ROLES = {0: "rx_dv", 1: "tx_en", 2: "crs_dv", 3: "m0", 4: "m1", 5: "m2", 6: "m3", 7: "m4"}

#: Marker channel -> meaning, when a capture does not say otherwise (the Zephyr app's default).
DEFAULT_MARKERS = {"m0": "rx.isr", "m1": "rx.copy", "m2": "rx.udp", "m3": "rx.fast",
                   "m4": "tx.send"}

#: Short aliases of marker meanings, usable in definitions. The meanings and aliases are the DUT
#: firmware's point table (zephyr-app/lib/latscope_core/src/markers.c), tied to it by
#: capture/tests/test_marker_points.py.
MARKER_ALIASES = {"m_isr": "rx.isr", "m_copy": "rx.copy", "m_udp": "rx.udp", "m_fast": "rx.fast",
                  "m_send": "tx.send", "m_xmit": "tx.xmit", "m_handoff": "rx.handoff",
                  "m_queue": "tx.queue", "m_driver": "tx.handoff"}

_EDGES = {"rising": True, "rise": True, "falling": False, "fall": False}
_DIRECTIONS = ("rx", "tx")
#: The longest pairing window a definition may ask for, ns (one hour): longer ones overflow the
#: tick arithmetic at fine ticks and pair a start with a stop of another packet anyway.
MAX_WINDOW_NS = 3.6e12
_ASSOCIATIONS = ("next", "sequence")
_ARROW = re.compile(r"\s*(?:->|→)\s*")


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One edge of one channel: ``channel`` as written (role, meaning or alias), ``rising``."""
    channel: str
    rising: bool

    def __str__(self):
        return f"{self.channel} {'rising' if self.rising else 'falling'}"


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A latency from ``start`` to ``stop``.

    Attributes
    ----------
    name : str
        e.g. ``"rx.isr"``.
    start, stop : Endpoint
        The edges that start and stop the latency.
    direction : {"rx", "tx"}
        Which way the packet travels.
    window_ns : float
        Largest accepted latency; the stop must also come before the next start.
    after : str or None
        Name of an earlier stage with the same start: the stop is searched from that stage's stop.
    association : {"next", "sequence"}
        ``"next"``: the first stop edge after the start. ``"sequence"``: stop and start carry the
        same sequence number (captures that record them).
    """
    name: str
    start: Endpoint
    stop: Endpoint
    direction: str = "rx"
    window_ns: float = 1e6
    after: str | None = None
    association: str = "next"

    def __str__(self):
        return f"{self.name} = {self.start} -> {self.stop}"


@dataclasses.dataclass(frozen=True)
class Stage:
    """A per-packet difference between two measurements with the same start: ``stop - start``."""
    name: str
    start: str
    stop: str


@dataclasses.dataclass(frozen=True)
class Definitions:
    """A set of measurements and stage differences."""
    measurements: tuple
    stages: tuple = ()

    def names(self):
        return [m.name for m in self.measurements]

    def select(self, names):
        """Keep only the named measurements (and the stages between kept ones)."""
        known = {m.name: m for m in self.measurements}
        missing = [n for n in names if n not in known]
        if missing:
            raise LatscopeError(f"unknown measurement(s) {', '.join(missing)}; defined: "
                                f"{', '.join(known)}")
        kept = tuple(known[n] for n in names)
        keep = set(names)
        return Definitions(kept, tuple(s for s in self.stages if {s.start, s.stop} <= keep))

    def to_dict(self):
        """The TOML-shaped dict form (as stored in capture metadata)."""
        out = {"measurement": {}, "stage": {}}
        for m in self.measurements:
            entry = {"span": f"{m.start} -> {m.stop}", "direction": m.direction,
                     "window_ns": m.window_ns, "association": m.association}
            if m.after:
                entry["after"] = m.after
            out["measurement"][m.name] = entry
        for s in self.stages:
            out["stage"][s.name] = {"span": f"{s.start} -> {s.stop}"}
        return out


def parse_endpoint(text):
    """Parse ``"<channel> <edge>"``, e.g. ``"rx_dv falling"``.

    >>> parse_endpoint("m_send rising")
    Endpoint(channel='m_send', rising=True)
    """
    parts = str(text).split()
    if len(parts) != 2 or parts[1].lower() not in _EDGES:
        raise LatscopeError(f"an edge is '<channel> rising|falling', not {text!r}")
    return Endpoint(parts[0], _EDGES[parts[1].lower()])


def _span(name, entry, table):
    if "span" in entry:
        parts = _ARROW.split(str(entry["span"]).strip())
        if len(parts) != 2:
            raise LatscopeError(f"{table} {name!r}: span must be 'START -> STOP', "
                                f"not {entry['span']!r}")
        return parts
    if "start" in entry and "stop" in entry:
        return entry["start"], entry["stop"]
    raise LatscopeError(f"{table} {name!r} needs 'span' or both 'start' and 'stop'")


def parse_definitions(tables):
    """Build :class:`Definitions` from a TOML-shaped dict (``measurement`` and ``stage`` tables).

    Raises
    ------
    LatscopeError
        On an unknown key, edge, direction or association, a non-positive window, or an ``after``
        or stage naming an unknown measurement.
    """
    if not isinstance(tables, dict) or not isinstance(tables.get("measurement", {}), dict):
        raise LatscopeError("definitions must be a table with a [measurement.NAME] table per "
                            "measurement")
    unknown = set(tables) - {"measurement", "stage"}
    if unknown:
        raise LatscopeError(f"unknown definitions table(s): {', '.join(sorted(unknown))}")
    allowed = {"span", "start", "stop", "direction", "window_ns", "after", "association"}
    measurements = []
    for name, entry in tables.get("measurement", {}).items():
        if not isinstance(entry, dict):
            raise LatscopeError(f"measurement {name!r} must be a table")
        extra = set(entry) - allowed
        if extra:
            raise LatscopeError(f"measurement {name!r}: unknown key(s) {', '.join(sorted(extra))}")
        start, stop = _span(name, entry, "measurement")
        direction = str(entry.get("direction", "tx" if name.startswith("tx") else "rx"))
        if direction not in _DIRECTIONS:
            raise LatscopeError(f"measurement {name!r}: direction must be 'rx' or 'tx', "
                                f"not {direction!r}")
        window = entry.get("window_ns", 1e6)
        if isinstance(window, bool) or not isinstance(window, (int, float)) or \
                not 0 < window <= MAX_WINDOW_NS:
            raise LatscopeError(f"measurement {name!r}: window_ns must be a positive number of "
                                f"ns up to {MAX_WINDOW_NS:g} (one hour), not {window!r}")
        association = str(entry.get("association", "next"))
        if association not in _ASSOCIATIONS:
            raise LatscopeError(f"measurement {name!r}: association must be one of "
                                f"{', '.join(_ASSOCIATIONS)}, not {association!r}")
        measurements.append(Measurement(name, parse_endpoint(start), parse_endpoint(stop),
                                        direction, float(window), entry.get("after"), association))
    if not measurements:
        raise LatscopeError("definitions hold no measurement")
    by_name = {m.name: m for m in measurements}
    for m in measurements:
        if m.after is not None:
            if m.after not in by_name or m.after == m.name:
                raise LatscopeError(f"measurement {m.name!r}: after={m.after!r} is not another "
                                    f"defined measurement")
            if by_name[m.after].start != m.start:
                raise LatscopeError(f"measurement {m.name!r}: after={m.after!r} needs the same "
                                    f"start edge as {m.after!r} ({by_name[m.after].start}), "
                                    f"not {m.start}")
    stages = []
    for name, entry in tables.get("stage", {}).items():
        if not isinstance(entry, dict):
            raise LatscopeError(f"stage {name!r} must be a table")
        a, b = _span(name, entry, "stage")
        stages.append(Stage(name, a.strip(), b.strip()))
    return Definitions(tuple(measurements), tuple(stages))


def load_definitions(path):
    """Read definitions from a TOML file."""
    return parse_definitions(read_toml(path, "definitions"))


def default_definitions():
    """The standard measurements (``defaults.toml`` in this package)."""
    # Read beside this module, as an installed package is a folder; importlib.resources (which
    # also reads zipped packages) would import zipfile, tempfile and more: ~10 ms per command.
    try:
        with open(os.path.join(os.path.dirname(__file__), "defaults.toml"),
                  encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        import importlib.resources
        text = importlib.resources.files("latscope.analysis").joinpath("defaults.toml") \
            .read_text(encoding="utf-8")
    return parse_definitions(tomllib.loads(text))


def resolve_channel(name, channel_names=None, markers=None):
    """Channel index for a role, marker meaning or alias, or None when the capture lacks it.

    Parameters
    ----------
    name : str
        ``"rx_dv"``, ``"m0"``, ``"rx.isr"``, ``"m_isr"`` ...
    channel_names : dict, optional
        index -> role of the capture (default :data:`CHANNEL_ROLES`).
    markers : dict, optional
        marker role -> meaning (default :data:`DEFAULT_MARKERS`).

    >>> resolve_channel("m_udp"), resolve_channel("tx_en"), resolve_channel("m_xmit")
    (5, 1, None)
    >>> resolve_channel("m_xmit", markers={"m4": "tx.xmit"})
    7
    """
    channel_names = CHANNEL_ROLES if channel_names is None else channel_names
    markers = DEFAULT_MARKERS if markers is None else markers
    by_role = {str(role): int(index) for index, role in channel_names.items()}
    if name in by_role:
        return by_role[name]
    meaning = MARKER_ALIASES.get(name, name)
    for role, what in markers.items():
        if what == meaning and role in by_role:
            return by_role[role]
    return None


@dataclasses.dataclass(frozen=True)
class MarkerMap:
    """Marker meanings an analysis uses, and where they came from.

    Attributes
    ----------
    markers : dict of str to str
        Marker channel role -> meaning (``{"m3": "tx.xmit"}``).
    source : str
        ``"--markers"``, ``"the capture"`` (its metadata, or an export's descriptor),
        ``"not needed"`` (no measurement names a meaning, or no marker channel exists).
    """
    markers: dict
    source: str

    def describe(self):
        """One line for a user: the map and why it was used."""
        table = ", ".join(f"{k}={v}" for k, v in sorted(self.markers.items())) or "none"
        return f"markers: {table} (from {self.source})"


_GENERIC_MARKER = re.compile(r"m[0-9]+")


def parse_markers(text):
    """Parse ``--markers`` text: ``"m0=rx.isr,m3=tx.xmit"``, or ``"default"`` for the Zephyr
    app's default table (:data:`DEFAULT_MARKERS`).

    >>> parse_markers("m0=rx.isr, m3=tx.xmit")
    {'m0': 'rx.isr', 'm3': 'tx.xmit'}
    """
    if str(text).strip() == "default":
        return dict(DEFAULT_MARKERS)
    out = {}
    for item in str(text).split(","):
        if not item.strip():
            continue
        role, sep, meaning = (part.strip() for part in item.partition("="))
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", role) or \
                not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", meaning):
            raise LatscopeError(f"--markers entry {item.strip()!r} is not CHANNEL=MEANING "
                                f"(e.g. m3=tx.xmit)")
        if role in out:
            raise LatscopeError(f"--markers names {role} twice")
        other = next((r for r, m in out.items() if m == meaning), None)
        if other is not None:       # which channel's edges would be the point is undecidable
            raise LatscopeError(f"--markers gives {meaning} to two channels, {other} and {role}; "
                                f"give each meaning one channel")
        out[role] = meaning
    if not out:
        raise LatscopeError("--markers is empty")
    return out


def resolve_markers(definitions, channel_names, stored=None, override=None):
    """The one marker-map resolver: which marker meanings an analysis of a file uses, and why.

    Parameters
    ----------
    definitions : Definitions or None
        The measurements (default: the standard ones).
    channel_names : dict of int to str
        The capture's channel roles.
    stored : dict or None
        Marker meanings the capture (or export) carries; ``None`` or empty: it says nothing.
    override : dict or str, optional
        ``--markers`` (a dict or its text); it wins over ``stored``.

    Returns
    -------
    MarkerMap

    Raises
    ------
    LatscopeError
        ``--markers`` names a channel the capture lacks; or the capture has generic marker
        channels (``m0``, ``m1``, ...) without meanings while a measurement names a meaning:
        guessing (the old silent default) would measure the wrong thing, so the user must say.

    Examples
    --------
    >>> names = {0: "rx_dv", 1: "tx_en", 6: "m3"}
    >>> resolve_markers(None, names, {"m3": "tx.xmit"}).describe()
    'markers: m3=tx.xmit (from the capture)'
    >>> resolve_markers(None, names, None, "m3=rx.fast").describe()
    'markers: m3=rx.fast (from --markers)'
    >>> resolve_markers(None, {0: "rx_dv", 1: "m_isr"}).source
    'not needed'
    >>> resolve_markers(None, names)         # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latscope.LatscopeError: the capture does not say what its marker channel(s) m3 mean...
    """
    roles = {str(role) for role in channel_names.values()}
    if override is not None:
        markers = parse_markers(override) if isinstance(override, str) else dict(override)
        unknown = sorted(set(markers) - roles)
        if unknown and override != "default":
            raise LatscopeError(f"--markers names {', '.join(unknown)}, which the capture does "
                                f"not have (its channels: {', '.join(sorted(roles))})")
        return MarkerMap({k: v for k, v in markers.items() if k in roles}, "--markers")
    if stored:
        return MarkerMap(dict(stored), "the capture")
    generic = sorted(r for r in roles if _GENERIC_MARKER.fullmatch(r))
    definitions = definitions if definitions is not None else default_definitions()
    needing = sorted({m.name for m in definitions.measurements
                      for end in (m.start, m.stop) if end.channel not in roles})
    if generic and needing:
        raise LatscopeError(
            f"the capture does not say what its marker channel(s) {', '.join(generic)} mean, "
            f"and {', '.join(needing)} need marker meanings: give them with --markers, e.g. "
            f"--markers {','.join(f'{k}={v}' for k, v in DEFAULT_MARKERS.items() if k in generic)}"
            f" (or --markers default for the Zephyr app's default table); latscope does not "
            f"guess")
    return MarkerMap({}, "not needed")
