"""What the ECPIX-5's PHY needs from the FPGA, checked against the settings the build uses: the
transmit clock/data skew (from the PLL's phase settings) and the MODE strap pull-ups on RXD[3:0]
(from the pin constraints the build writes). Where the numbers come from: docs/ethernet.md."""

import re

import pytest
from amaranth.hdl import Module
from amaranth.lib import io, wiring
from amaranth_boards.ecpix5 import ECPIX585Platform

from latscope.gateware.eth import board as eth_board


def test_tx_clock_lags_data_by_two_ns():
    # 625 MHz VCO (1.6 ns): CPHASE one step past the zero-phase setting (1.6 ns) + FPHASE 2/8
    # (0.4 ns) = 2.0 ns, exactly (hand arithmetic; tolerance for float rounding only)
    assert eth_board.tx_clock_delay_ns() == pytest.approx(2.0, abs=1e-9)


def test_tx_clock_delay_is_inside_what_the_phy_needs():
    low, high = eth_board.PHY_TX_SKEW_NS
    delay = eth_board.tx_clock_delay_ns()
    # with 0.6 ns of margin each side for the board's trace mismatch and the DDR cells' skew
    assert low + 0.6 <= delay <= high - 0.6


class _PinProbe(wiring.Component):
    """Requests the link's RGMII resource and buffers every pin, so the build writes its
    constraints."""

    def __init__(self):
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        platform.add_resources([eth_board.rgmii_resource(platform)])
        port = platform.request(eth_board.RGMII_RESOURCE, 0, dir={name: "-" for name in _PINS})
        for name, direction in _PINS.items():
            m.submodules[name] = io.Buffer(direction, getattr(port, name))
        return m


_PINS = {"rst": "o", "mdio": "io", "mdc": "o", "tx_clk": "o", "tx_ctrl": "o", "tx_data": "o",
         "rx_clk": "i", "rx_ctrl": "i", "rx_data": "i"}


def test_rx_data_pins_pull_up_to_strap_rgmii_mode():
    plan = ECPIX585Platform().prepare(_PinProbe(), name="probe")
    lpf = plan.files["probe.lpf"]
    iobuf = dict(re.findall(r'IOBUF PORT "([^"]+)" (.*);', lpf))
    ports = [port for port in iobuf if "rgmii" in port]
    assert len(ports) == 15        # every RGMII pin: rst, mdio, mdc, 2 clocks, 2 ctl, 2 x 4 data
    for port in ports:
        assert "IO_TYPE=LVCMOS33" in iobuf[port]
        assert ("PULLMODE=UP" in iobuf[port]) == ("rx_data" in port), port
    assert sum("rx_data" in port for port in ports) == 4
