"""The simulated bench's wire (``capture/sim/sim_wire.py``) against tools nobody here wrote: scapy
parses every frame, ``zlib.crc32`` checks every FCS; the pins are reassembled into bytes and
checked against IEEE 802.3 §22.2.3 (MII: 7 x 0x55, SFD 0xD5, low nibble first) and RMII 1.2 §5.3
(dibits, CRS_DV toggling at nibble rate after carrier loss). Expected values are from those
documents; exact cases use ``==``."""

import zlib

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.sim import sim_wire as w
from latscope.gateware.model_sniffer import parse_frame
from latscope.gateware.protocol import TRAFFIC_MAGIC

scapy_all = pytest.importorskip("scapy.all", reason="scapy parses the frames (pip: scapy)")


@pytest.mark.parametrize("size,pcp", [(64, None), (68, 5), (256, None), (1518, None), (1522, 6)])
def test_udp_frame_parses_with_scapy_and_has_a_good_fcs(size, pcp):
    frame = w.udp_frame(size, 0xDEADBEEF, pcp=pcp, vid=42, src_port=5000, dst_port=7,
                        run_id=3, intended_ns=123456789)
    assert len(frame) == size
    assert zlib.crc32(frame[:-4]).to_bytes(4, "little") == frame[-4:]
    pkt = scapy_all.Ether(frame[:-4])
    assert pkt[scapy_all.IP].src == "192.0.2.1" and pkt[scapy_all.IP].dst == "192.0.2.2"
    # scapy recomputes the IPv4 checksum: it must match the one on the wire
    ip = pkt[scapy_all.IP].copy()
    on_wire = ip.chksum
    del ip.chksum
    assert scapy_all.IP(bytes(ip)).chksum == on_wire
    udp = pkt[scapy_all.UDP]
    assert (udp.sport, udp.dport) == (5000, 7)
    payload = bytes(udp.payload)
    assert int.from_bytes(payload[0:2], "big") == TRAFFIC_MAGIC
    assert int.from_bytes(payload[2:4], "big") == 3
    assert int.from_bytes(payload[4:8], "big") == 0xDEADBEEF
    assert int.from_bytes(payload[8:16], "big") == 123456789
    if pcp is not None:
        assert pkt[scapy_all.Dot1Q].prio == pcp and pkt[scapy_all.Dot1Q].vlan == 42
    # the sniffer's reference parser finds the sequence number where latscope traffic puts it
    rec = parse_frame(frame)
    assert rec["fcs_ok"] and rec["udp"] and rec["seq_valid"] and rec["seq"] == 0xDEADBEEF
    assert rec["ip_csum_ok"]


def test_bad_fcs_and_bad_sizes():
    frame = w.udp_frame(64, 1, bad_fcs=True)
    assert zlib.crc32(frame[:-4]).to_bytes(4, "little") != frame[-4:]
    assert not parse_frame(frame)["fcs_ok"]
    with pytest.raises(LatscopeError, match="cannot carry"):
        w.udp_frame(40, 1)
    with pytest.raises(LatscopeError, match="cannot carry"):
        w.udp_frame(1519, 1)


def _bursts(dv):
    """(first, last+1) index pairs of the runs where dv is high."""
    d = np.diff(np.concatenate([[0], dv.astype(int), [0]]))
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1), strict=True))


def test_mii_pins_reassemble_to_preamble_sfd_frame_and_keep_the_gap():
    sizes = [64, 1518, 64, 594, 64]
    frames = [w.udp_frame(s, i) for i, s in enumerate(sizes)]
    start, end = w.serialize(np.zeros(len(sizes)), sizes)     # all ready at once: back to back
    assert np.all(start[1:] - end[:-1] == w.IFG_NS)            # exactly the 96-bit gap
    cycle, dv, data = w.mii_cycles(frames, start)
    assert cycle[0] == 0 and np.all(np.diff(cycle) == 1)
    runs = _bursts(dv)
    assert len(runs) == len(frames)
    for (a, b), frame, s, e in zip(runs, frames, start, end, strict=True):
        assert a * w.MII_CLOCK_NS == s and b * w.MII_CLOCK_NS == e
        nibbles = data[a:b]
        raw = bytes((nibbles[0::2] | nibbles[1::2] << 4).tolist())   # low nibble first
        assert raw[:8] == b"\x55" * 7 + b"\xd5"
        assert raw[8:] == frame
        assert scapy_all.Ether(raw[8:-4])[scapy_all.UDP].dport == 4242
    assert not data[dv == 0].any()


def test_rmii_pins_and_crs_dv_toggling_after_carrier_loss():
    frames = [w.udp_frame(64, 1), w.udp_frame(100, 2)]
    start, _ = w.serialize([0, 0], [64, 100], grid_ns=w.RMII_CLOCK_NS)
    cycle, dv, data = w.rmii_cycles(frames, start, carrier_early=[0, 3])
    # frame 1: CRS_DV high throughout; frame 2: the last 3 nibbles toggle low/high per 20 ns
    a1 = int(start[0] / 20)
    n1 = 32 + 4 * 64
    assert dv[a1:a1 + n1].all() and not dv[a1 + n1]
    a2 = int(start[1] / 20)
    n2 = 32 + 4 * 100
    tail = dv[a2 + n2 - 6:a2 + n2]
    assert tail.tolist() == [0, 1, 0, 1, 0, 1]
    assert dv[a2:a2 + n2 - 6].all() and not dv[a2 + n2]
    for a, n, frame in ((a1, n1, frames[0]), (a2, n2, frames[1])):
        d = data[a:a + n]
        raw = bytes((d[0::4] | d[1::4] << 2 | d[2::4] << 4 | d[3::4] << 6).tolist())
        assert raw == b"\x55" * 7 + b"\xd5" + frame
        assert zlib.crc32(raw[8:-4]).to_bytes(4, "little") == raw[-4:]
    # the toggles are 20 ns wide: CRS_DV changes on consecutive REF_CLK cycles
    edges = np.flatnonzero(np.diff(dv[a2:a2 + n2 + 1].astype(int)))
    assert np.all(np.diff(edges)[-6:] == 1)
    assert cycle[1] - cycle[0] == 1


def test_wire_checks_overlap_and_grid():
    frames = [w.udp_frame(64, 1), w.udp_frame(64, 2)]
    with pytest.raises(LatscopeError, match="interframe gap"):
        w.mii_cycles(frames, [0, 40 * (16 + 128 + 23)])
    with pytest.raises(LatscopeError, match="clock grid"):
        w.mii_cycles(frames, [0, 10_001])


@pytest.mark.parametrize("load", [0.3, 0.6, 0.9])
def test_background_load_takes_its_share_of_the_line(load):
    # The share is a compound Poisson sum: relative sd = sqrt(E[slot^2] / n) / E[slot] =
    # 1.50 / sqrt(n) for IMIX slots (6,720 / 49,120 / 123,040 ns at 7:4:1). 500 ms at 30 % load
    # is n ~ 4,900 frames: sd 2.1 %; the tolerance of 7 % is over 3 sd.
    rng = np.random.default_rng(11)
    duration = 500e6
    times, sizes = w.background_frames(rng, load, duration)
    assert set(np.unique(sizes).tolist()) <= {64, 594, 1518}
    share = w.line_share(sizes, duration)
    assert share == pytest.approx(load, rel=0.07)
    start, end = w.serialize(times, sizes)
    assert np.all(start[1:] >= end[:-1] + w.IFG_NS - 1e-6)
    assert np.all(start >= times - 1e-6)
    # size mix: n >= 4,900, so each share's sd is below 0.7 %; tolerance 2 % (3 sd)
    counts = np.array([np.count_nonzero(sizes == s) for s in (64, 594, 1518)])
    assert counts / counts.sum() == pytest.approx(np.array([7, 4, 1]) / 12, abs=0.02)
    with pytest.raises(LatscopeError, match="0 to 0.95"):
        w.background_frames(rng, 1.2, duration)
