"""The results store: rows against the analysis they came from, DuckDB against pyarrow (and Spark
when installed) on the same files, appends that never collide or show half a run."""

import concurrent.futures
import glob
import importlib.util
import json
import os

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import api, store
from latscope.analysis.definitions import default_definitions, parse_definitions
from latscope.analysis.synth import synthetic_events

pytest.importorskip("duckdb", reason="the results store needs duckdb (pip install duckdb)")
pytest.importorskip("pyarrow", reason="the results store needs pyarrow (pip install pyarrow)")

MARKERS = {"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"}
META = {"tick_hz": 320_000_000, "start_time": "2026-11-26T10:00:00Z", "label": "gem-64",
        "instrument": {"board": "ecpix5", "gateware_major": 3, "gateware_minor": 1,
                       "source_hash": "1a2b3c", "simulated": True},
        "dut": {"board": "nucleo_h743zi", "build": "zephyr-4.1 abc123"},
        "software": {"latscope": "0.1.0"}}


def _definitions():
    tables = default_definitions().to_dict()
    tables["stage"]["rx.stack"] = {"span": "rx.isr -> rx.udp"}   # both in the synthetic stream
    return parse_definitions(tables)


def _analysis(n=400, seed=0):
    t, c, r, truth = synthetic_events(n, seed=seed)
    defs = _definitions()
    a = api.from_events(t, c, r, tick_hz=320_000_000, markers=MARKERS, definitions=defs,
                        metadata=META, label="gem-64")
    return a, defs, truth


def test_rows_hold_every_packet_of_the_analysis(tmp_path):
    a, defs, truth = _analysis()
    run = store.store_analysis(tmp_path, a, labels={"commit": "abc"}, definitions=defs)
    sel = store.select(tmp_path, where="commit = 'abc'")
    assert sel.run_ids == [run.run_id]
    tick_ns = 1e9 / 320_000_000
    # the synthetic stream's truth, exact: every packet paired
    for name in ("rx.isr", "rx.udp", "tx.wire"):
        assert np.array_equal(np.sort(sel.latencies[name]), np.sort(truth[name] * tick_ns))
        assert len(sel.latencies[name]) == a.stats[name].n
    stack = np.sort((truth["rx.udp"] - truth["rx.isr"]) * tick_ns)
    assert np.array_equal(np.sort(sel.latencies["rx.stack"]), stack)
    assert len(sel.latencies["rx.stack"]) == a.stages["rx.stack"].n
    # what the gate reads from a capture is what the store holds of it
    direct = store.analysis_latencies(a, defs)
    assert sorted(direct) == sorted(sel.latencies)
    for name, values in direct.items():
        assert np.array_equal(np.sort(values), np.sort(sel.latencies[name]))


def test_run_row_carries_build_info_and_labels(tmp_path):
    a, defs, _ = _analysis(50)
    store.store_analysis(tmp_path, a, labels=store.parse_labels(["commit=abc", "mac=gem"]),
                         definitions=defs)
    (row,) = store.runs(tmp_path)
    assert (row["board"], row["gateware"], row["gateware_hash"]) == ("ecpix5", "3.1", "1a2b3c")
    assert json.loads(row["firmware"])["build"] == "zephyr-4.1 abc123"
    assert (row["commit"], row["mac"], row["config_label"]) == ("abc", "gem", "gem-64")
    assert row["simulated"] is True and row["tick_hz"] == 320_000_000
    assert sorted(row["label_keys"]) == ["commit", "mac"]
    assert "rx.stack" in json.loads(row["definitions_json"])["stage"]
    assert row["schema_version"] == store.SCHEMA_VERSION
    assert row["time"].isoformat().startswith("2026-11-26T10:00:00")


def test_flags_of_unpaired_packets_are_rows_without_latency(tmp_path):
    t, c, r, _ = synthetic_events(100, seed=2)
    drop = np.flatnonzero((c == 5) & r)[:7]            # seven rx.udp marker pulses lost
    keep = np.ones(len(t), bool)
    keep[drop] = False
    keep[drop + 0] = False
    fall = np.flatnonzero((c == 5) & ~r)
    keep[fall[np.searchsorted(fall, drop)]] = False
    # a window shorter than the 42 us between requests: a request whose marker is lost is
    # missed, not ambiguous (with a longer window it could be queued behind the next one)
    tables = _definitions().to_dict()
    tables["measurement"]["rx.udp"]["window_ns"] = 20_000
    defs = parse_definitions(tables)
    a = api.from_events(t[keep], c[keep], r[keep], tick_hz=320_000_000, markers=MARKERS,
                        definitions=defs, metadata=META)
    store.store_analysis(tmp_path, a, definitions=defs)
    with store.connect(tmp_path) as con:
        counts = dict(con.execute("SELECT status, count(*) FROM packets WHERE measure = "
                                  "'rx.udp' GROUP BY status").fetchall())
        nulls = con.execute("SELECT count(*) FROM packets WHERE status <> 'ok' AND latency_ns "
                            "IS NOT NULL").fetchone()[0]
    assert counts == {"ok": 93, "missed": 7}
    assert nulls == 0


def test_duckdb_and_pyarrow_read_the_same_answer(tmp_path):
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    for k, commit in enumerate(["a", "b", "a"]):
        a, defs, _ = _analysis(120, seed=k)
        store.store_analysis(tmp_path, a, labels={"commit": commit}, definitions=defs)
    duck = store.select(tmp_path, where="commit = 'a'", measures=["rx.udp"])
    root = os.path.join(tmp_path, "v1")
    runs = ds.dataset(os.path.join(root, "runs"), format="parquet", partitioning="hive").to_table()
    ids = runs.filter(pc.equal(runs["commit"], "a"))["run_id"]
    packets = ds.dataset(os.path.join(root, "packets"), format="parquet",
                         partitioning="hive").to_table()
    mask = pc.and_(pc.and_(pc.is_in(packets["run_id"].cast("string"), ids),
                           pc.equal(packets["measure"].cast("string"), "rx.udp")),
                   pc.equal(packets["status"].cast("string"), "ok"))
    arrow = np.sort(packets.filter(mask)["latency_ns"].to_numpy())
    assert len(duck.run_ids) == 2 and len(arrow) == 240
    assert np.array_equal(np.sort(duck.latencies["rx.udp"]), arrow)


def test_concurrent_appends_never_collide(tmp_path):
    def one(k):
        return store.append_latencies(tmp_path, {"rx.udp": np.full(10, 1000.0 + k)},
                                      labels={"writer": str(k)},
                                      time="2026-11-26T10:00:00Z").run_id
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(one, range(16)))
    assert len(set(ids)) == 16
    assert len(glob.glob(os.path.join(tmp_path, "v1", "packets", "*", "*.parquet"))) == 16
    assert len(store.runs(tmp_path)) == 16
    assert not glob.glob(os.path.join(tmp_path, "v1", "*", "*", ".tmp-*"))


def test_a_run_without_its_runs_row_is_invisible(tmp_path):
    run = store.append_latencies(tmp_path, {"rx.udp": [1.0, 2.0]}, time="2026-11-26T10:00:00Z")
    orphan = os.path.join(os.path.dirname(run.packets_path), "20261126T100000-orphan.parquet")
    with open(run.packets_path, "rb") as src, open(orphan, "wb") as dst:
        dst.write(src.read())
    # a writer that died between its two files: same rows under another run id
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pq.read_table(orphan)
    table = table.set_column(0, "run_id", pa.array(["orphan"] * table.num_rows))
    pq.write_table(table, orphan)
    assert store.select(tmp_path).latencies["rx.udp"].tolist() == [1.0, 2.0]


def test_appends_never_rewrite_old_files(tmp_path):
    first = store.append_latencies(tmp_path, {"rx.udp": [1.0]}, time="2026-11-26T10:00:00Z")
    before = {p: os.stat(p).st_mtime_ns for p in (first.packets_path, first.runs_path)}
    store.append_latencies(tmp_path, {"rx.udp": [2.0]}, time="2026-11-27T10:00:00Z")
    assert {p: os.stat(p).st_mtime_ns for p in before} == before
    assert sorted(os.listdir(os.path.join(tmp_path, "v1", "runs"))) == ["day=2026-11-26",
                                                                        "day=2026-11-27"]


@pytest.mark.parametrize(("labels", "message"), [
    (["commit"], "a label must be key=value, not 'commit'"),
    (["Commit=x"], "a label key must be a lower-case identifier"),
    (["board=x"], "a label key must not be one of the store's columns"),
])
def test_bad_labels_are_refused(labels, message):
    with pytest.raises(LatscopeError, match=message.replace("(", r"\(")):
        store.parse_labels(labels)


def test_bad_store_and_selection_are_user_errors(tmp_path):
    with pytest.raises(LatscopeError, match="not a latscope results store"):
        store.select(tmp_path)
    store.append_latencies(tmp_path, {"rx.udp": [1.0]}, labels={"commit": "a"})
    with pytest.raises(LatscopeError, match="a run selection must be an SQL condition"):
        store.select(tmp_path, where="comit = 'a'")
    with pytest.raises(LatscopeError, match="no run matches"):
        store.select(tmp_path, where="commit = 'zzz'")
    with open(os.path.join(tmp_path, store.MARKER_FILE), "w") as f:
        json.dump({"format": "latscope-results", "schema_version": 99}, f)
    with pytest.raises(LatscopeError, match="store schema must be latscope-results version 1"):
        store.select(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("pyspark") is None,
                    reason="pyspark is not installed (pip install pyspark; it needs Java)")
@pytest.mark.needs_tool("java")
def test_spark_reads_the_same_answer_as_duckdb(tmp_path):
    from pyspark.sql import SparkSession
    for k, commit in enumerate(["a", "b", "a"]):
        store.append_latencies(tmp_path, {"rx.udp": 1000 + 10 * np.arange(50) + k,
                                          "rx.isr": 100 + np.arange(50.0)},
                               labels={"commit": commit}, time=f"2026-11-2{k}T10:00:00Z")
    duck = np.sort(store.select(tmp_path, where="commit = 'a'").latencies["rx.udp"])
    spark = (SparkSession.builder.master("local[1]").appName("latscope-store-test")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        root = os.path.join(tmp_path, "v1")
        spark.read.option("mergeSchema", "true").parquet(os.path.join(root, "runs")) \
            .createOrReplaceTempView("runs")
        spark.read.parquet(os.path.join(root, "packets")).createOrReplaceTempView("packets")
        rows = spark.sql("SELECT p.latency_ns FROM packets p JOIN runs r ON p.run_id = r.run_id "
                         "WHERE r.commit = 'a' AND p.measure = 'rx.udp' AND p.status = 'ok'"
                         ).collect()
    finally:
        spark.stop()
    assert np.array_equal(np.sort([row[0] for row in rows]), duck)


@pytest.mark.slow
def test_store_bench_quick_rows():
    from latscope.bench import store as store_bench
    rows = {r[0]: r for r in store_bench.run(quick=True)}
    size = rows["dataset size per packet row"]
    # latency (8-byte double) plus identity columns, zstd: well under the raw 8 bytes
    assert 0 < size[1] < 8 and size[2] == "bytes"
    assert all(r[1] > 0 for r in rows.values())


@pytest.mark.parametrize("fixture", ["bench/gem-64.lsc", "under-load/fast-track-64-bg60.lsc"])
def test_a_stored_capture_gives_the_analysis_own_percentiles(fixture, tmp_path):
    """Every stored run reproduces its analysis exactly: per measurement, stage and frame class,
    the count and the order-statistic p50/p99 with their intervals (``==``: same values)."""
    from latscope.analysis.stats import quantile_of_sorted
    path = os.path.join(api.repository_root() or "", "fixtures", fixture)
    if not os.path.exists(path):
        pytest.skip(f"needs the source tree's fixtures/{fixture}")
    a = api.analyze_file(path, packets=True)
    store.store_analysis(tmp_path, a, labels={"commit": "x"})
    sel = store.select(tmp_path, where="commit = 'x'")
    every = {**a.stats, **a.stages}
    assert sorted(sel.latencies) == sorted(k for k, s in every.items() if s.n)
    for name, values in sel.latencies.items():
        s = every[name]
        assert len(values) == s.n
        for p in (50.0, 99.0):
            q = s.quantiles[p]
            assert quantile_of_sorted(np.sort(values), p / 100) == (q.value_ns, q.lower_ns,
                                                                    q.upper_ns), (name, p)
    (row,) = store.runs(tmp_path)
    assert row["simulated"] is True and row["capture_id"].startswith(os.path.basename(path))
    if "under-load" in fixture:
        with store.connect(tmp_path) as con:
            classes = con.execute("SELECT DISTINCT cls FROM packets WHERE kind = 'frame'"
                                  ).fetchall()
        assert classes and all(c[0] for c in classes)


def test_runs_with_different_labels_share_the_store(tmp_path):
    store.append_latencies(tmp_path, {"rx.udp": [1.0]}, labels={"commit": "a"},
                           time="2026-11-26T10:00:00Z")
    store.append_latencies(tmp_path, {"rx.udp": [2.0]}, labels={"commit": "b", "mac": "gem"},
                           time="2026-11-26T11:00:00Z")
    rows = store.runs(tmp_path)
    assert [(r["commit"], r["mac"]) for r in rows] == [("a", None), ("b", "gem")]
    assert store.select(tmp_path, where="mac = 'gem'").latencies["rx.udp"].tolist() == [2.0]
    assert store.select(tmp_path, where="mac IS NULL").latencies["rx.udp"].tolist() == [1.0]


def _spec_columns(section):
    """Column names of the table under ``## <section>`` in docs/results-store.md."""
    root = api.repository_root()
    if root is None:
        pytest.skip("needs the source tree's docs/")
    with open(os.path.join(root, "docs", "results-store.md"), encoding="utf-8") as f:
        text = f.read()
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    names = []
    for line in body.splitlines():
        if line.startswith("| `"):
            cell = line.split("|")[1]
            names += [c.strip("` ") for c in cell.split(",") if c.strip().startswith("`")]
    return names


def test_the_spec_names_every_column_the_files_have(tmp_path):
    import pyarrow.parquet as pq
    run = store.append_latencies(tmp_path, {"rx.udp": [1.0]}, labels={"commit": "a"})
    packets = pq.read_schema(run.packets_path)
    runs = pq.read_schema(run.runs_path)
    assert _spec_columns("`packets`") == list(store.PACKET_COLUMNS) == packets.names
    documented = _spec_columns("`runs`")
    assert sorted(documented) == sorted(set(store.RESERVED_COLUMNS) - {"day"})
    assert sorted(runs.names) == sorted(documented + ["commit"])     # plus the label
    assert packets.metadata[b"latscope.schema_version"] == str(store.SCHEMA_VERSION).encode()
