"""The part of ``latscope demo`` under load: the paper's fast track against the stack beside
background traffic, per class, with requests in queued bursts.

Two captures on the simulated bench's wire (:mod:`latscope.capture.sim.sim_load`): Ethernet Lite
with the lwIP stack (``el-dm-64``) and the fast track (``fast-track-64``), each with the measured
stream (class ``hp``, recorded frame by frame) beside 60 % background load (class ``bg``, counted on
the FPGA only). The measured requests come in bursts of 8, back to back, faster than the DUT's one
in-order app thread answers them (scenario ``bg60-burst`` of ``profiles/under-load.toml``), so
they queue: a request's markers come after later requests have arrived, the case where pairing by
order goes wrong unless it keeps order and counts what it cannot decide. Each is recorded by
:func:`latscope.capture.record.record` from the simulated bench (the model engine: the sniffers'
and classifier's reference models), checked against the ground truth of the simulation it
recorded (every edge within one tick; every background frame counted), then analysed per class by
``latscope demo``.
"""

import concurrent.futures
import os

from latscope import LatscopeError
from latscope.capture.files import capfile
from latscope.capture.link import session
from latscope.capture.record import record
from latscope.capture.sim import simbench
from latscope.capture.sim.sim_port import SimulatedSource

__all__ = ["PROFILES", "SCENARIO", "PACKETS", "capture_under_load", "run_under_load"]

PROFILES = ("el-dm-64", "fast-track-64")
SCENARIO = "bg60-burst"
#: Measured requests per capture: 1 s at 1 kHz beside ~20,000 background frames.
PACKETS = 1000


def capture_under_load(profile, out_dir, *, packets=PACKETS, scenario=SCENARIO, seed=0):
    """Capture ``profile`` under ``scenario``; returns a dict with the path, the truth check, the
    background frames the FPGA counted, the stage that delivers to the application, and the
    scenario's load share, burst length and app thread's busy time (µs) after each send."""
    path = os.path.join(out_dir, f"{profile}-{scenario}.lsc")
    source = SimulatedSource(profile, packets=packets, seed=seed, load=scenario)
    outcome = record(source, path, limits=session.Limits(packets=packets), overwrite=True)
    if outcome.exit_status != 0:
        raise LatscopeError(f"capture of {profile} under {scenario} failed "
                            f"(exit {outcome.exit_status}: {outcome.reason})")
    run = source.port.run           # the simulation just captured
    with capfile.open_capture(path) as cap:
        events = cap.events()
        truth = cap.truth()["simbench"]       # its ground truth, written beside the capture
        check = simbench.compare_to_truth(events.time, events.channel, events.rising, truth)
        counters = cap.frame_counters()
    bg = counters[(counters["direction"] == 0) & (counters["cls"] == 2)]
    counted_bg = int(bg[-1]["frames"]) if len(bg) else 0
    check["ok"] = bool(check["ok"] and counted_bg == int(truth["bg_frames"]))
    deliver = "rx.fast[hp]" if "rx.fast" in run.profile.stages else "rx.udp[hp]"
    return {"profile": profile, "scenario": scenario, "path": path, "check": check,
            "load": run.scenario.load, "burst": run.scenario.burst,
            "app_busy_us": run.scenario.app_busy_us, "counted_bg": counted_bg,
            "deliver_stage": deliver}


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
