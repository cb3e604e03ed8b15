"""Log-linear histogram: indexing identical to HdrHistogram_py, ranks, and .hlog round trips."""

import math

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from latscope.analysis.hdr import RELATIVE_ERROR, LogLinearHistogram, read_hlog, write_hlog


def test_index_matches_hdrhistogram():
    # reference: hdrh's own per-value functions (3 significant digits, lowest 1)
    ref = HdrHistogram(1, 2 ** 40, 3)
    rng = np.random.default_rng(0)
    v = np.unique(np.concatenate([np.arange(0, 5000), rng.integers(0, 2 ** 40, 5000),
                                  2 ** np.arange(40) - 1, 2 ** np.arange(40)]))
    assert LogLinearHistogram.index_of(v).tolist() == [ref._counts_index_for(int(x)) for x in v]
    assert LogLinearHistogram.highest_equivalent(v).tolist() == \
        [ref.get_highest_equivalent_value(int(x)) for x in v]
    assert LogLinearHistogram.lowest_equivalent(v).tolist() == \
        [ref.get_lowest_equivalent_value(int(x)) for x in v]
    assert LogLinearHistogram().counts.size == ref.counts_len


def test_relative_error_bound():
    v = np.arange(1, 2_000_000, 997)
    width = LogLinearHistogram.highest_equivalent(v) - LogLinearHistogram.lowest_equivalent(v)
    assert np.all(width <= v * RELATIVE_ERROR)
    assert RELATIVE_ERROR == 1 / 1024


def test_ranks_hand_computed():
    h = LogLinearHistogram()
    h.record(np.array([1, 2, 3, 1000, 5000]))
    # 5000 lies in the bucket [5000, 5003] (width 4 above 4096); values below 2048 are exact
    assert [h.value_at_rank(r) for r in range(1, 6)] == [1, 2, 3, 1000, 5003]
    assert h.value_at_rank(5, edge="low") == 5000
    assert h.value_at_rank(5, edge="mid") == 5001.5
    with pytest.raises(ValueError, match=r"rank must be in \[1, 5\]"):
        h.value_at_rank(6)


def test_record_range_checked():
    h = LogLinearHistogram(highest=1000)
    with pytest.raises(ValueError, match=r"values must lie in \[0, 1000\]"):
        h.record(np.array([5, 1001]))
    with pytest.raises(ValueError, match="highest must be between 2 and 2\\*\\*52, not 1"):
        LogLinearHistogram(highest=1)


def test_add():
    a, b = LogLinearHistogram(), LogLinearHistogram()
    a.record(np.array([10, 20]))
    b.record(np.array([20, 30000]))
    a.add(b)
    assert a.total == 4 and a.value_at_rank(3) == 20


def test_hlog_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    v = rng.integers(100, 100_000, 10_000)
    h = LogLinearHistogram()
    h.record(v)
    path = tmp_path / "x.hlog"
    write_hlog(path, [("rx.udp", 0.0, 1.0, h.to_hdrh())], comment="values in ticks")
    assert path.read_text().splitlines()[0] == "#values in ticks"
    back = read_hlog(path)
    assert len(back) == 1 and back[0].get_tag() == "rx.udp"
    assert back[0].get_total_count() == v.size
    # every percentile read by hdrh equals ours within the histogram's relative error
    for p in (50, 90, 99, 99.9):
        ours = h.value_at_rank(int(np.ceil(p / 100 * v.size)))
        assert back[0].get_value_at_percentile(p) == pytest.approx(ours, rel=2 * RELATIVE_ERROR)


@pytest.mark.parametrize("tick_hz", [200_000_000, 320_000_000, 1_000_000_000])
def test_hlog_export_keeps_every_value_in_its_bucket(tmp_path, tick_hz):
    # An analysis's .hlog carries its latencies in whole ns binned once: read back with PyPI
    # hdrhistogram's own log reader, every true value (in ns; at 320 MHz the nearest ns of
    # k * 3.125) lies in a bucket whose count equals the number of true values in it, and every
    # percentile is within the documented RELATIVE_ERROR of the exact order statistic.
    from latscope.analysis.stats import describe
    rng = np.random.default_rng(tick_hz % 1000 + 3)
    ticks = np.concatenate([rng.integers(1, 400_000, 20_000), [1, 2, 1023, 1024, 2047, 2048]])
    s = describe(ticks, tick_hz=tick_hz, exact_limit=100, ns_histogram=True)
    per_tick = 1e9 / tick_hz
    true_ns = np.rint(ticks * per_tick).astype(np.int64)
    path = tmp_path / "x.hlog"
    write_hlog(path, [("rx.udp", 0.0, 1.0, s.ns_histogram.to_hdrh())])
    (back,) = read_hlog(path)
    assert back.get_total_count() == ticks.size
    low = np.array([back.get_lowest_equivalent_value(int(v)) for v in true_ns])
    high = np.array([back.get_highest_equivalent_value(int(v)) for v in true_ns])
    assert np.all(low <= true_ns) and np.all(true_ns <= high)
    for lo in np.unique(low)[:: max(1, len(np.unique(low)) // 300)]:
        assert back.get_count_at_value(int(lo)) == int(np.count_nonzero(low == lo))
    exact = np.sort(true_ns)
    for p in (50, 90, 99, 99.9, 99.99):
        rank = math.ceil(p / 100 * exact.size)
        assert back.get_value_at_percentile(p) == pytest.approx(exact[rank - 1],
                                                                 rel=RELATIVE_ERROR)
