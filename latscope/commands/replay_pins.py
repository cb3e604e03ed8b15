"""``latscope replay-pins``: recorded pin activity (.vcd/.sr) through the real gateware
(Verilator) into a capture file."""

import argparse
import sys

from latscope import LatscopeError
from latscope.capture.files.sigrok import parse_samplerate
from latscope.capture.link.session import CRS_DV_GLITCH_NS
from latscope.capture.sim import replay
from latscope.gateware.build import frame_build_options


def add_arguments(p):
    p.description = ("Drive the pins of a VCD or sigrok .sr recording (RX_DV, TX_EN, CRS_DV, "
                     "markers m0..m4 and, with --frames, the MII/RMII clocks and data) through "
                     "the instrument's real gateware compiled with Verilator, and write what the "
                     "instrument captures (edges, and FRAME/COUNTERS records with --frames) as "
                     "a .lsc that analyze, info, verify and export read. Edge times are "
                     "resampled to the nearest instrument tick (1.25 ns on ecpix5, 3.125 ns on "
                     "ecpix5-x1, 10.4 ns on icebreaker); pulses narrower than a tick are not "
                     "played. PHY pins are sampled just before each rising edge of the recorded "
                     "PHY clock, or of one generated at 25 MHz (MII) / 50 MHz (RMII) when the "
                     "clock is not mapped. See docs/replay-pins.md.")
    p.add_argument("file", metavar="RECORDING", help="the recording: .vcd or .sr")
    p.add_argument("--map", metavar="ROLE=SIGNAL,...",
                   help="pins by role: rx_dv, tx_en, crs_dv, m0..m4, rx_clk, tx_clk, ref_clk, "
                        "rx_er, rxd0..rxd3, txd0..txd3 = a VCD signal name or sigrok probe "
                        "name/index (default: signals named like roles)")
    p.add_argument("-o", "--output", required=True, help="the capture file to write (.lsc)")
    p.add_argument("--board", default="ecpix5", choices=("ecpix5", "ecpix5-x1", "icebreaker"),
                   help="the gateware build to replay through (default ecpix5, 1.25 ns)")
    p.add_argument("--frames", choices=("mii", "rmii"),
                   help="also sniff frames from the MII/RMII pins (ECPIX-5 builds)")
    p.add_argument("--header-bytes", metavar="N", type=int,
                   help="with --frames: keep each frame's first N bytes (0 to 64, default 0) in "
                        "its FRAME record, as a 'gateware build --header-bytes N' bitstream "
                        "does; 'export --format pcapng' then shows them in Wireshark")
    p.add_argument("--samplerate", type=_samplerate,
                   help=".sr files without a samplerate: samples per second (e.g. 100MHz)")
    p.add_argument("--glitch", metavar="ROLE=NS,...", type=_glitch_arg,
                   help="glitch filter widths, ns (0: off), e.g. crs_dv=0; default: crs_dv "
                        f"filtered at {CRS_DV_GLITCH_NS} ns for RMII's end-of-frame toggling "
                        "(as latscope capture does), other channels off")
    p.add_argument("--force", action="store_true", help="replace an existing output file")


def run(args):
    if args.frames and args.board == "icebreaker":
        raise LatscopeError("--frames: the iCEBreaker build captures edges only (frame capture "
                            "is on the ECPIX-5 builds)")
    if args.header_bytes is not None:
        frame_build_options(args.frames, args.header_bytes)
    result = replay.replay_pins(args.file, args.output, args.map, board=args.board,
                                frames=args.frames, samplerate=args.samplerate,
                                force=args.force, header_bytes=args.header_bytes or 0,
                                log=lambda m: print(m, file=sys.stderr), glitch=args.glitch)
    line = (f"{args.output}: {result['events']} events"
            + (f", {result['frames']} frame records" if args.frames else "")
            + (f"; {result['dropped_pulses']} pulses narrower than a tick not played"
               if result["dropped_pulses"] else "") + f" ({result['reason']})")
    print(line)
    return result["exit_status"]


def _samplerate(text):
    try:
        return parse_samplerate(text)
    except ValueError as error:     # one line (latscope.cli), not argparse's usage + type name
        raise LatscopeError(f"--samplerate: {error}") from None


def _glitch_arg(text):
    """``ROLE=NS[,ROLE=NS...]`` to ``{role: ns}``."""
    out = {}
    for item in text.split(","):
        role, _, ns = item.partition("=")
        if not role.strip() or not ns.strip().isdigit():
            raise argparse.ArgumentTypeError(f"expected ROLE=NS (e.g. crs_dv=50), not {item!r}")
        out[role.strip()] = int(ns)
    return out
