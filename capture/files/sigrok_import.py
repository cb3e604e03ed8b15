"""``latscope import`` of a sigrok session file (``.sr``): the edges of mapped probes into a
latscope capture, one tick per sample.

# Ref: libsigrok 0.5.2 ``src/session_file.c`` (session format version 2), ``docs/sigrok.md``.

The file is read by :class:`latscope.capture.files.sigrok.SrReader` (every check before a sample is
decompressed, bounded memory); this module writes what it yields, with the marker meanings and
the provenance a latscope export stored (:mod:`latscope.capture.files.provenance`), under the output
policy (:mod:`latscope.capture.files.outputs`).
"""

import dataclasses
import json
import os
import time as _time

import numpy as np

from latscope.capture.files.capfile import CaptureWriter
from latscope.capture.files.outputs import PendingOutput
from latscope.capture.files.provenance import imported_metadata
from latscope.capture.files.provenance import parse as parse_provenance
from latscope.capture.files.sigrok import (
    SigrokFileError,
    SrReader,
    parse_channel_map,
    sr_markers,
)

__all__ = ["ImportSummary", "import_sr", "sr_provenance"]


def sr_provenance(info):
    """The provenance a latscope export stored (``[latscope] provenance={json}``, see
    :mod:`latscope.capture.files.provenance`), or ``None`` (a file from another tool, or a value
    that is not a provenance object)."""
    text = (info.extra or {}).get("provenance")
    if not text:
        return None
    try:
        return parse_provenance(json.loads(text))
    except ValueError:
        return None


@dataclasses.dataclass
class ImportSummary:
    """What :func:`import_sr` did."""
    source: str
    output: str
    samplerate: int
    samples: int
    events: int
    channels: dict
    warnings: list
    seconds: float


def _joined(blocks):
    """One ``(time, channel, rising)`` block from several, in order."""
    return tuple(np.concatenate(column) for column in zip(*blocks, strict=True))


def import_sr(source, output, mapping=None, *, limits=None, samplerate=None,
              allow_truncated=False, force=False, use_offset=True,
              progress=None):
    """Import a sigrok session file into a latscope capture file.

    Parameters
    ----------
    source : str or os.PathLike
        The ``.sr`` file.
    output : str or os.PathLike
        The capture file to create, under :mod:`latscope.capture.files.outputs`'s policy: it appears
        only when the import completes, and it may never be ``source`` itself.
    mapping : str or list of (str, int), optional
        ``--map`` text (see :func:`parse_channel_map`) or its parsed form. Unmapped probes are
        ignored; by default every named probe is imported under its own name.
    limits : SrLimits, optional
    samplerate : int, optional
        Override (or supply) the file's sample rate.
    allow_truncated : bool
        Drop a partial last sample instead of refusing the file.
    force : bool
        Replace an existing ``output``.
    use_offset : bool
        Add the ``[latscope] sample offset`` of files latscope exported, so their events keep
        their original times.
    progress : callable, optional
        Called as ``progress(samples_done, samples_total)``.

    Returns
    -------
    ImportSummary

    Notes
    -----
    One tick is one sample (``tick_hz`` = sample rate); an event's time is the index of the first
    sample at the new level. Memory is bounded by one block of samples whatever the file size.
    """

    started = _time.monotonic()
    with SrReader(source, limits=limits, samplerate=samplerate,
                  allow_truncated=allow_truncated) as reader:
        info = reader.info
        if info.samplerate is None:
            raise SigrokFileError(f"{info.path}: the metadata has no samplerate; give one with "
                                  f"--samplerate")
        pairs = mapping if isinstance(mapping, list) else parse_channel_map(mapping, info)
        roles = [role for role, _ in pairs]
        for role in sorted({r for r in roles if roles.count(r) > 1}):
            shared = ", ".join(str(bit) for r, bit in pairs if r == role)
            reader.warnings.append(f"probes {shared} are all named {role!r}: their channels "
                                   f"share that name; --map them by index to tell them apart")
        offset = info.sample_offset if use_offset else 0
        markers = sr_markers(info, pairs)
        stored = sr_provenance(info)
        metadata = {
            "tick_hz": info.samplerate,
            "channels": {str(i): role for i, (role, _) in enumerate(pairs)},
            "source": "sigrok",
            "source_file": os.path.basename(info.path),
            **({"markers": markers} if markers is not None else {}),
            "sigrok": {
                "samplerate_hz": info.samplerate,
                "probes": list(info.probes),
                "map": {role: (info.probes[bit] or str(bit)) for role, bit in pairs},
                "unitsize": info.unitsize,
                "samples": info.num_samples,
                "sigrok_version": info.sigrok_version,
                "sample_offset": offset,
            },
        }
        metadata = imported_metadata(metadata, stored, "import", source)
        events = 0
        pending = PendingOutput(output, [source], force=force, allow_stdout=False)
        try:
            writer = CaptureWriter(pending.path, metadata, fsync=False, overwrite=True,
                                   chunk_events=1 << 18, flush_interval=2.0)
        except BaseException:
            pending.discard()
            raise
        try:
            bits = [bit for _, bit in pairs]
            # Edge blocks hold tens of events each: handed to the writer in batches, so its
            # per-call checks and copies are paid once per ~65,000 events, not once per block.
            batch, batched = [], 0
            for block in reader.iter_edges(bits):
                time = block[0]
                if offset:
                    time += offset
                batch.append(block)
                batched += len(time)
                if batched >= 1 << 16:
                    writer.append_events(*_joined(batch))
                    batch, batched = [], 0
                events += len(time)
                if progress is not None:
                    progress(int(time[-1]) - offset, info.num_samples)
            if batch:
                writer.append_events(*_joined(batch))
            initial = reader.initial_levels or []
            levels = {role: level for (role, _), level in zip(pairs, initial, strict=False)}
            writer.close(reason="imported", samples=info.num_samples, initial_levels=levels)
        except BaseException:
            writer.abandon()
            pending.discard()                   # a half-imported capture is no use to anyone
            raise
        pending.commit()
        return ImportSummary(source=info.path, output=os.fspath(output),
                             samplerate=info.samplerate, samples=info.num_samples, events=events,
                             channels={i: role for i, (role, _) in enumerate(pairs)},
                             warnings=list(reader.warnings),
                             seconds=round(_time.monotonic() - started, 3))
