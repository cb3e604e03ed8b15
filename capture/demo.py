"""``latscope demo``: the paper's configurations on the simulated bench, captured and compared.

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
import json
import math
import multiprocessing
import os
import sys
import time

import numpy as np

from latscope import LatscopeError
from latscope.capture import simbench

__all__ = ["register", "capture_profile", "choose_engine", "run_demo", "comparison_rows",
           "format_table"]

#: Packets captured by default, over all profiles (the issue asks for at least 10^5).
DEFAULT_PACKETS = 100_000
QUICK_PACKETS = 2_400


def register(subparsers):
    parser = subparsers.add_parser(
        "demo", help="capture the 2018 paper's configurations on the simulated bench and compare",
        description="Simulate the paper's DUT configurations (GEM, Ethernet Lite DM/SO, fast "
                    "track; 64/256/1024-byte frames), drive the real gateware in simulation, "
                    "capture its bytes through a pseudo-terminal exactly as from a board, then "
                    "print a comparison table (latencies in µs; the instrument resolution is one "
                    "tick, 1.25 ns) beside the paper's Table I and write the report.")
    parser.add_argument("--packets", type=int, default=None,
                        help=f"packets over all configurations (default {DEFAULT_PACKETS:,}; "
                             f"--quick: {QUICK_PACKETS:,})")
    parser.add_argument("--out", default="demo-output",
                        help="directory for the captures, truth files and report "
                             "(default ./demo-output)")
    parser.add_argument("--quick", action="store_true", help="a small run, for a smoke test")
    parser.add_argument("--profiles", default=None,
                        help="comma-separated profiles (default: all shipped: "
                             f"{', '.join(simbench.list_profiles())})")
    parser.add_argument("--engine", choices=("auto",) + simbench.ENGINES, default="auto",
                        help="simulator. auto (default): every packet through the real gateware "
                             "compiled by Verilator (about 2,000 packets/s per capture, two "
                             "captures at a time, after the one-time compilation, which the "
                             "first run announces), or, when "
                             "Verilator or a C++ compiler is missing, the gateware's bit-exact "
                             "reference models (it says so); verilator: the real gateware, and "
                             "fail if it cannot be built; model: the reference models only; "
                             "amaranth: the real gateware in the Amaranth simulator (very slow: "
                             "a few packets). Every capture must reproduce the simulation's "
                             "ground truth exactly, or the command fails")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="captures in parallel (default: 2, or 1 on a single core)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--no-report", action="store_true",
                        help="print the table only, do not write the report")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--no-load", action="store_true",
                        help="skip the two captures under 60 %% background load (fast track "
                             "against the stack, per class; capture/demo_load.py), which run "
                             "when --profiles is not given")
    parser.set_defaults(func=main)


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
    is compared with its ground truth (``result["check"]``); :func:`main` fails on a mismatch.

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


def main(args):
    from latscope.userio import check_output
    started = time.monotonic()
    check_output(args.out, directory=True)
    profiles = simbench.list_profiles() if not args.profiles else \
        [p.strip() for p in args.profiles.split(",") if p.strip()]
    for name in profiles:
        simbench.load_profile(name)     # fail early on a bad name
    if args.jobs < 1:
        raise LatscopeError(f"--jobs must be at least 1, not {args.jobs}")
    packets = args.packets or (QUICK_PACKETS if args.quick else DEFAULT_PACKETS)
    if packets < len(profiles):
        raise LatscopeError(f"--packets must be at least {len(profiles)} (one per profile)")
    _log(f"latscope demo: {len(profiles)} configurations, {packets:,} packets in all, "
         f"{args.jobs} at a time, into {args.out}/")
    results = run_demo(profiles, packets, args.out, engine=args.engine, jobs=args.jobs,
                       seed=args.seed)
    capture_s = sum(r["seconds"] for r in results) / max(1, min(args.jobs, len(results)))
    rows = comparison_rows(results)
    report = None
    if not args.no_report:
        try:
            import latscope.analysis.report  # noqa: F401
            from latscope.analysis import api
        except ImportError:
            api = None
        if api is not None:
            written = api.write_report([r["path"] for r in results], args.out)
            report = [str(p) for p in (written if isinstance(written, (list, tuple))
                                       else [written])]
    load_rows = []
    if not args.no_load and args.profiles is None:
        # the fast track against the stack under load, per class (with the default profiles)
        from latscope.capture import demo_load
        _log(f"latscope demo: {len(demo_load.PROFILES)} captures under "
             f"{demo_load.SCENARIO} background load on the simulated wire (reference models)")
        load_rows = demo_load.run_under_load(
            os.path.join(args.out, "under-load"), seed=args.seed, jobs=args.jobs,
            packets=200 if args.quick else demo_load.PACKETS)
    total = time.monotonic() - started
    bad = [r["profile"] for r in results if not r["check"]["ok"]]
    bad += [f"{r['profile']} under {r['scenario']}" for r in load_rows if not r["check"]["ok"]]
    if args.json:
        print(json.dumps({"captures": results, "engine": results[0]["engine"], "table": rows,
                          "report": report, "under_load": load_rows,
                          "capture_seconds": round(capture_s, 1), "seconds": round(total, 1)},
                         indent=2, default=str))
    else:
        resolution = rows[0]["resolution_ns"] if rows else float("nan")
        print(f"\nSIMULATED: latency per configuration and stage on the simulated bench, µs "
              f"(instrument resolution {resolution:.3f} ns; 'paper' is Table I's x̄ ± 3σ of "
              f"512 samples)")
        if rows and rows[0]["source"] != "analysis":
            print("(latscope.analysis is not available: figures from a temporary minimal "
                  "summary)")
        print(format_table(rows))
        n_packets = sum(r["packets"] for r in results)
        n_events = sum(r["events"] for r in results)
        engine_text = {"model": "the gateware's reference models",
                       "verilator": "the real gateware (Verilator)",
                       "amaranth": "the real gateware (Amaranth simulator)"}
        print(f"\n{n_packets:,} packets, {n_events:,} events captured in about "
              f"{capture_s:.1f} s on "
              f"{engine_text.get(results[0]['engine'], results[0]['engine'])}; "
              f"total {total:.1f} s")
        if load_rows:
            from latscope.capture import demo_load
            print(f"\nSIMULATED: the fast track against the stack under "
                  f"{load_rows[0]['load']:.0%} background load (IMIX, counted on the FPGA as "
                  f"class bg), measured stream recorded as class hp; frames paired by sequence "
                  f"number")
            print(demo_load.format_load_table(load_rows, demo_load.idle_figures(results)))
        exact = sum(r["check"]["ok"] for r in results)
        print(f"{exact}/{len(results)} captures reproduce the simulation's ground truth exactly "
              f"(every event, within one tick)")
        if report:
            main_files = [p for p in report if p.endswith((".html", ".md"))] or report[:1]
            print(f"report: {', '.join(main_files)} ({len(report)} files in {args.out})")
    if bad:
        raise LatscopeError(f"captures differ from the simulation's ground truth: "
                            f"{', '.join(bad)}")
    return 0
