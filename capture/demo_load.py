"""The part of ``latscope demo`` under load: the paper's fast track against the stack beside
background traffic, per class.

Two captures on the simulated bench's wire (:mod:`latscope.capture.sim_load`): Ethernet Lite with
the lwIP stack (``el-dm-64``) and the fast track (``fast-track-64``), each with the measured
stream (class ``hp``, recorded frame by frame) beside 60 % background load (class ``bg``, counted
on the FPGA only), recorded by :func:`latscope.capture.record.record` from the simulated bench
(the model engine: the sniffers' and classifier's reference models). Each capture is checked
against the ground truth of the simulation it recorded (every edge within one tick; every
background frame counted), then analysed per class.
"""

import concurrent.futures
import os

import numpy as np

from latscope import LatscopeError
from latscope.capture import capfile, session, simbench
from latscope.capture.record import record
from latscope.capture.sim_port import SimulatedSource

__all__ = ["PROFILES", "SCENARIO", "PACKETS", "capture_under_load", "run_under_load",
           "format_load_table"]

PROFILES = ("el-dm-64", "fast-track-64")
SCENARIO = "bg60"
#: Measured requests per capture: 1 s at 1 kHz beside ~20,000 background frames.
PACKETS = 1000


def capture_under_load(profile, out_dir, *, packets=PACKETS, scenario=SCENARIO, seed=0):
    """Capture ``profile`` under ``scenario``; returns a dict with the path, the truth check and
    the per-class analysis figures (µs)."""
    from latscope.analysis import api
    path = os.path.join(out_dir, f"{profile}-{scenario}.lsc")
    source = SimulatedSource(profile, packets=packets, seed=seed, load=scenario)
    outcome = record(source, path, limits=session.Limits(packets=packets), overwrite=True)
    if outcome.exit_status != 0:
        raise LatscopeError(f"capture of {profile} under {scenario} failed "
                            f"(exit {outcome.exit_status}: {outcome.reason})")
    run = source.port.run           # the simulation just captured: its ground truth
    with capfile.open_capture(path) as cap:
        events = cap.events()
        check = simbench.compare_to_truth(events.time, events.channel, events.rising, run.truth)
        counters = cap.frame_counters()
    bg = counters[(counters["direction"] == 0) & (counters["cls"] == 2)]
    counted_bg = int(bg[-1]["frames"]) if len(bg) else 0
    check["ok"] = bool(check["ok"] and counted_bg == int(run.truth["bg_frames"]))
    analysis = api.analyze_file(path)
    hp = analysis.result.frames.classes.get(1)
    deliver = "rx.fast[hp]" if "rx.fast" in run.profile.stages else "rx.udp[hp]"
    row = {"profile": profile, "scenario": scenario, "path": path, "check": check,
           "load": run.scenario.load, "counted_bg": counted_bg,
           "requests": hp.requests if hp else 0, "replied": hp.replied if hp else 0,
           "dropped": hp.dropped if hp else 0, "deliver_stage": deliver}
    for key, name in (("deliver", deliver), ("e2e", "node.e2e[hp]")):
        s = analysis.stats.get(name)
        row[key] = None if s is None or not s.n else {
            "n": s.n, "p50": s.p50_ns / 1e3, "p99": s.p99_ns / 1e3, "max": s.max_ns / 1e3}
    return row


def run_under_load(out_dir, *, packets=PACKETS, scenario=SCENARIO, seed=0, jobs=2):
    """Both captures (two at a time); returns their rows in :data:`PROFILES` order."""
    os.makedirs(out_dir, exist_ok=True)
    if jobs <= 1:
        return [capture_under_load(p, out_dir, packets=packets, scenario=scenario, seed=seed)
                for p in PROFILES]
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(PROFILES))) as pool:
        futures = [pool.submit(capture_under_load, p, out_dir, packets=packets,
                               scenario=scenario, seed=seed) for p in PROFILES]
        return [f.result() for f in futures]


def format_load_table(rows, idle=None):
    """The per-class table: one line per capture (and per idle capture of the same profile, from
    the main demo, when ``idle`` maps profile -> {stage: stats})."""
    lines = [f"{'configuration':<16} {'load':>5} {'class':>5} {'delivered to app':>22} "
             f"{'node e2e on the wire':>22} {'req':>6} {'drop':>5} {'bg counted':>11}",
             f"{'':<16} {'':>5} {'':>5} {'p50 / p99 µs':>22} {'p50 / p99 µs':>22}"]

    def pair(s):
        return f"{s['p50']:.2f} / {s['p99']:.2f}" if s else "-"
    for r in rows:
        if idle and r["profile"] in idle:
            lines.append(f"{r['profile']:<16} {0:>5.0%} {'-':>5} "
                         f"{pair(idle[r['profile']]):>22} {'(no frame capture)':>22}")
        lines.append(f"{r['profile']:<16} {r['load']:>5.0%} {'hp':>5} {pair(r['deliver']):>22} "
                     f"{pair(r['e2e']):>22} {r['requests']:>6} {r['dropped']:>5} "
                     f"{r['counted_bg']:>11,}")
    stack, fast = (next((r for r in rows if r["profile"] == p), None) for p in PROFILES)
    if stack and fast and stack["deliver"] and fast["deliver"]:
        lines.append(f"fast track under {fast['load']:.0%} load: delivery p50 "
                     f"{stack['deliver']['p50'] - fast['deliver']['p50']:.2f} µs and p99 "
                     f"{stack['deliver']['p99'] - fast['deliver']['p99']:.2f} µs earlier than "
                     f"the stack")
    return "\n".join(lines)


def idle_figures(results):
    """``{profile: {"p50", "p99"} µs}`` of the delivery stage from the main demo's captures."""
    from latscope.analysis import api
    out = {}
    for r in results:
        if r["profile"] not in PROFILES:
            continue
        stage = "rx.fast" if r["profile"].startswith("fast-track") else "rx.udp"
        s = api.analyze_file(r["path"]).stats.get(stage)
        if s is not None and s.n:
            out[r["profile"]] = {"p50": s.p50_ns / 1e3, "p99": s.p99_ns / 1e3,
                                 "max": float(np.nan)}
    return out
