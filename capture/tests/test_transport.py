"""Transports (serial on a pty, fd, replay, recording) and the emulated instrument's encoder,
cross-checked against the host decoder (``capture/link/stream.py``)."""

import os
import tty

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture import events
from latscope.capture.link import stream
from latscope.capture.link.transport import (
    EmulatedInstrument,
    EmulatedTransport,
    FdTransport,
    PtyDevice,
    RecordingTransport,
    ReplayTransport,
    SerialTransport,
    TransportClosed,
    encode_event_tokens,
    encode_frame,
)
from latscope.gateware import codec, protocol


def _random_events(rng, n):
    # deltas spanning every token size: 0..7 (no continuation), up to 21 bits, and beyond (TIME)
    scale = rng.choice([8, 1 << 9, 1 << 15, 1 << 21, 1 << 40], n)
    time = np.cumsum(rng.integers(0, scale)).astype(np.int64)
    return time, rng.integers(0, 8, n).astype(np.uint8), rng.integers(0, 2, n).astype(bool)


def test_encoder_matches_decoder_on_random_events():
    rng = np.random.default_rng(7)
    for frame_events in (1, 5, 64):
        time, channel, rising = _random_events(rng, 2000)
        emu = EmulatedInstrument(time, channel, rising, frame_events=frame_events)
        emu.armed = True
        data = emu.next_frames(10**6)
        assert emu.done
        result = stream.StreamDecoder().feed(data)
        assert result.frames_bad == 0 and result.bytes_skipped == 0
        assert np.array_equal(result.time, time)        # exact: integer ticks
        assert np.array_equal(result.channel, channel)
        assert np.array_equal(result.rising, rising)
        assert result.losses == []


def test_token_sizes_follow_protocol():
    # lead byte carries 3 delta bits, each continuation 6 (protocol.py token table)
    assert encode_event_tokens(0, np.array([7]), np.array([2]), np.array([True])) == \
        bytes([0b0_010_1_111])
    assert len(encode_event_tokens(0, np.array([8]), np.array([0]), np.array([False]))) == 2
    assert len(encode_event_tokens(0, np.array([(1 << 21) - 1]), np.array([0]),
                                   np.array([False]))) == 4
    big = encode_event_tokens(0, np.array([1 << 21]), np.array([0]), np.array([False]))
    assert big[0] & protocol.Token.TIME_MASK == protocol.Token.TIME and big[-1] == 0


def test_encode_frame_layout():
    frame = encode_frame(protocol.FrameType.HEARTBEAT, 300, b"\x01\x02")
    assert frame[:2] == protocol.SYNC
    assert frame[2] == protocol.FrameType.HEARTBEAT | protocol.PROTOCOL_VERSION << 4
    assert frame[3] == 300 & 0xFF and frame[4:6] == b"\x02\x00"
    # the command encoder of the host decoder builds the same bytes for a COMMAND frame
    assert encode_frame(protocol.FrameType.COMMAND, 1, b"\x02\x01") == \
        codec.encode_command(1, protocol.Opcode.ARM, b"\x01")


def test_emulator_answers_identify_and_rejects_bad_frames():
    emu = EmulatedInstrument([1], [0], [True], channels=("rx_dv", "tx_en"))
    result = stream.StreamDecoder().feed(emu.handle(codec.encode_command(9, 1)))
    (reply,) = result.replies
    assert (reply.command_seq, reply.opcode, reply.status) == (9, 1, protocol.Status.OK)
    info = codec.parse_identify(reply.data)
    assert info["channel_names"] == ["rx_dv", "tx_en"] and info["tick_hz"] == 200_000_000
    bad = bytearray(codec.encode_command(3, protocol.Opcode.ARM, b"\x01"))
    bad[-1] ^= 1
    (reply,) = stream.StreamDecoder().feed(emu.handle(bytes(bad))).replies
    assert reply.status == protocol.Status.BAD_FRAME and not emu.armed


def test_injected_corruption_is_lost_exactly():
    rng = np.random.default_rng(3)
    time, channel, rising = _random_events(rng, 64 * 40)
    corrupt = {3: "drop", 7: "flip", 8: "flip", 20: "drop"}
    emu = EmulatedInstrument(time, channel, rising, corrupt=corrupt, heartbeat_every=4)
    emu.armed = True
    decoder = stream.StreamDecoder()
    results = [decoder.feed(emu.next_frames(3)) for _ in range(20)] + [decoder.finish()]
    result = events.DecodeResult.concat(results)
    keep = np.ones(len(time), bool)
    for frame in corrupt:
        keep[frame * 64:(frame + 1) * 64] = False
    assert np.array_equal(result.time, time[keep])
    assert sum(r.lost for r in result.losses) == emu.lost_on_link == 4 * 64
    assert all(r.cause == "link" for r in result.losses)
    assert result.frames_bad >= 2      # the flipped frames fail their CRC


def test_emulator_validation():
    with pytest.raises(ValueError, match="Events per frame must be a positive integer, not 0"):
        EmulatedInstrument([1], [0], [1], frame_events=0)
    with pytest.raises(ValueError, match="Event columns must be of equal length"):
        EmulatedInstrument([1, 2], [0], [1])


def test_replay_transport(tmp_path):
    path = tmp_path / "rec.bin"
    path.write_bytes(bytes(range(10)))
    replay = ReplayTransport(path, chunk=4)
    assert [replay.read(100, 0), replay.read(2, 0), replay.read(100, 0)] == \
        [bytes(range(4)), bytes([4, 5]), bytes([6, 7, 8, 9])]
    with pytest.raises(TransportClosed, match="end of recording"):
        replay.read(100, 0)
    replay = ReplayTransport(b"ab", end="timeout", responder=lambda data: data.upper())
    replay.write(b"xy")
    assert replay.written == [b"xy"]
    assert replay.read(10, 0) == b"XY" and replay.read(10, 0) == b"ab"
    assert replay.read(10, 0.001) == b""
    replay.close()
    with pytest.raises(TransportClosed, match="closed by this program"):
        replay.read(1, 0)
    with pytest.raises(ValueError, match="Chunk size must be a positive integer, not 0"):
        ReplayTransport(b"", chunk=0)
    with pytest.raises(ValueError, match="End behaviour must be 'closed' or 'timeout', not 'x'"):
        ReplayTransport(b"", end="x")


def test_recording_transport_tees_reads(tmp_path):
    path = tmp_path / "tee.bin"
    with RecordingTransport(ReplayTransport(b"hello world", chunk=3), path) as rec:
        got = b""
        with pytest.raises(TransportClosed):
            while True:
                got += rec.read(100, 0)
    assert got == b"hello world" and path.read_bytes() == b"hello world"


def test_serial_transport_on_pty_and_port_closing():
    master, slave = os.openpty()
    tty.setraw(slave)
    port = SerialTransport(os.ttyname(slave))
    try:
        os.write(master, b"abc")
        data = b""
        for _ in range(50):
            data += port.read(100, 0.05)
            if len(data) == 3:
                break
        assert data == b"abc"
        assert port.read(100, 0.01) == b""          # timeout: empty, not an error
        port.write(b"xyz")
        assert os.read(master, 100) == b"xyz"
        os.close(slave)                              # only the port holds the slave now
        slave = None
        os.close(master)
        master = None
        with pytest.raises(TransportClosed, match="closed or unplugged"):
            for _ in range(20):
                port.read(100, 0.05)
    finally:
        port.close()
        for fd in (master, slave):
            if fd is not None:
                os.close(fd)
    with pytest.raises(TransportClosed, match="closed by this program"):
        port.read(1, 0)


def test_serial_transport_errors():
    with pytest.raises(LatscopeError, match="cannot open serial port /nonexistent/tty"):
        SerialTransport("/nonexistent/tty")
    with pytest.raises(ValueError, match="Baud rate must be a positive integer, not 0"):
        SerialTransport("/dev/null", baud=0)


def test_fd_transport_eof():
    r, w = os.pipe()
    t = FdTransport(r, "pipe")
    os.write(w, b"12")
    assert t.read(10, 1) == b"12"
    assert t.read(10, 0.01) == b""
    os.close(w)
    with pytest.raises(TransportClosed, match="pipe: peer closed"):
        t.read(10, 1)
    t.close()


def test_pty_device_serves_the_emulator():
    time = np.arange(300, dtype=np.int64) * 10
    emu = EmulatedInstrument(time, np.zeros(300, np.uint8), np.arange(300) % 2 == 0)
    with PtyDevice(emu) as dev:
        port = SerialTransport(dev.path)
        dev.release_slave()
        dev.start()
        decoder = stream.StreamDecoder()
        port.write(codec.encode_command(0, protocol.Opcode.ARM, b"\x01"))
        got = []
        for _ in range(200):
            got.append(decoder.feed(port.read(4096, 0.05)))
            if sum(len(r.time) for r in got) == 300:
                break
        result = events.DecodeResult.concat(got)
        assert [r.opcode for r in result.replies] == [protocol.Opcode.ARM]
        assert np.array_equal(result.time, time)
        dev.close()
        with pytest.raises(TransportClosed):
            for _ in range(20):
                port.read(100, 0.05)
        port.close()


def test_emulated_transport_closes_when_done():
    emu = EmulatedInstrument([5], [1], [True])
    t = EmulatedTransport(emu, close_when_done=True)
    t.write(codec.encode_command(0, protocol.Opcode.ARM, b"\x01"))
    data = t.read(1 << 16, 0) + t.read(1 << 16, 0)
    assert stream.StreamDecoder().feed(data).time.tolist() == [5]
    with pytest.raises(TransportClosed, match="end of events"):
        t.read(1, 0)


def test_serial_transport_keeps_bytes_sent_before_it_opened():
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        os.write(master, b"early bytes")      # waiting in the slave's queue before the open
        port = SerialTransport(os.ttyname(slave))
        data = b""
        for _ in range(20):
            data += port.read(100, 0.05)
            if len(data) >= 11:
                break
        port.close()
        assert data == b"early bytes"
    finally:
        os.close(master)
        os.close(slave)
