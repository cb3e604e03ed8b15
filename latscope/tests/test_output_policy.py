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


def test_d1_analyze_hlog_refuses_an_existing_file_without_force(capture, tmp_path, capsys):
    other = tmp_path / "other.hlog"
    other.write_bytes(b"keep me")
    assert main(["analyze", str(capture), "--hlog", str(other)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{other} exists; choose another name or use --force")
    assert other.read_bytes() == b"keep me"
    assert main(["analyze", str(capture), "--hlog", str(other), "--force"]) == 0
    capsys.readouterr()
    assert other.read_bytes().startswith(b"#") and _temporaries(tmp_path) == []


def test_d3_replay_pins_onto_its_own_input_is_refused_with_force(capture, tmp_path, capsys):
    recording = tmp_path / "b.vcd"
    assert main(["export", str(capture), "--from", "1ms", "--to", "2ms", "-o",
                 str(recording)]) == 0
    before = recording.read_bytes()
    # refused before the gateware is built: no Verilator needed
    assert main(["replay-pins", str(recording), "-o", str(recording), "--force"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert recording.read_bytes() == before


def test_export_onto_a_symlink_of_its_capture_is_refused_with_force(capture, tmp_path, capsys):
    link = tmp_path / "link.csv"
    link.symlink_to(capture)
    before = capture.read_bytes()
    assert main(["export", str(capture), "-o", str(link), "--force"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert capture.read_bytes() == before and link.is_symlink()


def test_export_csv_to_standard_output(capture, capsys):
    assert main(["export", str(capture), "--from", "1ms", "--to", "1.1ms", "--format", "csv",
                 "-o", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# latscope") and lines[1] == "time_ns,channel,edge"


def test_d4_run_into_a_folder_with_results_needs_force(tmp_path, capsys):
    experiment = tmp_path / "e.toml"
    experiment.write_text('name = "e"\ntarget = "sim"\npaths = ["gem"]\nsizes = [64]\n'
                          'configurations = ["default"]\npackets = 20\nseed = 1\n'
                          'engine = "model"\n')
    results = tmp_path / "results"
    assert main(["run", str(experiment), "-o", str(results)]) == 0
    first = (results / "default-gem-64.lsc").read_bytes()
    assert main(["run", str(experiment), "-o", str(results)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{results} holds files; choose another folder or use --force")
    assert (results / "default-gem-64.lsc").read_bytes() == first
    assert main(["run", str(experiment), "-o", str(results), "--force"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["e.toml", "results"]     # no temporary folder


def test_report_into_a_folder_with_files_needs_force(capture, tmp_path, capsys):
    folder = tmp_path / "rep"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert main(["report", str(capture), "-o", str(folder)]) == 2
    assert "holds files" in capsys.readouterr().err
    assert os.listdir(folder) == ["notes.txt"]


def test_repair_rebuilds_a_capture_whose_metadata_is_damaged(tmp_path, capsys):
    # a format 1.2 capture (metadata copies in METC and NOTE)
    with open(os.path.join(ROOT, "fixtures", "damaged", "intact.lsc"), "rb") as fixture:
        data = bytearray(fixture.read())
    data[40] ^= 1                                   # a bit inside the META chunk
    damaged = tmp_path / "flip.lsc"
    damaged.write_bytes(data)
    assert main(["verify", str(damaged)]) in (0, 1)
    assert "read from its copy in the METC chunk" in capsys.readouterr().out
    fixed = tmp_path / "fixed.lsc"
    assert main(["repair", str(damaged), "-o", str(damaged), "--force"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert main(["repair", str(damaged), "-o", str(fixed)]) == 0
    assert "metadata from the METC chunk" in capsys.readouterr().out
    assert main(["verify", str(fixed)]) == 0
    assert ": OK:" in capsys.readouterr().out
    assert damaged.read_bytes() == bytes(data)


@pytest.mark.parametrize("fmt", ["sr", "vcd", "csv"])
def test_d5_simulated_banner_survives_export_and_import(capture, tmp_path, capsys, fmt):
    exported, back = tmp_path / f"win.{fmt}", tmp_path / "back.lsc"
    assert main(["export", str(capture), "--from", "1ms", "--to", "5ms", "-o",
                 str(exported)]) == 0
    assert main(["import", str(exported), "-o", str(back)]) == 0
    capsys.readouterr()
    assert main(["info", str(back)]) == 0
    data = [line for line in capsys.readouterr().out.splitlines() if line.startswith("data")]
    assert data and "SIMULATED: capture --sim" in data[0] and f"export {fmt} of d.lsc" in data[0]
    assert main(["report", str(back), "-o", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "report.md").read_text()
    assert page.startswith("# latscope report\n\n**SIMULATED: 1 of 1 captures")
