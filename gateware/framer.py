"""Framer: token units and replies in, framed bytes out (link clock domain).

Units from the :class:`~latscope.gateware.encoder.Encoder` fill one of two payload buffers in block
RAM while the other is sent, so encoding continues during transmission. A buffer closes when the
next unit would not fit in ``max_payload`` bytes, when the frame type changes (a heartbeat) or on a
``flush``. The sender emits each closed buffer as a frame (sync, type, version, seq, length,
EventsHeader for EVENTS frames, payload, CRC-32) and slips REPLY frames from the command handler in
between frames, and FRAME/COUNTERS records from the frame classifier (taking turns with the
EVENTS buffers when both wait). One ``seq`` counter numbers every frame sent.
"""

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .checks import rejected
from .encoder import MAX_UNIT_BYTES, LinkItem
from .protocol import (
    MAX_PAYLOAD,
    MAX_PAYLOAD_ACCEPTED,
    PROTOCOL_VERSION,
    SYNC_WORD,
    EventsHeader,
    FrameHeader,
    FrameType,
)

__all__ = ["ReplyByte", "RecordByte", "Framer"]

_FH_BYTES = FrameHeader.as_shape().size // 8
_EH_BYTES = EventsHeader.as_shape().size // 8


class ReplyByte(data.Struct):
    """One byte of a REPLY payload from the command handler; ``length`` (the payload's size) is
    constant while a reply is offered."""
    data:   8
    length: 16


class RecordByte(data.Struct):
    """One byte of a FRAME or COUNTERS payload from the frame classifier; ``length`` and
    ``type`` are constant while one record is offered."""
    data:   8
    length: 16
    type:   4     # FrameType


class Framer(wiring.Component):
    """Packs units into frames and sends them, with replies in between.

    Parameters
    ----------
    max_payload : int
        Token bytes per EVENTS frame (each of the two buffers holds this many), from
        ``MAX_UNIT_BYTES`` (29) to ``MAX_PAYLOAD_ACCEPTED - 12``.

    Attributes
    ----------
    units : In(stream.Signature(LinkItem))
        From the encoder.
    replies : In(stream.Signature(ReplyByte))
        REPLY payloads (ReplyHeader and data) from the command handler.
    records : In(stream.Signature(RecordByte))
        FRAME and COUNTERS payloads from the frame classifier (leave unconnected without one).
    tx : Out(stream.Signature(8))
        The framed bytes.
    idle : Out(1)
        Nothing buffered and nothing being sent.
    waiting : Out(1)
        Nothing being sent, no closed buffer, no unit and no reply offered: the state (a partly
        filled buffer included) changes only when the next unit or reply arrives. A partly filled
        buffer is closed only by a unit (one that does not fit, a heartbeat, a flush), never by
        the passing of time, so a simulator may skip cycles while this holds (see
        :class:`~latscope.gateware.top.LatscopeCore`'s ``fast_forward``).
    """

    def __init__(self, *, max_payload=MAX_PAYLOAD):
        limit = MAX_PAYLOAD_ACCEPTED - _EH_BYTES
        with rejected(self):
            if not isinstance(max_payload, int) or not MAX_UNIT_BYTES <= max_payload <= limit:
                raise TypeError(f"Maximum payload must be an integer in "
                                f"{MAX_UNIT_BYTES}..{limit}, not {max_payload!r}")
        self.max_payload = max_payload
        super().__init__({
            "units": In(stream.Signature(LinkItem)),
            "replies": In(stream.Signature(ReplyByte)),
            "records": In(stream.Signature(RecordByte)),
            "tx": Out(stream.Signature(8)),
            "idle": Out(1),
            "waiting": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        abits = ceil_log2(self.max_payload)
        m.submodules.mem = mem = Memory(shape=8, depth=2 << abits, init=[])
        wr = mem.write_port()
        rd = mem.read_port()
        m.submodules.crc = crc = catalog.CRC32_ISO_HDLC(data_width=8).create()

        # per-buffer state: closed (ready to send), payload length, type, EventsHeader
        full = Signal(2)
        blen = Array(Signal(range(self.max_payload + 1), name=f"len{i}") for i in range(2))
        bhb = Array(Signal(name=f"hb{i}") for i in range(2))
        bhdr = Array(Signal(_EH_BYTES * 8, name=f"eh{i}") for i in range(2))

        # --- filler ------------------------------------------------------------------------------
        unit = self.units.payload
        fill_sel = Signal()
        fill_len = Signal(range(self.max_payload + 1))
        fill_hb = Signal()
        close = Signal()
        close_len = Signal.like(fill_len)
        m.d.comb += [wr.addr.eq(Cat(fill_len[:abits], fill_sel)), wr.data.eq(unit.data)]
        with m.If(self.units.valid):
            with m.If((fill_len != 0) & unit.first
                      & ((fill_hb != unit.heartbeat)
                         | (fill_len + unit.length > self.max_payload))):
                m.d.comb += [close.eq(1), close_len.eq(fill_len)]
            with m.Elif(~full.bit_select(fill_sel, 1)):
                m.d.comb += [self.units.ready.eq(1), wr.en.eq(1)]
                m.d.sync += fill_len.eq(fill_len + 1)
                with m.If(fill_len == 0):
                    eh = Signal(EventsHeader)
                    m.d.comb += [eh.base_time.eq(unit.base_time),
                                 eh.event_index.eq(unit.event_index)]
                    m.d.sync += [fill_hb.eq(unit.heartbeat), bhb[fill_sel].eq(unit.heartbeat),
                                 bhdr[fill_sel].eq(eh)]
                with m.If(unit.last & unit.flush):
                    m.d.comb += [close.eq(1), close_len.eq(fill_len + 1)]
        with m.If(close):
            m.d.sync += [full.bit_select(fill_sel, 1).eq(1), blen[fill_sel].eq(close_len),
                         fill_sel.eq(~fill_sel), fill_len.eq(0)]

        # --- sender ------------------------------------------------------------------------------
        send_sel = Signal()
        seq = Signal(8)
        is_reply = Signal()
        is_record = Signal()
        record_turn = Signal()      # records and EVENTS buffers alternate when both wait
        hdr = Signal(FrameHeader)
        hdr_bytes = Signal(range(_FH_BYTES + _EH_BYTES + 1))
        head = Signal((_FH_BYTES + _EH_BYTES) * 8)
        m.d.comb += head.eq(Cat(hdr, bhdr[send_sel]))
        idx = Signal(16)
        plen = Signal(16)       # payload bytes after the header(s)
        ptr = Signal(abits)
        ptr_next = Signal(abits)
        m.d.comb += [ptr_next.eq(ptr), rd.addr.eq(Cat(ptr_next, send_sel))]
        m.d.sync += ptr.eq(ptr_next)
        # The CRC takes each byte one cycle after it was sent (a register between the byte
        # multiplexer and the CRC network keeps that path short); CRC_WAIT lets the last byte in.
        crc_byte = Signal(8)
        crc_take = Signal()
        crc_next = Signal()
        m.d.sync += [crc_byte.eq(self.tx.payload), crc_take.eq(crc_next)]
        m.d.comb += [crc.data.eq(crc_byte), crc.valid.eq(crc_take),
                     hdr.sync.eq(SYNC_WORD), hdr.version.eq(PROTOCOL_VERSION), hdr.seq.eq(seq)]
        handshake = Signal()
        m.d.comb += handshake.eq(self.tx.valid & self.tx.ready)

        with m.FSM():
            with m.State("IDLE"):
                waiting = ((full == 0) & ~self.units.valid & ~self.replies.valid
                           & ~self.records.valid)
                m.d.comb += [self.waiting.eq(waiting),
                             self.idle.eq((fill_len == 0) & (full == 0) & ~self.units.valid
                                          & ~self.records.valid)]
                m.d.sync += [idx.eq(0)]
                m.d.comb += crc.start.eq(1)
                buffer_ready = full.bit_select(send_sel, 1)
                with m.If(self.replies.valid):
                    m.d.sync += [is_reply.eq(1), is_record.eq(0), hdr.type.eq(FrameType.REPLY),
                                 hdr.length.eq(self.replies.payload.length),
                                 hdr_bytes.eq(_FH_BYTES),
                                 plen.eq(self.replies.payload.length)]
                    m.next = "HEADER"
                with m.Elif(self.records.valid & (record_turn | ~buffer_ready)):
                    m.d.sync += [is_reply.eq(0), is_record.eq(1), record_turn.eq(0),
                                 hdr.type.eq(self.records.payload.type),
                                 hdr.length.eq(self.records.payload.length),
                                 hdr_bytes.eq(_FH_BYTES), plen.eq(self.records.payload.length)]
                    m.next = "HEADER"
                with m.Elif(buffer_ready):
                    m.d.sync += [is_reply.eq(0), is_record.eq(0), record_turn.eq(1),
                                 plen.eq(blen[send_sel])]
                    with m.If(bhb[send_sel]):
                        m.d.sync += [hdr.type.eq(FrameType.HEARTBEAT),
                                     hdr.length.eq(blen[send_sel]), hdr_bytes.eq(_FH_BYTES)]
                    with m.Else():
                        m.d.sync += [hdr.type.eq(FrameType.EVENTS),
                                     hdr.length.eq(blen[send_sel] + _EH_BYTES),
                                     hdr_bytes.eq(_FH_BYTES + _EH_BYTES)]
                    m.next = "HEADER"

            with m.State("HEADER"):
                m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(head.word_select(idx, 8)),
                             crc_next.eq(handshake & (idx >= 2))]
                with m.If(self.tx.ready):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == hdr_bytes - 1):
                        m.d.sync += idx.eq(0)
                        with m.If(plen == 0):
                            m.next = "CRC_WAIT"
                        with m.Elif(is_reply):
                            m.next = "REPLY"
                        with m.Elif(is_record):
                            m.next = "RECORD"
                        with m.Else():
                            m.next = "PAYLOAD"

            with m.State("REPLY"):
                m.d.comb += [self.tx.valid.eq(self.replies.valid),
                             self.tx.payload.eq(self.replies.payload.data),
                             self.replies.ready.eq(self.tx.ready), crc_next.eq(handshake)]
                with m.If(handshake):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == plen - 1):
                        m.d.sync += idx.eq(0)
                        m.next = "CRC_WAIT"

            with m.State("RECORD"):
                m.d.comb += [self.tx.valid.eq(self.records.valid),
                             self.tx.payload.eq(self.records.payload.data),
                             self.records.ready.eq(self.tx.ready), crc_next.eq(handshake)]
                with m.If(handshake):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == plen - 1):
                        m.d.sync += idx.eq(0)
                        m.next = "CRC_WAIT"

            with m.State("PAYLOAD"):
                m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(rd.data),
                             crc_next.eq(handshake)]
                with m.If(self.tx.ready):
                    m.d.comb += ptr_next.eq(ptr + 1)
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == plen - 1):
                        m.d.comb += ptr_next.eq(0)
                        m.d.sync += idx.eq(0)
                        m.next = "CRC_WAIT"

            with m.State("CRC_WAIT"):
                m.next = "CRC"

            with m.State("CRC"):
                # the CRC register holds still here: no data and no start
                m.d.comb += [self.tx.valid.eq(1),
                             self.tx.payload.eq(crc.crc.word_select(idx[:2], 8))]
                with m.If(self.tx.ready):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == 3):
                        m.d.sync += seq.eq(seq + 1)
                        with m.If(~is_reply & ~is_record):
                            m.d.sync += [full.bit_select(send_sel, 1).eq(0),
                                         send_sel.eq(~send_sel)]
                        m.next = "IDLE"
        return m
