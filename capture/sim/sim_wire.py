"""The wire of the simulated bench: real Ethernet frames, nibble by nibble, on MII or RMII.

# Ref: IEEE Std 802.3-2018 §3.2 (frame, FCS), §4.4.2 (interframe gap: 96 bit times), §22.2.3
# (MII: preamble, SFD, low nibble first, 25 MHz at 100 Mb/s); RMII Specification rev. 1.2 §5.3
# (50 MHz REF_CLK, dibits, CRS_DV at the end of a frame); RFC 791/768 (IPv4, UDP).

Part of :mod:`latscope.capture.sim.simbench`. :func:`udp_frame` builds a frame (destination MAC
through FCS) whose UDP payload follows ``latscope traffic``'s layout (``protocol.TRAFFIC_*``, built
by :func:`latscope.capture.traffic.encode_payload`), so the sniffers find its sequence number where
they look by default. :func:`background_frames` draws background traffic at a given share of the
line rate with mixed sizes; :func:`serialize` puts frames on one direction's wire in order, never
closer than the interframe gap; :func:`mii_cycles` and :func:`rmii_cycles` give the pins cycle by
cycle (``RX_DV``/``TX_EN`` + ``RXD[3:0]`` at 25 MHz, or ``CRS_DV`` + ``RXD[1:0]`` at 50 MHz with
``CRS_DV`` toggling at nibble rate when the PHY's carrier drops before its data ends).

The cycle-level serialisers are :func:`latscope.gateware.model_sniffer.mii_nibbles` and
:func:`~latscope.gateware.model_sniffer.rmii_dibits` (one serialiser for tests and bench); this
module places them in time. Frames are checked in the tests with scapy and ``zlib.crc32``.
"""

import dataclasses
import struct
import zlib

import numpy as np

from latscope import LatscopeError
from latscope.capture.traffic import HEADER, encode_payload
from latscope.gateware.model_sniffer import mii_nibbles, rmii_dibits

__all__ = ["MII_CLOCK_NS", "RMII_CLOCK_NS", "BYTE_NS", "IFG_NS", "PREAMBLE_SFD_BYTES",
           "MIN_FRAME", "MAX_FRAME", "IMIX", "Endpoint", "HOST", "DUT", "udp_frame", "fcs",
           "wire_ns", "background_frames", "serialize", "mii_cycles", "rmii_cycles",
           "line_share"]

MII_CLOCK_NS = 40.0          # 25 MHz RX_CLK/TX_CLK, one nibble per cycle
RMII_CLOCK_NS = 20.0         # 50 MHz REF_CLK, one dibit per cycle
BYTE_NS = 80.0               # 100 Mb/s
IFG_NS = 960.0               # 96 bit times
PREAMBLE_SFD_BYTES = 8
MIN_FRAME = 64               # destination MAC through FCS, untagged (§3.2.7 minFrameSize)
MAX_FRAME = 1518             # untagged maxUntaggedFrameSize (1522 with one 802.1Q tag)
_HEADERS = 14 + 20 + 8       # Ethernet II, IPv4 without options, UDP
_VLAN_TAG = 4

#: Mixed frame sizes for background load: "simple IMIX", 7 : 4 : 1 frames of 64, 594 and 1518
#: bytes (IP packets of 40, 576 and 1500 bytes plus 18 bytes of Ethernet header and FCS, the
#: 58-byte one padded to the 64-byte minimum), the mix of the Agilent/Spirent/Ixia test tools
#: (RFC 6985 §4 discusses IMIX definitions). Mean 361.8 bytes per frame.
IMIX = ((64, 7), (594, 4), (1518, 1))


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """MAC and IPv4 address of one end of the bench (documentation addresses, RFC 5737)."""
    mac: bytes
    ip: bytes


HOST = Endpoint(bytes.fromhex("020000000001"), bytes([192, 0, 2, 1]))
DUT = Endpoint(bytes.fromhex("020000000002"), bytes([192, 0, 2, 2]))


def fcs(frame):
    """The 4 FCS bytes of ``frame`` (destination MAC through payload): CRC-32, least significant
    byte first (IEEE 802.3 §3.2.9; ``zlib.crc32`` is the same CRC)."""
    return zlib.crc32(frame).to_bytes(4, "little")


def _ipv4_checksum(header):
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def udp_frame(size, seq, *, src=HOST, dst=DUT, src_port=4242, dst_port=4242, pcp=None, vid=0,
              run_id=0, intended_ns=0, bad_fcs=False, traffic=True):
    """One Ethernet II / IPv4 / UDP frame of ``size`` bytes (destination MAC through FCS) whose
    payload is a ``latscope traffic`` test payload with sequence number ``seq``; with
    ``traffic=False`` it is zeros instead (background traffic: no magic, no sequence number).

    ``pcp`` (0..7) adds an 802.1Q tag (priority ``pcp``, VLAN ``vid``), 4 bytes inside ``size``.
    ``bad_fcs`` inverts the FCS's lowest bit.

    >>> f = udp_frame(64, 7)
    >>> len(f), f[12:14].hex(), int.from_bytes(f[42 + 4:42 + 8], "big")
    (64, '0800', 7)
    """
    tag = _VLAN_TAG if pcp is not None else 0
    payload_len = size - 4 - _HEADERS - tag
    if not HEADER.size <= payload_len <= 1472:
        raise LatscopeError(f"a UDP test frame of {size} bytes cannot carry the {HEADER.size}-byte "
                            f"test payload within one frame: use {_HEADERS + tag + 4 + HEADER.size}"
                            f"..{_HEADERS + tag + 4 + 1472} bytes")
    payload = (encode_payload(run_id, seq, intended_ns, payload_len) if traffic
               else bytes(payload_len))
    udp = struct.pack(">HHHH", src_port, dst_port, 8 + payload_len, 0) + payload
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), seq & 0xFFFF, 0x4000,
                               64, 17, 0, src.ip, dst.ip))
    ip[10:12] = _ipv4_checksum(bytes(ip)).to_bytes(2, "big")
    eth = dst.mac + src.mac
    if pcp is not None:
        if not 0 <= pcp <= 7 or not 0 <= vid < 4096:
            raise LatscopeError(f"802.1Q priority must be 0..7 and VLAN 0..4095, not {pcp}/{vid}")
        eth += struct.pack(">HH", 0x8100, pcp << 13 | vid)
    body = eth + b"\x08\x00" + bytes(ip) + udp
    check = bytearray(fcs(body))
    if bad_fcs:
        check[0] ^= 1
    return body + bytes(check)


def wire_ns(size):
    """Time one frame of ``size`` bytes holds the wire: preamble, SFD and frame (no gap)."""
    return (PREAMBLE_SFD_BYTES + np.asarray(size)) * BYTE_NS


def line_share(sizes, duration_ns):
    """Share of the line rate frames of ``sizes`` take in ``duration_ns``, counting preamble, SFD
    and the interframe gap (what "30 % load" means on a 100 Mb/s wire)."""
    return float(np.sum(wire_ns(np.asarray(sizes, float)) + IFG_NS) / duration_ns)


def background_frames(rng, load, duration_ns, *, mix=IMIX):
    """Arrival times (ns) and sizes of background frames taking ``load`` (0..0.95) of the line
    rate over ``duration_ns`` on average, sizes drawn from ``mix`` ((size, weight) pairs).

    Arrivals are a Poisson process (exponential gaps) at the rate that gives the load with the
    mix's mean wire time, so frames bunch as traffic from several senders through a switch does;
    :func:`serialize` then keeps them apart by at least the interframe gap.
    """
    if not 0 <= load <= 0.95:
        raise LatscopeError(f"background load must be 0 to 0.95 of the line rate, not {load!r}")
    if load == 0 or duration_ns <= 0:
        return np.zeros(0), np.zeros(0, np.int64)
    sizes = np.array([s for s, _ in mix], np.int64)
    weights = np.array([w for _, w in mix], float)
    weights /= weights.sum()
    mean_slot = float(np.sum(weights * (wire_ns(sizes) + IFG_NS)))
    rate = load / mean_slot                       # frames per ns
    n = rng.poisson(rate * duration_ns)
    times = np.sort(rng.uniform(0, duration_ns, n))
    return times, rng.choice(sizes, n, p=weights)


def serialize(ready_ns, sizes, *, grid_ns=MII_CLOCK_NS, phase_ns=0.0):
    """Start times (ns) of frames sent in the given order on one wire: each starts at its
    ``ready_ns`` or, if the wire is busy, an interframe gap after the previous frame ends, on the
    PHY clock grid (``grid_ns``, ``phase_ns``). ``ready_ns`` need not increase; the order is the
    order given (a FIFO). Returns ``(start_ns, end_ns)`` (end: the last bit of the FCS)."""
    ready = np.asarray(ready_ns, float)
    dur = wire_ns(np.asarray(sizes, float))
    start = np.empty(len(ready))
    end = np.empty(len(ready))
    free = -np.inf
    for i in range(len(ready)):     # a FIFO with one server: frames wait for the wire
        t = max(ready[i], free)
        t = np.ceil((t - phase_ns) / grid_ns - 1e-9) * grid_ns + phase_ns
        start[i] = t
        end[i] = t + dur[i]
        free = end[i] + IFG_NS
    return start, end


def _frames_in_order(frames, starts_ns, clock_ns, units_per_frame):
    starts = np.asarray(starts_ns, float)
    if len(frames) != len(starts):
        raise LatscopeError("one start time per frame is needed")
    if len(starts) and np.any(np.diff(starts) < 0):
        raise LatscopeError("frames must be given in wire order")
    cycles = np.rint(starts / clock_ns).astype(np.int64)
    if len(cycles) and np.any(np.abs(cycles * clock_ns - starts) > 1e-6):
        raise LatscopeError(f"frame starts must lie on the {clock_ns:g} ns PHY clock grid")
    lengths = np.array([units_per_frame(f) for f in frames], np.int64)
    gap = int(round(IFG_NS / clock_ns))
    if len(cycles) > 1 and np.any(cycles[1:] < cycles[:-1] + lengths[:-1] + gap):
        raise LatscopeError("two frames are closer than the 96-bit interframe gap")
    return cycles, lengths


def _pin_window(cycles, lengths, clock_ns, first_cycle, last_cycle):
    """First and last clock cycle of a pin window: as given, else from the first frame's start
    to the last frame's end plus one inter-frame gap."""
    gap = int(round(IFG_NS / clock_ns))
    lo = first_cycle if first_cycle is not None else (int(cycles[0]) if len(cycles) else 0)
    hi = last_cycle if last_cycle is not None else (
        int(cycles[-1] + lengths[-1] + gap) if len(cycles) else lo)
    return lo, hi


def mii_cycles(frames, starts_ns, *, first_cycle=None, last_cycle=None):
    """MII pins of one direction, one entry per 40 ns clock cycle.

    Parameters
    ----------
    frames : list of bytes
        Destination MAC through FCS each.
    starts_ns : array
        Time of each frame's first preamble nibble, on the 40 ns grid, in wire order, at least the
        interframe gap apart (as :func:`serialize` gives them with ``grid_ns=40``).
    first_cycle, last_cycle : int, optional
        Window (cycles of 40 ns, inclusive); default from the first frame's start to one gap
        after the last frame's end.

    Returns
    -------
    (cycle, dv, data) : int64, uint8, uint8 arrays
        Cycle numbers (``t = cycle * 40 ns``), ``RX_DV``/``TX_EN`` and the nibble; data is 0
        while DV is low.
    """
    cycles, lengths = _frames_in_order(frames, starts_ns, MII_CLOCK_NS,
                                       lambda f: 16 + 2 * len(f))
    lo, hi = _pin_window(cycles, lengths, MII_CLOCK_NS, first_cycle, last_cycle)
    n = hi - lo + 1
    dv = np.zeros(n, np.uint8)
    data = np.zeros(n, np.uint8)
    for frame, c in zip(frames, cycles, strict=True):
        nib = np.array([x for _, _, x in mii_nibbles(frame)], np.uint8)
        a, b = int(c) - lo, int(c) - lo + len(nib)
        if b <= 0 or a >= n:
            continue
        sa, sb = max(0, -a), len(nib) - max(0, b - n)
        dv[max(a, 0):min(b, n)] = 1
        data[max(a, 0):min(b, n)] = nib[sa:sb]
    return np.arange(lo, hi + 1, dtype=np.int64), dv, data


def rmii_cycles(frames, starts_ns, *, carrier_early=0, first_cycle=None, last_cycle=None):
    """RMII receive pins, one entry per 20 ns ``REF_CLK`` cycle: ``(cycle, crs_dv, dibit)``.

    ``carrier_early``: nibbles before the end of each frame's data at which the PHY loses carrier
    (an int for every frame or one per frame). From there on RMII 1.2 §5.3.2 has ``CRS_DV`` low on
    the first dibit of each nibble and high on the second, so it toggles with a 40 ns period
    (20 ns low, 20 ns high) until the data ends: a naive edge detector sees extra edges there.
    Otherwise as :func:`mii_cycles` (starts on the 20 ns grid)."""
    early = np.broadcast_to(np.asarray(carrier_early, np.int64), (len(frames),))
    cycles, lengths = _frames_in_order(frames, starts_ns, RMII_CLOCK_NS,
                                       lambda f: 32 + 4 * len(f))
    lo, hi = _pin_window(cycles, lengths, RMII_CLOCK_NS, first_cycle, last_cycle)
    n = hi - lo + 1
    dv = np.zeros(n, np.uint8)
    data = np.zeros(n, np.uint8)
    for frame, c, e in zip(frames, cycles, early, strict=True):
        pins = np.array(rmii_dibits(frame, carrier_early=int(e)), np.uint8)
        a, b = int(c) - lo, int(c) - lo + len(pins)
        if b <= 0 or a >= n:
            continue
        sa, sb = max(0, -a), len(pins) - max(0, b - n)
        dv[max(a, 0):min(b, n)] = pins[sa:sb, 0]
        data[max(a, 0):min(b, n)] = pins[sa:sb, 1]
    return np.arange(lo, hi + 1, dtype=np.int64), dv, data
