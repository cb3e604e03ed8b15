"""Tests of ``latscope demo`` (capture/demo.py)."""

import json
import os

import numpy as np
import pytest

from latscope import cli
from latscope.capture import capfile, demo, simbench


def test_demo_captures_compares_and_checks_truth(tmp_path, capsys):
    out = tmp_path / "demo"
    status = cli.main(["demo", "--profiles", "el-dm-64,fast-track-64", "--packets", "600",
                       "--jobs", "1", "--engine", "model", "--out", str(out), "--no-report"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    for name in ("el-dm-64", "fast-track-64"):
        path = out / f"{name}.lsc"
        assert path.exists() and os.path.exists(capfile.truth_path(path))
        with capfile.open_capture(path) as cap:
            assert cap.metadata["instrument"]["simulated"] is True
            assert cap.metadata["instrument"]["engine"] == "model"
            assert cap.metadata["simbench"]["profile"] == name
            assert cap.markers == simbench.load_profile(name).markers
            assert cap.n_events == 300 * (14 if name == "el-dm-64" else 12)
            assert not cap.losses
    # The table has a row per stage, with the paper's Table I figure where the profile has one.
    table = captured.out
    assert "el-dm-64" in table and "fast-track-64" in table
    assert "2.95 ± 0.20" in table          # Table I, Rx UDP, EL DM, 64 B
    assert "1.51 ± 0.20" in table          # fast track 64 B (3σ assumed)
    assert "600 packets" in table
    assert "truth ok" in captured.err
    assert not (out / "report.html").exists()


@pytest.mark.slow
def test_demo_writes_the_report(tmp_path, capsys):
    out = tmp_path / "demo"
    status = cli.main(["demo", "--profiles", "el-so-64", "--packets", "100", "--jobs", "1",
                       "--engine", "model", "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert (out / "report.html").exists() and (out / "report.md").exists()
    assert "report: " in captured.out and "report.html" in captured.out


def test_demo_json_and_statistics_agree_with_the_truth(tmp_path, capsys):
    out = tmp_path / "demo"
    status = cli.main(["demo", "--profiles", "gem-256", "--packets", "2000", "--jobs", "1",
                       "--engine", "model", "--out", str(out), "--json", "--no-report"])
    assert status == 0
    result = json.loads(capsys.readouterr().out)
    (capture,) = result["captures"]
    assert capture["check"]["ok"] and capture["events"] == capture["expected"] == 2000 * 14
    with capfile.open_capture(out / "gem-256.lsc") as cap:
        truth = cap.truth()["simbench"]
    rows = {row["stage"]: row for row in result["table"]}
    tick_ns = 1e9 / 320e6
    for stage in ("rx.isr", "rx.copy", "rx.udp", "tx.wire", "tx.xmit"):
        true_ns = truth[f"stage_{stage}"]
        # The capture's mean is the true mean within one tick (every latency is within a tick).
        assert abs(rows[stage]["mean_us"] * 1e3 - np.mean(true_ns)) < tick_ns, stage
        assert rows[stage]["n"] == 2000


def test_demo_runs_two_captures_in_parallel(tmp_path, capsys):
    results, checks = demo.run_demo(["el-so-64", "el-so-256"], 200, str(tmp_path),
                                    engine="model", jobs=2, log=lambda message: None)
    assert checks == []
    assert [r["profile"] for r in results] == ["el-so-64", "el-so-256"]
    assert all(r["check"]["ok"] and r["packets"] == 100 for r in results)


def test_demo_rejects_bad_arguments(tmp_path, capsys):
    assert cli.main(["demo", "--profiles", "gem-65", "--out", str(tmp_path)]) == 2
    assert "no size 65" in capsys.readouterr().err
    assert cli.main(["demo", "--packets", "3", "--out", str(tmp_path)]) == 2
    assert "--packets must be at least 12" in capsys.readouterr().err


def test_table_format():
    rows = [{"config": "gem-64", "stage": "rx.udp", "n": 12345, "mean_us": 7.481,
             "three_sigma_us": 0.349, "p50_us": 7.45, "p99_us": 7.9, "p999_us": 9.2,
             "max_us": 12.0, "paper": "7.48 ± 0.35", "resolution_ns": 3.125,
             "source": "analysis"}]
    text = demo.format_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["config", "stage", "n", "mean", "±", "3σ", "p50", "p99",
                                "p99.9", "max", "paper"]
    assert "12,345" in lines[2] and "7.48 ± 0.35" in lines[2] and "9.200" in lines[2]
