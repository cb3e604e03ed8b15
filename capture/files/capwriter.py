"""Writing capture files (``.lsc``): durable, append-only, one fsync per chunk.

The format is specified in ``docs/capture-format.md`` (framing and constants in :mod:`.chunks`).
:class:`CaptureWriter` fsyncs every chunk it completes, so a capture killed at any instant opens
with every complete chunk; on a failed write (a full disk) it cuts the file back to its last
complete chunk and finalises it when there is room (:class:`CaptureWriteError`). It writes the
metadata three times (``META``, ``METC`` and the closing ``NOTE``'s ``metadata``) so that one
damaged copy does not lose the file. Ground truth written by the simulated bench goes to the side
file :func:`~latscope.capture.files.chunks.truth_path` (:meth:`CaptureWriter.attach_truth`).
"""

import datetime
import errno
import json
import os
import time as _time

import numpy as np

from latscope import LatscopeError, __version__
from latscope.capture.events import Events, LossRecord
from latscope.capture.files.chunks import (
    CHUNK_HEADER_SIZE,
    EVTS_HEADER,
    FILE_HEADER,
    FORMAT_MAJOR,
    FORMAT_MINOR,
    FRMS_HEADER,
    HBT_DTYPE,
    LOSS_CAUSES,
    LOSS_DTYPE,
    MAGIC,
    frame_chunk,
    truth_path,
)
from latscope.capture.files.outputs import replacing

__all__ = ["CaptureWriter", "CaptureWriteError", "write_synthetic"]

_CAUSE_CODES = {name: code for code, name in LOSS_CAUSES.items()}


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
        Seconds after which buffered events and heartbeats are written even if fewer than
        ``chunk_events`` events are buffered.
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
        self._heartbeats = []       # HBT_DTYPE arrays not yet written
        self._last_time = None
        self._last_flush = _time.monotonic()
        self._truth = {}
        self.n_events = 0
        self.n_written = 0          # events in EVTS chunks already in the file
        self.n_lost = {"overflow": 0, "link": 0}
        self.n_chunks = 0
        self.closed = False
        try:
            self._write(FILE_HEADER.pack(MAGIC, FORMAT_MAJOR, FORMAT_MINOR, 0))
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
            self._write(frame_chunk(kind, payload))
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
                self._write(frame_chunk(b"NOTE", note))
                os.fsync(fd)
                finalised = True
            except OSError:
                os.ftruncate(fd, start)                     # no room even for that
        except OSError:
            pass                # the reader skips a partial tail; nothing more can be done
        self._buffers.clear()
        self._buffered = 0
        self._heartbeats.clear()
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
        self._flush_when_due()

    def _flush_when_due(self):
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
        self._flush_buffered()
        self._write_chunk(b"LOSS", array.tobytes())

    def append_heartbeats(self, heartbeats):
        """Store heartbeats: a structured array with the fields of :data:`HBT_DTYPE`
        (missing ones are zero) or a sequence of objects/dicts with those fields.

        They are buffered with the events and written as one ``HBT `` chunk after the events'
        ``EVTS`` chunk (when the events are, at the latest ``flush_interval`` seconds later)."""
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
            self._heartbeats.append(array)
        self._flush_when_due()

    def append_frames(self, records, headers=None):
        """Store FRAME records (a ``gateware.codec.FRAME_DTYPE`` array) and their kept header
        bytes (an ``(n, k)`` uint8 array, zero past each record's ``header_len``)."""
        from latscope.gateware.codec import FRAME_DTYPE  # why: amaranth, frame captures only
        self._check_open()
        records = np.ascontiguousarray(records, FRAME_DTYPE)
        if not len(records):
            return
        width = int(records["header_len"].max())
        kept = np.zeros((len(records), width), np.uint8)
        if width and headers is not None:
            kept[:] = np.asarray(headers, np.uint8)[:, :width]
        self._flush_buffered()
        self._write_chunk(b"FRMS", FRMS_HEADER.pack(len(records), width) + records.tobytes()
                          + kept.tobytes())

    def append_frame_counters(self, counters):
        """Store COUNTERS records (a ``gateware.codec.COUNTER_DTYPE`` array)."""
        from latscope.gateware.codec import COUNTER_DTYPE  # why: amaranth, frame captures only
        self._check_open()
        counters = np.ascontiguousarray(counters, COUNTER_DTYPE)
        if len(counters):
            self._flush_buffered()
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
        self._flush_buffered()
        self._write_chunk(kind, bytes(payload))

    def _flush_buffered(self):
        """Write the buffered events (an ``EVTS`` chunk), then the buffered heartbeats (an
        ``HBT `` chunk)."""
        if self._buffered:
            self._write_events()
        if self._heartbeats:
            array = np.concatenate(self._heartbeats)
            self._heartbeats.clear()
            self._write_chunk(b"HBT ", array.tobytes())

    def _write_events(self):
        time = np.concatenate([b.time for b in self._buffers])
        channel = np.concatenate([b.channel for b in self._buffers])
        rising = np.concatenate([b.rising for b in self._buffers])
        self._buffers.clear()
        self._buffered = 0
        # Choose the offset of the time column so its file offset is a multiple of 8.
        payload_start = self._offset + CHUNK_HEADER_SIZE
        data_offset = EVTS_HEADER.size + (-(payload_start + EVTS_HEADER.size)) % 8
        head = EVTS_HEADER.pack(len(time), data_offset)
        payload = b"".join([head, bytes(data_offset - len(head)), time.tobytes(),
                            channel.tobytes(), rising.tobytes()])
        self._write_chunk(b"EVTS", payload)
        self.n_written += len(time)

    def flush(self):
        """Write buffered events and heartbeats as chunks, each fsynced."""
        self._check_open()
        self._flush_buffered()
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
        self._flush_buffered()
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
