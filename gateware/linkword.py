"""The two-byte link path: what the encoder, the framer and the Ethernet link pass per link cycle
when the link carries more than one byte per cycle (the Ethernet build).

A *word* is one or two bytes of the byte stream, the low byte first: ``data[:8]`` always,
``data[8:]`` when ``two`` is set. The stream's bytes are the byte path's, in the same order; only
how many move per cycle differs. A word never holds bytes of two units (encoder to framer) or of
two stream frames (framer onwards), so every unit and frame starts in the low byte of a word.

:class:`WordToBytes` turns words back into bytes, one per cycle (the UART's side of the link
multiplexer, and the Ethernet streamer's side of its FIFO at 125 MHz). :func:`crc32_step` is the
CRC-32 the framer needs when one or two bytes of a frame pass per cycle.
"""

import operator
from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["LINK_BYTES", "LinkWord", "WordToBytes", "crc32_step", "check_link_bytes",
           "word_bytes", "link_bytes_of"]

#: Bytes per link cycle a link path may carry: the byte path, or words of two.
LINK_BYTES = (1, 2)

#: CRC-32 of ISO-HDLC (zlib's, the stream format's): reflected polynomial.
_CRC32_POLY = 0xEDB88320


class LinkWord(data.Struct):
    """One or two bytes of the stream per link cycle."""
    data: 16     # the first byte in data[:8], the second in data[8:]
    two:  1      # data[8:] is a byte of the stream too


def check_link_bytes(value):
    """Raise ``TypeError`` unless ``value`` is one of :data:`LINK_BYTES`."""
    if value not in LINK_BYTES or not isinstance(value, int):
        raise TypeError(f"Link bytes must be 1 or 2, not {value!r}")


def link_bytes_of(signature):
    """Bytes per transfer of a stream ``signature``: 2 for :class:`LinkWord`, else 1."""
    return 2 if signature.members["payload"].shape is LinkWord else 1


def word_bytes(raw, link_bytes):
    """The stream bytes of one transfer on a ``link_bytes``-wide path, from the payload's bits
    (a byte, or a :class:`LinkWord`'s ``data`` and ``two``)."""
    if link_bytes == 1:
        return bytes([raw])
    return raw.to_bytes(3, "little")[:2] if raw >> 16 & 1 else bytes([raw & 0xFF])


def _byte_step(state):
    """One byte through the reflected CRC-32, symbolically: ``state`` is 32 CRC bits then 8 data
    bits, each a frozenset of input names (the XOR of those inputs); returns the 32 new bits."""
    crc, byte = state[:32], state[32:]
    c = [crc[i] ^ byte[i] if i < 8 else crc[i] for i in range(32)]
    for _ in range(8):
        low = c[0]
        c = c[1:] + [frozenset()]
        c = [bit ^ low if _CRC32_POLY >> i & 1 else bit for i, bit in enumerate(c)]
    return c


def crc32_step(crc, byte_list):
    """The CRC-32 register (before the final inversion) after ``byte_list`` (values of 8 bits,
    the first first) from ``crc``: one XOR network, each output bit the XOR of the input bits
    the polynomial makes it depend on."""
    names = [("c", i) for i in range(32)]
    c = [frozenset([n]) for n in names]
    for k in range(len(byte_list)):
        c = _byte_step(c + [frozenset([("d", 8 * k + i)]) for i in range(8)])
    inputs = {("c", i): crc[i] for i in range(32)}
    for k, byte in enumerate(byte_list):
        inputs.update({("d", 8 * k + i): byte[i] for i in range(8)})
    bits = [reduce(operator.xor, (inputs[n] for n in sorted(bit)), Const(0, 1)) for bit in c]
    return Cat(*bits)


class WordToBytes(wiring.Component):
    """Words in, their bytes out, one per cycle (registered on both sides).

    Attributes
    ----------
    i : In(stream.Signature(LinkWord))
    o : Out(stream.Signature(8))
    """

    def __init__(self):
        super().__init__({"i": In(stream.Signature(LinkWord)), "o": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        buf = Signal(16)
        left = Signal(2)          # bytes of buf not yet given out
        m.d.comb += [self.o.valid.eq(left != 0), self.o.payload.eq(buf[:8]),
                     self.i.ready.eq((left == 0) | ((left == 1) & self.o.ready))]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [buf.eq(buf >> 8), left.eq(left - 1)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [buf.eq(self.i.payload.data),
                         left.eq(Mux(self.i.payload.two, 2, 1))]
        return m
