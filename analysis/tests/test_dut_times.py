"""Zephyr's own packet times beside the wire's stages (analysis/dut_times.py). Expected values
are worked by hand from the inputs (sums over counts, in ns); exact cases use ==."""
import math
from types import SimpleNamespace

import pytest

from latscope import LatscopeError
from latscope.analysis.dut_times import (
    DUT_QUANTITIES,
    dut_beside_wire,
    dut_times_beside_stats,
)


def test_mean_over_batches_and_difference():
    # 3 batches: 10 + 20 + 0 packets, 120 + 250 + 0 µs -> 370 µs / 30 = 12,333.33 ns
    r = dut_beside_wire([10, 20, 0], [120, 250, 0], 30, 20_000.0, quantity="rx_time")
    assert (r.quantity, r.stage, r.dut_n, r.wire_n) == ("rx_time", "rx.udp", 30, 30)
    assert r.dut_mean_ns == pytest.approx(370_000 / 30, abs=1e-9)
    assert r.difference_ns == pytest.approx(370_000 / 30 - 20_000, abs=1e-9)
    assert r.what == DUT_QUANTITIES["rx_time"][1]


def test_no_packets_gives_nan_and_json_null():
    r = dut_beside_wire([0], [0], 0, 0.0, quantity="tx_time")
    assert r.stage == "tx.wire" and math.isnan(r.dut_mean_ns) and math.isnan(r.difference_ns)
    d = r.to_dict()
    assert d["dut_mean_ns"] is None and d["difference_ns"] is None and d["dut_n"] == 0


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(LatscopeError, match="quantity must be one of"):
        dut_beside_wire([1], [1], 1, 1.0, quantity="rx")
    with pytest.raises(LatscopeError, match="non-negative and of one length"):
        dut_beside_wire([1, 2], [1], 1, 1.0, quantity="rx_time")
    with pytest.raises(LatscopeError, match="non-negative"):
        dut_beside_wire([-1], [1], 1, 1.0, quantity="rx_time")


def test_beside_stats_only_where_both_sides_have_packets():
    batches = [{"t_ns": 1, "rx_n": 0, "rx_us": 0, "tx_n": 4, "tx_us": 100},
               {"t_ns": 2, "rx_n": 0, "rx_us": 0, "tx_n": 1, "tx_us": 25}]
    stats = {"tx.wire": SimpleNamespace(n=5, mean_ns=30_000.0),
             "rx.udp": SimpleNamespace(n=5, mean_ns=9_000.0)}
    rows = dut_times_beside_stats(batches, stats)
    # rx: Zephyr timed no packet (a netctx or fast-track batch): no row
    assert [(r.quantity, r.dut_n, r.dut_mean_ns, r.difference_ns) for r in rows] == [
        ("tx_time", 5, 25_000.0, -5_000.0)]
    assert dut_times_beside_stats(batches, {}) == []
    # Zephyr timed 1 packet where the wire measured 30 (the control request of a fast-track
    # batch): a different population, left out; kept when the share is allowed.
    one = [{"rx_n": 1, "rx_us": 54, "tx_n": 0, "tx_us": 0}]
    wire = {"rx.udp": SimpleNamespace(n=30, mean_ns=1.0)}
    assert dut_times_beside_stats(one, wire) == []
    assert [r.dut_n for r in dut_times_beside_stats(one, wire, min_fraction=0.0)] == [1]
