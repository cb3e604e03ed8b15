"""Arguments checked before work starts (issue 24, the newcomer review's D9 and D10): each bad
value is one line on stderr, exit status 2, and nothing is written. Each check lives in the
library function that owns the value (SimulatedSource, parse_definitions, make_window,
parse_channel_map, parse_pin_map, parse_markers); these tests drive them through the CLI."""

import os

import pytest

from latscope.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURE = os.path.join(ROOT, "fixtures", "damaged", "intact.lsc")
SR = os.path.join(ROOT, "fixtures", "sigrok", "counter.sr")


def _refused(argv, capsys, folder, words):
    before = sorted(os.listdir(folder))
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and words in lines[0], err
    assert sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("option, value, words", [
    ("--packets", str(10**12), "Simulated packets must be an integer from 1 to 10,000,000"),
    ("--sim-seed", "-1", "Simulation seed must be a non-negative integer"),
    ("--sim-rate", "0", "Simulated byte rate must be a positive number of bytes per second"),
    ("--sim-rate", "nan", "Simulated byte rate must be a positive number of bytes per second"),
])
def test_d9_simulated_capture_sizes_and_seeds(tmp_path, capsys, option, value, words):
    argv = ["capture", "--sim", "gem-64", "--sim-engine", "model", "-o", str(tmp_path / "c.lsc"),
            option, value]
    _refused(argv, capsys, tmp_path, words)


@pytest.mark.parametrize("window", ["1e30", "inf", "nan", "-1", "0"])
def test_d9_definitions_window_must_be_finite_and_bounded(tmp_path, capsys, window):
    definitions = tmp_path / "d.toml"
    definitions.write_text(f'[measurement."rx.isr"]\nspan = "rx_dv falling -> m0 rising"\n'
                           f'window_ns = {window}\n')
    _refused(["analyze", CAPTURE, "--definitions", str(definitions)], capsys, tmp_path,
             "window_ns must be a positive number of ns up to 3.6e+12")


@pytest.mark.parametrize("fmt", ["csv", "vcd", "sr", "pcapng"])
def test_export_window_outside_the_capture_is_refused(tmp_path, capsys, fmt):
    _refused(["export", CAPTURE, "--from", "500s", "--to", "501s", "-o",
              str(tmp_path / f"w.{fmt}")], capsys, tmp_path,
             "the window must start within the capture" if fmt != "pcapng" else "")


def test_d10_one_probe_mapped_to_two_roles_is_refused(tmp_path, capsys):
    _refused(["import", SR, "--map", "rx_dv=0,m0=0", "-o", str(tmp_path / "m.lsc")], capsys,
             tmp_path, "--map maps probe '0' to two roles, 'rx_dv' and 'm0'")


def test_one_role_mapped_twice_is_refused(tmp_path, capsys):
    _refused(["import", SR, "--map", "rx_dv=0,rx_dv=1", "-o", str(tmp_path / "m.lsc")], capsys,
             tmp_path, "--map names role 'rx_dv' twice")


def test_replay_pins_one_signal_for_two_roles_is_refused():
    from latscope import LatscopeError
    from latscope.capture.sim.replay import parse_pin_map
    with pytest.raises(LatscopeError, match="maps signal 'D0' to two roles, 'rx_dv' and 'tx_en'"):
        parse_pin_map("rx_dv=D0,tx_en=D0")


def test_one_marker_meaning_on_two_channels_is_refused(tmp_path, capsys):
    _refused(["analyze", CAPTURE, "--markers", "m0=rx.isr,m1=rx.isr"], capsys, tmp_path,
             "--markers gives rx.isr to two channels, m0 and m1")


def test_capture_config_giving_one_role_to_two_channels_is_refused(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('[channels]\n0 = "rx_dv"\n3 = "rx_dv"\n')
    _refused(["capture", "--sim", "gem-64", "--sim-engine", "model", "--config", str(config),
              "-o", str(tmp_path / "c.lsc")], capsys, tmp_path,
             "[channels] gives role 'rx_dv' to two channels, 0 and 3")
