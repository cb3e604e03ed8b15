"""``latscope export --format pcapng``: the recorded frames of a capture as a pcapng file.

# Ref: IETF draft-ietf-opsawg-pcapng (PCAP Now Generic), sections 4.1 (Section Header Block),
# 4.2 (Interface Description Block, if_tsresol), 4.3 (Enhanced Packet Block, epb_flags).

One interface (LINKTYPE_ETHERNET, timestamps in nanoseconds, ``if_tsresol`` = 9). Each FRAME
record with a known start edge becomes one Enhanced Packet Block: timestamp = the frame's first
``RX_DV``/``TX_EN`` edge (start of the preamble) converted from ticks to ns since the capture's
timestamp reset; captured bytes = the bytes the gateware kept (possibly none); original length =
the frame's length; ``epb_flags`` direction inbound for RX (into the DUT) and outbound for TX, and
the link-layer error bits (CRC, symbol, too short, too long, unaligned); a comment with the
sequence number, class, frame index and end time. Wireshark and tshark open it as is.
"""

import struct
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from latscope import LatscopeError
from latscope.capture.frames import FLAGS, capture_placement

__all__ = ["export_pcapng", "PcapngSummary", "EPB_ERROR_BITS"]

_LINKTYPE_ETHERNET = 1
_BYTE_ORDER_MAGIC = 0x1A2B3C4D
#: epb_flags bits (pcapng §4.3.1): 31 symbol error, 28 unaligned frame, 26 too short, 25 too long,
#: 24 CRC error.
EPB_ERROR_BITS = {"rx_er": 1 << 31, "odd_nibble": 1 << 28, "runt": 1 << 26,
                  "oversize": 1 << 25, "fcs_bad": 1 << 24}
_INBOUND, _OUTBOUND = 1, 2


def _pad4(data):
    return data + bytes(-len(data) % 4)


def _option(code, value):
    return struct.pack("<HH", code, len(value)) + _pad4(value)


def _block(block_type, body):
    length = 12 + len(body)
    return struct.pack("<II", block_type, length) + body + struct.pack("<I", length)


@dataclass
class PcapngSummary:
    output: str
    packets: int
    skipped: int
    warnings: list = field(default_factory=list)


def export_pcapng(capture, output, *, overwrite=False):
    """Write the FRAME records of ``capture`` (an open ``Capture``) to ``output``.

    Returns
    -------
    PcapngSummary
        Packets written, records skipped because their start edge is not in the capture.
    """
    records, headers = capture.frames()
    if not len(records):
        raise LatscopeError(f"{capture.path}: the capture holds no frame records "
                            f"(frame-aware capture was not on)")
    events = capture.events()
    placement = capture_placement(capture, events)
    start, end = placement.start, placement.end
    tick_hz = Fraction(str(capture.metadata["tick_hz"]))
    ns_per_tick = Fraction(10**9) / tick_hz

    out = [_block(0x0A0D0D0A, struct.pack("<IHHq", _BYTE_ORDER_MAGIC, 1, 0, -1)
                  + _option(4, b"latscope") + _option(0, b""))]
    out.append(_block(1, struct.pack("<HHI", _LINKTYPE_ETHERNET, 0, 65535)
                      + _option(9, bytes([9])) + _option(2, b"latscope tap")
                      + _option(0, b"")))
    written = 0
    order = np.argsort(np.where(start < 0, np.iinfo(np.int64).max, start), kind="stable")
    for i in order.tolist():
        if start[i] < 0:
            continue
        r = records[i]
        ts = int(round(start[i] * ns_per_tick))
        kept = bytes(headers[i, :int(r["header_len"])])
        flags = _INBOUND if int(r["direction"]) == 0 else _OUTBOUND
        f = int(r["flags"])
        for name, bit in EPB_ERROR_BITS.items():
            hit = not (f & FLAGS["fcs_ok"]) if name == "fcs_bad" else f & FLAGS[name]
            if hit:
                flags |= bit
        end_ns = "" if end[i] < 0 else f" end_ns={int(round(end[i] * ns_per_tick))}"
        comment = (f"seq={int(r['seq'])}{'' if f & FLAGS['seq_valid'] else '(none)'} "
                   f"class={int(r['cls'])} frame_index={int(r['frame_index'])}{end_ns}")
        body = struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(kept), int(r["length"]))
        body += _pad4(kept) + _option(2, struct.pack("<I", flags))
        body += _option(1, comment.encode()) + _option(0, b"")
        out.append(_block(6, body))
        written += 1
    skipped = len(records) - written
    warnings = [f"{skipped} frame record(s) without their start edge in the capture were not "
                f"written"] if skipped else []
    if placement.summary():
        warnings.append(placement.summary())
    try:
        with open(output, "wb" if overwrite else "xb") as fh:
            fh.write(b"".join(out))
    except FileExistsError:
        raise LatscopeError(f"{output} exists; choose another name or pass --force") from None
    except OSError as error:
        raise LatscopeError(f"cannot write {output}: {error.strerror}") from None
    return PcapngSummary(str(output), written, skipped, warnings)
