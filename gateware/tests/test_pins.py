"""Pin attributes in the generated constraints: pulls on the channels, the reset pin's pull-up,
the self-test output's slew rate, the status LEDs (read from the LPF/PCF and the RTLIL that
Amaranth hands to the toolchain)."""

import re

import pytest

from latscope.gateware.boards import BoardTop, make_platform
from latscope.gateware.verilator import _Env


def _files(board):
    platform = make_platform(board)
    with _Env():
        plan = platform.prepare(BoardTop(board), name="latscope")
    return plan.files


@pytest.fixture(scope="module", params=["ecpix5", "ecpix5-x1"])
def ecpix5(request):
    return _files(request.param)


@pytest.fixture(scope="module")
def icebreaker():
    return _files("icebreaker")


def _lpf_attrs(lpf, port):
    (line,) = [ln for ln in lpf.splitlines() if ln.startswith(f'IOBUF PORT "{port}"')]
    return dict(kv.split("=") for kv in line.rstrip(";").split()[3:])


def test_ecpix5_constraints(ecpix5):
    lpf = ecpix5["latscope.lpf"]
    for ch in range(8):
        assert _lpf_attrs(lpf, f"latscope_ch_0__io[{ch}]")["PULLMODE"] == "DOWN"
    assert _lpf_attrs(lpf, "rst_0__io")["PULLMODE"] == "UP"
    selftest = _lpf_attrs(lpf, "latscope_selftest_0__io")
    assert selftest["SLEWRATE"] == "FAST" and selftest["PULLMODE"] == "NONE"
    # Status LEDs: green of RGB LED 0 (lock) and 1 (armed), blue of 2 (link), red of 3 (overflow).
    for port, site in (("rgb_led_0__g__io", "R21"), ("rgb_led_1__g__io", "W21"),
                       ("rgb_led_2__b__io", "M21"), ("rgb_led_3__r__io", "P21")):
        assert f'LOCATE COMP "{port}" SITE "{site}";' in lpf


def _sb_io_params(il, port):
    """Parameters of the SB_IO cell whose PACKAGE_PIN is ``port`` (bit ``[k]`` allowed)."""
    cells = re.findall(r"cell \\SB_IO \S+\n(.*?)\n\s*end", il, re.S)
    for cell in cells:
        if re.search(r"connect \\PACKAGE_PIN .*" + re.escape(port), cell):
            return dict(re.findall(r"parameter \\(\w+) (\S+)", cell))
    raise AssertionError(f"no SB_IO on {port}")


def test_icebreaker_constraints(icebreaker):
    pcf, il = icebreaker["latscope.pcf"], icebreaker["latscope.il"]
    # The iCE40 has pull-ups only: each channel's SB_IO enables it (PULLUP = 1).
    for ch in range(8):
        params = _sb_io_params(il, f"latscope_ch_0__io [{ch}]")
        assert int(params["PULLUP"].split("'")[-1], 2) == 1, ch
    for port, pin in (("led_g_0__io", 37), ("led_r_0__io", 11), ("led_g_1__io", 27),
                      ("led_g_2__io", 25)):
        assert f"set_io {port} {pin}" in pcf.splitlines()
