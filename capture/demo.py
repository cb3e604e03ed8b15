"""The paper's configurations on the simulated bench, captured and compared.

For every shipped profile (GEM, Ethernet Lite with device memory, Ethernet Lite strong-ordered, the
fast track; 64, 256 and 1024-byte frames) the simulated DUT drives the real gateware in
simulation (:class:`~latscope.capture.simbench.VerilatorEngine`: ``LatscopeCore`` compiled by
Verilator, idle time skipped by the core's fast-forward port), the bytes are served on a
pseudo-terminal and captured through the same session code as a board on a serial port
(:mod:`latscope.capture.session`). Captures run two at a time (one per core). Every capture is
compared with the simulation's ground truth (:func:`~latscope.capture.simbench.compare_to_truth`:
no missing, extra or mis-timed event), and any mismatch fails the command. Then the captures are
analysed with :mod:`latscope.analysis`, a comparison table is printed next to the paper's Table I,
and the report is written when the analysis package provides one.

``--engine auto`` (the default) runs every packet through the real gateware when Verilator and a
C++ compiler are present (the first run compiles the simulated instrument once and says so), and
falls back to the gateware's bit-exact reference models (``--engine model``), saying why, when
they are not.
"""

import concurrent.futures
import math
import multiprocessing
import os
import sys
import time

import numpy as np

from latscope import LatscopeError
from latscope.capture import simbench

__all__ = ["capture_profile", "choose_engine", "run_demo", "comparison_rows",
           "format_table"]

#: Packets captured by default, over all profiles (the issue asks for at least 10^5).
DEFAULT_PACKETS = 100_000
QUICK_PACKETS = 2_400


def capture_profile(profile, packets, out_dir, *, seed=0, engine="auto", rate=None,
                    timeout=600.0, log=None, binary=None):
    """Simulate ``packets`` of ``profile`` and capture them through a pseudo-terminal.

    The capture goes through :class:`~latscope.capture.transport.SerialTransport` and
    :mod:`latscope.capture.session` as with a board; the ground truth is written beside the
    capture. ``binary``: the Verilator engine's simulator binary (see
    :func:`simbench.open_engine`). Returns a dict: ``profile``, ``path``, ``events``,
    ``expected``, ``packets``, ``engine``, ``seconds``, ``reason``, ``bytes``, ``lost``,
    ``check`` (:func:`simbench.compare_to_truth`).
    """
    from latscope.capture import capfile, session
    from latscope.capture.ptyserve import PtyServer
    from latscope.capture.transport import SerialTransport
    started = time.monotonic()
    run = simbench.simulate(profile, packets, seed=seed)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{run.profile.name}.lsc")
    for old in (path, capfile.truth_path(path)):   # the demo's own earlier output
        if os.path.exists(old):
            os.remove(old)
    engine = simbench.open_engine(run, engine, log=log, binary=binary)
    server = PtyServer(engine, rate=rate)
    transport = None
    try:
        transport = SerialTransport(server.path)
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        if abs(identity["tick_hz"] - run.timing.tick_hz) > 1e-6 * run.timing.tick_hz:
            raise LatscopeError(f"simulated instrument ticks at {identity['tick_hz']} Hz, the "
                                f"model at {run.timing.tick_hz} Hz")
        p = run.profile
        config = session.CaptureConfig(
            markers=dict(p.markers), label=p.name, dut=f"simulated: {p.title}",
            scenario=f"echo, {run.n_packets} x {p.size} B UDP frames (simulated)")
        session.configure(instrument, config, identity)
        metadata = session.capture_metadata(identity, config, port=server.path, extra={
            "simbench": {**run.meta, "engine": engine.metadata()}, "frame_bytes": p.size})
        metadata["instrument"].update(simulated=True, engine=engine.name)
        writer = capfile.CaptureWriter(path, metadata)
        outcome = session.run_capture(instrument, writer,
                                      limits=session.Limits(events=run.n_events,
                                                            duration=timeout))
    finally:
        if transport is not None:
            transport.close()
        server.close()
    run.save_truth(path, engine=engine.name, tick_offset=engine.tick_offset)
    with capfile.open_capture(path) as cap:
        events = cap.events()
        check = simbench.compare_to_truth(events.time, events.channel, events.rising, run.truth)
        n_events = len(events.time)
        del events
    return {"profile": run.profile.name, "path": path, "events": n_events,
            "expected": run.n_events, "packets": run.n_packets, "engine": engine.name,
            "seconds": round(time.monotonic() - started, 2), "reason": outcome.reason,
            "bytes": outcome.bytes, "lost": outcome.lost_overflow + outcome.lost_link,
            "check": check}


def _log(message):
    print(message, file=sys.stderr, flush=True)


def _verilator_binary():
    """Build the simulated instrument once (or find it in the cache), before the workers start;
    they all run this binary. Returns ``(path, None)``, or ``(None, reason)`` when it cannot be
    built."""
    try:
        from latscope.gateware import verilator
        timing = simbench.InstrumentTiming()
        instrument = verilator.VerilatorInstrument(
            capture_hz=int(timing.capture_hz), lanes=timing.lanes,
            channel_names=simbench.CHANNEL_ROLES, **simbench.CORE_PARAMS)
        binary = instrument.build()
        simbench._mark_used(instrument.component)
        return str(binary), None
    except (ImportError, LatscopeError) as error:
        return None, str(error).splitlines()[0]


def _run_all(profiles, each, out_dir, engine, jobs, seed, log, binary=None):
    results = {}
    if jobs <= 1:
        for k, name in enumerate(profiles):
            results[name] = capture_profile(name, each, out_dir, seed=seed + k, engine=engine,
                                            binary=binary)
            log(_progress_line(results[name], len(results), len(profiles)))
    else:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            futures = {pool.submit(capture_profile, name, each, out_dir, seed=seed + k,
                                   engine=engine, binary=binary): name
                       for k, name in enumerate(profiles)}
            for future in concurrent.futures.as_completed(futures):
                name = futures[future]
                results[name] = future.result()
                log(_progress_line(results[name], len(results), len(profiles)))
    return [results[name] for name in profiles]


def choose_engine(engine, log=_log):
    """The engine the demo runs, and the simulator binary for Verilator: ``(engine, binary)``.

    ``"auto"`` becomes ``"verilator"`` when the simulated instrument builds (compiled once, here,
    before the workers start; every capture then runs that binary), else ``"model"``, logging
    why; ``"verilator"`` raises :class:`LatscopeError` when it cannot be built; other engines are
    returned as given (binary ``None``).
    """
    if engine not in ("auto", "verilator"):
        return engine, None
    binary, reason = _verilator_binary()
    if reason is None:
        return "verilator", binary
    if engine == "verilator":
        raise LatscopeError(f"the Verilator engine is not available: {reason}")
    log(f"latscope demo: Verilator unavailable ({reason}); running every packet on the "
        "gateware's bit-exact reference models instead of the real gateware")
    return "model", None


def run_demo(profiles, packets_total, out_dir, *, engine="auto", jobs=2, seed=0, log=_log):
    """Capture every profile (``packets_total`` spread evenly) on one engine.

    ``engine="auto"`` runs every packet through the real gateware compiled by Verilator when it
    can be built, else on the gateware's reference models (see :func:`choose_engine`);
    ``"verilator"``, ``"model"`` or ``"amaranth"`` run everything on that engine. Every capture
    is compared with its ground truth (``result["check"]``); ``latscope demo`` fails on a mismatch.

    Returns the per-capture dicts of :func:`capture_profile`, in the order of ``profiles``.
    """
    os.makedirs(out_dir, exist_ok=True)
    each = max(1, math.ceil(packets_total / len(profiles)))
    engine, binary = choose_engine(engine, log)
    return _run_all(profiles, each, out_dir, engine, jobs, seed, log, binary)


def _progress_line(r, done, total):
    status = "ok" if r["check"]["ok"] else f"MISMATCH ({r['reason']}; {r['check']})"
    return (f"  [{done:2d}/{total}] {r['profile']:<16} {r['packets']:>7,} packets "
            f"{r['events']:>9,} events  {r['seconds']:6.1f} s  {r['engine']:<9} truth {status}")


# --- the comparison table -------------------------------------------------------------------------

def _paper(profile, stage):
    spec = profile.stages.get(stage)
    if spec is None or spec.source.startswith("assumption"):
        return ""
    return f"{spec.mean_us:.2f} ± {spec.three_sigma_us:.2f}"


def _stats_from_analysis(path):
    """Per-stage statistics from :mod:`latscope.analysis` (ns), or ``None`` if it is missing."""
    try:
        from latscope.analysis import api
    except ImportError:
        return None
    analysis = api.analyze_file(path)
    out = {}
    for name, s in analysis.stats.items():
        if not s.n:
            continue
        out[name] = {"n": s.n, "mean": s.mean_ns, "three_sigma": s.three_sigma_ns,
                     "p50": s.quantiles[50].value_ns, "p99": s.quantiles[99].value_ns,
                     "p999": s.quantiles[99.9].value_ns, "max": s.max_ns,
                     "resolution": s.resolution_ns}
    return out


def _stats_minimal(path, profile):
    """TEMPORARY stand-in used only when :mod:`latscope.analysis` cannot be imported: pairs each
    start edge with the next stop edge and computes plain sample statistics (ns)."""
    from latscope.capture import capfile
    with capfile.open_capture(path) as cap:
        ev = cap.events()
        time_, channel, rising = (np.asarray(a) for a in (ev.time, ev.channel, ev.rising))
        tick_ns = 1e9 / cap.tick_hz
    out = {}
    rx_end = time_[(channel == 0) & ~rising]
    tx_start = time_[(channel == 1) & rising]
    for stage in profile.stages:
        marker = profile.marker_channel(simbench._STAGE_MARKER[stage])
        m = time_[(channel == marker) & rising]
        start, stop = (rx_end, m) if stage.startswith("rx.") else (m, tx_start)
        idx = np.searchsorted(stop, start, side="left")
        ok = idx < len(stop)
        lat = (stop[idx[ok]] - start[ok]) * tick_ns
        if not len(lat):
            continue
        out[stage] = {"n": len(lat), "mean": lat.mean(), "three_sigma": 3 * lat.std(ddof=1),
                      "p50": np.percentile(lat, 50), "p99": np.percentile(lat, 99),
                      "p999": np.percentile(lat, 99.9), "max": lat.max(), "resolution": tick_ns}
    return out


def comparison_rows(results):
    """Rows (dicts) of the comparison table: per capture and stage, the measured statistics in µs
    and the paper's Table I value where the profile takes one from it."""
    rows = []
    for r in results:
        profile = simbench.load_profile(r["profile"])
        stats = _stats_from_analysis(r["path"])
        source = "analysis"
        if stats is None:
            stats, source = _stats_minimal(r["path"], profile), "temporary minimal summary"
        for stage in profile.stages:
            s = stats.get(stage)
            if s is None:
                continue
            rows.append({"config": profile.name, "stage": stage, "n": int(s["n"]),
                         "mean_us": s["mean"] / 1e3, "three_sigma_us": s["three_sigma"] / 1e3,
                         "p50_us": s["p50"] / 1e3, "p99_us": s["p99"] / 1e3,
                         "p999_us": s["p999"] / 1e3, "max_us": s["max"] / 1e3,
                         "resolution_ns": s["resolution"], "paper": _paper(profile, stage),
                         "source": source})
    return rows


def format_table(rows):
    """The comparison table as text (µs; the paper's x̄ ± 3σ where Table I has the cell)."""
    headers = ("config", "stage", "n", "mean ± 3σ", "p50", "p99", "p99.9", "max", "paper")
    cells = [headers]
    for r in rows:
        cells.append((r["config"], r["stage"], f"{r['n']:,}",
                      f"{r['mean_us']:.2f} ± {r['three_sigma_us']:.2f}", f"{r['p50_us']:.3f}",
                      f"{r['p99_us']:.3f}", f"{r['p999_us']:.3f}", f"{r['max_us']:.2f}",
                      r["paper"] or "-"))
    widths = [max(len(c[i]) for c in cells) for i in range(len(headers))]
    lines = []
    for k, row in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if 2 <= i <= 7 else c.ljust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
