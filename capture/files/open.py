"""One reader for every capture file: :func:`open_events` opens a latscope capture (``.lsc``), a
sigrok session (``.sr``) or a latscope export read back (``.vcd``, ``.csv``) and hands on its
parsed metadata (:class:`CaptureInfo`) and its events, chunk by chunk, in one pass.

Memory: ``.lsc`` chunks are read-only views of the memory-mapped file and ``.sr`` samples are
decoded block by block, so a pass holds one chunk at a time. ``.vcd`` and ``.csv`` are text
exports of a time window, read whole (one chunk).

>>> import os, tempfile
>>> from latscope.capture.files.capfile import CaptureWriter
>>> path = os.path.join(tempfile.mkdtemp(), "x.lsc")
>>> with CaptureWriter(path, {"tick_hz": 1000, "channels": {"0": "rx_dv"},
...                           "channel_offsets_ticks": [2]}) as w:
...     w.append_events([10, 20], [0, 0], [1, 0])
>>> with open_events(path) as source:
...     info = source.info
...     chunks = [c.time.tolist() for c in source.chunks()]
>>> info.format, info.origin, info.channel_names, info.channel_offsets.tolist(), chunks
('lsc', 'measured', {0: 'rx_dv'}, [2], [[10, 20]])
"""

import dataclasses
import os

import numpy as np

from latscope import LatscopeError
from latscope.capture.events import Events
from latscope.capture.files.capfile import open_capture
from latscope.capture.files.integrity import damage_summary
from latscope.capture.files.metadata import channel_offsets, origin
from latscope.capture.files.reimport import read_export
from latscope.capture.files.sigrok import SrReader, edges_of_blocks, parse_channel_map, sr_markers

__all__ = ["CaptureInfo", "EventSource", "FrameBlocks", "open_events", "FORMATS"]

#: File name endings :func:`open_events` reads, and the format each names.
FORMATS = {".lsc": "lsc", ".sr": "sr", ".vcd": "vcd", ".csv": "csv"}
#: Samples per ``.sr`` block: 0.5 MB, so a block stays in a core's L2 cache.
_SR_BLOCK = 1 << 19
#: Edges gathered from ``.sr`` blocks before a chunk is handed on (amortises per-chunk work).
_SR_CHUNK = 1 << 16


@dataclasses.dataclass
class CaptureInfo:
    """A capture file's metadata, parsed.

    Attributes
    ----------
    path : str
    format : str
        ``"lsc"``, ``"sr"``, ``"vcd"`` or ``"csv"``.
    metadata : dict
        The metadata as stored (``.lsc``: the META chunk; other formats: what their reader
        derives: ``tick_hz``, ``channels``, ``source``, ``source_file`` ...).
    tick_hz : float
        Timestamp ticks per second.
    channel_names : dict of int to str or None
        Channel index -> role; ``None`` when the file names none.
    markers : dict or None
        Marker meanings the file stores (``{"m0": "rx.isr"}``; ``.lsc``: empty when it stores
        none), ``None`` when the file does not say.
    channel_offsets : numpy.ndarray or None
        Per channel index, ticks to subtract from that channel's edge times (the calibration
        of ``latscope capture --calibration``), or ``None``.
    origin : str
        Where the events came from: ``"measured"``, ``"simulated"``, ``"imported"`` or
        ``"replayed"`` (:func:`latscope.capture.files.metadata.origin`).
    n_events : int or None
        Events in the file when known before reading (``.lsc``, ``.vcd``, ``.csv``).
    losses : list
        Loss records (``first_time``, ``span``, ``lost``, ``cause``).
    integrity : dict or None
        ``.lsc`` only: :func:`latscope.capture.files.integrity.damage_summary`.
    problems : list of str
        ``.lsc`` only: damage found while opening.
    frames : FrameBlocks or None
        ``.lsc`` with frame records: its FRAME records (``HOST_FRAME_DTYPE``), read one stored
        block at a time, else ``None``.
    frame_counters : numpy.ndarray or None
        ``.lsc`` with frame records: every COUNTERS record.
    channel_pairs : list or None
        ``.sr`` only: ``[(role, probe bit)]`` of the channel map, index = channel.
    """
    path: str
    format: str
    metadata: dict
    tick_hz: float
    channel_names: dict | None
    markers: dict | None
    channel_offsets: np.ndarray | None
    origin: str
    n_events: int | None = None
    losses: list = dataclasses.field(default_factory=list)
    integrity: dict | None = None
    problems: list = dataclasses.field(default_factory=list)
    frames: "FrameBlocks | None" = None
    frame_counters: np.ndarray | None = None
    channel_pairs: list | None = None

    @property
    def sampled(self):
        """True for sampled formats (``.sr``), where decoding only the channels a caller needs
        (``chunks(channels=...)``) saves time."""
        return self.format == "sr"


def _info(path, fmt, metadata, tick_hz, channel_names, markers, **extra):
    return CaptureInfo(path, fmt, metadata, tick_hz, channel_names, markers,
                       channel_offsets(metadata), origin(metadata), **extra)


class FrameBlocks:
    """The FRAME records of a capture file, never held whole: ``len()`` is their count, and each
    iteration reads them again, one stored block (``HOST_FRAME_DTYPE``) at a time, in stream
    order. Blocks are valid while the file is open."""

    def __init__(self, n, blocks):
        self._n = n
        self._blocks = blocks

    def __len__(self):
        return self._n

    def __iter__(self):
        return iter(self._blocks())


class EventSource:
    """An open capture file (see :func:`open_events`): ``info`` and :meth:`chunks`. Use it as a
    context manager; views handed out by :meth:`chunks` are valid until it closes."""

    def __init__(self, info, chunks, close):
        self.info = info
        self._chunks = chunks
        self._close = close

    def chunks(self, channels=None):
        """Yield the events as :class:`~latscope.capture.events.Events` chunks (``time``
        ticks, ``channel``, ``rising``), in time order, in one pass over the file.

        ``channels`` (sampled formats only): decode only these channel indices; event formats
        yield every event."""
        return self._chunks(channels)

    def close(self):
        if self._close is not None:
            self._close()
            self._close = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _open_lsc(path):
    cap = open_capture(path)
    try:
        metadata = cap.metadata or {}
        counters = cap.frame_counters() if cap.n_frames else None
        info = _info(path, "lsc", metadata, cap.tick_hz, cap.channel_names or None,
                     cap.markers, n_events=cap.n_events, losses=list(cap.losses),
                     integrity=damage_summary(cap), problems=list(cap.problems),
                     frames=FrameBlocks(cap.n_frames, cap.iter_frames) if cap.n_frames else None,
                     frame_counters=counters)
    except BaseException:
        cap.close()
        raise
    return EventSource(info, lambda channels: cap.iter_chunks(), cap.close)


def _open_sr(path, mapping):
    reader = SrReader(path)
    try:
        sr = reader.info
        if sr.samplerate is None:
            raise LatscopeError(f"{path}: the session file has no samplerate")
        pairs = parse_channel_map(mapping, sr)
        names = {i: role for i, (role, _) in enumerate(pairs)}
        metadata = {"tick_hz": sr.samplerate,
                    "channels": {str(k): v for k, v in names.items()},
                    "source": "sigrok", "source_file": os.path.basename(path)}
        info = _info(path, "sr", metadata, sr.samplerate, names, sr_markers(sr, pairs),
                     channel_pairs=pairs)
    except BaseException:
        reader.close()
        raise

    def chunks(channels):
        used = sorted(names) if channels is None else sorted(channels)
        blocks = reader.iter_samples(block_samples=_SR_BLOCK)
        buffered, count = [], 0
        for edges in edges_of_blocks(blocks, [pairs[c][1] for c in used], used):
            buffered.append(edges)
            count += len(edges[0])
            if count >= _SR_CHUNK:
                yield Events(*(np.concatenate(col) for col in zip(*buffered, strict=True)))
                buffered, count = [], 0
        if buffered:
            yield Events(*(np.concatenate(col) for col in zip(*buffered, strict=True)))
    return EventSource(info, chunks, reader.close)


def _open_export(path, fmt):
    ev = read_export(path)
    info = _info(path, fmt, ev.metadata, ev.tick_hz, ev.channel_names, ev.markers,
                 n_events=len(ev.time))
    whole = Events(ev.time, ev.channel, ev.rising)
    return EventSource(info, lambda channels: iter([whole]), None)


def open_events(path, mapping=None):
    """Open a capture file of any format latscope reads, for one pass over its events.

    Parameters
    ----------
    path : str or os.PathLike
        ``.lsc``, ``.sr``, ``.vcd`` or ``.csv``.
    mapping : str, optional
        For ``.sr`` files: ``--map`` text such as ``"rx_dv=D0,m_isr=D1"`` (default: the probe
        names).

    Returns
    -------
    EventSource
        ``source.info`` (:class:`CaptureInfo`) and ``source.chunks()``; close it (or use
        ``with``).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise LatscopeError(f"{path}: no such file")
    fmt = FORMATS.get(os.path.splitext(path)[1].lower(), "lsc")
    if fmt == "sr" and not path.endswith(".sr"):
        fmt = "lsc"          # only a lower-case .sr is a sigrok session, as analyze has it
    if fmt == "sr":
        return _open_sr(path, mapping)
    if fmt in ("vcd", "csv"):
        return _open_export(path, fmt)
    return _open_lsc(path)
