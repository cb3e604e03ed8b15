"""A realistic campaign: 20 commits of one configuration measured into a results store, with a
regression of a few per cent at p99 of one stage planted from commit 12 on and run-to-run
variation like a lab's. The gate and the change-point rule must find it at commit 12 and raise
nothing before.

The runs are synthetic event streams (:mod:`latscope.analysis.synth`), analysed by the same
engine as captures and stored by :func:`store.store_analysis`, so the whole path from edges to
verdict is exercised. Lab variation: each run's rx.udp offset varies with sd 0.4 % and its tail
scale with sd 1 % (another boot, another cache layout); the regression makes rx.udp's tail scale
1.3 times longer, which moves its p99 by about 5 % (measured below, not assumed)."""

import dataclasses

import numpy as np
import pytest

from latscope.analysis import api, gate, history, store
from latscope.analysis.synth import SyntheticSpec, synthetic_events

pytest.importorskip("duckdb", reason="the results store needs duckdb")
pytest.importorskip("ruptures", reason="the trend needs ruptures")

MARKERS = {"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"}
COMMITS = 20
REGRESSION_AT = 12
PACKETS = 8000


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign")
    rng = np.random.default_rng(2026)
    base = SyntheticSpec()
    for k in range(COMMITS):
        offset = round(base.udp[0] * (1 + rng.normal(0, 0.004)))
        scale = base.udp[2] * (1.3 if k >= REGRESSION_AT else 1.0) * (1 + rng.normal(0, 0.01))
        spec = dataclasses.replace(base, udp=(offset, base.udp[1], scale))
        t, c, r, _ = synthetic_events(PACKETS, spec=spec, seed=(7, k))
        a = api.from_events(t, c, r, tick_hz=spec.tick_hz, markers=MARKERS,
                            metadata={"tick_hz": spec.tick_hz, "label": "gem-64",
                                      "simulated": True})
        store.store_analysis(root, a, labels={"commit": f"c{k:02d}"},
                             time=f"2026-11-{k + 1:02d}T10:00:00Z")
    runs = [store.select(root, f"commit = 'c{k:02d}'").latencies for k in range(COMMITS)]
    return root, runs


def _p99(x):
    return float(np.quantile(x, 0.99, method="inverted_cdf"))


def test_the_planted_regression_is_a_few_per_cent_at_p99(campaign):
    _, runs = campaign
    before = np.median([_p99(r["rx.udp"]) for r in runs[:REGRESSION_AT]])
    after = np.median([_p99(r["rx.udp"]) for r in runs[REGRESSION_AT:]])
    assert 1.02 < after / before < 1.07


def test_the_gate_fails_first_at_commit_12(campaign):
    _, runs = campaign
    budget = gate.parse_budget({"relative": ["+2 % at p50", "+2 % at p99"]})
    against_previous = [gate.gate(runs[k - 1], runs[k], budget).verdict
                        for k in range(1, COMMITS)]
    against_first = [gate.gate(runs[0], runs[k], budget).verdict for k in range(1, COMMITS)]
    # commit k is index k - 1 of these lists
    assert against_previous == ["pass"] * (REGRESSION_AT - 1) + ["regression"] + \
        ["pass"] * (COMMITS - REGRESSION_AT - 1)
    assert against_first == ["pass"] * (REGRESSION_AT - 1) + \
        ["regression"] * (COMMITS - REGRESSION_AT)
    failing = gate.gate(runs[REGRESSION_AT - 1], runs[REGRESSION_AT], budget)
    assert {c.measure for c in failing.checks if c.status == "regression"} == {"rx.udp"}


def test_the_change_point_rule_finds_commit_12_in_rx_udp_only(campaign):
    root, _ = campaign
    udp = history.store_history(root, "rx.udp", by="commit", resamples=100)
    assert [c.key for c in udp.changes] == [f"c{REGRESSION_AT}"]
    assert udp.changes[0].labels == {"commit": f"c{REGRESSION_AT}"} and udp.simulated
    isr = history.store_history(root, "rx.isr", by="commit", resamples=100)
    assert isr.changes == []
