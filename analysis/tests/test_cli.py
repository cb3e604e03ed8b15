"""``latscope analyze``, ``compare``, ``report`` end to end, through ``latscope.cli.main``."""

import json
import pathlib

import numpy as np
import pytest

from latscope.cli import main

simbench = pytest.importorskip("latscope.capture.sim.simbench")
capfile = pytest.importorskip("latscope.capture.files.capfile")

ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")


def _capture(path, profile, n=800, seed=1):
    run = simbench.simulate(profile, n, seed=seed)
    t = run.truth
    meta = {"tick_hz": run.meta["tick_hz"], "channels": {str(k): v for k, v in enumerate(ROLES)},
            "markers": run.meta["markers"], "config": profile,
            "frame_bytes": run.meta["frame_bytes"]}
    with capfile.CaptureWriter(str(path), meta, fsync=False) as w:
        w.append_events(t["time"], t["channel"], t["rising"])
    return str(path), run


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    return {p: _capture(d / f"{p}.lsc", p) for p in ("gem-64", "gem-1024", "el-dm-64")}


def test_analyze_json(captures, capsys):
    path, run = captures["gem-64"]
    assert main(["analyze", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    m = doc["measurements"]["rx.udp"]
    for key in ("n", "mean_ns", "std_ns", "min_ns", "max_ns", "p50_ns", "p99_ns", "p999_ns",
                "p50_ci_ns", "p99_ci_ns", "p999_ci_ns", "resolution_ns"):
        assert key in m
    tick_ns = 1e9 / run.meta["tick_hz"]                 # 1.25 ns on the default bench
    truth_ns = run.truth["ticks/rx.udp"] * tick_ns
    assert m["n"] == 800
    assert m["min_ns"] == truth_ns.min() and m["max_ns"] == truth_ns.max()
    assert m["mean_ns"] == pytest.approx(truth_ns.mean(), rel=1e-12)
    assert doc["resolution_ns"] == tick_ns
    assert "rx.fast" in doc["unavailable"]


def test_analyze_table_and_measure(captures, capsys):
    path, _ = captures["gem-64"]
    assert main(["analyze", path, "--measure", "rx.isr", "tx.wire"]) == 0
    out = capsys.readouterr().out
    assert "resolution 1.250 ns" in out and "rx.isr" in out and "tx.wire" in out
    assert "rx.udp " not in out


def test_analyze_hlog(captures, tmp_path, capsys):
    from latscope.analysis.hdr import read_hlog
    path, run = captures["gem-64"]
    out = tmp_path / "x.hlog"
    assert main(["analyze", path, "--hlog", str(out)]) == 0
    hists = {h.get_tag(): h for h in read_hlog(out)}
    assert set(hists) == {"rx.isr", "rx.copy", "rx.udp", "tx.wire", "tx.xmit"}
    assert hists["rx.udp"].get_total_count() == 800
    # median in ns within the histogram's 0.1 % (plus rounding to whole ns)
    true_med = np.sort(run.truth["ticks/rx.udp"])[399] * 1e9 / run.meta["tick_hz"]
    assert hists["rx.udp"].get_value_at_percentile(50) == pytest.approx(true_med, rel=2e-3)


def test_errors_exit_2(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "missing.lsc")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "d.toml"
    bad.write_text("[measurement.x]\nspan = 'nonsense'\n")
    (tmp_path / "c.lsc").write_bytes(b"")
    assert main(["analyze", str(tmp_path / "c.lsc"), "--definitions", str(bad)]) == 2
    assert "span must be 'START -> STOP'" in capsys.readouterr().err


def test_unknown_measure(captures, capsys):
    path, _ = captures["gem-64"]
    assert main(["analyze", path, "--measure", "rx.bogus"]) == 2
    assert "unknown measurement(s) rx.bogus" in capsys.readouterr().err


def test_compare_config(captures, capsys):
    paths = [captures["gem-64"][0], captures["el-dm-64"][0]]
    assert main(["compare", *paths, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"] == "gem-64"
    rx = next(c for c in doc["comparisons"] if c["measurement"] == "rx.udp")
    # paper Table I: Rx UDP 64 B GEM 7.48 µs vs EL DM 2.95 µs: EL DM is ~4.5 µs faster
    assert rx["mean_upper_ns"] < -4000 and rx["cliffs_delta"] < -0.9
    assert doc["groups"][0]["title"] == "MACs at 64 B frames"
    assert main(["compare", *paths]) == 0
    out = capsys.readouterr().out
    assert "Cliff" in out and "MACs at 64 B frames: differences against gem-64 (µs" in out
    assert "Δmean µs [95% CI]" in out


def test_compare_tells_same_labelled_inputs_apart(captures, tmp_path, capsys):
    """Two captures labelled gem-64 in different folders: the tables name their paths."""
    import shutil
    (tmp_path / "run2").mkdir()
    copy = shutil.copy(captures["gem-64"][0], tmp_path / "run2" / "gem-64.lsc")
    assert main(["compare", captures["gem-64"][0], str(copy)]) == 0
    out = capsys.readouterr().out
    assert "repeated captures of gem-64: differences against gem-64 [" in out
    parent = pathlib.Path(captures["gem-64"][0]).parent.name
    assert f"gem-64 [run2/gem-64.lsc] − gem-64 [{parent}/gem-64.lsc]" in out


def test_compare_size(captures, capsys):
    paths = [captures["gem-64"][0], captures["gem-1024"][0]]
    assert main(["compare", "--by", "size", *paths, "--json"]) == 0
    fits = json.loads(capsys.readouterr().out)
    rx = next(f for f in fits if f["measurement"] == "rx.udp")
    assert rx["configuration"] == "gem" and rx["sizes"] == [64, 1024]
    assert rx["per_byte_ns"] > 0 and rx["bandwidth_mb_s"] == pytest.approx(
        1000 / rx["per_byte_ns"])
    assert main(["compare", "--by", "size", captures["gem-64"][0],
                 captures["el-dm-64"][0]]) == 2
    assert "two or more frame sizes" in capsys.readouterr().err


@pytest.mark.slow
def test_report(captures, tmp_path, capsys):
    out = tmp_path / "rep"
    paths = [captures["gem-64"][0], captures["gem-1024"][0]]
    assert main(["report", *paths, "-o", str(out)]) == 0
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert html.count("data:image/png;base64,") >= 10
    assert "src=\"http" not in html and "<link" not in html       # self-contained
    for title in ("Table I form", "stage waterfall", "Packet-size regression",
                  "frame sizes within gem: differences against gem-64"):
        assert title in md
    assert "(rx.udp-spectrum.png)" in md and (out / "rx.udp-spectrum.png").exists()


def test_damaged_captures(capsys):
    """fixtures/damaged (made by the capture part): a file cut short is analysed with a warning;
    a file whose time runs backwards is refused with a pointer to latscope verify."""
    from latscope.analysis.api import repository_root
    root = repository_root()
    if root is None or not (pathlib.Path(root) / "fixtures/damaged/killed.lsc").exists():
        pytest.skip("fixtures/damaged is not present")
    assert main(["analyze", f"{root}/fixtures/damaged/killed.lsc"]) == 0
    assert "input damaged: truncated" in capsys.readouterr().err
    assert main(["analyze", f"{root}/fixtures/damaged/backwards.lsc"]) == 2
    err = capsys.readouterr().err
    assert "non-decreasing time order" in err and "latscope verify" in err


def test_analyze_explain_per_packet_and_hgrm(captures, tmp_path, capsys):
    """--explain N prints the N slowest packets per measurement with their windows (the first
    is the measurement's maximum); --per-packet and --hgrm write their files."""
    path, _run = captures["gem-64"]
    rows, hgrm = tmp_path / "p.csv", tmp_path / "d.hgrm"
    assert main(["analyze", path, "--json", "--per-packet", str(rows), "--hgrm", str(hgrm),
                 "--measure", "rx.isr"]) == 0
    doc = json.loads(capsys.readouterr().out)
    n = doc["measurements"]["rx.isr"]["n"]
    lines = rows.read_text().splitlines()
    assert lines[0].startswith("start_edge,packet,start_tick,start_s,rx.isr_ns,rx.isr_status")
    assert sum(1 for ln in lines[1:] if ln.endswith(",ok")) == n
    assert f"Total count    = {n:12d}]" in hgrm.read_text()
    assert main(["analyze", path, "--measure", "rx.isr", "--explain", "2"]) == 0
    out = capsys.readouterr().out
    assert f"rx.isr: the 2 slowest of {n:,} packets" in out
    first = next(ln for ln in out.splitlines() if ln.startswith("#1 packet"))
    max_us = doc["measurements"]["rx.isr"]["max_ns"] / 1000
    assert f": {max_us:.3f} µs (slower than" in first
    assert "rx_dv falling" in out and "rx.isr rising" in out
    assert main(["analyze", path, "--explain", "0"]) == 2
    assert "--explain must be a positive number of packets, not 0" in capsys.readouterr().err


def test_analyze_window_matches_an_exported_window(captures, tmp_path, capsys):
    """analyze --from/--to gives, measurement for measurement, what analysing the same window
    exported by ``latscope export`` gives (both keep the events with from <= t < to): the
    window is applied before the statistics, and the JSON says it was."""
    path, _run = captures["gem-64"]
    window = ["--from", "30ms", "--to", "0.3s"]
    part = tmp_path / "part.csv"
    assert main(["export", path, *window, "-o", str(part)]) == 0
    capsys.readouterr()
    assert main(["analyze", str(part), "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert main(["analyze", path, *window, "--json"]) == 0
    cut = json.loads(capsys.readouterr().out)
    assert main(["analyze", path, "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert cut["window"] == {"from_s": 0.03, "to_s": 0.3, "start_tick": 24_000_000,
                             "stop_tick": 240_000_000, "events": exported["events"]}
    assert whole["window"] is None
    keys = ("n", "mean_ns", "min_ns", "max_ns", "p50_ns", "p99_ns", "missed", "spurious")
    for name, m in exported["measurements"].items():
        assert {k: cut["measurements"][name].get(k) for k in keys} == \
            {k: m.get(k) for k in keys}, name
        assert 0 < m["n"] < whole["measurements"][name]["n"]
    assert main(["analyze", path, *window]) == 0
    assert "window: events from 0.03 s to 0.3 s (--from/--to" in capsys.readouterr().out


@pytest.mark.parametrize("window, message", [
    (["--from", "2ms", "--to", "1ms"], "the window is empty: --to must be later than --from"),
    (["--from", "5s"], "The --from/--to window must hold events of the capture"),
    (["--to", "3 parsecs"], "not a time: '3 parsecs'"),
])
def test_a_bad_window_is_one_line_and_exit_2(captures, tmp_path, capsys, window, message):
    path, _run = captures["gem-64"]
    for argv in (["analyze", path], ["report", path, "-o", str(tmp_path / "r")]):
        assert main([*argv, *window]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
