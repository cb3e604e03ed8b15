"""``latscope capture``, ``info`` and ``verify`` against the emulated instrument on a pty."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from latscope.capture import events
from latscope.capture.files import capfile
from latscope.capture.link.transport import EmulatedInstrument, PtyDevice
from latscope.cli import main
from latscope.gateware import protocol

ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")
CONFIG = """
[channels]
0 = "rx_dv"
1 = "tx_en"
3 = "m0"
[markers]
m0 = "rx.isr"
[dut]
description = "emulated DUT"
label = "cfg-a"
[traffic]
scenario = "echo 64 B"
"""


def _packets(n, period=2000):
    base = np.arange(n, dtype=np.int64) * period
    time_ = np.stack([base, base + 100, base + 300, base + 310, base + 900, base + 1000],
                     1).ravel()
    channel = np.tile(np.array([0, 0, 3, 3, 1, 1], np.uint8), n)
    rising = np.tile(np.array([True, False, True, False, True, False]), n)
    return time_, channel, rising


@pytest.fixture
def device():
    devices = []

    def make(n=2000, fps=None, **kw):
        dev = PtyDevice(EmulatedInstrument(*_packets(n), channels=ROLES, **kw),
                        frames_per_second=fps)
        devices.append(dev.start())
        return dev
    yield make
    for dev in devices:
        dev.close()


def test_capture_packets_info_verify(tmp_path, device, capsys):
    config = tmp_path / "cfg.toml"
    config.write_text(CONFIG)
    out = tmp_path / "a.lsc"
    dev = device()
    rc = main(["capture", "--port", dev.path, "-o", str(out), "--config", str(config),
               "--packets", "150", "--json", "--quiet"])
    captured = capsys.readouterr()
    assert rc == 0
    record = json.loads(captured.out)
    assert record["reason"] == "packet limit reached (150 packets)" and record["packets"] == 150
    assert record["events"] == 6 * 149 + 2        # ends at the 150th rx_dv fall
    assert "stopped: packet limit reached (150 packets)." in captured.err
    assert "\r" not in captured.err               # no progress bar when not a terminal
    with capfile.open_capture(out) as cap:
        assert cap.complete and cap.n_events == record["events"]
        assert cap.channel_names == {0: "rx_dv", 1: "tx_en", 3: "m0"}
        assert cap.markers == {"m0": "rx.isr"}
        assert cap.metadata["label"] == "cfg-a" and cap.metadata["scenario"] == "echo 64 B"
        assert cap.metadata["instrument"]["protocol_version"] == protocol.PROTOCOL_VERSION
        assert np.array_equal(cap.events().time, _packets(2000)[0][:record["events"]])

    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "label       cfg-a" in text and "markers     m0=rx.isr" in text
    assert f"events      {record['events']} over" in text
    assert "stopped     packet limit reached (150 packets)" in text
    assert main(["info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["events"] == record["events"] and info["tick_hz"] == 200e6

    assert main(["verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert ": OK:" in text and "gaps: none; no event was lost" in text


def test_verify_reports_damage_and_gaps(tmp_path, capsys):
    path = tmp_path / "d.lsc"
    with capfile.CaptureWriter(path, {"tick_hz": 1e9}, fsync=False) as w:
        w.append_events(np.arange(100), np.zeros(100), np.ones(100))
        w.flush()
        w.append_loss(events.LossRecord(100, 2000, 12, "link"))
        w.append_events(np.arange(200, 300), np.zeros(100), np.ones(100))
    assert main(["verify", str(path)]) == 0
    text = capsys.readouterr().out
    assert "link             12  0.000000100  0.000002000" in text
    with capfile.open_capture(path) as cap:
        last_evts = [c for c in cap.chunks if c.type == b"EVTS"][-1]
    data = bytearray(path.read_bytes())
    data[last_evts.offset + 20] ^= 0xFF                 # inside the last EVTS chunk
    path.write_bytes(data)
    assert main(["verify", str(path)]) == 1
    text = capsys.readouterr().out
    # the NOTE after the damaged chunk is still read: damaged but finalised, not "unfinished"
    assert "DAMAGED (finalised)" in text and "bad CRC in b'EVTS' chunk" in text
    assert "recoverable: 100 events" in text and "damage          100" in text
    assert main(["verify", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["recoverable_events"] == 100
    assert report["lost"] == {"overflow": 0, "link": 12, "damage": 100}
    assert report["state"] == "damaged, finalised" and report["finalised"] is True


def test_info_on_a_non_capture_is_a_clean_error(tmp_path, capsys):
    path = tmp_path / "x.lsc"
    path.write_text("not a capture")
    assert main(["info", str(path)]) == 2
    assert "not a latscope capture file (bad magic)" in capsys.readouterr().err


def test_incompatible_instrument_is_refused_without_a_file(tmp_path, device, capsys):
    dev = device(protocol_version=protocol.PROTOCOL_VERSION + 1)
    out = tmp_path / "v.lsc"
    assert main(["capture", "--port", dev.path, "-o", str(out), "--events", "5"]) == 2
    err = capsys.readouterr().err
    assert f"instrument speaks protocol version {protocol.PROTOCOL_VERSION + 1}" in err
    assert not out.exists()


def test_source_and_output_options(tmp_path, capsys):
    assert main(["capture", "-o", str(tmp_path / "n.lsc")]) == 2
    assert "exactly one of --port DEVICE and --sim PROFILE" in capsys.readouterr().err
    (tmp_path / "e.lsc").write_bytes(b"")
    assert main(["capture", "--port", "/dev/null", "-o", str(tmp_path / "e.lsc")]) == 2
    assert "exists; choose another name or use --force" in capsys.readouterr().err
    assert main(["capture", "--port", "/nonexistent", "-o", str(tmp_path / "f.lsc")]) == 2
    assert "cannot open serial port /nonexistent" in capsys.readouterr().err
    assert main(["capture", "--port", "/nonexistent", "-o", str(tmp_path / "g.lsc"),
                 "--events", "0"]) == 2
    assert "--events must be positive, not 0" in capsys.readouterr().err


def _run_cli(args):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "latscope", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_events(dev, count, timeout=30):
    end = time.monotonic() + timeout
    while dev.instrument.sent < count:
        assert time.monotonic() < end, "capture never started"
        time.sleep(0.02)


@pytest.mark.parametrize("sig, reason", [(signal.SIGINT, "interrupted (Ctrl-C)"),
                                         (signal.SIGTERM, "interrupted (SIGTERM)")])
def test_signal_stops_cleanly(tmp_path, device, sig, reason):
    dev = device(n=10**6, fps=500)
    out = tmp_path / "s.lsc"
    proc = _run_cli(["capture", "--port", dev.path, "-o", str(out)])
    _wait_for_events(dev, 500)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert f"stopped: {reason}" in stderr
    with capfile.open_capture(out) as cap:
        assert cap.complete and cap.note["reason"] == reason
        assert cap.n_events >= 500
        assert np.array_equal(cap.events().time, _packets(10**6)[0][:cap.n_events])


def test_progress_line_shows_the_nearest_limit_with_percentage_and_eta():
    """Packets against --packets from the first redraw after the first second's packets; the ETA
    is the remaining count at the average rate since the start; a duration limit's is exact."""
    import io

    from latscope.capture.link.progress import CaptureProgress
    from latscope.capture.link.session import CaptureOutcome, Limits

    stream = io.StringIO()
    now = [0.0]
    bar = CaptureProgress(stream, enabled=True, clock=lambda: now[0],
                          limits=Limits(packets=20_000, duration=600.0))
    out = CaptureOutcome("", 0)
    bar(out)                                    # nothing counted yet: no ETA to give
    assert "packets 0/20.00k   0.0%  ETA -:--" in stream.getvalue()
    now[0], out.seconds, out.packets, out.events, out.bytes = 0.5, 0.5, 1_000, 4_000, 9_000
    bar(out)
    line = stream.getvalue().split("\r\x1b[K")[-1]
    # 1,000 packets in 0.5 s = 2,000/s: 19,000 left take 9.5 s -> "0:10"; 1000/20000 = 5.0 %
    # (the packet limit is nearer than the duration limit: 0.5/600 = 0.08 %)
    assert line.startswith("    0.5 s  packets 1.00k/20.00k   5.0%  ETA 0:10     4.00k events")
    now[0], out.seconds, out.packets = 590.0, 590.0, 1_500
    bar(out)
    # now the duration limit is nearer: 590/600 = 98.3 %, exactly 10 s left
    assert "time 590/600 s  98.3%  ETA 0:10" in stream.getvalue().split("\r\x1b[K")[-1]
    hours = CaptureProgress(io.StringIO(), enabled=True, limits=Limits(events=10**7))
    out = CaptureOutcome("", 0, events=1_000, seconds=1.0)
    assert "events 1.00k/10.00M   0.0%  ETA 2:46:39" in hours.line(out)   # 9,999 s left


def test_progress_line_on_a_terminal_only():
    import io

    from latscope.capture.link.progress import CaptureProgress
    from latscope.capture.link.session import CaptureOutcome

    class Tty(io.StringIO):
        def isatty(self):
            return True
    now = [0.0]
    tty_stream = Tty()
    bar = CaptureProgress(tty_stream, clock=lambda: now[0])
    out = CaptureOutcome("", 0, events=0, bytes=0)
    bar(out)
    now[0], out.events, out.bytes, out.seconds = 0.1, 100, 300, 0.1
    out.lost_overflow, out.lost_link = 5, 7
    bar(out)                                    # 0.1 s after the last draw: not redrawn
    assert tty_stream.getvalue().count("\r") == 1
    now[0] = 2.0
    out.events, out.bytes, out.seconds = 2000, 6000, 2.0
    bar(out)
    line = tty_stream.getvalue().split("\r\x1b[K")[-1]
    # events/s over the last redraw interval: (2000 - 0) / (2.0 - 0.0) = 1000; bytes/event = 3
    assert line == ("    2.0 s     2.00k events     1.00k ev/s   3.00 B/ev  "
                    "overflow lost 5  link lost 7")
    bar.done()
    assert tty_stream.getvalue().endswith("\n")
    plain = io.StringIO()
    quiet = CaptureProgress(plain, clock=lambda: now[0])
    quiet(out)
    quiet.done()
    assert plain.getvalue() == ""


def test_calibration_goes_into_the_metadata_and_the_analysis(tmp_path, device, capsys):
    """`capture --calibration FILE` stores the offsets; analysing the file subtracts them: m0 is
    3 ticks late in the calibration, so rx.isr (rx_dv falling at +100 -> m0 rising at +300,
    200 ticks = 1000 ns at 200 MHz ticks) becomes 197 ticks = 985 ns."""
    from latscope.analysis import api
    from latscope.capture.link import calibration as cal
    config = tmp_path / "cfg.toml"
    config.write_text(CONFIG)
    calfile = tmp_path / "cal.json"
    measured = cal.ChannelOffsets(channels=(0, 1, 3), offsets=(0, 0, 3), spread=(0, 0, 0),
                                  edges=100)
    dev = device()
    cal.write_calibration(calfile, measured, identity={"channels": 8, "tick_hz": 200_000_000})
    out = tmp_path / "c.lsc"
    rc = main(["capture", "--port", dev.path, "-o", str(out), "--config", str(config),
               "--packets", "50", "--quiet", "--calibration", str(calfile)])
    capsys.readouterr()
    assert rc == 0
    with capfile.open_capture(out) as cap:
        assert cap.metadata[cal.METADATA_KEY] == [0, 0, 0, 3, 0, 0, 0, 0]
    result = api.analyze_file(str(out))
    assert result.stats["rx.isr"].quantiles[50].value_ns == pytest.approx(985.0, abs=1e-9)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    rc = main(["capture", "--port", device().path, "-o", str(tmp_path / "d.lsc"),
               "--quiet", "--calibration", str(bad)])
    assert rc == 2 and "is not a latscope calibration file" in capsys.readouterr().err
