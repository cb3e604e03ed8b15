"""The frame sniffers (``gateware/sniffer.py``) against the reference parser
(``gateware/model_sniffer.py``), on frames built by scapy and serialised nibble by nibble (MII) or
dibit by dibit (RMII) in the Amaranth simulator; the reference parser against scapy's own
dissection and ``zlib.crc32``."""

import random
import zlib

import pytest
from amaranth.sim import Simulator

from latscope.gateware.model_sniffer import (
    FLAG_FIELDS,
    FRAME_FIELDS,
    mii_nibbles,
    parse_frame,
    rmii_dibits,
)
from latscope.gateware.protocol import TRAFFIC_SEQ_OFFSET
from latscope.gateware.sniffer import FrameSniffer

scapy_all = pytest.importorskip("scapy.all", reason="scapy builds the test frames (pip: scapy)")
_Ether, Dot1Q, IP, IPv6, UDP, TCP, ARP, Raw = (scapy_all.Ether, scapy_all.Dot1Q, scapy_all.IP,
                                              scapy_all.IPv6, scapy_all.UDP, scapy_all.TCP,
                                              scapy_all.ARP, scapy_all.Raw)



def Ether(*args):
    """scapy's Ether with both addresses given, so scapy never looks up a route or sends ARP."""
    if args:
        return _Ether(*args)
    return _Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def with_fcs(frame, *, bad=False):
    frame = bytes(frame)
    frame += bytes(max(0, 60 - len(frame)))
    fcs = zlib.crc32(frame) ^ (0x1 if bad else 0)
    return frame + fcs.to_bytes(4, "little")


def traffic_payload(seq, size=16):
    # capture/traffic.py's layout, written out independently here: magic, run id, seq, time
    return (b"LT" + (0x1234).to_bytes(2, "big") + seq.to_bytes(4, "big")
            + (10**9).to_bytes(8, "big") + bytes(size - 16))


def other_payload(rng, size):
    """A UDP payload that is not latscope traffic: random bytes, or a near miss of the magic
    ("LU", "MT", "TL"), ``size`` bytes."""
    head = rng.choice([b"LU", b"MT", b"TL", b"lt", bytes([rng.randrange(256), rng.randrange(256)])])
    if head == b"LT":
        head = b"LS"
    return head + bytes(rng.randrange(256) for _ in range(size - 2))


def random_frame(rng):
    """One random frame and how it should be damaged on the pins: ``(bytes, rx_er, odd)``."""
    kind = rng.choice(["udp4", "udp4", "vlan", "udp6", "tcp", "arp", "opts", "badip", "runt",
                       "badfcs", "short_udp", "big", "other_udp"])
    seq = rng.getrandbits(32)
    ports = dict(sport=rng.randrange(1, 65536), dport=rng.randrange(1, 65536))
    size = rng.choice([16, 18, 64, 200])
    ip = IP(src=f"10.0.{rng.randrange(256)}.{rng.randrange(256)}", dst="192.0.2.7")
    if kind == "udp4":
        pkt = Ether() / ip / UDP(**ports) / traffic_payload(seq, size)
    elif kind == "vlan":
        tag = Dot1Q(prio=rng.randrange(8), dei=rng.randrange(2), vlan=rng.randrange(4096))
        pkt = (Ether() / tag
               / ip / UDP(**ports) / traffic_payload(seq, size))
    elif kind == "udp6":
        pkt = Ether() / IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(**ports) \
            / traffic_payload(seq, size)
    elif kind == "tcp":
        pkt = Ether() / ip / TCP(**ports) / Raw(bytes(rng.randrange(40)))
    elif kind == "arp":
        pkt = Ether() / ARP()
    elif kind == "opts":
        pkt = Ether() / IP(dst="192.0.2.9", options=[scapy_all.IPOption(b"\x01\x01\x01\x00")]) \
            / UDP(**ports) / traffic_payload(seq, size)
    elif kind == "badip":
        pkt = Ether() / IP(dst="192.0.2.9", chksum=rng.randrange(65536)) / UDP(**ports) \
            / traffic_payload(seq)
    elif kind == "short_udp":
        pkt = Ether() / ip / UDP(**ports) / Raw(b"LT\x00\x01\x02")
    elif kind == "other_udp":        # background UDP: long enough for a sequence number, no magic
        pkt = Ether() / ip / UDP(**ports) / other_payload(rng, size)
    elif kind == "big":
        pkt = Ether() / ip / UDP(**ports) / traffic_payload(seq, rng.choice([1472, 1490]))
    else:
        pkt = Ether() / ip / UDP(**ports) / traffic_payload(seq)
    frame = with_fcs(pkt, bad=(kind == "badfcs"))
    if kind == "runt":
        frame = frame[:rng.randrange(0, 63)]
    rx_er = rng.random() < 0.1
    odd = rng.random() < 0.1
    return frame, rx_er, odd


def run_sniffer(interface, pulses, *, gap, seq_offset=TRAFFIC_SEQ_OFFSET, header_bytes=0):
    """Drive ``pulses`` (lists of pin tuples) with ``gap`` idle cycles between them; return the
    entries the sniffer offered."""
    dut = FrameSniffer(interface=interface, header_bytes=header_bytes)
    got = []

    async def bench(ctx):
        ctx.set(dut.seq_offset, seq_offset)

        async def cycle(dv, er, value):
            ctx.set(dut.dv, dv)
            ctx.set(dut.er, er)
            ctx.set(dut.data, value)
            await ctx.tick()
            if ctx.get(dut.frames.valid):
                got.append(ctx.get(dut.frames.payload))

        for pins in pulses:
            for p in pins:
                await cycle(*p) if len(p) == 3 else await cycle(p[0], 0, p[1])
            for _ in range(gap):
                await cycle(0, 0, 0)
        for _ in range(4):
            await cycle(0, 0, 0)

    sim = Simulator(dut)
    sim.add_clock(40e-9 if interface == "mii" else 20e-9)
    sim.add_testbench(bench)
    sim.run()
    return got


def assert_magic_mix(expected):
    """The stimulus holds background UDP frames long enough for a sequence number but without the
    magic, and a UDP payload with the magic too short for one."""
    assert any(e["seq_valid"] and not e["traffic_magic"] for e in expected), "change the seed"
    assert any(e["traffic_magic"] and not e["seq_valid"] for e in expected), "change the seed"


def entry_fields(entry):
    rec = entry.record
    out = {f: int(getattr(rec, f)) for f in FRAME_FIELDS}
    out.update({f: int(getattr(rec.flags, f)) for f in FLAG_FIELDS})
    return out


def test_mii_random_frames_match_reference():
    """60 random frames (runts, bad FCS, VLAN, IPv6, TCP, ARP, IPv4 options, bad IP checksums,
    RX_ER, dribble nibbles, oversize, UDP with and without the traffic magic), back to back at
    the minimum gap of 12 byte times (24 MII clocks, less one: the first idle cycle ends the
    frame), plus a carrier pulse with no SFD.
    Expected: parse_frame on the same bytes; exact."""
    rng = random.Random(11)
    frames = [random_frame(rng) for _ in range(60)]
    pulses, expected = [], []
    for frame, rx_er, odd in frames:
        er_at = rng.randrange(len(frame)) if rx_er and frame else None
        pulses.append(mii_nibbles(frame, odd_nibble=odd, er_at=er_at))
        expected.append(parse_frame(frame, rx_er=er_at is not None, odd_nibble=odd))
    pulses.insert(7, [(1, 0, 0x5)] * 9)            # false carrier: no SFD
    expected.insert(7, parse_frame(b""))
    for flag in ("fcs_ok", "vlan", "ipv4", "ipv6", "udp", "seq_valid", "rx_er", "odd_nibble",
                 "runt", "oversize", "traffic_magic"):
        assert any(e[flag] for e in expected), f"no frame with {flag}: change the seed"
    assert_magic_mix(expected)
    assert any(e["ipv4"] and not e["ip_csum_ok"] for e in expected)
    assert any(not e["fcs_ok"] and e["length"] >= 64 for e in expected)
    got = run_sniffer("mii", pulses, gap=23)
    assert [entry_fields(e) for e in got] == expected


def test_rmii_random_frames_match_reference():
    """RMII at 50 MHz with CRS_DV's end-of-frame toggling (carrier lost 0..6 nibbles before the
    data ends, RMII 1.2 §5.3.2): the toggling must not cut or extend the frame. Exact."""
    rng = random.Random(11)
    pulses, expected = [], []
    for _ in range(30):
        frame, _, _ = random_frame(rng)
        if len(frame) > 400:
            frame = frame[:400]
        pulses.append(rmii_dibits(frame, carrier_early=rng.randrange(0, 7)))
        expected.append(parse_frame(frame))
    assert_magic_mix(expected)
    got = run_sniffer("rmii", pulses, gap=47)
    assert [entry_fields(e) for e in got] == expected


def test_seq_offset_and_header_bytes():
    """The sequence number is read at the configured payload offset; the first header bytes are
    kept, zero past the end of a short frame. Expected values: written into the frames here."""
    seq = 0xA1B2C3D4
    payload = bytes(10) + seq.to_bytes(4, "big") + bytes(10)
    frame = with_fcs(Ether() / IP(dst="192.0.2.1") / UDP(sport=1, dport=2) / payload)
    short = with_fcs(Ether() / ARP())[:20]
    got = run_sniffer("mii", [mii_nibbles(frame), mii_nibbles(short)], gap=23, seq_offset=10,
                      header_bytes=24)
    assert int(got[0].record.seq) == seq and int(got[0].record.flags.seq_valid) == 1
    assert parse_frame(frame, seq_offset=10)["seq"] == seq
    assert int(got[0].header).to_bytes(24, "little") == frame[:24]
    assert int(got[1].header).to_bytes(24, "little") == short + bytes(4)


def test_reference_parser_agrees_with_scapy():
    """parse_frame's fields against scapy's dissection of the same bytes (an independent parser),
    and its FCS verdict against zlib.crc32."""
    rng = random.Random(12)
    checked = 0
    for _ in range(300):
        frame, _, _ = random_frame(rng)
        r = parse_frame(frame)
        assert r["fcs_ok"] == (len(frame) >= 4 and
                               zlib.crc32(frame[:-4]).to_bytes(4, "little") == frame[-4:])
        if len(frame) < 64:
            continue
        pkt = Ether(frame[:-4])
        assert r["vlan"] == int(Dot1Q in pkt)
        if Dot1Q in pkt:
            assert (r["pcp"], r["dei"], r["vid"]) == (pkt[Dot1Q].prio, pkt[Dot1Q].dei,
                                                      pkt[Dot1Q].vlan)
        if IP in pkt:
            assert r["ipv4"] == 1 and r["ip_proto"] == pkt[IP].proto
            assert r["src_ip"] == int.from_bytes(scapy_all.inet_aton(pkt[IP].src), "big")
            fixed = IP(bytes(pkt[IP]))
            del fixed.chksum
            assert r["ip_csum_ok"] == int(IP(bytes(fixed)).chksum == pkt[IP].chksum)
        if IPv6 in pkt:
            assert r["ipv6"] == 1 and r["ip_proto"] == pkt[IPv6].nh
        if UDP in pkt:
            assert r["udp"] == 1
            assert (r["src_port"], r["dst_port"]) == (pkt[UDP].sport, pkt[UDP].dport)
            load = pkt[Raw].load if Raw in pkt else b""
            assert r["traffic_magic"] == int(load[:2] == b"LT"), load[:8]
            if len(load) >= 8 and load[:2] == b"LT":
                assert r["seq_valid"] == 1
                assert r["seq"] == int.from_bytes(load[4:8], "big")
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("kwargs, message", [
    ({"interface": "gmii"}, "Interface must be 'mii' or 'rmii', not 'gmii'"),
    ({"header_bytes": 65}, "Header bytes must be an integer in 0..64, not 65"),
])
def test_constructor_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FrameSniffer(**kwargs)
