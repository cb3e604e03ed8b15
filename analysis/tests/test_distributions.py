"""analysis.distributions against SciPy (the reference it replaces on the analyse path)."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from latscope.analysis.distributions import binom_ppf, linregress, t_ppf, t_sf


def test_binomial_quantiles_identical_to_scipy():
    """Every n up to 150 and 40 random n up to 10^7, at the percentiles the tool reports and the
    confidence levels it uses (0.95, and sqrt(0.95) for comparisons): exact equality."""
    rng = np.random.default_rng(0)
    ns = list(range(1, 151)) + [int(n) for n in rng.integers(151, 10**7, 40)]
    checked = 0
    for n in ns:
        for q in (0.5, 0.9, 0.99, 0.999, 0.9999, 0.25, 0.75):
            for confidence in (0.95, math.sqrt(0.95), 0.99):
                alpha = 1 - confidence
                for p in (alpha / 2, 1 - alpha / 2):
                    assert binom_ppf(p, n, q) == int(sps.binom.ppf(p, n, q)), (p, n, q)
                    checked += 1
    assert checked == len(ns) * 7 * 3 * 2


def test_t_distribution_within_1e9_of_scipy():
    for dof in list(range(1, 60)) + [100, 1000, 10**5]:
        for p in (0.6, 0.9, 0.975, 0.995):
            assert t_ppf(p, dof) == pytest.approx(sps.t.ppf(p, dof), rel=1e-9)
            assert t_ppf(1 - p, dof) == pytest.approx(sps.t.ppf(1 - p, dof), rel=1e-9)
        for t in (0.0, 0.3, 1.0, 2.5, 6.0, 30.0):
            assert t_sf(t, dof) == pytest.approx(sps.t.sf(t, dof), rel=1e-9, abs=1e-300)


def test_linregress_matches_scipy():
    rng = np.random.default_rng(1)
    for n in (3, 10, 400):
        x = rng.uniform(0, 10, n)
        y = 3.0 - 0.2 * x + rng.normal(0, 0.5, n)
        mine, ref = linregress(x, y), sps.linregress(x, y)
        for key in ("slope", "intercept", "rvalue", "pvalue", "stderr", "intercept_stderr"):
            assert getattr(mine, key) == pytest.approx(getattr(ref, key), rel=1e-9), (n, key)
    exact = linregress([1, 2, 3], [2, 4, 6])
    assert (exact.slope, exact.intercept, exact.pvalue, exact.stderr) == (2.0, 0.0, 0.0, 0.0)
