"""Pipelined event encoder: the :class:`~latscope.gateware.encoder.Encoder`'s units, byte for byte,
with one unit formed while the previous one is sent (link clock domain).

Two stages. The *former* takes a capture entry, advancing the time base as it takes it, and
forms one whole unit per cycle: an event's delta (one 64-bit subtraction), its token length and
all its bytes side by side, or an OVERFLOW token, or a heartbeat. The *sender* holds one unit and
gives it to the framer a byte per cycle, or two with ``link_bytes=2`` (the Ethernet build). The
former loads the sender in the cycle the sender gives its last byte, and takes the next entry in
the cycle it forms the last event of the current one, so an event costs one link cycle whether
it is alone in its entry or not (the two-stage encoder: eight for an isolated event, two or more
for each further edge), and the link's rate is set by the bytes, one or two per link cycle, and
at most one event per link cycle. The bytes are the reference's
(:class:`~latscope.gateware.model_stream.LinkModel`), unit for unit, as the two-stage encoder's:
only the cycles differ.

It needs full-width adders in one link cycle (a 64-bit subtraction and the token length behind
it): fine on the ECP5 at 48 MHz, where the Ethernet link needs the rate; the iCE40's link logic
keeps the two-stage encoder, which splits every 64-bit sum in two halves.
"""

from amaranth.hdl import C, Cat, Const, Module, Mux, Signal

from .encoder import MAX_UNIT_BYTES, EncoderBase, EncoderState, token_sizes
from .model_stream import ENTRY_RESET
from .protocol import (
    CONT_BITS,
    EVENT_FIRST_BITS,
    EVENT_MAX_CONT,
    OVERFLOW_CONT,
    TIME_FIRST_BITS,
    TIME_MAX_CONT,
    EntryKind,
    Heartbeat,
    Token,
)

__all__ = ["PipelinedEncoder"]

_HB_BYTES = Heartbeat.as_shape().size // 8


class PipelinedEncoder(EncoderBase):
    """Turns capture entries into token units, one unit formed per link cycle.

    Parameters and attributes as :class:`~latscope.gateware.encoder.Encoder`'s, and

    link_bytes : int
        Bytes of a unit given to the framer per cycle: 1 (``units`` carries
        :class:`~latscope.gateware.encoder.LinkItem`) or 2 (the two-byte link path of the
        Ethernet build, :class:`~latscope.gateware.encoder.LinkItemPair`; a word holds one byte
        only at the end of an odd-length unit).
    """

    def __init__(self, *, channels=8, lanes=2, counter_width=48, time_width=64, link_bytes=1):
        super().__init__(channels=channels, lanes=lanes, counter_width=counter_width,
                         time_width=time_width, link_bytes=link_bytes)

    def elaborate(self, platform):
        m = Module()
        entry = self.entries.payload
        units = self.units
        tw = self.time_width

        # --- sender: one unit, `link_bytes` bytes per cycle ---------------------------------------
        nbytes = MAX_UNIT_BYTES
        width = self.link_bytes
        buf = Signal(8 * nbytes)
        left = Signal(range(nbytes + 1))          # bytes of the unit not yet sent
        s_first = Signal()
        s_hb = Signal()
        s_len = Signal(5)
        s_base = Signal(64)
        s_index = Signal(32)
        ending = Signal()                         # this word holds the unit's last byte
        step = Signal(range(width + 1))           # bytes this word holds
        if width == 1:
            m.d.comb += [ending.eq(left == 1), step.eq(1)]
        else:
            m.d.comb += [ending.eq(left <= 2), step.eq(Mux(left >= 2, 2, 1)),
                         units.payload.two.eq(left >= 2)]
        m.d.comb += [units.valid.eq(left != 0), units.payload.data.eq(buf[:8 * width]),
                     units.payload.first.eq(s_first), units.payload.last.eq(ending),
                     units.payload.flush.eq(s_hb & ending),
                     units.payload.heartbeat.eq(s_hb), units.payload.length.eq(s_len),
                     units.payload.base_time.eq(s_base), units.payload.event_index.eq(s_index)]
        sent = Signal()
        m.d.comb += sent.eq(units.valid & units.ready)
        with m.If(sent):
            m.d.sync += [buf.eq(buf >> 8 * width), left.eq(left - step), s_first.eq(0)]
        free = Signal()                           # a unit loaded now follows without a gap
        m.d.comb += free.eq((left == 0) | (ending & units.ready))
        load = Signal()
        u_bytes = Signal(8 * nbytes)
        u_len = Signal(5)
        u_hb = Signal()

        # --- former ------------------------------------------------------------------------------
        state = EncoderState(m, self)
        prev_cycle, ext, last_time = state.prev_cycle, state.ext, state.last_time
        events, lost, epoch = state.events, state.lost, state.epoch
        with m.If(load):
            m.d.sync += [buf.eq(u_bytes), left.eq(u_len), s_len.eq(u_len), s_first.eq(1),
                         s_hb.eq(u_hb), s_base.eq(last_time), s_index.eq(events[:32])]

        pend, levels = state.pend, state.levels
        ovf_count, ovf_span = state.ovf_count, state.ovf_span

        sel_lane, sel_ch, sel_rise, sel_onehot = state.lowest_edge(m, pend)
        t = state.event_time(m, sel_lane)        # time of the selected event, ticks
        delta = Signal(tw)
        m.d.comb += delta.eq(t - last_time)
        ev_conts, time_conts, big_delta = token_sizes(m, delta)
        big = Signal()
        m.d.comb += big.eq(big_delta)

        # An event's unit, every byte formed in place: EVENT [CONT]{0..3}, or TIME [CONT]{1..10}
        # EVENT(delta 0).
        wide = Cat(delta, C(0, 64 + CONT_BITS * TIME_MAX_CONT))  # slices past the top read 0
        ev_lead = Cat(delta[:EVENT_FIRST_BITS], sel_rise, sel_ch, C(0, 1))
        ev_zero = Cat(C(0, EVENT_FIRST_BITS), sel_rise, sel_ch, C(0, 1))
        small_bytes = [ev_lead] + [
            Mux(k <= ev_conts,
                Const(Token.CONT, 8) | wide[EVENT_FIRST_BITS + CONT_BITS * (k - 1):][:CONT_BITS],
                0)
            for k in range(1, EVENT_MAX_CONT + 1)]
        big_bytes = [Const(Token.TIME, 8) | delta[:TIME_FIRST_BITS]]
        for k in range(1, TIME_MAX_CONT + 2):
            cont = Const(Token.CONT, 8) | wide[TIME_FIRST_BITS + CONT_BITS * (k - 1):][:CONT_BITS]
            big_bytes.append(Mux(k <= time_conts, cont, Mux(k == time_conts + 1, ev_zero, 0)))
        ev_bytes = Signal(8 * (TIME_MAX_CONT + 2))
        ev_len = Signal(5)
        with m.If(big):
            m.d.comb += [ev_bytes.eq(Cat(*big_bytes)), ev_len.eq(time_conts + 2)]
        with m.Else():
            m.d.comb += [ev_bytes.eq(Cat(*small_bytes)), ev_len.eq(ev_conts + 1)]

        # OVERFLOW and heartbeat units
        ovf_bits = state.overflow_bits(m)
        ovf_bytes = Cat(Const(Token.OVERFLOW, 8), *(
            Const(Token.CONT, 8) | ovf_bits[CONT_BITS * k:][:CONT_BITS]
            for k in range(OVERFLOW_CONT)))
        hb = state.heartbeat(m, self.hb_high_water, self.hb_status)

        take = Signal()
        m.d.comb += self.entries.ready.eq(take)

        # Taking an entry advances the time base in the same cycle (its cycle's distance from the
        # last entry's, in ticks, added at once) and goes straight to the entry's unit.
        ext_taken = Signal(tw)
        m.d.comb += ext_taken.eq(
            ext + ((entry.cycle - prev_cycle)[:self.counter_width]) * self.lanes)

        def go_to_entry():
            with m.Switch(entry.kind):
                with m.Case(EntryKind.EVENTS):
                    with m.If(entry.payload.edges.edges == 0):
                        m.next = "TAKE"
                    with m.Else():
                        m.next = "EVENT"
                with m.Case(EntryKind.OVERFLOW):
                    m.next = "OVERFLOW"
                with m.Case(EntryKind.TICK):
                    m.next = "HEARTBEAT"
                with m.Case(ENTRY_RESET):
                    m.next = "RESET"

        with m.FSM():
            with m.State("TAKE"):
                m.d.comb += [take.eq(1),
                             self.idle.eq(~self.entries.valid & (left == 0))]
                with m.If(self.entries.valid):
                    go_to_entry()

            with m.State("RESET"):
                m.d.sync += [prev_cycle.eq(0), ext.eq(0), last_time.eq(0), events.eq(0),
                             lost.eq(0), epoch.eq(epoch + 1)]
                m.next = "HEARTBEAT"

            with m.State("EVENT"):
                m.d.comb += [u_bytes.eq(ev_bytes), u_len.eq(ev_len)]
                with m.If(free):
                    m.d.comb += load.eq(1)
                    rest = pend & ~sel_onehot
                    m.d.sync += [last_time.eq(t), events.eq(events + 1), pend.eq(rest)]
                    with m.If(rest == 0):
                        # the next entry is taken now: its unit is formed in the next cycle
                        m.d.comb += take.eq(1)
                        with m.If(self.entries.valid):
                            go_to_entry()
                        with m.Else():
                            m.next = "TAKE"

            with m.State("OVERFLOW"):
                m.d.comb += [u_bytes.eq(ovf_bytes), u_len.eq(1 + OVERFLOW_CONT)]
                with m.If(free):
                    m.d.comb += load.eq(1)
                    m.d.sync += lost.eq(lost + ovf_count)
                    m.next = "TAKE"

            with m.State("HEARTBEAT"):
                m.d.comb += [u_bytes.eq(hb.as_value()), u_len.eq(_HB_BYTES), u_hb.eq(1)]
                with m.If(free):
                    m.d.comb += [load.eq(1), self.hb_sent.eq(1)]
                    m.next = "TAKE"

        # After the FSM: an entry taken in EVENT replaces the `pend` EVENT leaves behind.
        with m.If(take & self.entries.valid):
            m.d.sync += [
                ext.eq(ext_taken), prev_cycle.eq(entry.cycle),
                pend.eq(entry.payload.edges.edges), levels.eq(entry.payload.edges.levels),
                ovf_count.eq(entry.payload.lost.count), ovf_span.eq(entry.payload.lost.span)]
        return m
