"""Reference model of the frame sniffers (``gateware/sniffer.py``) and classifier
(``gateware/classify.py``): what one frame on the wire becomes, in plain Python.

# Ref: IEEE Std 802.3-2018 §3.2 (frame format), §22.2 (MII); RMII Specification rev. 1.2 §5;
# IEEE Std 802.1Q-2018 §9.6 (tag); RFC 791, RFC 1071 (IPv4 header checksum); RFC 8200 (IPv6);
# RFC 768 (UDP).

The gateware is tested against these functions, and these functions against frames built by scapy
and against ``zlib.crc32``. Also here: the serialisers that turn a frame into MII nibbles or RMII
dibits (with ``CRS_DV``'s end-of-frame toggling), used by the tests and the simulated bench.
"""

import zlib

from .protocol import (
    NUM_CLASSES,
    OVERSIZE_BYTES,
    RUNT_BYTES,
    TRAFFIC_MAGIC,
    TRAFFIC_SEQ_OFFSET,
)

__all__ = ["parse_frame", "classify", "mii_nibbles", "rmii_dibits", "PREAMBLE_NIBBLES",
           "FRAME_FIELDS", "FLAG_FIELDS"]

#: Preamble nibbles (0x5) before the SFD nibble (0xD) on MII: 7 bytes of 0x55 and the SFD's low
#: nibble 0x5 (IEEE 802.3 §22.2.3.2).
PREAMBLE_NIBBLES = 15

#: Fields of a parsed frame, the FrameRecord fields the sniffer fills (frame_index, direction and
#: cls are the classifier's).
FRAME_FIELDS = ("length", "ip_proto", "ethertype", "vid", "dei", "pcp", "src_port", "dst_port",
                "seq", "src_ip", "dst_ip")
FLAG_FIELDS = ("fcs_ok", "rx_er", "runt", "oversize", "vlan", "ipv4", "ipv6", "ip_csum_ok", "udp",
               "seq_valid", "odd_nibble", "traffic_magic")

_ETH_VLAN, _ETH_IPV4, _ETH_IPV6, _PROTO_UDP = 0x8100, 0x0800, 0x86DD, 17


def _be(b):
    return int.from_bytes(b, "big")


def _ones_complement_sum(header):
    total = sum(_be(header[i:i + 2]) for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def parse_frame(frame, *, rx_er=False, odd_nibble=False, seq_offset=TRAFFIC_SEQ_OFFSET):
    """Parse one frame (destination MAC through FCS) as the sniffer does.

    A header layer counts as present only if all its bytes lie before the FCS (the last 4 bytes);
    fields of absent layers are 0. IPv4 options are skipped by IHL; IPv6 extension headers are not
    followed (``ip_proto`` is the first next-header value); fragments are not reassembled.

    Parameters
    ----------
    frame : bytes
        The bytes after the SFD, FCS included.
    rx_er, odd_nibble : bool
        Seen on the pins, not in the bytes.
    seq_offset : int
        Byte offset of the big-endian u32 sequence number in the UDP payload.

    Returns
    -------
    dict
        :data:`FRAME_FIELDS` and :data:`FLAG_FIELDS` as integers.

    Examples
    --------
    >>> r = parse_frame(bytes(60) + (0x2144DF1C).to_bytes(4, "little"))
    >>> r["length"], r["fcs_ok"], r["runt"], r["ethertype"]
    (64, 1, 0, 0)
    """
    n = len(frame)
    r = dict.fromkeys(FRAME_FIELDS + FLAG_FIELDS, 0)
    r["length"] = min(n, 0xFFFF)
    r["rx_er"], r["odd_nibble"] = int(rx_er), int(odd_nibble)
    r["runt"], r["oversize"] = int(n < RUNT_BYTES), int(n > OVERSIZE_BYTES)
    r["fcs_ok"] = int(n >= 4 and zlib.crc32(frame[:-4]) == int.from_bytes(frame[-4:], "little"))
    body = frame[:-4] if n >= 4 else b""
    if len(body) < 14:
        return r
    ethertype, l3 = _be(body[12:14]), 14
    if ethertype == _ETH_VLAN:
        if len(body) < 18:
            return r
        tci = _be(body[14:16])
        r.update(vlan=1, pcp=tci >> 13, dei=(tci >> 12) & 1, vid=tci & 0xFFF)
        ethertype, l3 = _be(body[16:18]), 18
    r["ethertype"] = ethertype
    if ethertype == _ETH_IPV4 and len(body) > l3:
        version, ihl = body[l3] >> 4, body[l3] & 15
        if version != 4 or ihl < 5 or len(body) < l3 + 4 * ihl:
            return r
        ip = body[l3:l3 + 4 * ihl]
        r.update(ipv4=1, ip_proto=ip[9], src_ip=_be(ip[12:16]), dst_ip=_be(ip[16:20]),
                 ip_csum_ok=int(_ones_complement_sum(ip) == 0xFFFF))
        l4 = l3 + 4 * ihl
    elif ethertype == _ETH_IPV6 and len(body) >= l3 + 40:
        if body[l3] >> 4 != 6:
            return r
        r.update(ipv6=1, ip_proto=body[l3 + 6])
        l4 = l3 + 40
    else:
        return r
    if r["ip_proto"] != _PROTO_UDP or len(body) < l4 + 8:
        return r
    r.update(udp=1, src_port=_be(body[l4:l4 + 2]), dst_port=_be(body[l4 + 2:l4 + 4]))
    udp_len = _be(body[l4 + 4:l4 + 6])
    # latscope's own traffic: the magic at payload offset 0 (not moved by seq_offset)
    if udp_len >= 10 and len(body) >= l4 + 10 and _be(body[l4 + 8:l4 + 10]) == TRAFFIC_MAGIC:
        r["traffic_magic"] = 1
    end = 8 + seq_offset + 4
    if udp_len >= end and len(body) >= l4 + end:
        r.update(seq_valid=1, seq=_be(body[l4 + end - 4:l4 + end]))
    return r


def classify(record, rules):
    """Class of a parsed frame (a :func:`parse_frame` dict) under a rule table: a list of
    ``ClassRule`` field dicts, first enabled full match wins, else class 0."""
    for rule in rules:
        if not rule.get("enable"):
            continue
        if rule.get("match_ethertype") and record["ethertype"] != rule["ethertype"]:
            continue
        if rule.get("match_pcp") and record["pcp"] != rule["pcp"]:
            continue
        if rule.get("match_ip_proto") and record["ip_proto"] != rule["ip_proto"]:
            continue
        if rule.get("match_port"):
            lo, hi = rule["port_lo"], rule["port_hi"]
            hit = record["udp"] and (
                (rule.get("port_dst") and lo <= record["dst_port"] <= hi)
                or (rule.get("port_src") and lo <= record["src_port"] <= hi))
            if not hit:
                continue
        cls = rule["cls"]
        if not 0 <= cls < NUM_CLASSES:
            raise ValueError(f"Class must be 0..{NUM_CLASSES - 1}, not {cls!r}")
        return cls
    return 0


def mii_nibbles(frame, *, preamble=PREAMBLE_NIBBLES, odd_nibble=False, er_at=None):
    """One frame as MII receive/transmit cycles: a list of ``(dv, er, nibble)``, low nibble of
    each byte first, preceded by ``preamble`` nibbles of 0x5 and the SFD nibble 0xD. An
    ``odd_nibble`` frame ends with half a byte (0xA); ``er_at`` raises ER on that data nibble."""
    nibbles = [0x5] * preamble + [0xD]
    for b in frame:
        nibbles += [b & 15, b >> 4]
    if odd_nibble:
        nibbles.append(0xA)
    out = [(1, 0, x) for x in nibbles]
    if er_at is not None:
        i = preamble + 1 + er_at
        out[i] = (1, 1, out[i][2])
    return out


def rmii_dibits(frame, *, preamble_dibits=31, carrier_early=0):
    """One frame as RMII cycles at 50 MHz (100 Mb/s): a list of ``(crs_dv, dibit)``, least
    significant dibit first, preceded by ``preamble_dibits`` dibits of 0b01 and the SFD's last
    dibit 0b11. ``carrier_early`` models the PHY losing carrier that many nibbles before the
    data ends: over those nibbles ``CRS_DV`` is low on the first dibit and high on the second of
    each nibble, as RMII 1.2 §5.3.2 specifies."""
    dibits = [0b01] * preamble_dibits + [0b11]
    for b in frame:
        dibits += [(b >> s) & 3 for s in (0, 2, 4, 6)]
    dv = [1] * len(dibits)
    if carrier_early:
        first = len(dibits) - 2 * carrier_early
        for i in range(first, len(dibits), 2):
            dv[i] = 0
    return list(zip(dv, dibits, strict=True))
