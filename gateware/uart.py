"""8N1 UART behind byte streams: the link to the board's USB-serial chip.

The FT2232H on the ECPIX-5 and the iCEBreaker runs its asynchronous serial mode at up to 12 Mbaud;
with a 48 MHz link clock (ECPIX-5) that is ``divisor = 4`` clock cycles per bit. The iCEBreaker's
24 MHz link clock sends at 12 Mbaud with ``divisor = 2`` and receives in its 48 MHz capture clock
domain (a receiver needs at least 4 samples per bit). The rest of the gateware sees
only ``stream.Signature(8)``, so a faster link (the FT2232H's synchronous FIFO mode, USB, Ethernet)
replaces this module without touching the framer or the command handler.
"""

from amaranth.hdl import C, Cat, DomainRenamer, Module, Signal
from amaranth.lib import cdc, stream, wiring
from amaranth.lib.wiring import In, Out

from .checks import rejected
from .crossings import Synchronizer, mark

__all__ = ["UARTTransmitter", "UARTReceiver", "UART"]


def _divisor(divisor, least):
    if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor < least:
        raise TypeError(f"Divisor must be an integer >= {least}, not {divisor!r}")
    return divisor


class UARTTransmitter(wiring.Component):
    """Sends each byte of ``data`` as start bit, 8 data bits LSB first, stop bit.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 1.

    Attributes
    ----------
    data : In(stream.Signature(8))
    tx : Out(1), idle high
    busy : Out(1)
        A byte is being sent.
    """

    def __init__(self, *, divisor):
        with rejected(self):
            self.divisor = _divisor(divisor, 1)
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        shreg = Signal(10, init=0x3FF)
        bits = Signal(range(11))
        timer = Signal(range(self.divisor))
        m.d.comb += [self.tx.eq(shreg[0]), self.busy.eq(bits != 0),
                     # ready in the stop bit's last cycle too, so characters go back to back
                     self.data.ready.eq((bits == 0) | ((bits == 1) & (timer == 0)))]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [shreg.eq(Cat(C(0, 1), self.data.payload, C(1, 1))), bits.eq(10),
                         timer.eq(self.divisor - 1)]
        with m.Elif(bits != 0):
            with m.If(timer == 0):
                m.d.sync += [shreg.eq(Cat(shreg[1:], C(1, 1))), bits.eq(bits - 1),
                             timer.eq(self.divisor - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m


class UARTReceiver(wiring.Component):
    """Receives 8N1 bytes from ``rx`` into ``data``.

    The line passes a two-flop synchroniser; a falling edge starts a byte, the start bit is checked
    at its middle and each data bit sampled at its middle. A byte whose stop bit is low is dropped
    and counted in ``framing_error``; a byte arriving while the previous one is still unread in
    ``data`` is dropped and flagged in ``overrun``.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4.
    """

    def __init__(self, *, divisor):
        with rejected(self):
            self.divisor = _divisor(divisor, 4)
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8)),
                          "overrun": Out(1), "framing_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.sync = cdc.FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(self.divisor + 1))
        bits = Signal(range(10))
        shreg = Signal(8)
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):         # a glitch, not a start bit
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(self.divisor - 1), bits.eq(9)]
                    m.next = "BITS"
            with m.State("BITS"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [timer.eq(self.divisor - 1), bits.eq(bits - 1)]
                    with m.If(bits != 1):
                        m.d.sync += shreg.eq(Cat(shreg[1:], line))
                    with m.Else():             # the stop bit
                        with m.If(~line):
                            m.d.sync += self.framing_error.eq(1)
                            m.next = "BREAK"
                        with m.Elif(self.data.valid & ~self.data.ready):
                            m.d.sync += self.overrun.eq(1)
                            m.next = "IDLE"
                        with m.Else():
                            m.d.sync += [self.data.payload.eq(shreg), self.data.valid.eq(1)]
                            m.next = "IDLE"
            with m.State("BREAK"):             # wait for the line to return high
                with m.If(line):
                    m.next = "IDLE"
        return m


class UART(wiring.Component):
    """Transmitter and receiver; the receiver may run in a faster clock domain.

    Parameters
    ----------
    divisor : int
        Link ("sync") clock cycles per bit of the transmitter (48 MHz / 12 Mbaud = 4), >= 1.
    rx_divisor : int, optional
        Clock cycles per bit of the receiver, >= 4 (it samples each bit in its middle); default
        ``divisor``.
    rx_domain : str
        Clock domain of the receiver. Other than ``"sync"``, each received byte crosses into
        ``sync`` through a held register and a toggle (two-flop synchronised): a byte takes ten
        bit times, far longer than the crossing, so no FIFO is needed. This lets a link clock
        that is too slow to sample 12 Mbaud (the iCEBreaker's 24 MHz: two cycles per bit) still
        send at 12 Mbaud while a faster clock receives.

    Attributes
    ----------
    tx_data : In(stream.Signature(8))
        Bytes to send.
    rx_data : Out(stream.Signature(8))
        Bytes received (in ``sync``).
    tx, rx : the serial lines.
    overrun, framing_error : Out(1), sticky (overrun: a byte arrived before the previous one was
        taken, in either domain)
    """

    def __init__(self, *, divisor, rx_divisor=None, rx_domain="sync"):
        with rejected(self):
            self.divisor = _divisor(divisor, 1)
            self.rx_divisor = _divisor(divisor if rx_divisor is None else rx_divisor, 4)
            if not isinstance(rx_domain, str):
                raise TypeError(f"Receiver domain must be a domain name, not {rx_domain!r}")
        self.rx_domain = rx_domain
        super().__init__({
            "tx_data": In(stream.Signature(8)), "rx_data": Out(stream.Signature(8)),
            "tx": Out(1, init=1), "rx": In(1, init=1),
            "overrun": Out(1), "framing_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.transmitter = tx = UARTTransmitter(divisor=self.divisor)
        receiver = UARTReceiver(divisor=self.rx_divisor)
        wiring.connect(m, wiring.flipped(self.tx_data), tx.data)
        m.d.comb += [self.tx.eq(tx.tx)]
        if self.rx_domain == "sync":
            m.submodules.receiver = rx = receiver
            wiring.connect(m, rx.data, wiring.flipped(self.rx_data))
            m.d.comb += [rx.rx.eq(self.rx), self.overrun.eq(rx.overrun),
                         self.framing_error.eq(rx.framing_error)]
            return m

        m.submodules.receiver = rx = DomainRenamer({"sync": self.rx_domain})(receiver)
        held = Signal(8)                  # rx domain: the last byte, stable until the next
        toggle = Signal()                 # rx domain: flips with each byte
        m.d.comb += [rx.rx.eq(self.rx), rx.data.ready.eq(1)]
        with m.If(rx.data.valid):
            m.d[self.rx_domain] += [held.eq(rx.data.payload), toggle.eq(~toggle)]
        seen = Signal()
        toggle_sync = Signal()
        m.submodules.toggle_sync = Synchronizer(toggle, toggle_sync, kind="toggle_handshake")
        m.submodules.framing_sync = Synchronizer(rx.framing_error, self.framing_error,
                                                 kind="ff_synchronizer")
        out = self.rx_data
        mark(out.payload, "toggle_handshake")     # loaded from `held` after the toggle crossed
        with m.If(out.valid & out.ready):
            m.d.sync += out.valid.eq(0)
        # `held` has been stable for two sync cycles
        load = mark(Signal(), "toggle_handshake", strobe=True)
        m.d.comb += load.eq(toggle_sync != seen)
        with m.If(load):
            m.d.sync += seen.eq(toggle_sync)
            with m.If(out.valid & ~out.ready):
                m.d.sync += self.overrun.eq(1)
            with m.Else():
                m.d.sync += [out.payload.eq(held), out.valid.eq(1)]
        return m
