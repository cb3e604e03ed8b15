"""Frame classifier: sniffer entries of both directions in, FRAME and COUNTERS record bytes out
(link clock domain).

:class:`FrameClassifier` numbers each direction's frames, gives each a class from the direction's
rule table (first enabled match wins, else class 0), counts it in the class's running totals and,
if the class is recorded, queues its FRAME record. Every ``2**shift`` cycles it queues one COUNTERS
record per direction and class. A record the queue has no room for is counted in ``dropped``, so
every frame is accounted for. The queue is read out byte by byte, little-endian, for the framer.
:func:`latscope.gateware.model_sniffer.classify` is the reference of the rule table.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .checks import rejected
from .framer import RecordByte
from .protocol import (
    NUM_CLASSES,
    TRAFFIC_SEQ_OFFSET,
    ClassRule,
    CounterRecord,
    FrameRecord,
    FrameType,
    Opcode,
)
from .sniffer import MAX_HEADER_BYTES, frame_entry_layout

__all__ = ["FrameClassifier", "RecordByte", "ConfigWrite", "CONFIG_ARG_BYTES"]

#: Argument bytes of opcodes 0x10..0x13, longest first (SET_RULE: index byte + ClassRule).
CONFIG_ARG_BYTES = {Opcode.SET_RULE: 1 + ClassRule.as_shape().size // 8, Opcode.SET_CLASS_MODE: 2,
                    Opcode.SET_SEQ_OFFSET: 2, Opcode.SET_COUNTER_PERIOD: 1}
_FR_BYTES = FrameRecord.as_shape().size // 8
_CR_BYTES = CounterRecord.as_shape().size // 8


class ConfigWrite(data.Struct):
    """A frame-capture command from the command handler: opcode and its argument bytes (byte 0 in
    bits 0..7)."""
    opcode: 8
    args:   8 * max(CONFIG_ARG_BYTES.values())


class FrameClassifier(wiring.Component):
    """Classifies, counts and records the frames of both directions.

    Parameters
    ----------
    rules : int
        Rule table entries per direction, 1 to 128.
    classes : int
        Classes counted per direction, 1 to ``NUM_CLASSES``; rules naming a higher class assign
        class 0.
    header_bytes : int
        Frame bytes each entry carries (the sniffers' ``header_bytes``).
    queue_depth : int
        Records the queue holds while the link is busy.

    Attributes
    ----------
    rx, tx : In(stream.Signature(frame_entry_layout(header_bytes)))
        Sniffer entries, after the clock-domain crossing. Always ready.
    config : In(stream.Signature(ConfigWrite))
        Opcodes SET_RULE, SET_CLASS_MODE, SET_SEQ_OFFSET, SET_COUNTER_PERIOD. Always ready.
    clear : In(1)
        Timestamp reset: frame indices and totals restart at 0.
    seq_offset : Out(16)
        For the sniffers (cross it into their domains).
    records : Out(stream.Signature(RecordByte))
        FRAME and COUNTERS payloads for the framer.
    """

    def __init__(self, *, rules=4, classes=4, header_bytes=0, queue_depth=16):
        with rejected(self):
            if not isinstance(rules, int) or not 1 <= rules <= 128:
                raise ValueError(f"Rule count must be an integer in 1..128, not {rules!r}")
            if not isinstance(classes, int) or not 1 <= classes <= NUM_CLASSES:
                raise ValueError(f"Class count must be an integer in 1..{NUM_CLASSES}, "
                                 f"not {classes!r}")
            if not isinstance(header_bytes, int) or not 0 <= header_bytes <= MAX_HEADER_BYTES:
                raise ValueError(f"Header bytes must be an integer in 0..{MAX_HEADER_BYTES}, "
                                 f"not {header_bytes!r}")
            if not isinstance(queue_depth, int) or queue_depth < 2:
                raise ValueError(f"Queue depth must be an integer >= 2, not {queue_depth!r}")
        self.rules, self.classes = rules, classes
        self.header_bytes, self.queue_depth = header_bytes, queue_depth
        entry = frame_entry_layout(header_bytes)
        super().__init__({
            "rx": In(stream.Signature(entry)),
            "tx": In(stream.Signature(entry)),
            "config": In(stream.Signature(ConfigWrite)),
            "clear": In(1),
            "seq_offset": Out(16, init=TRAFFIC_SEQ_OFFSET),
            "records": Out(stream.Signature(RecordByte)),
        })

    def elaborate(self, platform):
        m = Module()
        nc, nr, hb = self.classes, self.rules, self.header_bytes
        frame_bits = 8 * (_FR_BYTES + hb)
        width = max(frame_bits, 8 * _CR_BYTES)
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=width + 1,
                                                           depth=self.queue_depth)

        # --- configuration -----------------------------------------------------------------------
        table = [[Signal(ClassRule, name=f"rule_{d}_{i}") for i in range(nr)] for d in range(2)]
        record_mask = [Signal(8, init=0xFF, name=f"record_mask_{d}") for d in range(2)]
        shift = Signal(6)
        seq_offset = Signal(16, init=TRAFFIC_SEQ_OFFSET)
        m.d.comb += [self.config.ready.eq(1), self.seq_offset.eq(seq_offset)]
        cfg = self.config.payload
        with m.If(self.config.valid):
            with m.Switch(cfg.opcode):
                with m.Case(Opcode.SET_RULE):
                    rule = cfg.args[8:8 + ClassRule.as_shape().size]
                    for d in range(2):
                        for i in range(nr):
                            with m.If((cfg.args[7] == d) & (cfg.args[:7] == i)):
                                m.d.sync += table[d][i].eq(rule)
                with m.Case(Opcode.SET_CLASS_MODE):
                    for d in range(2):
                        with m.If(cfg.args[:8] == d):
                            m.d.sync += record_mask[d].eq(cfg.args[8:16])
                with m.Case(Opcode.SET_SEQ_OFFSET):
                    m.d.sync += seq_offset.eq(cfg.args[:16])
                with m.Case(Opcode.SET_COUNTER_PERIOD):
                    m.d.sync += shift.eq(Mux(cfg.args[:8] > 40, 40, cfg.args[:6]))

        # --- stage 1: take an entry (RX first), classify, number --------------------------------
        index = [Signal(32, name=f"index_{d}") for d in range(2)]
        take_rx = Signal()
        take_tx = Signal()
        # TX waits a cycle when both offer; entries arrive at most once per frame time per side
        m.d.comb += [take_rx.eq(self.rx.valid), take_tx.eq(self.tx.valid & ~self.rx.valid),
                     self.rx.ready.eq(1), self.tx.ready.eq(take_tx)]
        entry_in = Signal(frame_entry_layout(hb))
        dir_in = Signal()
        m.d.comb += [entry_in.eq(Mux(take_rx, self.rx.payload, self.tx.payload)),
                     dir_in.eq(~take_rx)]
        cls_in = Signal(3)
        rec_in = entry_in.record
        for d in range(2):
            with m.If(dir_in == d):
                # lowest index wins: assign in reverse so the first match is the last assignment
                for rule in reversed(table[d]):
                    port_ok = rec_in.flags.udp & (
                        (rule.port_dst & (rec_in.dst_port >= rule.port_lo)
                         & (rec_in.dst_port <= rule.port_hi))
                        | (rule.port_src & (rec_in.src_port >= rule.port_lo)
                           & (rec_in.src_port <= rule.port_hi)))
                    hit = (rule.enable
                           & (~rule.match_ethertype | (rec_in.ethertype == rule.ethertype))
                           & (~rule.match_pcp | (rec_in.pcp == rule.pcp))
                           & (~rule.match_ip_proto | (rec_in.ip_proto == rule.ip_proto))
                           & (~rule.match_port | port_ok))
                    with m.If(hit):
                        m.d.comb += cls_in.eq(Mux(rule.cls < nc, rule.cls, 0))

        s2_valid = Signal()
        s2 = Signal(frame_entry_layout(hb))
        m.d.sync += s2_valid.eq(take_rx | take_tx)
        with m.If(take_rx | take_tx):
            idx = Mux(dir_in, index[1], index[0])
            m.d.sync += [s2.eq(entry_in), s2.record.direction.eq(dir_in),
                         s2.record.cls.eq(cls_in), s2.record.frame_index.eq(idx)]
            for d in range(2):
                with m.If(dir_in == d):
                    m.d.sync += index[d].eq(index[d] + 1)

        # --- stage 2: count, queue the record if recorded ---------------------------------------
        def totals(name, width):
            return Array(Array(Signal(width, name=f"{name}_{d}_{c}") for c in range(nc))
                         for d in range(2))
        frames, errors, dropped = totals("frames", 32), totals("errors", 32), totals("dropped", 32)
        octets = totals("octets", 48)
        counted = Array(Signal(32, name=f"counted_{d}") for d in range(2))
        r2 = s2.record
        mask2 = Mux(r2.direction, record_mask[1], record_mask[0])
        want = Signal()
        frame_write = Signal()
        m.d.comb += [want.eq(s2_valid & mask2.bit_select(r2.cls, 1)),
                     frame_write.eq(want & queue.w_rdy)]
        with m.If(s2_valid):
            d, c = r2.direction, r2.cls
            m.d.sync += [frames[d][c].eq(frames[d][c] + 1),
                         octets[d][c].eq(octets[d][c] + r2.length),
                         counted[d].eq(counted[d] + 1)]
            with m.If(~r2.flags.fcs_ok | r2.flags.rx_er):
                m.d.sync += errors[d][c].eq(errors[d][c] + 1)
            with m.If(want & ~queue.w_rdy):
                m.d.sync += dropped[d][c].eq(dropped[d][c] + 1)

        # --- counter snapshots -------------------------------------------------------------------
        timer = Signal(41)
        walk = Signal(range(2 * nc + 1), init=2 * nc)        # 2*nc: not walking
        counter_write = Signal()
        m.d.sync += timer.eq(timer + 1)
        with m.If((shift != 0) & (timer == (Const(1, 41) << shift) - 1)):
            m.d.sync += timer.eq(0)
            with m.If(walk == 2 * nc):
                m.d.sync += walk.eq(0)
        with m.If(shift == 0):
            m.d.sync += timer.eq(0)
        cr = Signal(CounterRecord)
        wd, wc = walk[0], walk[1:]
        m.d.comb += [cr.direction.eq(wd), cr.cls.eq(wc), cr.frames_seen.eq(counted[wd]),
                     cr.frames.eq(frames[wd][wc]), cr.fcs_errors.eq(errors[wd][wc]),
                     cr.dropped.eq(dropped[wd][wc]), cr.octets.eq(octets[wd][wc])]
        with m.If((walk != 2 * nc) & ~want & queue.w_rdy & ~s2_valid):
            # not in a cycle that counts a frame, so the snapshot's totals agree with frames_seen
            m.d.comb += counter_write.eq(1)
            m.d.sync += walk.eq(walk + 1)

        m.d.comb += [queue.w_en.eq(frame_write | counter_write),
                     queue.w_data.eq(Mux(frame_write, Cat(s2, Const(0, 1 + width - frame_bits)),
                                         Cat(cr, Const(0, width - 8 * _CR_BYTES), Const(1, 1))))]

        with m.If(self.clear):
            m.d.sync += [index[0].eq(0), index[1].eq(0), counted[0].eq(0), counted[1].eq(0),
                         s2_valid.eq(0)]
            for d in range(2):
                for c in range(nc):
                    m.d.sync += [frames[d][c].eq(0), errors[d][c].eq(0), dropped[d][c].eq(0),
                                 octets[d][c].eq(0)]

        # --- serialiser ----------------------------------------------------------------------
        is_counter = queue.r_data[width]
        nbytes = Mux(is_counter, _CR_BYTES, _FR_BYTES + hb)
        pos = Signal(range(max(_FR_BYTES + hb, _CR_BYTES)))
        out = self.records
        m.d.comb += [out.valid.eq(queue.r_rdy),
                     out.payload.data.eq(queue.r_data[:width].word_select(pos, 8)),
                     out.payload.length.eq(nbytes),
                     out.payload.type.eq(Mux(is_counter, FrameType.COUNTERS, FrameType.FRAME))]
        with m.If(out.valid & out.ready):
            m.d.sync += pos.eq(pos + 1)
            with m.If(pos == nbytes - 1):
                m.d.sync += pos.eq(0)
                m.d.comb += queue.r_en.eq(1)
        return m
