"""The instrument with its Ethernet link and behavioural RGMII cells, for Verilog simulation.

:class:`EthSimTop` is what ``gateware/tests/test_eth_cocotb.py`` exports to Verilog and runs in
Verilator under cocotb, with cocotbext-eth's RGMII models on the pins: the real core, link
multiplexer, :class:`~.link.EthLink`, :class:`~.inband.InbandStatus` (as on the board) and
:class:`~.rgmii.RgmiiSimPins`; the UART's byte streams are ports. Clock domains, all driven by the
testbench: ``sync`` (link, 48 MHz on the ECPIX-5), ``capture``, ``eth`` and ``eth90`` (125 MHz,
the latter 2 ns later), ``eth_rx`` (the PHY's receive clock).
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..top import LatscopeCore
from .inband import InbandStatus
from .link import EthLink, LinkMux
from .model import DEFAULT_NET
from .rgmii import RgmiiSimPins

__all__ = ["EthSimTop", "max_frame_for"]


def max_frame_for(core):
    """Longest stream frame ``core``'s framer emits: header, EventsHeader, payload, CRC."""
    return 6 + 12 + core.framer.max_payload + 4


class EthSimTop(wiring.Component):
    def __init__(self, *, net=DEFAULT_NET, idle_cycles=256, **core_params):
        params = dict(channels=8, lanes=2, counter_width=32, heartbeat_shift=14, fifo_depth=64,
                      capture_hz=160_000_000, board="ecpix5",
                      channel_names=("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4"),
                      max_payload=256)
        params.update(core_params)
        self.core = LatscopeCore(net=net, **params)
        self.link = EthLink(max_frame=max_frame_for(self.core), net=net, idle_cycles=idle_cycles,
                            link_bytes=self.core.link_bytes)
        super().__init__({
            "samples": In(len(self.core.samples)),
            "uart_tx": Out(stream.Signature(8)), "uart_rx": In(stream.Signature(8)),
            "eth_selected": Out(1),
            "txd": Out(4), "tx_ctl": Out(1), "tx_clk": Out(1),
            "rxd": In(4), "rx_ctl": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.link = link = self.link
        m.submodules.mux = mux = LinkMux(release_cycles=160, link_bytes=core.link_bytes)
        m.submodules.pins = pins = RgmiiSimPins()
        m.submodules.inband = inband = InbandStatus()
        m.d.comb += [inband.rise.eq(pins.rx_rise), inband.fall.eq(pins.rx_fall),
                     core.eth_status.eq(inband.status)]
        m.d.comb += core.samples.eq(self.samples)
        wiring.connect(m, core.tx, mux.core_tx)
        wiring.connect(m, mux.core_rx, core.rx)
        wiring.connect(m, mux.uart_tx, wiring.flipped(self.uart_tx))
        wiring.connect(m, wiring.flipped(self.uart_rx), mux.uart_rx)
        wiring.connect(m, mux.eth_tx, link.stream_in)
        wiring.connect(m, link.commands, mux.eth_rx)
        m.d.comb += [link.net.eq(core.net), link.net_write.eq(core.net_write),
                     core.net_busy.eq(link.net_busy), self.eth_selected.eq(mux.eth_selected)]
        m.d.comb += [pins.tx_rise.eq(link.tx_rise), pins.tx_fall.eq(link.tx_fall),
                     link.rx_rise.eq(pins.rx_rise), link.rx_fall.eq(pins.rx_fall),
                     self.txd.eq(pins.txd), self.tx_ctl.eq(pins.tx_ctl),
                     self.tx_clk.eq(pins.tx_clk), pins.rxd.eq(self.rxd),
                     pins.rx_ctl.eq(self.rx_ctl)]
        return m
