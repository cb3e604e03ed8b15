"""No traceback, ever, from user input (issue 9 item 3).

The walker lists every subcommand from the argparse tree itself, so a command added later is
covered without touching this file. Each argument is classified by what it names (its metavar
or destination): an input file, a text file (TOML), an output file or directory, a device, a
time, a count. Each gets the bad values of its kind: a missing directory, an unwritable place,
an existing file without ``--force``, a directory where a file goes (and a file where a
directory goes), binary data where text is expected, out-of-range numbers and windows. Every
case must end with exit status 2 (argparse's and latscope's "bad input") and exactly one line
naming the error: no traceback, no second error line, nothing created at the bad path.
"""

import argparse
import contextlib
import io
import os
import signal

import pytest

from latscope.cli import build_parser, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURE = os.path.join(ROOT, "fixtures", "damaged", "intact.lsc")
SR = os.path.join(ROOT, "fixtures", "sigrok", "counter.sr")

#: Good values for required arguments, by metavar or destination (never by command name).
GOOD = {"FILE": CAPTURE, "CAPTURE": CAPTURE, "FILE.sr": SR, "HOST:PORT": "127.0.0.1:9",
        "board": "icebreaker", "RECORDING": SR, "store": os.path.join(ROOT, "no-such-store"),
        "measure": "rx.isr"}
#: Inputs that are binary by nature (a bitstream): no "binary where text is expected" case.
BINARY_INPUTS = {"bitstream"}
#: Kinds of path arguments, by metavar or destination.
INPUT_CAPTURE = {"FILE", "CAPTURE"}
INPUT_SR = {"FILE.sr", "RECORDING"}
TEXT_INPUT = {"FILE.toml", "EXPERIMENT.toml"}
OUTPUT_DESTS = {"output", "out", "hlog", "plot", "junit", "markdown", "calibrate"}
DEVICE = {"DEVICE"}
#: Numbers and times: values out of range for any such option.
BAD_NUMBERS = {"S": ["-1", "nan", "inf", "abc"], "N": ["-5", "abc"], "TIME": ["-1ms", "abc"],
               "HZ": ["0", "-3MHz", "abc"], "PPS": ["-1", "abc"],
               "BYTES_PER_S": ["-1", "0", "abc"], "TICKS": ["-1", "abc"]}
def _commands(parser=None, prefix=()):
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, prefix + (name,))
            return
    if prefix:
        yield prefix, parser


def _key(action):
    return action.metavar if action.metavar else action.dest


def _is_output(action):
    return action.option_strings and (action.dest in OUTPUT_DESTS)


def _is_directory_output(action):
    return _is_output(action) and (action.metavar == "DIR" or action.dest == "out")


def _base(prefix, parser, tmp_path):
    """A command line with every required argument given a good value (outputs in tmp)."""
    argv = list(prefix)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.option_strings and \
                not action.required or action.nargs in ("?", "*"):
            continue
        key = _key(action)
        if _is_output(action):
            value = str(tmp_path / f"good-out-{action.dest}")
        elif key in GOOD:
            value = GOOD[key]
        elif action.dest in GOOD:
            value = GOOD[action.dest]
        elif key in TEXT_INPUT:
            value = str(tmp_path / "good.toml")
        elif key == "DIR":              # a results store (history)
            value = str(tmp_path / "store")
        else:
            raise AssertionError(f"{' '.join(prefix)}: add a good value for required "
                                 f"{key!r} to GOOD")
        if action.option_strings:
            argv += [action.option_strings[0], value]
        else:
            argv += [value]
    return argv


def _replace(argv, action, value):
    """``argv`` with ``action``'s value replaced by (or set to) ``value``."""
    argv = list(argv)
    if action.option_strings:
        for flag in action.option_strings:
            if flag in argv:
                argv[argv.index(flag) + 1] = value
                return argv
        return argv + [action.option_strings[-1], value]
    # positionals: the first one of this kind in the base line
    good = GOOD.get(_key(action), GOOD.get(action.dest))
    if good in argv:
        argv[argv.index(good)] = value
        return argv
    return argv + [value]


def _files(tmp_path):
    binary = tmp_path / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 4 + b"\xff\xfe\x00\x00")
    existing = tmp_path / "existing.out"
    existing.write_bytes(b"keep me")
    (tmp_path / "good.toml").write_text("# empty\n")
    unwritable = tmp_path / "ro"
    unwritable.mkdir()
    unwritable.chmod(0o500)
    # root writes into a 0500 directory; sysfs refuses file creation even to root
    ro_dir = "/sys" if os.geteuid() == 0 else str(unwritable)
    return {"binary": str(binary), "existing": str(existing), "dir": str(tmp_path),
            "missing_dir": str(tmp_path / "no-such-dir" / "x"),
            "unwritable": os.path.join(ro_dir, "latscope-test-out")}


def _cases(prefix, parser, tmp_path, files):
    options = {flag for a in parser._actions for flag in a.option_strings}
    base = _base(prefix, parser, tmp_path)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.nargs == 0:
            continue
        key = _key(action)
        cases = []
        if _is_output(action):
            cases += [("missing directory", files["missing_dir"]),
                      ("unwritable", files["unwritable"])]
            if _is_directory_output(action):
                cases += [("file where a directory goes", files["existing"])]
            else:
                cases += [("directory where a file goes", files["dir"])]
                if "--force" in options:
                    cases += [("existing file without --force", files["existing"])]
        elif key in INPUT_CAPTURE | INPUT_SR | TEXT_INPUT:
            cases += [("missing", files["missing_dir"]), ("directory", files["dir"])]
            if action.dest not in BINARY_INPUTS:
                cases += [("binary", files["binary"])]
        elif key in DEVICE:
            cases += [("missing device", files["missing_dir"]), ("directory", files["dir"])]
        elif key in BAD_NUMBERS:
            cases += [(f"out of range {v}", v) for v in BAD_NUMBERS[key]]
        flag = action.option_strings[0] if action.option_strings else key
        for what, value in cases:
            yield f"{' '.join(prefix)} {flag}: {what}", _replace(base, action, value)


def _run(argv, seconds=60):
    """``main(argv)`` in-process: exit status, stdout, stderr. A case that starts real work
    instead of refusing its input fails by timeout."""
    out, err = io.StringIO(), io.StringIO()

    def too_long(signum, frame):
        raise TimeoutError(f"{argv} did not fail fast")
    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as stop:       # argparse errors
                status = stop.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return status, out.getvalue(), err.getvalue()


def test_every_subcommand_is_walked():
    names = {" ".join(prefix) for prefix, _ in _commands()}
    # a floor, not a list: new commands join automatically
    assert {"capture", "info", "verify", "import", "export", "analyze", "compare", "report",
            "run", "traffic"} <= names


def test_bad_user_input_gives_one_line_and_status_2(tmp_path):
    if not (os.path.exists(CAPTURE) and os.path.exists(SR)):
        pytest.skip("fixtures/damaged/intact.lsc or fixtures/sigrok/counter.sr absent")
    files = _files(tmp_path)
    failures = []
    walked = 0
    for prefix, parser in _commands():
        for name, argv in _cases(prefix, parser, tmp_path, files):
            walked += 1
            before = set(os.listdir(tmp_path))
            try:
                status, out, err = _run(argv)
            except TimeoutError as error:
                failures.append(f"{name}: {error}")
                continue
            lines = [line for line in err.splitlines() if line.strip()]
            errors = [line for line in lines if "error" in line]
            usage = [line for line in lines if line.startswith("usage:") or
                     line.startswith(" ")]
            problem = None
            if "Traceback" in err or "Traceback" in out:
                problem = "traceback"
            elif status != 2:
                problem = f"exit status {status}, not 2"
            elif len(errors) != 1:
                problem = f"{len(errors)} error lines"
            elif len(lines) != 1 + len(usage) and not any("warning" in line for line in lines):
                problem = "extra output"
            elif "internal error" in errors[0]:
                problem = "internal error"
            created = set(os.listdir(tmp_path)) - before
            if created:
                problem = f"created {sorted(created)}"
            with open(files["existing"], "rb") as kept:
                replaced = kept.read() != b"keep me"
            if replaced:
                problem = "replaced an existing file"
            if problem:
                failures.append(f"{name}: {problem}: {argv} -> {err.strip()!r}")
    assert walked > 50
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("window", [["--from", "1ms", "--to", "0.5ms"], ["--from", "100s"],
                                    ["--to", "0"], ["--from", "-1ms"], ["--from", "1e400"]])
def test_out_of_range_windows(tmp_path, window):
    if not os.path.exists(CAPTURE):
        pytest.skip("fixtures/damaged/intact.lsc absent")
    for fmt in ("csv", "vcd", "sr"):
        out = tmp_path / f"w.{fmt}"
        status, _, err = _run(["export", CAPTURE, "-o", str(out)] + window)
        lines = [line for line in err.splitlines() if line.strip() and
                 not line.startswith(("usage:", " "))]
        assert status == 2 and len(lines) == 1 and "Traceback" not in err, (window, err)
        assert not out.exists()


def test_userio_examples():
    import doctest

    import latscope.userio
    result = doctest.testmod(latscope.userio)
    assert result.attempted > 0 and result.failed == 0


def test_os_error_and_unexpected_exception_reaching_main(monkeypatch, capsys):
    # whatever a command lets escape ends as one line: an OSError through latscope.cli's one
    # mapping (status 2), anything else as an internal error (status 70, traceback only with
    # LATSCOPE_DEBUG=1)
    import latscope.cli as cli

    def parser(command=None):
        p = argparse.ArgumentParser(prog="latscope")
        sub = p.add_subparsers(dest="command")
        q = sub.add_parser("boom")
        q.set_defaults(func=lambda args: {}["missing"])
        r = sub.add_parser("disk")
        r.set_defaults(func=lambda args: open("/nonexistent-dir/x", "w"))
        return p
    monkeypatch.setattr(cli, "build_parser", parser)
    monkeypatch.delenv("LATSCOPE_DEBUG", raising=False)
    assert cli.main(["boom"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error, please report: KeyError" in err
    assert cli.main(["disk"]) == 2
    assert capsys.readouterr().err == ("latscope disk: error: /nonexistent-dir/x: no such file "
                                       "or directory\n")
