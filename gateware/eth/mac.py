"""Ethernet MAC, UDP/IPv4 streamer and ARP/UDP receiver, one byte per cycle in the ``eth`` domain.

# Ref: IEEE Std 802.3-2018 §3.2, §4.2.3.2.2 (preamble, FCS, 12-byte gap), RFC 791, RFC 768, RFC 826.

:class:`UdpStreamer` cuts the framer's byte stream into UDP datagrams (the rule of
:class:`~latscope.gateware.eth.model.DatagramPacker`) in two block-RAM buffers, one filling while
the other is sent, and sends them, and ARP replies, as whole Ethernet frames with preamble, padding,
FCS and inter-frame gap. :class:`EthReceiver` checks received frames (FCS, addresses, IPv4 header
checksum), answers ARP requests for the instrument's address through the streamer, learns the
host that sent the last command (the destination of the stream) and passes command datagrams on.
:mod:`latscope.gateware.eth.model` is the reference for every byte.
"""

from amaranth.hdl import Array, C, Cat, DomainRenamer, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..checks import rejected
from .model import ETH_HEADER, IP_HEADER, MAX_UDP_PAYLOAD, MIN_FRAME, UDP_HEADER
from .net import NetLayout

__all__ = ["DestLayout", "ArpLayout", "TxByte", "RxByte", "UdpStreamer",
           "EthReceiver", "frame_tracker"]

#: Where the stream goes: the host that sent the last valid command datagram.
DestLayout = data.StructLayout({"valid": 1, "mac": 48, "ip": 32, "port": 16})
#: An ARP request to answer: the requester's hardware and protocol addresses.
ArpLayout = data.StructLayout({"valid": 1, "mac": 48, "ip": 32})
#: One byte time on the GMII-like side of the MAC: enable and data.
TxByte = data.StructLayout({"en": 1, "data": 8})
#: A received byte after the preamble; ``last`` marks the final FCS byte of a frame.
RxByte = data.StructLayout({"data": 8, "last": 1})

_HEADER_BYTES = ETH_HEADER + IP_HEADER + UDP_HEADER       # 42, and 14 + 28 for ARP: also 42
_GAP = 12


def _be(value, nbytes):
    """``value``'s bytes most significant first, as a Cat whose lowest byte is sent first."""
    return Cat(*(value.word_select(nbytes - 1 - i, 8) for i in range(nbytes)))


def frame_tracker(m, domain, byte, accept, *, two=None):
    """Logic that follows stream-frame boundaries in a byte stream (``docs/stream-format.md``):
    returns ``(at_boundary, frame_ends)``; ``at_boundary`` is high before the first byte of a
    frame, ``frame_ends`` in the cycle the last byte of a frame is accepted. With ``two`` (a
    :class:`~latscope.gateware.linkword.LinkWord` stream: ``byte`` its 16 data bits, ``two`` its
    flag) a transfer is one or two bytes; frames start in a word's low byte, so the length
    field (bytes 4 and 5) is one whole word."""
    pos = Signal(16)
    length_lo = Signal(8)
    last_pos = Signal(16)
    ends = Signal()
    top = pos if two is None else pos + two     # where the last byte accepted now is
    m.d.comb += ends.eq(accept & (top > 5) & (top == last_pos))
    with m.If(accept):
        with m.If(ends):
            m.d[domain] += pos.eq(0)
        with m.Else():
            m.d[domain] += pos.eq(top + 1)
        # header 6 + payload + CRC 4 bytes: the last byte is at payload + 9
        if two is None:
            with m.If(pos == 4):
                m.d[domain] += length_lo.eq(byte)
            with m.If(pos == 5):
                m.d[domain] += last_pos.eq(Cat(length_lo, byte) + 9)
        else:
            with m.If(pos == 4):
                m.d[domain] += last_pos.eq(byte[:16] + 9)
    return pos == 0, ends


class UdpStreamer(wiring.Component):
    """Stream bytes in, Ethernet frames (UDP datagrams and ARP replies) out; ``eth`` domain.

    Parameters
    ----------
    max_frame : int
        Longest stream frame the framer emits, bytes (sets the closing threshold).
    idle_cycles : int
        Cycles without a stream byte after which a datagram ending on a frame boundary is sent.
    buffer_bytes : int
        Bytes per datagram buffer (two are used), a power of two >= :data:`MAX_UDP_PAYLOAD`.

    Attributes
    ----------
    stream_in : In(stream.Signature(8))
        The framer's bytes.
    net : In(NetLayout)
        Own addresses.
    dest : In(DestLayout)
        Destination of datagrams; closed datagrams are dropped (counted) while not ``valid``.
    arp : In(ArpLayout)
        A pending ARP request; answered before the next datagram. ``arp_done`` pulses when sent.
    tx : Out(TxByte)
        Byte per cycle to the PHY (preamble and FCS included), registered.
    sent, dropped : Out(32)
        Datagrams sent, and datagrams dropped for want of a destination.
    """

    def __init__(self, *, max_frame, idle_cycles=1024, buffer_bytes=2048):
        with rejected(self):
            if not isinstance(max_frame, int) or not 10 <= max_frame <= MAX_UDP_PAYLOAD:
                raise TypeError(f"Longest stream frame must be an integer in "
                                f"10..{MAX_UDP_PAYLOAD}, not {max_frame!r}")
            if not isinstance(idle_cycles, int) or idle_cycles < 1:
                raise TypeError(f"Idle cycles must be a positive integer, not {idle_cycles!r}")
            if (not isinstance(buffer_bytes, int) or buffer_bytes < MAX_UDP_PAYLOAD
                    or buffer_bytes & (buffer_bytes - 1)):
                raise TypeError(f"Buffer size must be a power of two >= {MAX_UDP_PAYLOAD}, "
                                f"not {buffer_bytes!r}")
        self.threshold = MAX_UDP_PAYLOAD - max_frame
        self.idle_cycles, self.buffer_bytes = idle_cycles, buffer_bytes
        super().__init__({
            "stream_in": In(stream.Signature(8)),
            "net": In(NetLayout),
            "dest": In(DestLayout),
            "arp": In(ArpLayout),
            "arp_done": Out(1),
            "tx": Out(TxByte),
            "sent": Out(32),
            "dropped": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        d = m.d.eth
        abits = ceil_log2(self.buffer_bytes)
        m.submodules.mem = mem = Memory(shape=8, depth=2 << abits, init=[])
        wr = mem.write_port(domain="eth")
        rd = mem.read_port(domain="eth")
        m.submodules.crc = crc = DomainRenamer({"sync": "eth"})(
            catalog.CRC32_ISO_HDLC(data_width=8).create())

        # --- packer: stream bytes into the buffer being filled ---------------------------------
        full = Signal(2)
        blen = Array(Signal(abits + 1, name=f"blen{i}") for i in range(2))
        fill_sel = Signal()
        fill_len = Signal(abits + 1)
        set_full = Signal()
        clr_full = Signal()
        send_sel = Signal()
        inp = self.stream_in
        accept = Signal()
        m.d.comb += [inp.ready.eq(~full.bit_select(fill_sel, 1)), accept.eq(inp.valid & inp.ready),
                     wr.addr.eq(Cat(fill_len[:abits], fill_sel)), wr.data.eq(inp.payload),
                     wr.en.eq(accept)]
        at_boundary, frame_ends = frame_tracker(m, "eth", inp.payload, accept)
        idle = Signal(range(self.idle_cycles + 1))
        with m.If(accept):
            d += idle.eq(0)
        with m.Elif(idle != self.idle_cycles):
            d += idle.eq(idle + 1)
        close = Signal()
        close_len = Signal.like(fill_len)
        with m.If(frame_ends & (fill_len + 1 >= self.threshold)):
            m.d.comb += [close.eq(1), close_len.eq(fill_len + 1)]
        with m.Elif(~accept & (idle == self.idle_cycles) & at_boundary & (fill_len != 0)):
            m.d.comb += [close.eq(1), close_len.eq(fill_len)]
        with m.If(close):
            d += [blen[fill_sel].eq(close_len), fill_sel.eq(~fill_sel), fill_len.eq(0)]
            m.d.comb += set_full.eq(1)
        with m.Elif(accept):
            d += fill_len.eq(fill_len + 1)
        set_mask = Mux(set_full, Mux(fill_sel, 0b10, 0b01), 0)
        clr_mask = Mux(clr_full, Mux(send_sel, 0b10, 0b01), 0)
        d += full.eq((full | set_mask) & ~clr_mask)

        # --- sender ------------------------------------------------------------------------------
        is_arp = Signal()
        h_dmac, h_smac = Signal(48), Signal(48)
        h_dip, h_sip = Signal(32), Signal(32)
        h_dport, h_sport = Signal(16), Signal(16)
        pay_len = Signal(abits + 1)
        ident = Signal(16)
        acc = Signal(20)
        k = Signal(3)
        csum = Signal(16)
        shift = Signal(8 * _HEADER_BYTES)
        count = Signal(11)        # frame bytes sent (no preamble), saturating use only below 64
        pidx = Signal(abits + 1)
        raddr = Signal(abits + 1)
        next_raddr = Signal(abits + 1)
        byte = Signal(8)
        en = Signal()
        crc_on = Signal()
        m.d.comb += [rd.addr.eq(Cat(next_raddr[:abits], send_sel)), crc.data.eq(byte),
                     crc.valid.eq(crc_on)]
        d += raddr.eq(next_raddr)
        d += [self.tx.en.eq(en), self.tx.data.eq(byte)]

        ip_total = Signal(16)
        m.d.comb += ip_total.eq(IP_HEADER + UDP_HEADER + pay_len)
        words = Array([ip_total, ident, h_sip[16:], h_sip[:16], h_dip[16:], h_dip[:16]])
        udp_header = Cat(
            _be(h_dmac, 6), _be(h_smac, 6), _be(C(0x0800, 16), 2),
            _be(C(0x4500, 16), 2), _be(ip_total, 2), _be(ident, 2), _be(C(0x4000, 16), 2),
            _be(C(0x4011, 16), 2), _be(csum, 2), _be(h_sip, 4), _be(h_dip, 4),
            _be(h_sport, 2), _be(h_dport, 2), _be((ip_total - IP_HEADER)[:16], 2), C(0, 16))
        arp_header = Cat(
            _be(h_dmac, 6), _be(h_smac, 6), _be(C(0x0806, 16), 2),
            _be(C(0x0001, 16), 2), _be(C(0x0800, 16), 2), C(6, 8), C(4, 8), _be(C(2, 16), 2),
            _be(h_smac, 6), _be(h_sip, 4), _be(h_dmac, 6), _be(h_dip, 4))
        assert len(udp_header) == len(arp_header) == 8 * _HEADER_BYTES
        net, dest, arp = self.net, self.dest, self.arp
        n_pre = Signal(3)
        n_fcs = Signal(2)
        n_gap = Signal(range(_GAP + 1))

        with m.FSM(domain="eth"):
            with m.State("IDLE"):
                with m.If(arp.valid):
                    d += [is_arp.eq(1), h_dmac.eq(arp.mac), h_dip.eq(arp.ip), h_smac.eq(net.mac),
                          h_sip.eq(net.ip), pay_len.eq(0)]
                    m.d.comb += self.arp_done.eq(1)
                    m.next = "LOAD"
                with m.Elif(full.bit_select(send_sel, 1)):
                    with m.If(dest.valid):
                        d += [is_arp.eq(0), h_dmac.eq(dest.mac), h_dip.eq(dest.ip),
                              h_dport.eq(dest.port), h_smac.eq(net.mac), h_sip.eq(net.ip),
                              h_sport.eq(net.port), pay_len.eq(blen[send_sel]),
                              acc.eq(0x4500 + 0x4000 + 0x4011), k.eq(0)]
                        m.next = "CSUM"
                    with m.Else():
                        m.d.comb += clr_full.eq(1)
                        d += [send_sel.eq(~send_sel), self.dropped.eq(self.dropped + 1)]
            with m.State("CSUM"):
                # IPv4 header checksum, one 16-bit word per cycle (RFC 791; 1071 §1)
                d += [acc.eq(acc + words[k]), k.eq(k + 1)]
                with m.If(k == len(words) - 1):
                    m.next = "FOLD"
            with m.State("FOLD"):
                folded = acc[:16] + acc[16:]
                d += csum.eq(~(folded[:16] + folded[16:])[:16])
                m.next = "LOAD"
            with m.State("LOAD"):
                d += [shift.eq(Mux(is_arp, arp_header, udp_header)), n_pre.eq(0), count.eq(0),
                      pidx.eq(0)]
                m.next = "PREAMBLE"
            with m.State("PREAMBLE"):
                m.d.comb += [en.eq(1), byte.eq(Mux(n_pre == 7, 0xD5, 0x55))]
                d += n_pre.eq(n_pre + 1)
                with m.If(n_pre == 7):
                    m.d.comb += crc.start.eq(1)
                    m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += [en.eq(1), byte.eq(shift[:8]), crc_on.eq(1)]
                d += [shift.eq(shift >> 8), count.eq(count + 1)]
                with m.If(count == _HEADER_BYTES - 1):
                    with m.If(is_arp | (pay_len == 0)):
                        m.next = "PAD"
                    with m.Else():
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [en.eq(1), byte.eq(rd.data), crc_on.eq(1),
                             next_raddr.eq(raddr + 1)]
                d += [pidx.eq(pidx + 1), count.eq(Mux(count < MIN_FRAME, count + 1, count))]
                with m.If(pidx == pay_len - 1):
                    d += n_fcs.eq(0)
                    with m.If(count + 1 < MIN_FRAME - 4):
                        m.next = "PAD"
                    with m.Else():
                        m.next = "FCS"
            with m.State("PAD"):
                m.d.comb += [en.eq(1), byte.eq(0), crc_on.eq(1)]
                d += [count.eq(count + 1), n_fcs.eq(0)]
                with m.If(count == MIN_FRAME - 5):
                    m.next = "FCS"
            with m.State("FCS"):
                m.d.comb += [en.eq(1), byte.eq(crc.crc.word_select(n_fcs, 8))]
                d += n_fcs.eq(n_fcs + 1)
                with m.If(n_fcs == 3):
                    d += n_gap.eq(0)
                    with m.If(~is_arp):
                        m.d.comb += clr_full.eq(1)
                        d += [send_sel.eq(~send_sel), ident.eq(ident + 1),
                              self.sent.eq(self.sent + 1)]
                    m.next = "GAP"
            with m.State("GAP"):
                d += n_gap.eq(n_gap + 1)
                with m.If(n_gap == _GAP - 2):     # the IDLE cycle completes the 12-byte gap
                    m.next = "IDLE"
        return m


class EthReceiver(wiring.Component):
    """Received frames in, ARP requests, the stream's destination and command bytes out; ``eth``.

    A frame counts only if its FCS is right and it is addressed to the instrument: an ARP request
    (broadcast or to our MAC) for our IPv4 address raises ``arp``; a UDP datagram to our MAC, IPv4
    address and port with a valid IPv4 header checksum, no options and no fragmentation sets
    ``dest`` to its sender and sends its payload (at most ``max_command`` bytes) on ``commands``.
    Datagrams arriving while the previous command is still being passed on are dropped (the host
    waits for each reply).

    Attributes
    ----------
    rx : In(stream.Signature(RxByte))
        Frame bytes after the SFD, FCS included; ``ready`` is always high.
    net : In(NetLayout)
    arp : Out(ArpLayout)
        Held until ``arp_done``.
    arp_done : In(1)
    dest : Out(DestLayout)
    commands : Out(stream.Signature(8))
    good, bad : Out(32)
        Frames accepted (ARP or UDP for us), and frames with a bad FCS.
    """

    def __init__(self, *, max_command=64):
        with rejected(self):
            if not isinstance(max_command, int) or max_command < 16 or \
                    max_command & (max_command - 1):
                raise TypeError(f"Command buffer must be a power of two >= 16, "
                                f"not {max_command!r}")
        self.max_command = max_command
        super().__init__({
            "rx": In(stream.Signature(RxByte)),
            "net": In(NetLayout),
            "arp": Out(ArpLayout),
            "arp_done": In(1),
            "dest": Out(DestLayout),
            "commands": Out(stream.Signature(8)),
            "good": Out(32),
            "bad": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        d = m.d.eth
        abits = ceil_log2(self.max_command)
        m.submodules.mem = mem = Memory(shape=8, depth=self.max_command, init=[])
        wr = mem.write_port(domain="eth")
        rd = mem.read_port(domain="eth")
        m.submodules.crc = crc = DomainRenamer({"sync": "eth"})(
            catalog.CRC32_ISO_HDLC(data_width=8).create())

        rx = self.rx
        got = Signal()
        m.d.comb += [rx.ready.eq(1), got.eq(rx.valid), crc.data.eq(rx.payload.data)]
        idx = Signal(11)
        hdr = Signal(8 * _HEADER_BYTES)
        prev = Signal(8)
        ipsum = Signal(21)
        busy = Signal()          # a command is being passed on
        skip = Signal()          # this frame arrived while busy: its payload is not kept
        first = Signal(init=1)   # the next byte starts a frame

        def field(offset, nbytes):
            return _be(hdr[8 * offset:8 * (offset + nbytes)], nbytes)   # big-endian value

        with m.If(got):
            d += [prev.eq(rx.payload.data), first.eq(rx.payload.last)]
            m.d.comb += [crc.valid.eq(1), crc.start.eq(first)]
            d += idx.eq(Mux(first, 1, Mux(idx == 2047, idx, idx + 1)))
            with m.If(first):
                d += [skip.eq(busy), ipsum.eq(0)]
            cur = Mux(first, 0, idx)
            with m.If(cur < _HEADER_BYTES):
                d += hdr.word_select(cur[:6], 8).eq(rx.payload.data)
            # IPv4 header words at offsets 14..33: add each pair on its second byte
            with m.If((cur >= ETH_HEADER + 1) & (cur < ETH_HEADER + IP_HEADER) & cur[0]):
                d += ipsum.eq(Mux(first, 0, ipsum) + Cat(rx.payload.data, prev))
            m.d.comb += [wr.addr.eq((cur - _HEADER_BYTES)[:abits]), wr.data.eq(rx.payload.data),
                         wr.en.eq(~busy & (cur >= _HEADER_BYTES)
                                  & (cur < _HEADER_BYTES + self.max_command))]

        ends = Signal()
        m.d.comb += ends.eq(got & rx.payload.last)
        ends_r = Signal()
        length = Signal(11)
        d += ends_r.eq(ends)
        with m.If(ends):
            d += length.eq(idx + 1)        # frame bytes including the FCS

        # Checks, on the cycle after the last byte (the CRC residue is then complete).
        net = self.net
        dst_mac = field(0, 6)
        ethertype = field(12, 2)
        folded = Signal(17)
        m.d.comb += folded.eq(ipsum[:16] + ipsum[16:])
        ip_ok = Signal()
        m.d.comb += ip_ok.eq((folded[:16] + folded[16]) == 0xFFFF)
        udp_len = field(38, 2)
        pay_len = Signal(16)          # registered: the header is stable long before the end
        min_len = Signal(17)
        d += [pay_len.eq(udp_len - UDP_HEADER), min_len.eq(udp_len - UDP_HEADER
                                                           + _HEADER_BYTES + 4)]
        for_us = (dst_mac == net.mac)
        # The header checks are registered every cycle: the header (bytes 0..41) and the IPv4
        # sum (bytes 14..33) are complete long before a frame's last byte (>= 64 bytes), so the
        # registered results are current when the frame ends; only the length checks are not.
        udp_header_ok, arp_header_ok = Signal(), Signal()
        d += udp_header_ok.eq(
            for_us & (ethertype == 0x0800) & (field(14, 1) == 0x45) & (field(23, 1) == 17)
            & ((field(20, 2) & 0x3FFF) == 0) & (field(30, 4) == net.ip)
            & (field(36, 2) == net.port) & ip_ok & (udp_len >= UDP_HEADER)
            & (pay_len <= self.max_command))
        d += arp_header_ok.eq(
            ((dst_mac == 0xFFFFFFFFFFFF) | for_us) & (ethertype == 0x0806)
            & (field(14, 2) == 1) & (field(16, 2) == 0x0800) & (field(18, 1) == 6)
            & (field(19, 1) == 4) & (field(20, 2) == 1) & (field(38, 4) == net.ip))
        is_udp = Signal()
        m.d.comb += is_udp.eq(udp_header_ok & (length >= min_len) & (length >= MIN_FRAME))
        is_arp = Signal()
        m.d.comb += is_arp.eq(arp_header_ok & (length >= MIN_FRAME))

        with m.If(self.arp_done):
            d += self.arp.valid.eq(0)
        with m.If(ends_r):
            with m.If(~crc.match_detected):
                d += self.bad.eq(self.bad + 1)
            with m.Elif(is_arp):
                d += [self.arp.valid.eq(1), self.arp.mac.eq(field(22, 6)),
                      self.arp.ip.eq(field(28, 4)), self.good.eq(self.good + 1)]
            with m.Elif(is_udp & ~skip & ~busy):
                d += [self.dest.valid.eq(1), self.dest.mac.eq(field(6, 6)),
                      self.dest.ip.eq(field(26, 4)), self.dest.port.eq(field(34, 2)),
                      self.good.eq(self.good + 1)]
                with m.If(pay_len != 0):
                    d += busy.eq(1)

        # Pass the kept payload on, read one ahead from the buffer. The decision to pass it on is
        # registered (`commit`), so the checks are not in series with the buffer's read address.
        out = self.commands
        n_out = Signal(16)
        n_len = Signal(16)
        commit = Signal()
        d += commit.eq(ends_r & crc.match_detected & is_udp & ~skip & ~busy & (pay_len != 0))
        with m.If(ends_r):
            d += n_len.eq(pay_len)
        next_addr = Signal(abits)
        m.d.comb += [rd.addr.eq(next_addr), next_addr.eq(n_out[:abits]),
                     out.payload.eq(rd.data), out.valid.eq(busy & ~commit)]
        with m.If(commit):
            d += n_out.eq(0)
            m.d.comb += next_addr.eq(0)
        with m.If(out.valid & out.ready):
            m.d.comb += next_addr.eq(n_out[:abits] + 1)
            d += n_out.eq(n_out + 1)
            with m.If(n_out == n_len - 1):
                d += busy.eq(0)
        return m
