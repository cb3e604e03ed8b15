"""Reference model of the Ethernet link: frame layouts, checksums and the datagram packing rule.

# Ref: IEEE Std 802.3-2018 §3.2 (MAC frame, FCS), RFC 791 (IPv4, header checksum),
# RFC 768 (UDP; a zero checksum means "not computed"), RFC 826 (ARP).

The gateware (:mod:`latscope.gateware.eth.mac`) is tested against these functions, and the
simulated bench uses :class:`DatagramPacker` to cut the framer's byte stream into the datagrams
the board would send. Tests check them in turn against scapy, a parser nobody here wrote.
"""

import struct
import zlib
from dataclasses import dataclass

__all__ = [
    "PREAMBLE", "MIN_FRAME", "MAX_UDP_PAYLOAD", "ETH_HEADER", "IP_HEADER", "UDP_HEADER",
    "NetConfig", "DEFAULT_NET", "ipv4_checksum", "fcs", "udp_frame", "arp_reply", "arp_request",
    "parse_mac", "parse_ipv4", "mac_text", "ipv4_text", "stream_frame_lengths",
    "DatagramPacker",
]

#: Preamble and start-of-frame delimiter, in wire order (the PHY sends them like any byte).
PREAMBLE = b"\x55" * 7 + b"\xD5"
#: Shortest frame without preamble, FCS included; shorter frames are padded with zeros.
MIN_FRAME = 64
ETH_HEADER, IP_HEADER, UDP_HEADER = 14, 20, 8
#: Largest UDP payload in a 1500-byte IPv4 packet (no fragmentation).
MAX_UDP_PAYLOAD = 1500 - IP_HEADER - UDP_HEADER


@dataclass(frozen=True)
class NetConfig:
    """The instrument's own addresses: Ethernet MAC (int, 48 bits), IPv4 (int) and UDP port."""
    mac: int
    ip: int
    port: int

    def to_bytes(self):
        """The 12 argument bytes of SET_NET: MAC and IPv4 in network order, port little-endian
        (as every multi-byte field of the stream protocol)."""
        return self.mac.to_bytes(6, "big") + self.ip.to_bytes(4, "big") + \
            self.port.to_bytes(2, "little")

    @classmethod
    def from_bytes(cls, data):
        if len(data) != 12:
            raise ValueError(f"SET_NET arguments are 12 bytes, not {len(data)}")
        return cls(int.from_bytes(data[:6], "big"), int.from_bytes(data[6:10], "big"),
                   int.from_bytes(data[10:], "little"))


def parse_mac(text):
    """``"02:4c:53:00:00:01"`` -> int; ``ValueError`` with a clear message otherwise."""
    parts = text.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"MAC address must be six hex pairs like 02:4c:53:00:00:01, not {text!r}")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise ValueError(f"MAC address must be six hex pairs, not {text!r}") from None


def parse_ipv4(text):
    """``"192.168.1.50"`` -> int; ``ValueError`` with a clear message otherwise."""
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        raise ValueError(f"IPv4 address must be four numbers 0-255 like 192.168.1.50, "
                         f"not {text!r}")
    return int.from_bytes(bytes(int(p) for p in parts), "big")


def mac_text(mac):
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


def ipv4_text(ip):
    return ".".join(str(b) for b in ip.to_bytes(4, "big"))


#: Shipped default (documented in docs/boards.md): a locally administered unicast MAC (first byte
#: 0x02; then "LS" = 0x4C53), a private-range address and an arbitrary unprivileged UDP port.
DEFAULT_NET = NetConfig(mac=0x024C53000001, ip=parse_ipv4("192.168.1.50"), port=7438)


def ipv4_checksum(header):
    """One's-complement sum of 16-bit big-endian words, complemented (RFC 791 §3.1)."""
    if len(header) % 2:
        header += b"\0"
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def fcs(frame):
    """Ethernet frame check sequence of ``frame`` (destination MAC to last pad byte), as the 4
    bytes sent: CRC-32 (the zlib CRC), least significant byte first."""
    return zlib.crc32(frame).to_bytes(4, "little")


def _pad(frame):
    return frame + bytes(max(0, MIN_FRAME - 4 - len(frame)))


def udp_frame(*, src_mac, dst_mac, src_ip, dst_ip, src_port, dst_port, payload, ident=0):
    """A whole Ethernet frame (no preamble, FCS included) carrying ``payload`` over UDP/IPv4,
    as the gateware builds it: DF set, TTL 64, UDP checksum 0."""
    total = IP_HEADER + UDP_HEADER + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, ident, 0x4000, 64, 17, 0,
                     src_ip.to_bytes(4, "big"), dst_ip.to_bytes(4, "big"))
    ip = ip[:10] + ipv4_checksum(ip).to_bytes(2, "big") + ip[12:]
    udp = struct.pack(">HHHH", src_port, dst_port, UDP_HEADER + len(payload), 0)
    frame = _pad(dst_mac.to_bytes(6, "big") + src_mac.to_bytes(6, "big") + b"\x08\x00"
                 + ip + udp + bytes(payload))
    return frame + fcs(frame)


def _arp(oper, dst_mac, sha, spa, tha, tpa):
    body = struct.pack(">HHBBH6s4s6s4s", 1, 0x0800, 6, 4, oper, sha.to_bytes(6, "big"),
                       spa.to_bytes(4, "big"), tha.to_bytes(6, "big"), tpa.to_bytes(4, "big"))
    frame = _pad(dst_mac.to_bytes(6, "big") + sha.to_bytes(6, "big") + b"\x08\x06" + body)
    return frame + fcs(frame)


def arp_request(*, sha, spa, tpa):
    """Broadcast "who has ``tpa``, tell ``spa``"."""
    return _arp(1, 0xFFFFFFFFFFFF, sha, spa, 0, tpa)


def arp_reply(*, net, tha, tpa):
    """The instrument's answer to an ARP request from ``tha``/``tpa``."""
    return _arp(2, tha, net.mac, net.ip, tha, tpa)


def stream_frame_lengths(data):
    """Lengths of the stream frames (``docs/stream-format.md``) that make up ``data``, which
    must start at a frame boundary; a partial last frame is not counted."""
    out, pos = [], 0
    while pos + 6 <= len(data):
        size = 6 + int.from_bytes(data[pos + 4:pos + 6], "little") + 4
        if pos + size > len(data):
            break
        out.append(size)
        pos += size
    return out


class DatagramPacker:
    """The gateware's rule for cutting the framer's byte stream into UDP payloads.

    Datagrams hold whole stream frames only. A datagram closes at a frame boundary when it holds
    at least ``threshold`` bytes (so the next frame, at most ``max_frame`` bytes, could not
    overflow :data:`MAX_UDP_PAYLOAD`), or when the stream has paused for ``idle_cycles`` link
    cycles (so a heartbeat, sent alone when nothing else happens, leaves at once).

    Parameters
    ----------
    max_frame : int
        Longest stream frame the framer emits, bytes.
    """

    def __init__(self, *, max_frame):
        if not isinstance(max_frame, int) or not 10 <= max_frame <= MAX_UDP_PAYLOAD:
            raise ValueError(f"Longest stream frame must be an integer in 10..{MAX_UDP_PAYLOAD}, "
                             f"not {max_frame!r}")
        self.threshold = MAX_UDP_PAYLOAD - max_frame
        self._buf = bytearray()
        self._frame_left = None     # bytes left in the current frame; None: at a boundary
        self._header = bytearray()

    def feed(self, data):
        """Add stream bytes; return the list of datagram payloads closed by the threshold."""
        # A frame at a time (its length is in its header), not a byte at a time: the bench feeds
        # tens of megabytes through this.
        out = []
        buf, header = self._buf, self._header
        data = memoryview(bytes(data))
        i, n = 0, len(data)
        while i < n:
            if self._frame_left is None:
                take = data[i:i + 6 - len(header)]
                header += take
                buf += take
                i += len(take)
                if len(header) == 6:
                    self._frame_left = int.from_bytes(header[4:6], "little") + 4
                    header.clear()
                continue
            take = min(self._frame_left, n - i)
            buf += data[i:i + take]
            i += take
            self._frame_left -= take
            if self._frame_left == 0:
                self._frame_left = None
                if len(buf) >= self.threshold:
                    out.append(bytes(buf))
                    buf.clear()
        return out

    def idle(self):
        """The stream paused: return the pending datagram if it ends on a frame boundary."""
        if self._buf and self._frame_left is None and not self._header:
            out = bytes(self._buf)
            self._buf.clear()
            return [out]
        return []
