"""``latscope capture``: record events from the instrument (or the simulated bench) into a
capture file."""

import json
import sys

from latscope import LatscopeError
from latscope.capture.files import outputs
from latscope.capture.link import session
from latscope.capture.link.progress import CaptureProgress
from latscope.capture.link.transport import DEFAULT_BAUD
from latscope.capture.record import record
from latscope.capture.sim.sim_engines import ENGINES
from latscope.capture.sim.sim_port import DEFAULT_PACKETS, LINKS, SimulatedSource
from latscope.capture.sim.sim_profile import list_profiles

CAPTURE_EPILOG = """\
exit status: 0 stopped on a limit, Ctrl-C or SIGTERM (the file is complete); 2 error before
recording (bad option, port, incompatible instrument: no file is written); 3 the link was lost
(port closed or unplugged: the file holds everything received and says so); 4 the decoder or
writer crashed (the file holds everything before it); 130 (Ctrl-C) or 143 (SIGTERM) while the
instrument or simulator was still starting, before recording (no file is written). A packet is
a falling edge of the channel whose role is rx_dv (or crs_dv on RMII). Config format:
docs/capture-format.md."""


def add_arguments(p):
    p.description = ("Record timestamped edges from a latscope instrument on a serial port into "
                     "a capture file (.lsc). The file is written in fsynced chunks, so it stays "
                     "valid whatever stops the capture.")
    p.epilog = CAPTURE_EPILOG
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
    _add_sim_arguments(p)


def _add_sim_arguments(parser):
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
                             "capture/sim/profiles/under-load.toml (bg0, bg30, bg60, bg90, "
                             "bg60-coalesce), FILE.toml:NAME, or a share of the line rate such "
                             "as 0.6; frames to/from UDP port 5000 are class hp (recorded), "
                             "other IPv4 bg (counted) unless --config has a [frames] table")
    parser.add_argument("--sim-rate", type=float, default=None, metavar="BYTES_PER_S",
                        help="serve the simulated instrument's bytes at most this fast (default: "
                             "as fast as the capture reads; 1.2e6 is the boards' 12 Mbaud link)")


def capture(args, stderr=None):
    """Record what ``args`` asks for with :func:`latscope.capture.record.record`; returns the
    :class:`~latscope.capture.link.session.CaptureOutcome`."""
    if bool(args.port) == bool(args.sim):
        raise LatscopeError("give exactly one of --port DEVICE and --sim PROFILE")
    # before the config is read; neither the config nor the calibration is ever the output
    outputs.check_output(args.output, [p for p in (args.config, args.calibration) if p],
                         force=args.force, allow_stdout=False)
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


def run(args):
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
