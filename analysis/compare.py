"""Comparisons: between captures or configurations, across packet sizes, between stages.

Everything here takes arrays of latencies (ns) and returns named results:

* :func:`compare_samples`: difference of means (Welch interval), percentile-by-percentile
  differences with distribution-free intervals, the Mann-Whitney rank test with its effect sizes
  (probability of superiority and Cliff's delta).
* :func:`size_regression`: latency = fixed cost + per-byte cost x size, with confidence intervals;
  the per-byte cost turned into the effective bandwidth of the MAC and memory path.
* :func:`waterfall`: a packet's path split into consecutive stages.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> c = compare_samples(rng.normal(1000, 10, 2000), rng.normal(1100, 10, 2000))
>>> round(c.mean_diff_ns), c.prob_superiority > 0.99, c.percentiles[50.0].lower_ns > 0
(100, True, True)
"""

import dataclasses
import math
import re

import numpy as np
from scipy import stats as sps

from latscope import LatscopeError
from latscope.analysis.stats import PERCENTILES, quantile_of_sorted

__all__ = ["QuantileDiff", "Comparison", "SizeFit", "compare_samples", "size_regression",
           "waterfall", "family_of"]


@dataclasses.dataclass(frozen=True)
class QuantileDiff:
    """``other - baseline`` at one percentile, with a distribution-free interval (``None`` where a
    sample is too small for a finite bound)."""
    percent: float
    baseline_ns: float
    other_ns: float
    diff_ns: float
    lower_ns: float | None
    upper_ns: float | None


@dataclasses.dataclass
class Comparison:
    """Difference between two samples of one measurement (``other - baseline``).

    Attributes
    ----------
    n_baseline, n_other : int
    mean_diff_ns, mean_lower_ns, mean_upper_ns : float
        Difference of means and its Welch t interval.
    percentiles : dict of float -> QuantileDiff
    u_statistic, p_value : float
        Two-sided Mann-Whitney U test (asymptotic, tie-corrected).
    prob_superiority : float
        P(other > baseline) + P(tie)/2 = U / (n_b n_o): 0.5 means no shift.
    cliffs_delta : float
        ``2 * prob_superiority - 1``, in [-1, 1].
    confidence : float
    """
    n_baseline: int
    n_other: int
    mean_diff_ns: float
    mean_lower_ns: float
    mean_upper_ns: float
    percentiles: dict
    u_statistic: float
    p_value: float
    prob_superiority: float
    cliffs_delta: float
    confidence: float

    def to_dict(self):
        out = dataclasses.asdict(self)
        out["percentiles"] = {f"{p:g}": dataclasses.asdict(q) for p, q in self.percentiles.items()}
        return out


def compare_samples(baseline_ns, other_ns, *, confidence=0.95, percentiles=PERCENTILES):
    """Compare two independent samples of latencies.

    Percentile differences use each sample's order-statistic interval at confidence
    ``sqrt(confidence)``: both cover with probability at least ``confidence``, so
    ``[lo_o - hi_b, hi_o - lo_b]`` covers the true difference at least that often.

    Parameters
    ----------
    baseline_ns, other_ns : array_like
        Latencies, ns; each needs at least 2 values.
    confidence : float

    Returns
    -------
    Comparison
    """
    a = np.sort(np.asarray(baseline_ns, dtype=np.float64))
    b = np.sort(np.asarray(other_ns, dtype=np.float64))
    if len(a) < 2 or len(b) < 2:
        raise LatscopeError(f"comparing needs at least 2 values on each side, not {len(a)} and "
                            f"{len(b)}")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = float(b.mean() - a.mean())
    se = math.sqrt(va + vb)
    if se > 0:
        dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
        half = float(sps.t.ppf(0.5 + confidence / 2, dof)) * se
    else:
        half = 0.0
    each = math.sqrt(confidence)
    quantiles = {}
    for p in percentiles:
        qa, la, ha = quantile_of_sorted(a, p / 100, each)
        qb, lb, hb = quantile_of_sorted(b, p / 100, each)
        lower = lb - ha if lb is not None and ha is not None else None
        upper = hb - la if hb is not None and la is not None else None
        quantiles[p] = QuantileDiff(p, qa, qb, qb - qa, lower, upper)
    u = sps.mannwhitneyu(b, a, alternative="two-sided", method="asymptotic")
    ps = float(u.statistic) / (len(a) * len(b))
    return Comparison(len(a), len(b), diff, diff - half, diff + half, quantiles,
                      float(u.statistic), float(u.pvalue), ps, 2 * ps - 1, confidence)


@dataclasses.dataclass(frozen=True)
class SizeFit:
    """Least-squares fit ``latency = fixed + per_byte * size`` over every packet.

    ``bandwidth_mb_s`` is ``1000 / per_byte_ns`` (1 byte/ns = 1000 MB/s): the effective throughput
    of the path that moves the bytes (MAC, DMA, copies). Its interval is the inverted interval of
    the slope (``None`` bounds where the slope's interval reaches zero).
    """
    fixed_ns: float
    fixed_lower_ns: float
    fixed_upper_ns: float
    per_byte_ns: float
    per_byte_lower_ns: float
    per_byte_upper_ns: float
    bandwidth_mb_s: float
    bandwidth_lower_mb_s: float | None
    bandwidth_upper_mb_s: float | None
    r_squared: float
    n: int
    sizes: tuple
    confidence: float


def size_regression(sizes, latencies_ns, *, confidence=0.95):
    """Fit latency against frame size.

    Parameters
    ----------
    sizes : array_like
        Frame size (bytes) of each packet.
    latencies_ns : array_like
        Latency of each packet, ns.

    Returns
    -------
    SizeFit

    Examples
    --------
    >>> f = size_regression([64, 256, 1024] * 2, [1064, 1256, 2024, 1064, 1256, 2024])
    >>> round(f.fixed_ns, 6), round(f.per_byte_ns, 6), round(f.bandwidth_mb_s, 3)
    (1000.0, 1.0, 1000.0)
    """
    x = np.asarray(sizes, dtype=np.float64)
    y = np.asarray(latencies_ns, dtype=np.float64)
    if x.shape != y.shape:
        raise LatscopeError("sizes and latencies must have the same length")
    distinct = np.unique(x)
    if len(distinct) < 2:
        raise LatscopeError(f"a size regression needs at least two frame sizes, not "
                            f"{', '.join(f'{s:g}' for s in distinct) or 'none'}")
    fit = sps.linregress(x, y)
    dof = len(x) - 2
    t = float(sps.t.ppf(0.5 + confidence / 2, dof)) if dof > 0 else math.inf
    slope_lo, slope_hi = fit.slope - t * fit.stderr, fit.slope + t * fit.stderr
    icpt_lo = fit.intercept - t * fit.intercept_stderr
    icpt_hi = fit.intercept + t * fit.intercept_stderr
    bw = 1000.0 / fit.slope if fit.slope > 0 else math.inf
    bw_lo = 1000.0 / slope_hi if slope_hi > 0 else None
    bw_hi = 1000.0 / slope_lo if slope_lo > 0 else None
    return SizeFit(float(fit.intercept), float(icpt_lo), float(icpt_hi), float(fit.slope),
                   float(slope_lo), float(slope_hi), float(bw), bw_lo, bw_hi,
                   float(fit.rvalue ** 2), int(len(x)), tuple(int(s) for s in distinct),
                   confidence)


def waterfall(stats, names=None):
    """A packet's path as consecutive increments of the mean: ``[(name, start_ns, width_ns)]``.

    Parameters
    ----------
    stats : dict of str -> LatencyStats
        Measurements with the same start edge (e.g. ``rx.isr``, ``rx.copy``, ``rx.udp``).
    names : list of str, optional
        Order of the stages; default by increasing mean.

    >>> from types import SimpleNamespace as S
    >>> waterfall({"rx.udp": S(mean_ns=7.0, n=1), "rx.isr": S(mean_ns=1.0, n=1)})
    [('rx.isr', 0.0, 1.0), ('rx.udp', 1.0, 6.0)]
    """
    if names is None:
        names = sorted((k for k, s in stats.items() if s.n), key=lambda k: stats[k].mean_ns)
    out, previous = [], 0.0
    for name in names:
        mean = float(stats[name].mean_ns)
        out.append((name, previous, mean - previous))
        previous = mean
    return out


def family_of(label, size=None):
    """Configuration family of a label: ``"gem-64" -> "gem"`` (the size suffix removed).

    >>> family_of("gem-64", 64), family_of("el-dm-1024"), family_of("fast")
    ('gem', 'el-dm', 'fast')
    """
    if size is not None and label.endswith(f"-{size}"):
        return label[: -len(str(size)) - 1]
    return re.sub(r"[-_]\d+$", "", label)
