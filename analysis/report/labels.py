"""Names and sentences the tables, the report and the notebook API share: a frame class's name, the
classes the FPGA only counted, and the note every figure from a damaged capture carries.

>>> class_label(1, {"frames": {"classes": {"1": "hp"}}}), class_label(3, {})
('hp', '3')
"""

from latscope.capture.files.metadata import class_names

__all__ = ["class_label", "counted_only_classes", "integrity_note", "has_classes",
           "on_first_screen"]


def has_classes(analysis):
    """Whether a capture has per-class stages (a frame capture: ``rx.udp[hp]``, ...)."""
    return any("[" in name and s.n for name, s in analysis.stats.items())


def on_first_screen(analysis, name):
    """Whether measurement ``name`` of ``analysis`` belongs on the report's first screen and in
    its figures: every one of a capture without per-class stages; of a frame capture
    (:func:`has_classes`) only the per-class ones, since its plain stages pair markers with
    frames by order across every class (their tables stay in the detail sections)."""
    return "[" in name or not has_classes(analysis)


def integrity_note(analysis):
    """One sentence to show next to figures from ``analysis`` when its capture file is damaged
    or was not finalised (empty when the input is intact or not a capture file).

    The report and ``compare`` call this for every input, so a figure from a damaged capture
    never appears without saying so."""
    facts = analysis.integrity
    if not facts or not (facts["damaged"] or not facts["finalised"]):
        return ""
    what = "damaged" if facts["damaged"] else "not finalised"
    return f"{analysis.label}: input {what}: {facts['text']}; figures cover the readable part"


def counted_only_classes(fa, counters):
    """``{class: last receive totals}`` (``frames``, ``octets``, ``fcs_errors``, ``dropped``) of
    the receive classes the FPGA counted but that have no recorded frames in the frame analysis
    ``fa`` (classes set to count only, e.g. background load). ``counters`` is the capture's
    COUNTERS records."""
    out = {}
    if counters is None:
        return out
    for row in counters[counters["direction"] == 0]:
        cls = int(row["cls"])
        if cls not in fa.classes and int(row["frames"]):
            out[cls] = {k: int(row[k]) for k in ("frames", "octets", "fcs_errors", "dropped")}
    return out


def class_label(cls, metadata):
    """A class's name from the capture's metadata (``frames.classes``, written from the capture
    config's ``[frames]`` table; or an older ``frame_classes``), else its number."""
    names = class_names(metadata)
    if int(cls) in names:
        return names[int(cls)]
    return str((metadata.get("frame_classes") or {}).get(str(cls), cls))
