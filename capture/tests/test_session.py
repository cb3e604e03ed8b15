"""Instrument session: commands, retries, version refusal, interleaved events, config, limits."""

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture import events
from latscope.capture.files import capfile
from latscope.capture.link import session
from latscope.capture.link.session import Instrument, Limits, load_config, run_capture
from latscope.capture.link.transport import (
    EmulatedInstrument,
    EmulatedTransport,
    ReplayTransport,
    TransportClosed,
    encode_frame,
)
from latscope.gateware import protocol

ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")


def _packets(n, period=1000):
    """n packets: rx_dv rise/fall, m0 rise/fall, times in ticks (known answer: n rx_dv falls)."""
    base = np.arange(n, dtype=np.int64) * period
    time = np.stack([base, base + 100, base + 300, base + 310], 1).ravel()
    channel = np.tile(np.array([0, 0, 3, 3], np.uint8), n)
    rising = np.tile(np.array([True, False, True, False]), n)
    return time, channel, rising


def _instrument(emu, **kw):
    inst = Instrument(EmulatedTransport(emu, **kw), reply_timeout=0.2)
    identity = inst.identify()
    session.configure(inst, session.CaptureConfig(), identity)
    return inst, identity


def _writer(tmp_path, identity, name="c.lsc"):
    meta = session.capture_metadata(identity, session.CaptureConfig())
    return capfile.CaptureWriter(tmp_path / name, meta, fsync=False)


def test_identify_and_commands():
    emu = EmulatedInstrument(*_packets(2), channels=ROLES)
    inst = Instrument(EmulatedTransport(emu))
    info = inst.identify()
    assert info["tick_hz"] == 200_000_000 and info["channel_names"] == list(ROLES)
    inst.set_edges(0b1011, 0b0001)
    inst.set_glitch(0, 3)
    inst.reset_time()
    inst.selftest(True, channels=0b11, high_ticks=4, low_ticks=6)
    inst.arm()
    assert emu.armed
    status = inst.status()
    assert status["armed"] is True
    inst.disarm()
    assert not emu.armed
    ops = [op for op, _ in emu.commands]
    assert ops == [1, 3, 4, 5, 6, 2, 7, 2]
    assert emu.commands[1][1] == b"\x0b\x00\x01\x00"      # u16 rise, u16 fall, little-endian
    assert emu.commands[4][1] == b"\x01\x03\x00\x04\x00\x06\x00"
    # the default mask is every channel the identified instrument has (ROLES: the emulator's)
    inst.selftest(False)
    assert emu.commands[-1] == (6, b"\x00" + ((1 << len(ROLES)) - 1).to_bytes(2, "little")
                                + b"\x02\x00\x02\x00")


def test_argument_validation_messages():
    inst = Instrument(EmulatedTransport(EmulatedInstrument([], [], [])))
    with pytest.raises(ValueError, match=r"Channel must be an integer in \[0, 7\], not 8"):
        inst.set_glitch(8, 1)
    with pytest.raises(ValueError, match=r"Glitch width must be an integer in \[0, 255\]"):
        inst.set_glitch(0, 256)
    with pytest.raises(ValueError, match=r"Rising-edge mask must be an integer in \[0, 65535\]"):
        inst.set_edges(-1, 0)
    with pytest.raises(ValueError, match="Self-test high and low times must be at least 2"):
        inst.selftest(high_ticks=1)
    with pytest.raises(ValueError, match="Reply timeout must be a positive number of seconds"):
        Instrument(ReplayTransport(b""), reply_timeout=0)
    with pytest.raises(ValueError, match="Retries must be a positive integer, not 0"):
        Instrument(ReplayTransport(b""), retries=0)


def test_incompatible_protocol_version_is_refused():
    emu = EmulatedInstrument([], [], [], protocol_version=protocol.PROTOCOL_VERSION + 1)
    inst = Instrument(EmulatedTransport(emu), reply_timeout=0.05, retries=2)
    with pytest.raises(LatscopeError, match=f"instrument speaks protocol version "
                       f"{protocol.PROTOCOL_VERSION + 1}, this latscope .* speaks version "
                       f"{protocol.PROTOCOL_VERSION}: update the gateware or latscope"):
        inst.identify()


def test_silent_port_times_out_after_retries():
    replay = ReplayTransport(b"", end="timeout")
    inst = Instrument(replay, reply_timeout=0.02, retries=3)
    with pytest.raises(LatscopeError, match="no reply to IDENTIFY after 3 tries of 0.02 s"):
        inst.identify()
    assert len(replay.written) == 3
    assert [w[3] for w in replay.written] == [0, 1, 2]      # a new sequence number per try


def test_retry_after_lost_command():
    emu = EmulatedInstrument([], [], [])
    calls = []

    def lossy(data):      # the first command is lost on the way
        calls.append(data)
        return emu.handle(data) if len(calls) > 1 else b""
    inst = Instrument(ReplayTransport(b"", end="timeout", responder=lossy),
                      reply_timeout=0.02, retries=3)
    assert inst.identify()["board"] == "emulated"
    assert len(calls) == 2


def test_refused_command_names_the_status():
    inst = Instrument(ReplayTransport(b"", end="timeout", responder=_refusal),
                      reply_timeout=0.05)
    with pytest.raises(LatscopeError, match="instrument refused SET_GLITCH: BAD_ARGUMENT"):
        inst.set_glitch(7, 200)


def _refusal(command):
    """A device answering every command with BAD_ARGUMENT (its seq and opcode echoed)."""
    seq, opcode = command[3], command[6]
    return encode_frame(protocol.FrameType.REPLY, 0,
                        bytes([seq, opcode, protocol.Status.BAD_ARGUMENT]))


def test_events_arriving_during_a_command_are_kept():
    time, channel, rising = _packets(200)
    emu = EmulatedInstrument(time, channel, rising, frame_events=8)
    inst, _ = _instrument(emu)
    inst.arm()
    for _ in range(10):       # every command read pulls event frames through the decoder
        inst.status()
    got = [r for _ in range(200) for r in inst.read(0)]
    result = events.DecodeResult.concat(got)
    assert np.array_equal(result.time, time)


def test_capture_stops_on_exact_event_count(tmp_path):
    time, channel, rising = _packets(500)
    inst, identity = _instrument(EmulatedInstrument(time, channel, rising, channels=ROLES))
    out = run_capture(inst, _writer(tmp_path, identity), limits=Limits(events=1001))
    assert (out.reason, out.exit_status, out.events) == \
        ("event limit reached (1,001 events)", 0, 1001)
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        assert cap.complete and cap.n_events == 1001
        assert np.array_equal(cap.events().time, time[:1001])
        assert cap.note["reason"] == "event limit reached (1,001 events)"
        assert cap.channel_names == dict(enumerate(ROLES))


def test_a_capture_ending_on_a_limit_keeps_heartbeats_up_to_its_last_event(tmp_path):
    """The batch that reaches the limit holds heartbeats from after it (here all of them: one
    read returns every frame); the file keeps those up to the first one at or after the last
    event recorded, so what it holds does not depend on how the bytes were batched."""
    time, channel, rising = _packets(50)
    emu = EmulatedInstrument(time, channel, rising, channels=ROLES, frame_events=4,
                             heartbeat_every=1)
    inst = Instrument(EmulatedTransport(emu, frames_per_read=100), reply_timeout=0.2)
    identity = inst.identify()
    session.configure(inst, session.CaptureConfig(), identity)
    out = run_capture(inst, _writer(tmp_path, identity), limits=Limits(events=41))
    assert out.events == 41
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        # a heartbeat after every frame of 4 events reports the time of its last event: event
        # 40 is in frame 10 (events 40..43), whose heartbeat is the 11th
        assert cap.heartbeats["time"].tolist() == [int(time[4 * k + 3]) for k in range(11)]


def test_the_capture_loop_gathers_what_arrives_before_decoding():
    """``read(gather=...)``: bytes arriving in many small reads are decoded in one piece."""
    time, channel, rising = _packets(40)
    emu = EmulatedInstrument(time, channel, rising, channels=ROLES, frame_events=4)
    inst = Instrument(EmulatedTransport(emu, frames_per_read=1), reply_timeout=0.2)
    session.configure(inst, session.CaptureConfig(), inst.identify())
    inst.arm()
    assert sum(len(r.time) for r in inst.read(0.1)) == 4        # one frame per read
    assert [len(r.time) for r in inst.read(0.1, gather=0.05)] == [156]   # the other 39


def test_capture_stops_on_exact_packet_count(tmp_path):
    time, channel, rising = _packets(500)
    inst, identity = _instrument(EmulatedInstrument(time, channel, rising, channels=ROLES))
    out = run_capture(inst, _writer(tmp_path, identity), limits=Limits(packets=77),
                      rx_dv_channel=0)
    # packet k ends at the rx_dv fall, event index 4k + 1: the file ends there
    assert (out.reason, out.packets, out.events) == \
        ("packet limit reached (77 packets)", 77, 4 * 76 + 2)
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        ev = cap.events()
        assert int(((ev.channel == 0) & ~ev.rising).sum()) == 77
        assert cap.note["packets"] == 77


def test_capture_stops_on_duration_and_stop_request(tmp_path):
    time, channel, rising = _packets(10)
    inst, identity = _instrument(EmulatedInstrument(time, channel, rising))
    ticks = iter(np.arange(0, 100, 0.5))
    out = run_capture(inst, _writer(tmp_path, identity), limits=Limits(duration=3.0),
                      clock=lambda: next(ticks))
    assert out.reason == "duration limit reached (3 s)" and out.exit_status == session.EXIT_OK
    assert out.events == 40                 # everything was sent before the limit
    inst, identity = _instrument(EmulatedInstrument(time, channel, rising))
    calls = iter([None, None, "interrupted (SIGTERM)"])
    out = run_capture(inst, _writer(tmp_path, identity, "s.lsc"), stop=lambda: next(calls))
    assert (out.reason, out.exit_status) == ("interrupted (SIGTERM)", 0)
    with capfile.open_capture(tmp_path / "s.lsc") as cap:
        assert cap.complete and cap.note["reason"] == "interrupted (SIGTERM)"
        assert cap.n_events == out.events


def test_lost_link_finalises_the_file(tmp_path):
    time, channel, rising = _packets(300)
    emu = EmulatedInstrument(time, channel, rising, frame_events=16)
    inst, identity = _instrument(emu, close_when_done=True)
    out = run_capture(inst, _writer(tmp_path, identity))
    assert out.exit_status == session.EXIT_LINK_LOST
    assert out.reason == "link lost: emulated instrument: end of events"
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        assert cap.complete and cap.n_events == 1200
        assert cap.note["reason"] == out.reason and cap.note["exit_status"] == 3


def test_link_losses_are_recorded_exactly(tmp_path):
    time, channel, rising = _packets(400)
    emu = EmulatedInstrument(time, channel, rising, frame_events=16,
                             corrupt={5: "flip", 9: "drop", 50: "drop"}, heartbeat_every=8)
    inst, identity = _instrument(emu)
    out = run_capture(inst, _writer(tmp_path, identity), limits=Limits(events=1600 - 48))
    assert out.lost_link == 48 == emu.lost_on_link
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        assert cap.lost == {"overflow": 0, "link": 48}
        assert len(cap.heartbeats) > 0
        keep = np.ones(1600, bool)
        for frame in (5, 9, 50):
            keep[frame * 16:(frame + 1) * 16] = False
        assert np.array_equal(cap.events().time, time[keep])


def test_overflow_losses_are_recorded(tmp_path):
    time, channel, rising = _packets(100)
    emu = EmulatedInstrument(time, channel, rising, overflows={40: (1234, int(time[39]), 77)})
    inst, identity = _instrument(emu)
    out = run_capture(inst, _writer(tmp_path, identity), limits=Limits(events=400))
    assert out.lost_overflow == 1234
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        assert cap.losses == [events.LossRecord(int(time[39]), 77, 1234, "overflow")]


def test_time_base_restart_stops_cleanly(tmp_path):
    time = np.array([10, 20, 30, 5, 6], np.int64)   # a restart after the third event
    emu = EmulatedInstrument(time, np.zeros(5, np.uint8), np.ones(5, bool), frame_events=3)
    inst, identity = _instrument(emu)
    out = run_capture(inst, _writer(tmp_path, identity))
    assert out.exit_status == session.EXIT_LINK_LOST
    assert "time base restarted" in out.reason
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        assert cap.complete and cap.events().time.tolist() == [10, 20, 30]


def test_transport_closed_during_identify_propagates():
    replay = ReplayTransport(b"")
    with pytest.raises(TransportClosed):
        Instrument(replay).identify()


CONFIG = """
[channels]
0 = "rx_dv"
1 = "tx_en"
3 = "m0"
4 = "m1"
[markers]
m0 = "rx.isr"
m1 = "rx.udp"
[glitch]
rx_dv = 2
4 = 1
[edges]
rising = ["rx_dv", "m0", "m1"]
falling = [0]
[dut]
description = "Zynq-7020, lwIP echo"
label = "gem-64"
board_rev = "B"
[traffic]
scenario = "UDP echo, 64 B, 10 kpps"
"""


def test_config_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    assert config.channels == {0: "rx_dv", 1: "tx_en", 3: "m0", 4: "m1"}
    assert config.markers == {"m0": "rx.isr", "m1": "rx.udp"}
    assert config.glitch == {0: 2, 4: 1}
    assert config.rising == {0, 3, 4} and config.falling == {0}
    assert (config.dut, config.label) == ("Zynq-7020, lwIP echo", "gem-64")
    assert config.scenario == "UDP echo, 64 B, 10 kpps"
    assert config.extra == {"dut": {"board_rev": "B"}}
    emu = EmulatedInstrument([], [], [], channels=ROLES)
    inst = Instrument(EmulatedTransport(emu))
    identity = inst.identify()
    session.configure(inst, config, identity)
    assert emu.commands[1] == (protocol.Opcode.ARM, b"\x00")   # disarmed before the reset
    assert emu.commands[2] == (protocol.Opcode.SET_EDGES, (0b11001).to_bytes(2, "little")
                               + (0b1).to_bytes(2, "little"))
    assert emu.commands[3:5] == [(protocol.Opcode.SET_GLITCH, b"\x00\x02"),
                                 (protocol.Opcode.SET_GLITCH, b"\x04\x01")]
    meta = session.capture_metadata(identity, config, port="/dev/x")
    assert meta["channels"] == {"0": "rx_dv", "1": "tx_en", "3": "m0", "4": "m1"}
    assert meta["label"] == "gem-64" and meta["instrument"]["board"] == "emulated"
    assert meta["tick_hz"] == 200_000_000 and meta["resolution_s"] == 5e-9


@pytest.mark.parametrize("text, message", [
    ("[channels]\n9 = 'x'", r"\[channels\] keys are channel indices 0..7, not '9'"),
    ("[glitch]\nrx_dv = 2", r"\[glitch\]: unknown channel 'rx_dv'"),
    ("[channels]\n0='rx_dv'\n[glitch]\nrx_dv = 300", r"\[glitch\] rx_dv must be a width in "
                                                     r"capture cycles 0..255, not 300"),
    ("[edges]\nboth = []", r"\[edges\] has unknown keys \['both'\]"),
    ("[channels\n", "is not valid TOML"),
])
def test_config_errors(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(LatscopeError, match=message):
        load_config(path)


def test_limits_validation():
    with pytest.raises(LatscopeError, match="--events must be positive, not 0"):
        Limits(events=0)


def test_a_full_disk_is_reported_not_raised(tmp_path):
    time, channel, rising = _packets(50)
    inst, identity = _instrument(EmulatedInstrument(time, channel, rising))
    writer = _writer(tmp_path, identity)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    writer.close = full
    out = run_capture(inst, writer, limits=Limits(events=20))
    assert out.exit_status == session.EXIT_CRASH and not out.finalised
    assert out.reason == ("event limit reached (20 events); the file could not be finalised "
                          "(No space left on device)")
    with capfile.open_capture(tmp_path / "c.lsc") as cap:     # what was written stays readable
        assert cap.note is None and cap.problems == []


def test_events_buffered_during_a_command_survive_a_lost_link(tmp_path):
    time, channel, rising = _packets(100)
    emu = EmulatedInstrument(time, channel, rising, frame_events=400)
    transport = EmulatedTransport(emu)
    inst = Instrument(transport, reply_timeout=0.2)
    identity = inst.identify()
    session.configure(inst, session.CaptureConfig(), identity)
    inst.arm()
    transport.read(0, 0)          # the emulator queues its one event frame ...
    inst.status()                 # ... which arrives before the reply: buffered
    assert emu.done
    transport.close()             # then the port is gone

    class Armed:                  # run_capture's ARM must not touch the closed port
        def __getattr__(self, name):
            return getattr(inst, name)

        def arm(self):
            pass
    out = run_capture(Armed(), _writer(tmp_path, identity))
    assert out.exit_status == session.EXIT_LINK_LOST and out.events == 400
    with capfile.open_capture(tmp_path / "c.lsc") as cap:
        assert np.array_equal(cap.events().time, time)


def test_packets_count_crs_dv_on_rmii(tmp_path):
    """RMII: the RX valid is crs_dv (channel 2) and rx_dv is idle; --packets passes both and
    stops after exactly 40 crs_dv falls (known answer: _packets moved to channel 2)."""
    time, channel, rising = _packets(100)
    channel = np.where(channel == 0, 2, channel).astype(np.uint8)
    inst, identity = _instrument(EmulatedInstrument(time, channel, rising, channels=ROLES))
    out = run_capture(inst, _writer(tmp_path, identity), limits=Limits(packets=40),
                      rx_dv_channel=[0, 2])
    assert (out.packets, out.events) == (40, 4 * 39 + 2)


def test_crs_dv_glitch_filter_set_by_default_unless_the_config_sets_it():
    """session.default_glitch: crs_dv gets CRS_DV_GLITCH_NS (50 ns) in capture cycles, rounded
    up (the emulated IDENTIFY: 100 MHz capture clock -> 5 cycles), sent with SET_GLITCH and kept
    in the config for the metadata; a width the config gives (0 = off) is sent as given."""
    emu = EmulatedInstrument(*_packets(2), channels=ROLES)
    inst = Instrument(EmulatedTransport(emu), reply_timeout=0.2)
    identity = inst.identify()
    config = session.CaptureConfig()
    session.configure(inst, config, identity)
    want = -(-session.CRS_DV_GLITCH_NS * identity["capture_hz"] // 10**9)
    assert want == 5 and config.glitch == {2: want}
    assert (protocol.Opcode.SET_GLITCH, bytes([2, want])) in emu.commands
    assert session.capture_metadata(identity, config)["glitch_cycles"] == {"2": want}
    emu.commands.clear()
    config = session.config_from_dict({"channels": dict(enumerate(ROLES)),
                                       "glitch": {"crs_dv": 0}})
    config.channels = {int(k): v for k, v in config.channels.items()}
    session.configure(inst, config, identity)
    assert config.glitch == {2: 0}
    assert (protocol.Opcode.SET_GLITCH, bytes([2, 0])) in emu.commands
