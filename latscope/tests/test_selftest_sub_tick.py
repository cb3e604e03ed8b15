"""``latscope selftest --calibrate --sub-tick`` end to end on the simulated instrument (the
delay-line bench, ``capture/sim/delay_bench.py``), and its bad options (one line, exit 2).

The cable delays are the test's inputs; the skews expected before alignment are their
differences from the median channel's (within one 25 ps tap, ``capture/tests/test_deskew.py``
derives the bound), and after alignment the report must state a skew below one tap."""

import json

import pytest

from latscope.capture.link import calibration
from latscope.cli import main

SKEW_PS = [100, 700, 1300, 3000, 0, 50, 400, 1249]


def run_cli(capsys, *argv):
    status = main(["selftest", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_sub_tick_calibration_end_to_end(tmp_path, capsys):
    out = tmp_path / "cal.json"
    status, text, err = run_cli(capsys, "--sim", "--calibrate", str(out), "--sub-tick",
                                "--sim-skew-ps", ",".join(map(str, SKEW_PS)), "--high", "101",
                                "--low", "99", "--edges", "40", "--json")
    assert status == 0, err
    result = json.loads(text)
    sub = result["sub_tick"]
    median = sorted(SKEW_PS)[(len(SKEW_PS) - 1) // 2]       # the lower median channel's delay
    for ch, before in zip(sub["channels"], sub["skew_before_ps"], strict=True):
        assert abs(before - (SKEW_PS[ch] - median)) <= 25
    assert sub["spread_after_ps"] < 25 and sub["steps_after"] == [1] * 8
    doc = json.loads(out.read_text())
    assert doc[calibration.INPUT_DELAY_KEY] == sub["taps"]
    assert doc[calibration.METADATA_KEY] == result["calibration"]["offsets_ticks"]

    status, text, err = run_cli(capsys, "--sim", "--calibrate", str(out), "--sub-tick",
                                "--sim-skew-ps", ",".join(map(str, SKEW_PS)), "--high", "101",
                                "--low", "99", "--edges", "40", "--force")
    assert status == 0, err
    assert "channel-to-channel skew: 3000 ps before, below 25 ps (one tap) after" in text
    assert "delay cells 25 ps per tap (gateware/model_delay.py)" in text


@pytest.mark.parametrize("argv, message", [
    (["--sim", "--calibrate", "c.json", "--sub-tick", "--sim-skew-ps", "1,2"],
     "--sim-skew-ps lists 2 delays for 8 channels"),
    (["--sim", "--calibrate", "c.json", "--sub-tick", "--channels", "0-1",
      "--sim-skew-ps", "1,x"], "--sim-skew-ps must be comma-separated delays in ps, not '1,x'"),
    (["--sim", "--calibrate", "c.json", "--sub-tick", "--channels", "0-1",
      "--sim-skew-ps", "1,100001"], "--sim-skew-ps delays must be 0..100000 ps"),
    (["--sim", "--calibrate", "c.json", "--sub-tick", "--sim-tap-ps", "70"],
     "--sim-tap-ps must be 5..60 ps, not 70.0"),
    (["--sim", "--calibrate", "c.json", "--sim-skew-ps", "1"],
     "--sim-skew-ps and --sim-tap-ps need --sim --calibrate --sub-tick"),
    (["--port", "/dev/null", "--calibrate", "c.json", "--sub-tick", "--sim-tap-ps", "20"],
     "--sim-skew-ps and --sim-tap-ps need --sim --calibrate --sub-tick"),
    (["--sim", "--calibrate", "c.json", "--sub-tick", "--sim-skew", "1"],
     "--sub-tick simulates the cable in ps: use --sim-skew-ps"),
    (["--sim", "--calibrate", "c.json", "--sub-tick", "--channels", "3"],
     "--sub-tick needs at least 2 channels, not [3]"),
    (["--sim", "--sub-tick"], "--sub-tick and --sim-skew-ps need --calibrate"),
])
def test_bad_options_one_line_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(capsys, *argv)
    assert status == 2 and out == ""
    assert err.startswith("latscope selftest: error: ") and message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "c.json").exists()
