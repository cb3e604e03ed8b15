"""Capture files (``.lsc``): self-describing, chunked, append-only, one CRC per chunk.

The format is specified in ``docs/capture-format.md``; this module is its only implementation.
A file is a 16-byte header followed by chunks ``[type 4cc][length u64][payload][crc32 u32]``:
``META`` (JSON metadata, always first), ``METC`` (a copy of it, format 1.2), ``EVTS`` (event
columns laid out for zero-copy ``np.frombuffer``), ``LOSS`` (loss records), ``HBT `` (heartbeats),
``FRMS``/``FCNT`` (frame records and class counters of frame-aware capture, format 1.1), ``NOTE``
(end-of-capture summary, JSON). The writer fsyncs every chunk it completes, so a capture killed at
any instant opens with every complete chunk. The reader resynchronises after a damaged chunk at the
next valid one (:func:`scan_chunks`): the skipped bytes become a loss record with cause
``"damage"`` and a line in :attr:`Capture.problems`; only an unreadable tail ends the readable
part. The metadata is kept three times (``META``, ``METC`` and the ``NOTE``'s ``metadata``), so a
damaged ``META`` does not make the events unreadable: :attr:`Capture.metadata_from` says which copy
was used.

Ground truth written by the simulated bench lives next to the capture in ``FILE.truth.npz``
(:func:`truth_path`), written by :meth:`CaptureWriter.attach_truth` and read by
:meth:`Capture.truth`.
"""

import datetime
import errno
import json
import mmap
import os
import struct
import time as _time
import zlib
from typing import NamedTuple

import numpy as np

from latscope import LatscopeError, __version__
from latscope.capture.events import Events, FrameRecords, LossRecord
from latscope.capture.files.outputs import replacing

__all__ = [
    "MAGIC", "FORMAT_MAJOR", "FORMAT_MINOR", "HEADER_SIZE", "CHUNK_HEADER_SIZE", "CRC_SIZE",
    "Chunk", "CaptureWriter", "Capture", "open_capture", "truth_path",
    "LOSS_DTYPE", "HBT_DTYPE", "CaptureFileError", "scan_chunks",
    "write_synthetic", "Damage", "CaptureWriteError",
]

#: First 8 bytes of every capture file. The high byte, CR LF and Ctrl-Z catch text-mode
#: mangling and ``type`` on a terminal, as in PNG.
MAGIC = b"\x89LSC\r\n\x1a\n"
#: Readers refuse a file whose major version is greater than theirs (see the version rule).
FORMAT_MAJOR = 1
#: Minor versions only add things an older reader may skip (new chunk types, new JSON keys).
FORMAT_MINOR = 2
HEADER_SIZE = 16
_HEADER = struct.Struct("<8sHHI")            # magic, major, minor, flags (0)
CHUNK_HEADER_SIZE = 12
_CHUNK_HEADER = struct.Struct("<4sQ")        # type, payload length
CRC_SIZE = 4
_CRC = struct.Struct("<I")
_EVTS_HEADER = struct.Struct("<II")          # event count, offset of the time column in payload
#: Largest payload a reader accepts; a length above it is treated as corruption, not allocated.
MAX_CHUNK_PAYLOAD = 1 << 40

#: ``LOSS`` chunk payload: an array of these records (32 bytes each, little-endian).
LOSS_DTYPE = np.dtype([("first_time", "<i8"), ("span", "<i8"), ("lost", "<u8"),
                       ("cause", "u1"), ("reserved", "V7")])
#: Cause codes; 3 (format 1.2) marks events lost to a damaged region of the file a repaired
#: capture was rebuilt from (:func:`latscope.capture.files.repair.repair`).
LOSS_CAUSES = {1: "overflow", 2: "link", 3: "damage"}
_CAUSE_CODES = {name: code for code, name in LOSS_CAUSES.items()}

#: ``HBT `` chunk payload: an array of these records (32 bytes each, little-endian): the wire's
#: Heartbeat record (``gateware.codec.HEARTBEAT_DTYPE``) field for field at the same offsets, with
#: ``time`` signed like every time in the file, and 4 reserved bytes. Written out rather than
#: derived so that reading a file needs no gateware layouts; ``capture/tests/test_capfile.py``
#: ties it to the wire record.
HBT_DTYPE = np.dtype([("time", "<i8"), ("events", "<u8"), ("lost", "<u8"),
                      ("fifo_high_water", "<u2"), ("status", "u1"), ("epoch", "u1"),
                      ("reserved", "V4")])

KNOWN_CHUNKS = (b"META", b"METC", b"EVTS", b"LOSS", b"HBT ", b"NOTE", b"FRMS", b"FCNT")
#: Where :class:`Capture` found its metadata, in the order it looks: the ``META`` chunk, its copy
#: right after it (``METC``, format 1.2) and the copy in the closing ``NOTE`` (format 1.2).
METADATA_COPIES = ("META", "METC", "NOTE")
_FRMS_HEADER = struct.Struct("<II")          # record count, kept header bytes per record


class CaptureFileError(LatscopeError):
    """A file is not a capture file, or is of a newer major version than this reader."""


class CaptureWriteError(LatscopeError):
    """Writing a capture failed (a full disk, a file size limit, an I/O error). The writer has
    already cut the file back to its last complete chunk and, when there was room, finalised it
    with a ``NOTE`` saying why: the file holds every event written before the error and
    ``latscope verify`` reads them.

    Attributes
    ----------
    path : str
    events : int
        Events in the file (written before the error).
    finalised : bool
        The ``NOTE`` chunk could still be written.
    exit_status : int
        4, the exit status ``latscope capture`` documents for a writer that failed (the file
        holds everything before it).
    """

    exit_status = 4

    def __init__(self, path, events, finalised, reason):
        self.path, self.events, self.finalised, self.reason = path, events, finalised, reason
        state = "finalised" if finalised else "not finalised"
        super().__init__(f"cannot write {path}: {reason}; the file holds the {events:,} events "
                         f"written before it ({state}; latscope verify reads them)")


class Chunk(NamedTuple):
    """One chunk as found in a file: its type, the file offset of its payload, payload length."""
    type: bytes
    offset: int
    length: int


def truth_path(path):
    """Path of the ground-truth side file of the capture at ``path``: ``path + ".truth.npz"``."""
    return os.fspath(path) + ".truth.npz"


def _as_loss_record(record):
    if isinstance(record, LossRecord):
        return record
    try:
        cause = record.cause
        return LossRecord(int(record.first_time), int(record.span), int(record.lost),
                          getattr(cause, "value", cause) if not isinstance(cause, str) else cause)
    except AttributeError:
        return LossRecord(*record)


def _os_reason(error):
    """An ``OSError`` in words for a one-line message (``"no space left on the device"``)."""
    reasons = {errno.ENOSPC: "no space left on the device", errno.EFBIG: "file too large",
               errno.EDQUOT: "disk quota exceeded", errno.EIO: "input/output error",
               errno.EROFS: "read-only file system"}
    return reasons.get(error.errno) or (error.strerror or str(error)).lower()


def _frame(kind, payload):
    header = _CHUNK_HEADER.pack(kind, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(header))
    return header + payload + _CRC.pack(crc)


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class CaptureWriter:
    """Write a capture file, durably and append-only.

    Parameters
    ----------
    path : str or os.PathLike
        File to create. An existing file is replaced only with ``overwrite=True``.
    metadata : dict
        JSON-serialisable metadata, written as the ``META`` chunk. It must hold ``tick_hz``
        (ticks per second, > 0); ``channels`` (``{index: role}``), ``markers`` (``{"m0":
        "rx.isr"}``) and the keys listed in ``docs/capture-format.md`` are recommended.
        ``format``, ``software`` and ``created`` are filled in when absent.
    chunk_events : int
        Buffered events that trigger writing an ``EVTS`` chunk.
    flush_interval : float
        Seconds after which buffered events are written even if fewer than ``chunk_events``.
    fsync : bool
        Call ``os.fsync`` after every chunk (the durability guarantee; turn off only in tests that
        do not need it).
    overwrite : bool
        Replace an existing file.

    Every completed chunk is written with one ``write`` call and then fsynced, so after a kill
    (or power loss) the file holds every chunk completed before it.
    """

    def __init__(self, path, metadata, *, chunk_events=1 << 16, flush_interval=0.5, fsync=True,
                 overwrite=False):
        if not isinstance(metadata, dict):
            raise TypeError(f"Metadata must be a dict, not {metadata!r}")
        tick_hz = metadata.get("tick_hz")
        if isinstance(tick_hz, bool) or not isinstance(tick_hz, (int, float)) or not tick_hz > 0:
            raise ValueError(f"Metadata must hold tick_hz, a positive number, not {tick_hz!r}")
        if not isinstance(chunk_events, int) or chunk_events < 1:
            raise ValueError(f"Chunk size must be a positive integer, not {chunk_events!r}")
        if not isinstance(flush_interval, (int, float)) or flush_interval < 0:
            raise ValueError(f"Flush interval must be a non-negative number of seconds, "
                             f"not {flush_interval!r}")
        self.path = os.fspath(path)
        self.chunk_events = chunk_events
        self.flush_interval = float(flush_interval)
        self._fsync = fsync
        meta = dict(metadata)
        meta.setdefault("format", f"latscope-capture {FORMAT_MAJOR}.{FORMAT_MINOR}")
        meta.setdefault("software", {"latscope": __version__})
        meta.setdefault("created", datetime.datetime.now(datetime.timezone.utc).isoformat())
        try:
            meta_bytes = json.dumps(meta, sort_keys=True, allow_nan=False).encode()
        except (TypeError, ValueError) as error:
            raise ValueError(f"Metadata is not JSON-serialisable: {error}") from None
        self.metadata = meta
        try:
            if overwrite:
                # a new file in place of the old one, never the old one cut to nothing: another
                # name of it (a hard link) keeps its data; a symbolic link keeps pointing here
                _remove(os.path.realpath(self.path))
            # unbuffered: each chunk is one write of its own, so a failed one can be cut off
            self._file = open(os.path.realpath(self.path), "xb", buffering=0)
        except FileExistsError:
            raise LatscopeError(f"{self.path} exists; choose another name or remove it") from None
        except OSError as error:
            raise LatscopeError(f"cannot create {self.path}: {error.strerror}") from None
        self._offset = 0
        self._buffers = []          # list of Events not yet written
        self._buffered = 0
        self._last_time = None
        self._last_flush = _time.monotonic()
        self._truth = {}
        self.n_events = 0
        self.n_written = 0          # events in EVTS chunks already in the file
        self.n_lost = {"overflow": 0, "link": 0}
        self.n_chunks = 0
        self.closed = False
        try:
            self._write(_HEADER.pack(MAGIC, FORMAT_MAJOR, FORMAT_MINOR, 0))
            self._write_chunk(b"META", meta_bytes)
            self._write_chunk(b"METC", meta_bytes)      # one damaged META must not lose the file
        except (OSError, CaptureWriteError) as error:
            self.abandon()
            os.unlink(self.path)                         # nothing recorded: nothing to keep
            reason = error.reason if isinstance(error, CaptureWriteError) else \
                _os_reason(error)
            raise LatscopeError(f"cannot write {self.path}: {reason}; nothing was "
                                f"recorded") from None

    # --- low level -------------------------------------------------------------------------------
    def _write(self, data):
        view = memoryview(data)
        while view:
            view = view[self._file.write(view):]
        self._offset += len(data)

    def _sync(self):
        if self._fsync:
            os.fsync(self._file.fileno())

    def _write_chunk(self, kind, payload):
        start = self._offset
        try:
            self._write(_frame(kind, payload))
            self._sync()
        except OSError as error:
            self._fail(start, error)
        self.n_chunks += 1

    def _fail(self, start, error):
        """A write failed: cut the file back to its last complete chunk (``start``), finalise
        it if there is room for the ``NOTE``, close it and raise :class:`CaptureWriteError`."""
        reason = _os_reason(error)
        finalised = False
        fd = self._file.fileno()
        try:
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
            self._offset = start
            note = self._note(f"stopped: cannot write ({reason})", {})
            try:
                self._write(_frame(b"NOTE", note))
                os.fsync(fd)
                finalised = True
            except OSError:
                os.ftruncate(fd, start)                     # no room even for that
        except OSError:
            pass                # the reader skips a partial tail; nothing more can be done
        self._buffers.clear()
        self._buffered = 0
        self.abandon()
        raise CaptureWriteError(self.path, self.n_written, finalised, reason) from None

    def _check_open(self):
        if self.closed:
            raise ValueError("Capture file is closed")

    # --- public ----------------------------------------------------------------------------------
    def append_events(self, time, channel, rising):
        """Append events (columns of equal length, ``time`` non-decreasing, in ticks).

        The events are buffered and written as an ``EVTS`` chunk once ``chunk_events`` are
        buffered or ``flush_interval`` seconds passed since the last write.
        """
        self._check_open()
        time = np.ascontiguousarray(time, dtype="<i8")
        channel = np.ascontiguousarray(channel, dtype="u1")
        rising = np.ascontiguousarray(rising, dtype="u1")
        if not (time.ndim == channel.ndim == rising.ndim == 1) or \
                not (len(time) == len(channel) == len(rising)):
            raise ValueError(f"Event columns must be 1-D and of equal length, not "
                             f"{time.shape}, {channel.shape}, {rising.shape}")
        if len(time):
            if np.any(time[1:] < time[:-1]) or \
                    (self._last_time is not None and time[0] < self._last_time):
                raise ValueError("Event times must be non-decreasing")
            if np.any(rising > 1):
                raise ValueError("Rising flags must be 0 or 1")
            self._last_time = int(time[-1])
            self._buffers.append(Events(time.copy(), channel.copy(), rising.copy()))
            self._buffered += len(time)
            self.n_events += len(time)
        if self._buffered >= self.chunk_events or \
                _time.monotonic() - self._last_flush >= self.flush_interval:
            self.flush()

    def append_loss(self, record):
        """Record lost events: a :class:`~latscope.capture.events.LossRecord` or any object with
        ``first_time``, ``span``, ``lost`` and ``cause`` attributes (``cause`` ``"overflow"`` or
        ``"link"``). Written at once, after the events buffered before it."""
        self.append_losses([record])

    def append_losses(self, records):
        """Record several losses in one ``LOSS`` chunk (see :meth:`append_loss`)."""
        self._check_open()
        records = [_as_loss_record(r) for r in records]
        if not records:
            return
        array = np.zeros(len(records), LOSS_DTYPE)
        for i, r in enumerate(records):
            if r.cause not in _CAUSE_CODES:
                raise ValueError(f"Loss cause must be 'overflow', 'link' or 'damage', not "
                                 f"{r.cause!r}")
            if r.lost < 0 or r.span < 0:
                raise ValueError(f"Loss count and span must be non-negative, not {r!r}")
            array[i] = (r.first_time, r.span, r.lost, _CAUSE_CODES[r.cause], b"")
            self.n_lost[r.cause] = self.n_lost.get(r.cause, 0) + r.lost
        self._flush_events()
        self._write_chunk(b"LOSS", array.tobytes())

    def append_heartbeats(self, heartbeats):
        """Store heartbeats: a structured array with the fields of :data:`HBT_DTYPE`
        (missing ones are zero) or a sequence of objects/dicts with those fields."""
        self._check_open()
        if isinstance(heartbeats, np.ndarray) and heartbeats.dtype.names:
            array = np.zeros(len(heartbeats), HBT_DTYPE)
            for name in HBT_DTYPE.names:
                if name in heartbeats.dtype.names and name != "reserved":
                    array[name] = heartbeats[name]
        else:
            heartbeats = list(heartbeats)
            array = np.zeros(len(heartbeats), HBT_DTYPE)
            for i, hb in enumerate(heartbeats):
                get = hb.get if isinstance(hb, dict) else (lambda k, d=0, hb=hb: getattr(hb, k, d))
                for name in HBT_DTYPE.names[:-1]:
                    value = get(name, 0)
                    array[i][name] = int(value) if not isinstance(value, dict) else 0
        if len(array):
            self._flush_events()
            self._write_chunk(b"HBT ", array.tobytes())

    def append_frames(self, records, headers=None):
        """Store FRAME records (a ``gateware.codec.FRAME_DTYPE`` array) and their kept header
        bytes (an ``(n, k)`` uint8 array, zero past each record's ``header_len``)."""
        from latscope.gateware.codec import FRAME_DTYPE  # amaranth: only frame captures need it
        self._check_open()
        records = np.ascontiguousarray(records, FRAME_DTYPE)
        if not len(records):
            return
        width = int(records["header_len"].max())
        kept = np.zeros((len(records), width), np.uint8)
        if width and headers is not None:
            kept[:] = np.asarray(headers, np.uint8)[:, :width]
        self._flush_events()
        self._write_chunk(b"FRMS", _FRMS_HEADER.pack(len(records), width) + records.tobytes()
                          + kept.tobytes())

    def append_frame_counters(self, counters):
        """Store COUNTERS records (a ``gateware.codec.COUNTER_DTYPE`` array)."""
        from latscope.gateware.codec import COUNTER_DTYPE  # amaranth: only frame captures
        self._check_open()
        counters = np.ascontiguousarray(counters, COUNTER_DTYPE)
        if len(counters):
            self._flush_events()
            self._write_chunk(b"FCNT", counters.tobytes())

    def append_chunk(self, kind, payload):
        """Copy a chunk whose payload needs no placement (``LOSS``, ``HBT ``, ``FRMS``,
        ``FCNT``, or a type this writer does not know) unchanged, after the events buffered
        before it. ``EVTS`` (its columns are aligned to the file offset), ``META``, ``METC``
        and ``NOTE`` are written by their own methods."""
        self._check_open()
        if not isinstance(kind, bytes) or len(kind) != 4 or \
                kind in (b"EVTS", b"META", b"METC", b"NOTE"):
            raise ValueError(f"Chunk type must be 4 bytes other than EVTS, META, METC and NOTE, "
                             f"not {kind!r}")
        self._flush_events()
        self._write_chunk(kind, bytes(payload))

    def _flush_events(self):
        if not self._buffered:
            return
        time = np.concatenate([b.time for b in self._buffers])
        channel = np.concatenate([b.channel for b in self._buffers])
        rising = np.concatenate([b.rising for b in self._buffers])
        self._buffers.clear()
        self._buffered = 0
        # Choose the offset of the time column so its file offset is a multiple of 8.
        payload_start = self._offset + CHUNK_HEADER_SIZE
        data_offset = _EVTS_HEADER.size + (-(payload_start + _EVTS_HEADER.size)) % 8
        head = _EVTS_HEADER.pack(len(time), data_offset)
        payload = b"".join([head, bytes(data_offset - len(head)), time.tobytes(),
                            channel.tobytes(), rising.tobytes()])
        self._write_chunk(b"EVTS", payload)
        self.n_written += len(time)

    def flush(self):
        """Write buffered events as a chunk and fsync."""
        self._check_open()
        self._flush_events()
        self._last_flush = _time.monotonic()

    def attach_truth(self, name, arrays):
        """Store ground truth (e.g. the simulated bench's true edge times) in the side file
        :func:`truth_path` as ``name/key`` entries; written atomically at once."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"Truth name must be a non-empty string without '/', not {name!r}")
        for key, value in dict(arrays).items():
            self._truth[f"{name}/{key}"] = np.asarray(value)
        with replacing(truth_path(self.path), [self.path], force=True) as temp:
            with open(temp, "wb") as f:
                np.savez(f, **self._truth)
                f.flush()
                os.fsync(f.fileno())

    def close(self, reason="closed", **summary):
        """Write buffered events and the ``NOTE`` chunk (``reason`` and totals), then close.

        Parameters
        ----------
        reason : str
            Why the capture stopped, in words (e.g. ``"duration limit reached"``).
        **summary
            Further JSON-serialisable totals stored in the ``NOTE`` chunk.
        """
        if self.closed:
            return
        self._flush_events()
        self._write_chunk(b"NOTE", self._note(reason, summary))
        self._file.close()
        self.closed = True

    def _note(self, reason, summary):
        note = {"reason": reason, "events": self.n_written,
                "lost_overflow": self.n_lost["overflow"], "lost_link": self.n_lost["link"],
                "closed": datetime.datetime.now(datetime.timezone.utc).isoformat()}
        note.update(summary)
        note["metadata"] = self.metadata        # far from META: a third copy
        return json.dumps(note, sort_keys=True, default=str).encode()

    def abandon(self):
        """Close without a ``NOTE`` chunk, as a crash would (also used when finalising failed,
        e.g. on a full disk: the chunks already written stay readable)."""
        if not self.closed:
            self.closed = True
            try:
                self._file.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.close(reason=f"error: {exc_type.__name__}: {exc}")


class Damage(NamedTuple):
    """Unreadable bytes in the middle of a capture file: ``[offset, end)``, skipped by the reader
    (``end`` is where the next valid chunk begins). ``claimed_events`` is the event count the
    first damaged chunk's header states when that header is self-consistent, else ``None``."""
    offset: int
    end: int
    reason: str
    claimed_events: int | None


def _chunk_problem(buffer, view, offset, size, check_crc):
    """Why no valid chunk starts at ``offset`` (``None`` if one does), and its end."""
    if size - offset < CHUNK_HEADER_SIZE:
        return (f"truncated chunk header at offset {offset} ({size - offset} bytes left)",
                None)
    kind, length = _CHUNK_HEADER.unpack_from(buffer, offset)
    if length > MAX_CHUNK_PAYLOAD:
        return f"implausible chunk length {length} at offset {offset}", None
    end = offset + CHUNK_HEADER_SIZE + length + CRC_SIZE
    if end > size:
        return (f"truncated {kind!r} chunk at offset {offset}: needs {end - offset} bytes, "
                f"{size - offset} present"), None
    if check_crc:
        (stored,) = _CRC.unpack_from(buffer, end - CRC_SIZE)
        if zlib.crc32(view[offset:end - CRC_SIZE]) != stored:
            return f"bad CRC in {kind!r} chunk at offset {offset}", None
    return None, end


def _claimed_events(buffer, offset, size):
    """Event count an ``EVTS`` chunk header at ``offset`` claims, if self-consistent."""
    if size - offset < CHUNK_HEADER_SIZE + _EVTS_HEADER.size:
        return None
    kind, length = _CHUNK_HEADER.unpack_from(buffer, offset)
    if kind != b"EVTS":
        return None
    count, data_offset = _EVTS_HEADER.unpack_from(buffer, offset + CHUNK_HEADER_SIZE)
    if data_offset < _EVTS_HEADER.size or data_offset + 10 * count != length:
        return None
    return int(count)


def _resync(buffer, view, start, size, check_crc):
    """Offset of the first valid chunk of a known type at or after ``start``, or ``None``."""
    positions = {kind: buffer.find(kind, start) for kind in KNOWN_CHUNKS}
    while True:
        live = [(pos, kind) for kind, pos in positions.items() if pos >= 0]
        if not live:
            return None
        pos, kind = min(live)
        if _chunk_problem(buffer, view, pos, size, check_crc)[0] is None:
            return pos
        positions[kind] = buffer.find(kind, pos + 1)


def scan_chunks(buffer, *, check_crc=True, resync=True):
    """Walk the chunks of a capture file held in ``buffer`` (bytes or mmap).

    A chunk that is not valid (bad CRC, implausible length, cut short) does not end the walk:
    the reader resynchronises at the next offset where a valid chunk of a known type begins (its
    4-character type, a length inside the file and a matching CRC), and records the skipped
    bytes as a :class:`Damage`. Only when no valid chunk follows does the walk stop (a truncated
    tail, as a kill during a write leaves it).

    Returns
    -------
    chunks : list of Chunk
        Every complete chunk with a good CRC.
    problem : str or None
        Why the walk stopped before the end of the buffer (the tail is unreadable), or ``None``.
    end : int
        File offset just after the last good chunk.
    damage : list of Damage
        Skipped regions followed by valid chunks (empty with ``resync=False``, which stops at
        the first bad chunk).
    """
    size = len(buffer)
    if bytes(buffer[:min(size, len(MAGIC))]) != MAGIC[:min(size, len(MAGIC))]:
        raise CaptureFileError("not a latscope capture file (bad magic)")
    if size < HEADER_SIZE:
        raise CaptureFileError(f"not a latscope capture file (only {size} bytes)")
    magic, major, minor, _flags = _HEADER.unpack_from(buffer, 0)
    if magic != MAGIC:
        raise CaptureFileError("not a latscope capture file (bad magic)")
    if major > FORMAT_MAJOR:
        raise CaptureFileError(f"capture format {major}.{minor} is newer than this latscope "
                               f"understands ({FORMAT_MAJOR}.{FORMAT_MINOR}); upgrade latscope")
    view = memoryview(buffer)
    chunks, offset, problem, damage = [], HEADER_SIZE, None, []
    end_good = offset
    try:
        while offset < size:
            reason, end = _chunk_problem(buffer, view, offset, size, check_crc)
            if reason is None:
                kind, length = _CHUNK_HEADER.unpack_from(buffer, offset)
                chunks.append(Chunk(bytes(kind), offset + CHUNK_HEADER_SIZE, length))
                offset = end_good = end
                continue
            found = _resync(buffer, view, offset + 1, size, check_crc) if resync else None
            if found is None:
                problem = reason
                break
            damage.append(Damage(offset, found, reason, _claimed_events(buffer, offset, size)))
            offset = found
    finally:
        view.release()
    return chunks, problem, end_good, damage


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
            _, major, minor, _ = _HEADER.unpack_from(self._mm, 0) if size >= HEADER_SIZE else \
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
        # amaranth (the layouts the dtypes come from): only frame captures need it
        from latscope.gateware.codec import COUNTER_DTYPE, FRAME_DTYPE, HEADER_MAX
        if chunk.type == b"FCNT":
            if chunk.length % COUNTER_DTYPE.itemsize:
                self.problems.append(f"FCNT chunk at {chunk.offset} has a partial record")
                return False
            self._fcnt.append(np.frombuffer(self._mm, COUNTER_DTYPE,
                                            chunk.length // COUNTER_DTYPE.itemsize, chunk.offset))
            return True
        if chunk.length >= _FRMS_HEADER.size:
            n, width = _FRMS_HEADER.unpack_from(self._mm, chunk.offset)
            if width <= HEADER_MAX and \
                    chunk.length == _FRMS_HEADER.size + n * (FRAME_DTYPE.itemsize + width):
                start = chunk.offset + _FRMS_HEADER.size
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
        # amaranth (the layouts the dtypes come from): only frame captures need it
        from latscope.capture.files.frames import unwrap_frame_index
        from latscope.gateware.codec import HEADER_MAX, empty_frames
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

    def frame_counters(self):
        """Every COUNTERS record (``gateware.codec.COUNTER_DTYPE``), in stream order."""
        from latscope.gateware.codec import empty_counters  # amaranth: frame captures only
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
        if chunk.length < _EVTS_HEADER.size:
            self.problems.append(f"EVTS chunk at {chunk.offset} is shorter than its header")
            return None
        count, data_offset = _EVTS_HEADER.unpack_from(self._mm, chunk.offset)
        if data_offset < _EVTS_HEADER.size or data_offset + 10 * count != chunk.length:
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


def write_synthetic(path, n_events, *, chunk_events=1 << 20, seed=0):
    """Write a capture of ``n_events`` random events chunk by chunk (bounded memory), for
    benchmarks and tests of large files. Returns the file size in bytes."""
    rng = np.random.default_rng(seed)
    last = 0
    with CaptureWriter(path, {"tick_hz": 200e6, "label": "synthetic", "channels": {"0": "rx_dv"}},
                       chunk_events=chunk_events, fsync=False, overwrite=True) as writer:
        for start in range(0, n_events, chunk_events):
            n = min(chunk_events, n_events - start)
            time = last + np.cumsum(rng.integers(1, 400, n, dtype=np.int64))
            last = int(time[-1])
            writer.append_events(time, rng.integers(0, 8, n, dtype=np.uint8),
                                 rng.integers(0, 2, n, dtype=np.uint8))
    return os.path.getsize(path)
