"""The sigrok path as a user types it: ``latscope analyze FILE.sr --map`` directly, and
``latscope import`` then ``latscope analyze``, give the same statistics; where sigrok-cli is
installed, its stock ``jitter`` decoder gives the same per-packet latencies (an implementation
nobody here wrote)."""

import json

import numpy as np
import pytest

from latscope.analysis.sigrokref import have_sigrok_cli, sigrok_jitter, write_sr
from latscope.analysis.synth import SyntheticSpec, synthetic_chunks
from latscope.cli import main

MAP = "rx_dv=rx_dv,m_udp=m_udp"


@pytest.fixture(scope="module")
def sr_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sr") / "bench.sr"
    write_sr(str(path), synthetic_chunks(500 * 10, spec=SyntheticSpec(gap=2000), seed=5),
             samplerate=100_000_000,
             probes={0: "rx_dv", 1: "tx_en", 3: "m_isr", 5: "m_udp", 7: "m_send"})
    return path


def _analyze_json(capsys, *argv):
    assert main(["analyze", *argv, "--measure", "rx.udp", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["measurements"]["rx.udp"]


def test_direct_and_imported_paths_agree(sr_file, tmp_path, capsys):
    direct = _analyze_json(capsys, str(sr_file), "--map", MAP)
    lsc = tmp_path / "imported.lsc"
    assert main(["import", str(sr_file), "--map", MAP, "-o", str(lsc)]) == 0
    capsys.readouterr()
    imported = _analyze_json(capsys, str(lsc))
    assert direct["n"] == imported["n"] == 500
    for key in ("mean_ns", "min_ns", "max_ns", "p50_ns", "p99_ns", "p999_ns", "p50_ci_ns"):
        assert direct[key] == imported[key], key
    if not have_sigrok_cli():
        pytest.skip("sigrok-cli is not installed (Debian package sigrok-cli): the check "
                    "against its jitter decoder did not run")
    start, stop = sigrok_jitter(str(sr_file), "rx_dv", "m_udp")
    ns = (stop - start) * 10.0                     # 100 MHz: one sample is 10 ns
    assert len(ns) == 500
    assert direct["min_ns"] == ns.min() and direct["max_ns"] == ns.max()
    assert direct["mean_ns"] == pytest.approx(np.mean(ns), rel=1e-12)
