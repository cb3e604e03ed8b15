"""Python API for notebooks and scripts: load a capture, get DataFrames of packets and results.

This is the thin shell around the array core (:mod:`latscope.analysis.engine`): it opens any
capture file through the one reader (:func:`latscope.capture.files.open.open_events`: ``.lsc``,
``.sr`` with a ``--map``-style channel map, ``.vcd``, ``.csv``) and feeds its events chunk by chunk,
in one pass, to an :class:`~latscope.analysis.engine.Analyzer`.

Examples
--------
>>> from latscope.analysis import api                          # doctest: +SKIP
>>> a = api.load("fixtures/bench/gem-64.lsc")                  # doctest: +SKIP
>>> a.summary()[["n", "mean_ns", "p99_ns", "p999_ns"]]         # doctest: +SKIP
>>> a.packets().head()                                         # doctest: +SKIP
"""

import dataclasses
import itertools
import json
import os

import numpy as np

from latscope import LatscopeError
from latscope.analysis.definitions import (
    CHANNEL_ROLES,
    default_definitions,
    load_definitions,
    parse_definitions,
    resolve_markers,
)
from latscope.analysis.dut_times import dut_times_beside_stats
from latscope.analysis.engine import Analyzer
from latscope.analysis.file_pass import (
    FramePass,
    RecordNames,
    Window,
)
from latscope.analysis.forensics import explain as explain_packets
from latscope.analysis.pairing import STATUS_NAMES
from latscope.analysis.report.html import write_report as write_report_page
from latscope.analysis.report.labels import class_label, counted_only_classes, integrity_note
from latscope.analysis.report.summary import bounded, headline_names
from latscope.analysis.report.tables import common_names, compare_classes, summary_text
from latscope.analysis.stats import DEFAULT_EXACT_LIMIT, PERCENTILES, percentile_key
from latscope.capture.files.open import open_events
from latscope.capture.files.provenance import provenance

__all__ = ["Analysis", "integrity_note", "load", "analyze_file", "from_events", "summary_frame",
           "packets_frame", "capture_label", "capture_size", "summarize_captures", "write_report",
           "write_analyses_report",
           "repository_root", "class_label", "counted_only_classes", "explain", "window_of",
           "explain_headlines"]


@dataclasses.dataclass
class Analysis:
    """A capture's analysis, with pandas views.

    Attributes
    ----------
    path : str or None
    label : str
        Configuration label (from the metadata, else the file name).
    size : int or None
        Frame size in bytes (from the metadata), for size regressions.
    result : AnalysisResult
    """
    path: str | None
    label: str
    size: int | None
    result: object

    @property
    def stats(self):
        return self.result.stats

    @property
    def stages(self):
        return self.result.stages

    @property
    def metadata(self):
        return self.result.metadata

    @property
    def integrity(self):
        """The input file's integrity facts
        (:func:`latscope.capture.files.integrity.damage_summary`: ``damaged``, ``finalised``,
        ``truncated``, ``regions``, ``skipped_bytes``, ``problems``, ``text``), or ``None`` for
        inputs that are not capture files. Show :func:`integrity_note` next to every figure made
        from a capture whose note is not empty."""
        return self.result.metadata.get("integrity")

    def summary(self, stages=False):
        """DataFrame, one row per measurement (or stage), every figure in ns."""
        return summary_frame(self.result.stages if stages else self.result.stats)

    def packets(self):
        """DataFrame, one row per packet: ``group`` (start edge), ``start_tick``, ``start_s``, and
        per measurement ``<name>_ns`` (NaN unless paired) and ``<name>_status``."""
        if self.result.packets is None:
            raise LatscopeError("this analysis was made without per-packet records; load with "
                                "packets=True")
        return packets_frame(self.result)

    def latencies_ns(self, name):
        """Valid per-packet latencies of one measurement, ns (NumPy array)."""
        for table in self.result.packets or ():
            if name in table.latency:
                lat = table.latency[name]
                return lat[lat >= 0] * (1e9 / self.result.tick_hz)
        raise LatscopeError(f"no per-packet latencies for {name!r}")

    def to_dict(self):
        out = self.result.to_dict()
        out.update(path=self.path, label=self.label, size=self.size,
                   provenance=provenance(self.metadata), window=window_of(self))
        if "dut_beside_wire" in self.metadata:
            # Zephyr's own RX/TX times (capture metadata dut_time_stats) beside the wire's
            out["dut_beside_wire"] = self.metadata["dut_beside_wire"]
        fa = getattr(self.result, "frames", None)
        if fa is not None and out.get("frames") is not None:
            # class names beside the numbers, and the classes the FPGA only counted
            for key, entry in out["frames"]["classes"].items():
                entry["name"] = class_label(key, self.metadata)
            out["frames"]["counted_only"] = {
                str(cls): dict(totals, name=class_label(cls, self.metadata))
                for cls, totals in counted_only_classes(
                    fa, getattr(self.result, "frame_counters", None)).items()}
        return out

    def compare_classes(self, confidence=0.95):
        """DataFrame: within this capture, each class against the first class on every stage
        they share (:func:`latscope.analysis.report.compare_classes`): ``class``, ``baseline``,
        ``stage``, ``mean_diff_ns`` with its interval, ``p50_diff_ns``, ``p99_diff_ns``,
        ``mann_whitney_p``."""
        import pandas as pd  # why: pandas is heavy and only the notebook views need it
        rows = []
        for r in compare_classes(self, confidence=confidence):
            c = r.comparison
            rows.append({"class": r.other, "baseline": r.base, "stage": r.measurement,
                         "mean_diff_ns": c.mean_diff_ns, "mean_lower_ns": c.mean_lower_ns,
                         "mean_upper_ns": c.mean_upper_ns,
                         "p50_diff_ns": c.percentiles[50.0].diff_ns,
                         "p99_diff_ns": c.percentiles[99.0].diff_ns,
                         "mann_whitney_p": c.p_value})
        return pd.DataFrame(rows)

    def frame_classes(self):
        """DataFrame, one row per class of received frames (captures with frame records):
        ``class`` (its name from the capture config), ``requests``, ``replied``, ``dropped``,
        ``unknown``, ``duplicates``, ``reordered``, ``fcs_errors``, ``counted_frames`` and
        ``counted_octets`` (the FPGA's receive totals), and per stage ``<stage>_p50_ns`` /
        ``<stage>_p99_ns`` (``node.e2e``, ``rx.udp`` ...). Classes the FPGA only counted have
        their totals alone (NaN elsewhere)."""
        import pandas as pd  # why: pandas is heavy and only the notebook views need it
        fa = getattr(self.result, "frames", None)
        if fa is None:
            raise LatscopeError(f"{self.path or self.label}: the capture has no frame records")
        rows = []
        counted_only = counted_only_classes(fa, getattr(self.result, "frame_counters", None))
        for cls, c in sorted(fa.classes.items()):
            rx = c.counted.get("rx", {})
            row = {"class": class_label(cls, self.metadata), "requests": c.requests,
                   "replied": c.replied, "dropped": c.dropped, "unknown": c.unknown,
                   "duplicates": c.duplicates, "reordered": c.reordered,
                   "fcs_errors": c.fcs_errors, "counted_frames": rx.get("frames"),
                   "counted_octets": rx.get("octets")}
            for stage, st in c.stats.items():
                row[f"{stage}_p50_ns"] = st.p50_ns
                row[f"{stage}_p99_ns"] = st.p99_ns
            rows.append(row)
        for cls, totals in sorted(counted_only.items()):     # counted, never recorded
            rows.append({"class": class_label(cls, self.metadata), "fcs_errors":
                         totals["fcs_errors"], "counted_frames": totals["frames"],
                         "counted_octets": totals["octets"]})
        return pd.DataFrame(rows)


def summary_frame(stats):
    """DataFrame of :class:`LatencyStats` objects keyed by name."""
    import pandas as pd  # why: heavy, and the command line never needs it
    rows = {}
    for name, s in stats.items():
        row = {"n": s.n, "mean_ns": s.mean_ns, "std_ns": s.std_ns,
               "three_sigma_ns": s.three_sigma_ns, "min_ns": s.min_ns}
        for p in PERCENTILES:
            q = s.quantiles[p]
            key = percentile_key(p)
            row[f"{key}_ns"] = q.value_ns
            row[f"{key}_lo_ns"] = np.nan if q.lower_ns is None else q.lower_ns
            row[f"{key}_hi_ns"] = np.nan if q.upper_ns is None else q.upper_ns
        row.update(max_ns=s.max_ns, iqr_ns=s.iqr_ns, mad_ns=s.mad_ns, pdv_ns=s.pdv_ns,
                   resolution_ns=s.resolution_ns, method=s.method)
        for key in ("missed", "spurious", "duplicate", "lost_gap", "truncated"):
            if key in s.counts:
                row[key] = s.counts[key]
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def packets_frame(result):
    """DataFrame of per-packet records (see :meth:`Analysis.packets`)."""
    import pandas as pd  # why: pandas is heavy and only the notebook views need it
    frames = []
    tick_ns = 1e9 / result.tick_hz
    for table in result.packets:
        cols = {"group": table.start_edge, "start_tick": table.start,
                "start_s": table.start / result.tick_hz}
        for name, lat in table.latency.items():
            cols[f"{name}_ns"] = np.where(lat >= 0, lat * tick_ns, np.nan)
            cols[f"{name}_status"] = pd.Categorical.from_codes(
                table.status[name], categories=[STATUS_NAMES[k] for k in sorted(STATUS_NAMES)])
        frames.append(pd.DataFrame(cols))
    if not frames:
        return pd.DataFrame(columns=["group", "start_tick", "start_s"])
    return pd.concat(frames, ignore_index=True, sort=False)


def explain(analysis, name, *, top=10, before_ns=None):
    """The slowest packets of measurement ``name`` and the window before each
    (:func:`latscope.analysis.forensics.explain`), reading the capture's edges in those windows
    again from ``analysis.path``; marker channels are named by their meanings.

    Returns
    -------
    Forensics
    """
    table = next((t for t in analysis.result.packets or () if name in t.latency), None)
    sample = _class_sample(analysis, name) if table is None else None
    if table is None and sample is None:
        known = ", ".join(n for t in analysis.result.packets or () for n in t.latency)
        raise LatscopeError(f"Measurement to explain must be one with per-packet records "
                            f"({known}, or a receive stage of a frame class), not {name!r}")
    if not analysis.path:
        raise LatscopeError("the analysis must come from a file to read its edges again, not "
                            "from arrays")
    markers = ((analysis.metadata or {}).get("marker_map") or {}).get("markers") or {}
    start, latency = (table.start, table.latency[name]) if table is not None else sample
    reach = int(max(before_ns or 0, 1e6) * analysis.result.tick_hz / 1e9)
    keep_lo = int(start.min()) - reach if len(start) else 0
    parts = []
    fa = analysis.result.frames
    with open_events(analysis.path) as source:
        raw = source.info.channel_names or dict(CHANNEL_ROLES)
        names = raw if isinstance(raw, dict) else dict(enumerate(raw))
        names = {int(k): markers.get(v, v) for k, v in names.items()}
        # the frame records are placed again in this pass, to name the pulses in each window
        records = RecordNames(source.info, analysis.metadata) if fa is not None else None
        for chunk in source.chunks():
            if records is not None:
                records.feed(chunk)
            sel = chunk.time >= keep_lo
            parts.append((np.asarray(chunk.time[sel]), np.asarray(chunk.channel[sel]),
                          np.asarray(chunk.rising[sel])))
    time = np.concatenate([p[0] for p in parts]) if parts else np.array([], np.int64)
    channel = np.concatenate([p[1] for p in parts]) if parts else np.array([], np.int64)
    rising = np.concatenate([p[2] for p in parts]) if parts else np.array([], bool)
    listed = [names.get(i, f"ch{i}") for i in range(max(names, default=-1) + 1)]
    top_channel = int(channel.max()) if len(channel) else -1
    listed += [f"ch{i}" for i in range(len(listed), top_channel + 1)]
    return explain_packets(start, latency, time, channel, rising,
                           tick_hz=analysis.result.tick_hz, channel_names=listed,
                           measurement=name, top=top, before_ns=before_ns,
                           records=records.finish() if records is not None else None)


def _class_sample(analysis, name):
    """``(request end ticks, latency ticks)`` of a per-class receive stage such as
    ``rx.udp[hp]`` or ``node.e2e[hp]`` (both start at the request's end), or ``None``."""
    fa = analysis.result.frames
    if fa is None or not name.endswith("]") or "[" not in name:
        return None
    base, label = name[:-1].split("[", 1)
    if not (base.startswith("rx.") or base == "node.e2e"):
        return None
    for cls, report_ in fa.classes.items():
        if class_label(cls, analysis.metadata) == label and base in report_.samples:
            at, values = report_.samples[base]
            order = np.argsort(at, kind="stable")
            return np.asarray(at)[order], np.asarray(values)[order]
    return None


def capture_label(metadata, path=None):
    """A configuration label: metadata ``config``/``label``/``profile`` (or the simulated bench's
    ``simbench.profile``), else the file name without extension."""
    for key in ("config", "label", "profile"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict) and value.get("name"):
            return str(value["name"])
    sim = metadata.get("simbench") or metadata.get("simulated") or {}
    if isinstance(sim, dict) and sim.get("profile"):
        return str(sim["profile"])
    if path:
        return os.path.splitext(os.path.basename(path))[0]
    return "capture"


def capture_size(metadata):
    """Frame size in bytes from the metadata (``frame_bytes``, ``size``, or nested under
    ``simbench``/``profile``/``traffic``), or None."""
    places = [metadata] + [metadata.get(k) for k in ("simbench", "simulated", "profile",
                                                     "traffic", "config")]
    for place in places:
        if isinstance(place, dict):
            for key in ("frame_bytes", "size", "frame_size"):
                value = place.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                    return int(value)
    return None


def _definitions(definitions, metadata):
    if definitions is None:
        stored = metadata.get("definitions")
        return parse_definitions(stored) if stored else None
    if isinstance(definitions, (str, os.PathLike)):
        return load_definitions(definitions)
    if isinstance(definitions, dict):
        return parse_definitions(definitions)
    return definitions


def _select(defs, measures):
    if not measures:
        return defs
    return (defs or default_definitions()).select(list(measures))


def rx_valid_names(names, chunks):
    """``(names, note)``: the definitions' ``rx_dv`` is the capture's RX valid signal, which is
    ``crs_dv`` on RMII. When the capture names both and ``crs_dv`` rises before ``rx_dv`` ever
    does (``chunks``: ``(channel, rising)`` arrays, read only until one of them rises), the two
    roles swap for the analysis and ``note`` says so; otherwise ``names`` as they are and ``""``.

    >>> import numpy as np
    >>> rx_valid_names({0: "rx_dv", 2: "crs_dv"}, [(np.array([2, 0]), np.array([True, True]))])
    ({0: 'crs_dv', 2: 'rx_dv'}, 'crs_dv (channel 2): rx_dv has no pulses before it')
    """
    by_role = {role: int(ch) for ch, role in names.items()}
    if "rx_dv" not in by_role or "crs_dv" not in by_role:
        return names, ""
    rx, crs = by_role["rx_dv"], by_role["crs_dv"]
    for channel, rising in chunks:
        up = np.asarray(channel)[np.asarray(rising, bool)]
        hit = np.flatnonzero((up == rx) | (up == crs))
        if len(hit):
            if up[hit[0]] == rx:
                return names, ""
            swapped = {ch: ("rx_dv" if int(ch) == crs else "crs_dv" if int(ch) == rx else role)
                       for ch, role in names.items()}
            return swapped, f"crs_dv (channel {crs}): rx_dv has no pulses before it"
    return names, ""


def from_events(time, channel, rising, *, tick_hz, channel_names=None, markers=None, losses=(),
                definitions=None, measures=None, label="events", size=None, packets=True,
                metadata=None, stored_markers=None, path=None, **kwargs):
    """Analyse event arrays held in memory; returns an :class:`Analysis`.

    With ``channel_names`` the marker meanings go through
    :func:`~latscope.analysis.definitions.resolve_markers` (``stored_markers`` as the data's
    own, ``markers`` as an override); without, the instrument's standard roles and the Zephyr
    app's default marker table are assumed (synthetic streams)."""
    defs = _select(_definitions(definitions, metadata or {}), measures)
    metadata = dict(metadata or {})
    if channel_names is not None:
        channel_names, rx_valid = rx_valid_names(channel_names, [(channel, rising)])
        if rx_valid:
            metadata["rx_valid"] = rx_valid
        marker_map = resolve_markers(defs, channel_names, stored_markers, markers)
        markers = marker_map.markers
        metadata["marker_map"] = dataclasses.asdict(marker_map)
    kwargs.setdefault("coded_markers", coded_markers(metadata))
    analyzer = Analyzer(defs, tick_hz=tick_hz, channel_names=channel_names, markers=markers,
                        losses=losses, keep_packets=packets, metadata=metadata,
                        require=measures or (), **kwargs)
    analyzer.feed(time, channel, rising)
    return Analysis(path, label, size, analyzer.finish())


def analyze_file(path, *, definitions=None, measures=None, packets=False, mapping=None,
                 exact_limit=DEFAULT_EXACT_LIMIT, confidence=0.95, progress=None, markers=None,
                 ns_histograms=False, start_s=None, stop_s=None):
    """Analyse a capture file (``.lsc``), a sigrok session file (``.sr``) or a latscope export
    (``.vcd``, ``.csv``), reading it once, in one pass.

    Memory: the events of ``.lsc`` and ``.sr`` files are never held whole (``.lsc`` chunks are
    views of the mapped file, ``.sr`` is decoded block by block; ``.vcd``/``.csv`` exports of a
    time window are read whole), so it is bounded by one chunk plus the statistics'
    ``exact_limit`` values per measurement. A frame capture's records are read block by block
    (twice: first only their flags, for whether any carries the traffic magic), tied to their DV
    pulses and paired in the same pass over the events, window by window
    (:mod:`latscope.analysis.frame_stream`): what it holds is what is still open (requests within
    their reply window, markers within theirs), and its per-class stages use the same bounded
    statistics, so memory does not grow with the capture either (``latscope bench --only
    analysis``; ``docs/performance.md``).

    Parameters
    ----------
    path : str
    definitions : Definitions, dict or path, optional
        Default: those stored in the capture, else the standard ones.
    measures : list of str, optional
        Only these measurements (each must be computable).
    packets : bool
        Keep per-packet records (memory grows with the capture).
    mapping : str, optional
        For ``.sr`` files: ``--map`` text such as ``"rx_dv=D0,m_isr=D1"``.
    progress : callable, optional
        Called as ``progress(events_done, events_total)`` after each chunk.
    markers : dict or str, optional
        Marker meanings (``--markers`` text or dict); default: those the file carries. Which map
        was used and why is ``result.metadata["marker_map"]`` (see
        :func:`latscope.analysis.definitions.resolve_markers`, which refuses to guess).
    ns_histograms : bool
        Keep each measurement's latencies in whole ns for ``.hlog`` export.
    start_s, stop_s : float or fractions.Fraction, optional
        Analyse only the events with ``start_s <= t < stop_s`` (seconds since the instrument's
        timestamp reset, as ``latscope export --from/--to`` cuts a window), before any
        statistics: a packet whose start or stop edge lies outside is not paired, and frame
        records count when their first edge is inside. The window used is
        ``result.metadata["window"]`` (:func:`window_of`).

    Returns
    -------
    Analysis
    """
    with open_events(path, mapping) as source:
        window = Window(source.info, start_s, stop_s)
        if source.info.format == "sr":
            a = _analyze_sampled(source, definitions, measures, packets, exact_limit,
                                 confidence, markers, ns_histograms, window)
        else:
            a = _analyze_events(source, definitions, measures, packets, exact_limit, confidence,
                                progress, markers, ns_histograms, window)
    window.finish(a.result)
    return a


def window_of(analysis):
    """The ``--from``/``--to`` window an analysis was cut to (``{"from_s", "to_s",
    "start_tick", "stop_tick", "events"}``, a bound ``None`` where open), or ``None`` for a
    whole capture."""
    return (analysis.metadata or {}).get("window")


def _with_rx_valid(names, chunks):
    """``(names, note, chunks)``: :func:`rx_valid_names` on the first chunks, and every chunk
    again (those it read first, then the rest), so the file is read in one pass."""
    chunks = iter(chunks)
    read = []

    def levels():
        for chunk in chunks:
            read.append(chunk)
            yield chunk.channel, chunk.rising
    names, note = rx_valid_names(names, levels())
    return names, note, itertools.chain(read, chunks)


def _analyze_events(source, definitions, measures, packets, exact_limit, confidence, progress,
                    markers, ns_histograms, window):
    """Event files (``.lsc``, ``.vcd``, ``.csv``): one pass over the chunks; frame records are
    paired after it from the DV and marker edges gathered on the way."""
    info = source.info
    path = info.path
    capture = info.format == "lsc"
    metadata = info.metadata
    defs = _select(_definitions(definitions, metadata), measures)
    names = (info.channel_names or dict(CHANNEL_ROLES)) if capture else info.channel_names
    names, rx_valid, chunks = _with_rx_valid(names, source.chunks())
    if capture:
        if rx_valid:
            metadata = dict(metadata, rx_valid=rx_valid)
    else:
        metadata = dict(metadata)
        if rx_valid:
            metadata["rx_valid"] = rx_valid
    marker_map = resolve_markers(defs, names, info.markers, markers)
    if not capture:
        metadata["marker_map"] = dataclasses.asdict(marker_map)
    analyzer = Analyzer(defs, tick_hz=info.tick_hz, channel_names=names,
                        markers=marker_map.markers, losses=window.losses(info.losses),
                        ns_histograms=ns_histograms, keep_packets=packets,
                        exact_limit=exact_limit, confidence=confidence,
                        require=measures or (), metadata=metadata,
                        offsets=info.channel_offsets,
                        coded_markers=coded_markers(metadata))
    frames = FramePass(source, marker_map.markers, tick_hz=analyzer.tick_hz,
                        confidence=confidence, exact_limit=exact_limit, keep_samples=packets,
                        window=window) if info.frames is not None else None
    done = 0
    for chunk in chunks:
        if frames is not None:      # every DV edge: frame k is the k-th pulse since the reset
            frames.add(chunk)
        done += len(chunk.time)
        chunk = next(window.cut([chunk]))
        try:
            analyzer.feed(chunk.time, chunk.channel, chunk.rising)
        except LatscopeError as error:
            if not capture:
                raise
            raise LatscopeError(f"{path}: {error} (after {done:,} events; check the file "
                                f"with latscope verify)") from None
        if progress and capture:
            progress(done, info.n_events)
    result = analyzer.finish()
    if not capture:
        return Analysis(path, capture_label(info.metadata, path), None, result)
    result.metadata = dict(result.metadata, integrity=info.integrity,
                           marker_map=dataclasses.asdict(marker_map))
    if frames is not None:
        frames.finish(result)
    if info.problems:
        result.metadata["problems"] = list(info.problems)
    batches = (metadata.get("dut_time_stats") or {}).get("batches")
    if batches:
        result.metadata["dut_beside_wire"] = [
            r.to_dict() for r in dut_times_beside_stats(batches, {**result.stages,
                                                                  **result.stats})]
    return Analysis(path, capture_label(metadata, path), capture_size(metadata), result)


def coded_markers(metadata):
    """Marker channels whose markers carry an identity code (``docs/marker-identity.md``), as
    the capture's metadata names them: ``marker_identity = {"code": "lsid1", "markers":
    ["m2", ...]}``.

    >>> coded_markers({"marker_identity": {"code": "lsid1", "markers": ["m2"]}}), coded_markers({})
    (['m2'], [])
    """
    ident = (metadata or {}).get("marker_identity") or {}
    if not ident:
        return []
    if ident.get("code") != "lsid1":
        raise LatscopeError(f"marker_identity code must be 'lsid1', not {ident.get('code')!r}")
    return list(ident.get("markers") or [])


def _analyze_sampled(source, definitions, measures, packets, exact_limit, confidence,
                     markers, ns_histograms, window):
    """Sampled files (``.sr``): only the channels a measurement uses are decoded."""
    info = source.info
    names = info.channel_names
    metadata = dict(info.metadata)
    defs = _select(_definitions(definitions, metadata), measures)
    # probes named by role or alias (rx_dv, m_isr) resolve directly; probes named m0..m4
    # need the meanings the file stores (a latscope export) or --markers
    marker_map = resolve_markers(defs, names, info.markers, markers)
    metadata["marker_map"] = dataclasses.asdict(marker_map)
    analyzer = Analyzer(defs, tick_hz=info.tick_hz, channel_names=names,
                        markers=marker_map.markers, ns_histograms=ns_histograms,
                        keep_packets=packets, exact_limit=exact_limit,
                        confidence=confidence, require=measures or (), metadata=metadata,
                        offsets=info.channel_offsets)
    for chunk in window.cut(source.chunks(channels=sorted({c for c, _ in analyzer.codes}))):
        analyzer.feed(chunk.time, chunk.channel, chunk.rising)
    return Analysis(info.path, capture_label(metadata, info.path), None, analyzer.finish())


def load(path, *, definitions=None, measures=None, packets=True, mapping=None, **kwargs):
    """Load and analyse a capture for interactive use (per-packet records kept by default).

    Returns
    -------
    Analysis
    """
    return analyze_file(path, definitions=definitions, measures=measures, packets=packets,
                        mapping=mapping, **kwargs)


def summarize_captures(paths, *, definitions=None):
    """Analyse captures and return a comparison table as text (for ``latscope demo``)."""
    analyses = [analyze_file(p, definitions=definitions) for p in paths]
    return summary_text(analyses)


def write_report(paths, out_dir, *, definitions=None, explain_top=3):
    """Analyse captures and write ``report.html`` and ``report.md`` into ``out_dir``, with the
    ``explain_top`` slowest packets of each capture's headline measurements explained
    (:func:`explain_headlines`; 0: none); returns the paths written (for ``latscope demo``)."""
    analyses = [analyze_file(p, definitions=definitions, packets=True) for p in paths]
    return write_analyses_report(analyses, out_dir, explain_top=explain_top)


def write_analyses_report(analyses, out_dir, *, explain_top=3, figure_set="all", command=None):
    """:func:`write_report` of analyses already made (each with its per-packet records,
    ``analyze_file(..., packets=True)``), so a caller that analysed its captures does not read
    them again. ``figure_set``: ``"all"`` draws every measurement's figures, ``"headline"`` only
    those of the measurements the first screen leads with (the others keep their tables and say
    how to draw them)."""
    return write_report_page(analyses, out_dir, figure_set=figure_set, command=command,
                             forensics=explain_headlines(analyses, top=explain_top))


def explain_headlines(analyses, *, top=3):
    """``{capture label: [Forensics]}``: :func:`explain` of each capture's headline
    measurements (those the report's first screen leads with) whose sample bounds p50, as
    ``write_report(forensics=...)`` takes it; empty for ``top`` 0."""
    out = {}
    if not top:
        return out
    for a in analyses:
        names = [n for n in headline_names(common_names([a])) if bounded(a.stats[n])]
        out[a.label] = [explain(a, n, top=top) for n in names]
    return out


def to_json(analysis):
    """JSON text of an :class:`Analysis`."""
    return json.dumps(analysis.to_dict(), indent=2, allow_nan=False)


def repository_root():
    """The latscope source tree (the folder holding ``fixtures/``), or None when installed."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return here if os.path.isdir(os.path.join(here, "fixtures")) else None
