"""The simulated bench's wire through the real frame-capture gateware: a short run of
``sim_load`` (measured requests beside background frames, replies on the other direction) is put
on both directions' MII pins cycle by cycle (``sim_wire.mii_cycles``, at the wire's own start
times) of ``LatscopeCore(sniffer="mii")`` in the Amaranth simulator, configured with the bench's
rule table by the same commands ``latscope capture`` sends. The FRAME and COUNTERS records it sends
must equal the ones the model engine sends for the same wire (``sim_engines.FrameRecords``): the
check that the model engine's frame records are the gateware's."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from latscope.capture.link.stream import StreamDecoder
from latscope.capture.sim import sim_load, sim_wire
from latscope.capture.sim.sim_engines import FrameRecords
from latscope.gateware.model_stream import frame
from latscope.gateware.protocol import Opcode
from latscope.gateware.stream_bench import send_commands
from latscope.gateware.top import LatscopeCore

CAPTURE_PERIOD, LINK_PERIOD, MII_PERIOD = 10e-9, 13e-9, 40e-9


def _pins(run, d):
    """Per-40-ns-cycle (dv, nibble) of direction ``d``, from cycle 0 of the run's time."""
    w = run.wire[d]
    start = np.asarray(w["start_ns"]) - run.timing.lead_ticks * run.timing.tick_ns
    phase = start[0] % sim_wire.MII_CLOCK_NS
    _, dv, data = sim_wire.mii_cycles(w["frames"], start - phase, first_cycle=0)
    return dv, data


def _run_core(run, commands):
    dut = LatscopeCore(channels=2, lanes=1, counter_width=24, heartbeat_shift=12, fifo_depth=16,
                       capture_hz=100_000_000, channel_names=["rx_dv", "tx_en"], max_payload=64,
                       sniffer="mii", frame_options={"header_bytes": 0})
    out = bytearray()
    state = {"replies": 0, "go": False, "level": [0, 0], "done": [False, False]}
    pins = {d: _pins(run, d) for d in (0, 1)}

    async def host(ctx):
        await send_commands(ctx, dut, commands, state)
        state["go"] = True
        while not all(state["done"]):
            await ctx.tick("sync")
        await ctx.tick("sync").repeat(5000)

    async def sink(ctx):
        decoder = StreamDecoder()
        ctx.set(dut.tx.ready, 1)
        async for _, _, valid, byte in ctx.tick("sync").sample(dut.tx.valid, dut.tx.payload):
            if valid:
                out.append(byte)
                state["replies"] += len(decoder.feed(bytes([byte])).replies)

    def phy(d):
        port = dut.phy_tx if d else dut.phy_rx
        domain = "phy_tx" if d else "phy_rx"
        dv, data = pins[d]

        async def bench(ctx):
            while not state["go"]:
                await ctx.tick(domain)
            for level, nibble in zip(dv.tolist(), data.tolist(), strict=True):
                ctx.set(port.dv, level)
                ctx.set(port.data, nibble)
                state["level"][d] = level
                await ctx.tick(domain)
            ctx.set(port.dv, 0)
            state["level"][d] = 0
            state["done"][d] = True
        return bench

    async def capture_pins(ctx):
        while True:
            ctx.set(dut.samples, state["level"][0] | state["level"][1] << 1)
            await ctx.tick("capture")

    sim = Simulator(dut)
    sim.add_clock(CAPTURE_PERIOD, domain="capture")
    sim.add_clock(LINK_PERIOD, domain="sync")
    sim.add_clock(MII_PERIOD, domain="phy_rx")
    sim.add_clock(MII_PERIOD, domain="phy_tx")
    sim.add_testbench(host)
    sim.add_process(sink)
    sim.add_testbench(phy(0))
    sim.add_testbench(phy(1))
    sim.add_testbench(capture_pins, background=True)
    sim.run()
    return StreamDecoder().feed(bytes(out))


@pytest.mark.slow
def test_bench_wire_through_the_real_sniffers_equals_the_model_engine():
    # 4 requests 10 us apart beside 60 % IMIX background: a handful of frames each way
    scenario = sim_load.LoadScenario(name="short", load=0.6, probe_rate_pps=100_000.0,
                                     drop_probability=0.0)
    run = sim_load.simulate_load("fast-track-64", 4, scenario, seed=8)
    assert len(run.wire[0]["frames"]) >= 5 and len(run.wire[1]["frames"]) == 4
    rules = sim_load.default_frames_config()
    # a short counter period so COUNTERS snapshots appear within the short run
    rules.counter_period = 10
    commands = [(Opcode.ARM, b"\x01")] + rules.commands()
    result = _run_core(run, commands)
    assert result.frames_bad == 0 and result.frames_unknown == 0

    model = FrameRecords(run, lanes=1)
    for opcode, args in rules.commands():
        assert model.configure(bytes([opcode]) + args) == 0
    model.start(0)
    model.add(run)                  # the run is one block: its frames
    want = StreamDecoder().feed(b"".join(
        frame(t, i, p) for i, (t, p) in enumerate(model.until(0, final=True)))).frames
    fields = ["direction", "frame_index", "cls", "length", "flags", "seq", "src_port",
              "dst_port", "ethertype", "src_ip", "dst_ip"]
    got = result.frames
    assert len(got) == len(want) == 4 + 4          # hp requests and replies only
    for f in fields:
        assert got[f].tolist() == want[f].tolist(), f
    # the last COUNTERS of each class: every frame counted, by class
    last = {}
    for c in result.frame_counters:
        last[(int(c["direction"]), int(c["cls"]))] = c
    n_bg = int(np.count_nonzero(run.wire[0]["probe"] < 0))
    assert int(last[(0, 1)]["frames"]) == 4 and int(last[(0, 2)]["frames"]) == n_bg
    assert int(last[(1, 1)]["frames"]) == 4
    sizes = [len(f) for f, p in zip(run.wire[0]["frames"], run.wire[0]["probe"], strict=True)
             if p < 0]
    assert int(last[(0, 2)]["octets"]) == sum(sizes)
