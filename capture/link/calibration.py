"""Per-channel timing offsets: measured with the self-test output fanned out to every channel,
stored in a capture's metadata, applied by the analysis.

At 1.25 ns ticks the pin-to-sample delay can differ between channels by a tick or more: the
board's traces and cable, the input buffers and the routing from each pad to its ``IDDRX2F``
(``docs/boards.md``, "Channel-to-channel skew", lists what nextpnr reports for the last). With the
self-test output pin wired to every channel input at once (equal-length wires), every channel sees
the same edges; :func:`measure_offsets` (arrays in, :class:`ChannelOffsets` out) finds for each
channel the constant number of ticks by which its edges lag the median channel.
``latscope selftest --calibrate FILE`` runs it on a board and writes FILE;
``latscope capture --calibration FILE`` stores the offsets in the capture's metadata under
:data:`METADATA_KEY` (a file from ``--calibrate --sub-tick`` also makes it set the input delay
lines to the file's :data:`INPUT_DELAY_KEY` before recording, and record them), and
:class:`latscope.analysis.engine.Engine` subtracts them from each channel's edge times before
pairing, so every latency is corrected.
"""

import json
from dataclasses import dataclass

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.metadata import CHANNEL_OFFSETS_KEY, channel_offsets
from latscope.capture.files.outputs import open_output
from latscope.gateware.protocol import DELAY_TAPS

__all__ = ["METADATA_KEY", "INPUT_DELAY_KEY", "SUB_TICK_KEY", "ChannelOffsets", "measure_offsets",
           "offsets_from_metadata", "load_calibration", "write_calibration"]

#: Capture metadata key: a list, per channel index, of ticks to subtract from that channel's times.
METADATA_KEY = CHANNEL_OFFSETS_KEY
#: Calibration file and capture metadata key: the input delay line settings per channel index
#: (``latscope selftest --calibrate --sub-tick``), which the capture sets before recording.
INPUT_DELAY_KEY = "input_delay_taps"
#: Calibration file and capture metadata key: the sub-tick alignment's measurement
#: (:meth:`latscope.capture.link.deskew.SubTickAlignment.to_dict`: taps in ps, skew before and
#: after in ps).
SUB_TICK_KEY = "sub_tick"
#: The offsets stored in capture metadata (:func:`latscope.capture.files.metadata.channel_offsets`).
offsets_from_metadata = channel_offsets


@dataclass(frozen=True)
class ChannelOffsets:
    """Result of :func:`measure_offsets`.

    Attributes
    ----------
    channels : tuple of int
        The channels measured.
    offsets : tuple of int
        Per channel, ticks its edges lag the (lower) median channel (subtract to correct).
    spread : tuple of int
        Per channel, largest minus smallest per-edge lag, ticks (0 or 1 on a clean fan-out: a
        sub-tick skew rounds either way only if the edges are not synchronous to the clock).
    edges : int
        Edges compared on every channel.
    """
    channels: tuple
    offsets: tuple
    spread: tuple
    edges: int

    def as_list(self, n_channels):
        """Offsets per channel index ``0 .. n_channels-1`` (0 for channels not measured)."""
        out = [0] * n_channels
        for ch, off in zip(self.channels, self.offsets, strict=True):
            if ch >= n_channels:
                raise LatscopeError(f"channel {ch} does not exist in a {n_channels}-channel "
                                    f"capture")
            out[ch] = int(off)
        return out

    def to_dict(self):
        return {"channels": list(self.channels), "offsets_ticks": list(self.offsets),
                "spread_ticks": list(self.spread), "edges": self.edges}


def measure_offsets(time, channel, rising, *, channels, max_skew=64, min_edges=16):
    """Per-channel offsets from a capture in which every channel in ``channels`` saw the same
    edges (the self-test output fanned out to their pins).

    Edges are matched by order: each channel's edges before the latest first edge minus
    ``max_skew`` are dropped (a capture may start between the edges of two channels), then the
    ``k``-th edges of all channels must have the same direction and lie within ``max_skew`` ticks
    of each other. The reference of edge ``k`` is the lower median of its times over the
    channels (a whole tick), so offsets between channels are exact on a synchronous pattern.

    Parameters
    ----------
    time, channel, rising : array_like
        Events (ticks, channel index, edge direction), time non-decreasing.
    channels : iterable of int
        The channels wired to the self-test output (at least 2).
    max_skew : int
        Largest lag accepted between channels, ticks.
    min_edges : int
        Fewest matched edges per channel.

    Returns
    -------
    ChannelOffsets

    Examples
    --------
    >>> import numpy as np
    >>> base = np.arange(0, 2000, 100)
    >>> t = np.concatenate([base, base + 3, base - 1])
    >>> ch = np.repeat([0, 1, 2], len(base))
    >>> up = np.tile(np.arange(len(base)) % 2 == 0, 3)
    >>> order = np.argsort(t, kind="stable")
    >>> measure_offsets(t[order], ch[order], up[order], channels=[0, 1, 2]).offsets
    (0, 3, -1)
    """
    time = np.asarray(time, dtype=np.int64)
    channel = np.asarray(channel)
    rising = np.asarray(rising, dtype=bool)
    chans = sorted({int(c) for c in channels})
    if len(chans) < 2:
        raise LatscopeError("calibration needs at least 2 channels wired to the self-test output")
    per = {c: (time[channel == c], rising[channel == c]) for c in chans}
    empty = [c for c in chans if not len(per[c][0])]
    if empty:
        raise LatscopeError(f"no edges on channel(s) {', '.join(map(str, empty))}: is the "
                            f"self-test output wired to them?")
    start = max(int(t[0]) for t, _ in per.values()) - max_skew
    per = {c: (t[t >= start], r[t >= start]) for c, (t, r) in per.items()}
    n = min(len(t) for t, _ in per.values())
    if n < min_edges:
        raise LatscopeError(f"only {n} edges on the slowest channel; calibration needs at least "
                            f"{min_edges}")
    times = np.stack([per[c][0][:n] for c in chans])
    dirs = np.stack([per[c][1][:n] for c in chans])
    if np.any(dirs != dirs[0]):
        bad = [c for c, d in zip(chans, dirs, strict=True) if np.any(d != dirs[0])]
        raise LatscopeError(f"channel(s) {', '.join(map(str, bad))} saw other edges than channel "
                            f"{chans[0]}: check the wiring and that nothing else drives them")
    ref = np.sort(times, axis=0)[(len(chans) - 1) // 2]     # the lower median: whole ticks
    lag = times - ref
    if np.any(np.abs(lag) > max_skew):
        worst = int(np.max(np.abs(lag)))
        raise LatscopeError(f"channels differ by up to {worst} ticks, more than the "
                            f"{max_skew}-tick limit: edges are not the same on every channel")
    offsets = tuple(int(np.median(row) // 1) for row in lag)
    spread = tuple(int(row.max() - row.min()) for row in lag)
    return ChannelOffsets(channels=tuple(chans), offsets=offsets, spread=spread, edges=int(n))


def write_calibration(path, result, *, identity, force=False, sub_tick=None):
    """Write a calibration file: offsets per channel index, with the instrument it belongs to,
    under :mod:`latscope.capture.files.outputs`'s policy (``force`` replaces an existing
    file). ``sub_tick`` (a :class:`~latscope.capture.link.deskew.SubTickAlignment`) adds the
    delay line settings the offsets were measured at, and their measurement."""
    n = int(identity.get("channels") or max(result.channels) + 1)
    doc = {"format": "latscope-calibration", "version": 1,
           "board": identity.get("board"), "tick_hz": identity.get("tick_hz"),
           "source_hash": identity.get("source_hash"),
           METADATA_KEY: result.as_list(n), "measurement": result.to_dict()}
    if sub_tick is not None:
        taps = [0] * n
        for ch, t in zip(sub_tick.channels, sub_tick.taps, strict=True):
            taps[ch] = int(t)
        doc[INPUT_DELAY_KEY] = taps
        doc[SUB_TICK_KEY] = sub_tick.to_dict()
    with open_output(path, force=force) as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    return doc


def load_calibration(path, *, identity=None):
    """Read a calibration file; returns the metadata to store (``METADATA_KEY`` and where it came
    from). With ``identity`` (the instrument's IDENTIFY answer), refuses a file made at another
    tick rate or on another board."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as error:
        raise LatscopeError(f"cannot read calibration file {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise LatscopeError(f"calibration file {path} is not JSON ({error.msg})") from None
    if not isinstance(doc, dict) or doc.get("format") != "latscope-calibration":
        raise LatscopeError(f"{path} is not a latscope calibration file")
    offsets = offsets_from_metadata(doc)
    if offsets is None:
        raise LatscopeError(f"calibration file {path} holds no {METADATA_KEY!r}")
    if identity is not None:
        for key in ("tick_hz", "board"):
            if doc.get(key) is not None and identity.get(key) is not None \
                    and doc[key] != identity[key]:
                raise LatscopeError(f"calibration file {path} was made with {key} "
                                    f"{doc[key]!r}, the instrument has {identity[key]!r}")
    meta = {METADATA_KEY: [int(v) for v in offsets],
            "channel_offsets_source": {"file": str(path), "board": doc.get("board"),
                                       "tick_hz": doc.get("tick_hz")}}
    taps = doc.get(INPUT_DELAY_KEY)
    if taps is not None:
        if not isinstance(taps, list) or len(taps) != len(offsets) or not all(
                isinstance(t, int) and 0 <= t < DELAY_TAPS for t in taps):
            raise LatscopeError(f"calibration file {path}: {INPUT_DELAY_KEY} must be one setting "
                                f"0..{DELAY_TAPS - 1} per channel, not {taps!r}")
        meta[INPUT_DELAY_KEY] = taps
        meta[SUB_TICK_KEY] = doc.get(SUB_TICK_KEY)
    return meta
