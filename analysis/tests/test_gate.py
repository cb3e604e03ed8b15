"""The regression gate: decisions on constructed samples with known answers, its false-alarm rate
under no change, the budget file, exit statuses and every renderer (JUnit checked by a parser)."""

import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import gate as g
from latscope.analysis.stats import n_required


def _sample(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return scale * (1000 + rng.gamma(4, 50, n))


def test_no_change_passes_and_a_ten_percent_slowdown_fails():
    budget = g.parse_budget({"relative": ["+5 % at p50", "+5 % at p99"]})
    same = g.gate({"rx.udp": _sample(20_000, 1)}, {"rx.udp": _sample(20_000, 2)}, budget)
    assert same.verdict == "pass"
    assert {c.status for c in same.checks} == {"pass"}
    slow = g.gate({"rx.udp": _sample(20_000, 1)}, {"rx.udp": _sample(20_000, 2, 1.10)}, budget)
    assert slow.verdict == "regression"
    assert [c.status for c in slow.checks] == ["regression", "regression"]
    c99 = slow.checks[1]
    # the interval is compare_samples' own, and the allowance 5 % of the baseline's p99
    assert c99.lower_ns > c99.allowed_ns == pytest.approx(0.05 * c99.baseline_ns, rel=1e-12)


def test_the_smallest_effect_worth_failing_on_raises_the_allowance():
    budget = g.parse_budget({"relative": ["+0 % at p50"], "min_effect": "200 ns"})
    base = _sample(20_000, 3)
    r = g.gate({"x": base}, {"x": base + 100}, budget)     # 100 ns slower, everywhere
    assert r.verdict == "pass" and r.checks[0].allowed_ns == 200.0
    r = g.gate({"x": base}, {"x": base + 300}, budget)
    assert r.verdict == "regression"


def test_a_percentile_the_sample_cannot_bound_is_not_judged():
    # 512 packets (the origin paper's n): p99.9 has no upper bound; a gate must not guess
    budget = g.parse_budget({"relative": ["+5 % at p99.9"]})
    need = n_required(0.999, math.sqrt(0.95))       # each side's interval at sqrt(0.95)
    assert need == 4368
    r = g.gate({"rx.udp": _sample(512, 1)}, {"rx.udp": _sample(512, 2)}, budget)
    (check,) = r.checks
    assert check.status == "undecidable" and r.verdict == "undecidable"
    assert check.needed == {"baseline": need, "candidate": need}
    assert "4,368 baseline packets" in check.reason
    assert g.exit_status(r.verdict) == 3
    # a bounded baseline: 50 % slower shows even in 512 candidate packets (the difference's
    # lower bound needs only the candidate's lower and the baseline's upper bound) ...
    r = g.gate({"rx.udp": _sample(5000, 1)}, {"rx.udp": _sample(512, 2, 1.5)}, budget)
    assert r.checks[0].status == "regression"
    # ... but no change cannot be shown to pass
    r = g.gate({"rx.udp": _sample(5000, 1)}, {"rx.udp": _sample(512, 2)}, budget)
    assert r.checks[0].status == "undecidable" and r.checks[0].needed == {"candidate": need}


def test_an_interval_across_the_allowance_is_inconclusive_and_passes():
    rng = np.random.default_rng(7)
    base = 1000 + rng.gamma(4, 50, 600)
    cand = base * 1.05 + rng.normal(0, 1, base.size)       # exactly at the allowance
    r = g.gate({"x": base}, {"x": cand}, g.parse_budget({"relative": ["+5 % at p99"]}))
    assert r.checks[0].status == "inconclusive" and r.verdict == "pass"


def test_absolute_limits():
    c = {"rx.udp": _sample(20_000, 4)}                     # p99 about 1.5 us
    p99 = float(np.quantile(c["rx.udp"], 0.99, method="inverted_cdf"))
    ok = g.gate({}, c, g.parse_budget({"absolute": [f"rx.udp p99 <= {p99 * 1.05:.0f} ns"]}))
    bad = g.gate({}, c, g.parse_budget({"absolute": [f"rx.udp p99 <= {p99 * 0.95:.0f} ns"]}))
    near = g.gate({}, c, g.parse_budget({"absolute": [f"rx.udp p99 <= {p99:.3f} ns"]}))
    short = g.gate({}, {"rx.udp": _sample(1000, 4)},
                   g.parse_budget({"absolute": ["rx.udp p99.9 <= 12 us"]}))
    assert [r.checks[0].status for r in (ok, bad, near, short)] == [
        "pass", "regression", "inconclusive", "undecidable"]
    assert bad.checks[0].candidate_ns == p99
    assert short.checks[0].needed == {"candidate": n_required(0.999, 0.95)}


def test_the_shift_rule_uses_mann_whitney_and_cliffs_delta():
    base = _sample(5000, 5)
    budget = g.parse_budget({"shift_delta": 0.1})
    assert g.gate({"x": base}, {"x": _sample(5000, 6)}, budget).verdict == "pass"
    r = g.gate({"x": base}, {"x": _sample(5000, 6) + 60}, budget)
    assert r.verdict == "regression" and "Cliff's delta" in r.checks[0].reason


def test_per_measure_overrides_replace_the_relative_rules():
    budget = g.parse_budget({"relative": ["+50 % at p99"],
                             "measure": {"rx.isr": {"relative": ["+1 % at p50"],
                                                    "min_effect": "0 ns"}}})
    base = {"rx.isr": _sample(20_000, 1), "rx.udp": _sample(20_000, 2)}
    cand = {"rx.isr": base["rx.isr"] * 1.10, "rx.udp": base["rx.udp"] * 1.10}
    r = g.gate(base, cand, budget)
    by = {c.measure: c for c in r.checks}
    assert by["rx.isr"].rule == "+1 % at p50" and by["rx.isr"].status == "regression"
    assert by["rx.udp"].rule == "+50 % at p99" and by["rx.udp"].status == "pass"


def test_false_alarm_rate_under_no_change():
    """With no change and a zero allowance, the interval is wholly above 0 in at most
    (1 - 0.95) / 2 of trials by its construction (compare_samples' joint coverage is >= 95 %).
    200 trials: the count is at most binomial(200, 0.025), whose 99.9 % point is 13."""
    budget = g.parse_budget({"relative": ["+0 % at p99"]})
    alarms = 0
    for k in range(200):
        r = g.gate({"x": _sample(1000, 2 * k)}, {"x": _sample(1000, 2 * k + 1)}, budget)
        alarms += r.verdict == "regression"
    assert alarms <= 13


def test_measurements_on_one_side_only_are_named():
    r = g.gate({"a": _sample(100, 1), "b": _sample(100, 2)}, {"a": _sample(100, 3),
                                                              "c": _sample(100, 4)})
    assert {c.measure for c in r.checks} == {"a"}
    assert r.notes == ["only the baseline has b (not judged)",
                       "only the candidate has c (not judged)"]
    r = g.gate({"a": _sample(5000, 1)}, {"a": _sample(5000, 2), "c": _sample(5000, 4)},
               g.parse_budget({"relative": ["+5 % at p99"], "absolute": ["c p50 <= 1 ms"]}))
    assert r.notes == [] and {c.measure for c in r.checks} == {"a", "c"}
    r = g.gate({"a": _sample(1, 1)}, {"a": _sample(5000, 2)},
               g.parse_budget({"relative": ["+5 % at p99"]}))
    assert r.checks[0].status == "undecidable"
    assert r.checks[0].needed == {"baseline": n_required(0.99, math.sqrt(0.95))}


def test_exit_status_is_a_pure_function_of_the_verdict():
    assert [g.exit_status(v) for v in ("pass", "regression", "usage", "undecidable")] == [
        0, 1, 2, 3]
    with pytest.raises(ValueError, match="verdict must be one of"):
        g.exit_status("maybe")
    assert g.GateResult([], "a", "b", 0.95).verdict == "undecidable"   # nothing judged


@pytest.mark.parametrize(("tables", "message"), [
    ({"relative": ["5 percent at p99"]}, "a relative rule must read like '+5 % at p99'"),
    ({"absolute": ["rx.udp p99 < 12 us"]}, "an absolute rule must read like"),
    ({"absolute": ["rx.udp p99 <= 12 parsecs"]}, "a duration must be a number and a unit"),
    ({"relative": ["+5 % at p100"]}, "a percentile must be p followed by a number in"),
    ({"relativ": ["+5 % at p99"]}, "budget keys must be among"),
    ({"confidence": 1.5, "relative": ["+5 % at p99"]}, "budget confidence must be in"),
    ({}, "a budget must have at least one rule"),
])
def test_bad_budgets_are_user_errors(tables, message):
    with pytest.raises(LatscopeError, match=message.replace("(", r"\(").replace("+", r"\+")):
        g.parse_budget(tables)


def test_budget_file(tmp_path):
    path = tmp_path / "budget.toml"
    path.write_text('confidence = 0.99\nmin_effect = "50 ns"\nrelative = ["+3 % at p99"]\n'
                    'absolute = ["rx.udp p99 <= 12 us"]\n[measure."rx.isr"]\n'
                    'relative = ["+10 % at p50"]\n')
    b = g.load_budget(path)
    assert (b.confidence, b.min_effect_ns) == (0.99, 50.0)
    assert [r.text for r in b.rules_for("rx.isr")[0]] == ["+10 % at p50"]
    assert [r.text for r in b.rules_for("rx.udp")[0]] == ["+3 % at p99", "rx.udp p99 <= 12 us"]
    path.write_text("relative = [")
    with pytest.raises(LatscopeError, match="is not valid TOML"):
        g.load_budget(path)


def _mixed_result():
    base = {"rx.udp": _sample(20_000, 1), "rx.isr": _sample(300, 2)}
    cand = {"rx.udp": _sample(20_000, 3, 1.1), "rx.isr": _sample(300, 4)}
    return g.gate(base, cand, g.parse_budget({"relative": ["+5 % at p50", "+5 % at p99.9"]}),
                  baseline_label="commit=abc", candidate_label="commit=def")


def test_renderers():
    r = _mixed_result()
    statuses = sorted(c.status for c in r.checks)
    assert statuses == ["inconclusive", "pass", "regression", "undecidable"]
    text = g.render_text(r)
    assert len(text.splitlines()) <= 24                     # one screen
    assert text.splitlines()[-1].startswith("verdict: REGRESSION (1 regression, 1 undecidable")
    data = json.loads(g.render_json(r))
    assert data["verdict"] == "regression" and data["exit_status"] == 1
    assert len(data["checks"]) == 4
    root = ET.fromstring(g.render_junit(r).encode())
    assert root.tag == "testsuites" and root.get("failures") == "1" and root.get("skipped") == "1"
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 4
    assert sum(case.find("failure") is not None for case in cases) == 1
    assert sum(case.find("skipped") is not None for case in cases) == 1
    md = g.render_markdown(r)
    assert md.startswith("### latscope gate: **REGRESSION**")
    assert md.count("\n| rx.") == 4 and "Not judged (too few packets to bound):" in md
