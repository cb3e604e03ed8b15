"""SET_DELAY through the real command handler and delay controller, into the ``DELAYF`` model.

The gateware (:class:`~latscope.gateware.control.Control` with ``input_delay`` and
:class:`~latscope.gateware.delay.DelayControl`) runs in the Amaranth simulator; every cycle its
``LOADN``/``MOVE``/``DIRECTION`` outputs clock one :class:`~latscope.gateware.model_delay.
DelayfModel` per channel (Lattice's behavioural description of the cell). Expected values come
from :class:`~latscope.gateware.model_stream.CommandModel` (replies, settings) and from the
sampling model's formula ``ceil((t + skew + taps * tap_ps) / tick_ps)``.
"""

import math
import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.sim import Simulator

from latscope.gateware.codec import encode_command
from latscope.gateware.control import Control
from latscope.gateware.delay import DelayControl, delayed_inputs
from latscope.gateware.model_delay import ChannelTiming, DelayfModel, sampled_tick
from latscope.gateware.model_stream import CommandModel
from latscope.gateware.protocol import DELAY_TAP_PS, DELAY_TAPS, Opcode, Status
from latscope.gateware.top import LatscopeCore

CHANNELS = 4
NAMES = ["rx_dv", "tx_en", "m0", "m1"]


class Rig(Elaboratable):
    """The command handler's SET_DELAY registers driving the delay controller, as on a board."""

    def __init__(self, input_delay=True):
        self.control = Control(channels=CHANNELS, lanes=4, capture_hz=200_000_000,
                               board="ecpix5", channel_names=NAMES, timeout=64,
                               input_delay=input_delay)
        self.delay = DelayControl(channels=CHANNELS)

    def elaborate(self, platform):
        m = Module()
        m.submodules.control = self.control
        m.submodules.delay = self.delay
        if self.control.input_delay:
            m.d.comb += self.delay.taps.eq(self.control.delay_taps)
        return m


def run(rig, frames, *, tap_ps=DELAY_TAP_PS, seed=0, settle=600):
    """Send COMMAND ``frames`` one after the other (each waits for its reply); returns the
    replies as ``(opcode, status)``, the cell models and the most cycles any change took."""
    rng = random.Random(seed)
    dut, delay = rig.control, rig.delay
    cells = [DelayfModel(tap_ps=tap_ps) for _ in range(CHANNELS)]
    replies = []
    longest = [0]

    async def cells_clock(ctx):
        while True:
            _, _, loadn, move, direction = await ctx.tick().sample(
                delay.loadn, delay.move, delay.direction)
            for k, cell in enumerate(cells):
                cell.step(loadn=loadn >> k & 1, move=move >> k & 1,
                          direction=direction >> k & 1)

    async def host(ctx):
        ctx.set(dut.replies.ready, 1)
        for frame in frames:
            for byte in frame:
                ctx.set(dut.rx.payload, byte)
                ctx.set(dut.rx.valid, 1)
                while True:
                    *_, ready = await ctx.tick().sample(dut.rx.ready)
                    if ready:
                        break
                ctx.set(dut.rx.valid, 0)
                if rng.random() < 0.2:
                    await ctx.tick()
            reply = bytearray()
            while True:
                *_, valid, data, length = await ctx.tick().sample(
                    dut.replies.valid, dut.replies.payload.data, dut.replies.payload.length)
                if valid:
                    reply.append(data)
                    if len(reply) == length:
                        break
            replies.append((reply[1], reply[2]))
            cycles = 0
            while ctx.get(delay.busy):
                await ctx.tick()
                cycles += 1
            longest[0] = max(longest[0], cycles)
        for _ in range(settle):
            await ctx.tick()

    sim = Simulator(rig)
    sim.add_clock(1 / 48e6)
    sim.add_process(cells_clock)
    sim.add_testbench(host)
    sim.run()
    return replies, cells, longest[0]


def set_delay_frame(seq, channel, taps):
    payload = bytes([channel, taps])
    return encode_command(seq, Opcode.SET_DELAY, payload)


def test_set_delay_reaches_every_cell_like_the_model():
    """Random SET_DELAY settings, up and down, with bad channels and taps among them: every
    reply is the command model's and each cell's counter ends at the model's setting."""
    rng = random.Random(21)
    model = CommandModel(channels=CHANNELS, lanes=4, input_delay=True)
    frames, expected = [], []
    for seq in range(24):
        channel = rng.choice([*range(CHANNELS), CHANNELS, 7])
        taps = rng.choice([0, 1, 5, rng.randrange(DELAY_TAPS), DELAY_TAPS - 1, DELAY_TAPS,
                           255])
        frames.append(set_delay_frame(seq, channel, taps))
        opcode, status, _ = model.handle(bytes([Opcode.SET_DELAY, channel, taps]))
        expected.append((opcode, status))
    frames.append(encode_command(99, Opcode.SET_DELAY, b"\x01"))          # one byte short
    expected.append((Opcode.SET_DELAY, Status.BAD_LENGTH))
    replies, cells, longest = run(Rig(), frames)
    assert replies == expected
    assert Status.BAD_ARGUMENT in {s for _, s in replies} and Status.OK in {s for _, s in replies}
    assert [cell.counter for cell in cells] == model.delay_taps
    # a change of n taps up takes 2n cycles, a step down a reload first: never above 2*127 + 2
    assert longest <= 2 * (DELAY_TAPS - 1) + 2


def test_every_setting_of_one_channel_is_reached_exactly():
    """0 -> 127 -> each setting downwards: the counter equals the setting after each command
    (an off-by-one move or a missed reload would show)."""
    settings = [DELAY_TAPS - 1, 64, 63, 1, 0, 37, 38, 36]
    frames = [set_delay_frame(i, 2, t) for i, t in enumerate(settings)]
    _, cells, _ = run(Rig(), frames, tap_ps=23.5)
    assert cells[2].counter == settings[-1]
    assert cells[2].delay_ps == pytest.approx(settings[-1] * 23.5)     # the model's parameter
    assert [c.counter for k, c in enumerate(cells) if k != 2] == [0, 0, 0]


def test_without_delay_lines_set_delay_is_unknown():
    """A build without input delay lines answers SET_DELAY with UNKNOWN_OPCODE, as the model
    without ``input_delay`` does (the host turns this into its one-line refusal)."""
    model = CommandModel(channels=CHANNELS, lanes=4)
    expected = model.handle(bytes([Opcode.SET_DELAY, 0, 5]))[:2]
    assert expected == (Opcode.SET_DELAY, Status.UNKNOWN_OPCODE)
    replies, _, _ = run(Rig(input_delay=False), [set_delay_frame(0, 0, 5)], settle=4)
    assert replies == [expected]


def test_sampled_tick_of_delayed_channels():
    """With the cells at the settings SET_DELAY left, an edge leaving the pin at ``t`` is
    stamped at ``ceil((t + skew + taps * tap_ps) / tick_ps)`` (the formula, evaluated here
    independently of :class:`ChannelTiming`), for random sub-tick skews."""
    rng = random.Random(4)
    settings = [rng.randrange(60) for _ in range(CHANNELS)]
    frames = [set_delay_frame(k, k, t) for k, t in enumerate(settings)]
    _, cells, _ = run(Rig(), frames, tap_ps=27.0)
    skew = {k: rng.uniform(0, 1250) for k in range(CHANNELS)}
    timing = ChannelTiming(tick_ps=1250, skew_ps=skew,
                           tap_ps={k: cells[k].tap_ps for k in range(CHANNELS)},
                           taps={k: cells[k].counter for k in range(CHANNELS)})
    for t in (0, 1250 * 7, 1250 * 7 + 3, 99_999):
        for k in range(CHANNELS):
            assert timing.tick(k, t) == math.ceil((t + skew[k] + settings[k] * 27.0) / 1250)


def test_delayf_model_follows_lattices_description():
    """Lattice's model: load on LOADN low, step on MOVE's falling edge with the previous
    direction, stop at the ends (CFLAG)."""
    cell = DelayfModel(del_value=3)

    def pulse(direction=0):
        cell.step(loadn=1, move=1, direction=direction)
        cell.step(loadn=1, move=0, direction=direction)

    pulse()
    assert cell.counter == 4
    pulse(direction=1)              # this step still goes up; the next ones go down
    assert cell.counter == 5
    pulse(direction=1)
    assert cell.counter == 4
    cell.step(loadn=0, move=0, direction=1)
    assert (cell.counter, cell.down) == (3, 0)
    for _ in range(200):
        pulse()
    assert cell.counter == DELAY_TAPS - 1 and cell.cflag == 1
    assert sampled_tick(2500, 1250) == 2 and sampled_tick(2500.1, 1250) == 3
    with pytest.raises(ValueError, match="Tap delay must be positive, not 0"):
        DelayfModel(tap_ps=0)


def test_delayed_inputs_checks_width():
    m, control = Module(), DelayControl(channels=4)
    m._MustUse__silence = control._MustUse__silence = True     # never elaborated
    with pytest.raises(ValueError, match="Pad width must be the controller's 4 channels, not 3"):
        delayed_inputs(m, [0, 0, 0], control)


def test_core_has_set_delay_registers_only_with_input_delay():
    """LatscopeCore passes ``input_delay`` to its command handler and exposes the settings for
    the board layer; without it neither exists."""
    params = dict(channels=8, lanes=4, capture_hz=200_000_000, channel_names=["c"] * 8)
    core = LatscopeCore(input_delay=True, **params)
    plain = LatscopeCore(**params)
    for c in (core, plain):                     # never elaborated: nor are their parts
        for part in (c, c.front, c.encoder, c.framer, c.control):
            part._MustUse__silence = True
    assert core.signature.members["delay_taps"].shape.size == 8 * 7
    assert core.control.input_delay is True
    assert "delay_taps" not in plain.signature.members
    assert plain.control.input_delay is False
