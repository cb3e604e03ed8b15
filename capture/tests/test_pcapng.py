"""``latscope export --format pcapng`` and ``latscope info`` on a capture with frame records,
read back by tshark (Wireshark's own reader) and scapy. The capture is built here from scapy
frames: records from the reference parser, edges at known ticks, so every expected value is
known exactly."""

import json
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest

from latscope.capture.files import capfile
from latscope.capture.files.frames import frame_edge_times
from latscope.cli import main
from latscope.gateware.codec import FLAGS, FRAME_DTYPE, HEADER_MAX
from latscope.gateware.model_sniffer import FLAG_FIELDS, FRAME_FIELDS, parse_frame

scapy_all = pytest.importorskip("scapy.all", reason="scapy builds the test frames (pip: scapy)")

TICK_HZ = 320_000_000          # 3.125 ns ticks, as on ecpix5-x1
#: The ECP5 builds' tick rates (gateware/boards.py): ecpix5 200 MHz x 4 lanes, ecpix5-x1 160 x 2.
BOARD_TICK_HZ = {"ecpix5": 800_000_000, "ecpix5-x1": 320_000_000}


def pulse_ticks(tick_hz):
    """A 64-byte frame's DV pulse at 100 Mb/s: preamble/SFD + 64 bytes = 72 x 80 ns = 5.76 us,
    in whole ticks (1843 at 320 MHz, 4608 at 800 MHz)."""
    return 576 * tick_hz // 10**8


def build_capture(path, *, kept=48, rx_channel=0, names=None, tick_hz=TICK_HZ, first=1000,
                  index0=0):
    """Six frames alternating RX/TX, one with a bad FCS; returns (frames, start ticks).
    RX pulses are on ``rx_channel``, TX on channel 1; the first frame starts at tick ``first``;
    each direction's records count from ``index0`` (modulo 2**32, as the gateware's do)."""
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
        start = first + 3331 * i
        starts.append(start)
        time += [start, start + pulse_ticks(tick_hz)]
        channel += [rx_channel, rx_channel] if d == 0 else [1, 1]
        rising += [True, False]
        ref = parse_frame(frame)
        for name in FRAME_FIELDS:
            records[i][name] = ref[name]
        records[i]["flags"] = sum(FLAGS[f] for f in FLAG_FIELDS if ref[f])
        records[i]["direction"] = d
        records[i]["frame_index"] = (index0 + index[d]) % 2**32
        records[i]["header_len"] = kept
        headers[i, :kept] = np.frombuffer(frame[:kept], np.uint8)
        index[d] += 1
    names = names or {"0": "rx_dv", "1": "tx_en"}
    with capfile.CaptureWriter(path, {"tick_hz": tick_hz, "channels": names}) as w:
        order = np.argsort(time, kind="stable")       # RX and TX pulses overlap at 800 MHz
        w.append_events(np.asarray(time)[order], np.asarray(channel)[order],
                        np.asarray(rising)[order])
        w.append_frames(records, headers)
    return frames, starts


def test_frame_edge_times_by_index(tmp_path):
    frames, starts = build_capture(tmp_path / "c.lsc")
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        records, _ = cap.frames()
        ev = cap.events()
        start, end = frame_edge_times(records, ev.time, ev.channel, ev.rising, {0: 0, 1: 1})
    assert start.tolist() == starts
    assert (end - start).tolist() == [pulse_ticks(TICK_HZ)] * 6


def _idb_options(path):
    """{option code: value bytes} of the file's one Interface Description Block, parsed here
    from the pcapng draft's layout (block type 1; options after 8 bytes of body)."""
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        block_type, length = struct.unpack_from("<II", data, pos)
        if block_type == 1:
            body, options = data[pos + 8:pos + length - 4], {}
            k = 8
            while k + 4 <= len(body):
                code, size = struct.unpack_from("<HH", body, k)
                if code == 0:
                    break
                options[code] = body[k + 4:k + 4 + size]
                k += 4 + size + (-size % 4)
            return options
        pos += length
    raise AssertionError("no Interface Description Block")


@pytest.mark.parametrize("board", sorted(BOARD_TICK_HZ))
def test_export_pcapng_read_by_scapy_and_tshark(tmp_path, capsys, board):
    """--tsresol ps: timestamps in ps (if_tsresol 12) exact to the tick at the board's tick rate:
    expected tick * 10**12 / tick_hz, a whole number of ps (1250 or 3125 per tick), read back
    by scapy exactly (tolerance 0 ps); tshark keeps ns, so it shows that value cut to ns. The
    first frame starts at tick 4,000,001 (5 or 12.5 ms: past 2**32 ps, so both timestamp words
    are used, and under the 18.4 ms past which Wireshark 4.0 misreads ps, see
    test_ns_resolution_by_default_for_every_wireshark). if_fcslen 4, kept bytes, original
    length, direction, CRC-error flag, comment."""
    tick_hz = BOARD_TICK_HZ[board]
    frames, starts = build_capture(tmp_path / "c.lsc", tick_hz=tick_hz, first=4_000_001)
    out = tmp_path / "c.pcapng"
    assert main(["export", str(tmp_path / "c.lsc"), "--format", "pcapng", "-o", str(out),
                 "--tsresol", "ps", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["packets"] == 6 and summary["skipped"] == 0 and summary["exact"]
    assert summary["units_per_tick"] == str(10**12 // tick_hz) and summary["resolution"] == "ps"
    expect_ps = [s * 10**12 // tick_hz for s in starts]
    assert all(s * 10**12 % tick_hz == 0 for s in starts)
    options = _idb_options(out)
    assert options[9] == bytes([12]) and options[13] == bytes([4])   # if_tsresol, if_fcslen
    packets = scapy_all.rdpcap(str(out))
    # scapy keeps the block's integer timestamp and the interface's resolution exactly
    assert [p.time * 10**12 for p in packets] == expect_ps
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
        sec, frac = epoch.split(".")           # "s.nnnnnnnnn": Wireshark's ns clock
        assert int(sec) * 10**9 + int(frac.ljust(9, "0")) == expect_ps[i] // 1000
        assert (int(length), int(caplen)) == (len(frames[i]), 48)
        assert int(direction, 0) == (1 if i % 2 == 0 else 2)
        assert crc in (("1", "True") if i == 3 else ("0", "False"))
        assert f"seq={500 + i} class=0 frame_index={i // 2} end_ps=" in comment
        end_tick = starts[i] + pulse_ticks(tick_hz)
        assert comment.endswith(f"end_ps={end_tick * 10**12 // tick_hz}")
        assert port == "4242"          # 48 kept bytes reach into the UDP header


def _tshark_rows(path, fields):
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed (apt-get install tshark): scapy check done")
    cmd = ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=;"]
    for f in fields:
        cmd += ["-e", f]
    return [row.split(";") for row in
            subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()]


def _epoch_ns(text):
    sec, frac = text.split(".")
    return int(sec) * 10**9 + int(frac.ljust(9, "0"))


@pytest.mark.parametrize("board", sorted(BOARD_TICK_HZ))
def test_ns_resolution_by_default_for_every_wireshark(tmp_path, capsys, board):
    """The default (and --tsresol ns): if_tsresol 9, each stamp the nearest ns to tick * 10**9 /
    tick_hz (halves up; expected values computed here with integers), read by scapy and tshark
    exactly at 10.7 s into the capture, where Wireshark 4.0 misreads ps stamps."""
    tick_hz = BOARD_TICK_HZ[board]
    first = 10_737_418_241 * tick_hz // 10**9 + 1
    frames, starts = build_capture(tmp_path / "c.lsc", tick_hz=tick_hz, first=first)
    out = tmp_path / "c.pcapng"
    assert main(["export", str(tmp_path / "c.lsc"), "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["resolution"] == "ns" and not summary["exact"]
    assert main(["export", str(tmp_path / "c.lsc"), "-o", str(tmp_path / "n.pcapng"),
                 "--tsresol", "ns", "--json"]) == 0
    capsys.readouterr()
    assert (tmp_path / "n.pcapng").read_bytes() == out.read_bytes()
    assert _idb_options(out)[9] == bytes([9])
    expect_ns = [(2 * s * 10**9 + tick_hz) // (2 * tick_hz) for s in starts]
    assert [p.time * 10**9 for p in scapy_all.rdpcap(str(out))] == expect_ns
    rows = _tshark_rows(out, ["frame.time_epoch"])
    assert [_epoch_ns(r[0]) for r in rows] == expect_ns


def test_export_window(tmp_path, capsys):
    """--from/--to keep the frames whose first edge is in the window (starts at ticks
    1000 + 3331 i, 3.125 ns each: 10 us .. 35 us holds i = 1, 2, 3 at 13.5, 23.9, 34.4 us);
    --channels is refused."""
    build_capture(tmp_path / "c.lsc")
    out = tmp_path / "w.pcapng"
    assert main(["export", str(tmp_path / "c.lsc"), "-o", str(out), "--from", "10us", "--to",
                 "35us", "--tsresol", "ps", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["packets"], summary["outside_window"], summary["skipped"]) == (3, 3, 0)
    packets = scapy_all.rdpcap(str(out))
    assert [p.time * 10**12 for p in packets] == [(1000 + 3331 * i) * 3125 for i in (1, 2, 3)]
    assert main(["export", str(tmp_path / "c.lsc"), "-o", str(tmp_path / "x.pcapng"),
                 "--channels", "rx_dv"]) == 2
    assert "--channels does not apply" in capsys.readouterr().err
    rows = _tshark_rows(out, ["frame.comment"])
    assert [f"frame_index={i // 2} " in r[0]
            for i, r in zip((1, 2, 3), rows, strict=True)] == [True] * 3


def test_frame_index_unwrapped_past_2_to_the_32(tmp_path, capsys):
    """The file holds the gateware's 32-bit indices 2**32 - 2, 2**32 - 1, 0 per direction (a
    wrap); the reader returns them continued (records per direction are in order), so info and
    verify see no step back. (The frames' edges cannot be placed here: that needs 2**32 DV
    pulses.)"""
    build_capture(tmp_path / "c.lsc", index0=2**32 - 2)
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        records, _ = cap.frames()
        raw = np.concatenate([r for r, _ in cap._frms])
    assert raw["frame_index"].tolist() == [2**32 - 2, 2**32 - 2, 2**32 - 1, 2**32 - 1, 0, 0]
    assert records["frame_index"].tolist() == [2**32 - 2, 2**32 - 2, 2**32 - 1, 2**32 - 1,
                                               2**32, 2**32]
    assert main(["verify", str(tmp_path / "c.lsc"), "--json"]) == 0
    assert "backwards" not in capsys.readouterr().out


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
    # the nearest ns, halves up (the default resolution), computed with integers
    assert [p.time * 10**9 for p in packets] == [(2 * s * 10**9 + TICK_HZ) // (2 * TICK_HZ)
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

    from latscope.capture.files import frames
    result = doctest.testmod(frames, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
