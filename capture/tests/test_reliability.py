"""Reliability: kill -9 during capture, closing the port, link corruption, decoder fuzzing.

Every expected value here comes from the emulated instrument (``capture/link/transport.py``), which
knows exactly which events it put in which frame and which frames it damaged; comparisons of
event times and loss counts are exact (integers, ``==``).
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from latscope.capture import events
from latscope.capture.files import capfile, integrity
from latscope.capture.link import session, stream
from latscope.capture.link.transport import (
    EmulatedInstrument,
    PtyDevice,
    SerialTransport,
)
from latscope.cli import main

ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")


def _events(n, seed=0):
    rng = np.random.default_rng(seed)
    time_ = np.cumsum(rng.integers(1, 5000, n)).astype(np.int64)
    return time_, rng.integers(0, 8, n).astype(np.uint8), rng.integers(0, 2, n).astype(bool)


# --- kill -9 -------------------------------------------------------------------------------------

def _capture_child(path, port, dev):
    """Body of a forked capture process: the real session and writer on a real pty."""
    code = 1
    try:
        os.close(dev.master)
        transport = SerialTransport(port)
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        session.configure(instrument, session.CaptureConfig(), identity)
        writer = capfile.CaptureWriter(path, session.capture_metadata(identity,
                                                                      session.CaptureConfig()),
                                       chunk_events=512, flush_interval=0.02)
        session.run_capture(instrument, writer)
        code = 0
    finally:
        os._exit(code)


def _kill_trial(tmp_path, rng, trial, time_, channel, rising):
    path = str(tmp_path / f"k{trial}.lsc")
    dev = PtyDevice(EmulatedInstrument(time_, channel, rising, channels=ROLES, frame_events=64))
    try:
        pid = os.fork()
        if pid == 0:                                   # pragma: no cover - child
            _capture_child(path, dev.path, dev)
        dev.release_slave()
        dev.pump(float(rng.uniform(0.0, 0.35)))        # identify .. streaming, at random
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    finally:
        dev.close()
    if not os.path.exists(path):
        return None                                    # killed before the file was created
    if os.path.getsize(path) < 16 + 12:
        with pytest.raises(capfile.CaptureFileError):  # killed before META: clear error
            capfile.open_capture(path)
        return "no-meta"
    with capfile.open_capture(path) as cap:
        # never a bad CRC: at worst a truncated tail from the write in flight
        assert all(p.startswith("truncated") for p in cap.problems), cap.problems
        assert cap.note is None
        n = cap.n_events
        ev = cap.events()
        assert np.array_equal(ev.time, time_[:n])        # exactly a prefix of what was sent
        assert np.array_equal(ev.channel, channel[:n])
        assert np.array_equal(ev.rising, rising[:n])
        report = integrity.verify(path)
        assert report["recoverable_events"] == n
        return "events" if n else "empty"


def test_kill_minus_9_at_random_moments_leaves_a_valid_file(tmp_path):
    """50 captures killed at random instants; each file opens with every complete chunk."""
    rng = np.random.default_rng(2024)
    time_, channel, rising = _events(200_000)
    outcomes = [_kill_trial(tmp_path, rng, trial, time_, channel, rising) for trial in range(50)]
    # the kills must land in every phase, including mid-capture with events on disk
    assert outcomes.count("events") >= 10, outcomes


@pytest.mark.slow
def test_kill_minus_9_many_more_trials(tmp_path):
    rng = np.random.default_rng(99)
    time_, channel, rising = _events(200_000, seed=1)
    outcomes = [_kill_trial(tmp_path, rng, trial, time_, channel, rising) for trial in range(200)]
    assert outcomes.count("events") >= 40, outcomes


def test_kill_minus_9_of_the_cli_process(tmp_path):
    """The real ``latscope capture`` process, killed while recording."""
    time_, channel, rising = _events(10**6)
    for trial in range(2):
        path = tmp_path / f"cli{trial}.lsc"
        with PtyDevice(EmulatedInstrument(time_, channel, rising, channels=ROLES),
                       frames_per_second=400) as dev:
            dev.start()
            proc = subprocess.Popen([sys.executable, "-m", "latscope", "capture", "--port",
                                     dev.path, "-o", str(path), "--quiet"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            end = time.monotonic() + 30
            while dev.instrument.sent < 2000 and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(0.6 + 0.37 * trial)       # past the writer's first 0.5 s flush
            proc.kill()
            proc.communicate(timeout=30)
            assert proc.returncode == -signal.SIGKILL
        with capfile.open_capture(path) as cap:
            assert all(p.startswith("truncated") for p in cap.problems)
            assert cap.n_events > 0 and cap.note is None
            assert np.array_equal(cap.events().time, time_[:cap.n_events])


# --- port closing --------------------------------------------------------------------------------

def test_closing_the_port_ends_the_capture_with_a_clear_message(tmp_path):
    time_, channel, rising = _events(10**6)
    path = tmp_path / "closed.lsc"
    with PtyDevice(EmulatedInstrument(time_, channel, rising, channels=ROLES),
                   frames_per_second=500) as dev:
        dev.start()
        proc = subprocess.Popen([sys.executable, "-m", "latscope", "capture", "--port",
                                 dev.path, "-o", str(path), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 30
        while dev.instrument.sent < 3000 and time.monotonic() < end:
            time.sleep(0.01)
        dev.close()                                    # the "cable" is pulled
        sent_when_closed = dev.instrument.sent         # final: close() joined the device thread
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == session.EXIT_LINK_LOST, stderr
    assert f"stopped: link lost: {dev.path} closed or unplugged" in stderr
    assert "Traceback" not in stderr
    record = json.loads(stdout)
    with capfile.open_capture(path) as cap:
        assert cap.complete and cap.note["reason"] == record["reason"]
        assert cap.note["exit_status"] == session.EXIT_LINK_LOST
        assert 0 < cap.n_events <= sent_when_closed
        assert np.array_equal(cap.events().time, time_[:cap.n_events])
    assert integrity.verify(path)["ok"]


# --- link corruption through the pty -------------------------------------------------------------

@pytest.mark.parametrize("fault", ["drop", "flip"])
def test_byte_drops_and_bit_flips_on_the_pty_are_counted_exactly(tmp_path, capsys, fault):
    n, per = 64 * 60, 64
    time_, channel, rising = _events(n, seed=5)
    corrupt = {5: fault, 6: fault, 17: fault, 40: fault}
    emu = EmulatedInstrument(time_, channel, rising, channels=ROLES, frame_events=per,
                             corrupt=corrupt, heartbeat_every=4)
    path = tmp_path / f"{fault}.lsc"
    with PtyDevice(emu) as dev:
        dev.start()
        rc = main(["capture", "--port", dev.path, "-o", str(path), "--quiet", "--json",
                   "--events", str(n - per * len(corrupt))])
    assert rc == 0
    assert emu.lost_on_link == per * len(corrupt)
    keep = np.ones(n, bool)
    for frame in corrupt:
        keep[frame * per:(frame + 1) * per] = False
    with capfile.open_capture(path) as cap:
        assert cap.lost == {"overflow": 0, "link": per * len(corrupt)}
        assert cap.note["lost_link"] == per * len(corrupt)
        assert cap.note["frames_bad"] + cap.note["bytes_skipped"] > 0
        assert np.array_equal(cap.events().time, time_[keep])
        # each loss lies between the surviving events around it
        for loss in cap.losses:
            assert loss.first_time <= time_[keep][time_[keep] > loss.first_time][0]
    assert f"link {per * len(corrupt)})" in capsys.readouterr().err


# --- decoder fuzzing -----------------------------------------------------------------------------

def _fuzz_case(rng, overflow=False):
    """One random stream with random damage; returns (bytes, expected events, channels, edges,
    expected link losses, expected overflow records)."""
    n_frames = int(rng.integers(3, 10))
    per = int(rng.integers(1, 40))
    n = n_frames * per
    scale = rng.choice([8, 1 << 10, 1 << 22, 1 << 36], n)
    time_ = np.cumsum(rng.integers(0, scale)).astype(np.int64)
    channel = rng.integers(0, 8, n).astype(np.uint8)
    rising = rng.integers(0, 2, n).astype(bool)
    overflows = {}
    if overflow:      # OVERFLOW tokens in frames that stay intact (frame 0 and the last)
        for i in (int(rng.integers(0, per)), n - 1 - int(rng.integers(0, per))):
            overflows[i] = (int(rng.integers(1, 1 << 40)), int(time_[i]),
                            int(rng.integers(0, 1 << 20)))
    emu = EmulatedInstrument(time_, channel, rising, frame_events=per, overflows=overflows,
                             heartbeat_every=int(rng.integers(1, 4)) if rng.random() < 0.3
                             else None)
    emu.armed = True
    out = bytearray(rng.integers(0, 256, int(rng.integers(0, 8)), dtype=np.uint8).tobytes())
    keep = np.ones(n, bool)
    lost = 0
    for frame in range(n_frames):
        data = bytearray(emu.next_frames(1))
        length = 6 + int.from_bytes(data[4:6], "little") + 4    # the EVENTS frame
        # The first frame is never damaged: a decoder cannot count events lost before the first
        # frame it sees (see the report on RESET_TIME); the last stays intact so that the loss
        # of the frames before it is visible from its event index.
        if 0 < frame < n_frames - 1 and rng.random() < 0.4:
            original = bytes(data)
            kind = rng.integers(0, 4)
            if kind == 0:                                        # flip 1..3 bits anywhere
                for _ in range(int(rng.integers(1, 4))):
                    data[int(rng.integers(0, length))] ^= 1 << int(rng.integers(0, 8))
            # Drops and cuts leave the frame's last 4 bytes or remove at least 4: removing a
            # tail of k bytes that happen to equal the k bytes after it would leave a valid frame
            # (chance 256**-k), and the next frame would be the one lost instead.
            elif kind == 1:                                      # drop 1..4 bytes
                count = int(rng.integers(1, 5))
                at = int(rng.integers(0, length - 4 - count + 1))
                del data[at:at + count]
            elif kind == 2:                                      # cut the frame short
                del data[int(rng.integers(1, length - 3)):length]
            else:                                                # overwrite with noise
                at = int(rng.integers(0, length - 1))
                noise = rng.integers(0, 256, int(rng.integers(1, 6)), dtype=np.uint8).tobytes()
                data[at:at + len(noise)] = noise
            if bytes(data) != original:                          # (flips may cancel out)
                keep[frame * per:(frame + 1) * per] = False
                lost += per
        out += data
        if rng.random() < 0.2:                                   # noise between frames
            out += rng.integers(0, 256, int(rng.integers(1, 12)), dtype=np.uint8).tobytes()
    expected_overflows = sorted((first, span, count) for count, first, span in overflows.values())
    return bytes(out), time_[keep], channel[keep], rising[keep], lost, expected_overflows


def _check_decoder(rng, cases, overflow=False):
    for _ in range(cases):
        data, time_, channel, rising, lost, overflows = _fuzz_case(rng, overflow)
        decoder = stream.StreamDecoder()
        cuts = np.sort(rng.integers(0, len(data) + 1, int(rng.integers(0, 4))))
        pieces = np.split(np.frombuffer(data, np.uint8), cuts)
        results = [decoder.feed(p.tobytes()) for p in pieces] + [decoder.finish()]
        result = events.DecodeResult.concat(results)
        assert np.array_equal(result.time, time_)
        assert np.array_equal(result.channel, channel)
        assert np.array_equal(result.rising, rising)
        assert sum(r.lost for r in result.losses if r.cause == "link") == lost
        assert result.link_lost_events == lost
        assert sorted((r.first_time, r.span, r.lost) for r in result.losses
                      if r.cause == "overflow") == overflows


def test_decoder_fuzz_quick():
    _check_decoder(np.random.default_rng(1), 1000)


def test_decoder_fuzz_with_overflow_records():
    """OVERFLOW tokens (40-bit counts, 64-bit times) survive decoding exactly."""
    _check_decoder(np.random.default_rng(4), 300, overflow=True)


@pytest.mark.slow
def test_decoder_fuzz_100k():
    """The 10^5 cases the issue asks for (a few minutes)."""
    _check_decoder(np.random.default_rng(2), 90_000)
    _check_decoder(np.random.default_rng(5), 10_000, overflow=True)


def test_decoder_never_crashes_on_noise():
    rng = np.random.default_rng(3)
    for _ in range(2000):
        size = int(rng.integers(0, 300))
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        if rng.random() < 0.5:      # noise with sync words sprinkled in
            data = data.replace(data[:2], b"\xe7\x1a") if size > 2 else data
        decoder = stream.StreamDecoder()
        result = events.DecodeResult.concat([decoder.feed(data), decoder.finish()])
        assert len(result.time) == len(result.channel) == len(result.rising)
