"""8N1 UART behind byte streams: the link to the board's USB-serial chip.

The FT2232H on the ECPIX-5 and the iCEBreaker runs its asynchronous serial mode at up to 12 Mbaud;
with a 48 MHz link clock (ECPIX-5) that is ``divisor = 4`` clock cycles per bit, with the
iCEBreaker's 24 MHz link clock the same divisor gives 6 Mbaud. The rest of the gateware sees
only ``stream.Signature(8)``, so a faster link (the FT2232H's synchronous FIFO mode, USB, Ethernet)
replaces this module without touching the framer or the command handler.
"""

from amaranth.hdl import C, Cat, Module, Signal
from amaranth.lib import cdc, stream, wiring
from amaranth.lib.wiring import In, Out

from .encoder import _rejected

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
        with _rejected(self):
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
        with _rejected(self):
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
    """Transmitter and receiver with one divisor.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (48 MHz / 12 Mbaud = 4), at least 4.

    Attributes
    ----------
    tx_data : In(stream.Signature(8))
        Bytes to send.
    rx_data : Out(stream.Signature(8))
        Bytes received.
    tx, rx : the serial lines.
    overrun, framing_error : Out(1), sticky
    """

    def __init__(self, *, divisor):
        with _rejected(self):
            self.divisor = _divisor(divisor, 4)
        super().__init__({
            "tx_data": In(stream.Signature(8)), "rx_data": Out(stream.Signature(8)),
            "tx": Out(1, init=1), "rx": In(1, init=1),
            "overrun": Out(1), "framing_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.transmitter = tx = UARTTransmitter(divisor=self.divisor)
        m.submodules.receiver = rx = UARTReceiver(divisor=self.divisor)
        wiring.connect(m, wiring.flipped(self.tx_data), tx.data)
        wiring.connect(m, rx.data, wiring.flipped(self.rx_data))
        m.d.comb += [self.tx.eq(tx.tx), rx.rx.eq(self.rx), self.overrun.eq(rx.overrun),
                     self.framing_error.eq(rx.framing_error)]
        return m
