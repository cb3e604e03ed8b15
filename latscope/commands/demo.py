"""``latscope demo``: the paper's configurations on the simulated bench, captured and compared
(:mod:`latscope.capture.demo`), and two captures under background load
(:mod:`latscope.capture.demo_load`)."""

import json
import os
import sys
import time

from latscope import LatscopeError
from latscope.analysis import api
from latscope.capture import demo_load, simbench
from latscope.capture.demo import (
    DEFAULT_PACKETS,
    QUICK_PACKETS,
    comparison_rows,
    format_table,
    run_demo,
)
from latscope.userio import check_output


def _log(message):
    print(message, file=sys.stderr, flush=True)


def add_arguments(parser):
    parser.description = ("Simulate the paper's DUT configurations (GEM, Ethernet Lite DM/SO, "
                          "fast track; 64/256/1024-byte frames), drive the real gateware in "
                          "simulation, capture its bytes through a pseudo-terminal exactly as "
                          "from a board, then print a comparison table (latencies in µs; the "
                          "instrument resolution is one tick, 1.25 ns) beside the paper's Table I "
                          "and write the report.")
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


def run(args):
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
        written = api.write_report([r["path"] for r in results], args.out)
        report = [str(p) for p in (written if isinstance(written, (list, tuple))
                                   else [written])]
    load_rows = []
    if not args.no_load and args.profiles is None:
        # the fast track against the stack under load, per class (with the default profiles)
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
