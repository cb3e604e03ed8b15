"""Comparisons: against SciPy references and constructed data with known answers."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from latscope import LatscopeError
from latscope.analysis.compare import compare_samples, family_of, size_regression, waterfall
from latscope.analysis.stats import quantile_ci_ranks


def test_welch_interval_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1000, 30, 500), rng.normal(1010, 50, 700)
    c = compare_samples(a, b)
    ref = sps.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert c.mean_diff_ns == pytest.approx(b.mean() - a.mean(), rel=1e-12)
    assert (c.mean_lower_ns, c.mean_upper_ns) == pytest.approx((ref.low, ref.high), rel=1e-9)


def test_rank_test_and_effect_sizes_match_scipy():
    rng = np.random.default_rng(1)
    a, b = rng.exponential(100, 400), 20 + rng.exponential(100, 300)
    c = compare_samples(a, b)
    ref = sps.mannwhitneyu(b, a, alternative="two-sided", method="asymptotic")
    assert c.u_statistic == ref.statistic and c.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    # probability of superiority by brute force over all pairs (ties count half)
    ps = ((b[:, None] > a[None, :]).mean() + 0.5 * (b[:, None] == a[None, :]).mean())
    assert c.prob_superiority == pytest.approx(ps, rel=1e-12)
    assert c.cliffs_delta == pytest.approx(2 * ps - 1, rel=1e-12)


def test_percentile_differences_hand_checked():
    # baseline 1..1000, other 101..1100: every percentile shifts by exactly 100
    a, b = np.arange(1, 1001.0), np.arange(101, 1101.0)
    c = compare_samples(a, b)
    for q in c.percentiles.values():
        assert q.diff_ns == 100.0
    # the interval combines each sample's order-statistic interval at sqrt(0.95)
    _, lo, hi = quantile_ci_ranks(1000, 0.5, math.sqrt(0.95))
    q50 = c.percentiles[50.0]
    assert (q50.lower_ns, q50.upper_ns) == (100 + lo - hi, 100 + hi - lo)
    assert q50.lower_ns < 100 < q50.upper_ns
    assert c.percentiles[99.99].upper_ns is None       # n = 1000 bounds no p99.99


def test_identical_samples_show_no_effect():
    a = np.arange(100.0)
    c = compare_samples(a, a.copy())
    assert c.mean_diff_ns == 0.0 and c.prob_superiority == 0.5 and c.cliffs_delta == 0.0


def test_compare_needs_two_values():
    with pytest.raises(LatscopeError, match="at least 2 values on each side, not 1 and 3"):
        compare_samples([1.0], [1.0, 2.0, 3.0])


def test_size_regression_recovers_known_costs():
    # latency = 2000 ns + 8 ns/byte (125 MB/s) + noise; 3 sizes x 2000 packets
    rng = np.random.default_rng(2)
    sizes = np.repeat([64, 256, 1024], 2000)
    lat = 2000 + 8.0 * sizes + rng.normal(0, 50, sizes.size)
    f = size_regression(sizes, lat)
    # a 95 % interval misses one seed in twenty: check the estimates within 4 standard errors
    # (half-width / 1.96) of the truth, and that the intervals are consistent with each other
    se_fixed = (f.fixed_upper_ns - f.fixed_lower_ns) / 2 / 1.96
    se_slope = (f.per_byte_upper_ns - f.per_byte_lower_ns) / 2 / 1.96
    assert abs(f.fixed_ns - 2000) <= 4 * se_fixed and se_fixed < 2
    assert abs(f.per_byte_ns - 8.0) <= 4 * se_slope and se_slope < 0.005
    assert f.bandwidth_lower_mb_s == pytest.approx(1000 / f.per_byte_upper_ns, rel=1e-12)
    assert f.bandwidth_upper_mb_s == pytest.approx(1000 / f.per_byte_lower_ns, rel=1e-12)
    assert abs(f.bandwidth_mb_s - 125.0) < 0.5
    assert f.bandwidth_mb_s == pytest.approx(1000 / f.per_byte_ns, rel=1e-12)
    assert f.sizes == (64, 256, 1024) and f.n == 6000
    ref = sps.linregress(sizes, lat)
    assert (f.fixed_ns, f.per_byte_ns) == pytest.approx((ref.intercept, ref.slope), rel=1e-12)


def test_size_regression_needs_two_sizes():
    with pytest.raises(LatscopeError, match="needs at least two frame sizes, not 64"):
        size_regression([64, 64], [1.0, 2.0])


def test_waterfall_and_family():
    from types import SimpleNamespace as S
    w = waterfall({"rx.udp": S(mean_ns=7.0, n=3), "rx.isr": S(mean_ns=1.0, n=3),
                   "rx.copy": S(mean_ns=6.0, n=3)})
    assert w == [("rx.isr", 0.0, 1.0), ("rx.copy", 1.0, 5.0), ("rx.udp", 6.0, 1.0)]
    assert family_of("el-so-1024", 1024) == "el-so" and family_of("x_256") == "x"
