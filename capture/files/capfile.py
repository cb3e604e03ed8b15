"""Reading capture files (``.lsc``): memory-mapped, resynchronising after damage.

The format is specified in ``docs/capture-format.md``; this module (the reader), :mod:`.chunks`
(format constants, record dtypes, the chunk framing and walker) and :mod:`.capwriter` (the
writer) are its only implementation, and this module re-exports the public names of the other
two, so ``capfile.CaptureWriter`` or ``capfile.scan_chunks`` work as before. The reader
resynchronises after a damaged chunk at the next valid one (:func:`scan_chunks`): the skipped
bytes become a loss record with cause ``"damage"`` and a line in :attr:`Capture.problems`; only an
unreadable tail ends the readable part. The metadata is kept three times (``META``, ``METC`` and
the ``NOTE``'s ``metadata``), so a damaged ``META`` does not make the events unreadable:
:attr:`Capture.metadata_from` says which copy was used.

Ground truth written by the simulated bench lives next to the capture in ``FILE.truth.npz``
(:func:`truth_path`), written by :meth:`CaptureWriter.attach_truth` and read by
:meth:`Capture.truth`.
"""

import json
import mmap
import os

import numpy as np

from latscope import LatscopeError
from latscope.capture.events import Events, FrameRecords, LossRecord
from latscope.capture.files.capwriter import CaptureWriteError, CaptureWriter, write_synthetic
from latscope.capture.files.chunks import (
    CHUNK_HEADER_SIZE,
    CRC_SIZE,
    EVTS_HEADER,
    FILE_HEADER,
    FORMAT_MAJOR,
    FORMAT_MINOR,
    FRMS_HEADER,
    HBT_DTYPE,
    HEADER_SIZE,
    KNOWN_CHUNKS,
    LOSS_CAUSES,
    LOSS_DTYPE,
    MAGIC,
    MAX_CHUNK_PAYLOAD,
    CaptureFileError,
    Chunk,
    Damage,
    scan_chunks,
    truth_path,
)

__all__ = [
    "MAGIC", "FORMAT_MAJOR", "FORMAT_MINOR", "HEADER_SIZE", "CHUNK_HEADER_SIZE", "CRC_SIZE",
    "Chunk", "CaptureWriter", "Capture", "open_capture", "truth_path",
    "LOSS_DTYPE", "HBT_DTYPE", "CaptureFileError", "scan_chunks",
    "write_synthetic", "Damage", "CaptureWriteError",
    "MAX_CHUNK_PAYLOAD", "LOSS_CAUSES", "KNOWN_CHUNKS", "METADATA_COPIES",
]

#: Where :class:`Capture` found its metadata, in the order it looks: the ``META`` chunk, its copy
#: right after it (``METC``, format 1.2) and the copy in the closing ``NOTE`` (format 1.2).
METADATA_COPIES = ("META", "METC", "NOTE")


class Capture:
    """A capture file opened for reading (see :func:`open_capture`).

    Attributes
    ----------
    path : str
    metadata : dict
        The ``META`` chunk.
    tick_hz : float
        Timestamp ticks per second.
    channel_names : dict of int to str
        Channel index to role (e.g. ``{0: "rx_dv", 2: "m_isr"}``).
    markers : dict of str to str
        Marker meanings (e.g. ``{"m0": "rx.isr"}``).
    losses : list of LossRecord
    heartbeats : numpy.ndarray
        Structured array of :data:`HBT_DTYPE`.
    note : dict or None
        The end-of-capture ``NOTE`` chunk; ``None`` if the writer never finished.
    problems : list of str
        Damage found while opening, one line per skipped region and one for an unreadable tail.
    damage : list of Damage
        Regions in the middle of the file that were skipped: reading resumed at the next valid
        chunk, and each region is also a loss record with cause ``"damage"`` in ``losses``.
    truncated : str or None
        Why the tail of the file is unreadable (a chunk cut short by a kill), or ``None``.
    n_events : int
    version : tuple of int
        ``(major, minor)`` of the file's format.
    metadata_from : str
        Which copy of the metadata was read (:data:`METADATA_COPIES`): ``"META"``, or
        ``"METC"`` / ``"NOTE"`` when ``META`` is damaged.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            self._fh = open(self.path, "rb")
        except OSError as error:
            raise LatscopeError(f"cannot open {self.path}: {error.strerror}") from None
        size = os.fstat(self._fh.fileno()).st_size
        if size == 0:
            self._fh.close()
            raise CaptureFileError(f"{self.path}: not a latscope capture file (empty)")
        try:
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        finally:
            self._fh.close()     # the map keeps its own handle; nothing left to leak or warn
        self.size = size
        try:
            _, major, minor, _ = FILE_HEADER.unpack_from(self._mm, 0) if size >= HEADER_SIZE else \
                (None, 0, 0, 0)
            self.version = (major, minor)
            self.chunks, problem, self.end, self.damage = scan_chunks(self._mm)
        except CaptureFileError as error:
            self.close()
            raise CaptureFileError(f"{self.path}: {error}") from None
        self.truncated = problem
        self.problems = [f"{d.reason}; {d.end - d.offset} bytes skipped, reading resumed at "
                         f"offset {d.end}" for d in self.damage]
        if problem:
            self.problems.append(problem)
        self.unknown_chunks = []
        self.metadata = None
        self.note = None
        self.losses = []
        self._evts = []      # (chunk, count, time offset)
        heartbeats = []
        self._frms, self._fcnt = [], []
        copies = {}              # metadata copy -> the dict read from it
        for index, chunk in enumerate(self.chunks):
            payload = self._mm[chunk.offset:chunk.offset + chunk.length] \
                if chunk.type in (b"META", b"METC", b"NOTE") else None
            if index == 0 and chunk.type not in (b"META", b"METC"):
                self.problems.append(f"first chunk is {chunk.type.decode('latin-1')}, not "
                                     f"META")
                if not self.damage or self.damage[0].offset != HEADER_SIZE:
                    break               # not a damaged META: something else was written here
            if chunk.type in (b"META", b"METC"):
                kind = chunk.type.decode()
                if kind in copies:
                    self.problems.append(f"second {kind} chunk at offset {chunk.offset}")
                else:
                    copies[kind] = self._json(payload, kind)
                continue
            if chunk.type == b"EVTS":
                parsed = self._parse_evts(chunk)
                if parsed is None:
                    break
                self._evts.append(parsed)
            elif chunk.type == b"LOSS":
                if chunk.length % LOSS_DTYPE.itemsize:
                    self.problems.append(f"LOSS chunk at {chunk.offset} has a partial record")
                    break
                array = np.frombuffer(self._mm, LOSS_DTYPE, chunk.length // LOSS_DTYPE.itemsize,
                                      chunk.offset)
                for r in array:
                    self.losses.append(LossRecord(int(r["first_time"]), int(r["span"]),
                                                  int(r["lost"]),
                                                  LOSS_CAUSES.get(int(r["cause"]), "unknown")))
            elif chunk.type == b"HBT ":
                if chunk.length % HBT_DTYPE.itemsize:
                    self.problems.append(f"HBT chunk at {chunk.offset} has a partial record")
                    break
                heartbeats.append(np.frombuffer(self._mm, HBT_DTYPE,
                                                chunk.length // HBT_DTYPE.itemsize,
                                                chunk.offset))
            elif chunk.type in (b"FRMS", b"FCNT"):
                if not self._parse_frames(chunk):
                    break
            elif chunk.type == b"NOTE":
                self.note = self._json(payload, "NOTE")
                if isinstance((self.note or {}).get("metadata"), dict):
                    copies["NOTE"] = self.note["metadata"]
            else:
                self.unknown_chunks.append(chunk)
        self.metadata_from = next((kind for kind in METADATA_COPIES
                                   if isinstance(copies.get(kind), dict) and
                                   "tick_hz" in copies[kind]), None)
        if self.metadata_from is not None:
            self.metadata = copies[self.metadata_from]
        if self.metadata is None:
            self.close()
            raise CaptureFileError(f"{self.path}: no readable META chunk; "
                                   f"{'; '.join(self.problems) or 'file holds only a header'}")
        self.heartbeats = np.concatenate(heartbeats) if heartbeats else \
            np.zeros(0, HBT_DTYPE)
        self.n_events = sum(count for _, count, _ in self._evts)
        self.tick_hz = float(self.metadata["tick_hz"])
        self.channel_names = {int(k): str(v)
                              for k, v in (self.metadata.get("channels") or {}).items()}
        self.markers = dict(self.metadata.get("markers") or {})
        self.losses.extend(self._damage_losses())
        self.losses.sort(key=lambda r: r.first_time)

    def _damage_losses(self):
        """One loss record (cause ``"damage"``) per skipped region, spanning from the last event
        read before it to the first event read after it, so analysis never pairs across it."""
        out = []
        for d in self.damage:
            before = [e for e in self._evts if e[0].offset < d.offset and e[1]]
            after = [e for e in self._evts if e[0].offset >= d.end and e[1]]
            last = int(self._chunk_events(before[-1]).time[-1]) if before else None
            first = int(self._chunk_events(after[0]).time[0]) if after else None
            if last is None and first is None:
                continue
            begin = last if last is not None else first
            stop = first if first is not None else last
            out.append(LossRecord(begin, max(0, stop - begin), d.claimed_events or 0, "damage"))
        return out

    def _parse_frames(self, chunk):
        """Map a FRMS or FCNT chunk; False (with a problem noted) if its size is inconsistent."""
        from latscope.gateware.codec import (  # why: amaranth (record layouts), frame captures only
            COUNTER_DTYPE,
            FRAME_DTYPE,
            HEADER_MAX,
        )
        if chunk.type == b"FCNT":
            if chunk.length % COUNTER_DTYPE.itemsize:
                self.problems.append(f"FCNT chunk at {chunk.offset} has a partial record")
                return False
            self._fcnt.append(np.frombuffer(self._mm, COUNTER_DTYPE,
                                            chunk.length // COUNTER_DTYPE.itemsize, chunk.offset))
            return True
        if chunk.length >= FRMS_HEADER.size:
            n, width = FRMS_HEADER.unpack_from(self._mm, chunk.offset)
            if width <= HEADER_MAX and \
                    chunk.length == FRMS_HEADER.size + n * (FRAME_DTYPE.itemsize + width):
                start = chunk.offset + FRMS_HEADER.size
                records = np.frombuffer(self._mm, FRAME_DTYPE, n, start)
                kept = np.frombuffer(self._mm, np.uint8, n * width,
                                     start + n * FRAME_DTYPE.itemsize).reshape(n, width)
                self._frms.append((records, kept))
                return True
        self.problems.append(f"FRMS chunk at {chunk.offset} has an inconsistent size")
        return False

    @property
    def n_frames(self):
        """FRAME records stored (frame-aware capture)."""
        return sum(len(r) for r, _ in self._frms)

    def frames(self):
        """Every FRAME record and an ``(n, HEADER_MAX)`` uint8 array of their kept frame bytes,
        in stream order, as :class:`~latscope.capture.events.FrameRecords`. The records are
        ``capture.frames.HOST_FRAME_DTYPE``: ``FRAME_DTYPE`` with each direction's 32-bit
        ``frame_index`` unwrapped to 64 bits (``capture.frames.unwrap_frame_index``)."""
        from latscope.capture.files.frames import (  # why: amaranth, frame captures only
            unwrap_frame_index,
        )
        from latscope.gateware.codec import HEADER_MAX, empty_frames  # why: amaranth, frames only
        if not self._frms:
            records, headers = empty_frames()
            return FrameRecords(unwrap_frame_index(records), headers)
        records = unwrap_frame_index(np.concatenate([r for r, _ in self._frms]))
        headers = np.zeros((len(records), HEADER_MAX), np.uint8)
        row = 0
        for r, kept in self._frms:
            headers[row:row + len(r), :kept.shape[1]] = kept
            row += len(r)
        return FrameRecords(records, headers)

    def iter_frames(self, block=1 << 12):
        """The FRAME records in blocks of at most ``block`` (``HOST_FRAME_DTYPE``, numbered as
        :meth:`frames` numbers them, without the kept frame bytes), so a reader holds one
        block's records at a time however large the FRMS chunks are."""
        from latscope.capture.files.frames import (  # why: amaranth, frame captures only
            unwrap_frame_index_blocks,
        )
        return unwrap_frame_index_blocks(r[k:k + block] for r, _ in self._frms
                                         for k in range(0, len(r), block))

    def frame_counters(self):
        """Every COUNTERS record (``gateware.codec.COUNTER_DTYPE``), in stream order."""
        from latscope.gateware.codec import empty_counters  # why: amaranth, frames only
        return np.concatenate(self._fcnt) if self._fcnt else empty_counters()

    def _json(self, payload, kind):
        try:
            value = json.loads(bytes(payload))
            if not isinstance(value, dict):
                raise ValueError("not an object")
            return value
        except ValueError as error:
            self.problems.append(f"{kind} chunk is not a JSON object ({error})")
            return None if kind == "NOTE" else {}

    def _parse_evts(self, chunk):
        if chunk.length < EVTS_HEADER.size:
            self.problems.append(f"EVTS chunk at {chunk.offset} is shorter than its header")
            return None
        count, data_offset = EVTS_HEADER.unpack_from(self._mm, chunk.offset)
        if data_offset < EVTS_HEADER.size or data_offset + 10 * count != chunk.length:
            self.problems.append(f"EVTS chunk at {chunk.offset}: count {count} and column "
                                 f"offset {data_offset} do not match length {chunk.length}")
            return None
        return chunk, count, chunk.offset + data_offset

    # --- events ----------------------------------------------------------------------------------
    def payload(self, chunk):
        """The payload bytes of one chunk of :attr:`chunks` (a copy)."""
        return bytes(self._mm[chunk.offset:chunk.offset + chunk.length])

    def events_of(self, chunk):
        """The :class:`Events` of one ``EVTS`` chunk of :attr:`chunks` (views of the mapped
        file), or ``None`` for a chunk whose header failed its checks (see :attr:`problems`)."""
        entry = next((e for e in self._evts if e[0] == chunk), None)
        return None if entry is None else self._chunk_events(entry)

    def _chunk_events(self, entry):
        _, count, start = entry
        time = np.frombuffer(self._mm, "<i8", count, start)
        channel = np.frombuffer(self._mm, "u1", count, start + 8 * count)
        rising = np.frombuffer(self._mm, "u1", count, start + 9 * count).view(bool)
        return Events(time, channel, rising)

    def iter_chunks(self):
        """Yield :class:`~latscope.capture.events.Events` per ``EVTS`` chunk, as read-only views
        of the memory-mapped file: memory stays bounded by one chunk's working set however large
        the file is."""
        for entry in self._evts:
            yield self._chunk_events(entry)

    def events(self):
        """All events as one :class:`~latscope.capture.events.Events`. With one ``EVTS`` chunk the
        columns are read-only views of the memory-mapped file (no copy); otherwise they are
        concatenated into memory. For files larger than memory use :meth:`iter_chunks`."""
        parts = list(self.iter_chunks())
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return Events(np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, bool))
        return Events(*(np.concatenate(column) for column in zip(*parts, strict=True)))

    @property
    def first_time(self):
        """Time of the first event in ticks, or ``None`` without events."""
        for entry in self._evts:
            if entry[1]:
                return int(self._chunk_events(entry).time[0])
        return None

    @property
    def last_time(self):
        """Time of the last event in ticks, or ``None`` without events."""
        for entry in reversed(self._evts):
            if entry[1]:
                return int(self._chunk_events(entry).time[-1])
        return None

    @property
    def duration(self):
        """Seconds from the first to the last event (0.0 with fewer than two events)."""
        if self.n_events < 2:
            return 0.0
        return (self.last_time - self.first_time) / self.tick_hz

    @property
    def lost(self):
        """Lost events by cause: ``{"overflow": n, "link": n}``."""
        totals = {"overflow": 0, "link": 0}
        for r in self.losses:
            totals[r.cause] = totals.get(r.cause, 0) + r.lost
        return totals

    @property
    def finalised(self):
        """True when the writer finished the file (its ``NOTE`` chunk was read)."""
        return self.note is not None

    @property
    def complete(self):
        """True when the file is undamaged and was finalised with a ``NOTE`` chunk."""
        return not self.problems and self.note is not None

    def truth(self):
        """Ground truth from :func:`truth_path`, ``{name: {key: array}}``; empty if absent."""
        path = truth_path(self.path)
        if not os.path.exists(path):
            return {}
        result = {}
        with np.load(path, allow_pickle=False) as npz:
            for full in npz.files:
                name, _, key = full.partition("/")
                result.setdefault(name, {})[key] = npz[full]
        return result

    def close(self):
        """Release the file. Arrays returned earlier must not be used afterwards."""
        mm = getattr(self, "_mm", None)
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass            # views still alive; the mapping is freed with them
            self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_capture(path):
    """Open a capture file for reading.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Capture
        Every chunk before the first incomplete or bad-CRC one; damage is listed in
        ``Capture.problems`` rather than raised, so a capture killed mid-write still opens.

    Raises
    ------
    CaptureFileError
        The file is not a capture file, has no readable ``META`` chunk, or is of a newer major
        format version.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.lsc")
    >>> with CaptureWriter(path, {"tick_hz": 2e8, "channels": {"0": "rx_dv"}}) as w:
    ...     w.append_events([10, 20], [0, 0], [1, 0])
    >>> with open_capture(path) as cap:
    ...     print(cap.n_events, cap.channel_names, cap.events().time.tolist())
    2 {0: 'rx_dv'} [10, 20]
    """
    return Capture(path)

