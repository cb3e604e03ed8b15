"""What ``latscope info`` shows about a capture file, as a dict."""

import numpy as np

from latscope.capture.files import capfile
from latscope.capture.files.provenance import provenance
from latscope.capture.link.rules import class_names

__all__ = ["info_dict", "frame_summary"]


def frame_summary(cap):
    """Frame-aware capture in a capture: records per direction and class, and the last
    COUNTERS totals per direction and class (``None`` when the capture has neither)."""
    records, _ = cap.frames()
    counters = cap.frame_counters()
    if not len(records) and not len(counters):
        return None
    names = class_names(cap.metadata)       # the config's [frames] class names, if any
    # keys "rx.<name or number>"; labels say which class numbers the config left unnamed
    out = {"records": int(len(records)), "by_class": {}, "counted": {}, "labels": {}}

    def key_of(direction, cls):
        key = f"{direction}.{names.get(cls, cls)}"
        out["labels"][key] = (f"{direction} {names[cls]}" if cls in names
                              else f"{direction} class {cls} (unnamed)")
        return key

    for d, name in ((0, "rx"), (1, "tx")):
        mine = records[records["direction"] == d]
        for c in np.unique(mine["cls"]).tolist():
            out["by_class"][key_of(name, c)] = int(np.count_nonzero(mine["cls"] == c))
        mine = counters[counters["direction"] == d]
        for c in mine[np.lexsort((-np.arange(len(mine)), mine["cls"]))]:  # by class, last first
            key = key_of(name, int(c["cls"]))
            if key not in out["counted"]:
                out["counted"][key] = {k: int(c[k]) for k in ("frames", "fcs_errors", "dropped",
                                                              "octets")}
    return out


def info_dict(path):
    """What ``latscope info`` shows, as a dict; ``provenance`` says what the events are
    (measured, simulated, emulated) and where they came from
    (:func:`latscope.capture.files.provenance.provenance`), ``metadata_from`` which copy of the
    metadata was read."""
    with capfile.open_capture(path) as cap:
        return {
            "path": cap.path,
            "format": f"{cap.version[0]}.{cap.version[1]}",
            "events": cap.n_events,
            "duration_s": cap.duration,
            "first_time": cap.first_time,
            "last_time": cap.last_time,
            "tick_hz": cap.tick_hz,
            "channels": {str(k): v for k, v in cap.channel_names.items()},
            "markers": cap.markers,
            "lost": cap.lost,
            "losses": len(cap.losses),
            "heartbeats": int(len(cap.heartbeats)),
            "frames": frame_summary(cap),
            "finalised": cap.note is not None,
            "stop_reason": (cap.note or {}).get("reason"),
            "problems": cap.problems,
            "metadata": cap.metadata,
            "metadata_from": cap.metadata_from,
            "provenance": provenance(cap.metadata),
        }
