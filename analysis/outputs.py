"""The numbers out, in the formats people use: every packet's latencies as columns (CSV or
Parquet), and a sample's percentile distribution as HdrHistogram's text (``.hgrm``, the layout
of its ``outputPercentileDistribution``, read by its plotter).

:func:`per_packet_columns` and :func:`hgrm_text` are pure (arrays in, columns or text out);
:func:`write_per_packet` writes a file.
"""

import csv
import math
import os

import numpy as np

from latscope import LatscopeError
from latscope.analysis.pairing import STATUS_NAMES
from latscope.capture.files.outputs import open_output, replacing

__all__ = ["per_packet_columns", "write_per_packet", "hgrm_text", "hgrm_levels", "hgrm_paths"]


def per_packet_columns(result):
    """Every packet's identity and latencies as equal-length columns: ``start_edge`` (the edge
    that starts its measurements), ``packet`` (index within that edge's packets),
    ``start_tick``, ``start_s``, then per measurement ``<name>_ns`` (NaN where none) and
    ``<name>_status`` (the pairing status name).

    Parameters
    ----------
    result : AnalysisResult
        With per-packet records (``packets`` not ``None``).

    Returns
    -------
    dict of str -> numpy.ndarray
    """
    if result.packets is None:
        raise LatscopeError("per-packet records must be kept for per-packet output, not "
                            "dropped (analyse with packets=True)")
    tick_ns = 1e9 / result.tick_hz
    names = list(dict.fromkeys(n for t in result.packets for n in t.latency))
    cols = {"start_edge": [], "packet": [], "start_tick": [], "start_s": []}
    for n in names:
        cols[f"{n}_ns"], cols[f"{n}_status"] = [], []
    for t in result.packets:
        k = len(t.start)
        cols["start_edge"].append(np.full(k, t.start_edge, dtype=object))
        cols["packet"].append(np.arange(k, dtype=np.int64))
        cols["start_tick"].append(np.asarray(t.start, dtype=np.int64))
        cols["start_s"].append(np.asarray(t.start, dtype=np.float64) / result.tick_hz)
        for n in names:
            if n in t.latency:
                lat = np.asarray(t.latency[n])
                cols[f"{n}_ns"].append(np.where(lat >= 0, lat * tick_ns, np.nan))
                cols[f"{n}_status"].append(np.array([STATUS_NAMES[int(s)] for s in t.status[n]],
                                                    dtype=object))
            else:
                cols[f"{n}_ns"].append(np.full(k, np.nan))
                cols[f"{n}_status"].append(np.full(k, "", dtype=object))
    return {key: (np.concatenate(parts) if parts else np.array([])) for key, parts in cols.items()}


def write_per_packet(result, path, *, inputs=(), force=False):
    """Write :func:`per_packet_columns` to ``path``: CSV for ``.csv``, Parquet for
    ``.parquet``, under the one output policy (:mod:`latscope.capture.files.outputs`: never an
    input, an existing file only with ``force``, complete or not at all). Returns the number of
    rows."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".csv", ".parquet"):
        raise LatscopeError(f"Per-packet file must end in .csv or .parquet, not {suffix!r}")
    cols = per_packet_columns(result)
    rows = len(cols["packet"])
    if suffix == ".parquet":
        import pyarrow as pa  # why: pyarrow is heavy and only Parquet output needs it
        import pyarrow.parquet as pq
        with replacing(path, inputs, force=force) as tmp:
            pq.write_table(pa.table({k: list(v) if v.dtype == object else v
                                     for k, v in cols.items()}), tmp)
        return rows
    with open_output(path, inputs, force=force, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(list(cols))
        for i in range(rows):
            writer.writerow(["" if isinstance(v[i], float) and math.isnan(v[i]) else
                             (f"{v[i]:.3f}" if isinstance(v[i], (float, np.floating))
                              and not key.startswith("start_s") else v[i])
                             for key, v in cols.items()])
    return rows


def hgrm_levels(n, ticks_per_half_distance=5):
    """The percentile levels (in %) HdrHistogram reports for ``n`` values: from 0, steps of
    ``100 / (ticks * 2**(floor(log2(100 / (100 - level))) + 1))`` until the level's rank reaches
    ``n``, then 100.

    >>> hgrm_levels(10)[:4]
    [0.0, 10.0, 20.0, 30.0]
    >>> hgrm_levels(10)[-1]
    100.0
    """
    levels, level = [], 0.0
    while True:
        rank = max(1, math.ceil(level / 100 * n - 1e-9))
        if rank >= n or level >= 100:
            break
        levels.append(level)
        ticks = ticks_per_half_distance * 2 ** (int(math.log2(100 / (100 - level))) + 1)
        level += 100 / ticks
    levels.append(100.0)
    return levels


def hgrm_text(values_ns, *, unit_ns=1000.0, ticks_per_half_distance=5):
    """HdrHistogram's percentile-distribution text for a sample (values in ns; printed in units
    of ``unit_ns``, µs by default), exact from the sorted values.

    >>> text = hgrm_text(np.arange(1, 11) * 1000.0)
    >>> text.splitlines()[0].split()
    ['Value', 'Percentile', 'TotalCount', '1/(1-Percentile)']
    >>> text.splitlines()[2].split()
    ['1.000', '0.000000000000', '1', '1.00']
    >>> text.splitlines()[-3].split()[:3]
    ['#[Mean', '=', '5.500,']
    """
    values = np.sort(np.asarray(values_ns, dtype=np.float64)) / unit_ns
    n = len(values)
    if n == 0:
        raise LatscopeError("a percentile distribution needs at least one value, not 0")
    lines = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}", ""]
    for level in hgrm_levels(n, ticks_per_half_distance):
        rank = max(1, math.ceil(level / 100 * n - 1e-9))
        value = values[rank - 1]
        if level < 100:
            lines.append(f"{value:12.3f} {level / 100:2.12f} {rank:10d} "
                         f"{1 / (1 - level / 100):14.2f}")
        else:
            lines.append(f"{value:12.3f} {1.0:2.12f} {n:10d}")
    mean, sd = float(values.mean()), float(values.std())
    lines += [f"#[Mean    = {mean:12.3f}, StdDeviation   = {sd:12.3f}]",
              f"#[Max     = {values[-1]:12.3f}, Total count    = {n:12d}]",
              f"#[Buckets = {0:12d}, SubBuckets     = {0:12d}]"]
    return "\n".join(lines) + "\n"


def hgrm_paths(path, names):
    """``{measurement: file}`` for ``--hgrm PATH``: PATH itself for one measurement, else
    ``<stem>.<name>.hgrm`` beside it (one distribution per file, as the plotter reads them).

    >>> hgrm_paths("out/run.hgrm", ["rx.isr"])
    {'rx.isr': 'out/run.hgrm'}
    >>> hgrm_paths("out/run.hgrm", ["rx.isr", "tx.wire"])["tx.wire"]
    'out/run.tx.wire.hgrm'
    """
    if len(names) == 1:
        return {names[0]: path}
    stem = path[:-len(".hgrm")] if path.endswith(".hgrm") else path
    return {n: f"{stem}.{n.replace('/', '_')}.hgrm" for n in names}
