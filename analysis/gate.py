"""The regression gate: is a candidate slower than a baseline, per measurement and percentile?

Rule, per percentile ``p`` of a measurement and a budget (``docs/gate.md``):

* **relative** (``+5 % at p99``): the difference ``candidate - baseline`` at ``p`` has the
  distribution-free interval of :func:`latscope.analysis.compare.compare_samples` (each sample's
  order-statistic interval at ``sqrt(confidence)``). The allowance is ``max(5 % of the
  baseline's p99, min_effect)``. A **regression** is an interval wholly above the allowance; a
  **pass** an interval wholly at or below it; an interval across it is **inconclusive** (not shown
  to exceed: it passes, and says so).
* **absolute** (``rx.udp p99 <= 12 us``): the candidate's own interval at ``p``: a regression when
  its lower bound is above the limit, a pass when its upper bound is at or below it, else
  inconclusive.
* **shift** (``shift_delta = 0.1``, optional): Mann-Whitney's test of the same comparison; a
  regression when it rejects "no shift" at ``1 - confidence`` and Cliff's delta exceeds the
  allowance (the candidate's packets are later than the baseline's more often than that).
* **undecidable**: a bound the decision needs does not exist at this sample size (p99.9 of 512
  packets has no upper bound); the check names the packets each side would need
  (:func:`latscope.analysis.stats.n_required`) instead of judging.

The verdict is a regression if any check is one, else undecidable if any check is, else a
pass. :func:`exit_status` maps it to the command's exit status: 0 pass, 1 regression,
2 usage error, 3 undecidable.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> base = 1000 + rng.gamma(4, 50, 20_000)
>>> r = gate({"rx.udp": base}, {"rx.udp": base * 1.10 + rng.normal(0, 1, base.size)},
...          parse_budget({"relative": ["+5 % at p99"]}))
>>> r.verdict, exit_status(r.verdict), r.checks[0].status
('regression', 1, 'regression')
"""

import dataclasses
import json
import math
import re
import xml.etree.ElementTree as ET

import numpy as np

from latscope import LatscopeError
from latscope.analysis.compare import compare_samples
from latscope.analysis.stats import n_required, quantile_of_sorted
from latscope.analysis.units import time_unit
from latscope.userio import read_toml

__all__ = ["Rule", "Budget", "Check", "GateResult", "DEFAULT_BUDGET", "parse_budget",
           "load_budget", "parse_percentile", "parse_duration_ns", "gate", "exit_status",
           "EXIT_PASS", "EXIT_REGRESSION", "EXIT_USAGE", "EXIT_UNDECIDABLE", "render_text",
           "render_json", "render_junit", "render_markdown"]

EXIT_PASS, EXIT_REGRESSION, EXIT_USAGE, EXIT_UNDECIDABLE = 0, 1, 2, 3
PASS, INCONCLUSIVE, REGRESSION, UNDECIDABLE = "pass", "inconclusive", "regression", "undecidable"

_UNITS_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_DURATION = re.compile(r"\s*(?P<v>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>ns|us|µs|ms|s)\s*\Z")
_RELATIVE = re.compile(r"\s*\+?\s*(?P<pct>\d+(?:\.\d*)?)\s*%\s*at\s+(?P<p>p[\d.]+)\s*\Z")
_ABSOLUTE = re.compile(r"\s*(?P<m>\S+)\s+(?P<p>p[\d.]+)\s*<=\s*(?P<v>.+?)\s*\Z")


def parse_percentile(text):
    """``"p99" -> 99.0``, ``"p99.9"`` or ``"p999" -> 99.9``, ``"p9999" -> 99.99``.

    >>> [parse_percentile(t) for t in ("p50", "p99.9", "p999", "p9999")]
    [50.0, 99.9, 99.9, 99.99]
    """
    body = str(text).strip().lower().removeprefix("p")
    try:
        if "." not in body and len(body) > 2 and body.startswith("99"):
            body = body[:2] + "." + body[2:]
        p = float(body)
    except ValueError:
        p = math.nan
    if not 0 < p < 100:
        raise LatscopeError(f"a percentile must be p followed by a number in (0, 100), such as "
                            f"p99 or p99.9, not {text!r}")
    return p


def parse_duration_ns(text):
    """``"12 us" -> 12000.0`` (units ns, us, µs, ms, s).

    >>> parse_duration_ns("12 us"), parse_duration_ns("250ns")
    (12000.0, 250.0)
    """
    m = _DURATION.match(str(text))
    if not m:
        raise LatscopeError(f"a duration must be a number and a unit (ns, us, ms, s), such as "
                            f"'12 us', not {text!r}")
    return float(m["v"]) * _UNITS_NS[m["unit"]]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One budget rule: ``kind`` is ``relative`` (``limit`` a fraction, 0.05 = +5 %),
    ``absolute`` (``limit`` in ns) or ``shift`` (``limit``: Cliff's delta); ``measure`` None
    applies it to every measurement judged."""
    kind: str
    percent: float | None
    limit: float
    text: str
    measure: str | None = None


@dataclasses.dataclass(frozen=True)
class Budget:
    """What counts as slower: rules, the smallest slowdown worth failing on (ns), the
    confidence of every interval, and optionally the only measurements judged. ``overrides``:
    per measurement, relative rules and ``min_effect_ns`` replacing the defaults."""
    rules: tuple
    min_effect_ns: float = 0.0
    confidence: float = 0.95
    measures: tuple | None = None
    overrides: dict = dataclasses.field(default_factory=dict)

    def rules_for(self, measure):
        """``(rules, min_effect_ns)`` that apply to ``measure``."""
        own = self.overrides.get(measure, {})
        relative = own.get("relative")
        rules = []
        for r in self.rules:
            if r.measure not in (None, measure):
                continue
            if r.kind == "relative" and relative is not None:
                continue
            rules.append(r)
        rules += list(relative or ())
        return rules, own.get("min_effect_ns", self.min_effect_ns)


def _relative_rules(texts, where):
    if isinstance(texts, str):
        texts = [texts]
    out = []
    for text in texts:
        m = _RELATIVE.match(str(text))
        if not m:
            raise LatscopeError(f"{where}: a relative rule must read like '+5 % at p99', "
                                f"not {text!r}")
        out.append(Rule("relative", parse_percentile(m["p"]), float(m["pct"]) / 100,
                        str(text).strip()))
    return out


def parse_budget(tables):
    """A :class:`Budget` from the TOML tables of a budget file (a dict).

    >>> b = parse_budget({"min_effect": "100 ns", "relative": ["+5 % at p99"],
    ...                   "absolute": ["rx.udp p99 <= 12 us"]})
    >>> [(r.kind, r.percent, r.limit, r.measure) for r in b.rules], b.min_effect_ns
    ([('relative', 99.0, 0.05, None), ('absolute', 99.0, 12000.0, 'rx.udp')], 100.0)
    """
    known = {"confidence", "min_effect", "relative", "absolute", "shift_delta", "measures",
             "measure"}
    unknown = sorted(set(tables) - known)
    if unknown:
        raise LatscopeError(f"budget keys must be among {', '.join(sorted(known))}, not "
                            f"{', '.join(map(repr, unknown))}")
    confidence = float(tables.get("confidence", 0.95))
    if not 0.5 <= confidence < 1:
        raise LatscopeError(f"budget confidence must be in [0.5, 1), not {confidence!r}")
    rules = _relative_rules(tables.get("relative", ()), "budget")
    for text in tables.get("absolute", ()):
        m = _ABSOLUTE.match(str(text))
        if not m:
            raise LatscopeError(f"budget: an absolute rule must read like 'rx.udp p99 <= 12 us', "
                                f"not {text!r}")
        rules.append(Rule("absolute", parse_percentile(m["p"]), parse_duration_ns(m["v"]),
                          str(text).strip(), m["m"]))
    if "shift_delta" in tables:
        delta = float(tables["shift_delta"])
        if not 0 <= delta < 1:
            raise LatscopeError(f"budget shift_delta must be in [0, 1), not {delta!r}")
        rules.append(Rule("shift", None, delta, f"shift: Cliff's delta <= {delta:g}"))
    min_effect = parse_duration_ns(tables["min_effect"]) if "min_effect" in tables else 0.0
    overrides = {}
    for name, entry in (tables.get("measure") or {}).items():
        extra = sorted(set(entry) - {"relative", "min_effect"})
        if extra:
            raise LatscopeError(f"budget [measure.{name!r}] keys must be relative or "
                                f"min_effect, not {', '.join(map(repr, extra))}")
        own = {}
        if "relative" in entry:
            own["relative"] = tuple(_relative_rules(entry["relative"], f"[measure.{name!r}]"))
        if "min_effect" in entry:
            own["min_effect_ns"] = parse_duration_ns(entry["min_effect"])
        overrides[name] = own
    measures = tables.get("measures")
    if not rules and not overrides:
        raise LatscopeError("a budget must have at least one rule (relative, absolute or "
                            "shift_delta)")
    return Budget(tuple(rules), min_effect, confidence,
                  tuple(measures) if measures else None, overrides)


def load_budget(path):
    """Read a budget TOML file (see ``docs/gate.md``)."""
    tables = read_toml(path, "budget")       # missing, binary or not TOML: one line
    try:
        return parse_budget(tables)
    except LatscopeError as error:
        raise LatscopeError(f"{path}: {error}") from None


#: Used when no budget file is given: +5 % at p50 and at p99 for every measurement.
DEFAULT_BUDGET = parse_budget({"relative": ["+5 % at p50", "+5 % at p99"]})


@dataclasses.dataclass(frozen=True)
class Check:
    """The outcome of one rule on one measurement.

    ``status``: ``pass``, ``inconclusive`` (not shown to exceed; passes), ``regression`` or
    ``undecidable``. Values in ns; ``lower_ns``/``upper_ns`` bound the difference (relative
    rules) or the candidate's percentile (absolute rules); ``allowed_ns`` is what the rule
    allows for them. ``needed`` (undecidable only): packets per side the bound needs.
    """
    measure: str
    rule: str
    kind: str
    percent: float | None
    status: str
    baseline_ns: float | None
    candidate_ns: float | None
    lower_ns: float | None
    upper_ns: float | None
    allowed_ns: float | None
    n_baseline: int
    n_candidate: int
    needed: dict | None
    reason: str


@dataclasses.dataclass
class GateResult:
    """All checks of a gate, with what was compared."""
    checks: list
    baseline: str
    candidate: str
    confidence: float
    notes: list = dataclasses.field(default_factory=list)

    @property
    def verdict(self):
        statuses = {c.status for c in self.checks}
        if REGRESSION in statuses:
            return REGRESSION
        if UNDECIDABLE in statuses or not self.checks:
            return UNDECIDABLE
        return PASS

    def to_dict(self):
        return {"verdict": self.verdict, "exit_status": exit_status(self.verdict),
                "baseline": self.baseline, "candidate": self.candidate,
                "confidence": self.confidence, "notes": list(self.notes),
                "checks": [_clean(dataclasses.asdict(c)) for c in self.checks]}


def _clean(d):
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in d.items()}


def exit_status(verdict):
    """The command's exit status for a verdict: ``pass`` 0, ``regression`` 1, ``usage`` (bad
    arguments, unreadable input) 2, ``undecidable`` 3.

    >>> [exit_status(v) for v in ("pass", "regression", "usage", "undecidable")]
    [0, 1, 2, 3]
    """
    table = {PASS: EXIT_PASS, REGRESSION: EXIT_REGRESSION, "usage": EXIT_USAGE,
             UNDECIDABLE: EXIT_UNDECIDABLE}
    if verdict not in table:
        raise ValueError(f"verdict must be one of {', '.join(table)}, not {verdict!r}")
    return table[verdict]


def _needed(q, confidence, sizes):
    """Packets each side short of a finite two-sided bound at ``confidence`` would need."""
    need = max(n_required(q, confidence), n_required(1 - q, confidence))   # both bounds
    return {side: need for side, n in sizes.items() if n < need}


def _judge(lower, upper, allowed):
    if lower is not None and lower > allowed:
        return REGRESSION
    if upper is not None and upper <= allowed:
        return PASS
    return INCONCLUSIVE


def gate(baseline, candidate, budget=DEFAULT_BUDGET, *, baseline_label="baseline",
         candidate_label="candidate"):
    """Judge ``candidate`` against ``baseline``: each a dict of measurement -> latencies (ns).

    Measurements judged: the budget's ``measures``, else those both sides have (absolute rules
    need only the candidate). Returns a :class:`GateResult`.
    """
    names = list(budget.measures) if budget.measures else sorted(set(baseline) & set(candidate))
    absolute_only = sorted({r.measure for r in budget.rules if r.kind == "absolute"}
                           - set(names))
    notes = []
    if not budget.measures:
        for side, own, other in (("baseline", baseline, candidate),
                                 ("candidate", candidate, baseline)):
            alone = sorted(set(own) - set(other) - set(absolute_only))
            if alone:
                notes.append(f"only the {side} has {', '.join(alone)} (not judged)")
    for side, data in (("baseline", baseline), ("candidate", candidate)):
        missing = [n for n in names if n not in data or len(data[n]) < 2]
        if missing:
            notes.append(f"{side} has fewer than 2 packets of {', '.join(missing)}")
    checks = []
    conf = budget.confidence
    for name in names + absolute_only:
        rules, min_effect = budget.rules_for(name)
        b = np.sort(np.asarray(baseline.get(name, ()), dtype=np.float64))
        c = np.sort(np.asarray(candidate.get(name, ()), dtype=np.float64))
        comparison = None
        relative = [r for r in rules if r.kind in ("relative", "shift")]
        if relative and len(b) >= 2 and len(c) >= 2:
            comparison = compare_samples(b, c, confidence=conf,
                                         percentiles=sorted({r.percent for r in relative
                                                             if r.percent is not None}))
        for rule in rules:
            if rule.kind == "absolute":
                checks.append(_absolute(name, rule, c, len(b), conf))
            elif comparison is None:
                sizes = {"baseline": len(b), "candidate": len(c)}
                needed = (_needed(rule.percent / 100, math.sqrt(conf), sizes)
                          if rule.percent is not None else
                          {k: 2 for k, n in sizes.items() if n < 2})
                checks.append(Check(name, rule.text, rule.kind, rule.percent, UNDECIDABLE,
                                    None, None, None, None, None, len(b), len(c), needed,
                                    "cannot be judged: it needs " + " and ".join(
                                        f"{v:,} {k} packets" for k, v in needed.items())))
            elif rule.kind == "shift":
                checks.append(_shift(name, rule, comparison, conf))
            else:
                checks.append(_relative(name, rule, comparison, min_effect, conf))
    return GateResult(checks, baseline_label, candidate_label, conf, notes)


def _relative(name, rule, comparison, min_effect, conf):
    q = comparison.percentiles[rule.percent]
    n = {"baseline": comparison.n_baseline, "candidate": comparison.n_other}
    allowed = max(rule.limit * q.baseline_ns, min_effect)
    status = _judge(q.lower_ns, q.upper_ns, allowed)
    needed = None
    if status != REGRESSION and (q.lower_ns is None or q.upper_ns is None):
        status = UNDECIDABLE
        needed = _needed(rule.percent / 100, math.sqrt(conf), n)
        reason = ("cannot be bounded: it needs "
                  + " and ".join(f"{v:,} {k} packets" for k, v in needed.items()))
    else:
        reason = {REGRESSION: "slower by more than allowed",
                  PASS: "within the allowance",
                  INCONCLUSIVE: "not shown to exceed the allowance"}[status]
    return Check(name, rule.text, "relative", rule.percent, status, q.baseline_ns, q.other_ns,
                 q.lower_ns, q.upper_ns, allowed, n["baseline"], n["candidate"], needed, reason)


def _absolute(name, rule, c, n_base, conf):
    if len(c) == 0:
        return Check(name, rule.text, "absolute", rule.percent, UNDECIDABLE, None, None, None,
                     None, rule.limit, n_base, 0, {"candidate": n_required(rule.percent / 100,
                                                                           conf)},
                     "the candidate has no packets of it")
    value, lower, upper = quantile_of_sorted(c, rule.percent / 100, conf)
    status = _judge(lower, upper, rule.limit)
    needed = None
    if status != REGRESSION and upper is None:
        status = UNDECIDABLE
        needed = _needed(rule.percent / 100, conf, {"candidate": len(c)})
        reason = f"cannot be bounded: it needs {needed['candidate']:,} candidate packets"
    else:
        reason = {REGRESSION: "over the limit", PASS: "within the limit",
                  INCONCLUSIVE: "not shown to exceed the limit"}[status]
    return Check(name, rule.text, "absolute", rule.percent, status, None, value, lower, upper,
                 rule.limit, n_base, len(c), needed, reason)


def _shift(name, rule, comparison, conf):
    alpha = 1 - conf
    shifted = comparison.p_value < alpha and comparison.cliffs_delta > rule.limit
    reason = (f"Mann-Whitney p = {comparison.p_value:.2g}, Cliff's delta = "
              f"{comparison.cliffs_delta:+.3f}")
    return Check(name, rule.text, "shift", None, REGRESSION if shifted else PASS,
                 None, None, comparison.mean_lower_ns, comparison.mean_upper_ns,
                 None, comparison.n_baseline, comparison.n_other, None, reason)


# --- renderers ---------------------------------------------------------------------------------
_MARK = {PASS: "ok", INCONCLUSIVE: "ok?", REGRESSION: "FAIL", UNDECIDABLE: "??"}


def _interval(check, unit):
    lo = unit.fmt(check.lower_ns) if check.lower_ns is not None else "-inf"
    hi = unit.fmt(check.upper_ns) if check.upper_ns is not None else "+inf"
    return f"[{lo}, {hi}]"


def _row_text(check, unit):
    if check.kind == "shift":
        return check.reason
    what = "diff" if check.kind == "relative" else f"p{check.percent:g}"
    allowed = (f", allowed {unit.fmt(check.allowed_ns)}" if check.allowed_ns is not None
               else "")
    return f"{what} {_interval(check, unit)} {unit.name}{allowed}: {check.reason}"


def render_text(result):
    """A one-screen verdict: one line per check, regressions and undecidable checks first."""
    unit = time_unit([c.baseline_ns or c.candidate_ns for c in result.checks
                      if (c.baseline_ns or c.candidate_ns)])
    order = {REGRESSION: 0, UNDECIDABLE: 1, INCONCLUSIVE: 2, PASS: 3}
    lines = [f"gate: {result.candidate} against {result.baseline} "
             f"({result.confidence * 100:g} % intervals)"]
    for c in sorted(result.checks, key=lambda c: (order[c.status], c.measure, c.percent or 0)):
        lines.append(f"  {_MARK[c.status]:<4} {c.measure:<14} {c.rule:<22} {_row_text(c, unit)}")
    lines += [f"  note: {n}" for n in result.notes]
    counts = {s: sum(c.status == s for c in result.checks) for s in order}
    lines.append(f"verdict: {result.verdict.upper()} ({counts[REGRESSION]} regression, "
                 f"{counts[UNDECIDABLE]} undecidable, {counts[INCONCLUSIVE]} inconclusive, "
                 f"{counts[PASS]} pass; exit status {exit_status(result.verdict)})")
    return "\n".join(lines)


def render_json(result):
    """JSON text of the result (every value in ns)."""
    return json.dumps(result.to_dict(), indent=2, allow_nan=False)


def render_junit(result, *, suite="latscope.gate"):
    """JUnit XML: one test case per check (class name = measurement), a regression a
    ``<failure>``, an undecidable check ``<skipped>`` with the packets it needs."""
    unit = time_unit([c.baseline_ns or c.candidate_ns for c in result.checks
                      if (c.baseline_ns or c.candidate_ns)])
    failures = sum(c.status == REGRESSION for c in result.checks)
    skipped = sum(c.status == UNDECIDABLE for c in result.checks)
    root = ET.Element("testsuites", name=suite, tests=str(len(result.checks)),
                      failures=str(failures), skipped=str(skipped), errors="0")
    ts = ET.SubElement(root, "testsuite", name=f"{suite}: {result.candidate} vs "
                       f"{result.baseline}", tests=str(len(result.checks)),
                       failures=str(failures), skipped=str(skipped), errors="0")
    for c in result.checks:
        case = ET.SubElement(ts, "testcase", classname=c.measure, name=c.rule)
        text = _row_text(c, unit)
        if c.status == REGRESSION:
            ET.SubElement(case, "failure", message=f"{c.measure} {c.rule}: {c.reason}",
                          type="regression").text = text
        elif c.status == UNDECIDABLE:
            ET.SubElement(case, "skipped", message=f"undecidable: {c.reason}")
        else:
            ET.SubElement(case, "system-out").text = text
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def render_markdown(result):
    """A Markdown summary for a pull-request comment: the verdict, then a table of checks."""
    unit = time_unit([c.baseline_ns or c.candidate_ns for c in result.checks
                      if (c.baseline_ns or c.candidate_ns)])
    icon = {PASS: "pass", INCONCLUSIVE: "pass (not shown either way)",
            REGRESSION: "**REGRESSION**", UNDECIDABLE: "undecidable"}
    lines = [f"### latscope gate: {icon[result.verdict]}", "",
             f"`{result.candidate}` against `{result.baseline}`, "
             f"{result.confidence * 100:g} % distribution-free intervals, values in {unit.name}.",
             "", "| measure | rule | result | baseline | candidate | interval | allowed |",
             "|---|---|---|---:|---:|---|---:|"]
    for c in result.checks:
        lines.append(f"| {c.measure} | {c.rule} | {icon[c.status]} | "
                     f"{unit.fmt(c.baseline_ns)} | {unit.fmt(c.candidate_ns)} | "
                     f"{_interval(c, unit) if c.kind != 'shift' else c.reason} | "
                     f"{unit.fmt(c.allowed_ns)} |")
    undecided = [c for c in result.checks if c.status == UNDECIDABLE]
    if undecided:
        lines += ["", "Not judged (too few packets to bound):"]
        lines += [f"- {c.measure} {c.rule}: {c.reason}" for c in undecided]
    lines += [f"- note: {n}" for n in result.notes]
    return "\n".join(lines) + "\n"
