"""The facts the analysis reads from a capture's metadata, parsed: per-channel timing offsets, the
frame classes' names, and where the events came from.

The capture side writes these keys (``docs/capture-format.md`` lists them): ``latscope capture
--calibration`` the offsets (``capture/link/calibration.py`` measures them), the capture config's
``[frames]`` table the class names, the simulated bench, ``latscope import`` and ``latscope
replay-pins`` their own sections. Every reader of capture files hands them on through
:func:`latscope.capture.files.open.open_events`; this module is what both sides agree on.

>>> channel_offsets({"channel_offsets_ticks": [0, 4, -1]}, 4).tolist()
[0, 4, -1, 0]
>>> class_names({"frames": {"classes": {"0": "other", "1": "hp"}}})
{0: 'other', 1: 'hp'}
>>> origin({"simbench": {"profile": "gem-64"}}), origin({"source": "sigrok"}), origin({})
('simulated', 'imported', 'measured')
"""

import numpy as np

from latscope import LatscopeError

__all__ = ["CHANNEL_OFFSETS_KEY", "ORIGINS", "channel_offsets", "class_names", "origin"]

#: Metadata key: a list, per channel index, of ticks to subtract from that channel's edge times.
CHANNEL_OFFSETS_KEY = "channel_offsets_ticks"

#: Where a capture's events came from (:func:`origin`).
ORIGINS = ("measured", "simulated", "imported", "replayed")


def channel_offsets(metadata, n_channels=None):
    """The per-channel offsets stored in capture ``metadata`` as an int64 array (padded with 0 to
    ``n_channels``), or ``None`` when the capture carries none."""
    value = (metadata or {}).get(CHANNEL_OFFSETS_KEY)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise LatscopeError(f"capture metadata {CHANNEL_OFFSETS_KEY!r} must be a list of whole "
                            f"ticks per channel, not {value!r}")
    if n_channels is not None and len(value) < n_channels:
        value = value + [0] * (n_channels - len(value))
    return np.asarray(value, dtype=np.int64)


def class_names(metadata):
    """Class number -> name from a capture's metadata (``frames.classes``); empty if none."""
    frames = (metadata or {}).get("frames")
    classes = frames.get("classes") if isinstance(frames, dict) else None
    if not isinstance(classes, dict):
        return {}
    return {int(k): str(v) for k, v in classes.items() if str(k).isdigit()}


def origin(metadata):
    """One of :data:`ORIGINS`: ``"replayed"`` (a recording's pins through the gateware,
    ``replay``), ``"simulated"`` (the simulated bench: ``simbench``, ``simulated`` or a simulated
    instrument), ``"imported"`` (converted from another tool's file: ``source``), else
    ``"measured"``."""
    metadata = metadata or {}
    if metadata.get("replay"):
        return "replayed"
    instrument = metadata.get("instrument")
    if ((isinstance(instrument, dict) and instrument.get("simulated"))
            or metadata.get("simbench") or metadata.get("simulated")):
        return "simulated"
    if metadata.get("source"):
        return "imported"
    return "measured"
