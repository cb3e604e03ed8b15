"""Event encoder: capture FIFO entries in, token units out (link clock domain).

The encoder keeps a 64-bit time in ticks (``cycle * lanes + lane``), unwrapping the
``counter_width``-bit capture cycle with modular differences (the capture front end writes a TICK
entry at least once per half wrap). Every edge bit of an EVENTS entry, lane-major then channel
order, becomes one EVENT token holding the delta from the previous event (a TIME token goes first
when the delta needs more than 21 bits). OVERFLOW entries become OVERFLOW tokens, TICK entries a
heartbeat, and the reset entry written by the top level after RESET_TIME zeroes the time base and
the counters and sends a heartbeat with the new epoch. The bytes go to the framer in *units* that
must not be split between frames: a TIME token with its EVENT, an OVERFLOW token, a heartbeat.
``gateware/model_stream.py`` (:class:`~latscope.gateware.model_stream.LinkModel`) is the reference.
"""

from amaranth.hdl import C, Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .checks import check, rejected
from .linkword import check_link_bytes
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
    HeartbeatStatus,
    Overflow,
    Token,
    capture_entry_layout,
)

__all__ = ["LinkItem", "LinkItemPair", "unit_layout", "Encoder", "MAX_UNIT_BYTES"]

#: Longest unit the encoder emits: an OVERFLOW token (1 + 28 bytes).
MAX_UNIT_BYTES = 1 + OVERFLOW_CONT
_HB_BYTES = Heartbeat.as_shape().size // 8


class LinkItem(data.Struct):
    """One byte from the encoder to the framer, with what the framer needs to place it."""
    data:        8
    first:       1    # first byte of a unit (a unit never spans two frames)
    last:        1    # last byte of a unit
    flush:       1    # with ``last``: close the frame after this unit
    heartbeat:   1    # the unit is a HEARTBEAT frame's payload (else tokens of an EVENTS frame)
    length:      5    # bytes in the unit (valid with ``first``)
    base_time:   64   # time of the last event before this unit (EventsHeader.base_time)
    event_index: 32   # events emitted before this unit, mod 2**32 (EventsHeader.event_index)


class LinkItemPair(data.Struct):
    """One or two bytes of a unit from the encoder to the framer (the two-byte link path,
    :mod:`~latscope.gateware.linkword`): :class:`LinkItem`'s fields, ``data[:8]`` the first byte,
    ``data[8:]`` the second when ``two``; ``first`` and ``last`` mark the word holding the unit's
    first and last byte (a word never holds bytes of two units)."""
    data:        16
    two:         1
    first:       1
    last:        1
    flush:       1
    heartbeat:   1
    length:      5
    base_time:   64
    event_index: 32


def unit_layout(link_bytes):
    """The encoder-to-framer payload for ``link_bytes`` bytes per link cycle (1 or 2)."""
    return LinkItem if link_bytes == 1 else LinkItemPair


class EncoderBase(wiring.Component):
    """What both encoders are: their parameters, checked, and their signature (``link_bytes``
    only the pipelined encoder offers)."""

    def __init__(self, *, channels, lanes, counter_width, time_width, link_bytes=1):
        with rejected(self):
            check("Channel count", channels, 1, 8)
            check("Lane count", lanes, 1, 8)
            check("Counter width", counter_width, 8, 63)
            check("Time width", time_width, 48, 64)
            check_link_bytes(link_bytes)
        self.channels, self.lanes, self.counter_width = channels, lanes, counter_width
        self.time_width, self.link_bytes = time_width, link_bytes
        self.entry_layout = capture_entry_layout(channels=channels, lanes=lanes,
                                                 counter_width=counter_width)
        super().__init__({
            "entries": In(stream.Signature(self.entry_layout)),
            "units": Out(stream.Signature(unit_layout(link_bytes))),
            "hb_high_water": In(16),
            "hb_status": In(HeartbeatStatus),
            "hb_sent": Out(1),
            "time": Out(64), "events": Out(64), "lost": Out(64), "epoch": Out(8),
            "idle": Out(1),
        })


class EncoderState:
    """The registers both encoders keep and the logic on them that both elaborate the same way:
    the time base and counts (reported on the encoder's status outputs), the current entry's
    pending edges, the lowest pending edge, an event's time, and the OVERFLOW and heartbeat
    payloads. Each encoder decides when they change.

    Attributes
    ----------
    prev_cycle, ext, last_time, events, lost, epoch : Signal
        The last entry's capture cycle; its time (ticks, lane 0); the last event's time; events
        emitted and lost since the last reset; resets since power-on.
    pend, levels, ovf_count, ovf_span : Signal
        The current entry's edges not yet encoded, its levels, and its OVERFLOW fields.
    """

    def __init__(self, m, encoder):
        tw = encoder.time_width
        self.encoder, self.nbits = encoder, encoder.lanes * encoder.channels
        self.prev_cycle = Signal(encoder.counter_width, name="prev_cycle")
        self.ext = Signal(tw, name="ext")
        self.last_time = Signal(tw, name="last_time")
        self.events = Signal(tw, name="events")
        self.lost = Signal(tw, name="lost")
        self.epoch = Signal(8, name="epoch")
        m.d.comb += [encoder.time.eq(self.ext), encoder.events.eq(self.events),
                     encoder.lost.eq(self.lost), encoder.epoch.eq(self.epoch)]
        self.pend = Signal(self.nbits, name="pend")
        self.levels = Signal(self.nbits, name="levels")
        self.ovf_count = Signal(40, name="ovf_count")
        self.ovf_span = Signal(encoder.counter_width, name="ovf_span")

    def lowest_edge(self, m, pending):
        """``(lane, channel, rising, onehot)`` of the lowest set bit of ``pending`` (lane-major
        order is bit order)."""
        enc = self.encoder
        sel_lane = Signal(range(enc.lanes), name="sel_lane")
        sel_ch = Signal(3, name="sel_ch")
        sel_rise = Signal(name="sel_rise")
        sel_onehot = Signal(self.nbits, name="sel_onehot")
        for bit in reversed(range(self.nbits)):
            with m.If(pending[bit]):
                m.d.comb += [sel_lane.eq(bit // enc.channels), sel_ch.eq(bit % enc.channels),
                             sel_rise.eq(self.levels[bit]), sel_onehot.eq(1 << bit)]
        return sel_lane, sel_ch, sel_rise, sel_onehot

    def event_time(self, m, lane):
        """The time in ticks of an event in ``lane`` of the current entry."""
        t = Signal(self.encoder.time_width, name="t")
        if self.encoder.lanes & (self.encoder.lanes - 1):
            m.d.comb += t.eq(self.ext + lane)
        else:   # ext is a multiple of lanes: the lane fills its low bits, no adder needed
            m.d.comb += t.eq(self.ext | lane)
        return t

    def overflow_bits(self, m):
        """The OVERFLOW token's payload (its CONT bits, the first first) of the current entry."""
        ovf = Signal(Overflow, name="ovf")
        m.d.comb += [ovf.lost.eq(self.ovf_count), ovf.first_time.eq(self.ext),
                     ovf.span.eq((self.ovf_span + 1) * self.encoder.lanes)]
        return Cat(ovf.as_value(), C(0, CONT_BITS * OVERFLOW_CONT - len(ovf.as_value())))

    def heartbeat(self, m, high_water, status):
        """The heartbeat payload now, with ``high_water`` and ``status``."""
        hb = Signal(Heartbeat, name="hb")
        m.d.comb += [hb.time.eq(self.ext), hb.events.eq(self.events), hb.lost.eq(self.lost),
                     hb.fifo_high_water.eq(high_water), hb.status.eq(status),
                     hb.epoch.eq(self.epoch)]
        return hb


def token_sizes(m, delta):
    """``(ev_conts, time_conts, big)`` of an event ``delta`` ticks after the last: the CONT bytes
    an EVENT token needs, those a TIME token needs, and whether it needs the TIME token."""
    ev_conts = Signal(range(EVENT_MAX_CONT + 1), name="ev_conts")
    for n in reversed(range(EVENT_MAX_CONT + 1)):
        with m.If(delta[EVENT_FIRST_BITS + CONT_BITS * n:] == 0):
            m.d.comb += ev_conts.eq(n)
    time_conts = Signal(range(TIME_MAX_CONT + 1), name="time_conts")
    for n in reversed(range(1, TIME_MAX_CONT + 1)):
        with m.If(delta[TIME_FIRST_BITS + CONT_BITS * n:] == 0):
            m.d.comb += time_conts.eq(n)
    return ev_conts, time_conts, delta[EVENT_FIRST_BITS + EVENT_MAX_CONT * CONT_BITS:] != 0


class Encoder(EncoderBase):
    """Turns capture entries into token units.

    Parameters
    ----------
    channels : int
        Channels per lane, 1..8 (the EVENT token names 3 bits of channel).
    lanes : int
        Samples per capture cycle, 1..8.
    counter_width : int
        Bits of the capture cycle counter, 8..63.
    time_width : int
        Bits kept of the time in ticks and of the event and lost counts, 48..64 (the protocol's
        fields are 64 bits; narrower values are zero-extended). Below 64 the time wraps after
        ``2**time_width`` ticks: 34 days at 48 bits and 96 M ticks/s (the iCEBreaker, where the
        16 bits saved in each of six 64-bit registers and their adders are what make it fit).

    Attributes
    ----------
    entries : In(stream.Signature(capture_entry_layout(...)))
        From the capture FIFO's read side.
    units : Out(stream.Signature(LinkItem))
        To the :class:`~latscope.gateware.framer.Framer`.
    hb_high_water, hb_status : In
        FIFO high-water mark and status bits put into the next heartbeat.
    hb_sent : Out(1)
        Pulses when a heartbeat takes ``hb_high_water`` (restart the high-water measurement).
    time, events, lost, epoch : Out
        Current values (the STATUS command reports them): time of the last entry processed (ticks),
        events emitted and events lost since the last timestamp reset, resets since power-on.
    idle : Out(1)
        No entry is being processed.
    """

    def __init__(self, *, channels=8, lanes=2, counter_width=48, time_width=64):
        super().__init__(channels=channels, lanes=lanes, counter_width=counter_width,
                         time_width=time_width)

    def elaborate(self, platform):
        m = Module()
        nbits = self.lanes * self.channels
        entry = self.entries.payload
        units = self.units

        state = EncoderState(m, self)
        prev_cycle, ext, last_time = state.prev_cycle, state.ext, state.last_time
        events, lost, epoch = state.events, state.lost, state.epoch
        pend, levels = state.pend, state.levels
        ovf_count, ovf_span = state.ovf_count, state.ovf_span
        # The delta of the event being sent, shifted out. OVERFLOW and heartbeat payloads are not
        # shifted: their fields are registers that hold still while they are sent, and `pos`
        # selects the next 6-bit (OVERFLOW) or 8-bit (heartbeat) slice, which is far smaller than
        # a 224-bit shift register with four sources.
        sh = Signal(self.time_width)
        pos = Signal(range(max(_HB_BYTES, OVERFLOW_CONT) + 1))
        hb_hw = Signal(16)        # high-water mark and status, taken when the heartbeat starts
        hb_st = Signal(HeartbeatStatus)
        cnt = Signal(range(max(_HB_BYTES, OVERFLOW_CONT, TIME_MAX_CONT) + 1))
        length = Signal(5)
        big = Signal()            # the unit is TIME + EVENT
        channel = Signal(3)
        rising = Signal()

        m.d.comb += [
            units.payload.base_time.eq(last_time),
            units.payload.event_index.eq(events[:32]),
            units.payload.length.eq(length),
        ]

        sel_src = Signal(nbits)   # the pending edges to choose from (pend, or less the one sent)
        m.d.comb += sel_src.eq(pend)
        sel_lane, sel_ch, sel_rise, sel_onehot = state.lowest_edge(m, sel_src)
        # Timing (48 MHz on iCE40, where a 64-bit carry chain alone takes ~18 ns): the edge is
        # picked and registered one state ahead (in ADVANCE or in DONE of the previous edge),
        # the 64-bit delta is subtracted in two 32-bit halves (DELTA, DELTA_HI), its length is
        # decided from the registered delta (SIZE), and the 64-bit sums (time, event and lost
        # counts) are formed in two halves on consecutive cycles.
        sel_lane_r = Signal(range(self.lanes))
        sel_onehot_r = Signal(nbits)
        t = state.event_time(m, sel_lane_r)      # time of the selected event, ticks
        # the token's size from the registered delta in `sh`
        ev_conts, time_conts, big_delta = token_sizes(m, sh)
        is_big = Signal()
        m.d.comb += is_big.eq(big_delta)
        # The entry's advance in ticks is registered in IDLE and added in ADVANCE.
        step = Signal(self.counter_width + (self.lanes - 1).bit_length())
        kind = Signal(2)

        # OVERFLOW and heartbeat payloads, from registers that hold still while they are sent
        ovf_bits = state.overflow_bits(m)
        hb_bits = state.heartbeat(m, hb_hw, hb_st).as_value()

        half = 32
        ext_c = Signal()          # carries out of low halves, added to the high half next cycle
        ext_hi = Signal()         # the high half of `ext + step` is due this cycle
        borrow = Signal()
        ev_c = Signal()
        lost_c = Signal()
        lost_hi = Signal()        # the high half of `lost + ovf_count` is due this cycle
        step_hi = step[half:] if len(step) > half else C(0, 1)
        with m.If(ext_hi):
            m.d.sync += [ext[half:].eq(ext[half:] + step_hi + ext_c), ext_hi.eq(0)]
        with m.If(ev_c):
            m.d.sync += [events[half:].eq(events[half:] + 1), ev_c.eq(0)]
        with m.If(lost_hi):
            m.d.sync += [lost[half:].eq(lost[half:] + ovf_count[half:] + lost_c), lost_hi.eq(0)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.entries.ready.eq(1), self.idle.eq(~self.entries.valid)]
                with m.If(self.entries.valid):
                    m.d.sync += [
                        step.eq(((entry.cycle - prev_cycle)[:self.counter_width]) * self.lanes),
                        kind.eq(entry.kind), prev_cycle.eq(entry.cycle),
                        pend.eq(entry.payload.edges.edges),
                        levels.eq(entry.payload.edges.levels),
                        ovf_count.eq(entry.payload.lost.count),
                        ovf_span.eq(entry.payload.lost.span)]
                    m.next = "ADVANCE"

            with m.State("ADVANCE"):
                # the high half follows next cycle; only DELTA_HI, OVF_CONT and HB read it
                m.d.sync += [Cat(ext[:half], ext_c).eq(ext[:half] + step[:half]),
                             ext_hi.eq(1)]
                with m.Switch(kind):
                    with m.Case(EntryKind.EVENTS):
                        m.d.sync += [channel.eq(sel_ch), rising.eq(sel_rise),
                                     sel_lane_r.eq(sel_lane), sel_onehot_r.eq(sel_onehot)]
                        with m.If(pend == 0):
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "DELTA"
                    with m.Case(EntryKind.OVERFLOW):
                        m.next = "OVF_LOAD"
                    with m.Case(EntryKind.TICK):
                        m.next = "HB_LOAD"
                    with m.Case(ENTRY_RESET):
                        m.d.sync += [prev_cycle.eq(0), ext.eq(0), ext_hi.eq(0), last_time.eq(0),
                                     events.eq(0), lost.eq(0), epoch.eq(epoch + 1)]
                        m.next = "HB_LOAD"

            with m.State("DELTA"):
                m.d.sync += Cat(sh[:half], borrow).eq(Cat(t[:half], C(0, 1))
                                                      - Cat(last_time[:half], C(0, 1)))
                m.next = "DELTA_HI"

            with m.State("DELTA_HI"):
                m.d.sync += sh[half:].eq(t[half:] - last_time[half:] - borrow)
                m.next = "SIZE"

            with m.State("SIZE"):
                m.d.sync += big.eq(is_big)
                with m.If(is_big):
                    m.d.sync += [cnt.eq(time_conts), length.eq(time_conts + 2)]
                with m.Else():
                    m.d.sync += [cnt.eq(ev_conts), length.eq(ev_conts + 1)]
                m.next = "LEAD"

            with m.State("LEAD"):
                m.d.comb += [units.valid.eq(1), units.payload.first.eq(1)]
                with m.If(big):
                    m.d.comb += units.payload.data.eq(Token.TIME | sh[:TIME_FIRST_BITS])
                with m.Else():
                    m.d.comb += [units.payload.data.eq(Cat(sh[:EVENT_FIRST_BITS], rising, channel,
                                                           C(0, 1))),
                                 units.payload.last.eq(cnt == 0)]
                with m.If(units.ready):
                    with m.If(big):
                        m.d.sync += sh.eq(sh >> TIME_FIRST_BITS)
                        m.next = "CONT"
                    with m.Else():
                        m.d.sync += sh.eq(sh >> EVENT_FIRST_BITS)
                        with m.If(cnt == 0):
                            m.next = "DONE"
                        with m.Else():
                            m.next = "CONT"

            with m.State("CONT"):
                m.d.comb += [units.valid.eq(1), units.payload.data.eq(Token.CONT | sh[:CONT_BITS]),
                             units.payload.last.eq((cnt == 1) & ~big)]
                with m.If(units.ready):
                    m.d.sync += [sh.eq(sh >> CONT_BITS), cnt.eq(cnt - 1)]
                    with m.If((cnt == 1) & big):
                        m.next = "EVLEAD"
                    with m.Elif(cnt == 1):
                        m.next = "DONE"

            with m.State("EVLEAD"):      # the EVENT after a TIME token: delta 0
                m.d.comb += [units.valid.eq(1), units.payload.last.eq(1),
                             units.payload.data.eq(Cat(C(0, EVENT_FIRST_BITS), rising, channel,
                                                       C(0, 1)))]
                with m.If(units.ready):
                    m.next = "DONE"

            with m.State("DONE"):
                m.d.comb += sel_src.eq(pend & ~sel_onehot_r)
                m.d.sync += [last_time.eq(t), Cat(events[:half], ev_c).eq(events[:half] + 1),
                             pend.eq(sel_src), channel.eq(sel_ch), rising.eq(sel_rise),
                             sel_lane_r.eq(sel_lane), sel_onehot_r.eq(sel_onehot)]
                with m.If(sel_src == 0):
                    m.next = "IDLE"
                with m.Else():
                    # the next edge of the same entry is at most lanes - 1 < 2**EVENT_FIRST_BITS
                    # ticks later: a one-byte EVENT, no subtraction needed
                    m.d.sync += [sh.eq(sel_lane - sel_lane_r), big.eq(0), cnt.eq(0),
                                 length.eq(1)]
                    m.next = "LEAD"

            with m.State("OVF_LOAD"):
                m.d.sync += [pos.eq(0), cnt.eq(OVERFLOW_CONT), length.eq(1 + OVERFLOW_CONT)]
                m.next = "OVF_LEAD"

            with m.State("OVF_LEAD"):
                m.d.comb += [units.valid.eq(1), units.payload.first.eq(1),
                             units.payload.data.eq(Token.OVERFLOW)]
                with m.If(units.ready):
                    m.next = "OVF_CONT"

            with m.State("OVF_CONT"):
                m.d.comb += [units.valid.eq(1),
                             units.payload.data.eq(Token.CONT
                                                   | ovf_bits.word_select(pos, CONT_BITS)),
                             units.payload.last.eq(cnt == 1)]
                with m.If(units.ready):
                    m.d.sync += [pos.eq(pos + 1), cnt.eq(cnt - 1)]
                    with m.If(cnt == 1):
                        m.d.sync += [Cat(lost[:half], lost_c).eq(lost[:half] + ovf_count[:half]),
                                     lost_hi.eq(1)]
                        m.next = "IDLE"

            with m.State("HB_LOAD"):
                m.d.comb += self.hb_sent.eq(1)
                m.d.sync += [hb_hw.eq(self.hb_high_water), hb_st.eq(self.hb_status),
                             pos.eq(0), cnt.eq(_HB_BYTES), length.eq(_HB_BYTES)]
                m.next = "HB"

            with m.State("HB"):
                m.d.comb += [units.valid.eq(1), units.payload.heartbeat.eq(1),
                             units.payload.data.eq(hb_bits.word_select(pos, 8)),
                             units.payload.first.eq(cnt == _HB_BYTES),
                             units.payload.last.eq(cnt == 1), units.payload.flush.eq(cnt == 1)]
                with m.If(units.ready):
                    m.d.sync += [pos.eq(pos + 1), cnt.eq(cnt - 1)]
                    with m.If(cnt == 1):
                        m.next = "IDLE"
        return m
