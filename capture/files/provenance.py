"""Provenance: what a capture's events are and where they came from, carried through every
export and import.

A capture's metadata says it in many places (``instrument.simulated``, ``simbench``,
``replay``, ``time_base``, ``source``). :func:`provenance` reads them into one small JSON
object, which every export writes beside the data (the ``.sr`` ``[latscope]`` group, the VCD
``$comment``, the CSV's first line, the pcapng section header's comment) and every import puts
back into the new capture's metadata (:func:`imported_metadata`), with one more step in its
``history``. So a simulated capture exported and imported back is still simulated, and says
from which profile, seed and file.

Keys of the object (all present; ``None`` when unknown):

``data``
    What the events are: ``"measured"`` (an instrument on real pins), ``"simulated"`` (the
    simulated bench, or recorded pins replayed through the gateware in simulation) or
    ``"emulated"`` (an emulator's timeline).
``simulated``
    ``data != "measured"``: no figure of this capture is a measurement of hardware.
``tool``
    The software that recorded the events first (``"latscope 0.1.0"``).
``command``
    The latscope command that recorded them first (``"capture"``, ``"capture --sim"``,
    ``"replay-pins"``, ``"import"``).
``profile``, ``seed``, ``engine``
    The simulated bench's profile, random seed and engine.
``label``, ``dut``, ``scenario``, ``start_time``
    The capture's description.
``source_file``
    The file the events were first recorded to or imported from (base name).
``history``
    Every step since, oldest first, each with the file it read (base name):
    ``{"step": "export sr", "from": "gem-64.lsc", "tool": "latscope 0.1.0"}``.

>>> p = provenance({"tick_hz": 1e9, "simbench": {"profile": "gem-64", "seed": 3},
...                 "instrument": {"simulated": True, "engine": "model"}, "label": "gem-64"})
>>> p["data"], p["simulated"], p["profile"], p["seed"], p["command"]
('simulated', True, 'gem-64', 3, 'capture --sim')
>>> back = imported_metadata({"tick_hz": 1e9}, with_step(p, "export csv", "gem-64.lsc"),
...                          "import", "w.csv")
>>> back["simulated"], back["label"], [s["step"] for s in back["provenance"]["history"]]
(True, 'gem-64', ['export csv', 'import'])
"""

import copy
import os

from latscope import __version__

__all__ = ["KINDS", "KEYS", "provenance", "with_step", "imported_metadata", "parse",
           "describe"]

#: Values of ``data``.
KINDS = ("measured", "simulated", "emulated")
#: The keys of a provenance object.
KEYS = ("data", "simulated", "tool", "command", "profile", "seed", "engine", "label", "dut",
        "scenario", "start_time", "source_file", "history")
_TOOL = f"latscope {__version__}"


def _kind(metadata):
    instrument = metadata.get("instrument")
    if metadata.get("time_base") == "emulated":
        return "emulated"
    if (isinstance(instrument, dict) and instrument.get("simulated")) or \
            metadata.get("simbench") or metadata.get("simulated") or metadata.get("replay"):
        return "simulated"
    return "measured"


def _command(metadata):
    if isinstance(metadata.get("replay"), dict):
        return "replay-pins"
    if metadata.get("simbench"):
        return "capture --sim"
    if metadata.get("source") in ("sigrok", "vcd", "csv"):
        return "import"
    if metadata.get("time_base") == "emulated":
        return "qemu_trace"
    return "capture"


def parse(value):
    """A provenance object read back from a file, or ``None`` when ``value`` is not one (every
    key is checked, so a foreign or damaged object is not trusted)."""
    if not isinstance(value, dict) or value.get("data") not in KINDS or \
            not isinstance(value.get("simulated"), bool) or \
            not isinstance(value.get("history", []), list):
        return None
    out = {key: value.get(key) for key in KEYS}
    out["history"] = [dict(step) for step in value.get("history") or [] if isinstance(step, dict)]
    out["simulated"] = out["data"] != "measured" or out["simulated"]
    return out


def provenance(metadata):
    """The provenance object of a capture's metadata (see the module's text): the stored one
    when the capture was imported, else read from the capture's own keys."""
    metadata = metadata or {}
    stored = parse(metadata.get("provenance"))
    if stored is not None:
        return stored
    sim = metadata.get("simbench") if isinstance(metadata.get("simbench"), dict) else {}
    instrument = metadata.get("instrument") if isinstance(metadata.get("instrument"), dict) \
        else {}
    software = metadata.get("software") if isinstance(metadata.get("software"), dict) else {}
    engine = sim.get("engine")
    kind = _kind(metadata)
    return {
        "data": kind,
        "simulated": kind != "measured",
        "tool": f"latscope {software['latscope']}" if software.get("latscope") else None,
        "command": _command(metadata),
        "profile": sim.get("profile"),
        "seed": sim.get("seed"),
        "engine": (engine.get("engine") if isinstance(engine, dict) else engine)
        or instrument.get("engine"),
        "label": metadata.get("label") or metadata.get("config"),
        "dut": metadata.get("dut"),
        "scenario": metadata.get("scenario"),
        "start_time": metadata.get("start_time"),
        "source_file": metadata.get("source_file"),
        "history": [],
    }


def with_step(prov, step, source):
    """A copy of ``prov`` with one more step in its history (``step`` in words, e.g. ``"export
    vcd"``; ``source`` the file that step read). The file a step writes is not named: the same
    data written under two names is the same bytes."""
    out = copy.deepcopy(prov)
    out["history"] = list(out.get("history") or []) + [
        {"step": step, "from": os.path.basename(os.fspath(source)), "tool": _TOOL}]
    return out


def imported_metadata(metadata, prov, step=None, source=None):
    """``metadata`` of an imported capture with ``prov`` (read from the file imported, or
    ``None``) put back: ``provenance`` (with ``step``, when given, as its last step: the
    import that read ``source``), and the description
    keys the capture had (``label``, ``dut``, ``scenario``, ``start_time``) and ``simulated``
    when it was not measured, so every reader of the metadata sees what the original showed."""
    out = dict(metadata)
    prov = parse(prov) or provenance(out)
    out["provenance"] = with_step(prov, step, source) if step else prov
    for key in ("label", "dut", "scenario", "start_time"):
        if prov.get(key) and not out.get(key):
            out[key] = prov[key]
    if prov["simulated"]:
        out["simulated"] = True
    return out


def describe(prov):
    """One line for people: what the data is (upper case when it is not measured, as the
    report's banner), how it was recorded and every step since.

    >>> print(describe(with_step({"data": "simulated", "simulated": True, "seed": 3,
    ...                           "command": "capture --sim", "profile": "gem-64",
    ...                           "tool": "latscope 0.1.0"}, "export csv", "gem-64.lsc")))
    SIMULATED: capture --sim, profile gem-64, seed 3 (latscope 0.1.0); then export csv of gem-64.lsc
    >>> describe(provenance({"tick_hz": 1e9}))
    'measured: capture'
    """
    prov = prov or {}
    kind = prov.get("data") or "measured"
    first = [prov.get("command") or "?"]
    first += [f"{key} {prov[key]}" for key in ("profile", "seed", "engine")
              if prov.get(key) is not None]
    if prov.get("source_file"):
        first.append(str(prov["source_file"]))
    text = (kind.upper() if kind != "measured" else kind) + ": " + ", ".join(first)
    if prov.get("tool"):
        text += f" ({prov['tool']})"
    steps = [f"{step.get('step', '?')} of {step.get('from', '?')}"
             for step in prov.get("history") or []]
    if steps:
        text += "; then " + ", ".join(steps)
    return text
