"""Per-packet columns and files, and HdrHistogram's percentile-distribution text
(:mod:`latscope.analysis.outputs`)."""

import csv

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import api, outputs
from latscope.analysis.synth import synthetic_chunks


@pytest.fixture(scope="module")
def analysis():
    t, c, r = next(iter(synthetic_chunks(20_000, chunk_events=1 << 20, seed=5)))
    return api.from_events(t, c, r, tick_hz=320_000_000, label="synth",
                           markers={"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"})


def test_per_packet_columns_match_the_analysis(analysis):
    cols = outputs.per_packet_columns(analysis.result)
    n = len(cols["packet"])
    assert n and all(len(v) == n for v in cols.values())
    for name, s in analysis.stats.items():
        ok = cols[f"{name}_status"] == "ok"
        # the statistics are made from exactly the ok packets' latencies (exact, same ticks)
        assert ok.sum() == s.n, name
        assert np.array_equal(np.sort(cols[f"{name}_ns"][ok]),
                              np.sort(analysis.latencies_ns(name))), name


def test_per_packet_csv_and_parquet(analysis, tmp_path):
    rows = outputs.write_per_packet(analysis.result, str(tmp_path / "p.csv"))
    with open(tmp_path / "p.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0][:4] == ["start_edge", "packet", "start_tick", "start_s"]
    assert len(table) == rows + 1
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
    assert outputs.write_per_packet(analysis.result, str(tmp_path / "p.parquet")) == rows
    assert pq.read_table(tmp_path / "p.parquet").num_rows == rows
    with pytest.raises(LatscopeError, match=r"Per-packet file must end in \.csv or \.parquet, "
                                            r"not '\.txt'"):
        outputs.write_per_packet(analysis.result, str(tmp_path / "p.txt"))


def test_hgrm_levels_follow_hdrhistogram():
    """The first levels of HdrHistogram's README example (outputPercentileDistribution with 5
    ticks per half distance): 0, 10, ..., 50, then halving steps 55, 60, ... 75, 77.5, ..."""
    expected = [0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80, 82.5, 85, 87.5, 88.75]
    assert outputs.hgrm_levels(1_000_000)[:len(expected)] == pytest.approx(expected, abs=1e-9)


def test_hgrm_text_values_are_order_statistics():
    values = np.arange(1, 1001) * 100.0          # 0.1 µs .. 100 µs, one of each
    lines = outputs.hgrm_text(values).splitlines()
    rows = [ln.split() for ln in lines[2:] if ln and not ln.startswith("#")]
    for row in rows[:-1]:
        value, level, count = float(row[0]), float(row[1]), int(row[2])
        assert count == max(1, int(np.ceil(level * 1000 - 1e-9)))
        assert value == pytest.approx(count * 0.1, abs=5e-4)     # printed to 3 decimals
        assert float(row[3]) == pytest.approx(1 / (1 - level), abs=0.01)
    assert rows[-1] == ["100.000", "1.000000000000", "1000"]
    assert "Total count    =         1000]" in lines[-2]
    with pytest.raises(LatscopeError):
        outputs.hgrm_text([])
