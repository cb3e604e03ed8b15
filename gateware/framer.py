"""Framer: token units and replies in, framed bytes out (link clock domain).

Units from the :class:`~latscope.gateware.encoder.Encoder` fill one of two payload buffers in block
RAM while the other is sent, so encoding continues during transmission. A buffer closes when the
next unit would not fit in ``max_payload`` bytes, when the frame type changes (a heartbeat) or on a
``flush``. The sender emits each closed buffer as a frame (sync, type, version, seq, length,
EventsHeader for EVENTS frames, payload, CRC-32) and slips REPLY frames from the command handler in
between frames, and FRAME/COUNTERS records from the frame classifier (taking turns with the
EVENTS buffers when both wait). One ``seq`` counter numbers every frame sent.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .checks import rejected
from .encoder import MAX_UNIT_BYTES, unit_layout
from .linkword import LinkWord, check_link_bytes, crc32_step
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
    link_bytes : int
        Stream bytes per cycle: 1, or 2 (the Ethernet build's two-byte path,
        :mod:`~latscope.gateware.linkword`): units come in words of two bytes and fill each
        buffer as two byte-wide banks (even and odd positions), headers, payloads and CRCs go out
        two bytes a cycle (a one-byte word only at the end of an odd-length payload, and for
        each REPLY and record byte, which come a byte per cycle).

    Attributes
    ----------
    units : In(stream.Signature(LinkItem))
        From the encoder (:class:`~latscope.gateware.encoder.LinkItemPair` with two link bytes).
    replies : In(stream.Signature(ReplyByte))
        REPLY payloads (ReplyHeader and data) from the command handler.
    records : In(stream.Signature(RecordByte))
        FRAME and COUNTERS payloads from the frame classifier (leave unconnected without one).
    tx : Out(stream.Signature(8))
        The framed bytes (:class:`~latscope.gateware.linkword.LinkWord` with two link bytes).
    idle : Out(1)
        Nothing buffered and nothing being sent.
    waiting : Out(1)
        Nothing being sent, no closed buffer, no unit and no reply offered: the state (a partly
        filled buffer included) changes only when the next unit or reply arrives. A partly filled
        buffer is closed only by a unit (one that does not fit, a heartbeat, a flush), never by
        the passing of time, so a simulator may skip cycles while this holds (see
        :class:`~latscope.gateware.top.LatscopeCore`'s ``fast_forward``).
    """

    def __init__(self, *, max_payload=MAX_PAYLOAD, link_bytes=1):
        limit = MAX_PAYLOAD_ACCEPTED - _EH_BYTES
        with rejected(self):
            if not isinstance(max_payload, int) or not MAX_UNIT_BYTES <= max_payload <= limit:
                raise TypeError(f"Maximum payload must be an integer in "
                                f"{MAX_UNIT_BYTES}..{limit}, not {max_payload!r}")
            check_link_bytes(link_bytes)
        self.max_payload, self.link_bytes = max_payload, link_bytes
        super().__init__({
            "units": In(stream.Signature(unit_layout(link_bytes))),
            "replies": In(stream.Signature(ReplyByte)),
            "records": In(stream.Signature(RecordByte)),
            "tx": Out(stream.Signature(8 if link_bytes == 1 else LinkWord)),
            "idle": Out(1),
            "waiting": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        wide = self.link_bytes == 2
        abits = ceil_log2(self.max_payload)
        if wide:
            # bank b holds the bytes at positions of parity b: a word of a unit lands in both
            # banks, whatever the position it starts at
            banks = [Memory(shape=8, depth=1 << abits, init=[]) for _ in range(2)]
            m.submodules.mem0, m.submodules.mem1 = banks
            wrs = [bank.write_port() for bank in banks]
            rds = [bank.read_port() for bank in banks]
        else:
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
        write = Signal()
        if wide:
            count = Signal(2)        # bytes in this word of the unit
            m.d.comb += count.eq(Mux(unit.two, 2, 1))
            after = fill_len + 1
            for b, port in enumerate(wrs):
                here = fill_len[0] == b      # the word's first byte goes to this bank
                m.d.comb += [
                    port.addr.eq(Cat(Mux(here, fill_len[1:abits], after[1:abits]), fill_sel)),
                    port.data.eq(Mux(here, unit.data[:8], unit.data[8:])),
                    port.en.eq(write & (here | unit.two))]
        else:
            count = 1
            m.d.comb += [wr.addr.eq(Cat(fill_len[:abits], fill_sel)), wr.data.eq(unit.data),
                         wr.en.eq(write)]
        with m.If(self.units.valid):
            with m.If((fill_len != 0) & unit.first
                      & ((fill_hb != unit.heartbeat)
                         | (fill_len + unit.length > self.max_payload))):
                m.d.comb += [close.eq(1), close_len.eq(fill_len)]
            with m.Elif(~full.bit_select(fill_sel, 1)):
                m.d.comb += [self.units.ready.eq(1), write.eq(1)]
                m.d.sync += fill_len.eq(fill_len + count)
                with m.If(fill_len == 0):
                    eh = Signal(EventsHeader)
                    m.d.comb += [eh.base_time.eq(unit.base_time),
                                 eh.event_index.eq(unit.event_index)]
                    m.d.sync += [fill_hb.eq(unit.heartbeat), bhb[fill_sel].eq(unit.heartbeat),
                                 bhdr[fill_sel].eq(eh)]
                with m.If(unit.last & unit.flush):
                    m.d.comb += [close.eq(1), close_len.eq(fill_len + count)]
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
        width = self.link_bytes
        ptr = Signal(abits - wide)              # the buffer's next byte (word, when wide)
        ptr_next = Signal.like(ptr)
        m.d.comb += ptr_next.eq(ptr)
        for port in (rds if wide else [rd]):
            m.d.comb += port.addr.eq(Cat(ptr_next, send_sel))
        m.d.sync += ptr.eq(ptr_next)
        tx_data = self.tx.payload.data if wide else self.tx.payload
        # The CRC takes each byte one cycle after it was sent (a register between the byte
        # multiplexer and the CRC network keeps that path short); CRC_WAIT lets the last byte in.
        crc_take = Signal()
        crc_next = Signal()
        m.d.sync += crc_take.eq(crc_next)
        if wide:
            # one or two bytes a cycle: the CRC register steps through both in one XOR network
            crc_word = Signal(16)
            crc_two = Signal()
            crc_start = Signal()
            crc_reg = Signal(32, init=0xFFFFFFFF)
            m.d.sync += [crc_word.eq(tx_data), crc_two.eq(self.tx.payload.two)]
            with m.If(crc_start):
                m.d.sync += crc_reg.eq(0xFFFFFFFF)
            with m.Elif(crc_take):
                m.d.sync += crc_reg.eq(Mux(crc_two,
                                           crc32_step(crc_reg, [crc_word[:8], crc_word[8:]]),
                                           crc32_step(crc_reg, [crc_word[:8]])))
            crc_value = ~crc_reg
            payload_data = Cat(rds[0].data, rds[1].data)
            payload_last = idx + 2 >= plen

            def two(value):
                return [self.tx.payload.two.eq(value)]
        else:
            crc_byte = Signal(8)
            m.d.sync += crc_byte.eq(self.tx.payload)
            m.d.comb += [crc.data.eq(crc_byte), crc.valid.eq(crc_take)]
            crc_start, crc_value = crc.start, crc.crc
            payload_data, payload_last = rd.data, idx == plen - 1

            def two(value):
                return []
        m.d.comb += [hdr.sync.eq(SYNC_WORD), hdr.version.eq(PROTOCOL_VERSION), hdr.seq.eq(seq)]
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
                m.d.comb += crc_start.eq(1)
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
                # the sync word (2 bytes, outside the CRC) is a whole word on the wide path
                m.d.comb += [self.tx.valid.eq(1), tx_data.eq(head.word_select(idx, 8 * width)),
                             *two(1), crc_next.eq(handshake & (idx >= 2 // width))]
                with m.If(self.tx.ready):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == (hdr_bytes[1:] if wide else hdr_bytes) - 1):
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
                             tx_data.eq(self.replies.payload.data),
                             self.replies.ready.eq(self.tx.ready), crc_next.eq(handshake)]
                with m.If(handshake):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == plen - 1):
                        m.d.sync += idx.eq(0)
                        m.next = "CRC_WAIT"

            with m.State("RECORD"):
                m.d.comb += [self.tx.valid.eq(self.records.valid),
                             tx_data.eq(self.records.payload.data),
                             self.records.ready.eq(self.tx.ready), crc_next.eq(handshake)]
                with m.If(handshake):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == plen - 1):
                        m.d.sync += idx.eq(0)
                        m.next = "CRC_WAIT"

            with m.State("PAYLOAD"):
                m.d.comb += [self.tx.valid.eq(1), tx_data.eq(payload_data),
                             *two(idx + 2 <= plen), crc_next.eq(handshake)]
                with m.If(self.tx.ready):
                    m.d.comb += ptr_next.eq(ptr + 1)
                    m.d.sync += idx.eq(idx + width)
                    with m.If(payload_last):
                        m.d.comb += ptr_next.eq(0)
                        m.d.sync += idx.eq(0)
                        m.next = "CRC_WAIT"

            with m.State("CRC_WAIT"):
                m.next = "CRC"

            with m.State("CRC"):
                # the CRC register holds still here: no data and no start
                m.d.comb += [self.tx.valid.eq(1), *two(1),
                             tx_data.eq(crc_value.word_select(idx[:2 // width], 8 * width))]
                with m.If(self.tx.ready):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == 4 // width - 1):
                        m.d.sync += seq.eq(seq + 1)
                        with m.If(~is_reply & ~is_record):
                            m.d.sync += [full.bit_select(send_sel, 1).eq(0),
                                         send_sel.eq(~send_sel)]
                        m.next = "IDLE"
        return m
