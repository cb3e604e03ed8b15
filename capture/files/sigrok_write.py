"""Writing sigrok session files (``.sr``): :class:`SrWriter`, :func:`export_sr`, the benchmark.

# Ref: libsigrok 0.5.2 ``src/session_file.c`` (session format version 2), ``docs/sigrok.md``.

The file layout is described in :mod:`latscope.capture.files.sigrok`, whose reader opens what this
module writes. :func:`export_sr` writes a window of a capture sample-exactly; the benchmark
(:func:`bench_import`) writes a large sparse file and times
:func:`~latscope.capture.files.sigrok_import.import_sr` on it.
"""

import dataclasses
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from fractions import Fraction

import numpy as np

from latscope import LatscopeError, __version__
from latscope.capture.files.outputs import PendingOutput
from latscope.capture.files.provenance import provenance, with_step
from latscope.capture.files.sigrok import SAMPLE_DTYPES

__all__ = ["SrWriter", "ExportSummary", "export_sr", "make_sparse_sr", "peak_rss",
           "bench_import", "WRITTEN_SIGROK_VERSION", "sample_index"]

#: ``sigrok version`` written into the metadata: the libsigrok release whose format we write.
WRITTEN_SIGROK_VERSION = "0.5.2"


def _unitsize_for(count):
    needed = max(1, (count + 7) // 8)
    return next(size for size in (1, 2, 4, 8) if size >= needed)


class SrWriter:
    """Write a sigrok session file (format version 2) chunk by chunk.

    Parameters
    ----------
    path : str or os.PathLike
    samplerate : int
        Samples per second (written as a whole number of Hz).
    probe_names : sequence of str
        Probe ``k`` (bit ``k``) gets name ``probe_names[k]``; at most 64.
    sample_offset : int, optional
        Written as ``[latscope] sample offset`` (ignored by sigrok): the index, in the capture's
        time base at this sample rate, of this file's first sample.
    markers : dict, optional
        Marker meanings of probes (``{"m3": "tx.xmit"}``), written as ``[latscope] marker
        m3=tx.xmit`` (ignored by sigrok) so an import gets them back.
    chunk_samples : int
        Samples per ``logic-1-N`` member.
    provenance : dict, optional
        What the samples are and where they came from (:mod:`latscope.capture.files.provenance`),
        written as ``[latscope] provenance={json}`` (ignored by sigrok) so an import gets it back.
    inputs : str, os.PathLike or iterable of them
        Files the samples come from: ``path`` may not be one of them (see
        :mod:`latscope.capture.files.outputs`, whose policy this writer follows: the file appears
        under ``path`` only when :meth:`close` completes).
    force : bool
        Replace an existing ``path``.

    Notes
    -----
    The metadata keys are written in the order libsigrok 0.5.2 writes and requires:
    ``capturefile``, ``total probes``, ``samplerate``, ``total analog``, ``probeN``, ``unitsize``.
    """

    def __init__(self, path, samplerate, probe_names, *, sample_offset=None, markers=None,
                 chunk_samples=1 << 22, provenance=None, inputs=(), force=False):
        names = list(probe_names)
        if not 1 <= len(names) <= 64:
            raise ValueError(f"A session file holds 1 to 64 probes, not {len(names)}")
        for name in names:
            if not isinstance(name, str) or not name.strip() or name != name.strip() or \
                    any(ord(c) < 32 for c in name) or "[" in name:
                raise ValueError(f"Probe name {name!r} cannot be stored in sigrok metadata")
        if isinstance(samplerate, bool) or not isinstance(samplerate, int) or samplerate < 1:
            raise ValueError(f"Sample rate must be a positive integer (Hz), not {samplerate!r}")
        if not isinstance(chunk_samples, int) or chunk_samples < 1:
            raise ValueError(f"chunk_samples must be a positive integer, not {chunk_samples!r}")
        self.path = os.fspath(path)
        self.samplerate = samplerate
        self.names = names
        self.unitsize = _unitsize_for(len(names))
        self.dtype = np.dtype(SAMPLE_DTYPES[self.unitsize])
        self.chunk_samples = chunk_samples
        self.samples = 0
        self._pending = []
        self._pending_count = 0
        self._chunk = 0
        self._output = PendingOutput(self.path, inputs, force=force,
                                     allow_stdout=False)
        try:
            self._zip = zipfile.ZipFile(self._output.path, "w", zipfile.ZIP_DEFLATED,
                                        compresslevel=1)
        except OSError as error:
            self._output.discard()
            raise LatscopeError(f"cannot create {self.path}: {error.strerror}") from None
        lines = [f"# written by latscope {__version__}", "[global]",
                 f"sigrok version={WRITTEN_SIGROK_VERSION}", "", "[device 1]",
                 "capturefile=logic-1", f"total probes={len(names)}",
                 f"samplerate={samplerate}", "total analog=0"]
        lines += [f"probe{k + 1}={name}" for k, name in enumerate(names)]
        lines += [f"unitsize={self.unitsize}", ""]
        extra = [f"sample offset={int(sample_offset)}"] if sample_offset is not None else []
        for role, meaning in sorted((markers or {}).items()):
            if role in names and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", str(meaning)):
                extra.append(f"marker {role}={meaning}")
        if provenance is not None:       # one line of JSON: GKeyFile values end at the newline
            extra.append(f"provenance={json.dumps(provenance, sort_keys=True, ensure_ascii=False)}")
        if extra:
            lines += ["[latscope]", *extra, ""]
        self._zip.writestr("version", b"2")
        self._zip.writestr("metadata", "\n".join(lines).encode())

    def append(self, samples):
        """Append samples (integers whose bit ``k`` is probe ``k``)."""
        samples = np.ascontiguousarray(samples, dtype=self.dtype)
        while len(samples):
            take = min(len(samples), self.chunk_samples - self._pending_count)
            self._pending.append(samples[:take])
            self._pending_count += take
            samples = samples[take:]
            if self._pending_count == self.chunk_samples:
                self._flush()

    def _flush(self):
        if not self._pending_count:
            return
        self._chunk += 1
        with self._zip.open(f"logic-1-{self._chunk}", "w") as handle:
            for part in self._pending:
                handle.write(part.tobytes())
        self.samples += self._pending_count
        self._pending, self._pending_count = [], 0

    def close(self):
        """Write the last chunk and the zip directory, and put the file in place."""
        try:
            self._flush()
            self._zip.close()
        except BaseException:
            self.abandon()
            raise
        self._output.commit()

    def abandon(self):
        """Close and remove a half-written file; a file that was at ``path`` stays."""
        try:
            self._zip.close()
        except (OSError, ValueError):
            pass                        # the file is discarded anyway
        finally:
            self._output.discard()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:
            self.abandon()


def sample_index(delta, samplerate, tick_hz):
    """``ceil(delta * samplerate / tick_hz)`` exactly, for int64 ``delta >= 0``: the first sample
    at or after each tick offset (an edge exactly on a sample instant is seen at that sample)."""
    if tick_hz == samplerate:
        return delta.astype(np.int64)
    ratio = Fraction(samplerate) / Fraction(tick_hz)      # samples per tick, a / b
    a, b = ratio.numerator, ratio.denominator
    if a * b < (1 << 62):
        # delta = q b + r  ->  ceil(delta a / b) = q a + ceil(r a / b), with r a < a b: no overflow
        q, r = np.divmod(delta.astype(np.int64), b)
        return q * a - ((-r * a) // b)
    return np.array([-((-int(d) * a) // b) for d in delta.tolist()], np.int64)


@dataclasses.dataclass
class ExportSummary:
    """What an export wrote."""
    output: str
    format: str
    start_tick: int
    stop_tick: int
    events: int
    samples: int | None
    samplerate: int | None
    channels: list
    hidden_edges: int
    warnings: list


def _levels_to_samples(levels, where, channel, rising, length, dtype):
    """Packed samples of one block. ``levels`` (int8 per channel, updated in place) are the levels
    before the block; ``where`` the sample offsets of the block's events, sorted. Returns
    ``(samples, hidden)`` where ``hidden`` counts edges the samples cannot show."""
    packed = 0
    for k, level in enumerate(levels.tolist()):
        packed |= level << k
    samples = np.full(length, packed, dtype)
    hidden = 0
    for k in np.unique(channel).tolist():
        select = channel == k
        at = where[select]
        new = rising[select].astype(np.int8)
        before = np.concatenate((levels[k:k + 1], new[:-1]))
        delta = new - before                        # -1, 0 or +1; 0: the level did not change
        hidden += int(np.count_nonzero(delta == 0)) + int(np.count_nonzero(at[1:] == at[:-1]))
        steps = np.zeros(length, np.int8)
        np.add.at(steps, at, delta)
        level = (np.cumsum(steps, dtype=np.int8) + levels[k]).astype(dtype)
        samples = (samples & dtype.type(~(1 << k) & ((1 << (8 * dtype.itemsize)) - 1))) | \
            (level << dtype.type(k))
        levels[k] = new[-1]
    return samples, hidden


def export_sr(window, output, samplerate, *, max_samples=10**9, force=False,
              progress=None):
    """Write a capture window as a sigrok session file, sample-exactly.

    Parameters
    ----------
    window : latscope.capture.files.interop.Window
        The events to export, their channels, initial levels and the tick range.
    output : str or os.PathLike
    samplerate : int
        Samples per second of the file. Sample ``n`` is at ``start + n / samplerate``; an edge at
        tick ``t`` shows first at sample ``ceil((t - start) * samplerate / tick_hz)``.
    max_samples : int
        Refuse windows needing more samples (PulseView holds every sample in memory).
    force : bool
        Replace an existing ``output`` (never the window's capture itself).
    progress : callable, optional

    Returns
    -------
    ExportSummary
        ``hidden_edges`` counts edges a sigrok viewer cannot show: two edges of one channel on one
        sample, an edge that does not change the level (a capture with only rising edges
        enabled), or an edge exactly at the window start (sigrok has no level before sample 0).
    """
    tick_hz = window.tick_hz
    span = window.stop - window.start
    if span < 1:
        raise LatscopeError("the export window is empty")
    ratio = Fraction(samplerate) / tick_hz
    count = (span - 1) * ratio
    count = int(-(-count.numerator // count.denominator)) + 1
    if count > max_samples:
        raise LatscopeError(
            f"the window needs {count:,} samples at {samplerate:,} Hz, above --max-samples "
            f"{max_samples:,}; narrow it with --from/--to, lower --samplerate, or raise "
            f"--max-samples (PulseView holds about 1.07 x samples x unitsize bytes in memory)")
    offset = window.start * ratio
    sample_offset = int(offset) if offset.denominator == 1 else None
    warnings = list(window.warnings)
    if sample_offset is None:
        warnings.append("the window start is not on a sample instant of the capture's time "
                        "base at this rate; importing the file gives times from 0")
    names = list(window.names)
    levels = np.array(window.initial, np.int8)
    hidden = window.absorbed
    block = 1 << 20
    if len(names) > 64:
        raise LatscopeError(f"a sigrok file holds at most 64 channels, not {len(names)}; choose "
                            f"some with --channels")
    try:
        writer = SrWriter(output, samplerate, names, sample_offset=sample_offset,
                          markers=window.capture.markers,
                          provenance=with_step(provenance(window.capture.metadata), "export sr",
                                               window.capture.path),
                          inputs=[window.capture.path],
                          force=force)
    except ValueError as error:
        raise LatscopeError(str(error)) from None
    dtype = writer.dtype
    try:
        source = window.blocks()
        buffered = []                   # (sample index, channel, rising) not yet written
        last_index = -1                 # sample index of the last event read so far
        exhausted = False
        base = 0
        while base < count:
            end = min(base + block, count)
            while not exhausted and last_index < end:
                try:
                    time, channel, rising = next(source)
                except StopIteration:
                    exhausted = True
                    break
                if len(time):
                    index = sample_index(time - window.start, samplerate, tick_hz)
                    buffered.append((index, channel, rising))
                    last_index = int(index[-1])
            if buffered:
                index, channel, rising = (np.concatenate(column)
                                          for column in zip(*buffered, strict=True))
                cut = int(np.searchsorted(index, end))
                buffered = [(index[cut:], channel[cut:], rising[cut:])] if cut < len(index) \
                    else []
                index, channel, rising = index[:cut], channel[:cut], rising[:cut]
            else:
                index = np.zeros(0, np.int64)
                channel = np.zeros(0, np.uint8)
                rising = np.zeros(0, bool)
            samples, hidden_here = _levels_to_samples(levels, index - base, channel, rising,
                                                      end - base, dtype)
            hidden += hidden_here
            writer.append(samples)
            base = end
            if progress is not None:
                progress(base, count)
        writer.close()
    except BaseException:
        writer.abandon()
        raise
    if hidden:
        warnings.append(f"{hidden} edge(s) cannot be shown at {samplerate:,} Hz (two edges of a "
                        f"channel on one sample, an edge that does not change the level, or an "
                        f"edge exactly at the window start)")
    return ExportSummary(output=os.fspath(output), format="sr", start_tick=window.start,
                         stop_tick=window.stop, events=window.count, samples=count,
                         samplerate=samplerate, channels=names, hidden_edges=hidden,
                         warnings=warnings)


# --- benchmark -----------------------------------------------------------------------------------
def make_sparse_sr(path, samples, *, period=100_000, probes=8, chunk_samples=1 << 24,
                   samplerate=100_000_000):
    """Write a large, mostly idle session file: probe 0 toggles every ``period`` samples and probe
    ``k`` every ``period * (k + 1)`` (the pattern restarts with every chunk of ``chunk_samples``).
    Used by the benchmark and the bounded-memory test."""
    with SrWriter(path, samplerate, [f"D{k}" for k in range(probes)],
                  chunk_samples=chunk_samples, force=True) as writer:
        n = np.arange(chunk_samples, dtype=np.int64)
        pattern = np.zeros(chunk_samples, writer.dtype)
        for k in range(probes):
            pattern |= (((n // (period * (k + 1))) & 1).astype(writer.dtype) << k)
        done = 0
        while done < samples:
            take = min(chunk_samples, samples - done)
            writer.append(pattern[:take])
            done += take


def peak_rss():
    """Peak resident memory of this process in bytes (``VmHWM`` from ``/proc/self/status``;
    unlike ``ru_maxrss`` it does not inherit the parent's peak across ``exec``)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _timed_child(code):
    """Run ``code`` in a fresh interpreter; return (seconds, peak RSS in bytes)."""
    script = ("import time\nfrom latscope.capture.files.sigrok_write import peak_rss\n"
              "t = time.perf_counter()\n" + code +
              "\nprint(time.perf_counter() - t, peak_rss())")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[-2]), int(out[-1])


def bench_import(quick):
    """Benchmark rows ``(figure, value, unit, note)``: ``latscope import`` of a large sparse
    capture against ``sigrok-cli -O null`` reading the same file, and the importer's peak RSS.

    Parameters
    ----------
    quick : bool
        10^7 samples instead of 10^9.
    """
    samples = 10**7 if quick else 10**9
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sr_path = os.path.join(tmp, "big.sr")
        lsc_path = os.path.join(tmp, "big.lsc")
        make_sparse_sr(sr_path, samples)
        seconds, rss = _timed_child(
            "from latscope.capture.files.sigrok_import import import_sr\n"
            f"import_sr({sr_path!r}, {lsc_path!r}, 'a=D0,b=D1,c=D7', force=True)")
        rows.append(("import .sr -> capture", samples / seconds / 1e6, "Msample/s",
                     f"{samples:.0e} samples, 8 probes, 3 mapped, {seconds:.2f} s"))
        rows.append(("import peak RSS", rss / 2**20, "MiB",
                     f"whole process (Python + NumPy), {samples:.0e} samples"))
        if shutil.which("sigrok-cli"):
            started = time.perf_counter()
            subprocess.run(["sigrok-cli", "-i", sr_path, "-O", "null"], check=True,
                           capture_output=True)
            baseline = time.perf_counter() - started
            rows.append(("sigrok-cli -O null, same file", samples / baseline / 1e6, "Msample/s",
                         f"{baseline:.2f} s; latscope import is {baseline / seconds:.2f}x its "
                         f"speed"))
        else:
            rows.append(("sigrok-cli -O null, same file", float("nan"), "Msample/s",
                         "sigrok-cli not installed"))
    return rows

