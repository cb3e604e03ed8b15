"""The Ethernet link on a board (the ECPIX-5): clocks, PHY reset, RGMII pins and the link itself.

:func:`add_ethernet` is called by :class:`~latscope.gateware.boards.BoardTop` for boards with
``ethernet=True``. It adds

* a second ECP5 PLL from the 100 MHz oscillator: ``eth`` at 125 MHz (transmit logic) and
  ``eth90``, the same frequency 2 ns (90 degrees) later, which clocks only the TXC output cell;
* ``eth_rx``, the PHY's receive clock from its ``rx_clk`` pin (125 MHz at 1000 Mb/s);
* the PHY's reset, held for 2**20 link cycles (21.8 ms at 48 MHz; PHYs want >= 10 ms) after the
  FPGA's own reset, with the FPGA's pull-ups on RXD[3:0], the PHY's MODE straps (RGMII,
  advertise every speed; ECP5 inputs otherwise pull down); MDIO is left idle (MDC low, MDIO
  released): the PHY's strap and register defaults are used (docs/ethernet.md says why that
  gives the skew the link needs);
* :class:`~.link.EthLink` on the pins and :class:`~.link.LinkMux` between the core, the UART and
  the link;
* :class:`~.inband.InbandStatus` on the receive lanes: the PHY's link, speed and duplex (RGMII
  in-band status) into the core's ``eth_status``, reported in heartbeats and STATUS.

Clock-domain crossings it adds (all through the project's FIFO and synchroniser primitives):
``sync -> eth`` (stream bytes, ``CaptureFIFO``; SET_NET registers, ``ConfigCrossing``),
``eth_rx -> eth`` (received bytes, ``CaptureFIFO``), ``eth -> sync`` (command bytes,
``CaptureFIFO``), ``eth_rx -> sync`` (in-band status, ``ConfigCrossing``).
"""

from amaranth.build import Attrs, Resource, Subsignal
from amaranth.hdl import ClockDomain, ClockSignal, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer

from ..linkword import link_bytes_of
from ..pll import EhxplllPlan, ehxplll
from .inband import InbandStatus
from .link import EthLink, LinkMux
from .rgmii import RgmiiPins

__all__ = ["ETH_PLL", "PHY_TX_SKEW_NS", "RGMII_RESOURCE", "add_ethernet", "rgmii_resource",
           "tx_clock_delay_ns"]

#: Name of the board's RGMII resource as the link requests it (see :func:`rgmii_resource`).
RGMII_RESOURCE = "latscope_eth_rgmii"

#: EHXPLLL for the link: 100 MHz / CLKI_DIV 4 = 25 MHz PFD; CLKOP feedback x5 -> 125 MHz;
#: VCO = 125 MHz * CLKOP_DIV 5 = 625 MHz (400..800 allowed). CLKOS = 625 / 5 = 125 MHz, delayed
#: by CPHASE + FPHASE/8 VCO periods beyond the zero-phase setting (DIV - 1): 1.25 * 1.6 ns = 2 ns.
ETH_PLL = dict(CLKI_DIV=4, CLKFB_DIV=5, CLKOP_DIV=5, CLKOS_DIV=5, CLKOS_CPHASE=5,
               CLKOS_FPHASE=2)

#: Where the transmit clock edge must fall after the data changes at the PHY, ns: RGMII v2.0's
#: TskewR (1.0-2.6 ns) for a PHY without a transmit internal delay. The ECPIX-5's PHY adds none
#: at its defaults (KSZ9031RNX: 1.2 ns on receive, 0 ns on transmit; docs/ethernet.md).
PHY_TX_SKEW_NS = (1.0, 2.6)


def tx_clock_delay_ns(pll=ETH_PLL, input_hz=100e6):
    """How much later than the data clock ``eth`` the TXC clock ``eth90`` is, ns, from the PLL's
    settings: CPHASE + FPHASE/8 VCO periods beyond CLKOS's zero-phase setting (DIV - 1)."""
    vco_hz = input_hz / pll["CLKI_DIV"] * pll["CLKFB_DIV"] * pll["CLKOP_DIV"]
    steps = pll["CLKOS_CPHASE"] - (pll["CLKOS_DIV"] - 1) + pll["CLKOS_FPHASE"] / 8
    return steps / vco_hz * 1e9


def _eth_pll(m, clk_in, arst):
    eth, eth90, locked = Signal(), Signal(), Signal()
    m.submodules.eth_pll = ehxplll(EhxplllPlan(100e6, ETH_PLL), clki=clk_in, clkop=eth,
                                   clkos=eth90, locked=locked)
    m.domains.eth = ClockDomain("eth")
    m.domains.eth90 = ClockDomain("eth90")
    m.d.comb += [ClockSignal("eth").eq(eth), ClockSignal("eth90").eq(eth90)]
    m.submodules.rst_eth = ResetSynchronizer(~locked | arst, domain="eth")
    m.submodules.rst_eth90 = ResetSynchronizer(~locked | arst, domain="eth90")
    return locked


def rgmii_resource(platform):
    """The board's ``eth_rgmii`` resource under :data:`RGMII_RESOURCE`, with the FPGA's pull-ups
    on RXD[3:0].

    The PHY latches its mode from RXD[3:0] when its reset is released (KSZ9031RNX MODE[3:0]:
    1111 = RGMII, advertise 10/100/1000 half and full duplex); the ECP5's inputs pull down unless
    told otherwise, which would strap another mode. LiteX's ECPIX-5 platform pulls them up for
    the same reason (docs/ethernet.md)."""
    board = platform.lookup("eth_rgmii", 0)
    subsignals = []
    for sub in board.ios:
        attrs = dict(sub.attrs)
        if sub.name == "rx_data":
            attrs["PULLMODE"] = "UP"
        subsignals.append(Subsignal(sub.name, *sub.ios, Attrs(**attrs)))
    return Resource(RGMII_RESOURCE, 0, *subsignals, Attrs(**dict(board.attrs)))


def add_ethernet(m, platform, board, core, *, clk_in, arst, max_frame):
    """Add the link to ``m`` (``arst``: the board's reset, PLL lock included); return the UART-side
    streams ``(uart_tx, uart_rx)`` of the link
    multiplexer (connect the UART's ``tx_data`` and ``rx_data`` to them)."""
    locked = _eth_pll(m, clk_in, arst)
    if RGMII_RESOURCE not in {name for name, _ in platform.resources}:
        platform.add_resources([rgmii_resource(platform)])
    port = platform.request(RGMII_RESOURCE, 0, dir={name: "-" for name in (
        "rst", "mdio", "mdc", "tx_clk", "tx_ctrl", "tx_data", "rx_clk", "rx_ctrl", "rx_data")})
    m.submodules.eth_rx_clk_buf = rx_clk = io.Buffer("i", port.rx_clk)
    m.domains.eth_rx = ClockDomain("eth_rx")
    m.d.comb += ClockSignal("eth_rx").eq(rx_clk.i)
    # on the pin: the buffer's output net does not survive synthesis under its own name
    platform.add_clock_constraint(port.rx_clk.io, 125e6)
    # The receive FIFO's two sides leave reset together with the eth domain (gateware/fifo.py)
    m.submodules.rst_eth_rx = ResetSynchronizer(~locked | arst, domain="eth_rx")

    # PHY reset (active low on the pin; the buffer inverts PinsN): held after our own reset
    m.submodules.phy_rst_buf = phy_rst = io.Buffer("o", port.rst)
    m.submodules.mdc_buf = mdc = io.Buffer("o", port.mdc)
    m.submodules.mdio_buf = mdio = io.Buffer("io", port.mdio)
    hold = Signal(21)
    with m.If(~hold[20]):
        m.d.sync += hold.eq(hold + 1)
    m.d.comb += [phy_rst.o.eq(~hold[20]), mdc.o.eq(0), mdio.oe.eq(0), mdio.o.eq(0)]

    m.submodules.rgmii = pins = RgmiiPins(port)
    link_bytes = link_bytes_of(core.tx.signature)
    m.submodules.eth_link = link = EthLink(max_frame=max_frame, link_bytes=link_bytes)
    release = max(64, 30 * board.uart_divisor)         # three UART byte times
    m.submodules.link_mux = mux = LinkMux(release_cycles=release, link_bytes=link_bytes)
    m.d.comb += [pins.tx_rise.eq(link.tx_rise), pins.tx_fall.eq(link.tx_fall),
                 link.rx_rise.eq(pins.rx_rise), link.rx_fall.eq(pins.rx_fall),
                 link.net.eq(core.net), link.net_write.eq(core.net_write),
                 core.net_busy.eq(link.net_busy)]
    wiring.connect(m, core.tx, mux.core_tx)
    wiring.connect(m, mux.core_rx, core.rx)
    wiring.connect(m, mux.eth_tx, link.stream_in)
    wiring.connect(m, link.commands, mux.eth_rx)
    m.submodules.eth_inband = inband = InbandStatus()
    m.d.comb += [inband.rise.eq(pins.rx_rise), inband.fall.eq(pins.rx_fall),
                 core.eth_status.eq(inband.status)]
    return mux.uart_tx, mux.uart_rx
