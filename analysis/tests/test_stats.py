"""Statistics: reference values from NumPy/SciPy or by hand, interval coverage, histogram mode."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from latscope.analysis.stats import (
    PERCENTILES,
    LatencyAccumulator,
    bound_hints,
    describe,
    n_required,
    quantile_ci_ranks,
)


def test_ci_ranks_by_definition():
    # Brute force over the binomial (SciPy): the equal-tailed ranks are the largest l with
    # F(l-1) < alpha/2 and the smallest u with F(u-1) >= 1 - alpha/2.
    for n, q in [(10, 0.5), (100, 0.5), (1000, 0.99), (5000, 0.999), (40000, 0.9999)]:
        point, lo, hi = quantile_ci_ranks(n, q)
        cdf = sps.binom.cdf(np.arange(-1, n + 1), n, q)     # cdf[k + 1] = F(k)
        exp_lo = max(k for k in range(0, n + 1) if k == 0 or cdf[k] < 0.025)
        exp_hi = min(k for k in range(1, n + 2) if k == n + 1 or cdf[k] >= 0.975)
        assert (lo, hi) == (exp_lo, exp_hi)
        assert point == math.ceil(q * n)
        if 1 <= lo and hi <= n:
            assert cdf[hi] - cdf[lo] >= 0.95     # coverage F(u-1) - F(l-1)


def test_ci_ranks_classic_table():
    # 95 % interval of the median of n = 100: ranks 40 and 61 (Conover, Practical Nonparametric
    # Statistics, table A3 gives l = 40, u = 61 for n = 100, alpha = 0.05).
    assert quantile_ci_ranks(100, 0.5) == (50, 40, 61)


def test_ci_ranks_arguments():
    with pytest.raises(ValueError, match="n must be a positive integer, not 0"):
        quantile_ci_ranks(0, 0.5)
    with pytest.raises(ValueError, match=r"q must be in \(0, 1\), not 1"):
        quantile_ci_ranks(10, 1)
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\), not 1.5"):
        quantile_ci_ranks(10, 0.5, 1.5)


def test_n_required_matches_field_notes():
    # FIELD.md §2 gives the one-sided figures: n >= 2,995 for p99.9 and >= 29,956 for p99.99
    # (ln 0.05 / ln q, rounded up)
    assert n_required(0.999, two_sided=False) == 2995
    assert n_required(0.9999, two_sided=False) == 29956
    assert quantile_ci_ranks(512, 0.999)[2] == 513          # no finite bound at n = 512


def test_n_required_is_what_the_tables_compute():
    # the tables' interval is two-sided: ln 0.025 / ln q rounded up (3,687.3 -> 3,688 for
    # p99.9; 36,886.6 -> 36,887 for p99.99), and it is exactly where quantile_ci_ranks first
    # gives a finite upper rank
    assert n_required(0.999) == 3688
    assert n_required(0.9999) == 36887
    for q in (0.9, 0.99, 0.999, 0.9999):
        n = n_required(q)
        assert quantile_ci_ranks(n, q)[2] <= n
        assert quantile_ci_ranks(n - 1, q)[2] == n       # one fewer: no finite bound
    assert quantile_ci_ranks(2995, 0.999)[2] == 2996     # the one-sided figure is not enough


def test_bound_hints_name_the_sample_size():
    s = describe(np.arange(1, 3001), tick_hz=100_000_000)
    assert bound_hints(s) == [
        "p99.9: too few packets for this bound (n = 3,000; a finite two-sided 95 % bound "
        "needs n >= 3,688)",
        "p99.99: too few packets for this bound (n = 3,000; a finite two-sided 95 % bound "
        "needs n >= 36,887)"]
    assert s.to_dict()["bound_hints"] == bound_hints(s)
    assert bound_hints(describe(np.arange(1, 3689), tick_hz=100_000_000))[0].startswith(
        "p99.99:")                  # at 3,688 the p99.9 bound exists


def test_std_undefined_for_one_value():
    # one value has no sample standard deviation (ddof = 1 divides by n - 1 = 0): NaN, not 0
    s = describe(np.array([700]), tick_hz=100_000_000)
    assert s.n == 1 and s.mean_ns == 7000.0
    assert math.isnan(s.std_ns) and math.isnan(s.three_sigma_ns)
    assert s.to_dict()["std_ns"] is None and s.to_dict()["three_sigma_ns"] is None
    two = describe(np.array([700, 702]), tick_hz=100_000_000)
    assert two.std_ns == pytest.approx(np.std([7000.0, 7020.0], ddof=1), rel=1e-12)


def test_interval_coverage_monte_carlo():
    # 2000 samples of n = 200 from an exponential: the p90 interval must cover the true p90
    # (ln 10) in at least 95 % of runs, minus 3 binomial standard errors (0.95 - 3*0.0049).
    rng = np.random.default_rng(7)
    true = math.log(10)
    lo_r, hi_r = quantile_ci_ranks(200, 0.9)[1:]
    x = np.sort(rng.exponential(1.0, (2000, 200)), axis=1)
    covered = (x[:, lo_r - 1] <= true) & (x[:, hi_r - 1] >= true)
    assert covered.mean() >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 2000)


def test_describe_against_numpy():
    rng = np.random.default_rng(1)
    v = rng.integers(100, 10_000, 20_001)
    s = describe(v, tick_hz=1_000_000_000)          # 1 ns ticks: values are ns
    assert s.n == v.size
    assert s.mean_ns == pytest.approx(v.mean(), rel=1e-12)
    assert s.std_ns == pytest.approx(v.std(ddof=1), rel=1e-12)
    assert s.three_sigma_ns == pytest.approx(3 * v.std(ddof=1), rel=1e-12)
    assert (s.min_ns, s.max_ns) == (v.min(), v.max())
    for p in PERCENTILES:
        # exact order statistic: the ceil(q n)-th value, q n in exact arithmetic; NumPy's
        # inverted_cdf agrees wherever its floating q n does not land just above an integer
        rank = math.ceil(Fraction(str(p)) / 100 * v.size)
        assert s.quantiles[p].value_ns == np.sort(v)[rank - 1]
        assert s.quantiles[p].value_ns == np.percentile(v, p, method="inverted_cdf")
    assert s.iqr_ns == np.percentile(v, 75, method="inverted_cdf") - \
        np.percentile(v, 25, method="inverted_cdf")
    # odd n: the median is unique, so the MAD equals SciPy's (unscaled)
    assert s.mad_ns == sps.median_abs_deviation(v)
    assert s.pdv_ns == s.p999_ns - s.min_ns
    assert s.peak_to_peak_ns == v.max() - v.min()
    assert s.method == "exact" and s.relative_error == 0.0


def test_tick_scaling_and_resolution():
    s = describe(np.array([3, 5, 7]), tick_hz=320_000_000)     # 3.125 ns ticks
    assert s.resolution_ns == 3.125
    assert (s.min_ns, s.p50_ns, s.max_ns) == (9.375, 15.625, 21.875)


def test_histogram_mode_within_relative_error():
    rng = np.random.default_rng(3)
    v = (1000 + rng.gamma(2.0, 400.0, 200_000)).astype(np.int64)
    exact = describe(v, tick_hz=1_000_000_000)
    hist = describe(v, tick_hz=1_000_000_000, exact_limit=1000)
    assert hist.method == "histogram" and exact.method == "exact"
    assert hist.mean_ns == exact.mean_ns and hist.std_ns == exact.std_ns     # moments stay exact
    for p in PERCENTILES:
        e, h = exact.quantiles[p], hist.quantiles[p]
        assert h.value_ns == pytest.approx(e.value_ns, rel=hist.relative_error)
        # histogram bounds are the outer edges of the buckets: never narrower than the exact ones
        assert h.lower_ns <= e.lower_ns
        if e.upper_ns is not None:
            assert h.upper_ns >= e.upper_ns
    assert hist.mad_ns == pytest.approx(exact.mad_ns, rel=0.01)


def test_chunked_accumulation_equals_one_shot():
    rng = np.random.default_rng(5)
    v = rng.integers(0, 5000, 10_000)
    t = np.arange(v.size) * 1000
    acc = LatencyAccumulator("x", 1_000_000_000)
    for a in range(0, v.size, 777):
        acc.add(v[a:a + 777], t[a:a + 777])
    one = describe(v, tick_hz=1_000_000_000, times=t)
    many = acc.result()
    assert many.mean_ns == pytest.approx(one.mean_ns, rel=1e-12)
    assert many.std_ns == pytest.approx(one.std_ns, rel=1e-9)
    assert many.quantiles == one.quantiles
    assert many.worst == one.worst


def test_worst_outliers_with_times():
    v = np.array([5, 9, 1, 7])
    t = np.array([10, 20, 30, 40]) * 1_000_000      # ticks of 1 ns: 0.01 s ... 0.04 s
    s = describe(v, tick_hz=1_000_000_000, times=t)
    assert s.worst[:2] == [(0.02, 9.0), (0.04, 7.0)]


def test_drift_detected():
    # latency grows 100 ns per second over 10 s plus noise: slope CI must hold 100 ns/s
    rng = np.random.default_rng(2)
    t = np.sort(rng.integers(0, 10_000_000_000, 50_000))         # 1 ns ticks over 10 s
    v = (5000 + 100 * t / 1e9 + rng.normal(0, 20, t.size)).astype(np.int64)
    s = describe(v, tick_hz=1_000_000_000, times=t)
    assert s.drift.lower_ns_per_s <= 100 <= s.drift.upper_ns_per_s
    assert s.drift.p_value < 1e-6
    flat = describe(rng.normal(5000, 20, t.size).astype(np.int64), tick_hz=1_000_000_000,
                    times=t)
    assert flat.drift.lower_ns_per_s <= 0 <= flat.drift.upper_ns_per_s


def test_warmup_detected():
    # first second: 20 µs latencies (cold caches), then 5 µs: warm-up ~ the first second's packets
    t = np.arange(0, 10_000_000_000, 1_000_000)                  # one packet per ms, 10 s
    v = np.where(t < 1_000_000_000, 20_000, 5_000) + (t // 1_000_000) % 7
    s = describe(v, tick_hz=1_000_000_000, times=t)
    assert 900 <= s.warmup.packets <= 1100
    steady = describe(5_000 + (t // 1_000_000) % 7, tick_hz=1_000_000_000, times=t)
    assert steady.warmup.packets == 0


def test_empty_sample():
    s = LatencyAccumulator("x", 1000).result()
    assert s.n == 0 and math.isnan(s.mean_ns)
    assert s.to_dict()["mean_ns"] is None


def test_accumulator_arguments():
    with pytest.raises(ValueError, match="tick_hz must be a positive integer, not 0"):
        LatencyAccumulator("x", 0)
    with pytest.raises(ValueError, match="values and times must have the same length"):
        LatencyAccumulator("x", 10).add([1, 2], [1])


def test_json_keys():
    d = describe(np.arange(1, 101), tick_hz=1_000_000_000).to_dict()
    for key in ("n", "mean_ns", "std_ns", "min_ns", "max_ns", "p50_ns", "p99_ns", "p999_ns",
                "p50_ci_ns", "p99_ci_ns", "p999_ci_ns", "resolution_ns", "jitter"):
        assert key in d
    # p50 of 1..100 is the 50th value; its interval the 40th and 61st values (see above)
    assert d["p50_ns"] == 50.0 and d["p50_ci_ns"] == [40.0, 61.0]
    assert d["p999_ci_ns"][1] is None
