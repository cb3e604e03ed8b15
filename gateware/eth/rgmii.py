"""RGMII at 1000 Mb/s: the byte-wide MAC side to the 4-bit double-data-rate pins and back.

# Ref: RGMII v2.0 (HP, 2002): TXD[3:0]/RXD[3:0] on the rising clock edge, TXD[7:4]/RXD[7:4] on
# the falling edge; TX_CTL/RX_CTL carry EN on the rising edge and EN xor ER on the falling edge.

Pins are driven through ``amaranth.lib.io.DDRBuffer`` on the board (:class:`RgmiiPins`). Lane 0 of a
DDR buffer is the rising-edge half (earlier in time), lane 1 the falling-edge half: the low and
high nibble of one byte. Clock/data skew: the transmit clock leaves the FPGA 90 degrees (2 ns)
after the data, from a second PLL output, so the PHY samples in the middle of each half (the
ECPIX-5 PHY's transmit delay is not used; see docs/ethernet.md). The PHY delays its receive clock
itself, so received data is sampled directly on ``rx_clk`` edges.

:class:`RgmiiSimPins` is a behavioural stand-in for the DDR cells (their vendor models cannot be
simulated through Amaranth's ``SimulationPort``): registers and a clock-selected multiplexer, the
structure of an ``ODDRX1F``/``IDDRX1F``, exported to Verilog for the cocotb tests.
"""

from amaranth.hdl import Cat, ClockDomain, ClockSignal, Module, Mux, Signal
from amaranth.lib import io, stream, wiring
from amaranth.lib.wiring import In, Out

from .mac import RxByte

__all__ = ["TX_LANE_BITS", "tx_lanes", "RgmiiRxFront", "RgmiiPins", "RgmiiSimPins"]

#: Bits per DDR lane: four data bits and the control bit.
TX_LANE_BITS = 5


def tx_lanes(m, tx):
    """The two DDR lanes ``(rising, falling)`` for a :data:`~.mac.TxByte` (no TX_ER)."""
    rise, fall = Signal(TX_LANE_BITS), Signal(TX_LANE_BITS)
    m.d.comb += [rise.eq(Cat(tx.data[:4], tx.en)), fall.eq(Cat(tx.data[4:], tx.en))]
    return rise, fall


class RgmiiRxFront(wiring.Component):
    """Received DDR lanes to frame bytes (preamble and SFD removed), in the receive clock domain
    ``sync`` (rename it). A frame's bytes follow the SFD while RX_DV is high; the last byte before
    RX_DV falls carries ``last``. Bytes with RX_ER are passed on (the FCS check rejects them)."""

    def __init__(self):
        super().__init__({
            "rise": In(TX_LANE_BITS), "fall": In(TX_LANE_BITS),
            "bytes": Out(stream.Signature(RxByte)),     # no backpressure: ready is ignored
        })

    def elaborate(self, platform):
        m = Module()
        byte = Signal(8)
        dv = Signal()
        m.d.sync += [byte.eq(Cat(self.rise[:4], self.fall[:4])), dv.eq(self.rise[4])]
        held = Signal(8)
        have = Signal()
        in_frame = Signal()
        out = self.bytes
        m.d.sync += out.valid.eq(0)
        with m.If(~in_frame):
            m.d.sync += have.eq(0)
            with m.If(dv & (byte == 0xD5)):
                m.d.sync += in_frame.eq(1)
        with m.Elif(dv):
            m.d.sync += [held.eq(byte), have.eq(1)]
            with m.If(have):
                m.d.sync += [out.valid.eq(1), out.payload.data.eq(held), out.payload.last.eq(0)]
        with m.Else():
            m.d.sync += [in_frame.eq(0), have.eq(0)]
            with m.If(have):
                m.d.sync += [out.valid.eq(1), out.payload.data.eq(held), out.payload.last.eq(1)]
        return m


class RgmiiPins(wiring.Component):
    """The board's RGMII pins through DDR buffers.

    Domains: ``eth`` (125 MHz, transmit data), ``eth90`` (the same clock 90 degrees later, for
    TXC), ``eth_rx`` (the PHY's receive clock, which the caller makes from ``port.rx_clk``).
    """

    def __init__(self, port):
        self.port = port
        super().__init__({
            "tx_rise": In(TX_LANE_BITS), "tx_fall": In(TX_LANE_BITS),
            "rx_rise": Out(TX_LANE_BITS), "rx_fall": Out(TX_LANE_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        port = self.port
        m.submodules.tx_ddr = tx = io.DDRBuffer("o", port.tx_data + port.tx_ctrl,
                                                o_domain="eth")
        m.d.comb += [tx.o[0].eq(self.tx_rise), tx.o[1].eq(self.tx_fall)]
        m.submodules.txc_ddr = txc = io.DDRBuffer("o", port.tx_clk, o_domain="eth90")
        m.d.comb += [txc.o[0].eq(1), txc.o[1].eq(0)]
        m.submodules.rx_ddr = rx = io.DDRBuffer("i", port.rx_data + port.rx_ctrl,
                                                i_domain="eth_rx")
        m.d.comb += [self.rx_rise.eq(rx.i[0]), self.rx_fall.eq(rx.i[1])]
        return m


class RgmiiSimPins(wiring.Component):
    """Behavioural DDR cells for simulation: plain signals instead of pins.

    ``txd``/``tx_ctl`` change with ``eth`` edges (the rising half after the rising edge);
    ``tx_clk`` is ``eth90``'s clock, so a receiver sampling on ``tx_clk`` edges sees each half
    in its middle. ``rxd``/``rx_ctl`` are sampled on both edges of ``eth_rx``.
    """

    def __init__(self):
        super().__init__({
            "tx_rise": In(TX_LANE_BITS), "tx_fall": In(TX_LANE_BITS),
            "rx_rise": Out(TX_LANE_BITS), "rx_fall": Out(TX_LANE_BITS),
            "txd": Out(4), "tx_ctl": Out(1), "tx_clk": Out(1),
            "rxd": In(4), "rx_ctl": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        rise_q, fall_q = Signal(TX_LANE_BITS), Signal(TX_LANE_BITS)
        m.d.eth += [rise_q.eq(self.tx_rise), fall_q.eq(self.tx_fall)]
        out = Mux(ClockSignal("eth"), rise_q, fall_q)
        m.d.comb += [Cat(self.txd, self.tx_ctl).eq(out), self.tx_clk.eq(ClockSignal("eth90"))]
        m.domains.eth_rx_neg = ClockDomain("eth_rx_neg", clk_edge="neg", local=True,
                                            reset_less=True)
        m.d.comb += ClockSignal("eth_rx_neg").eq(ClockSignal("eth_rx"))
        at_rise, at_fall = Signal(TX_LANE_BITS), Signal(TX_LANE_BITS)
        m.d.eth_rx += at_rise.eq(Cat(self.rxd, self.rx_ctl))
        m.d.eth_rx_neg += at_fall.eq(Cat(self.rxd, self.rx_ctl))
        # pair each rising-edge half with the falling-edge half after it
        m.d.eth_rx += [self.rx_rise.eq(at_rise), self.rx_fall.eq(at_fall)]
        return m
