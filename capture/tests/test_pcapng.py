"""``latscope export --format pcapng`` and ``latscope info`` on a capture with frame records,
read back by tshark (Wireshark's own reader) and scapy. The capture is built here from scapy
frames: records from the reference parser, edges at known ticks, so every expected value is
known exactly."""

import json
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from latscope.capture import capfile
from latscope.capture.frames import FLAGS, FRAME_DTYPE, HEADER_MAX, frame_edge_times
from latscope.cli import main
from latscope.gateware.model_sniffer import FLAG_FIELDS, FRAME_FIELDS, parse_frame

scapy_all = pytest.importorskip("scapy.all", reason="scapy builds the test frames (pip: scapy)")

TICK_HZ = 320_000_000          # 3.125 ns ticks, as on the ECPIX-5


def build_capture(path, *, kept=48, rx_channel=0, names=None):
    """Six frames alternating RX/TX, one with a bad FCS; returns (frames, start ticks).
    RX pulses are on ``rx_channel``, TX on channel 1."""
    frames, starts = [], []
    eth = scapy_all.Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    for i in range(6):
        payload = b"LT\x00\x01" + (500 + i).to_bytes(4, "big") + bytes(8)
        raw = bytes(eth / scapy_all.IP(src="192.0.2.1", dst="192.0.2.2")
                    / scapy_all.UDP(sport=4242, dport=4242) / payload)
        raw += bytes(max(0, 60 - len(raw)))
        frames.append(raw + (zlib.crc32(raw) ^ (i == 3)).to_bytes(4, "little"))
    time, channel, rising = [], [], []
    records = np.zeros(len(frames), FRAME_DTYPE)
    headers = np.zeros((len(frames), HEADER_MAX), np.uint8)
    index = [0, 0]
    for i, frame in enumerate(frames):
        d = i % 2
        start = 1000 + 3331 * i
        starts.append(start)
        time += [start, start + 1843]      # 64 bytes + preamble/SFD = 5.76 us = 1843.2 ticks
        channel += [rx_channel, rx_channel] if d == 0 else [1, 1]
        rising += [True, False]
        ref = parse_frame(frame)
        for name in FRAME_FIELDS:
            records[i][name] = ref[name]
        records[i]["flags"] = sum(FLAGS[f] for f in FLAG_FIELDS if ref[f])
        records[i]["direction"], records[i]["frame_index"] = d, index[d]
        records[i]["header_len"] = kept
        headers[i, :kept] = np.frombuffer(frame[:kept], np.uint8)
        index[d] += 1
    names = names or {"0": "rx_dv", "1": "tx_en"}
    with capfile.CaptureWriter(path, {"tick_hz": TICK_HZ, "channels": names}) as w:
        w.append_events(time, channel, rising)
        w.append_frames(records, headers)
    return frames, starts


def test_frame_edge_times_by_index(tmp_path):
    frames, starts = build_capture(tmp_path / "c.lsc")
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        records, _ = cap.frames()
        ev = cap.events()
        start, end = frame_edge_times(records, ev.time, ev.channel, ev.rising, {0: 0, 1: 1})
    assert start.tolist() == starts
    assert (end - start).tolist() == [1843] * 6


def test_export_pcapng_read_by_scapy_and_tshark(tmp_path, capsys):
    """Timestamps in ns (tick * 1e9 / 320 MHz, exact: every start is a multiple of 0.125 ns
    rounded to ns here), kept bytes, original length, direction, CRC-error flag, comment."""
    frames, starts = build_capture(tmp_path / "c.lsc")
    out = tmp_path / "c.pcapng"
    assert main(["export", str(tmp_path / "c.lsc"), "--format", "pcapng", "-o", str(out),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["packets"] == 6 and summary["skipped"] == 0
    expect_ns = [round(s * 10**9 / TICK_HZ) for s in starts]
    packets = scapy_all.rdpcap(str(out))
    assert [round(float(p.time) * 1e9) for p in packets] == expect_ns
    assert [bytes(p) for p in packets] == [f[:48] for f in frames]
    assert [p.wirelen for p in packets] == [len(f) for f in frames]
    assert [p.direction for p in packets] == [1, 2] * 3          # inbound RX, outbound TX
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed (apt-get install tshark): scapy check done")
    fields = ["frame.time_epoch", "frame.len", "frame.cap_len", "frame.packet_flags_direction",
              "frame.packet_flags_crc_error", "frame.comment", "udp.dstport"]
    cmd = ["tshark", "-r", str(out), "-T", "fields", "-E", "separator=;"]
    for f in fields:
        cmd += ["-e", f]
    rows = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(rows) == 6
    for i, row in enumerate(rows):
        epoch, length, caplen, direction, crc, comment, port = row.split(";")
        assert round(float(epoch) * 1e9) == expect_ns[i]
        assert (int(length), int(caplen)) == (len(frames[i]), 48)
        assert int(direction, 0) == (1 if i % 2 == 0 else 2)
        assert crc in (("1", "True") if i == 3 else ("0", "False"))
        assert f"seq={500 + i} class=0 frame_index={i // 2}" in comment
        assert port == "4242"          # 48 kept bytes reach into the UDP header


def test_rmii_frames_take_their_times_from_crs_dv(tmp_path, capsys):
    """An RMII capture under the ECPIX-5's default names (channel 0 rx_dv, 2 crs_dv): the RX
    pulses are on CRS_DV (channel 2) and RX_DV has none, so the frames' times come from channel
    2, not from the lower-numbered rx_dv (expected values: the ticks build_capture wrote)."""
    names = {"0": "rx_dv", "1": "tx_en", "2": "crs_dv"}
    frames, starts = build_capture(tmp_path / "r.lsc", rx_channel=2, names=names)
    out = tmp_path / "r.pcapng"
    assert main(["export", str(tmp_path / "r.lsc"), "--format", "pcapng", "-o", str(out),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["packets"] == 6 and summary["skipped"] == 0
    packets = scapy_all.rdpcap(str(out))
    assert [round(float(p.time) * 1e9) for p in packets] == [round(s * 10**9 / TICK_HZ)
                                                               for s in starts]
    assert [p.direction for p in packets] == [1, 2] * 3


def test_info_lists_frames_and_export_refuses_edge_only_capture(tmp_path, capsys):
    build_capture(tmp_path / "c.lsc")
    assert main(["info", str(tmp_path / "c.lsc"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["frames"]["records"] == 6
    assert info["frames"]["by_class"] == {"rx.0": 3, "tx.0": 3}
    with capfile.CaptureWriter(tmp_path / "e.lsc", {"tick_hz": TICK_HZ}) as w:
        w.append_events([1, 2], [0, 0], [True, False])
    assert main(["export", str(tmp_path / "e.lsc"), "--format", "pcapng"]) != 0
    err = capsys.readouterr().err
    assert "holds no frame records" in err and "Traceback" not in err


def test_frames_module_doctests():
    import doctest

    from latscope.capture import frames
    result = doctest.testmod(frames, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
