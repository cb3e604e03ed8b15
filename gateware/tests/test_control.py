"""The command handler against :class:`latscope.gateware.model_stream.CommandModel`: every
opcode, every error status, broken and cut-off frames; and the configuration crossing."""

import random

import pytest
from amaranth.sim import Simulator

from latscope import LatscopeError
from latscope.gateware.codec import encode_command, parse_identify, rule_command
from latscope.gateware.control import ConfigCrossing, Control
from latscope.gateware.model_stream import CommandModel, to_bytes
from latscope.gateware.protocol import Heartbeat, Opcode, Status
from latscope.gateware.stream_bench import until_high

NAMES = ["rx_dv", "tx_en", "m_isr", "m_app"]
STATUS = {"time": 123456789, "events": 42, "lost": 7, "fifo_high_water": 9,
          "status": {"armed": 1, "selftest": 0, "overflow_active": 1}, "epoch": 3}


def make(lanes=2):
    return Control(channels=4, lanes=lanes, capture_hz=48_000_000, board="icebreaker",
                   channel_names=NAMES, timeout=64, source_hash=0xDEADBEEF)


def run(dut, stream, n_replies, *, gap=0, seed=0):
    """Send ``stream`` (a list of byte strings; ``gap`` idle cycles between them), collect
    ``n_replies`` replies as (seq, opcode, status, data), return them with the final config."""
    rng = random.Random(seed)
    got, state = [], {}

    async def host(ctx):
        ctx.set(dut.status.as_value(), Heartbeat.const(STATUS).as_value().value)
        for chunk in stream:
            for byte in chunk:
                ctx.set(dut.rx.payload, byte)
                ctx.set(dut.rx.valid, 1)
                await until_high(ctx, dut.rx.ready)
                ctx.set(dut.rx.valid, 0)
                if rng.random() < 0.3:
                    await ctx.tick()
            if gap:
                for _ in range(gap):
                    await ctx.tick()

    async def device(ctx):
        resets = 0
        current = bytearray()
        while len(got) < n_replies:
            ctx.set(dut.replies.ready, rng.random() < 0.8)
            _, _, valid, ready, data, length, pulse = await ctx.tick().sample(
                dut.replies.valid, dut.replies.ready, dut.replies.payload.data,
                dut.replies.payload.length, dut.time_reset)
            resets += pulse
            if valid and ready:
                current.append(data)
                if len(current) == length:
                    got.append((current[0], current[1], current[2], bytes(current[3:])))
                    current = bytearray()
        cfg = dut.config
        state.update(armed=ctx.get(cfg.armed), rise_en=ctx.get(cfg.rise_en),
                     fall_en=ctx.get(cfg.fall_en),
                     glitch=[ctx.get(cfg.glitch[i]) for i in range(4)],
                     selftest_on=ctx.get(cfg.selftest_on),
                     selftest_drive=ctx.get(cfg.selftest_drive),
                     selftest_mask=ctx.get(cfg.selftest_mask),
                     selftest_high=ctx.get(cfg.selftest_high),
                     selftest_low=ctx.get(cfg.selftest_low), resets=resets)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host, background=True)
    sim.add_testbench(device)
    sim.run()
    return got, state


COMMANDS = [
    (Opcode.IDENTIFY, b""), (Opcode.IDENTIFY, b"\x00"),
    (Opcode.ARM, b"\x01"), (Opcode.ARM, b"\x02"), (Opcode.ARM, b""),
    (0x55, b""), (0x00, b"\x01\x02"),
    (Opcode.SET_EDGES, b"\x05\x00\x0a\x00"), (Opcode.SET_EDGES, b"\x10\x00\x00\x00"),
    (Opcode.SET_EDGES, b"\x01\x00\x00\x01"), (Opcode.SET_EDGES, b"\x01\x00\x00"),
    (Opcode.SET_GLITCH, b"\x02\x07"), (Opcode.SET_GLITCH, b"\x04\x01"),
    (Opcode.SET_GLITCH, b"\x01\x10"), (Opcode.SET_GLITCH, b"\x03\x0f"),
    (Opcode.SELFTEST, b"\x03\x05\x00\x04\x00\x06\x00"),
    (Opcode.SELFTEST, b"\x01\x05\x00\x01\x00\x06\x00"),
    (Opcode.SELFTEST, b"\x04\x05\x00\x04\x00\x06\x00"),
    (Opcode.SELFTEST, b"\x01\x00\x01\x04\x00\x06\x00"),
    (Opcode.STATUS, b""), (Opcode.STATUS, b"\x01"),
    (Opcode.RESET_TIME, b""), (Opcode.RESET_TIME, b""),
]


def test_every_command_matches_model():
    dut = make()
    model = CommandModel(channels=4, max_glitch=15, identify=dut.identify)
    status_bytes = to_bytes(Heartbeat, STATUS)
    stream, expected = [], []
    for seq, (opcode, args) in enumerate(COMMANDS, start=10):
        stream.append(b"\x00\x37" + encode_command(seq, opcode, args))    # noise before a frame
        payload = bytes([opcode]) + args
        op, status, data = model.handle(payload, status_data=status_bytes)
        expected.append((seq, op, status, data))
    stream.append(encode_command(99, 0, b"")[:4] + b"\x00\x00" + encode_command(99, 0, b"")[6:])
    got, state = run(dut, stream, len(expected))
    assert got == expected
    assert {s for _, _, s, _ in got} == set(Status) - {Status.BAD_FRAME}
    assert state.pop("resets") == model.resets == 2
    assert state == model.config
    info = parse_identify(got[0][3])
    assert info["board"] == "icebreaker" and info["channel_names"] == NAMES
    assert info["source_hash"] == 0xDEADBEEF and info["capture_hz"] == 48_000_000


def test_selftest_widths_below_lanes_rejected_with_four_lanes():
    """With 4 lanes the self-test generator needs widths >= 4 ticks
    (model_capture.selftest_min_ticks): 3 is refused, 4 accepted, as the model says."""
    dut = make(lanes=4)
    model = CommandModel(channels=4, max_glitch=15, identify=dut.identify, lanes=4)
    commands = [(Opcode.SELFTEST, b"\x01\x01\x00\x03\x00\x06\x00"),
                (Opcode.SELFTEST, b"\x01\x01\x00\x06\x00\x03\x00"),
                (Opcode.SELFTEST, b"\x01\x01\x00\x04\x00\x04\x00")]
    stream, expected = [], []
    for seq, (opcode, args) in enumerate(commands, start=1):
        stream.append(encode_command(seq, opcode, args))
        expected.append((seq, *model.handle(bytes([opcode]) + args)))
    got, state = run(dut, stream, len(expected))
    assert got == expected
    assert [s for _, _, s, _ in got] == [Status.BAD_ARGUMENT, Status.BAD_ARGUMENT, Status.OK]
    state.pop("resets")
    assert state == model.config and state["selftest_high"] == 4


def test_broken_frames_get_bad_frame():
    good = encode_command(5, Opcode.ARM, b"\x01")
    bad_crc = bytearray(good)
    bad_crc[-2] ^= 0x10
    wrong_type = bytearray(good)
    wrong_type[2] = (wrong_type[2] & 0xF0) | 3        # a REPLY frame sent to the device
    too_long = encode_command(6, Opcode.ARM, bytes(16))
    cut_off = good[:7]                                 # then silence: the timeout fires
    stream = [bytes(bad_crc), bytes(wrong_type), too_long, cut_off, good]
    got, state = run(make(), stream, 5, gap=100)
    bad = (0, 0, Status.BAD_FRAME, b"")
    assert got == [bad, bad, bad, bad, (5, Opcode.ARM, Status.OK, b"")]
    assert state["armed"] == 1


def test_crossing_delivers_values_and_pulses():
    dut = ConfigCrossing(16, init=0x1234, o_domain="capture")
    seen, pulses = [], []
    values = [0x1234, 0xBEEF, 0x0001, 0xFFFF]

    async def source(ctx):
        for value in values[1:]:
            while ctx.get(dut.busy):            # the source holds the word while busy
                await ctx.tick()
            ctx.set(dut.i_write, 1)
            ctx.set(dut.i_pulse, 1)
            await ctx.tick()
            ctx.set(dut.i_config, value)        # changes at the end of the write cycle
            ctx.set(dut.i_write, 0)
            ctx.set(dut.i_pulse, 0)
            assert ctx.get(dut.busy)            # busy from the cycle after the write
            await ctx.tick().repeat(3)

    async def sink(ctx):
        for _ in range(400):
            _, _, value, pulse = await ctx.tick("capture").sample(dut.o_config, dut.o_pulse)
            if not seen or seen[-1] != value:
                seen.append(value)
            pulses.append(pulse)

    sim = Simulator(dut)
    sim.add_clock(13e-9)
    sim.add_clock(7e-9, domain="capture")
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    assert seen == values          # every value, in order, never a mix of two
    assert sum(pulses) == 3


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(channels=9), TypeError, "Channel count must be an integer in 1..8, not 9"),
    (dict(max_glitch=-1), TypeError, "Maximum glitch width must be an integer in 0..255, not -1"),
    (dict(capture_hz=0), TypeError, "Capture frequency must be an integer in 1..4294967295"),
    (dict(timeout=3), TypeError, "Timeout must be an integer >= 16, not 3"),
    (dict(board="a;b"), TypeError, "Board name must be non-empty text without"),
    (dict(channel_names=["a"]), LatscopeError, "need 4 channel names, got 1"),
    (dict(channel_names=["a", "b", "c", "d,e"]), LatscopeError, "channel name 'd,e' must be"),
])
def test_constructor_validation(kwargs, error, message):
    params = dict(channels=4, capture_hz=48_000_000, channel_names=NAMES)
    params.update(kwargs)
    with pytest.raises(error, match=message.replace(".", r"\.").replace("(", r"\(")):
        Control(**params)
    with pytest.raises(TypeError, match="Output domain must be a domain name other than 'sync'"):
        ConfigCrossing(8, o_domain="sync")


def test_frame_capture_opcodes_are_checked():
    """Opcodes 0x10..0x13: argument lengths and ranges checked by the command handler of a
    design with 4 frame rules; a design without frame capture does not know them."""
    cmds = [rule_command(0, 3, enable=1, cls=2), rule_command(1, 4, enable=1),
            (Opcode.SET_RULE, bytes(5)), (Opcode.SET_CLASS_MODE, b"\x01\x06"),
            (Opcode.SET_CLASS_MODE, b"\x02\x06"), (Opcode.SET_SEQ_OFFSET, b"\x0a\x00"),
            (Opcode.SET_COUNTER_PERIOD, b"\x29"), (Opcode.SET_COUNTER_PERIOD, b"\x28")]
    expected = [Status.OK, Status.BAD_ARGUMENT, Status.BAD_LENGTH, Status.OK,
                Status.BAD_ARGUMENT, Status.OK, Status.BAD_ARGUMENT, Status.OK]
    stream = [encode_command(i, op, args) for i, (op, args) in enumerate(cmds)]
    dut = Control(channels=4, capture_hz=48_000_000, board="icebreaker", channel_names=NAMES,
                  timeout=64, frame_rules=4)
    got, _ = run(dut, stream, len(cmds))
    assert [(seq, op, status) for seq, op, status, _ in got] == \
        [(i, op, s) for i, ((op, _), s) in enumerate(zip(cmds, expected, strict=True))]
    got, _ = run(make(), stream[:1], 1)
    assert got[0][2] == Status.UNKNOWN_OPCODE
