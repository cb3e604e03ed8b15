"""The Gigabit PHY's link state from RGMII in-band status: link, speed and duplex, for STATUS.

# Ref: RGMII v2.0 (HP, 2002) section 3.4.1: while RX_CTL is low on both edges (no frame, no
# error, no carrier event) the PHY puts its status on RXD[3:0]: RXD[0] link up, RXD[2:1] the
# receive clock's speed (00 = 2.5 MHz / 10 Mb/s, 01 = 25 MHz / 100 Mb/s, 10 = 125 MHz /
# 1000 Mb/s, 11 reserved), RXD[3] full duplex. The ECPIX-5's PHY (a KSZ9031RNX, docs/ethernet.md)
# sends it always (its data sheet, "RGMII in-band status": enabled after power-up).

The link only works at 1000 Mb/s (:mod:`.rgmii` takes a byte per receive clock), but the PHY
advertises 10/100/1000 (its MODE straps): plugged into a 100 Mb/s port it links and carries
nothing. :class:`InbandStatus` reads what the PHY says in the ``eth_rx`` domain and carries it
to the link domain (``sync``), where the core puts it into every heartbeat and STATUS reply
(``HeartbeatStatus.eth_*``, ``docs/stream-format.md``), so the host can refuse a link that is
not 1000 Mb/s full duplex with a message instead of waiting for datagrams that never come.

Crossing: the four bits cross together through a
:class:`~latscope.gateware.control.ConfigCrossing` (request/acknowledge handshake), restarted
as soon as the previous transfer is acknowledged, so a transfer also shows that the receive
clock runs. When none arrives for :data:`STALE_CYCLES` link cycles the receive clock has
stopped (no PHY, PHY in reset, or a link whose clock is not running) and ``status.link`` reads 0.
"""

from amaranth.hdl import DomainRenamer, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..checks import rejected
from ..control import ConfigCrossing
from .rgmii import TX_LANE_BITS

__all__ = ["EthLinkStatus", "SPEED_MBPS", "STALE_CYCLES", "InbandStatus", "inband_nibble"]


class EthLinkStatus(data.Struct):
    """The PHY's link state, in the bit order of the RGMII in-band status nibble RXD[3:0]."""
    link:        1   # RXD[0]: link up
    speed:       2   # RXD[2:1]: 0 = 10, 1 = 100, 2 = 1000 Mb/s (SPEED_MBPS)
    full_duplex: 1   # RXD[3]


#: Link speed by the in-band status's speed code (3 is reserved).
SPEED_MBPS = {0: 10, 1: 100, 2: 1000}

#: Link cycles without a transfer from the receive clock after which its status is stale
#: (1.4 ms at 48 MHz; a transfer takes a few receive-clock cycles, 2 us at 10 Mb/s's 2.5 MHz).
STALE_CYCLES = 2 ** 16


def inband_nibble(*, link, speed_mbps, full_duplex):
    """RXD[3:0] as a PHY sends it while RX_CTL is idle (the RGMII v2.0 encoding above)."""
    code = {mbps: code for code, mbps in SPEED_MBPS.items()}[speed_mbps]
    return int(bool(link)) | code << 1 | int(bool(full_duplex)) << 3


class InbandStatus(wiring.Component):
    """RGMII in-band status, sampled in ``eth_rx``, presented in ``sync``.

    Attributes
    ----------
    rise, fall : In(5)
        The receive DDR lanes (RXD[3:0] and RX_CTL on the rising and falling edge), ``eth_rx``.
    status : Out(EthLinkStatus)
        ``sync``: the last status the PHY sent while idle; ``link`` is 0 until the first one has
        crossed and whenever the receive clock has not delivered one for :data:`STALE_CYCLES`.
    """

    def __init__(self, *, stale_cycles=STALE_CYCLES):
        with rejected(self):
            if not isinstance(stale_cycles, int) or stale_cycles < 16:
                raise ValueError(f"Stale cycles must be an integer >= 16, not {stale_cycles!r}")
        self.stale_cycles = stale_cycles
        super().__init__({
            "rise": In(TX_LANE_BITS), "fall": In(TX_LANE_BITS),
            "status": Out(EthLinkStatus),
        })

    def elaborate(self, platform):
        m = Module()
        # eth_rx: a nibble counts once it came twice in a row with RX_CTL low on both edges
        # (RX_CTL high on the falling edge alone is a carrier event, whose RXD is a code, not
        # status).
        idle = ~self.rise[4] & ~self.fall[4]
        last = Signal(4)
        last_idle = Signal()
        seen = Signal(4)
        m.d.eth_rx += [last.eq(self.rise[:4]), last_idle.eq(idle)]
        with m.If(idle & last_idle & (self.rise[:4] == last)):
            m.d.eth_rx += seen.eq(last)

        cross = ConfigCrossing(4, o_domain="inband_out")
        m.submodules.crossing = DomainRenamer({"sync": "eth_rx", "inband_out": "sync"})(cross)
        sent = Signal(4)
        send = ~cross.busy
        m.d.comb += [cross.i_config.eq(sent), cross.i_write.eq(send), cross.i_pulse.eq(send)]
        with m.If(send):
            m.d.eth_rx += sent.eq(seen)

        # sync: the last value across, stale without a transfer for stale_cycles
        age = Signal(range(self.stale_cycles + 1), init=self.stale_cycles)
        with m.If(cross.o_pulse):
            m.d.sync += age.eq(0)
        with m.Elif(age != self.stale_cycles):
            m.d.sync += age.eq(age + 1)
        got = EthLinkStatus(cross.o_config)
        m.d.comb += [self.status.speed.eq(got.speed), self.status.full_duplex.eq(got.full_duplex),
                     self.status.link.eq(got.link & (age != self.stale_cycles))]
        return m
