"""The ``latscope`` command. Each part contributes its subcommands through a
``register(subparsers)`` function in one of its modules, so adding a command touches only that
part."""

import argparse
import importlib
import sys

from latscope import LatscopeError, __version__

#: Modules that contribute subcommands, in the order their commands are listed in ``--help``.
PART_CLI_MODULES = (
    "latscope.capture.demo",      # demo
    "latscope.capture.cli",       # capture, info, verify
    "latscope.capture.interop",   # import (sigrok), export (sigrok, VCD, CSV)
    "latscope.capture.traffic",   # traffic
    "latscope.capture.runner",    # run
    "latscope.analysis.cli",      # analyze, compare, report
    "latscope.capture.selftest",  # selftest
    "latscope.capture.doctor",    # doctor
    "latscope.gateware.cli",      # gateware build, program, verilog, boards
    "latscope.bench",             # bench
)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="latscope",
        description="Measure the latency inside an embedded Ethernet node, from the wire to its "
                    "software and back, with nanosecond timestamps on every packet.")
    parser.add_argument("--version", action="version", version=f"latscope {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in PART_CLI_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:   # a real missing dependency, not a part not written yet
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except LatscopeError as error:
        print(f"latscope {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"latscope {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
