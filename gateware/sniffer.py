"""Frame sniffers: one direction's MII or RMII data pins in, one summary per frame out, in the
PHY's own clock domain.

# Ref: IEEE Std 802.3-2018 §22.2 (MII), §3.2 (frame), §3.2.9 (FCS); RMII Specification rev. 1.2
# §5.3 (CRS_DV); IEEE 802.1Q-2018 §9.6; RFC 791 / RFC 1071 (IPv4 checksum); RFC 8200; RFC 768.

A :class:`FrameSniffer` is a deserialiser (nibbles or dibits to bytes, preamble and SFD stripped)
followed by a byte-serial parser: byte count, FCS check with ``amaranth.lib.crc``, RX_ER, runt and
oversize, Ethernet II with one 802.1Q tag, IPv4 (protocol, addresses, header checksum) or IPv6
(next header), UDP ports, whether the UDP payload begins with ``TRAFFIC_MAGIC`` (latscope's own
traffic) and a big-endian 32-bit sequence number at a configurable payload offset.
Bytes arrive at most every second cycle (MII: 2 nibbles; RMII: 4 dibits), so the parser has slack
and stays small. At the end of every ``DV`` pulse (``RX_DV``, ``CRS_DV`` or ``TX_EN``) it offers one
:class:`FrameEntry` on ``frames``, for a pulse without an SFD too (length 0), so the ``k``-th entry
belongs to the ``k``-th rising edge of the pin the capture front end timestamps. The behaviour is
specified by :func:`latscope.gateware.model_sniffer.parse_frame`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.wiring import In, Out

from .checks import rejected
from .protocol import OVERSIZE_BYTES, RUNT_BYTES, TRAFFIC_MAGIC, TRAFFIC_SEQ_OFFSET, FrameRecord

__all__ = ["FrameSniffer", "frame_entry_layout", "MAX_HEADER_BYTES"]

#: Largest number of leading frame bytes a sniffer can keep for the FRAME record.
MAX_HEADER_BYTES = 64

_VLAN, _IPV4, _IPV6, _UDP = 0x8100, 0x0800, 0x86DD, 17


def frame_entry_layout(header_bytes):
    """One sniffer output: the record (``frame_index``, ``direction`` and ``cls`` zero; the
    classifier fills them) and the frame's first ``header_bytes`` bytes, byte ``i`` in bits
    ``8i..8i+7`` (zero past the end of the frame)."""
    fields = {"record": FrameRecord}
    if header_bytes:
        fields["header"] = 8 * header_bytes
    return data.StructLayout(fields)


class FrameSniffer(wiring.Component):
    """Sniffer of one direction. Runs in ``sync``: rename it to the PHY's clock domain.

    Parameters
    ----------
    interface : str
        ``"mii"`` (4 data bits per clock, 25 MHz at 100 Mb/s) or ``"rmii"`` (2 bits per 50 MHz
        ``REF_CLK``; ``dv`` is ``CRS_DV``, whose end-of-frame toggling is decoded).
    header_bytes : int
        Leading frame bytes kept in each entry, 0 to :data:`MAX_HEADER_BYTES`.

    Attributes
    ----------
    dv, er : In(1)
        ``RX_DV``/``CRS_DV``/``TX_EN`` and ``RX_ER`` (tie to 0 where there is none).
    data : In(4 or 2)
        ``RXD``/``TXD``.
    seq_offset : In(16)
        Byte offset of the sequence number in the UDP payload; sample it only between frames
        (it may come through a synchroniser from another domain).
    frames : Out(stream.Signature(frame_entry_layout(header_bytes)))
        One entry per ``dv`` pulse, valid for one cycle; ``ready`` is not waited for (the
        consumer must take an entry per frame; a missed one shows as a gap in frame indices).
    """

    def __init__(self, *, interface="mii", header_bytes=0):
        with rejected(self):
            if interface not in ("mii", "rmii"):
                raise ValueError(f"Interface must be 'mii' or 'rmii', not {interface!r}")
            if not isinstance(header_bytes, int) or not 0 <= header_bytes <= MAX_HEADER_BYTES:
                raise ValueError(f"Header bytes must be an integer in 0..{MAX_HEADER_BYTES}, "
                                 f"not {header_bytes!r}")
        self.interface, self.header_bytes = interface, header_bytes
        width = 4 if interface == "mii" else 2
        super().__init__({
            "dv": In(1), "er": In(1), "data": In(width),
            "seq_offset": In(16, init=TRAFFIC_SEQ_OFFSET),
            "frames": Out(stream.Signature(frame_entry_layout(header_bytes))),
        })

    def elaborate(self, platform):
        m = Module()
        sof, byte_valid, byte, eof, odd = Signal(), Signal(), Signal(8), Signal(), Signal()
        er_seen = Signal()
        if self.interface == "mii":
            self._mii(m, sof, byte_valid, byte, eof, odd)
        else:
            self._rmii(m, sof, byte_valid, byte, eof, odd)
        with m.If(sof | eof):
            m.d.sync += er_seen.eq(0)
        with m.Elif(self.dv & self.er):
            m.d.sync += er_seen.eq(1)
        self._parse(m, sof, byte_valid, byte, eof, odd, er_seen)
        return m

    # --- deserialisers ---------------------------------------------------------------------------

    def _mii(self, m, sof, byte_valid, byte, eof, odd):
        in_pulse, in_data, phase, low = Signal(), Signal(), Signal(), Signal(4)
        m.d.sync += in_pulse.eq(self.dv)
        with m.If(self.dv):
            with m.If(~in_data & (self.data == 0xD)):
                m.d.sync += [in_data.eq(1), phase.eq(0)]
                m.d.comb += sof.eq(1)
            with m.Elif(in_data):
                m.d.sync += phase.eq(~phase)
                with m.If(phase == 0):
                    m.d.sync += low.eq(self.data)
                with m.Else():
                    m.d.comb += [byte_valid.eq(1), byte.eq(Cat(low, self.data))]
        with m.Elif(in_pulse):
            m.d.comb += [eof.eq(1), odd.eq(in_data & phase)]
            m.d.sync += in_data.eq(0)

    def _rmii(self, m, sof, byte_valid, byte, eof, odd):
        # RMII 1.2 §5.3.2: once carrier is lost CRS_DV is low on the first dibit of each nibble
        # and high on the second while data remains; low on a second dibit ends the frame. So a
        # first dibit is taken whatever CRS_DV says, and a second dibit with CRS_DV low ends the
        # frame and discards the first.
        in_pulse, in_data, last01 = Signal(), Signal(), Signal()
        phase = Signal(2)
        shift = Signal(6)
        m.d.sync += in_pulse.eq(self.dv | (in_data & ~phase[0]))
        with m.If(~in_data):
            with m.If(self.dv):
                m.d.sync += last01.eq(self.data == 0b01)
                with m.If(last01 & (self.data == 0b11)):
                    m.d.sync += [in_data.eq(1), phase.eq(0), last01.eq(0)]
                    m.d.comb += sof.eq(1)
            with m.Else():
                m.d.sync += last01.eq(0)
                with m.If(in_pulse):
                    m.d.comb += eof.eq(1)
        with m.Elif(~phase[0] | self.dv):
            m.d.sync += phase.eq(phase + 1)
            with m.If(phase == 3):
                m.d.comb += [byte_valid.eq(1), byte.eq(Cat(shift, self.data))]
            with m.Else():
                m.d.sync += shift.eq(Cat(shift[2:], self.data))
        with m.Else():
            # second dibit of a nibble with CRS_DV low: end of frame
            m.d.comb += [eof.eq(1), odd.eq(phase[1])]
            m.d.sync += [in_data.eq(0), last01.eq(0)]

    # --- parser ----------------------------------------------------------------------------------

    def _parse(self, m, sof, byte_valid, byte, eof, odd, er_seen):
        m.submodules.crc = crc = catalog.CRC32_ISO_HDLC(data_width=8).create()
        m.d.comb += [crc.start.eq(sof), crc.valid.eq(byte_valid), crc.data.eq(byte)]

        pos = Signal(16)                # bytes so far, saturating
        prev = Signal(8)                # the byte before this one
        word = Cat(byte, prev)          # big-endian 16-bit value ending at this byte
        vlan_tag, eth_end = Signal(), Signal(6)     # eth_end: 14 or 18 once the EtherType is in
        ethertype, tci = Signal(16), Signal(16)
        ip_ver, ihl = Signal(4), Signal(4)
        l3 = Signal(6, init=14)
        l4, ip_end = Signal(16, init=0xFFFF), Signal(16, init=0xFFFF)
        ip_proto = Signal(8)
        src_ip, dst_ip = Signal(32), Signal(32)
        csum = Signal(21)
        src_port, dst_port, udp_len = Signal(16), Signal(16), Signal(16)
        seq = Signal(32)
        magic = Signal()                # payload bytes 0..1 were TRAFFIC_MAGIC
        seq_offset = Signal(16, init=TRAFFIC_SEQ_OFFSET)
        header = Signal(max(8 * self.header_bytes, 1))

        rel3 = Signal(16)
        rel4 = Signal(16)
        m.d.comb += [rel3.eq(pos - l3), rel4.eq(pos - l4)]
        is_v4 = Signal()
        is_v6 = Signal()
        m.d.comb += [is_v4.eq((ethertype == _IPV4) & (pos >= l3) & (eth_end != 0)),
                     is_v6.eq((ethertype == _IPV6) & (pos >= l3) & (eth_end != 0))]

        # cleared at the end of each pulse as well, so a pulse without an SFD gives an empty entry
        with m.If(sof | eof):
            m.d.sync += [pos.eq(0), vlan_tag.eq(0), eth_end.eq(0), ethertype.eq(0), tci.eq(0),
                         ip_ver.eq(0), ihl.eq(0), l3.eq(14), l4.eq(0xFFFF), ip_end.eq(0xFFFF),
                         ip_proto.eq(0), src_ip.eq(0), dst_ip.eq(0), csum.eq(0),
                         src_port.eq(0), dst_port.eq(0), udp_len.eq(0), seq.eq(0), magic.eq(0),
                         seq_offset.eq(self.seq_offset), header.eq(0)]
        with m.Elif(byte_valid):
            m.d.sync += [prev.eq(byte), pos.eq(Mux(pos == 0xFFFF, pos, pos + 1))]
            if self.header_bytes:
                with m.If(pos < self.header_bytes):
                    m.d.sync += header.word_select(pos[:6], 8).eq(byte)
            # Ethernet II and one 802.1Q tag
            with m.If(pos == 13):
                with m.If(word == _VLAN):
                    m.d.sync += [vlan_tag.eq(1), l3.eq(18)]
                with m.Else():
                    m.d.sync += [ethertype.eq(word), eth_end.eq(14)]
            with m.If(vlan_tag & (pos == 15)):
                m.d.sync += tci.eq(word)
            with m.If(vlan_tag & (pos == 17)):
                m.d.sync += [ethertype.eq(word), eth_end.eq(18)]
            # IPv4: version/IHL, protocol, addresses, checksum over IHL words
            with m.If(is_v4):
                with m.If(rel3 == 0):
                    m.d.sync += [ip_ver.eq(byte[4:]), ihl.eq(byte[:4]),
                                 ip_end.eq(l3 + Cat(Const(0, 2), byte[:4])),
                                 l4.eq(l3 + Cat(Const(0, 2), byte[:4]))]
                with m.If(rel3 == 9):
                    m.d.sync += ip_proto.eq(byte)
                with m.If((rel3 >= 12) & (rel3 < 16)):
                    m.d.sync += src_ip.eq(Cat(byte, src_ip[:24]))
                with m.If((rel3 >= 16) & (rel3 < 20)):
                    m.d.sync += dst_ip.eq(Cat(byte, dst_ip[:24]))
                with m.If(rel3[0] & (pos < ip_end)):
                    m.d.sync += csum.eq(csum + word)
            # IPv6: version, next header; no extension headers
            with m.If(is_v6):
                with m.If(rel3 == 0):
                    m.d.sync += [ip_ver.eq(byte[4:]), ip_end.eq(l3 + 40), l4.eq(l3 + 40)]
                with m.If(rel3 == 6):
                    m.d.sync += ip_proto.eq(byte)
            # UDP: ports, length, sequence number
            with m.If((pos >= l4) & (ip_proto == _UDP)):
                with m.If(rel4 == 1):
                    m.d.sync += src_port.eq(word)
                with m.If(rel4 == 3):
                    m.d.sync += dst_port.eq(word)
                with m.If(rel4 == 5):
                    m.d.sync += udp_len.eq(word)
                with m.If(rel4 == 9):
                    m.d.sync += magic.eq(word == TRAFFIC_MAGIC)
                with m.If((rel4 >= seq_offset + 8) & (rel4 < seq_offset + 12)):
                    m.d.sync += seq.eq(Cat(byte, seq[:24]))

        # --- end of the pulse: validity from where each layer ended, then the entry ----------
        body = Signal(17)               # bytes before the FCS
        m.d.comb += body.eq(Mux(pos >= 4, pos - 4, 0))
        eth_ok = Signal()
        v4 = Signal()
        v6 = Signal()
        ip_ok = Signal()
        udp_ok = Signal()
        seq_ok = Signal()
        magic_ok = Signal()
        csum_fold = Signal(17)
        csum_final = Signal(16)
        m.d.comb += [
            eth_ok.eq((eth_end != 0) & (body >= eth_end)),
            v4.eq(eth_ok & (ethertype == _IPV4) & (ip_ver == 4) & (ihl >= 5) & (body >= ip_end)),
            v6.eq(eth_ok & (ethertype == _IPV6) & (ip_ver == 6) & (body >= ip_end)),
            ip_ok.eq(v4 | v6),
            udp_ok.eq(ip_ok & (ip_proto == _UDP) & (body >= l4 + 8)),
            seq_ok.eq(udp_ok & (udp_len >= seq_offset + 12) & (body >= l4 + seq_offset + 12)),
            magic_ok.eq(udp_ok & magic & (udp_len >= 10) & (body >= l4 + 10)),
            csum_fold.eq(csum[:16] + csum[16:]),
            csum_final.eq(csum_fold[:16] + csum_fold[16]),
        ]

        entry = Signal(frame_entry_layout(self.header_bytes))
        rec = entry.record
        m.d.sync += self.frames.valid.eq(eof)
        m.d.comb += self.frames.payload.eq(entry)
        with m.If(eof):
            m.d.sync += [
                rec.length.eq(pos),
                rec.flags.fcs_ok.eq((pos >= 4) & crc.match_detected),
                rec.flags.rx_er.eq(er_seen),
                rec.flags.runt.eq(pos < RUNT_BYTES),
                rec.flags.oversize.eq(pos > OVERSIZE_BYTES),
                rec.flags.vlan.eq(eth_ok & vlan_tag),
                rec.flags.ipv4.eq(v4),
                rec.flags.ipv6.eq(v6),
                rec.flags.ip_csum_ok.eq(v4 & (csum_final == 0xFFFF)),
                rec.flags.udp.eq(udp_ok),
                rec.flags.seq_valid.eq(seq_ok),
                rec.flags.odd_nibble.eq(odd),
                rec.flags.traffic_magic.eq(magic_ok),
                rec.ethertype.eq(Mux(eth_ok, ethertype, 0)),
                rec.vid.eq(Mux(eth_ok & vlan_tag, tci[:12], 0)),
                rec.dei.eq(Mux(eth_ok & vlan_tag, tci[12], 0)),
                rec.pcp.eq(Mux(eth_ok & vlan_tag, tci[13:], 0)),
                rec.ip_proto.eq(Mux(ip_ok, ip_proto, 0)),
                rec.src_ip.eq(Mux(v4, src_ip, 0)),
                rec.dst_ip.eq(Mux(v4, dst_ip, 0)),
                rec.src_port.eq(Mux(udp_ok, src_port, 0)),
                rec.dst_port.eq(Mux(udp_ok, dst_port, 0)),
                rec.seq.eq(Mux(seq_ok, seq, 0)),
            ]
            if self.header_bytes:
                m.d.sync += entry.header.eq(header)
