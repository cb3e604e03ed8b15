"""The capture FIFO between the capture and link clock domains.

:class:`CaptureFIFO` is an asynchronous FIFO of the usual Gray-pointer kind (Cummings, "Simulation
and Synthesis Techniques for Asynchronous FIFO Design", SNUG 2002, style 2) with the same ports as
:class:`amaranth.lib.fifo.AsyncFIFO`. It differs where the stock one limits the capture clock
(``../shared/FIELD.md`` §5 and ``docs/boards.md``): the stock FIFO converts the synchronised read
pointer from Gray to binary with a chain of XOR gates one gate per bit deep (nine LUT levels,
about 24 ns on an iCE40 UP5K for 512 entries, against a 20.8 ns period at 48 MHz). Here the
conversion takes two register stages of half the chain each, before the write-side level is
computed from it. ``w_level`` therefore sees reads two write-domain cycles later than the stock
FIFO's (writes at once); it is never below the true level, which is all its user (the capture
write stage's ``room``, see :mod:`latscope.gateware.top`) needs. ``w_rdy`` is a register derived
from ``w_level``, so the full test is not in series with the write pointer either, and it is as
conservative: the FIFO may refuse a write for a few cycles after a read has freed a slot.

Crossings: the two Gray pointers (declared ``gray_pointer``) and the storage's read register
(``fifo_data``: an entry is written in the cycle its pointer is launched and read only after the
pointer has passed two synchroniser stages, so that path is bounded by the reading period;
:mod:`latscope.gateware.crossings`).

Reset: both domains must be reset together, as the boards do from the PLL's lock signal
(:mod:`latscope.gateware.boards`), and simulation starts both in reset state. Nothing is written
or read while either side is in reset, so the pointers leave reset equal.
"""

from amaranth.hdl import Cat, Elaboratable, Module, Mux, Signal
from amaranth.lib import fifo
from amaranth.lib.memory import Memory
from amaranth.utils import ceil_log2

from .checks import rejected
from .crossings import Synchronizer, mark

__all__ = ["CaptureFIFO", "level_at_most"]


def _gray(value):
    return value ^ (value >> 1)


def level_at_most(level, earlier_write, write, limit):
    """Whether ``level + earlier_write + write <= limit``, as three comparisons of ``level`` with
    constants chosen by the two one-bit writes: no adder in series with the comparison. Used with
    last cycle's (registered) level and write, and this cycle's write."""
    return Mux(earlier_write & write, level <= limit - 2,
               Mux(earlier_write | write, level <= limit - 1, level <= limit))


def _binary(gray):
    """Gray code to binary: bit k is the XOR of the Gray bits from k up."""
    return Cat(*(gray[k:].xor() for k in range(len(gray))))


class CaptureFIFO(fifo.FIFOInterface, Elaboratable):
    """Asynchronous FIFO, ``w_domain`` to ``r_domain``, of a power-of-two depth.

    Ports as :class:`amaranth.lib.fifo.FIFOInterface`. ``w_level`` counts every write at once
    and may exceed the true level by the entries read in the last few write-domain cycles;
    ``r_level`` counts reads at once and writes after the synchroniser delay.

    Parameters
    ----------
    width : int
        Bits per entry.
    depth : int
        Entries, a power of two >= 2.
    r_domain, w_domain : str
        Clock domains of the read and write sides.
    """

    def __init__(self, *, width, depth, r_domain="sync", w_domain="capture"):
        with rejected(self):
            if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
                raise ValueError(f"FIFO depth must be a power of two >= 2, not {depth!r}")
            if r_domain == w_domain:
                raise ValueError(f"The read and write domains must differ, not both "
                                 f"{r_domain!r}")
        super().__init__(width=width, depth=depth)
        self._r_domain, self._w_domain = r_domain, w_domain
        self._ptr_bits = ceil_log2(depth) + 1      # one more bit than the address: full vs empty

    def elaborate(self, platform):
        m = Module()
        n = self._ptr_bits
        w, r = self._w_domain, self._r_domain

        write = Signal()
        read = Signal()
        m.d.comb += [write.eq(self.w_en & self.w_rdy), read.eq(self.r_en & self.r_rdy)]

        # Write side: binary and Gray pointer of the next free slot.
        w_ptr = Signal(n)
        w_ptr_next = Signal(n)
        w_gray = Signal(n)
        m.d.comb += w_ptr_next.eq(w_ptr + write)
        m.d[w] += [w_ptr.eq(w_ptr_next), w_gray.eq(_gray(w_ptr_next))]

        # Read side: binary and Gray pointer of the next entry to read.
        r_ptr = Signal(n)
        r_ptr_next = Signal(n)
        r_gray = Signal(n)
        m.d.comb += r_ptr_next.eq(r_ptr + read)
        m.d[r] += [r_ptr.eq(r_ptr_next), r_gray.eq(_gray(r_ptr_next))]

        # Each Gray pointer crosses to the other side; only one bit changes per step.
        r_gray_at_w = Signal(n)
        w_gray_at_r = Signal(n)
        m.submodules.r_ptr_sync = Synchronizer(r_gray, r_gray_at_w, o_domain=w,
                                               kind="gray_pointer")
        m.submodules.w_ptr_sync = Synchronizer(w_gray, w_gray_at_r, o_domain=r,
                                               kind="gray_pointer")

        # Empty: the pointers are equal.
        m.d.comb += self.r_rdy.eq(w_gray_at_r != r_gray)

        # Gray to binary in two register stages of at most half the pointer's width each (a
        # single XOR chain of n - 1 gates is what synthesis makes of any formulation): first the
        # upper half, then the lower half from a delayed copy of its Gray bits and the upper
        # half's lowest binary bit (binary[k] = XOR of gray[k:], for k < h that is XOR of
        # gray[k:h] and binary[h]).
        h = n // 2
        upper = Signal(n - h)
        lower_gray = Signal(h)
        r_ptr_at_w = Signal(n)
        m.d[w] += [upper.eq(_binary(r_gray_at_w[h:])), lower_gray.eq(r_gray_at_w[:h]),
                   r_ptr_at_w.eq(Cat(_binary(Cat(lower_gray, upper[0]))[:h], upper))]
        m.d.comb += self.w_level.eq(w_ptr - r_ptr_at_w)
        # Full, registered: whether the level will have reached the depth after this cycle's
        # write, so that no comparison is in series with the write pointer's increment.
        # From registers only: `level_r` is last cycle's level, before last cycle's write.
        w_rdy = Signal(init=1)
        level_r = Signal.like(self.w_level)
        write_r = Signal()
        m.d[w] += [level_r.eq(self.w_level), write_r.eq(write)]
        m.d[w] += w_rdy.eq(level_at_most(level_r, write_r, write, self.depth - 1))
        m.d.comb += self.w_rdy.eq(w_rdy)
        m.d.comb += self.r_level.eq(_binary(w_gray_at_r) - r_ptr)

        m.submodules.storage = storage = Memory(shape=self.width, depth=self.depth, init=[])
        w_port = storage.write_port(domain=w)
        r_port = storage.read_port(domain=r)
        # The storage is written in the writing domain and read here: an entry is read only
        # after its write pointer has crossed (crossings.KINDS, "fifo_data"), so a path into this
        # register (storage in flip-flops) must be shorter than the reading period.
        mark(r_port.data, "fifo_data")
        m.d.comb += [
            w_port.addr.eq(w_ptr[:-1]), w_port.data.eq(self.w_data), w_port.en.eq(write),
            # Read ahead: the next entry is always at the output when r_rdy is set.
            r_port.addr.eq(r_ptr_next[:-1]), r_port.en.eq(1), self.r_data.eq(r_port.data),
        ]
        return m
