"""The capture front-end: pins to timestamped capture FIFO entries, in the capture clock domain.

:class:`CaptureFrontEnd` takes ``lanes`` samples per capture clock of ``channels`` pins (lane 0
earlier in time), synchronises them, optionally replaces some with a self-test pattern, filters
glitches, detects enabled edges, and writes one entry per capture cycle that has an edge
(:func:`latscope.gateware.protocol.capture_entry_layout`), plus TICK and OVERFLOW entries.
:mod:`latscope.gateware.model_capture` is its executable specification; the tests compare the two.

Timestamps. One free-running ``counter_width``-bit counter numbers capture cycles. An entry's
``cycle`` is the counter value of the cycle in which its samples were presented at ``samples``:
the pipeline delay (:attr:`CaptureFrontEnd.latency` cycles) is compensated exactly, so a sample's
time is ``cycle * lanes + lane`` ticks and **the pin-to-timestamp offset contributed by this
front-end is 0 ticks on every channel** (the I/O buffers before ``samples`` add a board-specific
constant, documented per board). After power-up the samples of the first clock cycle are cycle 0.

Pipeline (clock cycles after the samples were presented): 2 synchroniser flops; the self-test
injection register (3); with ``max_glitch > 0`` a look-ahead window of ``max_glitch + 1`` cycles,
a registered hold check and the filter register (``max_glitch + 5``); the edge register, two
popcount registers, and the write stage, which is combinational from registers and ``fifo_w_rdy``.
The ``config`` port is registered on entry; see :func:`model_capture.pipeline` for the cycle at
which each field takes effect.

Glitch filter (per channel, ``g = min(config.glitch[ch], max_glitch)`` capture cycles, so
``h = g * lanes`` samples). Every channel passes the same window, so filtering never moves an
edge and the delay is the same on all channels. With samples ``x[n]`` the filtered level is
``y[n] = x[n]`` if ``x[n], x[n+1], ..., x[n+h-1]`` are all equal, else ``y[n-1]``. So a level
that holds for at least ``h`` samples (``g`` cycles) is accepted from its first sample, at its true
time; a shorter pulse vanishes together with both its edges; ``g = 0`` (and ``g = 1`` with
``lanes = 1``) turns the filter off. RMII ``CRS_DV``'s end-of-frame toggling at nibble rate
(20 ns high, 20 ns low) disappears with ``g`` above 20 ns in cycles (4 at 160 MHz), leaving the
fall after the last toggle.

Edges. Bit ``lane*channels + ch`` of ``edges`` is set when the filtered level at that sample
differs from the previous sample of the same channel and that direction is enabled
(``rise_en``/``fall_en``) and ``armed`` is set; ``levels`` holds all filtered levels of the cycle.
Simultaneous edges on several channels and lanes stay distinct bits of one entry.

Entries, decided in the write stage for one sample cycle per clock (``fifo_w_rdy`` sampled there):

* OVERFLOW first: if edges were dropped and the FIFO is ready, the record is written before
  anything else: ``cycle`` = first dropped cycle, ``lost.count`` = dropped edges (saturating at
  ``2**40 - 1``), ``lost.span`` = cycles from the first to the last dropped cycle (saturating at
  ``2**counter_width - 1``). An EVENTS entry of the same cycle is dropped and included.
* EVENTS, if the cycle has an enabled edge: written if the FIFO is ready, else dropped and counted.
* TICK: due when the counter is a multiple of ``2**heartbeat_shift`` (0 included, so the first
  entry after power-up or a time reset is a TICK at cycle 0 unless an edge is there). It is
  written in the first cycle from then on with no other entry, and carries *that* cycle, so
  entries stay in cycle order; several due ticks merge into one; a tick pending in a cycle in which
  the FIFO is not ready is skipped.

Self-test. While ``selftest_on``, a generator makes a pattern in ticks: high for ``selftest_high``
ticks, low for ``selftest_low`` ticks, repeating. If ``selftest_on`` is first presented in clock
cycle ``t``, tick ``(t + 2) * lanes`` (lane 0 of sample cycle ``t + 2``) is phase 0, the first
high tick; the pattern restarts the same way when ``selftest_high`` or ``selftest_low`` change
while it runs. The channels in ``selftest_mask`` take the pattern instead of their pins, injected
after the synchroniser with the pattern delayed to match it, so the timing equals that of a pin; odd
tick counts put edges on both lanes. ``selftest_out`` carries, in clock cycle ``k``, the pattern
injected as sample cycle ``k`` (lane-major, 0 when off), for a DDR output pin: looped back to a
pin channel it reappears delayed only by the board's output and input buffers. Both widths must
be at least 2 (the control side rejects smaller ones; the model refuses them).

Timestamp reset. A ``time_reset`` pulse presented in cycle ``t`` makes sample cycle ``t + 2`` the
new cycle 0. Entries of earlier sample cycles that have not been written by the end of cycle
``t + 1`` are discarded, as are a pending tick and a pending overflow record (the host zeroes its
event index and lost count at the reset); nothing is duplicated. Levels are continuous across the
reset: an edge between sample cycles ``t + 1`` and ``t + 2`` is reported at cycle 0, lane 0.

Fast forward (``fast_forward=True``, simulation only): ``quiescent`` is 1 when the samples have
been constant (every lane equal) with self-test off for ``latency + 2`` cycles, no time reset is
flushing, and no tick or overflow record is pending; then nothing in the pipeline can produce an
entry and a nonzero ``ff_skip`` for one cycle advances the counter by ``ff_skip + 1``.
``ff_limit`` is the largest skip that does not jump over a multiple of ``2**heartbeat_shift``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from .model_capture import MAX_CHANNELS, check_parameters, pipeline
from .protocol import EntryKind, capture_entry_layout

__all__ = ["FrontEndConfig", "CaptureFrontEnd", "SaturatingCount", "config_const",
           "MAX_CHANNELS", "grouped_filter"]

#: Hold terms OR-ed per early group in the glitch filter (the iCE40's filter, with no more terms
#: than this per lane, checks them bit by bit instead).
HOLD_GROUP = 8


def grouped_filter(lanes, max_glitch):
    """Whether the front end's glitch filter is the grouped one (hold terms OR-ed in early
    groups; the one ``clock_gates`` can gate): more than :data:`HOLD_GROUP` terms per lane."""
    return max_glitch > 0 and max_glitch * lanes - 1 > HOLD_GROUP


class FrontEndConfig(data.Struct):
    """The front-end's configuration port. Channel masks hold bit ``ch`` for channel ``ch``;
    bits and glitch widths of channels the design lacks are ignored. ``time_reset`` is a pulse of
    one capture cycle. ``selftest_high``/``selftest_low`` are ticks (>= 2)."""
    armed:         1
    time_reset:    1
    selftest_on:   1
    rise_en:       MAX_CHANNELS
    fall_en:       MAX_CHANNELS
    glitch:        data.ArrayLayout(8, MAX_CHANNELS)   # capture cycles, clamped to max_glitch
    selftest_mask: MAX_CHANNELS
    selftest_high: 16
    selftest_low:  16


def config_const(config):
    """The ``FrontEndConfig`` value (a ``data.Const``) for a :class:`model_capture.Config`."""
    glitch = [config.glitch_of(ch) for ch in range(MAX_CHANNELS)]
    return FrontEndConfig.const({
        "armed": int(config.armed), "time_reset": int(config.time_reset),
        "selftest_on": int(config.selftest_on),
        "rise_en": config.rise_en & 0xFFFF, "fall_en": config.fall_en & 0xFFFF,
        "glitch": glitch, "selftest_mask": config.selftest_mask & 0xFFFF,
        "selftest_high": config.selftest_high, "selftest_low": config.selftest_low,
    })


class SaturatingCount(wiring.Component):
    """A counter that adds a small number per cycle and saturates at ``2**width - 1``, with no
    carry chain longer than ``low_bits + 1`` bits between its registers and ``sum``.

    A plain ``count + addend`` with saturation is a ``width``-bit carry chain plus a multiplexer;
    at 48 MHz on an iCE40 UP5K the 40-bit one alone takes the whole clock period. Here the count
    is a low part of ``low_bits`` bits, which takes the addend (below ``2**(low_bits - 1)``, so
    it carries at most 1, and never in two consecutive cycles), and a high part kept beside its
    successors ``high + 1`` and ``high + 2``, whose increment runs register to register; a flag
    says the high part is all ones, where a carry saturates the whole count. ``sum`` is
    therefore one short adder and two multiplexers deep.

    Parameters
    ----------
    width : int
        Bits of the count, ``low_bits + 1`` or more.
    addend_width : int
        Bits of ``addend``, less than ``low_bits``.
    low_bits : int
        Bits of the low part.

    Attributes
    ----------
    addend : In(addend_width)
        The number to add.
    load : In(1)
        ``count`` becomes ``addend`` at the next clock edge.
    accumulate : In(1)
        ``count`` becomes ``sum`` at the next clock edge (``load`` takes precedence).
    count : Out(width)
        The count (0 after reset).
    sum : Out(width)
        ``min(count + addend, 2**width - 1)``, combinational.
    """

    def __init__(self, *, width=40, addend_width=6, low_bits=8):
        for name, value in (("width", width), ("addend_width", addend_width),
                            ("low_bits", low_bits)):
            if not isinstance(value, int) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if addend_width >= low_bits:
            raise ValueError(f"addend_width ({addend_width}) must be less than low_bits "
                             f"({low_bits}): the low part must not carry twice in a row")
        if width <= low_bits:
            raise ValueError(f"width ({width}) must exceed low_bits ({low_bits})")
        self.width, self.low_bits = width, low_bits
        super().__init__({
            "addend": In(addend_width), "load": In(1), "accumulate": In(1),
            "count": Out(width), "sum": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        lo_bits, hi_bits = self.low_bits, self.width - self.low_bits
        low = Signal(lo_bits)
        high = Signal(hi_bits)
        high1 = Signal(hi_bits, init=1)      # high + 1 (mod 2**hi_bits)
        # high + 2, from high1 a cycle late: the low part cannot carry in two consecutive cycles
        # (after a carry or a load it holds less than 2**addend_width, and two addends stay
        # below 2**low_bits), so it is current whenever a carry needs it, and the long increment
        # runs register to register.
        high2 = Signal(hi_bits, init=2)
        m.d.sync += high2.eq(high1 + 1)
        top = Signal()                       # high is all ones
        low_sum = Signal(lo_bits + 1)
        carry = Signal()
        saturate = Signal()
        m.d.comb += [
            low_sum.eq(low + self.addend), carry.eq(low_sum[lo_bits]),
            saturate.eq(carry & top),
            self.count.eq(Cat(low, high)),
            self.sum.eq(Mux(saturate, (1 << self.width) - 1,
                            Cat(low_sum[:lo_bits], Mux(carry, high1, high)))),
        ]
        with m.If(self.load):
            m.d.sync += [low.eq(self.addend), high.eq(0), high1.eq(1), top.eq(0)]
        with m.Elif(self.accumulate):
            m.d.sync += [low.eq(self.sum[:lo_bits]), high.eq(self.sum[lo_bits:])]
            with m.If(carry & ~top):
                m.d.sync += [high1.eq(high2), top.eq(high1 == (1 << hi_bits) - 1)]
        return m


class CaptureFrontEnd(wiring.Component):
    """Synchroniser, self-test, glitch filter, edge detection, timestamps and overflow accounting.

    See the module docstring for the exact semantics.

    Parameters
    ----------
    channels : int
        Input channels, 1 to 16.
    lanes : int
        Samples per capture clock: 2 for DDR inputs, 1 for SDR.
    counter_width : int
        Bits of the cycle counter, 8 to 64 (the host unwraps it with TICK entries).
    max_glitch : int
        Largest glitch filter width, capture cycles (0 to 255; 0 removes the filter).
    heartbeat_shift : int
        A TICK is due every ``2**heartbeat_shift`` cycles; 1 to ``counter_width - 1``.
    fast_forward : bool
        Add the ``ff_skip``/``quiescent``/``ff_limit`` ports (simulation only).
    clock_gates : bool
        Simulation only (needs ``fast_forward``): put each channel's glitch filter registers in
        clock domain ``filter<ch>`` and add ``filter_quiet``, one bit per channel, set when a
        clock edge of that domain would change none of its registers; a simulator may then leave
        that clock still. The flops and their functions are the same. (The self-test generator
        on a gated clock of its own measured slower: a clock costs Verilator more than it.)
        Also adds the window skip: ``window_skip`` is nonzero when the edges in flight are all
        in the glitch filter's window, far enough from its end, the samples are constant and
        every channel that filters is settled; a ``window_go`` in such a cycle, with
        ``ff_skip`` from 1 to ``window_skip``, advances the counter and the window by
        ``ff_skip + 1`` cycles, as that many cycles of constant samples would. A simulator that
        knows the samples stay constant so long may carry an edge through the window in one
        cycle instead of paying the window's depth in evaluated cycles for every edge.

    Attributes
    ----------
    latency : int
        Clock cycles from ``samples`` to the write stage (compensated in the timestamps).
    window_cycles : int
        With ``clock_gates``: the most cycles one window skip stands for (``max_glitch + 1``).
    """

    def __init__(self, *, channels=8, lanes=2, counter_width=48, max_glitch=15,
                 heartbeat_shift=20, fast_forward=False, clock_gates=False):
        check_parameters(channels=channels, lanes=lanes, counter_width=counter_width,
                         max_glitch=max_glitch, heartbeat_shift=heartbeat_shift)
        if not isinstance(fast_forward, bool):
            raise TypeError(f"fast_forward must be a bool, not {fast_forward!r}")
        if not isinstance(clock_gates, bool):
            raise TypeError(f"clock_gates must be a bool, not {clock_gates!r}")
        if clock_gates and not (fast_forward and grouped_filter(lanes, max_glitch)):
            raise TypeError("clock_gates needs fast_forward and the grouped glitch filter "
                            "(max_glitch * lanes > 9)")
        self.channels = channels
        self.lanes = lanes
        self.counter_width = counter_width
        self.max_glitch = max_glitch
        self.heartbeat_shift = heartbeat_shift
        self.fast_forward = fast_forward
        self.clock_gates = clock_gates
        self.latency = pipeline(lanes, max_glitch).latency
        members = {
            "samples": In(lanes * channels),
            "config": In(FrontEndConfig),
            "fifo_w_data": Out(capture_entry_layout(channels=channels, lanes=lanes,
                                                    counter_width=counter_width)),
            "fifo_w_en": Out(1),
            "fifo_w_rdy": In(1),
            "selftest_out": Out(lanes),
            "overflow_active": Out(1),
        }
        if fast_forward:
            members.update(ff_skip=In(counter_width), quiescent=Out(1),
                           ff_limit=Out(counter_width))
        self.window_cycles = max_glitch + 1 if clock_gates else 0
        if clock_gates:
            members.update(filter_quiet=Out(channels), window_skip=Out(8), window_go=In(1))
        super().__init__(members)

    def _small_filter(self, m, cfg, x0, e_in):
        """The glitch filter with at most 8 hold terms per lane (the iCE40's), bit by bit: its
        hold check needs no early groups, and this form keeps the UP5K's placement (its 48 MHz
        margin depends on it). The same function as the grouped filter in :meth:`elaborate`."""
        C, L, G = self.channels, self.lanes, self.max_glitch
        B = C * L

        def lane(value, j):
            return value[j * C:(j + 1) * C]

        # Window: w[i] holds sample cycle k in clock cycle k + 3 + i, e[i] its edge bits.
        w = [x0] + [Signal(B, name=f"window{i}") for i in range(1, G + 2)]
        e = [Signal(B, name=f"edges{i}") for i in range(G + 1)]
        m.d.sync += e[0].eq(e_in)
        for i in range(1, G + 2):
            m.d.sync += w[i].eq(w[i - 1])
        for i in range(1, G + 1):
            m.d.sync += e[i].eq(e[i - 1])
        # Thermometer mask per channel: bit i (1 <= i < G*L) set when i < g*L.
        gmask = [Signal(G * L, name=f"glitch_mask{ch}") for ch in range(C)]
        for ch in range(C):
            g = cfg.glitch[ch]
            m.d.sync += gmask[ch].eq(Cat(Const(0, 1), *[g > (i // L) for i in range(1, G * L)]))
        # Hold check for sample cycle k = t - 3 - G (w[G]), registered: hold[ch][j] is 1 when
        # the h samples from lane j of cycle k on are equal.
        hold = [Signal(L, name=f"hold{ch}") for ch in range(C)]
        for ch in range(C):
            seq = [lane(e[G - i // L], i % L)[ch] for i in range((G + 1) * L)]
            for j in range(L):
                terms = [seq[i + j] & gmask[ch][i] for i in range(1, G * L)]
                m.d.sync += hold[ch][j].eq(~Cat(*terms).any() if terms else 1)
        # Filter register: sample cycle k in clock cycle k + G + 5.
        level = Signal(B)
        x = w[G + 1]
        for ch in range(C):
            prev = level[(L - 1) * C + ch]
            for j in range(L):
                cur = Mux(hold[ch][j], lane(x, j)[ch], prev)
                m.d.sync += level[j * C + ch].eq(cur)
                prev = cur
        return level

    def elaborate(self, platform):
        m = Module()
        C, L, W, G = self.channels, self.lanes, self.counter_width, self.max_glitch
        B = C * L
        D = self.latency

        def lane(value, j):
            return value[j * C:(j + 1) * C]

        # Configuration, registered on entry (it comes from a clock domain crossing).
        cfg = Signal(FrontEndConfig)
        m.d.sync += cfg.eq(self.config)

        # Two-flop synchroniser: s2 holds sample cycle k in clock cycle k + 2.
        s2 = Signal(B)
        m.submodules.synchronizer = FFSynchronizer(self.samples, s2, stages=2)

        # Self-test generator. Lane 0's phase p (0 <= p < period = high + low) advances by L per
        # cycle modulo the period; lane j's phase is p + j modulo the period; the pattern is
        # phase < high. Both widths are >= 2, so period > L and lane j > 0 wraps only into
        # phases below j < high. p is kept as d = p - pl with pl = period - L: the wrap test
        # (p + L >= period) is d's sign, and lane j's pattern is d >= L - j (wrapped, an
        # equality test against j constants, as d < L always) or d < L - low - j. That second
        # comparison is a register compare on the iCE40 (48 MHz has time for one 18-bit carry
        # chain, and the UP5K has no room to spare). The 4-lane ECP5 front end at 200 MHz keeps
        # it as its own counter instead, b[j] = d - (L - low - j), stepped like d, so the
        # pattern is a sign bit with no comparator in front of the pattern register.
        # The pattern restarts at phase 0 when the generator starts or the widths change.
        npl = Signal(signed(18))                    # L - period (d - pl = d + npl: no inverter
                                                    # in front of the carry chain)
        start = Signal(signed(18))                  # d one cycle after phase 0: L - pl
        counters = L >= 4
        below = [Signal(signed(18), name=f"st_below{j}") for j in range(L)]  # L - low - j
        b_start = [Signal(signed(18), name=f"st_below_start{j}")
                   for j in range(L if counters else 0)]
        changed = Signal()                          # the widths differ from last cycle's
        m.d.sync += [
            npl.eq(L - self.config.selftest_high - self.config.selftest_low),
            start.eq(2 * L - self.config.selftest_high - self.config.selftest_low),
            [below[j].eq(L - j - self.config.selftest_low) for j in range(L)] if not counters
            else [b_start[j].eq(L + j - self.config.selftest_high)   # start - (L - low - j)
                  for j in range(L)],
            changed.eq((self.config.selftest_high != cfg.selftest_high)
                       | (self.config.selftest_low != cfg.selftest_low)),
        ]
        d = Signal(signed(19))
        b = [Signal(signed(20), name=f"st_below_count{j}") for j in range(L)] if counters else []
        pattern = Signal(L)
        active = Signal()
        with m.If(cfg.selftest_on):
            m.d.sync += active.eq(1)
            with m.If(~active | changed):           # phase j < 2 <= high: every lane high
                m.d.sync += [pattern.eq((1 << L) - 1), d.eq(start),
                             [bj.eq(bj_start) for bj, bj_start in zip(b, b_start, strict=True)]]
            with m.Else():
                for j in range(L):
                    wrapped = [d == v for v in range(L - j, L)]
                    below_j = b[j] < 0 if counters else d < below[j]
                    m.d.sync += pattern[j].eq(Cat(*wrapped, below_j).any())
                if counters:
                    step = Mux(d >= 0, npl, L)
                    m.d.sync += [d.eq(d + step), [b[j].eq(b[j] + step) for j in range(L)]]
                else:
                    m.d.sync += d.eq(Mux(d >= 0, d + npl, d + L))
        with m.Else():
            m.d.sync += [active.eq(0), pattern.eq(0)]
        m.d.comb += self.selftest_out.eq(pattern)
        pattern_d = [Signal(L, name=f"st_pattern_d{i}") for i in (1, 2)]
        active_d = [Signal(name=f"st_active_d{i}") for i in (1, 2)]
        m.d.sync += [pattern_d[0].eq(pattern), pattern_d[1].eq(pattern_d[0]),
                     active_d[0].eq(active), active_d[1].eq(active_d[0])]

        # Injection register x0 (sample cycle k in clock cycle k + 3) and its edge bits e0:
        # e0 bit (lane j, ch) = sample differs from the sample before it.
        inject = Signal(C)
        m.d.comb += inject.eq(cfg.selftest_mask[:C] & active_d[1].replicate(C))
        x_in = Signal(B)
        for j in range(L):
            m.d.comb += lane(x_in, j).eq((lane(s2, j) & ~inject)
                                         | (pattern_d[1][j].replicate(C) & inject))
        x0 = Signal(B)
        m.d.sync += x0.eq(x_in)

        if G == 0:
            level = x0                                   # no filter: the level is the sample
        else:
            e_in = Signal(B)
            m.d.comb += lane(e_in, 0).eq(lane(x_in, 0) ^ lane(x0, L - 1))
            for j in range(1, L):
                m.d.comb += lane(e_in, j).eq(lane(x_in, j) ^ lane(x_in, j - 1))
        group_size = HOLD_GROUP
        if G and not grouped_filter(L, G):
            level = self._small_filter(m, cfg, x0, e_in)
        elif G:
            # Window: w[i] holds sample cycle k in clock cycle k + 3 + i. The edge bits of the
            # window are kept per channel, in time order: bit n = i * L + j of `e[ch]` holds the
            # edge bit of lane j of the sample cycle in w[G - i] (so e[ch][G*L:] is e_in's,
            # registered), and the register shifts by L bits per cycle. Each hold check below is
            # then a masked compare of a contiguous slice (which a simulator evaluates word-wide);
            # the flops are those of G + 1 window-wide edge registers, in another order.
            w = [x0] + [Signal(B, name=f"window{i}") for i in range(1, G + 2)]
            S = self.window_cycles
            if self.clock_gates:
                # Window skip (simulation only, see `window_skip` below) of a = ff_skip + 1 <= S
                # cycles: as a cycles of constant samples would, each stage takes the one a
                # stages before it (x0 where none is).
                amount = self.ff_skip[:8]
                window_step = amount + 1
                with m.If(self.window_go):
                    with m.Switch(amount):
                        for k in range(1, S):
                            with m.Case(k):
                                m.d.sync += [w[i].eq(w[max(i - k - 1, 0)])
                                             for i in range(1, G + 2)]
                with m.Else():
                    m.d.sync += [w[i].eq(w[i - 1]) for i in range(1, G + 2)]
            else:
                for i in range(1, G + 2):
                    m.d.sync += w[i].eq(w[i - 1])
            # Each channel's edge bits, mask and hold check are registers of that channel alone,
            # written in `fd[ch]`: the front end's own domain, or with `clock_gates` (simulation)
            # a domain of their own whose clock may stand still while they hold still.
            fd = [f"filter{ch}" if self.clock_gates else "sync" for ch in range(C)]
            e = [Signal((G + 1) * L, name=f"edges{ch}") for ch in range(C)]
            for ch in range(C):
                shifted = Cat(e[ch][L:], *[lane(e_in, j)[ch] for j in range(L)])
                if self.clock_gates:
                    # a window skip: a shifts with no new edge bit (the samples are constant)
                    with m.If(self.window_go):
                        m.d[fd[ch]] += e[ch].eq(e[ch] >> (window_step * L))
                    with m.Else():
                        m.d[fd[ch]] += e[ch].eq(shifted)
                else:
                    m.d[fd[ch]] += e[ch].eq(shifted)

            # Thermometer mask per channel: bit i (1 <= i < G*L) set when i < g*L, i.e. the
            # samples i after the candidate must equal it. Values above G act as G.
            # `gmask_early` is computed from the configuration port (one cycle before `cfg`), so
            # it holds now what `gmask` will hold next cycle: the early hold groups below use it
            # with no comparator in front of their AND-OR.
            gmask = [Signal(G * L, name=f"glitch_mask{ch}") for ch in range(C)]
            gmask_early = [Signal(G * L, name=f"glitch_mask_early{ch}") for ch in range(C)]
            for ch in range(C):
                g = self.config.glitch[ch]
                # one comparator per cycle of width, each selecting its L bits of the mask (an
                # OR of constants, so a simulator builds the mask word-wide)
                thermometer = 0
                for k in range(G):
                    bits = ((1 << L) - 1) << (k * L) & ~1
                    thermometer = thermometer | Mux(g > k, Const(bits, G * L), 0)
                m.d[fd[ch]] += [gmask_early[ch].eq(thermometer),
                                gmask[ch].eq(gmask_early[ch])]
            if self.clock_gates:
                # Channels whose mask is 0 (glitch width 0; 1 with one lane): every hold bit
                # is 1 whatever the edge bits, so an edge of theirs may be carried through the
                # window by a window skip. Registered with `gmask`, in the channel's domain.
                unfiltered = [Signal(name=f"unfiltered{ch}", init=1) for ch in range(C)]
                for ch in range(C):
                    m.d[fd[ch]] += unfiltered[ch].eq(gmask_early[ch] == 0)

            # Hold check for sample cycle k = t - 3 - G (w[G]), registered: bit ch of hold[j] is 1
            # when the h samples from lane j of cycle k on are equal, i.e. none of the edge bits
            # e[ch][j + i] for 1 <= i < h is set (h = g*L: gmask's bits).
            #
            # With many terms (G*L - 1 = 59 on the 4-lane ECP5 build) one AND-OR is 7 LUT levels,
            # too slow for 200 MHz. Terms are then OR-ed in groups one cycle early, from the
            # edge bits one stage back (L bits higher in e[ch]) and the mask's next value
            # (`gmask_early`), so each group's register holds exactly what its terms will be in
            # the hold cycle: the result is bit for bit the same, with no added latency. Terms of
            # the newest stage (which would come from e_in, the combinational edge bits) stay in
            # the hold cycle.
            # (The early groups of one channel and lane are the bits of one register, so a
            # simulator tests them with one compare.)
            if self.clock_gates:
                # a channel's hold bits in one register of its own domain (hold[j] gathers them)
                hold_ch = [Signal(L, name=f"hold{ch}") for ch in range(C)]
                hold = [Cat(*[hold_ch[ch][j] for ch in range(C)]) for j in range(L)]
                hold_bits = [[hold_ch[ch][j] for j in range(L)] for ch in range(C)]
            else:
                hold = [Signal(C, name=f"hold{j}") for j in range(L)]
                hold_bits = [[hold[j][ch] for j in range(L)] for ch in range(C)]
            for ch in range(C):
                for j in range(L):
                    # terms i with i + j < G*L have their edge bit one stage back
                    late = G * L - j                      # first i in the newest stage
                    terms = [(e[ch][G * L:G * L + j] & gmask[ch][late:]).any()] if j else []
                    groups = [(lo, min(lo + group_size, late))
                              for lo in range(1, late, group_size)]
                    parts = Signal(len(groups), name=f"hold_part{ch}_{j}")
                    m.d[fd[ch]] += parts.eq(Cat(*[(e[ch][lo + j + L:hi + j + L]
                                                  & gmask_early[ch][lo:hi]).any()
                                                 for lo, hi in groups]))
                    terms.append(parts.any())
                    m.d[fd[ch]] += hold_bits[ch][j].eq(~Cat(*terms).any())

            # Filter register: sample cycle k in clock cycle k + G + 5. Per lane, the level is
            # the sample where it holds, else the level of the sample before.
            level = Signal(B)
            x = w[G + 1]
            prev = lane(level, L - 1)
            for j in range(L):
                cur = (hold[j] & lane(x, j)) | (~hold[j] & prev)
                m.d.sync += lane(level, j).eq(cur)
                prev = cur

            if self.clock_gates:
                # A channel's registers above hold still once its edge bits have been 0 (and its
                # glitch width unchanged) for G + 3 cycles: the last edge bit has left `e[ch]`
                # (G + 1 shifts), the groups computed from it (one more) and the hold bits computed
                # from those (one more). From then on a clock edge loads every register with its
                # own value (edge bits 0, groups 0, hold bits 1, masks of the same width), until
                # the next edge bit or width change, in whose cycle `filter_quiet` is 0 again.
                # A change of any channel's width wakes every channel's filter: one word compare
                # instead of one per channel, at the cost of a few more clocked cycles after a
                # SET_GLITCH.
                settle = G + 3
                glitch_changed = Signal()
                glitch_changed_d = Signal()
                m.d.comb += glitch_changed.eq(self.config.glitch.as_value()[:8 * C]
                                              != cfg.glitch.as_value()[:8 * C])
                m.d.sync += glitch_changed_d.eq(glitch_changed)
                for ch in range(C):
                    busy = Cat(*[lane(e_in, j)[ch] for j in range(L)]).any() | glitch_changed
                    idle = Signal(range(settle + 1), name=f"filter_idle{ch}")
                    with m.If(busy):
                        m.d.sync += idle.eq(0)
                    with m.Elif(idle != settle):
                        # a window skip stands for a cycles without an edge bit
                        with m.If(self.window_go):
                            m.d.sync += idle.eq(Mux(idle + window_step >= settle, settle,
                                                    idle + window_step))
                        with m.Else():
                            m.d.sync += idle.eq(idle + 1)
                    m.d.comb += self.filter_quiet[ch].eq(~busy & (idle == settle))
                # Every channel's hold bits are settled or do not depend on the edge bits, and
                # no width change is on its way into the masks (`gmask` lags the port by two).
                filters_settled = Signal()
                m.d.comb += filters_settled.eq(
                    (Cat(*unfiltered) | self.filter_quiet).all()
                    & ~glitch_changed & ~glitch_changed_d)

        # Edge stage (from the level register and the last lane before it).
        last = Signal(C)
        m.d.sync += last.eq(lane(level, L - 1))
        edges_r = Signal(B)
        levels_r = Signal(B)
        for j in range(L):
            cur = lane(level, j)
            prev = last if j == 0 else lane(level, j - 1)
            changed = cur ^ prev
            en = (changed & cur & cfg.rise_en[:C]) | (changed & ~cur & cfg.fall_en[:C])
            m.d.sync += lane(edges_r, j).eq(en & cfg.armed.replicate(C))
        m.d.sync += levels_r.eq(level)

        # Popcount, two stages: per lane, then the sum.
        pc_lane = [Signal(range(C + 1), name=f"popcount_lane{j}") for j in range(L)]
        any1 = Signal()
        edges1 = Signal(B)
        levels1 = Signal(B)
        for j in range(L):
            m.d.sync += pc_lane[j].eq(sum(lane(edges_r, j)[ch] for ch in range(C)))
        m.d.sync += [any1.eq(edges_r.any()), edges1.eq(edges_r), levels1.eq(levels_r)]
        pc = Signal(range(B + 1))
        ev = Signal()
        edges2 = Signal(B)
        levels2 = Signal(B)
        m.d.sync += [pc.eq(sum(pc_lane)), ev.eq(any1), edges2.eq(edges1), levels2.eq(levels1)]

        # Write stage: holds sample cycle t - D in clock cycle t; `count` is its cycle number.
        count = Signal(W, init=(-D) % (1 << W))
        flush = Signal(range(D + 1), init=D)
        valid = Signal()             # flush == 0, registered (it gates the whole write stage)
        m.d.sync += valid.eq(~cfg.time_reset & (flush <= 1))
        # `count` is a multiple of 2**heartbeat_shift, registered: no comparison in series with
        # the write enable.
        hb_mask = (1 << self.heartbeat_shift) - 1
        reset_count = (-D) % (1 << W)
        at_multiple = Signal(init=(reset_count & hb_mask) == 0)
        if self.fast_forward:         # simulation only: a skip may land on a multiple
            next_multiple = ((count + self.ff_skip + 1)[:self.heartbeat_shift] == 0)
        else:
            next_multiple = count[:self.heartbeat_shift] == hb_mask
        m.d.sync += at_multiple.eq(Mux(cfg.time_reset, (reset_count & hb_mask) == 0,
                                       next_multiple))
        ovf = Signal()
        first = Signal(W)
        span = Signal(W)
        since = Signal(W)
        tick_pending = Signal()
        tick = Signal()
        event = Signal()
        m.d.comb += [
            tick.eq(tick_pending | (valid & at_multiple)),
            event.eq(valid & ev),
        ]
        # The lost-edge count (saturating at 2**40 - 1; see SaturatingCount for why it is split).
        m.submodules.lost = lost_count = SaturatingCount(width=40, addend_width=len(pc))
        lost_add = lost_count.sum
        # Controlled from registers only (the write stage's decision logic is the long path):
        # outside an overflow the count follows the popcount, so it holds the right value when
        # an overflow starts; during one it accumulates while the FIFO is not ready (with `ovf`
        # set the cycle is valid, and the popcount is 0 in cycles without an event).
        m.d.comb += [lost_count.addend.eq(pc), lost_count.load.eq(~ovf),
                     lost_count.accumulate.eq(~self.fifo_w_rdy)]
        since_full = Signal()        # since == 2**W - 1, registered: the increment saturates

        rdy = self.fifo_w_rdy
        kind = Signal(2)
        events_payload = Cat(edges2, levels2)
        # With `ovf` set the cycle is valid, so without an event the popcount is 0 and
        # `lost_add` equals `lost`: no multiplexer between the count and the payload.
        lost_payload = Cat(lost_add, Mux(event, since, span))
        m.d.comb += [
            kind.eq(Mux(ovf, int(EntryKind.OVERFLOW),
                         Mux(event, int(EntryKind.EVENTS), int(EntryKind.TICK)))),
            self.fifo_w_data.kind.eq(kind),
            self.fifo_w_data.cycle.eq(Mux(ovf, first, count)),
            # (a TICK's payload is unspecified: the events payload, whatever it holds)
            self.fifo_w_data.payload.as_value().eq(Mux(ovf, lost_payload, events_payload)),
            self.fifo_w_en.eq(rdy & (ovf | event | tick)),
            self.overflow_active.eq(ovf),
        ]
        with m.If(ovf):
            with m.If(~since_full):
                m.d.sync += [since.eq(since + 1), since_full.eq(since == (1 << W) - 2)]
        with m.If(valid):
            with m.If(~rdy):
                m.d.sync += tick_pending.eq(0)
                with m.If(event):
                    with m.If(ovf):
                        m.d.sync += span.eq(since)
                    with m.Else():
                        m.d.sync += [ovf.eq(1), first.eq(count), span.eq(0), since.eq(1),
                                     since_full.eq(0)]
            with m.Elif(ovf):
                m.d.sync += [ovf.eq(0), tick_pending.eq(tick)]
            with m.Elif(event):
                m.d.sync += tick_pending.eq(tick)
            with m.Else():
                m.d.sync += tick_pending.eq(0)

        # The counter, and the timestamp reset (last, so it overrides the write stage).
        step = 1
        if self.fast_forward:
            step = self.ff_skip + 1
        with m.If(cfg.time_reset):
            m.d.sync += [count.eq((-D) % (1 << W)), flush.eq(D), ovf.eq(0),
                         tick_pending.eq(0)]
        with m.Else():
            m.d.sync += count.eq(count + step)
            with m.If(flush != 0):
                m.d.sync += flush.eq(flush - 1)

        if self.fast_forward:
            need = D + 2
            prev_samples = Signal(B)
            m.d.sync += prev_samples.eq(self.samples)
            lanes_equal = Cat(*[lane(self.samples, j) == lane(self.samples, 0)
                                for j in range(L)]).all()
            quiet_now = (lanes_equal & (self.samples == prev_samples) & ~self.config.selftest_on
                         & ~cfg.selftest_on & ~active & ~active_d[0] & ~active_d[1])
            # Bit i of `changed` is 1 when the sample word of clock cycle t - 1 - i (now in s1
            # for i = 0, s2, x0, then w[i - 2], ...) differed from the one before it, or was not
            # quiet (lanes unequal, the self-test): a boundary between pipeline stage i and the
            # next. None in the last `need` cycles: the pipeline is settled.
            changed = Signal(need, init=(1 << need) - 1)
            shifted = Cat(~quiet_now, changed[:-1])
            if self.clock_gates:
                with m.If(self.window_go):      # a window skip: `window_step` quiet cycles
                    m.d.sync += changed.eq(changed << window_step)
                with m.Else():
                    m.d.sync += changed.eq(shifted)
            else:
                m.d.sync += changed.eq(shifted)
            steady = valid & ~ovf & ~tick_pending & ~cfg.time_reset & ~self.config.time_reset
            m.d.comb += [
                self.quiescent.eq(~changed.any() & quiet_now & steady),
                self.ff_limit.eq(~count[:self.heartbeat_shift]),
            ]
            if self.clock_gates:
                # The window skip. With no boundary in s1 and s2 (so they and x0 hold the
                # samples, still the same), a cycles of them would fill w[1..a] with x0's, move
                # each w[k] to w[k + a], and push w[G + 2 - a..G + 1] into the level register
                # and on: no change there if no boundary lies at or beyond w[G + 2 - a]
                # (i >= G + 4 - a; the rest of the pipeline, through the write stage, is then
                # settled as well). So the largest such skip is a = G + 3 - (highest boundary),
                # for a boundary in the window at all. The edge bits shift by a stages with
                # the window; channels that filter must be settled (their registers then do not
                # change), and a channel that does not filter has hold bits of 1 whatever its
                # edge bits. The counter advances by a (ff_skip = a - 1, not beyond ff_limit).
                largest = Const(0, 8)         # as ff_skip: a - 1
                for i in range(2, G + 2):      # the highest boundary decides
                    largest = Mux(changed[i], G + 2 - i, largest)
                offered = Signal(8)
                m.d.comb += offered.eq(Mux(self.ff_limit < largest, self.ff_limit, largest))
                m.d.comb += self.window_skip.eq(Mux(
                    quiet_now & ~changed[:2].any() & ~changed[G + 2:].any() & steady
                    & filters_settled, offered, 0))
        return m
