"""``latscope gateware``: build bitstreams, program boards, export Verilog, list board pin maps.

Its subcommands (build, program, verilog, boards) each set ``subcommand``, which :func:`run`
calls."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from latscope import LatscopeError
from latscope.capture.files import outputs
from latscope.capture.files.outputs import check_output_folder
from latscope.gateware import build, programming
from latscope.gateware.boards import BOARDS, CHANNEL_ROLES, board_pin_table, get_board
from latscope.gateware.programming import programmer_command
from latscope.gateware.top import LatscopeCore
from latscope.gateware.verilator import export_verilog


def add_arguments(parser):
    parser.description = ("Build the instrument's bitstream with the pip-installed YoWASP "
                          "toolchain, program a board, export the core as Verilog, or list each "
                          "board's pins.")
    sub = parser.add_subparsers(dest="gateware_command", metavar="SUBCOMMAND")
    parser.set_defaults(subcommand=None, gateware_help=parser.print_help)
    names = sorted(BOARDS)

    p = sub.add_parser(
        "build", help="build a bitstream and print its timing and resource summary",
        description="Synthesise, place and route the instrument for a board with YoWASP (Yosys "
                    "and nextpnr from PyPI; the first run compiles the tools, a few minutes; "
                    "a warm ECPIX-5 build takes about a minute and a half). Prints the "
                    "achieved clock frequencies against the required ones, the timestamp "
                    "resolution in ns and the resources used, and writes summary.json beside the "
                    "bitstream. A build that misses timing fails.")
    p.add_argument("--board", required=True, choices=names, help="board to build for")
    p.add_argument("--out", metavar="DIR", type=Path,
                   help="build directory (default: build/gateware-BOARD)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--seed", type=int,
                   help="nextpnr placement seed (default: the board's shipped seed, see "
                        "docs/boards.md)")
    p.add_argument("--timing-allow-fail", action="store_true",
                   help="write the bitstream even if timing is not met (for exploration only; "
                        "the summary then says timing_met: false)")
    p.add_argument("--frames", choices=["mii", "rmii"],
                   help="add frame-aware capture of the DUT's MII or RMII bus (ECPIX-5 only; "
                        "pins in docs/boards.md)")
    p.add_argument("--header-bytes", metavar="N", type=int,
                   help="with --frames: keep each frame's first N bytes (0 to 64, default 0) in "
                        "its FRAME record, so pcapng exports show them in Wireshark; every "
                        "record grows by N bytes on the link (docs/stream-format.md section 8)")
    p.add_argument("--input-delay", action=argparse.BooleanOptionalAction,
                   help="an ECP5 DELAYF (128 taps of ~25 ps) before each channel's input "
                        "register, set by SET_DELAY, for `latscope selftest --calibrate "
                        "--sub-tick` (default: on for the ecpix5 board's x2 build, which alone "
                        "has them; --no-input-delay leaves them out; docs/selftest.md)")
    p.set_defaults(subcommand=_cmd_build)

    p = sub.add_parser(
        "program", help="load a bitstream into a board with openFPGALoader or iceprog",
        description="Load the bitstream into the board's FPGA (SRAM, lost at power-off) with "
                    "openFPGALoader, by its board names ecpix5 (early ECPIX-5, FTDI FT2232H "
                    "0403:6010), ecpix5_r03 (ECPIX-5 R03, FT4232H 0403:6011) and icebreaker; "
                    "iceprog serves the iCEBreaker when openFPGALoader is missing. The ECPIX-5 "
                    "revision is detected from the attached FTDI chip unless --revision is "
                    "given. Prints the instrument's serial port when it can find it. Set "
                    "OPENFPGALOADER or ICEPROG to use a tool outside PATH.")
    p.add_argument("--board", required=True, choices=names, help="board to program")
    p.add_argument("--bitstream", metavar="FILE", type=Path,
                   help="bitstream file (default: the last build in build/gateware-BOARD)")
    p.add_argument("--flash", action="store_true",
                   help="write the configuration flash instead of SRAM (survives power-off)")
    p.add_argument("--revision", choices=("auto", "early", "r03"), default="auto",
                   help="ECPIX-5 revision: early (FT2232H) or r03 (FT4232H); default auto: "
                        "detect it from the USB IDs of the attached FTDI chip")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.set_defaults(subcommand=_cmd_program)

    p = sub.add_parser(
        "verilog", help="export the instrument core as Verilog",
        description="Write the LatscopeCore (no pins, PLL or UART) as Verilog, e.g. to simulate "
                    "it with another tool. The ports are samples, selftest_out, tx and rx streams "
                    "and the clocks/resets of the capture and sync domains.")
    p.add_argument("--board", choices=names + ["sim"], default="sim",
                   help="board whose parameters to use (default: sim, one clock and the "
                        "fast-forward port used by the Verilator harness)")
    p.add_argument("-o", "--output", metavar="FILE", type=Path,
                   help="output file (default: stdout)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.set_defaults(subcommand=_cmd_verilog)

    p = sub.add_parser(
        "boards", help="list the supported boards, their clocks and channel pins",
        description="Print each board's channel-to-pin map (connector pin and FPGA ball), the "
                    "capture clock and the timestamp resolution in ns.")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(subcommand=_cmd_boards)


def run(args):
    if args.subcommand is None:
        args.gateware_help()
        return 2
    return args.subcommand(args)


def _cmd_build(args):
    if args.out is not None:     # before minutes of synthesis, not after
        check_output_folder(args.out, force=True)     # a build folder is reused
    extra = build.frame_build_options(args.frames, args.header_bytes)
    if args.input_delay is not None:     # else the board's default
        extra["input_delay"] = args.input_delay
    summary = build.build_bitstream(args.board, args.out,
                                    timing_allow_fail=args.timing_allow_fail, seed=args.seed,
                                    **extra)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(build.format_summary(summary))
    return 0 if summary["timing_met"] else 1


def _cmd_program(args):
    board = get_board(args.board)
    bitstream = args.bitstream or \
        build.default_build_dir(board.name) / build.BITSTREAM_NAME[board.family]
    if Path(bitstream).is_dir():
        raise LatscopeError(f"{bitstream}: is a directory; --bitstream names a bitstream file")
    if not Path(bitstream).exists():
        raise LatscopeError(f"No bitstream at {bitstream}; run `latscope gateware build "
                            f"--board {board.name}` first or pass --bitstream")
    ports = programming.list_usb_serial()
    revision = programming.resolve_revision(board, args.revision, ports)
    cmd = programmer_command(board, bitstream, flash=args.flash, revision=revision)
    print(" ".join(cmd), file=sys.stderr)
    port = programming.uart_port(board, ports, revision)
    if port:
        print(f"latscope: the instrument's serial port is {port}", file=sys.stderr)
    if args.dry_run:
        return 0
    result = subprocess.run(cmd)
    if result.returncode != 0:
        raise LatscopeError(f"{Path(cmd[0]).name} failed with exit status {result.returncode} "
                            f"(is the board connected and powered?)")
    return 0


def _cmd_verilog(args):
    if args.output:       # before the design is elaborated, not after
        outputs.check_output(args.output, force=args.force)
    if args.board == "sim":
        params = dict(capture_hz=48_000_000, board="sim", channel_names=CHANNEL_ROLES,
                      async_fifo=False, fast_forward=True)
    else:
        params = get_board(args.board).core_params()
    text = export_verilog(LatscopeCore(**params))
    if args.output:
        with outputs.open_output(args.output, force=args.force) as file:
            file.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_boards(args):
    rows = {}
    for name, board in sorted(BOARDS.items()):
        rows[name] = {
            "title": board.title, "family": board.family,
            "capture_clock_mhz": board.capture_hz / 1e6, "link_clock_mhz": board.sync_hz / 1e6,
            "resolution_ns": round(board.resolution_ns, 4), "uart_baud": int(board.baud),
            "pins": [{"channel": ch, "role": role, "connector": conn, "pin": pin, "fpga": fpga}
                     for ch, role, conn, pin, fpga in board_pin_table(board)],
        }
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for name, row in rows.items():
        print(f"{name}: {row['title']}, capture {row['capture_clock_mhz']:g} MHz DDR -> "
              f"{row['resolution_ns']:.3f} ns, UART {row['uart_baud']:,} baud")
        for pin in row["pins"]:
            ch = "-" if pin["channel"] is None else pin["channel"]
            print(f"  ch {ch:>2}  {pin['role']:<9} {pin['connector']} pin {pin['pin']:>2}  "
                  f"FPGA {pin['fpga']}")
    return 0
