"""latscope traffic on loopback, against a small echo server (expected values from the header
layout in zephyr-app/lib/latscope_core/include/latscope_core/traffic.h)."""

import json
import socket
import threading

import pytest

from latscope import LatscopeError
from latscope.capture import traffic
from latscope.cli import main


@pytest.fixture
def echo_server():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.05)
    stop = threading.Event()
    seen = []

    def serve():
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(4096)
            except socket.timeout:
                continue
            seen.append(data)
            if traffic.decode_payload(data)[1] != 3:      # drop seq 3: one loss to record
                sock.sendto(data, addr)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield sock.getsockname(), seen
    stop.set()
    t.join()
    sock.close()


def test_payload_layout():
    # Bytes written by hand from the header layout; the C core's test uses the same vector.
    assert traffic.encode_payload(0x1234, 258, 0x0102030405, 18).hex() == \
        "4c541234000001020000000102030405" + "0000"
    assert traffic.decode_payload(bytes.fromhex("4c541234000001020000000102030405")) == \
        (0x1234, 258, 0x0102030405)
    assert traffic.decode_payload(b"xx" + bytes(14)) is None
    with pytest.raises(LatscopeError, match="must be 16 to 1472 bytes"):
        traffic.encode_payload(1, 1, 1, 15)


def test_sizes_and_target_validation():
    assert traffic.parse_sizes("64,256,1024") == [18, 210, 978]   # frame - 46
    assert traffic.parse_sizes("16,1472", "payload") == [16, 1472]
    with pytest.raises(LatscopeError, match="frame sizes must be 64 to 1518 bytes"):
        traffic.parse_sizes("63")
    with pytest.raises(LatscopeError, match="expected HOST:PORT"):
        traffic.parse_target("192.0.2.1")
    with pytest.raises(LatscopeError, match="--rate PPS"):
        traffic.run_traffic(("127.0.0.1", 9), [18], 1)


def test_paced_run_records_every_packet(echo_server, tmp_path):
    target, seen = echo_server
    out = tmp_path / "sent.jsonl"
    status = main(["traffic", "--target", f"{target[0]}:{target[1]}", "--sizes", "64,256",
                   "--rate", "500", "--count", "10", "--timeout", "0.3", "-o", str(out)])
    assert status == 1                       # one packet (seq 3) was not echoed
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    head, packets = lines[0], lines[1:]
    assert (head["sent"], head["received"], head["lost"]) == (10, 9, 1)
    assert [p["seq"] for p in packets] == list(range(10))
    assert [p["payload_bytes"] for p in packets[:2]] == [18, 210]
    assert packets[3]["received_ns"] is None
    # Paced by intended time: 500 pps = 2 ms apart exactly, whatever the actual send times.
    pairs = zip(packets, packets[1:], strict=False)
    steps = {b["intended_ns"] - a["intended_ns"] for a, b in pairs}
    assert steps <= {2_000_000, 2_000_001, 1_999_999}
    for p in packets:
        assert p["sent_ns"] >= p["intended_ns"]
        if p["received_ns"] is not None:
            assert p["received_ns"] >= p["sent_ns"]
    # The server saw the intended time in every payload.
    assert [traffic.decode_payload(d)[2] for d in seen] == [p["intended_ns"] for p in packets]


def test_one_in_flight(echo_server):
    target, _ = echo_server
    result = traffic.run_traffic(target, [16], 5, one_in_flight=True, timeout=0.2)
    assert (result.sent, result.received) == (5, 4)
    for a, b in zip(result.records, result.records[1:], strict=False):
        if a["received_ns"] is not None:   # next send only after the echo arrived
            assert b["intended_ns"] >= a["received_ns"]


def test_payload_layout_is_shared_with_gateware_and_firmware():
    """The sequence number `latscope traffic` writes is where the sniffers read it
    (gateware/protocol.py) and where the DUT firmware's header says it is (traffic.h)."""
    import re
    from pathlib import Path

    from latscope.gateware import protocol
    payload = traffic.encode_payload(7, 0xDEADBEEF, 5, 64)
    off = protocol.TRAFFIC_SEQ_OFFSET
    assert int.from_bytes(payload[off:off + 4], "big") == 0xDEADBEEF
    assert int.from_bytes(payload[:2], "big") == protocol.TRAFFIC_MAGIC
    header = (Path(__file__).resolve().parents[2] / "zephyr-app" / "lib" / "latscope_core"
              / "include" / "latscope_core" / "traffic.h").read_text()
    assert re.search(rf"\b{off}\s+u32 sequence number", header)
    assert f"LS_TRAFFIC_MAGIC   0x{protocol.TRAFFIC_MAGIC:04X}u" in header
    assert f"LS_TRAFFIC_HDR_LEN {protocol.TRAFFIC_HEADER_BYTES}u" in header
