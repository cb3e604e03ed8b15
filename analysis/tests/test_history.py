"""The trend: percentiles per run equal the analysis' own, change points at planted steps, the
calibrated rule's false-alarm rate on series without change, the figure and the store path."""

import math

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import history as h
from latscope.analysis import store
from latscope.analysis.stats import quantile_of_sorted

pytest.importorskip("ruptures", reason="the trend needs ruptures (pip install ruptures)")


def _runs(k, n, seed, step_at=None, step=1.0, lab=0.0):
    """``k`` runs of ``n`` packets; from ``step_at`` on the tail is ``step`` times longer; each
    run shifted by a factor drawn with sd ``lab`` (run-to-run variation of a lab)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(k):
        scale = 40 * (step if step_at is not None and i >= step_at else 1.0)
        out.append((1000 + rng.gamma(4, scale, n)) * (1 + rng.normal(0, lab)))
    return out


def test_points_hold_each_runs_percentiles_and_intervals():
    runs = _runs(5, 3000, 1)
    hist = h.history(runs, list("abcde"), percentiles=(50, 99.9), resamples=20, alpha=0.05)
    for run, point in zip(runs, hist.points, strict=True):
        assert point.quantiles[99.9] == quantile_of_sorted(np.sort(run), 0.999)
        assert point.quantiles[50.0] == quantile_of_sorted(np.sort(run), 0.5)
        assert point.n == 3000
    assert hist.points[0].quantiles[99.9][2] is None        # 3000 < 3688: no upper bound
    p50 = [p.quantiles[50.0][0] for p in hist.points]
    assert hist.step_ns[50.0] == np.median(np.abs(np.diff(p50)))
    assert math.isnan(hist.half_width_ns[99.9])             # no point has a finite interval


def test_a_step_is_found_where_it_was_planted():
    runs = _runs(16, 5000, 2, step_at=9, step=1.2, lab=0.003)
    hist = h.history(runs, [f"c{i:02d}" for i in range(16)], resamples=60)
    assert [c.key for c in hist.changes] == ["c09"]
    change = hist.changes[0]
    assert change.after_ns[99.0] > change.before_ns[99.0] * 1.05
    assert hist.score > hist.penalty


def _false_alarms(trials, lab):
    alarms = 0
    for t in range(trials):
        hist = h.history(_runs(10, 1500, 100 + t, lab=lab), [str(i) for i in range(10)],
                         resamples=40, alpha=0.1, seed=t)
        alarms += bool(hist.changes)
    return alarms


@pytest.mark.slow
@pytest.mark.parametrize("lab", [0.0, 0.01])
def test_false_alarm_rate_holds_with_and_without_run_to_run_variation(lab):
    """alpha = 0.1 on 100 series without change: alarms at most the 99.9 % point of
    binomial(100, 0.1) = 20 (scipy.stats.binom.ppf(0.999, 100, 0.1)), with a lab whose runs vary
    by 1 % (more than their packets do) as without."""
    assert _false_alarms(100, lab) <= 20


def test_few_points_have_no_change_points_and_bad_input_is_refused():
    hist = h.history(_runs(3, 100, 3), ["a", "b", "c"])
    assert hist.changes == [] and hist.penalty is None and "at least 4" in hist.notes[0]
    with pytest.raises(LatscopeError, match="history needs one key per point"):
        h.history(_runs(3, 100, 3), ["a"])
    with pytest.raises(LatscopeError, match="resamples must be at least 1/alpha = 20"):
        h.calibrate_penalty(_runs(5, 100, 3), (99,), resamples=10, alpha=0.05)


def test_history_from_a_store_by_label_and_its_figure(tmp_path):
    pytest.importorskip("duckdb", reason="the results store needs duckdb")
    runs = _runs(8, 2000, 4, step_at=5, step=1.3)
    for i, run in enumerate(runs):
        for half in (run[:1000], run[1000:]):            # two runs per commit, pooled
            store.append_latencies(tmp_path, {"rx.udp": half}, labels={"commit": f"k{i}"},
                                   time=f"2026-11-{i + 1:02d}T10:00:00Z")
    hist = h.store_history(tmp_path, "rx.udp", by="commit", resamples=40)
    assert [p.key for p in hist.points] == [f"k{i}" for i in range(8)]
    assert all(p.n == 2000 and len(p.run_ids) == 2 for p in hist.points)
    # the planted step comes first; with three points after it, PELT may also cut a lone
    # point (the rule's rate holds for series without change, not for where else it cuts)
    assert hist.changes[0].key == "k5"
    data = hist.to_dict()
    assert data["changes"][0]["key"] == "k5" and data["points"][0]["p99_ns"] > 0
    assert data["changes"][0]["labels"] == {"commit": "k5"}
    png = h.history_figure(hist)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(LatscopeError, match="--by must be 'time' or a label of the store"):
        h.store_history(tmp_path, "rx.udp", by="branch")
    with pytest.raises(LatscopeError, match="no packets of 'rx.isr'"):
        h.store_history(tmp_path, "rx.isr")
