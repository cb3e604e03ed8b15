"""The ``latscope`` command. Each part contributes its subcommands through a
``register(subparsers)`` function in one of its modules, so adding a command touches only that
part."""

import argparse
import importlib
import os
import sys

from latscope import LatscopeError, Terminated, __version__

#: Modules that contribute subcommands, in the order their commands are listed in ``--help``.
PART_CLI_MODULES = (
    "latscope.capture.demo",      # demo
    "latscope.capture.cli",       # capture, info, verify
    "latscope.capture.interop",   # import (sigrok), export (sigrok, VCD, CSV)
    "latscope.capture.traffic",   # traffic
    "latscope.capture.runner",    # run
    "latscope.analysis.cli",      # analyze, compare, report
    "latscope.capture.selftest",  # selftest
    "latscope.gateware.cli",      # gateware build, program, verilog, boards
    "latscope.bench",             # bench
)


EXIT_EPILOG = """\
exit status (every command; a command's own help may add meanings): 0 success; 1 a check
failed (verify: damaged file, selftest: failed); 2 bad input: a bad option, path, file or
device, with one line on stderr saying which, and nothing is written; 70 internal error (one
line; set LATSCOPE_DEBUG=1 for the traceback); 130 interrupted by Ctrl-C; 143 stopped by
SIGTERM. capture stops cleanly on Ctrl-C and SIGTERM, finalises its file and exits 0."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="latscope",
        description="Measure the latency inside an embedded Ethernet node, from the wire to its "
                    "software and back, with nanosecond timestamps on every packet.",
        epilog=EXIT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
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


def _raise_terminated(signum, frame):
    raise Terminated


def main(argv=None):
    import signal
    try:        # SIGTERM unwinds like Ctrl-C (files closed, children stopped), then one line
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:          # not the main thread (tests)
        previous = None
    try:
        return _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except LatscopeError as error:      # raised by an option's type= parser (times, rates)
        print(f"latscope: error: {error}", file=sys.stderr)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except LatscopeError as error:
        print(f"latscope {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:
        detail = f" {error}" if str(error) else ""
        print(f"latscope {args.command}: interrupted (Ctrl-C){detail}", file=sys.stderr)
        return 130
    except Terminated as error:
        detail = f" {error}" if str(error) else ""
        print(f"latscope {args.command}: terminated (SIGTERM){detail}", file=sys.stderr)
        return 143
    except BrokenPipeError:
        return 0
    except OSError as error:       # a path or device the user gave: one line, never a traceback
        from latscope.userio import os_error_message
        print(f"latscope {args.command}: error: {os_error_message(error)}", file=sys.stderr)
        return 2
    except Exception as error:
        if os.environ.get("LATSCOPE_DEBUG"):
            raise
        print(f"latscope {args.command}: internal error, please report: "
              f"{type(error).__name__}: {error} (LATSCOPE_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
