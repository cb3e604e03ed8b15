"""``latscope export --format pcapng``: the recorded frames of a capture as a pcapng file.

# Ref: IETF draft-ietf-opsawg-pcapng (PCAP Now Generic), sections 4.1 (Section Header Block),
# 4.2 (Interface Description Block, if_tsresol, if_fcslen), 4.3 (Enhanced Packet Block,
# epb_flags).

One interface (LINKTYPE_ETHERNET, timestamps in nanoseconds by default: ``if_tsresol`` = 9, or in
picoseconds with ``resolution="ps"``: ``if_tsresol`` = 12; ``if_fcslen`` = 4, the frames' original
length counts their 4-byte FCS). Each FRAME record with a known start edge becomes one Enhanced
Packet Block: timestamp = the frame's first ``RX_DV``/``TX_EN`` edge (start of the preamble)
converted from ticks to ns (or ps) since the capture's timestamp reset; captured bytes = the bytes
the gateware kept (``--header-bytes``, possibly none); original length = the frame's length;
``epb_flags`` direction inbound for RX (into the DUT) and outbound for TX, and the link-layer error
bits (CRC, symbol, too short, too long, unaligned); a comment with the sequence number, class,
frame index and end time (ps). The section header's comment holds the capture's provenance
(``latscope provenance {JSON}``, :mod:`latscope.capture.files.provenance`). Wireshark and tshark
open it as is.

Nanoseconds are the default because every Wireshark reads them (see below); each stamp is the
nearest ns (halves up). Picoseconds keep every tick exact on the ECP5 builds (1.25 ns = 1250 ps,
3.125 ns = 3125 ps). A tick that is not a whole number of ps (the iCEBreaker's 1/96 MHz = 10416.67
ps; that build captures edges only, so it has no frames of its own) is rounded to the nearest ps
(error at most 0.5 ps) and the summary says so. Wireshark itself keeps ns: it shows the ps stamps
cut to ns. Wireshark 4.0 (4.0.17 measured here, Debian 12) overflows converting finer-than-ns
stamps whose sub-second part exceeds 2**64 / 10**9 units (18.4 ms at ps): it showed 10.017995222 s
for 10.737418241250 s. So ``--tsresol ps`` is for readers that handle it (scapy, newer Wireshark).
"""

import json
import struct
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.frames import capture_placement
from latscope.capture.files.outputs import open_output
from latscope.capture.files.provenance import provenance, with_step
from latscope.gateware.codec import FLAGS

__all__ = ["export_pcapng", "PcapngSummary", "EPB_ERROR_BITS", "PROVENANCE_TAG"]

#: Starts the section header's comment holding the capture's provenance as JSON
#: (:mod:`latscope.capture.files.provenance`).
PROVENANCE_TAG = "latscope provenance"

_LINKTYPE_ETHERNET = 1
_BYTE_ORDER_MAGIC = 0x1A2B3C4D
#: epb_flags bits (pcapng §4.3.1): 31 symbol error, 28 unaligned frame, 26 too short, 25 too long,
#: 24 CRC error.
EPB_ERROR_BITS = {"rx_er": 1 << 31, "odd_nibble": 1 << 28, "runt": 1 << 26,
                  "oversize": 1 << 25, "fcs_bad": 1 << 24}
_INBOUND, _OUTBOUND = 1, 2
#: if_tsresol by resolution name: timestamps in units of 10^-TSRESOL s.
TSRESOL = {"ps": 12, "ns": 9}
#: if_fcslen: the frames' length includes their FCS (4 bytes).
FCS_LEN = 4


def _pad4(data):
    return data + bytes(-len(data) % 4)


def _option(code, value):
    return struct.pack("<HH", code, len(value)) + _pad4(value)


def _nearest(value):
    """``value`` (a Fraction) rounded to the nearest integer, halves up."""
    return (2 * value.numerator + value.denominator) // (2 * value.denominator)


def _block(block_type, body):
    length = 12 + len(body)
    return struct.pack("<II", block_type, length) + body + struct.pack("<I", length)


@dataclass
class PcapngSummary:
    output: str
    packets: int
    skipped: int
    #: the timestamps' unit, "ps" or "ns"
    resolution: str = "ps"
    #: units per tick, exact (a string such as "1250" or "31250/3")
    units_per_tick: str = ""
    #: every timestamp is the exact tick (False: rounded to the nearest unit)
    exact: bool = True
    #: records outside the --from/--to window (not written, not counted as skipped)
    outside_window: int = 0
    warnings: list = field(default_factory=list)


def export_pcapng(capture, output, *, force=False, start_tick=None,
                  stop_tick=None, resolution="ns"):
    """Write the FRAME records of ``capture`` (an open ``Capture``) to ``output``.

    ``output`` is written under :mod:`latscope.capture.files.outputs`'s policy; ``force``
    replaces an existing file, never the capture itself.

    ``resolution`` is ``"ps"`` (exact ticks on the ECP5 builds) or ``"ns"`` (for Wireshark 4.0
    and older, see the module's text).

    ``start_tick``/``stop_tick`` (optional) keep the frames whose first edge is at a tick ``t``
    with ``start_tick <= t < stop_tick``.

    Returns
    -------
    PcapngSummary
        Packets written, records skipped because their start edge is not in the capture, and
        the timestamp conversion.
    """
    records, headers = capture.frames()
    if not len(records):
        raise LatscopeError(f"{capture.path}: the capture holds no frame records "
                            f"(frame-aware capture was not on)")
    events = capture.events()
    placement = capture_placement(capture, events)
    start, end = placement.start, placement.end
    if resolution not in TSRESOL:
        raise LatscopeError(f"pcapng resolution must be ps or ns, not {resolution!r}")
    tick_hz = Fraction(str(capture.metadata["tick_hz"]))
    units_per_tick = Fraction(10**TSRESOL[resolution]) / tick_hz
    exact = units_per_tick.denominator == 1

    # opt_comment (pcapng §3.5) of the section: what the frames are and where they came from
    prov = with_step(provenance(capture.metadata), "export pcapng", capture.path)
    comment = f"{PROVENANCE_TAG} {json.dumps(prov, sort_keys=True)}".encode()
    out = [_block(0x0A0D0D0A, struct.pack("<IHHq", _BYTE_ORDER_MAGIC, 1, 0, -1)
                  + _option(1, comment) + _option(4, b"latscope") + _option(0, b""))]
    out.append(_block(1, struct.pack("<HHI", _LINKTYPE_ETHERNET, 0, 65535)
                      + _option(9, bytes([TSRESOL[resolution]])) + _option(13, bytes([FCS_LEN]))
                      + _option(2, b"latscope tap")
                      + _option(0, b"")))
    written = outside = 0
    order = np.argsort(np.where(start < 0, np.iinfo(np.int64).max, start), kind="stable")
    for i in order.tolist():
        if start[i] < 0:
            continue
        if (start_tick is not None and start[i] < start_tick) or \
                (stop_tick is not None and start[i] >= stop_tick):
            outside += 1
            continue
        r = records[i]
        ts = _nearest(int(start[i]) * units_per_tick)
        kept = bytes(headers[i, :int(r["header_len"])])
        flags = _INBOUND if int(r["direction"]) == 0 else _OUTBOUND
        f = int(r["flags"])
        for name, bit in EPB_ERROR_BITS.items():
            hit = not (f & FLAGS["fcs_ok"]) if name == "fcs_bad" else f & FLAGS[name]
            if hit:
                flags |= bit
        end_at = "" if end[i] < 0 else \
            f" end_{resolution}={_nearest(int(end[i]) * units_per_tick)}"
        comment = (f"seq={int(r['seq'])}{'' if f & FLAGS['seq_valid'] else '(none)'} "
                   f"class={int(r['cls'])} frame_index={int(r['frame_index'])}{end_at}")
        body = struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(kept), int(r["length"]))
        body += _pad4(kept) + _option(2, struct.pack("<I", flags))
        body += _option(1, comment.encode()) + _option(0, b"")
        out.append(_block(6, body))
        written += 1
    skipped = len(records) - written - outside
    warnings = [f"{skipped} frame record(s) without their start edge in the capture were not "
                f"written"] if skipped else []
    if not exact:
        warnings.append(f"a tick is {float(units_per_tick):.3f} {resolution}, not a whole "
                        f"number of {resolution}: timestamps are rounded to the nearest "
                        f"{resolution} (error at most 0.5 {resolution})")
    if placement.summary():
        warnings.append(placement.summary())
    with open_output(output, [capture.path], force=force, mode="wb") as fh:
        fh.write(b"".join(out))
    return PcapngSummary(str(output), written, skipped, resolution, str(units_per_tick), exact,
                         outside, warnings)
