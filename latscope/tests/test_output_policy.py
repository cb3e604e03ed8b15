"""Regressions of the newcomer review's data-loss cases (issue 24, D1-D3), through the command
line: no command replaces its own input, with or without ``--force``, and the input's bytes are
unchanged afterwards. The policy itself is ``latscope.capture.files.outputs`` (its tests:
``capture/tests/test_outputs.py``)."""

import os
import shutil

import pytest

from latscope.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "fixtures", "bench", "gem-64.lsc")


@pytest.fixture
def capture(tmp_path):
    if not os.path.exists(FIXTURE):
        pytest.skip(f"{FIXTURE} absent")
    path = tmp_path / "d.lsc"
    shutil.copyfile(FIXTURE, path)
    return path


def _temporaries(folder):
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


def test_d1_analyze_hlog_never_replaces_the_capture(capture, capsys):
    before = capture.read_bytes()
    assert main(["analyze", str(capture), "--hlog", str(capture)]) == 2
    assert "is the input" in capsys.readouterr().err
    assert capture.read_bytes() == before
    assert _temporaries(capture.parent) == []


def test_d1_analyze_hlog_never_replaces_a_hard_link_of_the_capture(capture, capsys):
    alias = capture.parent / "alias.hlog"
    os.link(capture, alias)
    before = capture.read_bytes()
    assert main(["analyze", str(capture), "--hlog", str(alias)]) == 2
    capsys.readouterr()
    assert capture.read_bytes() == before


@pytest.mark.parametrize("fmt", ["sr", "vcd", "csv"])
def test_d2_d3_import_onto_its_own_input_is_refused_with_force(capture, tmp_path, capsys, fmt):
    exported = tmp_path / f"a.{fmt}"
    assert main(["export", str(capture), "--from", "1ms", "--to", "2ms", "-o",
                 str(exported)]) == 0
    before = exported.read_bytes()
    assert main(["import", str(exported), "-o", str(exported), "--force"]) == 2
    err = capsys.readouterr().err
    assert "is the input" in err and "--force never replaces an input" in err
    assert exported.read_bytes() == before
    assert _temporaries(tmp_path) == []
