"""``latscope doctor``: bring up a new board step by step (identify, self-test, loop-back,
link soak) and print a verdict with the next step for each failure."""

import json
import sys

from latscope.capture.doctor import DEFAULT_SOAK_S, doctor
from latscope.capture.link.transport import DEFAULT_BAUD
from latscope.commands.selftest import channel_list
from latscope.gateware import protocol


def add_arguments(p):
    p.description = ("Check an instrument step by step and print a verdict with the next step "
                     "for each failure: IDENTIFY and versions; the Ethernet link's speed and "
                     "duplex (gateware with the Gigabit link: must be 1000 Mb/s full duplex); "
                     "the internal self-test pattern on every channel; with --loopback, the "
                     "DDR lane order and the pin-to-timestamp offset through a cable from the "
                     "self-test pin; a link soak at the highest event rate (bad CRCs and lost "
                     "frames must be zero).")
    p.epilog = ("exit status: 0 every step passed (skipped steps say why); 1 a step failed; "
                "2 error (bad option or port). Documentation: docs/boards.md (bring-up).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--port", metavar="DEVICE", help="serial device of the instrument")
    src.add_argument("--sim", action="store_true",
                     help="the simulated instrument (real gateware in Verilator) with a "
                          "simulated loop-back cable")
    p.add_argument("--baud", type=int, default=DEFAULT_BAUD,
                   help="serial rate in bit/s (default 12000000)")
    p.add_argument("--loopback", metavar="LIST",
                   help="channels wired to the self-test output pin, e.g. 3 or 0-7 (a fan-out "
                        "cable); 'all' for every channel")
    p.add_argument("--soak", type=float, default=DEFAULT_SOAK_S, metavar="S",
                   help=f"link soak duration in seconds (default {DEFAULT_SOAK_S:g}; 0 skips)")
    p.add_argument("--fault", action="append", default=[],
                   choices=("swap-lanes", "dead-channel", "lossy-link"),
                   help="with --sim: inject a fault (dead-channel kills channel 5), to see how "
                        "the doctor names it")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")


def _wired(text):
    if text is None:
        return []
    if text.strip().lower() == "all":
        return list(range(protocol.NUM_CHANNELS))
    return channel_list(text)


def format_verdict(verdict):
    marks = {True: "PASS", False: "FAIL", None: "skip"}
    lines = []
    for s in verdict.steps:
        lines.append(f"{marks[s.ok]:<5} {s.name:<10} {s.detail}")
        if s.ok is False and s.next_step:
            lines.append(f"      next: {s.next_step}")
    lines.append("")
    lines.append("verdict: " + ("PASS" if verdict.ok else "FAIL"))
    return "\n".join(lines)


def run(args):
    """0 pass, 1 a step failed."""
    verdict = doctor(args.port, simulated=args.sim, faults=args.fault, baud=args.baud,
                     loopback=_wired(args.loopback), soak_s=args.soak)
    if args.json:
        print(json.dumps(verdict.to_dict(), default=str, sort_keys=True))
    else:
        print(format_verdict(verdict))
    sys.stdout.flush()
    return 0 if verdict.ok else 1
