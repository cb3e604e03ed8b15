"""``latscope gate`` and ``latscope history`` as command modules (``add_arguments``, ``run``):
captures and store selections in, verdicts, files and exit statuses out."""

import argparse
import dataclasses
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import store
from latscope.analysis.definitions import CHANNEL_ROLES
from latscope.analysis.synth import SyntheticSpec, synthetic_events
from latscope.capture.files import capfile
from latscope.commands import gate as gate_cmd
from latscope.commands import history as history_cmd

pytest.importorskip("duckdb", reason="the results store needs duckdb")
MARKERS = {"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"}


def _parse(module, argv):
    parser = argparse.ArgumentParser(prog=f"latscope {module.__name__.rsplit('.', 1)[1]}")
    module.add_arguments(parser)
    return parser.parse_args(argv)


def _capture(path, n, seed, udp_scale=40.0):
    spec = dataclasses.replace(SyntheticSpec(), udp=(2200, 4.0, udp_scale))
    t, c, r, _ = synthetic_events(n, spec=spec, seed=seed)
    meta = {"tick_hz": spec.tick_hz, "channels": {str(k): v for k, v in CHANNEL_ROLES.items()},
            "markers": MARKERS, "label": "gem-64"}
    with capfile.CaptureWriter(str(path), meta, fsync=False, overwrite=True) as writer:
        writer.append_events(t, c, r)
    return str(path)


def test_gate_on_two_captures(tmp_path, capsys):
    base = _capture(tmp_path / "base.lsc", 6000, 1)
    same = _capture(tmp_path / "same.lsc", 6000, 2)
    slow = _capture(tmp_path / "slow.lsc", 6000, 3, udp_scale=60.0)
    assert gate_cmd.run(_parse(gate_cmd, [base, same])) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    status = gate_cmd.run(_parse(gate_cmd, [base, slow, "--junit", str(junit), "--markdown",
                                            str(md), "--json"]))
    assert status == 1
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "regression"
    failed = {c["measure"] for c in data["checks"] if c["status"] == "regression"}
    assert failed == {"rx.udp"}
    root = ET.parse(junit).getroot()
    assert int(root.get("failures")) == sum(c["status"] == "regression" for c in data["checks"])
    assert md.read_text().startswith("### latscope gate: **REGRESSION**")
    # --measure may name a stage (rx.udp - rx.isr here), judged like a measurement
    defs = tmp_path / "defs.toml"
    defs.write_text('[measurement."rx.isr"]\nspan = "rx_dv falling -> m_isr rising"\n'
                    '[measurement."rx.udp"]\nspan = "rx_dv falling -> m_udp rising"\n'
                    '[stage."rx.stack"]\nspan = "rx.isr -> rx.udp"\n')
    status = gate_cmd.run(_parse(gate_cmd, [base, slow, "--definitions", str(defs),
                                            "--measure", "rx.stack", "--json"]))
    data = json.loads(capsys.readouterr().out)
    assert status == 1 and {c["measure"] for c in data["checks"]} == {"rx.stack"}


def test_gate_on_store_selections_with_a_budget(tmp_path, capsys):
    rng = np.random.default_rng(5)
    for commit, scale, n in (("a", 1.0, 5000), ("b", 1.0, 5000), ("c", 1.2, 5000),
                             ("tiny", 1.0, 300)):
        store.append_latencies(tmp_path / "s", {"rx.udp": 1000 + rng.gamma(4, 40 * scale, n)},
                               labels={"commit": commit})
    budget = tmp_path / "budget.toml"
    budget.write_text('relative = ["+3 % at p99"]\nmin_effect = "10 ns"\n')

    def gate(base, cand, *extra):
        return gate_cmd.run(_parse(gate_cmd, ["--store", str(tmp_path / "s"), "--baseline",
                                              f"commit='{base}'", "--candidate",
                                              f"commit='{cand}'", "--budget", str(budget),
                                              *extra]))
    assert gate("a", "b") == 0
    assert gate("a", "c") == 1
    assert gate("a", "tiny", "--measure", "rx.udp") == 3         # p99 of 300 cannot be bounded
    out = capsys.readouterr().out
    assert "it needs 435 candidate packets" in out               # stats.n_required(0.99, 0.975)


@pytest.mark.parametrize(("argv", "message"), [
    ([], "gate needs a BASELINE and a CANDIDATE capture"),
    (["a.lsc"], "gate needs a BASELINE and a CANDIDATE capture"),
    (["a.lsc", "b.lsc"], "a.lsc: no such file"),
    (["--baseline", "commit='a'"], "--baseline and --candidate select runs of a store"),
    (["--store", "S"], "gate --store needs --baseline COND and --candidate COND"),
    (["a.lsc", "--store", "S"], "gate takes two captures or --store"),
])
def test_gate_usage_errors_are_latscope_errors(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LatscopeError, match=message.replace("(", r"\(")):
        gate_cmd.run(_parse(gate_cmd, argv))


def test_history_command(tmp_path, capsys):
    rng = np.random.default_rng(6)
    for k in range(8):
        scale = 40 * (1.3 if k >= 5 else 1.0)
        store.append_latencies(tmp_path, {"rx.udp": 1000 + rng.gamma(4, scale, 3000)},
                               labels={"commit": f"k{k}"}, time=f"2026-11-{k + 1:02d}T10:00:00Z")
    png = tmp_path / "h.png"
    argv = [str(tmp_path), "--measure", "rx.udp", "--by", "commit", "--resamples", "40"]
    assert history_cmd.run(_parse(history_cmd, argv + ["--json", "--plot", str(png)])) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["changes"][0]["labels"] == {"commit": "k5"}
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert history_cmd.run(_parse(history_cmd, argv)) == 0
    text = capsys.readouterr().out
    assert "--- change point at commit=k5" in text
    assert text.index("change point at commit=k5") < text.index("\nk5 ")
    with pytest.raises(LatscopeError, match="a percentile must be p followed by a number"):
        history_cmd.run(_parse(history_cmd, argv + ["--percentiles", "p50,median"]))
