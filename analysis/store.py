"""The results store: every packet's latency of every run, kept as a Parquet dataset.

A store is a folder (specification: ``docs/results-store.md``)::

    STORE/latscope-store.json                 {"format": "latscope-results", "schema_version": 1}
    STORE/v1/packets/day=YYYY-MM-DD/RUN.parquet   one row per packet and measurement or stage
    STORE/v1/runs/day=YYYY-MM-DD/RUN.parquet      one row: the run's metadata and user labels

Rules that make appends safe: a run writes two new files and never touches another; each is
written under a temporary name and linked to its final name, which fails rather than overwrite;
the run's name holds a random part, so writers on several machines do not collide; the packets
file is written first and the runs row last, and every query reads packets only of runs that
have their row, so a reader never sees half a run. User labels (``commit=abc``) are columns of the
runs row, so a selection is SQL over them: ``select(store, where="commit='abc'")``.

DuckDB answers the queries (embedded, one process); the files are plain Parquet with hive-style
``day=`` folders, so Spark, Polars or pyarrow read them unchanged.

>>> import tempfile, numpy as np
>>> folder = tempfile.TemporaryDirectory()
>>> run = append_latencies(folder.name, {"rx.udp": np.array([900.0, 1000.0, 1100.0])},
...                        labels={"commit": "abc"}, time="2026-11-26T12:00:00Z")
>>> select(folder.name, where="commit='abc'").latencies["rx.udp"].tolist()
[900.0, 1000.0, 1100.0]
>>> folder.cleanup()
"""

import dataclasses
import datetime
import glob
import json
import os
import re
import uuid

import numpy as np

from latscope import LatscopeError, __version__
from latscope.analysis.definitions import (
    default_definitions,
    load_definitions,
    parse_definitions,
)
from latscope.analysis.pairing import OK, STATUS_NAMES

__all__ = ["SCHEMA_VERSION", "RESERVED_COLUMNS", "PACKET_COLUMNS", "StoredRun", "Selection",
           "parse_labels", "check_label_key", "run_record", "packet_columns", "concat_rows",
           "append", "append_latencies", "store_analysis", "analysis_latencies", "connect",
           "runs", "select", "open_store"]

#: Version of the layout and columns. A new nullable column keeps it; a change of meaning of
#: a column or of the folder layout raises it, and the new version lives in its own ``vN`` folder.
SCHEMA_VERSION = 1
MARKER_FILE = "latscope-store.json"
FORMAT_NAME = "latscope-results"
#: Status of a packet whose two measurements are both paired but whose stage difference is < 0.
OUT_OF_ORDER = "out-of-order"

#: Columns of the packets table, in order (``docs/results-store.md`` gives their meaning).
PACKET_COLUMNS = ("run_id", "measure", "kind", "cls", "packet", "start_tick", "latency_ns",
                  "status")
#: Columns of the runs table other than user labels; a label may not take one of these names.
RESERVED_COLUMNS = ("run_id", "schema_version", "day", "time", "stored_at", "capture_id",
                    "source", "config_label", "board", "gateware", "gateware_hash", "firmware",
                    "latscope_version", "tick_hz", "simulated", "packets", "measures",
                    "label_keys", "config_json", "definitions_json", "metadata_json")
_LABEL_KEY = re.compile(r"[a-z_][a-z0-9_]*\Z")
_FRAME_CLASS = re.compile(r"(?P<stage>.+)\[(?P<cls>[^\]]+)\]\Z")


@dataclasses.dataclass(frozen=True)
class StoredRun:
    """One appended run: its id, the two files written and how many packet rows."""
    run_id: str
    packets_path: str
    runs_path: str
    rows: int


@dataclasses.dataclass
class Selection:
    """Valid latencies (ns, status ``ok``) per measurement of the selected runs, and those runs'
    ids in time order."""
    latencies: dict
    run_ids: list

    def measures(self):
        return sorted(self.latencies)


def parse_labels(texts):
    """``["commit=abc", "board=ecpix5"]`` -> ``{"commit": "abc", "board": "ecpix5"}``.

    >>> parse_labels(["commit=abc123", "mac=gem"])
    {'commit': 'abc123', 'mac': 'gem'}
    >>> parse_labels(["commit"])
    Traceback (most recent call last):
    latscope.LatscopeError: a label must be key=value, not 'commit'
    """
    out = {}
    for text in texts or ():
        key, sep, value = str(text).partition("=")
        key = key.strip()
        if not sep:
            raise LatscopeError(f"a label must be key=value, not {text!r}")
        check_label_key(key)
        out[key] = value.strip()
    return out


def check_label_key(key):
    """Raise unless ``key`` can be a label column (lower-case identifier, not reserved)."""
    if not _LABEL_KEY.match(key):
        raise LatscopeError(f"a label key must be a lower-case identifier ([a-z_][a-z0-9_]*), "
                            f"not {key!r}")
    if key in RESERVED_COLUMNS:
        raise LatscopeError(f"a label key must not be one of the store's columns "
                            f"({', '.join(RESERVED_COLUMNS)}), not {key!r}")


def _utc(time):
    """A UTC datetime from None (now), a datetime, or ISO 8601 text."""
    if time is None:
        return datetime.datetime.now(datetime.UTC)
    if isinstance(time, datetime.datetime):
        return time if time.tzinfo else time.replace(tzinfo=datetime.UTC)
    try:
        parsed = datetime.datetime.fromisoformat(str(time).replace("Z", "+00:00"))
    except ValueError:
        raise LatscopeError(f"a run time must be ISO 8601 text, not {time!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def run_record(metadata, *, labels=None, definitions=None, source=None, time=None,
               capture_id=None):
    """The runs row (a dict of column -> value) for a capture's metadata (pure).

    ``time`` defaults to the capture's ``start_time``, else now. Build facts come from the
    metadata as ``latscope capture`` writes it: ``instrument.board``, ``instrument.gateware_major``
    / ``_minor`` and ``source_hash``, the ``dut`` table (the firmware's description), and
    ``software.latscope``.

    >>> r = run_record({"tick_hz": 320e6, "instrument": {"board": "ecpix5", "gateware_major": 1,
    ...                 "gateware_minor": 2, "source_hash": "f00d"}, "label": "gem-64"},
    ...                labels={"commit": "abc"}, time="2026-11-26T12:00:00Z")
    >>> r["board"], r["gateware"], r["gateware_hash"], r["config_label"], r["commit"], r["day"]
    ('ecpix5', '1.2', 'f00d', 'gem-64', 'abc', '2026-11-26')
    """
    metadata = dict(metadata or {})
    labels = dict(labels or {})
    for key in labels:
        check_label_key(key)
    instrument = metadata.get("instrument") if isinstance(metadata.get("instrument"), dict) \
        else {}
    if time is None:
        try:
            when = _utc(metadata.get("start_time"))
        except LatscopeError:       # a capture's own odd time: the run is stored as of now
            when = _utc(None)
    else:
        when = _utc(time)
    major, minor = instrument.get("gateware_major"), instrument.get("gateware_minor")
    software = metadata.get("software") if isinstance(metadata.get("software"), dict) else {}
    sim = bool(instrument.get("simulated") or metadata.get("simbench")
               or metadata.get("simulated"))
    if definitions is not None and hasattr(definitions, "to_dict"):
        definitions = definitions.to_dict()
    if definitions is None:
        definitions = metadata.get("definitions")
    config = {k: metadata[k] for k in ("label", "dut", "scenario", "markers", "channels",
                                       "frames", "glitch_cycles", "edges") if k in metadata}
    tick_hz = metadata.get("tick_hz")
    row = {
        "run_id": None, "schema_version": SCHEMA_VERSION, "day": when.strftime("%Y-%m-%d"),
        "time": when, "stored_at": None,
        "capture_id": capture_id or metadata.get("capture_id")
        or (f"{os.path.basename(source)}@{metadata['start_time']}"
            if source and metadata.get("start_time") else None),
        "source": os.fspath(source) if source else None,
        "config_label": _text(metadata.get("label") or metadata.get("config")),
        "board": _text(instrument.get("board") or metadata.get("board")),
        "gateware": f"{major}.{minor}" if major is not None else None,
        "gateware_hash": _text(instrument.get("source_hash")),
        "firmware": json.dumps(metadata["dut"], sort_keys=True, default=str)
        if metadata.get("dut") else None,
        "latscope_version": _text(software.get("latscope")) or __version__,
        "tick_hz": int(round(float(tick_hz))) if tick_hz else None,
        "simulated": sim,
        "label_keys": sorted(labels),
        "config_json": json.dumps(config, sort_keys=True, default=str),
        "definitions_json": json.dumps(definitions, sort_keys=True, default=str)
        if definitions else None,
        "metadata_json": json.dumps(metadata, sort_keys=True, default=str),
    }
    row.update({k: str(v) for k, v in labels.items()})
    return row


def _text(value):
    if value is None:
        return None
    if isinstance(value, dict):
        return str(value.get("name")) if value.get("name") else json.dumps(value, sort_keys=True)
    return str(value)


def packet_columns(result, definitions=None):
    """Per-packet rows of an :class:`~latscope.analysis.engine.AnalysisResult` kept with
    ``keep_packets=True`` (pure): a dict of column -> array, columns as :data:`PACKET_COLUMNS`
    but ``run_id``.

    Measurements give one row per start edge with their pair status; a stage of
    ``definitions`` (``rx.ipudp = rx.udp - rx.copy``) one row per start edge, ``ok`` where both
    are paired and the difference is not negative (``out-of-order`` where it is), else the first
    measurement's status that is not ``ok``. Frame classes (``node.e2e[probe]``) have their class
    in ``cls``.
    """
    if result.packets is None:
        raise LatscopeError("storing an analysis needs its per-packet records (keep_packets=True)")
    tick_ns = 1e9 / result.tick_hz
    stages = tuple(definitions.stages) if definitions is not None else ()
    parts = []
    for table in result.packets:
        start = np.asarray(table.start, dtype=np.int64)
        index = np.arange(start.size, dtype=np.int64)
        for name, lat in table.latency.items():
            status = np.asarray(table.status[name], dtype=np.uint8)
            m = _FRAME_CLASS.match(name)
            kind = "frame" if m else "measurement"
            parts.append((name, kind, m["cls"] if m else None, index, start,
                          _ns(lat, status == OK, tick_ns), _status_names(status)))
        for stage in stages:
            if stage.start not in table.latency or stage.stop not in table.latency:
                continue
            a, b = table.latency[stage.start], table.latency[stage.stop]
            sa, sb = table.status[stage.start], table.status[stage.stop]
            both = (sa == OK) & (sb == OK)
            diff = np.asarray(b, np.int64) - np.asarray(a, np.int64)
            names = np.where(sa != OK, _status_names(sa), _status_names(sb)).astype(object)
            names[both & (diff < 0)] = OUT_OF_ORDER
            good = both & (diff >= 0)
            parts.append((stage.name, "stage", None, index, start, _ns(diff, good, tick_ns),
                          names))
    return concat_rows(parts)


def _ns(ticks, valid, tick_ns):
    out = np.asarray(ticks, dtype=np.float64) * tick_ns
    out[~np.asarray(valid, bool)] = np.nan
    return out


def _status_names(status):
    lookup = np.array([STATUS_NAMES.get(k, str(k)) for k in range(256)], dtype=object)
    return lookup[np.asarray(status, dtype=np.uint8)]


def concat_rows(parts):
    """Packet columns (as :func:`packet_columns` returns) from parts, one per measurement:
    ``(measure, kind, cls, packet, start_tick, latency_ns, status)``, the last four arrays of one
    length per part."""
    sizes = [len(p[3]) for p in parts]
    cols = {
        "measure": np.repeat(np.array([p[0] for p in parts], dtype=object), sizes),
        "kind": np.repeat(np.array([p[1] for p in parts], dtype=object), sizes),
        "cls": np.repeat(np.array([p[2] for p in parts], dtype=object), sizes),
        "packet": np.concatenate([p[3] for p in parts]) if parts else np.empty(0, np.int64),
        "start_tick": np.concatenate([p[4] for p in parts]) if parts else np.empty(0, np.int64),
        "latency_ns": np.concatenate([p[5] for p in parts]) if parts else np.empty(0),
        "status": np.concatenate([p[6] for p in parts]) if parts else np.empty(0, object),
    }
    return cols


def open_store(store, *, create=False):
    """The store's version folder (``STORE/v1``), checking the marker file; with ``create`` a new
    store is made where none is."""
    store = os.fspath(store)
    marker = os.path.join(store, MARKER_FILE)
    if not os.path.exists(marker):
        if not create:
            raise LatscopeError(f"{store}: not a latscope results store (no {MARKER_FILE})")
        os.makedirs(store, exist_ok=True)
        _write_new(marker, json.dumps({"format": FORMAT_NAME,
                                       "schema_version": SCHEMA_VERSION}).encode() + b"\n",
                   exist_ok=True)
    try:
        with open(marker) as f:
            info = json.load(f)
    except (OSError, ValueError) as error:
        raise LatscopeError(f"{marker}: unreadable store marker ({error})") from None
    if info.get("format") != FORMAT_NAME or info.get("schema_version") != SCHEMA_VERSION:
        raise LatscopeError(f"{store}: store schema must be {FORMAT_NAME} version "
                            f"{SCHEMA_VERSION}, not {info!r}")
    return os.path.join(store, f"v{SCHEMA_VERSION}")


def _write_new(path, data, exist_ok=False):
    """Write ``data`` to a temporary file beside ``path`` and link it into place: readers never
    see a partial file and an existing file is never replaced."""
    tmp = os.path.join(os.path.dirname(path), f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "wb") as f:
        f.write(data)
    _publish(tmp, path, exist_ok)


def _publish(tmp, path, exist_ok=False):
    try:
        os.link(tmp, path)
    except FileExistsError:
        if not exist_ok:
            raise LatscopeError(f"{path}: exists; the store never replaces a file") from None
    finally:
        os.unlink(tmp)


def _new_run_id(when):
    return f"{when.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:16]}"


def append(store, columns, record):
    """Append one run: ``columns`` as :func:`packet_columns` returns, ``record`` as
    :func:`run_record`. Returns a :class:`StoredRun`."""
    import pyarrow as pa  # heavy: only when a store is written
    import pyarrow.parquet as pq

    root = open_store(store, create=True)
    record = dict(record)
    run_id = _new_run_id(record["time"])
    record["run_id"] = run_id
    record["stored_at"] = datetime.datetime.now(datetime.UTC)
    rows = len(columns["packet"])
    record["packets"] = rows
    day = record["day"]
    paths = {}
    for table in ("packets", "runs"):
        folder = os.path.join(root, table, f"day={day}")
        os.makedirs(folder, exist_ok=True)
        paths[table] = os.path.join(folder, f"{run_id}.parquet")
    measure = _dictionary(pa, columns["measure"])
    record["measures"] = sorted(measure.dictionary.to_pylist())
    packets = pa.table({
        "run_id": pa.DictionaryArray.from_arrays(np.zeros(rows, np.int32), [run_id]),
        "measure": measure,
        "kind": _dictionary(pa, columns["kind"]),
        "cls": _dictionary(pa, columns["cls"]),
        "packet": pa.array(columns["packet"], pa.int64()),
        "start_tick": pa.array(columns["start_tick"], pa.int64()),
        "latency_ns": pa.array(columns["latency_ns"], pa.float64(),
                               mask=np.isnan(columns["latency_ns"])),
        "status": _dictionary(pa, columns["status"]),
    })
    meta = {b"latscope.schema_version": str(SCHEMA_VERSION).encode()}
    _write_table(pq, packets.replace_schema_metadata(meta), paths["packets"])
    types = {"schema_version": pa.int32(), "time": pa.timestamp("us", tz="UTC"),
             "stored_at": pa.timestamp("us", tz="UTC"), "tick_hz": pa.int64(),
             "simulated": pa.bool_(), "packets": pa.int64(), "measures": pa.list_(pa.string()),
             "label_keys": pa.list_(pa.string())}
    runs_table = pa.table({k: pa.array([v], types.get(k, pa.string()))
                           for k, v in record.items() if k != "day"})   # day: the folder
    _write_table(pq, runs_table.replace_schema_metadata(meta), paths["runs"])
    return StoredRun(run_id, paths["packets"], paths["runs"], rows)


def _dictionary(pa, values):
    """A dictionary-encoded string array of an object array with few distinct values (None =
    null), hashed once rather than converted string by string."""
    import pandas as pd  # heavy: only when a store is written
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=True)
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32), mask=codes < 0),
                                          pa.array(list(uniques), pa.string()))


def _write_table(pq, table, path):
    tmp = os.path.join(os.path.dirname(path), f".tmp-{uuid.uuid4().hex}")
    pq.write_table(table, tmp, compression="zstd",
                   use_byte_stream_split=["latency_ns"],
                   column_encoding={"packet": "DELTA_BINARY_PACKED",
                                    "start_tick": "DELTA_BINARY_PACKED"}
                   if "packet" in table.column_names else None,
                   use_dictionary=[c for c in table.column_names
                                   if c not in ("packet", "start_tick", "latency_ns")])
    _publish(tmp, path)


def append_latencies(store, latencies, *, labels=None, metadata=None, time=None, source=None):
    """Append a run given as valid latencies (ns) per measurement, e.g. from a synthetic
    campaign or a test harness: every row ``ok``, packets numbered from 0, no start ticks."""
    parts = []
    for name, values in latencies.items():
        v = np.asarray(values, dtype=np.float64)
        idx = np.arange(v.size, dtype=np.int64)
        m = _FRAME_CLASS.match(name)
        parts.append((name, "frame" if m else "measurement", m["cls"] if m else None, idx,
                      np.full(v.size, -1, np.int64), v, np.full(v.size, "ok", dtype=object)))
    record = run_record(metadata or {}, labels=labels, time=time, source=source)
    return append(store, concat_rows(parts), record)


def store_analysis(store, analysis, *, labels=None, definitions=None, time=None):
    """Append an :class:`~latscope.analysis.api.Analysis` (loaded with ``packets=True``) to the
    store: what ``latscope analyze CAPTURE --store DIR --label k=v`` does. ``definitions`` are
    those the analysis used (its stages become rows too); default: the capture's own, else the
    standard ones."""
    definitions = _definitions_of(analysis, definitions)
    columns = packet_columns(analysis.result, definitions)
    record = run_record(analysis.metadata, labels=labels, definitions=definitions,
                        source=analysis.path, time=time)
    if record["config_label"] is None:
        record["config_label"] = analysis.label
    return append(store, columns, record)


def _definitions_of(analysis, definitions):
    """The definitions an analysis used: those given (object or TOML path), else the capture's
    own, else the standard ones (as :func:`latscope.analysis.api.analyze_file` chooses)."""
    if isinstance(definitions, (str, os.PathLike)):
        return load_definitions(definitions)
    if definitions is not None:
        return definitions
    stored = analysis.metadata.get("definitions")
    return parse_definitions(stored) if stored else default_definitions()


def analysis_latencies(analysis, definitions=None):
    """Valid latencies (ns) per measurement and stage of an analysis loaded with
    ``packets=True``, exactly the rows :func:`store_analysis` would store as ``ok``."""
    cols = packet_columns(analysis.result, _definitions_of(analysis, definitions))
    ok = cols["status"] == "ok"
    return {str(name): cols["latency_ns"][ok & (cols["measure"] == name)]
            for name in dict.fromkeys(cols["measure"][ok].tolist())}


# --- queries -----------------------------------------------------------------------------------
def _globs(root):
    return (os.path.join(root, "runs", "*", "*.parquet"),
            os.path.join(root, "packets", "*", "*.parquet"))


def connect(store):
    """A DuckDB connection with two views: ``runs`` (one row per run, user labels as columns)
    and ``packets`` (the rows of runs that have a runs row). One thread: queries share the
    machine."""
    import duckdb  # heavy: only when a store is read

    root = open_store(store)
    runs_glob, packets_glob = _globs(root)
    if not glob.glob(runs_glob):
        raise LatscopeError(f"{store}: the store holds no runs yet")
    con = duckdb.connect(config={"threads": 1})
    con.execute(f"CREATE VIEW runs AS SELECT * FROM read_parquet({_sql_text(runs_glob)}, "
                f"hive_partitioning = true, union_by_name = true)")
    con.execute(f"CREATE VIEW packets AS SELECT * FROM read_parquet({_sql_text(packets_glob)}, "
                f"hive_partitioning = true) WHERE run_id IN (SELECT run_id FROM runs)")
    return con


def _sql_text(text):
    return "'" + str(text).replace("'", "''") + "'"


def _run_filter(con, where):
    if not where:
        return "TRUE"
    try:
        con.execute(f"SELECT run_id FROM runs WHERE {where} LIMIT 0")
    except Exception as error:          # duckdb raises its own error classes
        message = str(error).splitlines()[0]
        raise LatscopeError(f"a run selection must be an SQL condition on the runs' columns "
                            f"and labels, not {where!r} ({message})") from None
    return where


def runs(store, where=None):
    """The selected runs' rows as a list of dicts, in time order."""
    with connect(store) as con:
        cond = _run_filter(con, where)
        cur = con.execute(f"SELECT * FROM runs WHERE {cond} ORDER BY time, run_id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def select(store, where=None, measures=None):
    """Valid latencies of the runs matching ``where`` (SQL over the runs' columns and labels,
    e.g. ``"commit='abc'"``), pooled per measurement; a :class:`Selection`."""
    with connect(store) as con:
        cond = _run_filter(con, where)
        ids = [r[0] for r in con.execute(
            f"SELECT run_id FROM runs WHERE {cond} ORDER BY time, run_id").fetchall()]
        if not ids:
            raise LatscopeError(f"{store}: no run matches {where!r}")
        extra = ""
        params = [ids]
        if measures:
            extra = " AND measure IN (SELECT unnest(?))"
            params.append(list(measures))
        table = con.execute(
            "SELECT measure, latency_ns FROM packets WHERE status = 'ok' AND "
            f"run_id IN (SELECT unnest(?)){extra} ORDER BY measure", params).fetchnumpy()
    measure = np.asarray(table["measure"], dtype=object)
    values = np.asarray(table["latency_ns"], dtype=np.float64)
    out = {}
    if len(measure):
        cuts = np.flatnonzero(measure[1:] != measure[:-1]) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(measure)], strict=True):
            out[str(measure[lo])] = values[lo:hi]
    return Selection(out, ids)
