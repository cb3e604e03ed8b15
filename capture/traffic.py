"""UDP test traffic for the device under test, paced by intended send time.

Each datagram's payload starts with the 16-byte header the DUT firmware knows
(``zephyr-app/lib/latscope_core/include/latscope_core/traffic.h``), big-endian::

    u16 magic 0x4C54 ("LT") | u16 run id | u32 sequence number | u64 intended send time (ns)

followed by zero padding up to the size. Sends are scheduled by intended time (packet ``i`` at
``start + i / rate``), so a slow answer never delays the schedule and latency is measured from the
intended time (coordinated omission, after wrk2). ``--one-in-flight`` sends the next packet when
the previous echo arrived or timed out. Every packet is recorded: intended and actual send time,
receive time of its echo (``null`` if none).
"""

import json
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from latscope import LatscopeError
from latscope.capture.files.outputs import open_output
from latscope.gateware.protocol import TRAFFIC_HEADER_BYTES, TRAFFIC_MAGIC, TRAFFIC_SEQ_OFFSET

# The layout is defined once, in gateware/protocol.py (the sniffers read the sequence number
# there); this struct spells it out for packing and is checked against it at import.
MAGIC = TRAFFIC_MAGIC
HEADER = struct.Struct(">HHIQ")
if HEADER.size != TRAFFIC_HEADER_BYTES or struct.calcsize(">HH") != TRAFFIC_SEQ_OFFSET:
    raise ImportError("capture/traffic.py's HEADER disagrees with gateware/protocol.py")
#: Bytes of an Ethernet II frame around a UDP payload: 14 header + 20 IPv4 + 8 UDP + 4 FCS.
FRAME_OVERHEAD = 46
MAX_PAYLOAD = 1472


def encode_payload(run_id, seq, intended_ns, payload_len):
    """Build one test payload.

    Parameters
    ----------
    run_id, seq, intended_ns : int
        Header fields (run id is truncated to 16 bits, seq to 32, time to 64).
    payload_len : int
        UDP payload bytes, 16 to 1472.

    Examples
    --------
    >>> encode_payload(0x1234, 258, 0x0102030405, 16).hex()
    '4c541234000001020000000102030405'
    """
    if not HEADER.size <= payload_len <= MAX_PAYLOAD:
        raise LatscopeError(f"payload of {payload_len} bytes: must be 16 to 1472 bytes")
    head = HEADER.pack(MAGIC, run_id & 0xFFFF, seq & 0xFFFFFFFF, intended_ns & (2**64 - 1))
    return head + bytes(payload_len - HEADER.size)


def decode_payload(data):
    """Return ``(run_id, seq, intended_ns)`` of a test payload, or None if it is not one."""
    if len(data) < HEADER.size:
        return None
    magic, run_id, seq, intended = HEADER.unpack_from(data)
    return (run_id, seq, intended) if magic == MAGIC else None


def parse_target(text):
    """``HOST:PORT`` to ``(host, port)`` with a LatscopeError on bad input."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LatscopeError(f"target {text!r}: expected HOST:PORT, e.g. 192.0.2.1:4242")
    return host, int(port)


def parse_sizes(text, kind="frame"):
    """Comma-separated sizes to UDP payload lengths (``kind`` ``frame``: Ethernet frame bytes
    including FCS, RFC 2544 style, 64..1518; ``payload``: UDP payload bytes, 16..1472)."""
    try:
        sizes = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise LatscopeError(f"sizes {text!r}: expected comma-separated integers") from None
    if not sizes:
        raise LatscopeError("sizes: give at least one size")
    out = []
    for s in sizes:
        payload = s - FRAME_OVERHEAD if kind == "frame" else s
        lo, hi = (64, 1518) if kind == "frame" else (16, 1472)
        if not lo <= s <= hi:
            raise LatscopeError(f"size {s}: {kind} sizes must be {lo} to {hi} bytes")
        out.append(payload)
    return out


@dataclass
class TrafficResult:
    """What one traffic run sent and got back; ``records`` holds one dict per packet."""

    records: list = field(default_factory=list)
    run_id: int = 0

    @property
    def sent(self):
        return len(self.records)

    @property
    def received(self):
        return sum(r["received_ns"] is not None for r in self.records)

    def summary(self):
        """Counts and round-trip times from the intended send time (ns)."""
        rtt = sorted(r["received_ns"] - r["intended_ns"] for r in self.records
                     if r["received_ns"] is not None)
        pick = (lambda q: rtt[min(len(rtt) - 1, int(q * len(rtt)))]) if rtt else (lambda q: None)
        return {"run_id": self.run_id, "sent": self.sent, "received": self.received,
                "lost": self.sent - self.received, "rtt_min_ns": rtt[0] if rtt else None,
                "rtt_p50_ns": pick(0.5), "rtt_p99_ns": pick(0.99),
                "rtt_max_ns": rtt[-1] if rtt else None}


def run_traffic(target, sizes, count, *, rate=None, one_in_flight=False, timeout=0.5,
                duration=None, run_id=None, clock=time.monotonic_ns):
    """Send ``count`` datagrams cycling through ``sizes`` (payload bytes) to ``target``.

    Parameters
    ----------
    target : (str, int)
        Host and UDP port of the DUT's echo.
    sizes : list of int
        UDP payload sizes, used in turn.
    count : int
        Packets to send (1 to 10,000,000).
    rate : float, optional
        Packets per second, paced by intended send time. Required unless ``one_in_flight``.
    one_in_flight : bool
        Send the next packet when the previous echo arrived or ``timeout`` expired.
    timeout : float
        Seconds to wait for the last echoes (and per packet with ``one_in_flight``).
    duration : float, optional
        Stop sending after this many seconds even if ``count`` is not reached.

    Returns
    -------
    TrafficResult
    """
    if not 1 <= count <= 10_000_000:
        raise LatscopeError(f"count {count}: must be 1 to 10,000,000 packets")
    if not one_in_flight and (rate is None or not 0 < rate <= 1_000_000):
        raise LatscopeError("give --rate PPS (0 < PPS <= 1,000,000) or --one-in-flight")
    run_id = (os.getpid() ^ clock()) & 0xFFFF if run_id is None else run_id & 0xFFFF
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect(target)
    except OSError as error:
        sock.close()
        raise LatscopeError(f"target {target[0]}:{target[1]}: {error.strerror}") from None
    records = []
    lock = threading.Lock()
    answered = threading.Event()
    stop = threading.Event()

    def receiver():
        sock.settimeout(0.05)
        while not stop.is_set():
            try:
                data = sock.recv(2048)
            except socket.timeout:
                continue
            except OSError:      # ICMP port unreachable and the like: count as lost
                continue
            now = clock()
            head = decode_payload(data)
            if head is None or head[0] != run_id:
                continue
            with lock:
                if head[1] < len(records) and records[head[1]]["received_ns"] is None:
                    records[head[1]]["received_ns"] = now
                    answered.set()

    thread = threading.Thread(target=receiver, daemon=True)
    thread.start()
    start = clock()
    try:
        for seq in range(count):
            if one_in_flight:
                intended = clock()
            else:
                intended = start + round(seq * 1e9 / rate)
                while (now := clock()) < intended:
                    time.sleep(min((intended - now) / 1e9, 0.01))
            if duration is not None and intended - start > duration * 1e9:
                break
            payload = encode_payload(run_id, seq, intended, sizes[seq % len(sizes)])
            answered.clear()
            with lock:   # actual send time: taken just before the send call
                records.append({"seq": seq, "payload_bytes": len(payload),
                                "intended_ns": intended, "sent_ns": clock(),
                                "received_ns": None})
            try:
                sock.send(payload)
            except OSError:
                pass
            if one_in_flight:
                answered.wait(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with lock:
                if all(r["received_ns"] is not None for r in records):
                    break
            time.sleep(0.005)
    finally:
        stop.set()
        thread.join()
        sock.close()
    return TrafficResult(records=records, run_id=run_id)


def write_jsonl(result, path, meta, *, force=False):
    """Write a run header line, then one line per packet, under
    :mod:`latscope.capture.files.outputs`'s policy (``"-"``: standard output; ``force`` replaces
    an existing file)."""
    with open_output(path, force=force) as f:
        f.write(json.dumps({"type": "run", **meta, **result.summary()}) + "\n")
        for r in result.records:
            f.write(json.dumps({"type": "packet", **r}) + "\n")
