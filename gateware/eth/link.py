"""The Ethernet link as one component, and the multiplexer that shares the core with the UART.

:class:`EthLink` joins the core's byte streams (``sync``, the link clock) to the RGMII lanes:
stream bytes cross into the 125 MHz ``eth`` domain in an asynchronous FIFO, the
:class:`~.mac.UdpStreamer` sends them as datagrams; received frames cross from the PHY's ``eth_rx``
clock into ``eth`` in another, the :class:`~.mac.EthReceiver` answers ARP and passes command
datagrams back to ``sync`` in a third (all three the project's
:class:`~latscope.gateware.fifo.CaptureFIFO`: the stock ``AsyncFIFO``'s read side, Gray to
binary and a level compare in series with the read address, missed 125 MHz). The
instrument's addresses (SET_NET) cross from ``sync`` with a
:class:`~latscope.gateware.control.ConfigCrossing`. These four, and the PHY's in-band status
(``eth_rx`` to ``sync``, :mod:`.inband`), are the only crossings of the Ethernet domains.

:class:`LinkMux` lets the UART and Ethernet both reach the command handler: a command is taken
whole from one link, and the stream (events, heartbeats, replies) goes to the link that sent the
last command, switching only between stream frames.
"""

from amaranth.hdl import DomainRenamer, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..checks import rejected
from ..control import ConfigCrossing
from ..fifo import CaptureFIFO
from ..linkword import LinkWord, WordToBytes, check_link_bytes
from .mac import EthReceiver, RxByte, UdpStreamer, frame_tracker
from .model import DEFAULT_NET
from .net import NetLayout, net_init
from .rgmii import TX_LANE_BITS, RgmiiRxFront, tx_lanes

__all__ = ["EthLink", "LinkMux"]


class EthLink(wiring.Component):
    """Stream bytes to UDP datagrams on RGMII lanes; received commands back.

    Parameters
    ----------
    max_frame : int
        Longest stream frame the framer emits, bytes.
    net : NetConfig
        Addresses after reset.
    idle_cycles : int
        ``eth`` cycles of stream silence that send a partly filled datagram.
    link_bytes : int
        The core's link path: 1 (bytes) or 2 (words of :mod:`~latscope.gateware.linkword`,
        which cross whole and are cut into bytes again on the ``eth`` side).

    Attributes
    ----------
    stream_in : In(stream.Signature(8))      (``sync``; words, :class:`LinkWord`, with
                                             ``link_bytes=2``: the core's two-byte path)
    commands : Out(stream.Signature(8))      (``sync``)
    net, net_write, net_busy                 (``sync``) as ConfigCrossing's i_config, i_write, busy
    tx_rise, tx_fall : Out(5)                (``eth``) DDR lanes: data nibble and TX_CTL
    rx_rise, rx_fall : In(5)                 (``eth_rx``)
    """

    def __init__(self, *, max_frame, net=DEFAULT_NET, idle_cycles=1024, link_bytes=1):
        with rejected(self):
            self.streamer = UdpStreamer(max_frame=max_frame, idle_cycles=idle_cycles)
            check_link_bytes(link_bytes)
        self.receiver = EthReceiver()
        self.init = net_init(net)
        self.link_bytes = link_bytes
        super().__init__({
            "stream_in": In(stream.Signature(8 if link_bytes == 1 else LinkWord)),
            "commands": Out(stream.Signature(8)),
            "net": In(NetLayout, init=self.init),
            "net_write": In(1),
            "net_busy": Out(1),
            "tx_rise": Out(TX_LANE_BITS), "tx_fall": Out(TX_LANE_BITS),
            "rx_rise": In(TX_LANE_BITS), "rx_fall": In(TX_LANE_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.streamer = streamer = self.streamer
        m.submodules.receiver = receiver = self.receiver

        width = 8 if self.link_bytes == 1 else LinkWord.as_shape().size
        m.submodules.tx_fifo = txq = CaptureFIFO(width=width, depth=64, w_domain="sync",
                                                 r_domain="eth")
        m.d.comb += [txq.w_stream.valid.eq(self.stream_in.valid),
                     txq.w_stream.payload.eq(self.stream_in.payload),
                     self.stream_in.ready.eq(txq.w_stream.ready)]
        if self.link_bytes == 1:
            wiring.connect(m, txq.r_stream, streamer.stream_in)
        else:
            # words cross at up to one per 48 MHz cycle; the streamer takes their bytes one per
            # 125 MHz cycle, more than the two bytes of each word need
            m.submodules.tx_bytes = split = DomainRenamer({"sync": "eth"})(WordToBytes())
            m.d.comb += [split.i.valid.eq(txq.r_stream.valid),
                         split.i.payload.eq(txq.r_stream.payload),
                         txq.r_stream.ready.eq(split.i.ready)]
            wiring.connect(m, split.o, streamer.stream_in)

        m.submodules.net_crossing = cross = ConfigCrossing(NetLayout, init=self.init,
                                                           o_domain="eth")
        m.d.comb += [cross.i_config.eq(self.net), cross.i_write.eq(self.net_write),
                     self.net_busy.eq(cross.busy),
                     streamer.net.eq(cross.o_config), receiver.net.eq(cross.o_config)]

        m.submodules.rx_front = front = DomainRenamer({"sync": "eth_rx"})(RgmiiRxFront())
        m.d.comb += [front.rise.eq(self.rx_rise), front.fall.eq(self.rx_fall)]
        rx_width = RxByte.size
        m.submodules.rx_fifo = rxq = CaptureFIFO(width=rx_width, depth=16, w_domain="eth_rx",
                                                 r_domain="eth")
        # No backpressure on a wire: a byte finding the FIFO full is lost, and the frame with it
        # fails its FCS. Both clocks are 125 MHz +-100 ppm and frames have >= 20 idle bytes
        # between them, so the FIFO never holds more than a few bytes.
        m.d.comb += [rxq.w_en.eq(front.bytes.valid), rxq.w_data.eq(front.bytes.payload),
                     rxq.r_en.eq(1)]
        # A register between the FIFO's read side (pointer compare, increment, RAM read) and the
        # receiver: the receiver never holds back, so no skid buffer is needed.
        m.d.eth += [receiver.rx.valid.eq(rxq.r_rdy), receiver.rx.payload.eq(rxq.r_data)]

        m.d.comb += [streamer.arp.eq(receiver.arp), receiver.arp_done.eq(streamer.arp_done),
                     streamer.dest.eq(receiver.dest)]

        m.submodules.cmd_fifo = cmdq = CaptureFIFO(width=8, depth=64, w_domain="eth",
                                                   r_domain="sync")
        wiring.connect(m, receiver.commands, cmdq.w_stream)
        wiring.connect(m, cmdq.r_stream, wiring.flipped(self.commands))

        rise, fall = tx_lanes(m, streamer.tx)
        m.d.comb += [self.tx_rise.eq(rise), self.tx_fall.eq(fall)]
        return m


class LinkMux(wiring.Component):
    """Shares the core's command input and stream output between the UART and Ethernet (``sync``).

    Parameters
    ----------
    release_cycles : int
        Cycles without a byte from the link that is sending a command after which the other
        link may send one (a command's bytes come back to back from either link).
    link_bytes : int
        The core's link path: 1 (bytes) or 2 (words: ``core_tx`` and ``eth_tx`` carry
        :class:`~latscope.gateware.linkword.LinkWord`, the UART gets their bytes one at a time).
    """

    def __init__(self, *, release_cycles=1024, link_bytes=1):
        with rejected(self):
            if not isinstance(release_cycles, int) or release_cycles < 1:
                raise TypeError(f"Release cycles must be a positive integer, "
                                f"not {release_cycles!r}")
            check_link_bytes(link_bytes)
        self.release_cycles, self.link_bytes = release_cycles, link_bytes
        words = stream.Signature(8 if link_bytes == 1 else LinkWord)
        super().__init__({
            "core_tx": In(words), "core_rx": Out(stream.Signature(8)),
            "uart_tx": Out(stream.Signature(8)), "uart_rx": In(stream.Signature(8)),
            "eth_tx": Out(words), "eth_rx": In(stream.Signature(8)),
            "eth_selected": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lock = Signal(2)            # 0 none, 1 UART, 2 Ethernet
        quiet = Signal(range(self.release_cycles + 1))
        want_eth = Signal()
        rx = self.core_rx
        with m.If(lock == 0):
            with m.If(self.eth_rx.valid):
                m.d.sync += [lock.eq(2), want_eth.eq(1), quiet.eq(0)]
            with m.Elif(self.uart_rx.valid):
                m.d.sync += [lock.eq(1), want_eth.eq(0), quiet.eq(0)]
        with m.Else():
            src_valid = Mux(lock == 2, self.eth_rx.valid, self.uart_rx.valid)
            with m.If(src_valid):
                m.d.sync += quiet.eq(0)
            with m.Elif(quiet == self.release_cycles):
                m.d.sync += lock.eq(0)
            with m.Else():
                m.d.sync += quiet.eq(quiet + 1)
        with m.If(lock == 2):
            m.d.comb += [rx.valid.eq(self.eth_rx.valid), rx.payload.eq(self.eth_rx.payload),
                         self.eth_rx.ready.eq(rx.ready)]
        with m.If(lock == 1):
            m.d.comb += [rx.valid.eq(self.uart_rx.valid), rx.payload.eq(self.uart_rx.payload),
                         self.uart_rx.ready.eq(rx.ready)]

        tx = self.core_tx
        accept = Signal()
        if self.link_bytes == 1:
            at_boundary, _ = frame_tracker(m, "sync", tx.payload, accept)
            uart = self.uart_tx
        else:
            # the UART takes the words' bytes one at a time
            at_boundary, _ = frame_tracker(m, "sync", tx.payload.data, accept,
                                           two=tx.payload.two)
            m.submodules.uart_bytes = split = WordToBytes()
            wiring.connect(m, split.o, wiring.flipped(self.uart_tx))
            uart = split.i
        out_sel = Signal()
        route = Signal()
        m.d.comb += route.eq(Mux(at_boundary, want_eth, out_sel))
        m.d.sync += out_sel.eq(route)
        m.d.comb += [uart.payload.eq(tx.payload), self.eth_tx.payload.eq(tx.payload),
                     uart.valid.eq(tx.valid & ~route),
                     self.eth_tx.valid.eq(tx.valid & route),
                     tx.ready.eq(Mux(route, self.eth_tx.ready, uart.ready)),
                     accept.eq(tx.valid & tx.ready), self.eth_selected.eq(out_sel)]
        return m
