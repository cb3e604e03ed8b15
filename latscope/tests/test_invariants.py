"""Invariants every command keeps, checked by a generator (issue 24).

Hypothesis drives the subcommands in-process (``latscope.cli.main(argv)``) with random argument
combinations over a small world of valid, damaged and hostile files: a capture and its links
(symbolic and hard), a damaged capture, a file that is no capture, exports in every format, a
sigrok file, names with spaces and non-ASCII letters, an existing file, a folder, a missing
folder and an unwritable place. After each run it asserts:

1. the exit status is one of ``latscope.cli.EXIT_STATUSES`` and not 70 (internal error);
2. no traceback on stdout or stderr;
3. every file that existed before is unchanged, except an output given with ``--force`` by a
   command that succeeded (an input never changes: the output policy refuses it);
4. every output is complete and valid (read back by ``verify`` or the format's own reader) or
   absent; a refused output is absent (or, when it existed, unchanged);
5. no temporary file (``.NAME.RANDOM.tmp``) or folder is left anywhere in the world.

The normal suite runs a few hundred cases of the fast commands; the slow test many more,
with ``compare``, ``report`` and ``run`` added. Each failure the generator found is a named
regression test in ``test_output_policy.py``, ``test_argument_checks.py`` or below.
"""

import contextlib
import hashlib
import io
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latscope import cli
from latscope.capture.files import integrity
from latscope.capture.files.capfile import open_capture
from latscope.capture.files.interop import export_csv, make_window
from latscope.capture.files.reimport import read_export
from latscope.capture.files.sigrok import SrReader
from latscope.capture.files.sigrok_write import export_sr
from latscope.capture.files.vcd import export_vcd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = {"cap.lsc": os.path.join(ROOT, "fixtures", "damaged", "intact.lsc"),
            "bad.lsc": os.path.join(ROOT, "fixtures", "damaged", "bitflip.lsc"),
            "killed.lsc": os.path.join(ROOT, "fixtures", "damaged", "killed.lsc"),
            "notcap.lsc": os.path.join(ROOT, "fixtures", "damaged", "not-a-capture.lsc"),
            "s.sr": os.path.join(ROOT, "fixtures", "sigrok", "counter.sr")}
ODD = "sp ace é.lsc"

#: Inputs a command may read, by kind (names in the world).
CAPTURES = ["cap.lsc", "bad.lsc", "killed.lsc", "notcap.lsc", ODD, "link.lsc", "hard.lsc",
            "missing.lsc", "folder"]
IMPORTABLE = ["w.csv", "w.vcd", "w.sr", "s.sr", "notcap.lsc", "missing.sr", "folder"]
#: Output names: new, existing, an input, links to an input, odd, standard output, a folder, a
#: missing folder, an unwritable place (filled in per world).
OUTPUTS = ["new.out", "existing.out", "cap.lsc", "link.lsc", "hard.lsc", "w.csv", "s.sr",
           "new é.out", "-", "folder", "nofolder/x.out", "@unwritable"]
TIMES = ["0", "1ms", "5ms", "0.1", "500s", "-1ms", "abc"]


@pytest.fixture(scope="module")
def seeds():
    """The world's files, made once: fixtures copied and exports of the intact capture written
    by the library writers."""
    missing = [path for path in FIXTURES.values() if not os.path.exists(path)]
    if missing:
        pytest.skip(f"fixtures absent: {missing}")
    folder = tempfile.mkdtemp(prefix="latscope-invariants-")
    for name, path in FIXTURES.items():
        shutil.copyfile(path, os.path.join(folder, name))
    with open_capture(os.path.join(folder, "cap.lsc")) as capture:
        window = make_window(capture, None, None, None)
        export_csv(window, os.path.join(folder, "w.csv"))
        export_vcd(window, os.path.join(folder, "w.vcd"))
        export_sr(window, os.path.join(folder, "w.sr"), 200_000_000)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _world(seeds, where):
    for name in os.listdir(seeds):
        shutil.copyfile(os.path.join(seeds, name), os.path.join(where, name))
    shutil.copyfile(os.path.join(where, "cap.lsc"), os.path.join(where, ODD))
    os.symlink("cap.lsc", os.path.join(where, "link.lsc"))
    os.link(os.path.join(where, "cap.lsc"), os.path.join(where, "hard.lsc"))
    with open(os.path.join(where, "existing.out"), "wb") as file:
        file.write(b"keep me")
    os.mkdir(os.path.join(where, "folder"))


def _unwritable(where):
    if os.geteuid() == 0:           # root writes into a 0500 folder; sysfs refuses even root
        return "/sys/latscope-invariants.out"
    folder = os.path.join(where, "ro")
    if not os.path.isdir(folder):
        os.mkdir(folder)
        os.chmod(folder, 0o500)
    return os.path.join(folder, "x.out")


def _snapshot(where):
    """``{relative path: sha256 or "dir" or "link->target"}`` of everything under ``where``."""
    out = {}
    for folder, dirs, files in os.walk(where):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, where)
            if os.path.islink(path):
                out[rel] = "link->" + os.readlink(path)
            elif os.path.isdir(path):
                out[rel] = "dir"
            else:
                with open(path, "rb") as file:
                    out[rel] = hashlib.sha256(file.read()).hexdigest()
    return out


# --- the commands, as strategies of (argv, outputs: [(path, kind)], force) --------------------

def _path(where, name):
    if name == "-":
        return "-"
    if name == "@unwritable":
        return _unwritable(where)
    return os.path.join(where, name)


def _optional(flag, values):
    return st.one_of(st.just([]), st.sampled_from(values).map(lambda v: [flag, v]))


@st.composite
def _info_verify(draw, where):
    command = draw(st.sampled_from(["info", "verify"]))
    argv = [command, _path(where, draw(st.sampled_from(CAPTURES)))]
    argv += draw(st.sampled_from([[], ["--json"]]))
    return argv, [], False


@st.composite
def _analyze(draw, where):
    argv = ["analyze", _path(where, draw(st.sampled_from(CAPTURES[:5] + ["w.csv", "s.sr"])))]
    outputs = []
    if draw(st.booleans()):
        hlog = draw(st.sampled_from(OUTPUTS))
        argv += ["--hlog", _path(where, hlog)]
        outputs.append((_path(where, hlog), "hlog"))
    force = draw(st.booleans())
    argv += ["--force"] * force + draw(st.sampled_from([[], ["--json"]]))
    argv += draw(_optional("--markers", ["m0=rx.isr", "m0=rx.isr,m1=rx.isr", "bogus"]))
    return argv, outputs, force


@st.composite
def _export(draw, where):
    fmt = draw(st.sampled_from([None, "csv", "vcd", "sr", "pcapng"]))
    output = draw(st.sampled_from(OUTPUTS + ["new.csv", "new.vcd", "new.sr", None]))
    argv = ["export", _path(where, draw(st.sampled_from(CAPTURES)))]
    kind = fmt or (os.path.splitext(output)[1][1:] if output else None)
    outputs = []
    if output is not None:
        argv += ["-o", _path(where, output)]
        outputs.append((_path(where, output), kind))
    if fmt:
        argv += ["--format", fmt]
    argv += draw(_optional("--from", TIMES)) + draw(_optional("--to", TIMES))
    argv += draw(_optional("--channels", ["rx_dv", "0,3", "nope"]))
    force = draw(st.booleans())
    return argv + ["--force"] * force, outputs, force


@st.composite
def _import(draw, where):
    output = draw(st.sampled_from(OUTPUTS + ["new.lsc"]))
    argv = ["import", _path(where, draw(st.sampled_from(IMPORTABLE))), "-o", _path(where, output)]
    argv += draw(_optional("--map", ["rx_dv=0", "rx_dv=0,m0=0", "rx_dv=0,rx_dv=1", "x"]))
    force = draw(st.booleans())
    return argv + ["--force"] * force, [(_path(where, output), "lsc")], force


@st.composite
def _repair(draw, where):
    output = draw(st.sampled_from(OUTPUTS + ["new.lsc"]))
    argv = ["repair", _path(where, draw(st.sampled_from(CAPTURES))), "-o", _path(where, output)]
    force = draw(st.booleans())
    return argv + ["--force"] * force, [(_path(where, output), "lsc")], force


@st.composite
def _capture(draw, where):
    output = draw(st.sampled_from(OUTPUTS + ["new.lsc"]))
    argv = ["capture", "--sim", "gem-64", "--sim-engine", "model", "--quiet",
            "--packets", draw(st.sampled_from(["5", "0", "-3", str(10**12)])),
            "-o", _path(where, output)]
    argv += draw(_optional("--sim-seed", ["1", "-1"]))
    argv += draw(_optional("--sim-rate", ["0", "-1", "nan", "1e7"]))
    argv += draw(_optional("--config", [_path(where, "existing.out")]))
    force = draw(st.booleans())
    return argv + ["--force"] * force, [(_path(where, output), "lsc")], force


@st.composite
def _replay_refused(draw, where):
    """replay-pins only where the output must be refused before the gateware is built (the
    recording itself, a link of it, or an existing file without --force)."""
    recording = draw(st.sampled_from(["w.vcd", "s.sr"]))
    output = draw(st.sampled_from([recording, "existing.out"]))
    force = output == recording and draw(st.booleans())
    argv = ["replay-pins", _path(where, recording), "-o", _path(where, output)]
    return argv + ["--force"] * force, [(_path(where, output), "lsc")], force


@st.composite
def _compare(draw, where):
    files = draw(st.lists(st.sampled_from(CAPTURES[:5] + ["w.csv"]), min_size=1, max_size=3))
    return ["compare", *[_path(where, f) for f in files]], [], False


@st.composite
def _report(draw, where):
    files = draw(st.lists(st.sampled_from(CAPTURES[:5]), min_size=1, max_size=2))
    output = draw(st.sampled_from(["newrep", "folder", "existing.out", "cap.lsc", "nofolder/r"]))
    force = draw(st.booleans())
    argv = ["report", *[_path(where, f) for f in files], "-o", _path(where, output)]
    return argv + ["--force"] * force, [(_path(where, output), "report")], force


#: The quick commands three times over: a simulated capture costs ~0.5 s, the others ~0.05 s.
FAST = [_info_verify, _analyze, _export, _import, _repair, _replay_refused] * 3 + [_capture]
SLOW = FAST + [_compare, _report]


# --- running and checking ---------------------------------------------------------------------

def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as stop:          # argparse's usage errors
            status = stop.code
    return status, out.getvalue(), err.getvalue()


def _valid(path, kind):
    """Whether the output ``path`` of ``kind`` reads back as complete."""
    if kind == "lsc":
        return integrity.verify(path)["state"] in ("intact", "intact, not finalised")
    if kind in ("csv", "vcd"):
        with tempfile.TemporaryDirectory() as folder:     # the reader goes by the suffix
            named = os.path.join(folder, f"export.{kind}")
            os.symlink(os.path.abspath(path), named)
            read_export(named)
        return True
    if kind == "sr":
        with SrReader(path) as reader:     # validates every chunk's size and the metadata
            bits = list(range(reader.info.data_probes))
            return sum(1 for _ in reader.iter_edges(bits)) >= 0
    if kind == "hlog":
        with open(path, encoding="utf-8") as file:
            return file.read().startswith("#")
    if kind == "report":
        return {"report.html", "report.md"} <= set(os.listdir(path))
    if kind == "pcapng":
        with open(path, "rb") as file:
            return file.read(4) == b"\x0a\x0d\x0d\x0a"
    return True


def check_case(where, argv, outputs, force):
    before = _snapshot(where)
    status, out, err = _run(argv)
    after = _snapshot(where)
    case = f"{argv} -> {status}: {err.strip()[-400:]!r}"
    assert status in cli.EXIT_STATUSES and status != 70, case
    assert "Traceback" not in out + err, case
    # an output named by a symbolic link replaces the link's target (the link stays)
    real = os.path.realpath(where)
    replaced = {os.path.relpath(name, real) for path, _ in outputs
                if force and status == 0 and path != "-"
                for name in (os.path.join(real, os.path.relpath(path, where)),
                             os.path.realpath(path))}
    for rel, digest in before.items():
        if rel in replaced or any(rel.startswith(r + os.sep) for r in replaced):
            continue
        # a new capture's ground truth beside it is an output too
        assert after.get(rel) == digest, f"{rel} changed: {case}"
    stray = [rel for rel in after if os.path.basename(rel).endswith(".tmp")]
    assert stray == [], f"temporary files left {stray}: {case}"
    for path, kind in outputs:
        if path == "-" or not path.startswith(where):
            continue
        rel = os.path.relpath(path, where)
        if status == 0 and rel in after:
            if before.get(rel) != after.get(rel) or rel not in before:
                assert _valid(path, kind), f"{rel} is not a valid {kind}: {case}"
        elif rel not in before:
            assert rel not in after, f"{rel} was left by a failed command: {case}"


def _drive(seeds, data, commands):
    with tempfile.TemporaryDirectory(prefix="latscope-world-") as where:
        _world(seeds, where)
        for _ in range(data.draw(st.integers(1, 3), label="commands")):
            command = data.draw(st.sampled_from(commands), label="command")
            argv, outputs, force = data.draw(command(where), label="argv")
            check_case(where, argv, outputs, force)


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_every_command_keeps_the_invariants(seeds, data):
    _drive(seeds, data, FAST)


@pytest.mark.slow
@settings(max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_every_command_keeps_the_invariants_at_length(seeds, data):
    _drive(seeds, data, SLOW)


# --- what the generator found, as named regressions -------------------------------------------

def test_analyze_that_computes_nothing_writes_no_hlog(seeds, tmp_path):
    """analyze of a file with no measurable pair exited 2 but had written its --hlog."""
    check_case(seeds, ["analyze", os.path.join(seeds, "s.sr"), "--hlog",
                       os.path.join(seeds, "new.out")], [(os.path.join(seeds, "new.out"),
                                                          "hlog")], False)
    assert not os.path.exists(os.path.join(seeds, "new.out"))


def test_capture_force_leaves_a_hard_link_of_the_old_file_alone(seeds):
    """capture --force over a file truncated it in place, so another name of the old file (a
    hard link) lost its data; it now gets a new file."""
    with tempfile.TemporaryDirectory(prefix="latscope-world-") as where:
        _world(seeds, where)
        output = os.path.join(where, "cap.lsc")
        check_case(where, ["capture", "--sim", "gem-64", "--sim-engine", "model", "--quiet",
                           "--packets", "5", "-o", output, "--force"], [(output, "lsc")], True)
        with open(os.path.join(where, "hard.lsc"), "rb") as old, \
                open(FIXTURES["cap.lsc"], "rb") as fixture:
            assert old.read() == fixture.read()
