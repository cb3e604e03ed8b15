"""`latscope --help` and `--version` start without importing any heavy library, and the command
table that makes this possible agrees with what every command registers.

Not a timed test (a shared machine's load would make it flaky): it asserts which modules were
imported, in a fresh interpreter. `latscope bench --only analysis` times the start-up."""

import argparse
import json
import os
import subprocess
import sys

import pytest

from latscope import cli

HEAVY = ("numpy", "scipy", "pandas", "matplotlib", "amaranth", "serial", "hdrh")

_PROBE = r"""
import json, sys
from latscope import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print("\n" + json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _imported(*argv):
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--help"], ["--version"], [], ["-h", "analyze"]])
def test_help_and_version_import_no_heavy_library(argv):
    imported = _imported(*argv)
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_a_command_imports_only_its_own_part():
    """`latscope analyze --help` needs neither the gateware (amaranth) nor the plots."""
    imported = _imported("analyze", "--help")
    assert not imported & {"amaranth", "matplotlib"}, sorted(imported)


def _commands(parser):
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub, {a.dest: a.help for a in sub._choices_actions}


def test_command_table_matches_the_commands():
    """Names, help lines and modules in COMMANDS are exactly what the full parser registers."""
    full_sub, full = _commands(cli.build_parser())
    indexed = {name: text for name, (module, text) in cli.COMMANDS.items()}
    assert indexed == {k: v for k, v in full.items() if k in indexed}
    missing = sorted(set(full) - set(indexed))
    assert not missing, f"add {missing} to latscope.cli.COMMANDS"
    _, listing = _commands(cli.build_parser(None))
    assert list(listing.items()) == list(full.items())      # --help: same listing and order
    for name, (module, _) in cli.COMMANDS.items():
        lazy_sub, lazy = _commands(cli.build_parser(name))
        assert name in lazy and set(lazy) <= set(full)
        real, full_parser = lazy_sub.choices[name], full_sub.choices[name]
        assert [a.option_strings for a in real._actions] == \
            [a.option_strings for a in full_parser._actions], name
        func = real.get_default("func")
        assert func.__module__ == full_parser.get_default("func").__module__ == module, name
        assert func.__qualname__ == full_parser.get_default("func").__qualname__ == "run", name


_MODULES = r"""
import json, sys
from latscope import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print("\n" + json.dumps(sorted(m for m in sys.modules if m.startswith("latscope.commands."))))
"""


@pytest.mark.parametrize("name", ["info", "verify", "analyze"])
def test_a_command_imports_no_other_command_module(name):
    """``latscope CMD`` imports CMD's module (and the modules it shares with its siblings),
    never the other commands'."""
    out = subprocess.run([sys.executable, "-c", _MODULES, name, "--help"], capture_output=True,
                         text=True, check=True).stdout
    imported = set(json.loads(out.strip().splitlines()[-1]))
    own = cli.COMMANDS[name][0]
    others = {module for command, (module, _) in cli.COMMANDS.items() if module != own}
    assert own in imported and not imported & others, sorted(imported)


def test_lazy_parser_runs_commands_like_the_full_one(tmp_path, capsys):
    """A real command through main(): the lazy parser is what users run."""
    assert cli.main(["info", str(tmp_path / "missing.lsc")]) == 2
    assert "missing.lsc" in capsys.readouterr().err


def test_top_level_help_lists_every_command_whatever_follows(capsys):
    with pytest.raises(SystemExit):
        cli.main(["-h", "analyze"])
    text = capsys.readouterr().out
    assert all(name in text for name in cli.COMMANDS)


_THREADS = r"""
import contextlib, io, json, os, sys
from latscope import cli
with contextlib.redirect_stdout(io.StringIO()):
    status = cli.main(sys.argv[1:])
print(json.dumps({"status": status, "threads": len(os.listdir("/proc/self/task")),
                  "openblas": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
@pytest.mark.parametrize("preset", [None, "2"])
def test_commands_run_numpy_without_blas_worker_threads(preset):
    """NumPy's OpenBLAS starts a worker per core that busy-waits after import (CPU time with no
    work to do: no command uses BLAS); the command line asks for one BLAS thread unless the user
    set OPENBLAS_NUM_THREADS. Expected: one thread (the main one) after ``latscope analyze``, or
    the user's setting kept."""
    from latscope.analysis.api import repository_root
    capture = f"{repository_root()}/fixtures/bench/el-dm-64.lsc"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset:
        env["OPENBLAS_NUM_THREADS"] = preset
    out = subprocess.run([sys.executable, "-c", _THREADS, "analyze", capture, "--json"],
                         capture_output=True, text=True, check=True, env=env).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["status"] == 0
    if preset is None:
        assert seen == {"status": 0, "threads": 1, "openblas": "1"}
    else:
        assert seen["openblas"] == preset


_FROZEN = r"""
import contextlib, gc, io, json, sys
from latscope import cli
sys.argv = ["latscope", *sys.argv[1:]]
before = gc.get_freeze_count()
with contextlib.redirect_stdout(io.StringIO()):
    status = cli.main()
print(json.dumps({"status": status, "frozen": gc.get_freeze_count() - before,
                  "enabled": gc.isenabled()}))
"""


def test_command_sets_imported_objects_aside_from_the_collector():
    """As the whole process (``main()`` reading sys.argv), the objects made by importing the
    command's modules are frozen out of the cyclic collector, which stays enabled; a test
    calling ``main(argv)`` in its own process freezes nothing (its garbage must stay
    collectable)."""
    import gc

    from latscope.analysis.api import repository_root
    capture = f"{repository_root()}/fixtures/bench/el-dm-64.lsc"
    out = subprocess.run([sys.executable, "-c", _FROZEN, "analyze", capture, "--json"],
                         capture_output=True, text=True, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["status"] == 0 and seen["enabled"] and seen["frozen"] > 10_000, seen
    before = gc.get_freeze_count()
    assert cli.main(["info", capture]) == 0
    assert gc.get_freeze_count() == before and gc.isenabled()
