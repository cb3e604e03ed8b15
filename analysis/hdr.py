"""HdrHistogram-style log-linear histogram, vectorised, with ``.hlog`` export through ``hdrh``.

# Ref: HdrHistogram bucket layout (HdrHistogram_py ``hdrh/histogram.py``), log format 1.2.

Values are non-negative integers (ticks). With 3 significant digits each power-of-two range is
split into 1024 linear sub-buckets, so a value's bucket is at most ``value / 1024`` wide: the
relative error of any figure read from the histogram is below :data:`RELATIVE_ERROR` (0.098 %).
The counts array has exactly HdrHistogram's indexing, so exporting is a copy.

>>> import numpy as np

from latscope import LatscopeError
>>> h = LogLinearHistogram()
>>> h.record(np.array([1, 2, 3, 1000, 5000]))
>>> h.total, h.value_at_rank(4), h.lowest_equivalent(5000), h.highest_equivalent(5000)
(5, 1000, 5000, 5003)
"""

import datetime
import math

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.outputs import open_output

__all__ = ["LogLinearHistogram", "RELATIVE_ERROR", "write_hlog", "read_hlog", "write_hlog_for"]

SIGNIFICANT_FIGURES = 3
_SUB_BUCKET_COUNT = 2 ** math.ceil(math.log2(2 * 10 ** SIGNIFICANT_FIGURES))   # 2048
_HALF_MAG = int(math.log2(_SUB_BUCKET_COUNT)) - 1                               # 10
_HALF_COUNT = _SUB_BUCKET_COUNT // 2                                           # 1024
_MASK = _SUB_BUCKET_COUNT - 1
#: Largest relative width of a bucket: every histogram figure is within this fraction.
RELATIVE_ERROR = 1 / _HALF_COUNT
_MAX_VALUE = 2 ** 52          # values stay exact in float64 bit-length arithmetic


class LogLinearHistogram:
    """Counts of non-negative integer values in HdrHistogram's log-linear buckets.

    Parameters
    ----------
    highest : int
        Largest value that can be recorded (larger ones raise ``ValueError``).
    """

    def __init__(self, highest=2 ** 40):
        if not 2 <= highest <= _MAX_VALUE:
            raise ValueError(f"highest must be between 2 and 2**52, not {highest!r}")
        self.highest = int(highest)
        self.bucket_count = 1
        limit = _SUB_BUCKET_COUNT
        while limit <= highest:
            limit <<= 1
            self.bucket_count += 1
        self.counts = np.zeros((self.bucket_count + 1) * _HALF_COUNT, dtype=np.int64)
        self.total = 0

    @staticmethod
    def index_of(values):
        """Counts-array index of each value (vectorised HdrHistogram ``counts_index_for``)."""
        v = np.asarray(values, dtype=np.int64)
        pow2ceiling = np.frexp((v | _MASK).astype(np.float64))[1].astype(np.int64)
        bucket = pow2ceiling - (_HALF_MAG + 1)
        sub = v >> bucket
        return ((bucket + 1) << _HALF_MAG) + sub - _HALF_COUNT

    @staticmethod
    def _bucket_sub(index):
        index = np.asarray(index, dtype=np.int64)
        bucket = (index >> _HALF_MAG) - 1
        sub = (index & (_HALF_COUNT - 1)) + _HALF_COUNT
        low = bucket < 0
        return np.where(low, 0, bucket), np.where(low, sub - _HALF_COUNT, sub)

    @classmethod
    def value_from_index(cls, index):
        """Lowest value of each bucket index."""
        bucket, sub = cls._bucket_sub(index)
        return sub << bucket

    @classmethod
    def lowest_equivalent(cls, values):
        """Lowest value counted in the same bucket as each value."""
        return _like(values, cls.value_from_index(cls.index_of(values)))

    @classmethod
    def highest_equivalent(cls, values):
        """Highest value counted in the same bucket as each value."""
        index = cls.index_of(values)
        bucket, _ = cls._bucket_sub(index)
        return _like(values, cls.value_from_index(index) + (np.int64(1) << bucket) - 1)

    def record(self, values):
        """Count every value of an integer array."""
        v = np.asarray(values, dtype=np.int64)
        if not v.size:
            return
        if v.min() < 0 or v.max() > self.highest:
            raise ValueError(f"values must lie in [0, {self.highest}]")
        idx = self.index_of(v)
        self.counts[:idx.max() + 1] += np.bincount(idx)
        self.total += int(v.size)

    def add(self, other):
        """Add another histogram's counts."""
        n = min(len(self.counts), len(other.counts))
        if other.counts[n:].any():
            raise ValueError("the other histogram holds values above this one's range")
        self.counts[:n] += other.counts[:n]
        self.total += other.total

    def value_at_rank(self, rank, *, edge="high"):
        """Value of the ``rank``-th smallest recorded value (1-based), as the bucket's ``"low"``,
        ``"mid"`` or ``"high"`` equivalent value."""
        ranks = np.atleast_1d(np.asarray(rank, dtype=np.int64))
        if self.total == 0 or ranks.min() < 1 or ranks.max() > self.total:
            raise ValueError(f"rank must be in [1, {self.total}]")
        index = np.searchsorted(np.cumsum(self.counts), ranks, side="left")
        low = self.value_from_index(index)
        bucket, _ = self._bucket_sub(index)
        width = np.int64(1) << bucket
        out = {"low": low, "mid": low + (width - 1) / 2, "high": low + width - 1}[edge]
        return out if np.ndim(rank) else out[0].item()

    def nonzero(self):
        """(lowest value, highest value, count) of every non-empty bucket, as arrays."""
        index = np.flatnonzero(self.counts)
        low = self.value_from_index(index)
        bucket, _ = self._bucket_sub(index)
        return low, low + (np.int64(1) << bucket) - 1, self.counts[index]

    def to_hdrh(self):
        """An ``hdrh.histogram.HdrHistogram`` (lowest 1, 3 significant digits) holding exactly
        these counts in exactly these buckets: the layouts are identical, so each bucket's count
        is recorded at the bucket's lowest value and lands in the same bucket. Nothing is
        re-binned, so the bucket of every value still contains it and every figure read back is
        within :data:`RELATIVE_ERROR`. Record values in the unit the ``.hlog`` is to carry (the
        analysis keeps a histogram of latencies in whole ns for this)."""
        from hdrh.histogram import HdrHistogram
        low, high, count = self.nonzero()
        top = max(int(high.max()) if len(high) else 2, 2)
        hist = HdrHistogram(1, top, SIGNIFICANT_FIGURES)
        for lo, c in zip(low.tolist(), count.tolist(), strict=True):
            hist.record_value(int(lo), int(c))
        return hist


def _like(values, out):
    return out if np.ndim(values) else int(out)


def write_hlog(path, histograms, *, comment=None, inputs=(), force=False):
    """Write histograms in HdrHistogram's ``.hlog`` interval log format (version 1.3, with tags).

    Parameters
    ----------
    path : str or Path
        Written under :mod:`latscope.capture.files.outputs`'s policy: complete or not at all,
        ``"-"`` for standard output.
    histograms : list of (tag, start_s, end_s, hdrh HdrHistogram)
        One interval line each; ``tag`` names the measurement (``Tag=rx.udp,...``).
    comment : str, optional
        Written as a ``#`` comment line at the top (e.g. units and resolution).
    inputs : str, os.PathLike or iterable of them
        The captures the histograms come from: ``path`` may never be one of them.
    force : bool
        Replace an existing ``path``.

    Notes
    -----
    The lines are the ones HdrHistogram's Java ``HistogramLogWriter`` writes; hdrh 0.10's Python
    writer drops tags and fails on its start-time line, so only its encoder is used here.
    """
    stamp = datetime.datetime.fromtimestamp(0, datetime.timezone.utc).isoformat(" ")
    for tag, *_ in histograms:
        if not tag or any(c in str(tag) for c in ", \n"):
            raise ValueError(f"an .hlog tag must be non-empty without commas, spaces or "
                             f"newlines, not {tag!r}")
    with open_output(path, inputs, force=force) as file:
        if comment:
            file.write(f"#{comment}\n")
        file.write("#[Histogram log format version 1.3]\n")
        file.write(f"#[StartTime: {0.0:.3f} (seconds since epoch), {stamp}]\n")
        file.write('"StartTimestamp","Interval_Length","Interval_Max",'
                   '"Interval_Compressed_Histogram"\n')
        for tag, start_s, end_s, hist in histograms:
            payload = hist.encode().decode("ascii")
            file.write(f"Tag={tag},{start_s:.3f},{end_s - start_s:.3f},"
                       f"{hist.get_max_value() / 1e6:.3f},{payload}\n")


def read_hlog(path):
    """Read every interval histogram of an ``.hlog`` file, as a list of ``hdrh`` histograms."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader
    reader = HistogramLogReader(str(path), HdrHistogram(1, 2 ** 40, SIGNIFICANT_FIGURES))
    out = []
    try:
        while (hist := reader.get_next_interval_histogram()) is not None:
            out.append(hist)
    finally:
        reader.close()
    return out


def write_hlog_for(analysis, path, *, force=False):
    """Write every measurement's histogram of an :class:`api.Analysis` (made with
    ``ns_histograms=True``) to an ``.hlog`` file, under the output policy
    (:mod:`latscope.capture.files.outputs`): never the analysed capture itself, an existing file
    only with ``force``."""
    r = analysis.result
    if any(s.n and s.ns_histogram is None for s in r.stats.values()):
        raise LatscopeError("the analysis kept no histograms in ns; analyse with "
                            "ns_histograms=True to write an .hlog")
    hists = [(name, 0.0, max(r.duration_s, 1e-3), s.ns_histogram.to_hdrh())
             for name, s in r.stats.items() if s.n]
    write_hlog(path, hists, comment=f"latscope {analysis.label}: values in ns, one interval per "
                                    f"measurement (tag), resolution {r.resolution_ns:.3f} ns",
               inputs=[analysis.path] if analysis.path else (), force=force)
