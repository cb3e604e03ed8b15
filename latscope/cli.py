"""The ``latscope`` command: one table of subcommands, each one module of
:mod:`latscope.commands` with ``add_arguments(parser)`` and ``run(args) -> int``."""

import argparse
import importlib
import os
import sys
import textwrap

from latscope import LatscopeError, Terminated, __version__

#: Every exit status a latscope command returns, and what it means. ``latscope --help`` prints
#: this table; docs/exit-status.md is its documentation (a test keeps the two the same).
EXIT_STATUSES = {
    0: "success (capture: stopped on a limit, Ctrl-C or SIGTERM, the file is finalised)",
    1: "a check failed: verify (damaged file), selftest and doctor (a step failed), gate "
       "(regression), run (a cell failed), traffic (packets lost)",
    2: "bad input: an option, path, file, value or device, with one line on stderr saying "
       "which; checked before work starts, nothing is written",
    3: "capture and replay-pins: the link was lost (the file holds everything received); "
       "gate: undecidable",
    4: "capture: a write error (a full disk) or the decoder failed: the file is finalised "
       "with everything before it",
    70: "internal error, please report (one line; LATSCOPE_DEBUG=1 shows the traceback)",
    130: "interrupted by Ctrl-C (at any moment: one line, no traceback)",
    143: "stopped by SIGTERM",
}


def _exit_epilog():
    lines = ["exit status (every command; a command's own help may say more):"]
    for status, meaning in EXIT_STATUSES.items():
        lines += textwrap.wrap(meaning, 79, initial_indent=f"  {status:>3}  ",
                               subsequent_indent=" " * 7)
    return "\n".join(lines)


EXIT_EPILOG = _exit_epilog()


#: Every command: its module and its one-line help, in the order ``--help`` lists them. The
#: listing needs no module (importing them all costs ~2 s of scipy, pandas, amaranth), and
#: ``latscope CMD`` imports only CMD's module.
COMMANDS = {
    "demo": ("latscope.commands.demo",
             "capture the 2018 paper's configurations on the simulated bench and compare"),
    "capture": ("latscope.commands.capture",
                "record events from the instrument into a capture file"),
    "info": ("latscope.commands.info", "describe a capture file"),
    "verify": ("latscope.commands.verify",
               "check a capture file's integrity and report its gaps"),
    "repair": ("latscope.commands.repair",
               "rebuild a valid capture from every intact chunk of a damaged one"),
    "import": ("latscope.commands.import_",
               "turn a sigrok .sr capture (or a latscope .vcd/.csv export) into a latscope "
               "capture"),
    "export": ("latscope.commands.export",
               "write a capture window as sigrok .sr, VCD or CSV, or its frames as pcapng"),
    "replay-pins": ("latscope.commands.replay_pins",
                    "play recorded pin activity (.vcd/.sr) through the real gateware "
                    "(Verilator) into a capture file"),
    "traffic": ("latscope.commands.traffic",
                "send paced UDP test frames to the DUT and record the echoes"),
    "run": ("latscope.commands.run", "run an experiment matrix (paths x sizes x configurations)"),
    "analyze": ("latscope.commands.analyze", "per-packet latencies and statistics of a capture"),
    "compare": ("latscope.commands.compare", "compare captures or configurations"),
    "report": ("latscope.commands.report", "write an HTML and Markdown report of captures"),
    "selftest": ("latscope.commands.selftest",
                 "check the instrument with its internal pattern (no DUT needed)"),
    "doctor": ("latscope.commands.doctor",
               "bring up a new board: identify, self-test, loop-back, link soak"),
    "gateware": ("latscope.commands.gateware",
                 "build and program the FPGA gateware, export Verilog, show pin maps"),
    "gate": ("latscope.commands.gate",
             "decide whether a candidate's latencies regressed against a baseline's (CI gate)"),
    "history": ("latscope.commands.history",
                "a measurement's percentiles over the runs of a results store, with change "
                "points"),
    "bench": ("latscope.commands.bench", "run the benchmarks and print a table of figures"),
}

_ALL = object()


def build_parser(command=_ALL):
    """The ``latscope`` argument parser.

    ``command``: by default every command's module is imported and adds its arguments. With
    the name of the command about to run, only that command's module is imported; with
    ``None`` (no command: ``--help``, ``--version``) or an unknown name, none is, and the
    commands appear by name and help line only.
    """
    parser = argparse.ArgumentParser(
        prog="latscope",
        description="Measure the latency inside an embedded Ethernet node, from the wire to its "
                    "software and back, with nanosecond timestamps on every packet.",
        epilog=EXIT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"latscope {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    # a command that runs needs no sibling (each parser costs argparse's gettext lookups)
    listing = command is None or (command is not _ALL and command not in COMMANDS)
    for name, (module_name, text) in COMMANDS.items():
        if command is _ALL or command == name:
            module = importlib.import_module(module_name)
            sub = subparsers.add_parser(name, help=text)
            module.add_arguments(sub)
            sub.set_defaults(func=module.run)
        elif listing:
            subparsers.add_parser(name, help=text)
    return parser


def _command_in(argv):
    """The command named in ``argv`` (the first word not starting with '-'), or ``None`` when
    there is none or a top-level option (``-h``, ``--version``) comes first."""
    for word in argv:
        if not word.startswith("-"):
            return word
        if word in ("-h", "--help", "--version"):
            return None
    return None


def _raise_terminated(signum, frame):
    raise Terminated


class _SignalsNoted:
    """While entered (in the main thread), SIGINT and SIGTERM are noted instead of raised; on
    leaving, the first one noted is raised (``KeyboardInterrupt``, :class:`Terminated`).

    For the imports of a command's modules: an exception raised by a signal handler inside an
    import can come out as something else or not at all. Raised while NumPy's C core initialises,
    it became that module's ImportError ("PyCapsule_Import could not import module"); raised in
    a callback of the import machinery, Python printed it as ignored and went on."""

    def __init__(self):
        self.noted = []
        self._old = {}

    def _note(self, signum, frame):
        self.noted.append(signum)

    def __enter__(self):
        import signal
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._note)
            except ValueError:          # not the main thread (tests)
                pass
        return self

    def __exit__(self, *exc):
        import signal
        for sig, old in self._old.items():
            signal.signal(sig, old)
        if self.noted and (exc[0] is None or issubclass(exc[0], Exception)):
            raise (KeyboardInterrupt if self.noted[0] == signal.SIGINT else Terminated) from None
        return False


def main(argv=None):
    """Run the ``latscope`` command on ``argv`` (default: ``sys.argv[1:]``); returns the exit
    status (:data:`EXIT_STATUSES`). Ctrl-C or SIGTERM at any moment, from the first imports of
    the command's modules on, ends with one line and status 130 or 143, never a traceback."""
    previous = None
    try:
        import signal
        try:    # SIGTERM unwinds like Ctrl-C (files closed, children stopped), then one line
            previous = signal.signal(signal.SIGTERM, _raise_terminated)
        except ValueError:          # not the main thread (tests)
            previous = None
        status = _main(argv, whole_process=argv is None)
        if argv is None:
            _hold_signals()
        return status
    except KeyboardInterrupt:       # before a command ran (its imports, parsing)
        return _stopped("interrupted (Ctrl-C)", 130)
    except Terminated:
        return _stopped("terminated (SIGTERM)", 143)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _hold_signals():
    """Block SIGINT and SIGTERM for the rest of the process: the command has finished and its
    status stands. A Ctrl-C in the moments before the process exits would otherwise raise where
    nothing catches it (a traceback), or, once the interpreter has put the default handlers
    back, kill the process by the signal instead of letting it exit with its status."""
    import signal
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (AttributeError, ValueError, OSError):   # no POSIX signal masks here
        pass


def _stopped(what, status):
    try:
        print(f"latscope: {what}", file=sys.stderr)
    except (KeyboardInterrupt, OSError):
        pass
    return status


def _quiet_blas_threads():
    """One BLAS thread unless the user chose otherwise, set before NumPy loads.

    NumPy's bundled OpenBLAS starts a worker thread per core when NumPy is imported, and each
    worker busy-waits for work (OpenBLAS's thread timeout, ~2^28 cycles) before it sleeps: on a
    quiet 2-core machine ``latscope analyze`` took 0.32 s of CPU in 0.19 s of wall time. No
    command does BLAS work (no matmul, dot or linalg on this path: pairing, sorting, order
    statistics and histograms are element-wise NumPy), so the threads only cost time."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _main(argv, whole_process=False):
    argv = sys.argv[1:] if argv is None else list(argv)
    _quiet_blas_threads()
    import gc
    # Importing a command's module (NumPy and the part's modules: ~0.1 s) makes a few hundred
    # thousand objects that live as long as the process; the cyclic collector would traverse
    # them again and again, during the imports and, all at once, after (7 ms). When this is the
    # whole process (the ``latscope`` command, not a test calling main), they are set aside
    # (gc.freeze) once imported, and the collector runs as usual on what the command makes.
    gc.disable()
    try:
        with _SignalsNoted():
            parser = build_parser(_command_in(argv))
    finally:
        if whole_process:
            gc.freeze()
        gc.enable()
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
