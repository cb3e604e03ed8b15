"""Pin attributes in the generated constraints: no pull on any pin the instrument only listens on
(channels, frame sniffer bus), the reset pin's pull-up, the self-test output's slew rate, the
status LEDs (read from the LPF/PCF and the RTLIL that Amaranth hands to the toolchain; no
place and route)."""

import functools
import re
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from latscope.gateware.boards import (
    BOARDS,
    ECP5_LISTEN_ATTRS,
    BoardTop,
    eth_link_leds,
    make_platform,
)
from latscope.gateware.eth.inband import EthLinkStatus
from latscope.gateware.verilator import YowaspEnv


@functools.cache
def _files(board, sniffer=None):
    platform = make_platform(board, sniffer=sniffer)
    with YowaspEnv():
        plan = platform.prepare(BoardTop(board, sniffer=sniffer), name="latscope")
    return plan.files


@pytest.fixture(scope="module", params=["ecpix5", "ecpix5-x1"])
def ecpix5(request):
    return _files(request.param)


#: The frame sniffers' pins as their LPF ports, from the pin roles of docs/boards.md (one port
#: per bit: RXD0-3 and TXD0-3 on MII, RXD0-1 and TXD0-1 on RMII).
SNIFFER_PORTS = {
    "mii": {"latscope_phy_rx_clk_0__io", "latscope_phy_rx_dv_0__io", "latscope_phy_rx_er_0__io",
            "latscope_phy_tx_clk_0__io", "latscope_phy_tx_en_0__io",
            *(f"latscope_phy_{d}_0__io[{k}]" for d in ("rxd", "txd") for k in range(4))},
    "rmii": {"latscope_phy_ref_clk_0__io", "latscope_phy_crs_dv_0__io",
             "latscope_phy_tx_en_0__io",
             *(f"latscope_phy_{d}_0__io[{k}]" for d in ("rxd", "txd") for k in range(2))},
}
CHANNEL_PORTS = {f"latscope_ch_0__io[{ch}]" for ch in range(8)}


@pytest.fixture(scope="module")
def icebreaker():
    return _files("icebreaker")


def _lpf_attrs(lpf, port):
    (line,) = [ln for ln in lpf.splitlines() if ln.startswith(f'IOBUF PORT "{port}"')]
    return dict(kv.split("=") for kv in line.rstrip(";").split()[3:])


def _listen_only_ports(lpf):
    """Every LPF port of a pin the instrument only listens on (channels, sniffer bus)."""
    ports = re.findall(r'^LOCATE COMP "([^"]+)"', lpf, re.M)
    return {p for p in ports if p.startswith(("latscope_ch_", "latscope_phy_"))}


@pytest.mark.parametrize("board,sniffer", [("ecpix5", None), ("ecpix5", "mii"),
                                           ("ecpix5", "rmii"), ("ecpix5-x1", None)])
def test_ecpix5_listen_only_pins_have_no_pull(board, sniffer):
    """Every channel and sniffer pin has PULLMODE=NONE written out: an ECP5 input without a
    PULLMODE pulls down, and a pull on a PHY's strap pin can change its configuration at reset.
    (Both ECPIX-5 builds take the sniffer pins' attributes from the same ``io_attrs`` as their
    channels, so the sniffers are generated on the default build only.)"""
    lpf = _files(board, sniffer)["latscope.lpf"]
    expected = CHANNEL_PORTS | (SNIFFER_PORTS[sniffer] if sniffer else set())
    assert _listen_only_ports(lpf) == expected
    for port in sorted(expected):
        assert _lpf_attrs(lpf, port) == {"IO_TYPE": "LVCMOS33", "PULLMODE": "NONE"}, port


def test_ecpix5_constraints(ecpix5):
    lpf = ecpix5["latscope.lpf"]
    assert _lpf_attrs(lpf, "rst_0__io")["PULLMODE"] == "UP"
    selftest = _lpf_attrs(lpf, "latscope_selftest_0__io")
    assert selftest["SLEWRATE"] == "FAST" and selftest["PULLMODE"] == "NONE"
    # Status LEDs: green of RGB LED 0 (lock) and 1 (armed), blue of 2 (link), red of 3 (overflow).
    # The Ethernet PHY's link state: blue (1000 Mb/s full duplex) and red (another link) of 0.
    for port, site in (("rgb_led_0__g__io", "R21"), ("rgb_led_1__g__io", "W21"),
                       ("rgb_led_2__b__io", "M21"), ("rgb_led_3__r__io", "P21"),
                       ("rgb_led_0__b__io", "T22"), ("rgb_led_0__r__io", "T23")):
        assert f'LOCATE COMP "{port}" SITE "{site}";' in lpf
    il = ecpix5["latscope.il"]
    il = il if isinstance(il, str) else il.decode()
    assert "eth_led_b" in il and "eth_led_r" in il


def _sb_io_params(il, port):
    """Parameters of the SB_IO cell whose PACKAGE_PIN is ``port`` (bit ``[k]`` allowed)."""
    cells = re.findall(r"cell \\SB_IO \S+\n(.*?)\n\s*end", il, re.S)
    for cell in cells:
        if re.search(r"connect \\PACKAGE_PIN .*" + re.escape(port), cell):
            return dict(re.findall(r"parameter \\(\w+) (\S+)", cell))
    raise AssertionError(f"no SB_IO on {port}")


def test_icebreaker_constraints(icebreaker):
    pcf, il = icebreaker["latscope.pcf"], icebreaker["latscope.il"]
    # No pull on the channels: no PULLUP parameter on their SB_IO (its default, 0, is off).
    for ch in range(8):
        params = _sb_io_params(il, f"latscope_ch_0__io [{ch}]")
        assert "PULLUP" not in params, ch
    for port, pin in (("led_g_0__io", 37), ("led_r_0__io", 11), ("led_g_1__io", 27),
                      ("led_g_2__io", 25)):
        assert f"set_io {port} {pin}" in pcf.splitlines()


def test_docs_state_the_pulls_the_gateware_sets():
    """docs/boards.md's pin table says what BOARDS sets on the listen-only pins."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "boards.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in doc.splitlines()
            if line.startswith(("| channel inputs", "| frame sniffer inputs"))}
    assert set(rows) == {"channel inputs (`rx_dv`, `tx_en`, `crs_dv`, `m0`–`m4`)",
                         "frame sniffer inputs (MII `RX_CLK`, `RX_DV`, `RX_ER`, `RXD0`–`RXD3`, "
                         "`TX_CLK`, `TX_EN`, `TXD0`–`TXD3`; RMII `REF_CLK`, `CRS_DV`, "
                         "`RXD0`–`RXD1`, `TX_EN`, `TXD0`–`TXD1`)"}
    for board in ("ecpix5", "ecpix5-x1"):
        assert BOARDS[board].io_attrs == ECP5_LISTEN_ATTRS == {"IO_TYPE": "LVCMOS33",
                                                               "PULLMODE": "NONE"}
    assert "PULLUP" not in BOARDS["icebreaker"].io_attrs
    for line in rows.values():
        assert "| no pull (`PULLMODE=NONE`" in line
    (channels,) = [line for key, line in rows.items() if key.startswith("channel")]
    assert "| no pull (`SB_IO` without `PULLUP`) |" in channels
    assert "PULLMODE=DOWN" not in doc


def test_ethernet_link_leds():
    """Every in-band status nibble: blue only for a link at 1000 Mb/s full duplex, red for any
    other link, neither without one (expected from the nibble's bits by hand: RXD[0] link,
    RXD[2:1] speed, RXD[3] duplex)."""
    status = Signal(EthLinkStatus)
    usable, unusable = eth_link_leds(status)
    got = {}

    async def bench(ctx):
        for nibble in range(16):
            ctx.set(status.as_value(), nibble)
            got[nibble] = (ctx.get(usable), ctx.get(unusable))

    sim = Simulator(Module())
    sim.add_testbench(bench)
    sim.run()
    assert got == {n: (int(n == 0b1101), int(n & 1 == 1 and n != 0b1101)) for n in range(16)}
