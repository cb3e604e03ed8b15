"""``latscope capture``, ``latscope info`` and ``latscope verify``."""

import json
import sys

from latscope import LatscopeError
from latscope.capture import capfile, session
from latscope.capture.progress import CaptureProgress
from latscope.capture.record import DEFAULT_BAUD, record
from latscope.capture.sim_engines import ENGINES
from latscope.capture.sim_port import DEFAULT_PACKETS, LINKS, SimulatedSource
from latscope.capture.sim_profile import list_profiles
from latscope.userio import check_output

__all__ = ["register", "cmd_capture", "cmd_info", "cmd_verify"]

CAPTURE_EPILOG = """\
exit status: 0 stopped on a limit, Ctrl-C or SIGTERM (the file is complete); 2 error before
recording (bad option, port, incompatible instrument: no file is written); 3 the link was lost
(port closed or unplugged: the file holds everything received and says so); 4 the decoder or
writer crashed (the file holds everything before it); 130 (Ctrl-C) or 143 (SIGTERM) while the
instrument or simulator was still starting, before recording (no file is written). A packet is
a falling edge of the channel whose role is rx_dv (or crs_dv on RMII). Config format:
docs/capture-format.md."""


def register(subparsers):
    p = subparsers.add_parser(
        "capture", help="record events from the instrument into a capture file",
        description="Record timestamped edges from a latscope instrument on a serial port into "
                    "a capture file (.lsc). The file is written in fsynced chunks, so it stays "
                    "valid whatever stops the capture.",
        epilog=CAPTURE_EPILOG)
    p.add_argument("--port", metavar="DEVICE",
                   help="serial device of the instrument, e.g. /dev/ttyUSB1 (a pty path works), "
                        "or udp://HOST[:PORT] for the ECPIX-5's Ethernet link (port 7438 by "
                        "default)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="capture file to write")
    p.add_argument("--config", metavar="FILE.toml",
                   help="channel map, marker meanings, glitch widths, edges, DUT and traffic "
                        "description (default: the instrument's channel names, all edges, no "
                        "glitch filter)")
    p.add_argument("--duration", type=float, metavar="S",
                   help="stop after S seconds of host wall time (default: no limit)")
    p.add_argument("--events", type=int, metavar="N",
                   help="stop after exactly N events (default: no limit)")
    p.add_argument("--packets", type=int, metavar="N",
                   help="stop after N packets, i.e. falling edges of the rx_dv channel (or "
                        "RMII's crs_dv) (default: no limit)")
    p.add_argument("--label", help="configuration label stored in the file (overrides the "
                                   "config's [dut] label)")
    p.add_argument("--baud", type=int, default=DEFAULT_BAUD,
                   help="serial rate in bit/s (default 12000000; ignored by ptys)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--calibration", metavar="FILE",
                   help="per-channel offsets from `latscope selftest --calibrate FILE`, stored "
                        "in the capture's metadata and applied by the analysis")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--json", action="store_true",
                   help="print the outcome as JSON on stdout (reason, exit status, totals)")
    add_sim_arguments(p)
    p.set_defaults(func=cmd_capture)

    p = subparsers.add_parser(
        "info", help="describe a capture file",
        description="Print a capture file's metadata, event count, duration and losses.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_info)

    p = subparsers.add_parser(
        "verify", help="check a capture file's integrity and report its gaps",
        description="Check every chunk's CRC, truncation, event columns and time order, and "
                    "list every loss (FIFO overflow, link, damaged region) with its time span. "
                    "A damaged chunk does not hide the rest: reading resumes at the next valid "
                    "chunk. The status says whether the file was finalised (the capture ended "
                    "normally) apart from the damage. Exit status 0: intact (possibly not "
                    "finalised, with a warning); 1: damaged (what is still readable is "
                    "listed); 2: not a capture file.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_verify)


def capture(args, stderr=None):
    """``latscope capture`` with parsed ``args``: :func:`latscope.capture.record.record`."""
    if bool(args.port) == bool(args.sim):
        raise LatscopeError("give exactly one of --port DEVICE and --sim PROFILE")
    check_output(args.output, force=args.force)     # before the config is read
    config = session.load_config(args.config) if args.config else session.CaptureConfig()
    limits = session.Limits(args.duration, args.events, args.packets)
    if args.label:
        config.label = args.label
    source = args.port
    if args.sim:
        source = SimulatedSource(args.sim, packets=args.packets or DEFAULT_PACKETS,
                                 seed=args.sim_seed, load=args.sim_load, engine=args.sim_engine,
                                 link=args.sim_link, rate=args.sim_rate)
    progress = CaptureProgress(stderr or sys.stderr, enabled=False if args.quiet else None)
    return record(source, args.output, config=config, limits=limits, baud=args.baud,
                  overwrite=args.force, calibration=args.calibration, progress=progress)


def cmd_capture(args):
    outcome = capture(args)
    lost = outcome.lost_overflow + outcome.lost_link
    summary = (f"latscope capture: stopped: {outcome.reason}. {outcome.events} events, "
               f"{outcome.packets} packets in {outcome.seconds:.1f} s; lost {lost} "
               f"(overflow {outcome.lost_overflow}, link {outcome.lost_link}); "
               f"file {args.output} " + ("finalised" if outcome.finalised else
                                         "NOT finalised, run latscope verify on it"))
    print(summary, file=sys.stderr)
    if args.json:
        record = {k: v for k, v in vars(outcome).items() if k != "error"}
        record["file"] = args.output
        print(json.dumps(record, sort_keys=True))
    error = getattr(outcome, "error", None)
    if error is not None:
        print(f"latscope capture: internal error, please report: "
              f"{type(error).__name__}: {error}", file=sys.stderr)
    return outcome.exit_status


def frame_summary(cap):
    """Frame-aware capture in a capture: records per direction and class, and the last
    COUNTERS totals per direction and class (``None`` when the capture has neither)."""
    import numpy as np
    records, _ = cap.frames()
    counters = cap.frame_counters()
    if not len(records) and not len(counters):
        return None
    from latscope.capture.rules import class_names
    names = class_names(cap.metadata)       # the config's [frames] class names, if any
    # keys "rx.<name or number>"; labels say which class numbers the config left unnamed
    out = {"records": int(len(records)), "by_class": {}, "counted": {}, "labels": {}}

    def key_of(direction, cls):
        key = f"{direction}.{names.get(cls, cls)}"
        out["labels"][key] = (f"{direction} {names[cls]}" if cls in names
                              else f"{direction} class {cls} (unnamed)")
        return key

    for d, name in ((0, "rx"), (1, "tx")):
        mine = records[records["direction"] == d]
        for c in np.unique(mine["cls"]).tolist():
            out["by_class"][key_of(name, c)] = int(np.count_nonzero(mine["cls"] == c))
        mine = counters[counters["direction"] == d]
        for c in mine[np.lexsort((-np.arange(len(mine)), mine["cls"]))]:  # by class, last first
            key = key_of(name, int(c["cls"]))
            if key not in out["counted"]:
                out["counted"][key] = {k: int(c[k]) for k in ("frames", "fcs_errors", "dropped",
                                                              "octets")}
    return out


def info_dict(path):
    """What ``latscope info`` shows, as a dict."""
    with capfile.open_capture(path) as cap:
        return {
            "path": cap.path,
            "format": f"{cap.version[0]}.{cap.version[1]}",
            "events": cap.n_events,
            "duration_s": cap.duration,
            "first_time": cap.first_time,
            "last_time": cap.last_time,
            "tick_hz": cap.tick_hz,
            "channels": {str(k): v for k, v in cap.channel_names.items()},
            "markers": cap.markers,
            "lost": cap.lost,
            "losses": len(cap.losses),
            "heartbeats": int(len(cap.heartbeats)),
            "frames": frame_summary(cap),
            "finalised": cap.note is not None,
            "stop_reason": (cap.note or {}).get("reason"),
            "problems": cap.problems,
            "metadata": cap.metadata,
        }


def cmd_info(args):
    info = info_dict(args.file)
    if args.json:
        print(json.dumps(info, sort_keys=True, default=str))
        return 0
    meta = info["metadata"]
    instrument = meta.get("instrument") or {}
    lines = [
        f"file        {info['path']} (format {info['format']})",
        f"instrument  {instrument.get('board', '?')}, tick {1e9 / info['tick_hz']:.3f} ns "
        f"({info['tick_hz'] / 1e6:g} MHz), protocol {instrument.get('protocol_version', '?')}",
        f"label       {meta.get('label') or '-'}   DUT {meta.get('dut') or '-'}   "
        f"scenario {meta.get('scenario') or '-'}",
        f"started     {meta.get('start_time', '?')}",
        "channels    " + (", ".join(f"{k}={v}" for k, v in info["channels"].items()) or "-"),
        "markers     " + (", ".join(f"{k}={v}" for k, v in info["markers"].items()) or "-"),
        f"events      {info['events']} over {info['duration_s']:.6f} s",
        f"lost        overflow {info['lost']['overflow']}, link {info['lost']['link']} "
        f"in {info['losses']} records",
        f"stopped     {info['stop_reason'] or 'not finalised (killed or crashed)'}",
    ]
    frames = info["frames"]
    if frames:
        label = frames["labels"]
        lines.append(f"frames      {frames['records']} recorded ("
                     + (", ".join(f"{label[k]}: {v}" for k, v in frames["by_class"].items())
                        or "-") + ")")
        if frames["counted"]:
            lines.append("  counted on the FPGA (every frame of the class, recorded or not):")
        for key, c in frames["counted"].items():
            lines.append(f"  {label[key]:<24} {c['frames']} frames, {c['octets']} bytes, "
                         f"{c['fcs_errors']} FCS errors, {c['dropped']} not recorded (link busy)")
    if info["problems"]:
        lines.append("damage      " + "; ".join(info["problems"]) +
                     " (run latscope verify)")
    print("\n".join(lines))
    return 0


def cmd_verify(args):
    report = capfile.verify(args.file)
    if args.json:
        print(json.dumps(report, sort_keys=True, default=str))
        return 0 if report["ok"] else 1
    status = {"intact": "OK", "intact, not finalised": "OK, NOT FINALISED",
              "damaged, finalised": "DAMAGED (finalised)",
              "damaged, not finalised": "DAMAGED, NOT FINALISED"}.get(report["state"], "DAMAGED")
    print(f"{report['path']}: {status}: {report['chunks']} good chunks, {report['events']} "
          f"events, format {report['format']}")
    if report.get("frames") or report.get("frame_counters"):
        print(f"  frames: {report['frames']} frame records, {report['frame_counters']} class "
              f"counter snapshots")
    for item in report["damage"]:
        print(f"  damage: {item}")
    if not report["ok"]:
        regions = report["damaged_regions"]
        print(f"  recoverable: {report['recoverable_events']} events in the readable chunks"
              + (f"; {len(regions)} damaged region(s) ({sum(r['bytes'] for r in regions)} "
                 f"bytes) skipped, reading resumed after each; each is a 'damage' gap below"
                 if regions else "")
              + (f"; {report['bytes_after_last_good_chunk']} bytes at the end are unreadable"
                 if report["truncated"] else ""))
    for item in report["warnings"]:
        print(f"  warning: {item}")
    if report["losses"]:
        print("  gaps (cause, events lost, from s, span s):")
        for r in report["losses"]:
            print(f"    {r['cause']:8} {r['lost']:>10}  {r['first_s']:.9f}  {r['span_s']:.9f}")
    else:
        print("  gaps: none; no event was lost")
    return 0 if report["ok"] else 1
def add_sim_arguments(parser):
    """Add the simulated-bench options to a ``latscope capture`` parser: ``--sim PROFILE``,
    ``--sim-engine``, ``--sim-seed``, ``--sim-rate``."""
    parser.add_argument(
        "--sim", metavar="PROFILE",
        help="capture from the simulated bench instead of a port: a DUT model with PROFILE's "
             f"latencies (one of {', '.join(list_profiles())}, or FILE.toml[:SIZE]) drives the "
             "real gateware in simulation, served on a pseudo-terminal; --packets N (default "
             f"{DEFAULT_PACKETS:,}) echoed packets are simulated and all their events captured; "
             "the ground truth is written beside the capture (FILE.truth.npz)")
    parser.add_argument("--sim-engine", choices=("auto",) + ENGINES, default="auto",
                        help="simulator for --sim (default auto: Verilator, else the reference "
                             "models)")
    parser.add_argument("--sim-seed", type=int, default=0,
                        help="random seed of the DUT model for --sim (default 0)")
    parser.add_argument("--sim-link", choices=LINKS, default="pty",
                        help="serve --sim on a pseudo-terminal (the UART path, default) or as "
                             "the ECPIX-5's UDP datagrams on 127.0.0.1 (the Ethernet path)")
    parser.add_argument("--sim-load", metavar="SCENARIO", default=None,
                        help="put the measured stream beside background traffic on a real wire "
                             "(frames with FCS, nibble by nibble; FRAME/COUNTERS records from "
                             "the sniffers' reference model): a scenario of "
                             "capture/profiles/under-load.toml (bg0, bg30, bg60, bg90, "
                             "bg60-coalesce), FILE.toml:NAME, or a share of the line rate such "
                             "as 0.6; frames to/from UDP port 5000 are class hp (recorded), "
                             "other IPv4 bg (counted) unless --config has a [frames] table")
    parser.add_argument("--sim-rate", type=float, default=None, metavar="BYTES_PER_S",
                        help="serve the simulated instrument's bytes at most this fast (default: "
                             "as fast as the capture reads; 1.2e6 is the boards' 12 Mbaud link)")

