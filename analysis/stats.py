"""Statistics of latency samples: moments, percentiles with distribution-free confidence intervals
from order statistics, jitter, histograms, drift and warm-up, worst outliers.

Percentiles use the order-statistic definition: the ``q`` quantile of ``n`` values is the
``ceil(q n)``-th smallest (NumPy's ``method="inverted_cdf"``, HdrHistogram's convention; ``q n`` is
rounded to 1e-9 first, so 99.9 % of 4000 values is the 3996th, where NumPy's floating-point product
picks the 3997th). Its
confidence interval is ``[x_(l), x_(u)]`` with ranks from the binomial distribution of the count of
values below the true quantile (:func:`quantile_ci_ranks`); it needs no assumption about the
distribution. Where the sample is too small for a finite bound the bound is ``None``.

Every figure is stated with the instrument's resolution: a latency is the difference of two edge
timestamps, each quantised to one tick, so it is exact to within one tick. Figures read from the
log-linear histogram (captures too long to keep every value) add its relative error, 0.098 %.

>>> import numpy as np
>>> s = describe(np.array([10, 20, 30, 40, 50]), tick_hz=1_000_000_000)
>>> s.n, s.mean_ns, s.min_ns, s.max_ns, s.p50_ns, s.resolution_ns
(5, 30.0, 10.0, 50.0, 30.0, 1.0)
"""

import dataclasses
import math

import numpy as np

from latscope.analysis import distributions as dist
from latscope.analysis.hdr import RELATIVE_ERROR, LogLinearHistogram

__all__ = ["PERCENTILES", "quantile_ci_ranks", "quantile_of_sorted", "n_required", "bound_hints",
           "Quantile", "Drift", "Warmup", "LatencyStats", "LatencyAccumulator", "describe",
           "percentile_key"]

#: Percentiles reported for every measurement.
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)
_EXTRA = (25.0, 75.0)            # for the IQR
DEFAULT_EXACT_LIMIT = 1_000_000  # values kept per measurement before switching to the histogram


def percentile_key(p):
    """``99.9 -> "p999"``, ``50 -> "p50"``.

    >>> [percentile_key(p) for p in PERCENTILES]
    ['p50', 'p90', 'p99', 'p999', 'p9999']
    """
    return "p" + f"{p:g}".replace(".", "")


def quantile_ci_ranks(n, q, confidence=0.95):
    """Ranks (1-based) of the point estimate and of a two-sided distribution-free confidence
    interval for the ``q`` quantile of ``n`` values.

    With ``B ~ Binomial(n, q)`` the count of values below the true quantile, the interval
    ``[x_(l), x_(u)]`` covers it with probability ``F(u-1) - F(l-1) >= confidence``, where
    ``l = F^-1(alpha/2)`` and ``u = F^-1(1 - alpha/2) + 1``. A lower rank of 0 or an upper rank of
    ``n + 1`` means the bound does not exist at this ``n``.

    Parameters
    ----------
    n : int
        Sample size, >= 1.
    q : float
        Quantile in (0, 1).
    confidence : float
        Two-sided confidence level in (0, 1).

    Returns
    -------
    point, lower, upper : int

    Examples
    --------
    The median of 100 values: its 95 % interval spans the 40th to the 61st values (the classic
    table value, e.g. Conover, *Practical Nonparametric Statistics*, for n = 100).

    >>> quantile_ci_ranks(100, 0.5)
    (50, 40, 61)

    p99.9 of 512 values (the origin paper's sample size) has no finite upper bound:

    >>> quantile_ci_ranks(512, 0.999)
    (512, 510, 513)
    """
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"n must be a positive integer, not {n!r}")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), not {q!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    alpha = 1 - confidence
    point = max(1, math.ceil(q * n - 1e-9))
    lower = dist.binom_ppf(alpha / 2, n, q)
    upper = dist.binom_ppf(1 - alpha / 2, n, q) + 1
    return point, lower, min(upper, n + 1)


def quantile_of_sorted(sorted_values, q, confidence=0.95):
    """The ``q`` quantile of sorted values and its distribution-free interval
    (:func:`quantile_ci_ranks`): ``(value, lower, upper)``, a bound ``None`` where the sample is
    too small for it.

    >>> quantile_of_sorted(list(range(1, 101)), 0.5)
    (50.0, 40.0, 61.0)
    >>> quantile_of_sorted(list(range(1, 513)), 0.999)
    (512.0, 510.0, None)
    """
    n = len(sorted_values)
    point, lo, hi = quantile_ci_ranks(n, q, confidence)
    lower = float(sorted_values[lo - 1]) if lo >= 1 else None
    upper = float(sorted_values[hi - 1]) if hi <= n else None
    return float(sorted_values[point - 1]), lower, upper


def n_required(q, confidence=0.95, *, two_sided=True):
    """Smallest sample size for which the ``q`` quantile has a finite distribution-free bound.

    Two-sided (the default, what :func:`quantile_ci_ranks` and every table compute): the upper
    rank ``F^-1(1 - alpha/2) + 1`` must not exceed ``n``, which happens first when
    ``1 - q**n >= 1 - alpha/2``. One-sided: the sample maximum is a ``confidence`` upper bound,
    ``1 - q**n >= confidence``.

    >>> n_required(0.999), n_required(0.9999)
    (3688, 36887)
    >>> n_required(0.999, two_sided=False), n_required(0.9999, two_sided=False)
    (2995, 29956)
    """
    tail = (1 - confidence) / 2 if two_sided else 1 - confidence
    n = math.ceil(math.log(tail) / math.log(q) - 1e-12)
    if two_sided:      # guard the closed form with the computation the tables make
        while quantile_ci_ranks(n, q, confidence)[2] > n:
            n += 1
        while n > 1 and quantile_ci_ranks(n - 1, q, confidence)[2] <= n - 1:
            n -= 1
    return n


def bound_hints(stats, percents=(99.0, 99.9, 99.99)):
    """Why a shown percentile has no finite upper bound: one line per percentile of ``stats``
    (a :class:`LatencyStats`) whose interval is open, naming the packets it would need.

    >>> s = describe(np.arange(1, 513), tick_hz=100_000_000)   # the origin paper's n
    >>> [h.split(" (")[0] for h in bound_hints(s)]
    ['p99.9: too few packets for this bound', 'p99.99: too few packets for this bound']
    >>> bound_hints(s)[0].split("; ")[1]
    'a finite two-sided 95 % bound needs n >= 3,688)'
    """
    hints = []
    for p in percents:
        q = stats.quantiles.get(p)
        if q is None or not stats.n or q.upper_ns is not None:
            continue
        need = n_required(p / 100, q.confidence)
        hints.append(f"p{p:g}: too few packets for this bound (n = {stats.n:,}; a finite "
                     f"two-sided {q.confidence * 100:g} % bound needs n >= {need:,})")
    return hints


@dataclasses.dataclass(frozen=True)
class Quantile:
    """A percentile with its confidence interval, in ns (``None`` = no finite bound)."""
    percent: float
    value_ns: float
    lower_ns: float | None
    upper_ns: float | None
    confidence: float


@dataclasses.dataclass(frozen=True)
class Drift:
    """Linear trend of the windowed mean latency over capture time."""
    slope_ns_per_s: float
    lower_ns_per_s: float
    upper_ns_per_s: float
    p_value: float
    windows: int
    window_s: float


@dataclasses.dataclass(frozen=True)
class Warmup:
    """Leading part of the capture whose windowed means lie outside the steady-state band."""
    packets: int
    seconds: float
    band_ns: tuple


@dataclasses.dataclass
class LatencyStats:
    """Statistics of one measurement (all values in ns).

    ``std_ns`` is the sample standard deviation (``ddof=1``), ``three_sigma_ns`` three times it
    (the origin paper's Table I form). Jitter: ``peak_to_peak_ns = max - min``, ``iqr_ns = p75 -
    p25``, ``mad_ns`` = median absolute deviation from the median (unscaled), ``pdv_ns = p99.9 -
    min`` (RFC 8219 packet delay variation). ``resolution_ns`` is one instrument tick; figures
    from the histogram (``method == "histogram"``) are also within ``relative_error``.
    """
    name: str
    n: int
    mean_ns: float
    std_ns: float
    three_sigma_ns: float
    min_ns: float
    max_ns: float
    quantiles: dict
    iqr_ns: float
    mad_ns: float
    resolution_ns: float
    method: str
    relative_error: float
    counts: dict = dataclasses.field(default_factory=dict)
    worst: list = dataclasses.field(default_factory=list)
    drift: Drift | None = None
    warmup: Warmup | None = None
    histogram: LogLinearHistogram | None = dataclasses.field(default=None, repr=False)
    series: dict | None = dataclasses.field(default=None, repr=False)
    tick_ns: float = 1.0
    #: The latencies in whole ns, binned once (what ``.hlog`` export writes).
    ns_histogram: LogLinearHistogram | None = dataclasses.field(default=None, repr=False)

    @property
    def peak_to_peak_ns(self):
        return self.max_ns - self.min_ns

    @property
    def pdv_ns(self):
        return self.quantiles[99.9].value_ns - self.min_ns if self.n else math.nan

    def __getattr__(self, name):
        # p50_ns, p999_ns, ... and their intervals p50_ci_ns
        quantiles = self.__dict__.get("quantiles", {})
        for p, qv in quantiles.items():
            key = percentile_key(p)
            if name == key + "_ns":
                return qv.value_ns
            if name == key + "_ci_ns":
                return (qv.lower_ns, qv.upper_ns)
        raise AttributeError(name)

    def to_dict(self):
        """JSON-ready dict with every figure in ns."""
        out = {"name": self.name, "n": self.n, "mean_ns": self.mean_ns, "std_ns": self.std_ns,
               "three_sigma_ns": self.three_sigma_ns, "min_ns": self.min_ns,
               "max_ns": self.max_ns}
        for p in PERCENTILES:
            q = self.quantiles.get(p)
            if q is not None:
                out[percentile_key(p) + "_ns"] = q.value_ns
                out[percentile_key(p) + "_ci_ns"] = [q.lower_ns, q.upper_ns]
        out["confidence"] = next(iter(self.quantiles.values())).confidence if self.n else None
        out["jitter"] = {"peak_to_peak_ns": self.peak_to_peak_ns, "iqr_ns": self.iqr_ns,
                         "mad_ns": self.mad_ns, "pdv_ns": self.pdv_ns}
        out["resolution_ns"] = self.resolution_ns
        out["method"] = self.method
        out["relative_error"] = self.relative_error
        out["bound_hints"] = bound_hints(self) if self.quantiles else []
        out["counts"] = dict(self.counts)
        out["worst"] = [{"time_s": t, "latency_ns": v} for t, v in self.worst]
        out["drift"] = dataclasses.asdict(self.drift) if self.drift else None
        out["warmup"] = dataclasses.asdict(self.warmup) if self.warmup else None
        return _clean(out)


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


class LatencyAccumulator:
    """Streaming statistics of one measurement, in memory independent of the sample count.

    Values (latencies in ticks) arrive in batches with the time (ticks) of each packet. Moments,
    minimum, maximum, the log-linear histogram, the worst outliers and windowed means are kept
    always; the exact values are kept until there are more than ``exact_limit`` of them, after
    which percentiles come from the histogram.

    Parameters
    ----------
    name : str
    tick_hz : int
        Instrument ticks per second.
    exact_limit : int
        Most values kept for exact percentiles.
    worst : int
        How many largest values to keep with their times.
    ns_histogram : bool
        Also keep the latencies in whole ns in their own log-linear histogram, binned once, for
        ``.hlog`` export (:attr:`LatencyStats.ns_histogram`).
    """

    def __init__(self, name, tick_hz, *, exact_limit=DEFAULT_EXACT_LIMIT, worst=10,
                 max_windows=256, ns_histogram=False):
        if not (isinstance(tick_hz, (int, np.integer)) and tick_hz > 0):
            raise ValueError(f"tick_hz must be a positive integer, not {tick_hz!r}")
        self.name = name
        self.tick_hz = int(tick_hz)
        self.exact_limit = int(exact_limit)
        self.n = 0
        self._shift = None
        self._s1 = 0
        self._s2 = 0
        self.min = None
        self.max = None
        self.histogram = LogLinearHistogram()
        # the same latencies in whole ns, binned once, for .hlog export (re-binning the tick
        # histogram would stack two bucket errors and could exclude the true value)
        self._tick_ns = 1e9 / self.tick_hz
        self.ns_histogram = LogLinearHistogram(highest=2 ** 52) if ns_histogram else None
        self._exact = []
        self._exact_n = 0
        self.exact = True
        self._worst_k = worst
        self._worst_v = np.empty(0, dtype=np.int64)
        self._worst_t = np.empty(0, dtype=np.int64)
        self._t0 = None
        self._width = max(1, self.tick_hz // 1000)      # window width, ticks (starts at 1 ms)
        self._max_windows = max_windows
        self._w_count = np.zeros(0, dtype=np.int64)
        self._w_sum = np.zeros(0, dtype=np.float64)
        self._w_last = None

    def add(self, values, times):
        """Add latencies ``values`` (int ticks, >= 0) measured at ``times`` (ticks, ascending)."""
        v = np.asarray(values, dtype=np.int64)
        t = np.asarray(times, dtype=np.int64)
        if v.shape != t.shape:
            raise ValueError("values and times must have the same length")
        if not v.size:
            return
        # moments in exact integer arithmetic (sums of d = v - shift and of d**2, the latter split
        # into 32-bit halves so no int64 sum can overflow): the result does not depend on how
        # the values were chunked, and the variance has no cancellation error
        vf = v.astype(np.float64)
        n_b = v.size
        if self._shift is None:
            self._shift = int(v[0])
        d = v - self._shift
        self._s1 += int(d.sum())
        small = np.abs(d) < (1 << 31)
        d2 = np.square(d[small])
        self._s2 += (int((d2 >> 32).sum()) << 32) + int((d2 & 0xFFFFFFFF).sum())
        self._s2 += sum(int(x) ** 2 for x in d[~small].tolist())
        self.n += n_b
        lo, hi = int(v.min()), int(v.max())
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)
        self.histogram.record(v)
        if self.ns_histogram is not None:       # only when asked: it costs ~60 % of add()
            self.ns_histogram.record(self.to_whole_ns(v))
        if self.exact:
            self._exact.append(v.copy())
            self._exact_n += v.size
            if self._exact_n > self.exact_limit:
                self.exact = False
                self._exact = []
        # worst outliers
        k = self._worst_k
        if k:
            cv = np.concatenate([self._worst_v, v])
            ct = np.concatenate([self._worst_t, t])
            if cv.size > k:
                kth = cv[np.argpartition(cv, cv.size - k)[cv.size - k]]
                keep = np.flatnonzero(cv >= kth)          # every tie of the k-th largest
                order = np.lexsort((ct[keep], -cv[keep]))[:k]   # largest first, then earliest
                cv, ct = cv[keep][order], ct[keep][order]
            self._worst_v, self._worst_t = cv, ct
        self._add_windows(vf, t)

    def to_whole_ns(self, ticks):
        """Latencies in ticks as whole ns (exact when a tick is a whole number of ns, else the
        nearest ns)."""
        ticks = np.asarray(ticks, dtype=np.int64)
        per_tick = 10 ** 9 // self.tick_hz
        if per_tick * self.tick_hz == 10 ** 9:
            return ticks * per_tick
        return np.rint(ticks.astype(np.float64) * self._tick_ns).astype(np.int64)

    def _add_windows(self, vf, t):
        if self._t0 is None:
            self._t0 = int(t[0])
        idx = (t - self._t0) // self._width
        need = int(idx[-1]) + 1
        while need > self._max_windows:
            self._merge_windows()
            idx = (t - self._t0) // self._width
            need = int(idx[-1]) + 1
        if need > self._w_count.size:
            self._w_count = np.pad(self._w_count, (0, need - self._w_count.size))
            self._w_sum = np.pad(self._w_sum, (0, need - self._w_sum.size))
        self._w_count[:need] += np.bincount(idx, minlength=need)
        self._w_sum[:need] += np.bincount(idx, weights=vf, minlength=need)
        self._w_last = int(t[-1])

    def _merge_windows(self):
        n = self._w_count.size
        if n % 2:
            self._w_count = np.pad(self._w_count, (0, 1))
            self._w_sum = np.pad(self._w_sum, (0, 1))
        self._w_count = self._w_count.reshape(-1, 2).sum(axis=1)
        self._w_sum = self._w_sum.reshape(-1, 2).sum(axis=1)
        self._width *= 2

    def result(self, *, confidence=0.95, counts=None):
        """The :class:`LatencyStats` of everything added."""
        tick_ns = 1e9 / self.tick_hz
        counts = dict(counts or {})
        quantiles = {}
        if self.n == 0:
            nan = math.nan
            for p in PERCENTILES:
                quantiles[p] = Quantile(p, nan, None, None, confidence)
            return LatencyStats(self.name, 0, nan, nan, nan, nan, nan, quantiles, nan, nan,
                                tick_ns, "exact", 0.0, counts, tick_ns=tick_ns)
        n = self.n
        levels = PERCENTILES + _EXTRA
        ranks = {p: quantile_ci_ranks(n, p / 100, confidence) for p in levels}
        if self.exact:
            sample = np.concatenate(self._exact)
            wanted = sorted({r - 1 for trio in ranks.values() for r in trio if 1 <= r <= n})
            part = np.partition(sample, wanted)

            def at(rank, edge="mid"):
                return float(part[rank - 1])
            median = float(part[ranks[50.0][0] - 1])
            mad = float(_order_stat(np.abs(sample - median), 0.5))
            method, rel = "exact", 0.0
        else:
            hist = self.histogram

            def at(rank, edge="mid"):
                return float(hist.value_at_rank(rank, edge=edge))
            median = at(ranks[50.0][0])
            low, high, cnt = hist.nonzero()
            dev = np.abs((low + high) / 2 - median)
            order = np.argsort(dev)
            cum = np.cumsum(cnt[order])
            mad = float(dev[order][np.searchsorted(cum, max(1, math.ceil(n / 2)))])
            method, rel = "histogram", RELATIVE_ERROR
        for p in levels:
            point, lo, hi = ranks[p]
            value = min(max(at(point), self.min), self.max)
            lower = at(lo, "low") * tick_ns if lo >= 1 else None
            upper = at(hi, "high") * tick_ns if hi <= n else None
            quantiles[p] = Quantile(p, value * tick_ns, lower, upper, confidence)
        mean = self._shift + self._s1 / n
        # one value has no spread to estimate: undefined (NaN, shown as '-'), never 0
        std = math.sqrt((n * self._s2 - self._s1 ** 2) / (n * (n - 1))) if n > 1 else math.nan
        order = np.lexsort((self._worst_t, -self._worst_v))
        worst = [(float(t) / self.tick_hz, float(v) * tick_ns)
                 for v, t in zip(self._worst_v[order], self._worst_t[order], strict=True)]
        drift, warmup, series = self._trend(tick_ns)
        iqr = quantiles[75.0].value_ns - quantiles[25.0].value_ns
        shown = {p: quantiles[p] for p in PERCENTILES}
        return LatencyStats(self.name, n, mean * tick_ns, std * tick_ns, 3 * std * tick_ns,
                            self.min * tick_ns, self.max * tick_ns, shown, iqr, mad * tick_ns,
                            tick_ns, method, rel, counts, worst, drift, warmup,
                            self.histogram, series, tick_ns, self.ns_histogram)

    def _trend(self, tick_ns):
        filled = self._w_count > 0
        width_s = self._width / self.tick_hz
        centers = (self._t0 / self.tick_hz) + (np.arange(self._w_count.size) + 0.5) * width_s
        means = np.divide(self._w_sum, np.maximum(self._w_count, 1)) * tick_ns
        series = {"time_s": centers[filled], "mean_ns": means[filled],
                  "count": self._w_count[filled], "window_s": width_s}
        if filled.sum() < 4:
            return None, None, series
        x, y = centers[filled], means[filled]
        fit = dist.linregress(x, y)
        t = dist.t_ppf(0.975, len(x) - 2)
        drift = Drift(float(fit.slope) * 1.0, float(fit.slope - t * fit.stderr),
                      float(fit.slope + t * fit.stderr), float(fit.pvalue), int(len(x)),
                      float(width_s))
        # warm-up: steady state from the second half of the windows, band = median +- 5 MAD
        steady = y[len(y) // 2:]
        med = _median(steady)
        spread = max(5 * 1.4826 * _median(np.abs(steady - med)), 2 * tick_ns)
        outside = np.abs(y - med) > spread
        lead = int(np.argmin(outside)) if not outside.all() else len(y)
        packets = int(self._w_count[filled][:lead].sum())
        seconds = float(x[lead] - x[0]) if lead < len(x) else float(x[-1] - x[0])
        warmup = Warmup(packets, seconds if packets else 0.0, (med - spread, med + spread))
        return drift, warmup, series


def _median(values):
    """Median of a non-empty array, as ``np.median`` (whose NaN check imports numpy.ma, a tenth
    of a second at every start of the command line)."""
    v = np.sort(values)
    half = len(v) // 2
    return float(v[half]) if len(v) % 2 else float((v[half - 1] + v[half]) / 2)


def _order_stat(values, q):
    k = max(1, math.ceil(q * values.size - 1e-9))
    return np.partition(values, k - 1)[k - 1]


def describe(latency_ticks, tick_hz, *, times=None, name="latency", confidence=0.95,
             exact_limit=DEFAULT_EXACT_LIMIT, ns_histogram=False):
    """Statistics of an array of latencies.

    Parameters
    ----------
    latency_ticks : array_like of int
        Latencies in instrument ticks (>= 0).
    tick_hz : int
        Ticks per second.
    times : array_like of int, optional
        Capture time (ticks) of each latency, ascending; default evenly spaced 1 ms apart.
    name : str
    confidence : float
        Confidence level of the percentile intervals.

    Returns
    -------
    LatencyStats

    Examples
    --------
    >>> s = describe(np.arange(1, 1001), tick_hz=100_000_000)   # 10 ns ticks
    >>> s.p50_ns, s.p50_ci_ns, s.p999_ns, s.p999_ci_ns
    (5000.0, (4690.0, 5320.0), 9990.0, (9970.0, None))
    """
    v = np.asarray(latency_ticks, dtype=np.int64)
    if times is None:
        times = np.arange(v.size, dtype=np.int64) * max(1, int(tick_hz) // 1000)
    acc = LatencyAccumulator(name, tick_hz, exact_limit=exact_limit, ns_histogram=ns_histogram)
    acc.add(v, np.asarray(times, dtype=np.int64))
    return acc.result(confidence=confidence)
