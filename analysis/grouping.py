"""How a set of captures is organised, so comparisons follow it: MACs at equal frame size, frame
sizes within one MAC, the fast track against the stack, repeats of one configuration.

Pure functions of labels and metadata (no I/O). A capture's *family* is its configuration without
the frame size (``gem-64`` -> ``gem``; the simulated bench's ``simbench.family`` when present),
and its *condition* the background load it ran under (:func:`load_condition`): captures are
compared only with captures of the same condition, and a loaded capture's family says its load
(``el-dm under bg60``).

>>> from types import SimpleNamespace as A
>>> caps = [A(label=l, size=s, path=None, metadata={}) for l, s in
...         [("gem-64", 64), ("el-dm-64", 64), ("gem-1024", 1024), ("fast-track-64", 64)]]
>>> [(g.title, [caps[i].label for i in g.members]) for g in comparison_groups(caps)]
... # doctest: +NORMALIZE_WHITESPACE
[('MACs at 64 B frames', ['gem-64', 'el-dm-64']),
 ('frame sizes within gem', ['gem-64', 'gem-1024']),
 ('fast track against the stack at 64 B frames', ['el-dm-64', 'fast-track-64'])]
"""

import dataclasses
import os
import re

__all__ = ["ComparisonGroup", "family", "is_simulated", "display_labels", "comparison_groups",
           "load_condition", "FAST_DELIVERY", "STACK_DELIVERY"]

#: The fast track hands the payload to the application at ``rx.fast``; the stack at ``rx.udp``.
FAST_DELIVERY, STACK_DELIVERY = "rx.fast", "rx.udp"


@dataclasses.dataclass(frozen=True)
class ComparisonGroup:
    """Captures compared with each other: ``members[0]`` is the baseline of the group.

    ``kind`` is ``"mac"`` (configurations at one frame size), ``"size"`` (sizes within one
    configuration, against the smallest), ``"fast"`` (fast track against a stack configuration
    at one size; ``rx.fast`` is compared with ``rx.udp``: both mark the payload reaching the
    application), ``"repeat"`` (captures of one configuration and size) or ``"first"`` (no
    structure found: each capture against the first).
    """
    title: str
    kind: str
    members: tuple
    #: the background load every member ran under, in words (:func:`load_condition`), or None
    condition: str | None = None

    def measurement_pairs(self, names_of):
        """``[(baseline measurement, other measurement)]`` to compare; ``names_of(i)`` gives the
        measurements capture ``i`` has."""
        base = names_of(self.members[0])
        others = [set(names_of(i)) for i in self.members[1:]]
        pairs = [(n, n) for n in base if all(n in o for o in others)]
        if self.kind == "fast" and STACK_DELIVERY in base and \
                all(FAST_DELIVERY in o for o in others):
            pairs.insert(0, (STACK_DELIVERY, FAST_DELIVERY))
        if self.kind == "fast":     # per frame class too: rx.udp[hp] against rx.fast[hp]
            for name in base:
                if name.startswith(STACK_DELIVERY + "["):
                    fast = FAST_DELIVERY + name[len(STACK_DELIVERY):]
                    if all(fast in o for o in others):
                        pairs.insert(1, (name, fast))
        return pairs


def load_condition(metadata):
    """``(name, words)`` of the background load a simulated-bench capture ran under
    (``simbench.load``), or ``None`` for an unloaded capture.

    >>> load_condition({"simbench": {"load": {"name": "bg60", "load": 0.6, "mix": "imix"}}})
    ('bg60', '60 % background load (IMIX)')
    >>> load_condition({}) is None
    True
    """
    sim = (metadata or {}).get("simbench")
    load = sim.get("load") if isinstance(sim, dict) else None
    if not isinstance(load, dict) or not load.get("name"):
        return None
    share = load.get("load")
    words = (f"{float(share) * 100:g} % background load" if share is not None
             else f"background load {load['name']}")
    if load.get("mix"):
        words += f" ({str(load['mix']).upper()})"
    return str(load["name"]), words


def family(a):
    """Configuration family of an analysis (``label`` without the size; ``simbench.family``),
    with ``under <load>`` for a capture under background load (:func:`load_condition`)."""
    sim = (a.metadata or {}).get("simbench")
    condition = load_condition(a.metadata)
    if isinstance(sim, dict) and isinstance(sim.get("family"), str):
        base = sim["family"]
    elif a.size is not None and a.label.endswith(f"-{a.size}"):
        base = a.label[: -len(str(a.size)) - 1]
    else:
        base = re.sub(r"[-_]\d+$", "", a.label)
    return f"{base} under {condition[0]}" if condition else base


def is_simulated(metadata):
    """True when a capture came from the simulated bench (its metadata says so)."""
    metadata = metadata or {}
    instrument = metadata.get("instrument")
    return bool((isinstance(instrument, dict) and instrument.get("simulated"))
                or metadata.get("simbench") or metadata.get("simulated"))


def _is_fast(name):
    return "fast" in name


def display_labels(analyses):
    """One unique name per capture: its label, with the shortest distinguishing part of its path
    appended when labels repeat (``gem-64 [run1/gem-64.lsc]``), else ``#k``.

    >>> from types import SimpleNamespace as A
    >>> display_labels([A(label="gem-64", path="a/run1/x.lsc"), A(label="gem-64",
    ...                 path="a/run2/x.lsc"), A(label="el", path=None)])
    ['gem-64 [run1/x.lsc]', 'gem-64 [run2/x.lsc]', 'el']
    >>> display_labels([A(label="g", path="x.lsc"), A(label="g", path="x.lsc")])
    ['g [x.lsc] #1', 'g [x.lsc] #2']
    """
    labels = [a.label for a in analyses]
    out = list(labels)
    for label in set(labels):
        same = [i for i, x in enumerate(labels) if x == label]
        if len(same) < 2:
            continue
        parts = {i: os.path.normpath(analyses[i].path).split(os.sep) if analyses[i].path
                 else None for i in same}
        distinct = len({"/".join(p) for p in parts.values() if p})
        depth = 1
        while True:        # the shortest path tail that tells the distinct files apart
            tails = {i: "/".join(p[-depth:]) if p else None for i, p in parts.items()}
            if len({t for t in tails.values() if t is not None}) == distinct or depth > 8:
                break
            depth += 1
        for k, i in enumerate(same):
            out[i] = f"{label} [{tails[i]}]" if tails[i] else f"{label} [#{k + 1}]"
    for name in set(out):                           # the same file given twice
        same = [i for i, x in enumerate(out) if x == name]
        if len(same) > 1:
            for k, i in enumerate(same):
                out[i] = f"{name} #{k + 1}"
    return out


def comparison_groups(analyses):
    """The comparisons that match how ``analyses`` are organised (see the module docstring).

    Each analysis needs ``label``, ``size`` (frame bytes or None), ``path`` and ``metadata``.
    Order within a group follows the order given (sizes ascending); the first member is the
    baseline. When no structure is found (no frame sizes, one capture per configuration), the
    single group is "each against the first".

    Returns
    -------
    list of ComparisonGroup
    """
    keys = [(family(a), a.size) for a in analyses]
    conditions = [load_condition(a.metadata) for a in analyses]
    groups = []
    sizes = []
    for _, size in keys:
        if size is not None and size not in sizes:
            sizes.append(size)
    sizes.sort()
    families = []
    for fam, _ in keys:
        if fam not in families:
            families.append(fam)
    condition_of = {k: c for k, c in zip(keys, conditions, strict=True)}

    def first_of(fam, size):
        return next(i for i, k in enumerate(keys) if k == (fam, size))

    def under(cond):
        return (f" under {cond[1]}" if cond else ""), (cond[1] if cond else None)

    def families_under(cond):
        return [f for f in families if any(condition_of[k] == cond for k in keys if k[0] == f)]

    # the MACs, and the fast track against the stack, only under one condition at a time
    for cond in dict.fromkeys(conditions):
        suffix, words = under(cond)
        for size in sizes:
            stack = [f for f in families_under(cond) if not _is_fast(f) and (f, size) in keys]
            if len(stack) >= 2:
                groups.append(ComparisonGroup(f"MACs at {size} B frames{suffix}", "mac",
                                              tuple(first_of(f, size) for f in stack), words))
    for fam in families:
        present = [s for s in sizes if (fam, s) in keys]
        if len(present) >= 2:
            groups.append(ComparisonGroup(f"frame sizes within {fam}", "size",
                                          tuple(first_of(fam, s) for s in present)))
    for cond in dict.fromkeys(conditions):
        suffix, words = under(cond)
        mine = families_under(cond)
        for size in sizes:
            fast = [f for f in mine if _is_fast(f) and (f, size) in keys]
            stack = [f for f in mine if not _is_fast(f) and (f, size) in keys]
            for fam in fast:
                # the paper's fast track runs on Ethernet Lite with device memory: prefer it
                base = next((f for f in stack if f in fam or "dm" in f),
                            stack[0] if stack else None)
                if base is not None:
                    groups.append(ComparisonGroup(
                        f"fast track against the stack at {size} B frames{suffix}", "fast",
                        (first_of(base, size), first_of(fam, size)), words))
    for key in dict.fromkeys(keys):
        same = tuple(i for i, k in enumerate(keys) if k == key)
        if len(same) >= 2:
            name = analyses[same[0]].label
            groups.append(ComparisonGroup(f"repeated captures of {name}", "repeat", same))
    if not groups and len(analyses) >= 2:
        groups.append(ComparisonGroup(f"each capture against {analyses[0].label}", "first",
                                      tuple(range(len(analyses)))))
    return groups
