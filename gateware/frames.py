"""Frame-aware capture: both directions' sniffers, their clock-domain crossings and the classifier.

:class:`FrameCapture` puts a :class:`~latscope.gateware.sniffer.FrameSniffer` in each PHY clock
domain (``phy_rx``: the DUT's ``RX_CLK`` or RMII ``REF_CLK``; ``phy_tx``: ``TX_CLK`` or
``REF_CLK``; on a board, each as :mod:`~latscope.gateware.bus_sampler` regenerates it), carries
each sniffer's entries into the link domain (``sync``) through a
:class:`~latscope.gateware.fifo.CaptureFIFO`, and classifies, counts and records them there with a
:class:`~latscope.gateware.classify.FrameClassifier`. A FIFO never fills: the link side takes an
entry every cycle, and entries come at most once per minimum frame time (672 ns at 100 Mb/s). The
sequence-number offset, a 16-bit configuration register of the link domain that changes only on a
command, reaches each sniffer through a :class:`~latscope.gateware.control.ConfigCrossing`
(request/acknowledge handshake): a sniffer only ever sees a value the link side held, never a mix
of an old and a new one.
"""

from amaranth.hdl import DomainRenamer, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .classify import ConfigWrite, FrameClassifier
from .control import ConfigCrossing
from .fifo import CaptureFIFO
from .framer import RecordByte
from .sniffer import FrameSniffer, frame_entry_layout

__all__ = ["FrameCapture", "phy_pins_layout"]


def phy_pins_layout(interface):
    """One direction's pins: ``dv`` (RX_DV / CRS_DV / TX_EN), ``er`` (RX_ER or 0), ``data``."""
    return data.StructLayout({"dv": 1, "er": 1, "data": 4 if interface == "mii" else 2})


class FrameCapture(wiring.Component):
    """Both directions of frame-aware capture.

    Parameters
    ----------
    interface : str
        ``"mii"`` or ``"rmii"``.
    rules, classes, header_bytes, queue_depth : int
        As for :class:`~latscope.gateware.classify.FrameClassifier`.
    fifo_depth : int
        Entries of each crossing FIFO.

    Attributes
    ----------
    phy_rx, phy_tx : In(phy_pins_layout(interface))
        Pins, in domains ``phy_rx`` and ``phy_tx``.
    config, clear, records
        As for the classifier (link domain).
    """

    def __init__(self, *, interface="mii", rules=4, classes=4, header_bytes=0, queue_depth=16,
                 fifo_depth=8):
        self.rx_sniffer = FrameSniffer(interface=interface, header_bytes=header_bytes)
        self.tx_sniffer = FrameSniffer(interface=interface, header_bytes=header_bytes)
        self.classifier = FrameClassifier(rules=rules, classes=classes, header_bytes=header_bytes,
                                          queue_depth=queue_depth)
        self.interface, self.rules, self.fifo_depth = interface, rules, fifo_depth
        self.header_bytes = header_bytes
        self.pins = phy_pins_layout(interface)
        super().__init__({
            "phy_rx": In(self.pins), "phy_tx": In(self.pins),
            "config": In(stream.Signature(ConfigWrite)),
            "clear": In(1),
            "records": Out(stream.Signature(RecordByte)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.classifier = cls = self.classifier
        width = frame_entry_layout(self.header_bytes).size
        for name, sniffer, pins, port in [("rx", self.rx_sniffer, self.phy_rx, cls.rx),
                                          ("tx", self.tx_sniffer, self.phy_tx, cls.tx)]:
            domain = f"phy_{name}"
            m.submodules[f"{name}_sniffer"] = sn = DomainRenamer({"sync": domain})(sniffer)
            m.submodules[f"{name}_fifo"] = q = CaptureFIFO(width=width, depth=self.fifo_depth,
                                                           r_domain="sync", w_domain=domain)
            # A multi-bit value crosses whole, through a handshake; ``sent`` holds the value in
            # flight (the crossing's input must not change while it is busy), and a change made
            # meanwhile follows once it is done.
            m.submodules[f"{name}_seq_cross"] = cross = ConfigCrossing(
                16, init=cls.seq_offset.init, o_domain=domain)
            sent = Signal(16, init=cls.seq_offset.init, name=f"{name}_seq_sent")
            send = (cls.seq_offset != sent) & ~cross.busy
            m.d.comb += [cross.i_config.eq(sent), cross.i_write.eq(send),
                         sn.seq_offset.eq(cross.o_config)]
            with m.If(send):
                m.d.sync += sent.eq(cls.seq_offset)
            m.d.comb += [sn.dv.eq(pins.dv), sn.er.eq(pins.er), sn.data.eq(pins.data),
                         q.w_en.eq(sn.frames.valid), q.w_data.eq(sn.frames.payload)]
            wiring.connect(m, q.r_stream, port)
        wiring.connect(m, wiring.flipped(self.config), cls.config)
        wiring.connect(m, cls.records, wiring.flipped(self.records))
        m.d.comb += cls.clear.eq(self.clear)
        return m
