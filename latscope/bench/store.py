"""Results-store benchmark (a ``latscope bench`` section): append and query speed for 10^7 stored
packet rows, DuckDB on one core, and the dataset's bytes per packet row.

The rows are 10 runs of 10^6 (quick: 10 of 10^5): three measurements of a synthetic stream
(:mod:`latscope.analysis.synth`'s latency shapes, in whole ticks of 3.125 ns) with start ticks
and packet numbers as captures have them, so the compression is that of real data. Appends go
through :func:`latscope.analysis.store.append` (the path ``analyze --store`` takes, without the
analysis); queries through :func:`~latscope.analysis.store.select` and one SQL aggregate over
the whole store. Times are CPU times of this process (DuckDB set to one thread), so load from
others on a shared machine does not distort them.
"""

import os
import sys
import tempfile
import time

import numpy as np

from latscope.analysis import store

SECTION = "results store: append, query, bytes per packet"

_TICK_NS = 1e9 / 320_000_000
_SHAPES = {"rx.isr": (200, 4.0, 12.0), "rx.udp": (2200, 4.0, 40.0), "tx.wire": (1000, 4.0, 30.0)}


def _columns(rows, seed):
    """Packet columns of one run holding ``rows`` rows (three measurements)."""
    rng = np.random.default_rng(seed)
    per = rows // len(_SHAPES)
    start = np.cumsum(rng.integers(8_000, 12_000, per)).astype(np.int64)
    parts = []
    for name, (shift, shape, scale) in _SHAPES.items():
        ticks = shift + np.round(rng.gamma(shape, scale, per))
        parts.append((name, "measurement", None, np.arange(per, dtype=np.int64), start,
                      ticks * _TICK_NS, np.full(per, "ok", dtype=object)))
    return store.concat_rows(parts)


def _bytes(folder):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder)
               for f in files)


def run(quick):
    """Benchmark rows ``(figure, value, unit, note)``."""
    import pandas  # noqa: F401  (heavy) imported before timing: appends time writing only
    import pyarrow.parquet  # noqa: F401
    runs, per_run = 10, 3 * 33_334 if quick else 3 * 333_334   # three measurements a packet
    total = 0
    append_s = 0.0
    with tempfile.TemporaryDirectory(prefix="latscope-store-bench-") as folder:
        for k in range(runs):
            cols = _columns(per_run, k)
            record = store.run_record({"tick_hz": 320_000_000}, labels={"commit": f"c{k}"},
                                      time=f"2026-11-{k + 1:02d}T10:00:00Z")
            t = time.process_time()
            written = store.append(folder, cols, record)
            append_s += time.process_time() - t
            total += written.rows
        size = _bytes(folder)
        t = time.process_time()
        one = store.select(folder, where="commit = 'c3'", measures=["rx.udp"])
        select_s = time.process_time() - t
        t = time.process_time()
        with store.connect(folder) as con:
            p99 = con.execute("SELECT measure, quantile_disc(latency_ns, 0.99) FROM packets "
                              "WHERE status = 'ok' GROUP BY measure ORDER BY measure").fetchall()
        scan_s = time.process_time() - t
    selected = len(one.latencies["rx.udp"])
    return [
        (f"append, {total:.0e} packet rows in {runs} runs", total / append_s / 1e6, "M rows/s",
         f"one core, {append_s:.2f} s CPU (pyarrow, zstd)"),
        ("dataset size per packet row", size / total, "bytes",
         f"{size / 1e6:.1f} MB for {total:,} rows, run rows and marker included"),
        ("select one commit's rx.udp latencies", select_s, "s",
         f"{selected:,} of {total:,} rows, CPU, DuckDB one thread (connection and views "
         f"included)"),
        ("p99 of every measurement, whole store", total / scan_s / 1e6, "M rows/s",
         f"{scan_s:.2f} s CPU, DuckDB one thread; rx.udp p99 "
         f"{dict(p99)['rx.udp'] / 1e3:.2f} us"),
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
