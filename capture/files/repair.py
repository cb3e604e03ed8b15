"""Rebuild a valid capture file from every intact chunk of a damaged one.

The reader already reads a damaged capture (it skips a damaged region and resumes at the next
valid chunk; a damaged ``META`` is read from its copies), but the damage stays in the file and
is reported by every reader. :func:`repair` writes a new file with the same content minus the
damage: the metadata from the first readable copy, every intact chunk in file order (``EVTS``
re-laid out for the new offsets; the others copied byte for byte), one loss record with cause
``"damage"`` (format 1.2) per skipped region so analysis still never pairs across it, and the
``NOTE`` when the original had one (a capture that was never finalised stays so). The new file
verifies as intact; its ``META`` says it was repaired, from which file and how.

>>> import os, pathlib, tempfile
>>> from latscope.capture.files.capfile import CaptureWriter, open_capture
>>> folder = tempfile.mkdtemp()
>>> path = pathlib.Path(folder, "c.lsc")
>>> with CaptureWriter(path, {"tick_hz": 1e9}, fsync=False) as w:
...     w.append_events([1, 2], [0, 0], [1, 0])
>>> data = bytearray(path.read_bytes()); data[40] ^= 1      # a bit of META
>>> _ = path.write_bytes(data)
>>> summary = repair(path, os.path.join(folder, "fixed.lsc"))
>>> summary.metadata_from, summary.events, summary.regions
('METC', 2, 1)
>>> with open_capture(os.path.join(folder, "fixed.lsc")) as cap:
...     cap.problems, cap.metadata_from, cap.events().time.tolist()
([], 'META', [1, 2])
"""

import dataclasses
import os

from latscope.capture.files.capfile import (
    FORMAT_MAJOR,
    FORMAT_MINOR,
    CaptureWriter,
    LossRecord,
    open_capture,
)
from latscope.capture.files.outputs import replacing

__all__ = ["repair", "RepairSummary"]

#: Chunks rebuilt from what the reader parsed rather than copied.
_REBUILT = (b"META", b"METC", b"NOTE", b"EVTS")


@dataclasses.dataclass
class RepairSummary:
    """What :func:`repair` did."""
    source: str
    output: str
    #: which copy of the metadata was used (``"META"``, ``"METC"`` or ``"NOTE"``)
    metadata_from: str
    #: events in the new file (every event of every intact chunk)
    events: int
    #: chunks copied or rebuilt
    chunks: int
    #: damaged regions skipped, each now a loss record with cause ``"damage"``
    regions: int
    skipped_bytes: int
    #: why the tail of the original was unreadable, or ``None``
    truncated: str | None
    finalised: bool


def repair(in_path, out_path, *, force=False):
    """Write a valid capture to ``out_path`` from every intact chunk of ``in_path``.

    Parameters
    ----------
    in_path : str or os.PathLike
        A capture file with at least one readable copy of its metadata.
    out_path : str or os.PathLike
        The capture to write, under :mod:`latscope.capture.files.outputs`'s policy: it appears only
        when complete and may never be ``in_path`` itself.
    force : bool
        Replace an existing ``out_path``.

    Returns
    -------
    RepairSummary

    Raises
    ------
    latscope.capture.files.capfile.CaptureFileError
        ``in_path`` is not a capture, or no copy of its metadata is readable.
    """
    with open_capture(in_path) as cap:
        meta = dict(cap.metadata)
        meta["format"] = f"latscope-capture {FORMAT_MAJOR}.{FORMAT_MINOR}"
        meta["repaired"] = {"from": os.path.basename(cap.path),
                            "metadata_from": cap.metadata_from,
                            "regions": len(cap.damage),
                            "skipped_bytes": sum(d.end - d.offset for d in cap.damage),
                            "truncated": cap.truncated}
        regions = sorted(cap.damage, key=lambda d: d.offset)
        with replacing(out_path, [in_path], force=force, allow_stdout=False) as temp:
            writer = CaptureWriter(temp, meta, fsync=False, overwrite=True,
                                   chunk_events=1 << 62, flush_interval=float("inf"))
            try:
                copied = _copy(cap, writer, list(regions))
                if cap.note is not None:
                    note = {k: v for k, v in cap.note.items()
                            if k not in ("metadata", "closed", "reason", "events")}
                    writer.close(reason=cap.note.get("reason", "closed"), **note)
                else:
                    writer.flush()
                    writer.abandon()         # it was never finalised; the copy is not either
            except BaseException:
                writer.abandon()
                raise
        return RepairSummary(source=cap.path, output=os.fspath(out_path),
                             metadata_from=cap.metadata_from, events=writer.n_written,
                             chunks=copied, regions=len(regions),
                             skipped_bytes=sum(d.end - d.offset for d in regions),
                             truncated=cap.truncated, finalised=cap.note is not None)


def _copy(cap, writer, regions):
    """Every intact chunk of ``cap`` into ``writer`` in file order, with one ``damage`` loss
    record per region in ``regions`` (from the last event before it to the first after it, the
    reader's own rule). Returns the number of chunks written."""
    copied = 0
    last = None                 # time of the last event written
    pending = []                # regions passed since: (claimed events)
    for chunk in cap.chunks:
        while regions and regions[0].offset < chunk.offset:
            pending.append(regions.pop(0).claimed_events or 0)
        if chunk.type == b"EVTS":
            events = cap.events_of(chunk)
            if events is None:
                continue
            if len(events.time):
                first = int(events.time[0])
                for claimed in pending:
                    begin = last if last is not None else first
                    writer.append_loss(LossRecord(begin, first - begin, claimed, "damage"))
                pending = []
                last = int(events.time[-1])
            writer.append_events(events.time, events.channel, events.rising)
            writer.flush()              # the original's chunk boundaries
            copied += 1
        elif chunk.type not in _REBUILT:
            writer.append_chunk(chunk.type, cap.payload(chunk))
            copied += 1
    pending += [d.claimed_events or 0 for d in regions]
    if last is not None:
        for claimed in pending:
            writer.append_loss(LossRecord(last, 0, claimed, "damage"))
    return copied
