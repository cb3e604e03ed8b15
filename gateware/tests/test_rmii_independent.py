"""The RMII path checked by tools nobody here wrote (issue 10 item 7; cocotbext-eth has no RMII
model): random scapy traffic (runts, bad FCSs, 802.1Q tags, IPv6, IPv4 UDP with the traffic
payload, non-IP) goes back to back with the minimum gap through the RMII serialiser of the
frame bench harness (``latscope/bench/framebench.cpp``, with CRS_DV's end-of-frame toggling on
receive) into the ECPIX-5 frame-capture core's RMII sniffers in Verilator. The dibits the
harness drove are reassembled into bytes here and must be each frame exactly (FCS against
``zlib.crc32``); every FRAME record the host decoder reads must hold what scapy parses from the
frame. Skips without g++ or scapy."""

import ipaddress
import random
import shutil
import zlib

import numpy as np
import pytest

from latscope.capture.frames import FLAGS
from latscope.capture.traffic import encode_payload

scapy_all = pytest.importorskip("scapy.all", reason="scapy builds and parses the frames")
Ether, IP, IPv6, UDP, Dot1Q = (scapy_all.Ether, scapy_all.IP, scapy_all.IPv6, scapy_all.UDP,
                               scapy_all.Dot1Q)

KINDS = ("udp4", "vlan", "udp6", "runt", "bad_fcs", "non_ip", "udp_other")


def random_traffic(rng, n):
    """``n`` frames with their FCS, of every kind in :data:`KINDS` in turn, random sizes."""
    frames, kinds = [], []
    for k in range(n):
        kind = KINDS[k % len(KINDS)]
        eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:%02x" % rng.randrange(256))
        payload = encode_payload(rng.randrange(1 << 16), rng.randrange(1 << 32), 0,
                                 rng.randrange(16, 200))
        udp = UDP(sport=rng.randrange(1, 1 << 16), dport=rng.randrange(1, 1 << 16))
        if kind == "vlan":
            pkt = eth / Dot1Q(prio=rng.randrange(8), vlan=rng.randrange(1, 4095)) / IP(
                src="192.0.2.%d" % rng.randrange(256), dst="198.51.100.7") / udp / payload
        elif kind == "udp6":
            pkt = eth / IPv6(src="2001:db8::1", dst="2001:db8::2") / udp / payload
        elif kind == "udp_other":      # background UDP: room for a sequence number, no magic
            pkt = eth / IP(src="192.0.2.%d" % rng.randrange(256), dst="198.51.100.9") / udp \
                / (b"L" + bytes(rng.randrange(256) for _ in range(rng.randrange(16, 200))))
        elif kind == "non_ip":
            pkt = Ether(src="02:00:00:00:00:03", dst="ff:ff:ff:ff:ff:ff", type=0x88B5) / bytes(
                rng.randrange(46, 120))
        else:
            pkt = eth / IP(src="192.0.2.%d" % rng.randrange(256), dst="198.51.100.9") / udp \
                / payload
        raw = bytes(pkt)
        if kind == "runt":
            raw = raw[:rng.randrange(8, 56)]
        elif len(raw) < 60:
            raw += bytes(60 - len(raw))
        fcs = zlib.crc32(raw)
        if kind == "bad_fcs":
            fcs ^= 1 << rng.randrange(32)
        frames.append(raw + fcs.to_bytes(4, "little"))
        kinds.append(kind)
    return frames, kinds


def reassemble_rmii(symbols):
    """RMII pins (``dv | dibit << 2`` per REF_CLK) to frames: a frame is a stretch of clocks
    separated from the next by two or more with CRS_DV low (inside a frame, carrier loss leaves
    it low for single clocks only); its preamble runs to the first dibit 0b11 (the SFD's last),
    then four dibits, least significant first, make each byte. Returns ``(frames, gaps,
    preambles, dv_tails)``."""
    dv = symbols & 1
    dibit = (symbols >> 2) & 3
    frames, gaps, preambles, tails = [], [], [], []
    i, n = 0, len(symbols)
    while i < n:
        if not dv[i]:
            i += 1
            continue
        j = i
        while j < n and (dv[j] or (j + 1 < n and dv[j + 1])):
            j += 1
        d = dibit[i:j]
        sfd = int(np.argmax(d == 3))
        preambles.append(d[:sfd + 1].tolist())
        body = d[sfd + 1:]
        if len(body) % 4:
            raise AssertionError(f"frame at clock {i}: {len(body)} data dibits, not whole bytes")
        q = body.reshape(-1, 4).astype(np.uint16)
        frames.append(bytes((q[:, 0] | q[:, 1] << 2 | q[:, 2] << 4 | q[:, 3] << 6).astype(
            np.uint8)))
        tails.append(dv[i:j].tolist())
        k = j
        while k < n and not dv[k]:
            k += 1
        if k < n:
            gaps.append(k - j)
        i = k
    return frames, gaps, preambles, tails


def expected_record(frame):
    """What a FRAME record must say about ``frame``, from scapy and zlib (None: not checked)."""
    fcs_ok = len(frame) >= 4 and zlib.crc32(frame[:-4]) == int.from_bytes(frame[-4:], "little")
    exp = dict(length=len(frame), fcs_ok=fcs_ok, runt=len(frame) < 64)
    if len(frame) < 64:
        return exp
    pkt = Ether(frame[:-4])
    vlan = Dot1Q in pkt
    exp.update(vlan=vlan, pcp=pkt[Dot1Q].prio if vlan else 0, vid=pkt[Dot1Q].vlan if vlan else 0,
               ethertype=pkt[Dot1Q].type if vlan else pkt.type, ipv4=IP in pkt,
               ipv6=IPv6 in pkt)
    exp["ip_proto"] = pkt[IP].proto if IP in pkt else pkt[IPv6].nh if IPv6 in pkt else 0
    if IP in pkt:
        exp.update(src_ip=int(ipaddress.ip_address(pkt[IP].src)),
                   dst_ip=int(ipaddress.ip_address(pkt[IP].dst)), ip_csum_ok=True)
    exp["udp"] = UDP in pkt
    if UDP in pkt:
        exp.update(src_port=pkt[UDP].sport, dst_port=pkt[UDP].dport,
                   seq=int.from_bytes(bytes(pkt[UDP].payload)[4:8], "big"),
                   traffic_magic=bytes(pkt[UDP].payload)[:2] == b"LT")
    return exp


def test_python_rmii_serialiser_reassembles_to_the_frames():
    """The pure-Python serialiser the Amaranth-simulator tests use
    (``model_sniffer.rmii_dibits``), on the same random traffic: reassembled by the reader
    above, every frame byte-exact, scapy finds the traffic payload in each UDP frame, and
    the FCS agrees with ``zlib.crc32`` exactly for the frames not given a bad one."""
    from latscope.gateware.model_sniffer import rmii_dibits
    rng = random.Random(11)
    frames, kinds = random_traffic(rng, 60)
    symbols = []
    for k, frame in enumerate(frames):
        early = k % 4 if 2 * (k % 4) <= 4 * len(frame) else 0
        symbols += [dv | dibit << 2 for dv, dibit in rmii_dibits(frame, carrier_early=early)]
        symbols += [0] * 48
    got, gaps, preambles, _ = reassemble_rmii(np.array(symbols, np.uint8))
    assert got == frames and gaps == [48] * (len(frames) - 1)
    assert all(p == [1] * 31 + [3] for p in preambles)
    for f, kind in zip(got, kinds, strict=True):
        assert (zlib.crc32(f[:-4]) == int.from_bytes(f[-4:], "little")) == (kind != "bad_fcs")
        if kind in ("udp4", "vlan", "udp6", "bad_fcs"):     # the traffic payload's magic
            assert bytes(Ether(f[:-4])[UDP].payload)[:2] == b"LT"


@pytest.mark.slow
def test_rmii_serialiser_and_sniffer_against_scapy_and_zlib(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to build the Verilator model")
    from latscope.bench import framebench as fb
    rng = random.Random(10)
    frames, kinds = random_traffic(rng, 120)
    early = [rng.randrange(0, 4) for _ in frames]
    # a runt too short for the toggling to fit stays clean
    early = [e if 2 * e <= 4 * len(f) else 0 for e, f in zip(early, frames, strict=True)]
    pins = tmp_path / "pins.bin"
    result, stats = fb.run_frames("rmii", frames, carrier_early=early, pins_path=pins)
    assert (stats["rx_frames"], stats["tx_frames"]) == (len(frames), len(frames))

    # the serialiser: every frame byte-exact, preamble and SFD, minimum gap, CRS_DV toggling
    raw = np.frombuffer(pins.read_bytes(), np.uint8)
    for d in (0, 1):
        got, gaps, preambles, tails = reassemble_rmii(raw[(raw >> 7) == d] & 0x7F)
        assert got == frames
        assert all(p == [1] * 31 + [3] for p in preambles)     # 7 x 0x55, 0xD5
        assert gaps == [48] * (len(frames) - 1)                # 96 bit times at 2 bits/clock
        for k, tail in enumerate(tails):
            e = early[k] if d == 0 else 0
            assert tail == [1] * (len(tail) - 2 * e) + [0, 1] * e
    for f, kind in zip(got, kinds, strict=True):
        assert (zlib.crc32(f[:-4]) == int.from_bytes(f[-4:], "little")) == (kind != "bad_fcs")

    # the sniffer: one record per frame and direction, fields as scapy parses them
    assert result.frames_bad == 0 and result.frames_missing == 0
    recs = result.frames
    checked = 0
    for d in (0, 1):
        mine = recs[recs["direction"] == d]
        assert mine["frame_index"].tolist() == list(range(len(frames)))
        for rec, frame in zip(mine, frames, strict=True):
            exp = expected_record(frame)
            for name, value in exp.items():
                got_value = (bool(rec["flags"] & FLAGS[name]) if name in FLAGS
                             else int(rec[name]))
                assert got_value == value, (d, int(rec["frame_index"]), name, frame.hex())
                checked += 1
    kinds_seen = set(kinds)
    assert kinds_seen == set(KINDS) and checked > 2000
    magic = [bool(expected_record(f).get("traffic_magic")) for f in frames]
    assert any(magic) and any(k == "udp_other" and not m for k, m in zip(kinds, magic,
                                                                         strict=True))
