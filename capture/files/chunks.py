"""The framing of capture files (``.lsc``): format constants, record dtypes and the chunk walker.

The format is specified in ``docs/capture-format.md``; this module, :mod:`.capwriter` (the
writer) and :mod:`.capfile` (the reader) are its only implementation. A file is a 16-byte header
followed by chunks ``[type 4cc][length u64][payload][crc32 u32]``: ``META`` (JSON metadata, always
first), ``METC`` (a copy of it, format 1.2), ``EVTS`` (event columns laid out for zero-copy
``np.frombuffer``), ``LOSS`` (loss records), ``HBT `` (heartbeats), ``FRMS``/``FCNT`` (frame
records and class counters of frame-aware capture, format 1.1), ``NOTE`` (end-of-capture summary,
JSON). :func:`scan_chunks` walks the chunks and resynchronises after a damaged one at the next
valid one, reporting the skipped bytes as :class:`Damage`.
"""

import os
import struct
import zlib
from typing import NamedTuple

import numpy as np

from latscope import LatscopeError

__all__ = [
    "MAGIC", "FORMAT_MAJOR", "FORMAT_MINOR", "HEADER_SIZE", "FILE_HEADER", "CHUNK_HEADER_SIZE",
    "CRC_SIZE", "EVTS_HEADER", "FRMS_HEADER", "MAX_CHUNK_PAYLOAD", "LOSS_DTYPE", "LOSS_CAUSES",
    "HBT_DTYPE", "KNOWN_CHUNKS", "CaptureFileError", "Chunk", "Damage", "truth_path",
    "frame_chunk", "scan_chunks",
]

#: First 8 bytes of every capture file. The high byte, CR LF and Ctrl-Z catch text-mode
#: mangling and ``type`` on a terminal, as in PNG.
MAGIC = b"\x89LSC\r\n\x1a\n"
#: Readers refuse a file whose major version is greater than theirs (see the version rule).
FORMAT_MAJOR = 1
#: Minor versions only add things an older reader may skip (new chunk types, new JSON keys).
FORMAT_MINOR = 2
HEADER_SIZE = 16
FILE_HEADER = struct.Struct("<8sHHI")        # magic, major, minor, flags (0)
CHUNK_HEADER_SIZE = 12
_CHUNK_HEADER = struct.Struct("<4sQ")        # type, payload length
CRC_SIZE = 4
_CRC = struct.Struct("<I")
EVTS_HEADER = struct.Struct("<II")           # event count, offset of the time column in payload
#: Largest payload a reader accepts; a length above it is treated as corruption, not allocated.
MAX_CHUNK_PAYLOAD = 1 << 40

#: ``LOSS`` chunk payload: an array of these records (32 bytes each, little-endian).
LOSS_DTYPE = np.dtype([("first_time", "<i8"), ("span", "<i8"), ("lost", "<u8"),
                       ("cause", "u1"), ("reserved", "V7")])
#: Cause codes; 3 (format 1.2) marks events lost to a damaged region of the file a repaired
#: capture was rebuilt from (:func:`latscope.capture.files.repair.repair`).
LOSS_CAUSES = {1: "overflow", 2: "link", 3: "damage"}

#: ``HBT `` chunk payload: an array of these records (32 bytes each, little-endian): the wire's
#: Heartbeat record (``gateware.codec.HEARTBEAT_DTYPE``) field for field at the same offsets, with
#: ``time`` signed like every time in the file, and 4 reserved bytes. Written out rather than
#: derived so that reading a file needs no gateware layouts; ``capture/tests/test_capfile.py``
#: ties it to the wire record.
HBT_DTYPE = np.dtype([("time", "<i8"), ("events", "<u8"), ("lost", "<u8"),
                      ("fifo_high_water", "<u2"), ("status", "u1"), ("epoch", "u1"),
                      ("reserved", "V4")])

KNOWN_CHUNKS = (b"META", b"METC", b"EVTS", b"LOSS", b"HBT ", b"NOTE", b"FRMS", b"FCNT")
FRMS_HEADER = struct.Struct("<II")           # record count, kept header bytes per record


class CaptureFileError(LatscopeError):
    """A file is not a capture file, or is of a newer major version than this reader."""


class Chunk(NamedTuple):
    """One chunk as found in a file: its type, the file offset of its payload, payload length."""
    type: bytes
    offset: int
    length: int


def truth_path(path):
    """Path of the ground-truth side file of the capture at ``path``: ``path + ".truth.npz"``."""
    return os.fspath(path) + ".truth.npz"


def frame_chunk(kind, payload):
    """The bytes of one chunk: its header (``kind``, payload length), ``payload``, and the CRC-32
    of both."""
    header = _CHUNK_HEADER.pack(kind, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(header))
    return header + payload + _CRC.pack(crc)


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
    if size - offset < CHUNK_HEADER_SIZE + EVTS_HEADER.size:
        return None
    kind, length = _CHUNK_HEADER.unpack_from(buffer, offset)
    if kind != b"EVTS":
        return None
    count, data_offset = EVTS_HEADER.unpack_from(buffer, offset + CHUNK_HEADER_SIZE)
    if data_offset < EVTS_HEADER.size or data_offset + 10 * count != length:
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
    magic, major, minor, _flags = FILE_HEADER.unpack_from(buffer, 0)
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

