"""A measurement's percentiles over runs, and where they changed.

Rule (``docs/gate.md``, "The trend"): per run (or per value of a label such as ``commit``) the
percentiles of the measurement with their distribution-free intervals
(:func:`latscope.analysis.stats.quantile_of_sorted`). Each percentile's series is divided by
its median absolute run-to-run step, and change points are the optimal segmentation under a
squared-error cost and a penalty per change (``ruptures``: PELT to place them, dynamic
programming to score them).

The penalty is calibrated on the runs' own packets: pooled, and resampled with replacement into
as many runs of the same sizes (a series with no change), ``resamples`` times. For each
resample the *critical penalty* is the smallest one under which the optimal segmentation has no
change, ``max_m (C_0 - C_m) / m`` over ``m = 1 .. max_changes`` changes (``C_m``: the least cost
with ``m`` changes). The penalty used is the ``1 - alpha`` quantile of those, so a series with no
change shows one in about ``alpha`` of cases. Scaling by the series' own step makes the score
depend on the shape of the run-to-run noise, not its size, so the calibration holds when runs
also differ by more than their packets (a lab's reboots), as long as runs vary independently.

>>> import numpy as np
>>> rng = np.random.default_rng(1)
>>> runs = [1000 + rng.gamma(4, 40, 4000) * (1.08 if k >= 6 else 1.0) for k in range(10)]
>>> h = history(runs, [f"c{k}" for k in range(10)], percentiles=(50, 99), resamples=50)
>>> [c.key for c in h.changes]
['c6']
"""

import dataclasses
import math

import numpy as np

from latscope import LatscopeError
from latscope.analysis import store as results
from latscope.analysis.report import figures
from latscope.analysis.stats import percentile_key, quantile_of_sorted

__all__ = ["HistoryPoint", "ChangePoint", "History", "percentile_series", "critical_penalty",
           "calibrate_penalty", "change_points", "history", "store_history", "history_figure"]


@dataclasses.dataclass(frozen=True)
class HistoryPoint:
    """One run (or one label value's runs pooled): ``quantiles[p] = (value, lower, upper)`` ns;
    ``labels``: the user labels of its first run."""
    key: str
    time: str | None
    run_ids: tuple
    n: int
    quantiles: dict
    labels: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    """A change before point ``index`` (the first point of the new level): per percentile the
    median level of the segment before and after, ns; ``labels`` of that point's first run."""
    index: int
    key: str
    before_ns: dict
    after_ns: dict
    labels: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class History:
    """A measurement's percentiles over runs and the change points found in them."""
    measure: str
    by: str
    percentiles: tuple
    points: list
    changes: list
    penalty: float | None
    score: float | None
    alpha: float
    resamples: int
    confidence: float
    notes: list = dataclasses.field(default_factory=list)
    #: Per percentile: the median absolute change from one point to the next (the run-to-run
    #: spread the change-point rule scales by) and the median half-width of a point's interval
    #: (what the packets alone explain), ns.
    step_ns: dict = dataclasses.field(default_factory=dict)
    half_width_ns: dict = dataclasses.field(default_factory=dict)
    #: Some point holds a run from the simulated bench (its figure says SIMULATED).
    simulated: bool = False

    def to_dict(self):
        def bound(v):
            return None if v is None or not math.isfinite(v) else float(v)
        return {
            "measure": self.measure, "by": self.by, "percentiles": list(self.percentiles),
            "confidence": self.confidence, "alpha": self.alpha, "resamples": self.resamples,
            "penalty": bound(self.penalty), "score": bound(self.score), "notes": self.notes,
            "simulated": self.simulated,
            "step_ns": {f"{q:g}": bound(v) for q, v in self.step_ns.items()},
            "half_width_ns": {f"{q:g}": bound(v) for q, v in self.half_width_ns.items()},
            "points": [{"key": p.key, "time": p.time, "run_ids": list(p.run_ids), "n": p.n,
                        "labels": dict(p.labels),
                        **{percentile_key(q) + "_ns": bound(v[0]) for q, v in p.quantiles.items()},
                        **{percentile_key(q) + "_ci_ns": [bound(v[1]), bound(v[2])]
                           for q, v in p.quantiles.items()}}
                       for p in self.points],
            "changes": [{"index": c.index, "key": c.key, "labels": dict(c.labels),
                         "before_ns": {f"{q:g}": v for q, v in c.before_ns.items()},
                         "after_ns": {f"{q:g}": v for q, v in c.after_ns.items()}}
                        for c in self.changes]}


def percentile_series(samples, percentiles, confidence=0.95):
    """``(values, lower, upper)``: arrays of shape (runs, percentiles), ns; NaN where a bound
    does not exist."""
    shape = (len(samples), len(percentiles))
    values, lower, upper = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    for i, s in enumerate(samples):
        x = np.sort(np.asarray(s, dtype=np.float64))
        if not len(x):
            continue
        for j, p in enumerate(percentiles):
            v, lo, hi = quantile_of_sorted(x, p / 100, confidence)
            values[i, j] = v
            lower[i, j] = np.nan if lo is None else lo
            upper[i, j] = np.nan if hi is None else hi
    return values, lower, upper


def _scaled(values):
    """Each column divided by its median absolute run-to-run step (a step of 0: by 1)."""
    steps = np.median(np.abs(np.diff(values, axis=0)), axis=0)
    steps = np.where(steps > 0, steps, 1.0)
    return (values - np.median(values, axis=0)) / steps


def critical_penalty(values, max_changes=5):
    """The smallest penalty per change under which the optimal segmentation of ``values``
    (runs x percentiles, already scaled) has no change: ``max_m (C_0 - C_m) / m``."""
    import ruptures as rpt  # heavy: only when a trend is computed
    k = len(values)
    if k < 2:
        return 0.0
    algo = rpt.Dynp(model="l2", min_size=1, jump=1).fit(values)
    c0 = algo.cost.error(0, k)
    gains = [(c0 - algo.cost.sum_of_costs(algo.predict(n_bkps=m))) / m
             for m in range(1, min(max_changes, k - 1) + 1)]
    return float(max(gains))


def calibrate_penalty(samples, percentiles, *, alpha=0.05, resamples=100, seed=0,
                      max_changes=5):
    """The penalty that a series without change exceeds in ``alpha`` of cases, from bootstrap
    resamples of the pooled packets of ``samples`` (one array per run)."""
    if not 0 < alpha < 1:
        raise LatscopeError(f"alpha must be in (0, 1), not {alpha!r}")
    if resamples < 1 / alpha:
        raise LatscopeError(f"resamples must be at least 1/alpha = {math.ceil(1 / alpha)}, "
                            f"not {resamples!r}")
    # sorted: the same packets in any order (a store returns rows unordered) give one penalty
    pool = np.sort(np.concatenate([np.asarray(s, dtype=np.float64) for s in samples]))
    sizes = [len(s) for s in samples]
    rng = np.random.default_rng(seed)
    qs = np.array(percentiles) / 100
    crit = []
    for _ in range(resamples):
        draws = rng.choice(pool, size=sum(sizes))
        runs = np.split(draws, np.cumsum(sizes)[:-1])
        values = np.array([np.quantile(r, qs, method="inverted_cdf") for r in runs])
        crit.append(critical_penalty(_scaled(values), max_changes))
    return float(np.quantile(crit, 1 - alpha, method="inverted_cdf"))


def change_points(values, penalty):
    """Indices (first point of each new level) of the optimal segmentation of ``values``
    (scaled) under ``penalty`` per change (ruptures PELT)."""
    import ruptures as rpt  # heavy: only when a trend is computed
    if len(values) < 2:
        return []
    bkps = rpt.Pelt(model="l2", min_size=1, jump=1).fit(values).predict(pen=penalty)
    return [int(b) for b in bkps[:-1]]


def history(samples, keys, *, times=None, run_ids=None, labels=None, measure="latency", by="time",
            percentiles=(50.0, 99.0), confidence=0.95, alpha=0.05, resamples=100, seed=0,
            max_changes=5):
    """The trend of one measurement (pure): ``samples`` one array of latencies (ns) per point,
    in order; ``keys`` their names (a run's time, a commit). Returns a :class:`History`."""
    if len(samples) != len(keys):
        raise LatscopeError(f"history needs one key per point, not {len(keys)} keys for "
                            f"{len(samples)} points")
    percentiles = tuple(float(p) for p in percentiles)
    values, lower, upper = percentile_series(samples, percentiles, confidence)
    times = list(times) if times is not None else [None] * len(samples)
    run_ids = list(run_ids) if run_ids is not None else [()] * len(samples)
    labels = list(labels) if labels is not None else [{}] * len(samples)
    points = [HistoryPoint(str(k), t, tuple(r), len(s),
                           {p: tuple(None if np.isnan(a[i, j]) else float(a[i, j])
                                     for a in (values, lower, upper))
                            for j, p in enumerate(percentiles)}, dict(lab))
              for i, (k, t, r, s, lab) in enumerate(zip(keys, times, run_ids, samples, labels,
                                                        strict=True))]
    notes = []
    spread = {}
    if len(points) > 1:
        spread["step_ns"] = {p: float(np.median(np.abs(np.diff(values[:, j]))))
                             for j, p in enumerate(percentiles)}
    with np.errstate(invalid="ignore"):
        half = (upper - lower) / 2
    spread["half_width_ns"] = {p: float(np.nanmedian(half[:, j])) if np.isfinite(half[:, j]).any()
                               else math.nan for j, p in enumerate(percentiles)}
    empty = [p.key for p in points if p.n == 0]
    if empty:
        raise LatscopeError(f"history needs packets in every point, not none in "
                            f"{', '.join(empty)}")
    if len(points) < 4:
        notes.append(f"{len(points)} points: change points need at least 4")
        return History(measure, by, percentiles, points, [], None, None, alpha, resamples,
                       confidence, notes, **spread)
    penalty = calibrate_penalty(samples, percentiles, alpha=alpha, resamples=resamples,
                                seed=seed, max_changes=max_changes)
    scaled = _scaled(values)
    score = critical_penalty(scaled, max_changes)
    changes = []
    if score > penalty:
        cuts = change_points(scaled, penalty)
        bounds = [0, *cuts, len(points)]
        for n, cut in enumerate(cuts):
            before = values[bounds[n]:cut]
            after = values[cut:bounds[n + 2]]
            changes.append(ChangePoint(cut, points[cut].key,
                                       {p: float(np.median(before[:, j]))
                                        for j, p in enumerate(percentiles)},
                                       {p: float(np.median(after[:, j]))
                                        for j, p in enumerate(percentiles)},
                                       dict(points[cut].labels)))
    return History(measure, by, percentiles, points, changes, penalty, score, alpha, resamples,
                   confidence, notes, **spread)


def store_history(store, measure, *, by="time", where=None, **kwargs):
    """:func:`history` of ``measure`` over the runs of a results store. ``by="time"``: one point
    per run in time order; ``by=LABEL``: one point per value of that label, the runs of each
    pooled, in the order the values first appear."""
    rows = results.runs(store, where)
    if not rows:
        raise LatscopeError(f"{store}: no run matches {where!r}")
    groups = {}
    for row in rows:
        if by == "time":
            key = row["time"].strftime("%Y-%m-%dT%H:%M:%SZ")
            key = f"{key} {row['run_id'][-6:]}"
        else:
            if by not in row:
                labels = sorted({k for r in rows for k in r.get("label_keys") or ()})
                raise LatscopeError(f"--by must be 'time' or a label of the store "
                                    f"({', '.join(labels) or 'none'}), not {by!r}")
            key = row[by]
        groups.setdefault(key, []).append(row)
    with results.connect(store) as con:
        samples = []
        for members in groups.values():
            ids = [r["run_id"] for r in members]
            got = con.execute("SELECT latency_ns FROM packets WHERE status = 'ok' AND measure = ? "
                              "AND run_id IN (SELECT unnest(?))", [measure, ids]).fetchnumpy()
            samples.append(np.asarray(got["latency_ns"], dtype=np.float64))
    if not any(len(s) for s in samples):
        raise LatscopeError(f"{store}: no packets of {measure!r} in the selected runs")
    keys = list(groups)
    times = [members[0]["time"].isoformat() for members in groups.values()]
    ids = [tuple(r["run_id"] for r in members) for members in groups.values()]
    labels = [{k: members[0][k] for k in members[0].get("label_keys") or ()}
              for members in groups.values()]
    hist = history(samples, keys, times=times, run_ids=ids, labels=labels, measure=measure,
                   by=by, **kwargs)
    hist.simulated = any(bool(r.get("simulated")) for r in rows)
    return hist


def history_figure(hist, *, simulated=None):
    """PNG bytes: the percentiles over the points with their intervals, change points marked,
    in the report's style (:func:`latscope.analysis.report.figures.draw`)."""
    data = {"name": hist.measure, "by": hist.by, "keys": [p.key for p in hist.points],
            "percentiles": list(hist.percentiles),
            "series": {p: [pt.quantiles[p] for pt in hist.points] for p in hist.percentiles},
            "changes": [(c.index, c.key) for c in hist.changes],
            "simulated": hist.simulated if simulated is None else simulated,
            "alpha": hist.alpha}
    return figures.draw("history", data)
