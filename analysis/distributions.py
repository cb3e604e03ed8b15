"""The few distribution functions the analysis core needs, in NumPy and the standard library:
binomial quantiles (order-statistic confidence intervals), Student's t quantiles and tail
probabilities (drift intervals), and a least-squares line with SciPy's ``linregress`` figures.

Why not SciPy: importing ``scipy.stats`` costs about a second, longer than analysing a typical
capture, and every ``latscope analyze`` paid it. SciPy stays a dependency (comparisons, rank
tests) and is the reference: ``analysis/tests/test_distributions.py`` checks these functions
against it on grids of arguments (identical binomial quantiles; t within 1e-9 relative).

>>> binom_ppf(0.025, 100, 0.5), binom_ppf(0.975, 100, 0.5)
(40, 60)
>>> round(t_ppf(0.975, 10), 6)
2.228139
"""

import math

import numpy as np

__all__ = ["binom_ppf", "t_ppf", "t_sf", "linregress", "LinearFit"]


def _binom_pmf_window(n, q):
    """``(first k, pmf array)`` over every k whose probability is not negligible (> 1e-300):
    log-probabilities from one ``lgamma`` anchor at the mode and the exact ratio of neighbours,
    so the cost is the window's width (about 80 standard deviations), not n."""
    mode = min(n, max(0, int(math.floor((n + 1) * q))))
    sd = math.sqrt(n * q * (1 - q))
    half = int(40 * sd + 40)
    lo, hi = max(0, mode - half), min(n, mode + half)
    log_q, log_p = math.log(q), math.log1p(-q)
    anchor = (math.lgamma(n + 1) - math.lgamma(mode + 1) - math.lgamma(n - mode + 1)
              + mode * log_q + (n - mode) * log_p)
    # log pmf(k+1) - log pmf(k) = log((n-k)/(k+1)) + log(q/(1-q))
    up_k = np.arange(mode, hi, dtype=np.float64)
    up = anchor + np.cumsum(np.log((n - up_k) / (up_k + 1)) + (log_q - log_p))
    down_k = np.arange(mode - 1, lo - 1, -1, dtype=np.float64)          # k = mode-1 ... lo
    down = anchor - np.cumsum(np.log((n - down_k) / (down_k + 1)) + (log_q - log_p))
    log_pmf = np.concatenate([down[::-1], [anchor], up])
    return lo, np.exp(log_pmf)


def binom_ppf(p, n, q):
    """Smallest ``k`` with ``P(X <= k) >= p`` for ``X ~ Binomial(n, q)`` (SciPy's
    ``binom.ppf``), for ``0 < p < 1``, ``n >= 1``, ``0 < q < 1``.

    >>> binom_ppf(0.025, 512, 0.999), binom_ppf(0.975, 512, 0.999)
    (509, 512)
    """
    n = int(n)
    lo, pmf = _binom_pmf_window(n, q)
    cdf = np.cumsum(pmf)
    k = int(np.searchsorted(cdf, p, side="left"))
    return min(lo + k, n)


def _betacf(a, b, x):
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h


def _betainc(a, b, x):
    """Regularised incomplete beta ``I_x(a, b)``."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t, dof):
    """``P(T > t)`` for Student's t with ``dof`` degrees of freedom.

    >>> round(t_sf(2.228138851986, 10), 9)
    0.025
    """
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(dof / 2.0, 0.5, dof / (dof + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(p, dof):
    """Quantile of Student's t (``0 < p < 1``), by bisection on :func:`t_sf` to 1e-13."""
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_ppf(1.0 - p, dof)
    target = 1.0 - p
    lo, hi = 0.0, 1.0
    while t_sf(hi, dof) > target:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_sf(mid, dof) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


class LinearFit:
    """``slope``, ``intercept``, ``rvalue``, ``pvalue`` (two-sided, slope = 0), ``stderr`` (of the
    slope), ``intercept_stderr``: the figures of SciPy's ``linregress``."""

    __slots__ = ("slope", "intercept", "rvalue", "pvalue", "stderr", "intercept_stderr")

    def __init__(self, slope, intercept, rvalue, pvalue, stderr, intercept_stderr):
        self.slope, self.intercept, self.rvalue = slope, intercept, rvalue
        self.pvalue, self.stderr, self.intercept_stderr = pvalue, stderr, intercept_stderr


def linregress(x, y):
    """Least-squares line through ``(x, y)`` (at least 3 points, x not all equal), computed as
    SciPy's ``linregress`` does.

    >>> f = linregress([0, 1, 2, 3], [1, 3, 5, 7])
    >>> f.slope, f.intercept, f.rvalue
    (2.0, 1.0, 1.0)
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(x)
    xmean, ymean = x.mean(), y.mean()
    ssxm = float(np.mean((x - xmean) ** 2))
    ssym = float(np.mean((y - ymean) ** 2))
    ssxym = float(np.mean((x - xmean) * (y - ymean)))
    if ssxm == 0:
        raise ValueError("all x values are identical: the slope is undefined")
    if ssym == 0:
        r = 0.0
    else:
        r = max(-1.0, min(1.0, ssxym / math.sqrt(ssxm * ssym)))
    slope = ssxym / ssxm
    intercept = float(ymean - slope * xmean)
    df = n - 2
    if df <= 0:
        return LinearFit(slope, intercept, r, 1.0 if n == 2 else math.nan, 0.0, 0.0)
    if abs(r) == 1.0:
        prob = 0.0
    else:
        t = r * math.sqrt(df / ((1.0 - r) * (1.0 + r)))
        prob = 2 * t_sf(abs(t), df)
    stderr = math.sqrt((1 - r * r) * ssym / ssxm / df)
    intercept_stderr = stderr * math.sqrt(ssxm + xmean ** 2)
    return LinearFit(slope, intercept, r, prob, stderr, intercept_stderr)
