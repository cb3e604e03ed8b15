"""The Verilator flow: command encoding, stimulus conversion, and the harness's clocking, link
throttle, fast-forward and streaming, on a probe core (the real core is covered by test_soak)."""

import io

import numpy as np
import pytest
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from latscope import LatscopeError
from latscope.gateware import verilator as vl


class HarnessProbeCore(wiring.Component):
    """A stand-in with LatscopeCore's port signature, for testing the harness mechanics only (not
    the instrument): on every change of ``samples`` it queues two bytes, the low byte of its own
    cycle counter and the low byte of the new sample word; host bytes come back inverted. It is
    quiescent when nothing is queued and the input did not change; ``ff_skip=k`` advances its
    counter by ``k + 1`` like ``k + 1`` idle cycles would."""

    def __init__(self):
        super().__init__({
            "samples": In(16), "selftest_out": Out(2),
            "tx": Out(stream.Signature(8)), "rx": In(stream.Signature(8)),
            "ff_skip": In(24), "quiescent": Out(1), "ff_limit": Out(24),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.q = q = fifo.SyncFIFOBuffered(width=8, depth=64)
        counter = Signal(24)
        prev = Signal(16)
        second = Signal(8)
        pending = Signal()
        m.d.sync += [counter.eq(counter + 1 + self.ff_skip), prev.eq(self.samples)]
        changed = self.samples != prev
        m.d.comb += [
            self.quiescent.eq(~changed & ~q.r_rdy & ~pending & ~self.rx.valid & q.w_rdy),
            self.ff_limit.eq(300),
            self.tx.payload.eq(q.r_data), self.tx.valid.eq(q.r_rdy), q.r_en.eq(self.tx.ready),
        ]
        with m.If(pending):
            m.d.comb += [q.w_data.eq(second), q.w_en.eq(1)]
            m.d.sync += pending.eq(0)
        with m.Elif(changed):
            m.d.comb += [q.w_data.eq(counter[:8]), q.w_en.eq(1)]
            m.d.sync += [second.eq(self.samples[:8]), pending.eq(1)]
        with m.Elif(self.rx.valid):
            m.d.comb += [q.w_data.eq(~self.rx.payload), q.w_en.eq(1), self.rx.ready.eq(1)]
        m.d.comb += self.selftest_out.eq(Cat(counter[0], Mux(counter[1], 1, 0)))
        return m


@pytest.fixture(scope="module")
def probe():
    return vl.VerilatorInstrument(HarnessProbeCore())


def _expected_probe_bytes(changes, start=0):
    """Bytes the probe sends for sample-word changes at harness cycles ``changes`` (cycle, word):
    the change is seen in the cycle it is applied, when the counter equals the cycle number (the
    counter is 0 on the first cycle after reset and advances by one per cycle)."""
    out = []
    for cycle, word in changes:
        out += [cycle & 0xFF, word & 0xFF]
    return bytes(out)


def test_commands_encoding():
    # Expected bytes written out from the harness.cpp command table.
    cmds = vl.Commands().samples(0x0102, 3).run(5).rx(b"ab").fast_forward(False).throttle(40)
    cmds.drain(10, 2).stats().reset(4)
    assert bytes(cmds) == (
        b"\x01\x02\x01\x00\x00" + (3).to_bytes(8, "little") + b"\x02" + (5).to_bytes(8, "little")
        + b"\x03\x02\x00ab" + b"\x04\x00" + b"\x05" + (40).to_bytes(4, "little")
        + b"\x06" + (10).to_bytes(8, "little") + (2).to_bytes(4, "little") + b"\x07"
        + b"\x08" + (4).to_bytes(4, "little"))


def test_stimulus_commands_lanes():
    # Two lanes, 8 channels: channel 0 rises at tick 3 (cycle 1, lane 1), channel 1 rises at
    # tick 10 (cycle 5, lane 0), end at tick 14 (cycle 7).
    data = vl.stimulus_commands([3, 10], [0b01, 0b11], lanes=2, channels=8, end_tick=14)
    rec = np.frombuffer(data, dtype=vl.SAMPLES_DTYPE)
    assert rec["op"].tolist() == [1] * 5
    assert rec["word"].tolist() == [0x0000, 0x0100, 0x0101, 0x0303, 0x0303]
    assert rec["hold"].tolist() == [1, 1, 3, 1, 1]
    assert int(rec["hold"].sum()) == 7


def _levels_per_cycle(data):
    """The sample word of every harness cycle that a SAMPLES command stream sets."""
    rec = np.frombuffer(data, dtype=vl.SAMPLES_DTYPE)
    assert (rec["op"] == vl.OP_SAMPLES).all() and (rec["hold"] > 0).all()
    return np.repeat(rec["word"].astype(np.int64), rec["hold"].astype(np.int64))


@pytest.mark.parametrize("lanes", [1, 2, 3, 4])
def test_stimulus_commands_equal_tick_by_tick_levels(lanes):
    # Random stimuli, with several changes in one cycle as well as one per cycle, against the
    # level of every tick worked out one tick at a time (exact: integers).
    rng = np.random.default_rng(lanes)
    for dense in (False, True):
        for _ in range(40):
            channels = int(rng.integers(1, 9))
            n = int(rng.integers(1, 40))
            steps = rng.integers(1, 3 if dense else 12, n)
            ticks = np.cumsum(steps) + int(rng.integers(0, 6)) - 1
            values = rng.integers(0, 1 << channels, n)
            initial = int(rng.integers(0, 1 << channels))
            end_tick = (int(ticks[-1]) // lanes + int(rng.integers(1, 4))) * lanes
            data = vl.stimulus_commands(ticks, values, lanes=lanes, channels=channels,
                                        end_tick=end_tick, initial=initial)
            words = _levels_per_cycle(data)
            expected = []
            level, k = initial, 0
            for tick in range(end_tick):
                while k < n and ticks[k] == tick:
                    level, k = int(values[k]), k + 1
                if tick % lanes == 0:
                    expected.append(0)
                expected[-1] |= level << (tick % lanes * channels)
            assert words.tolist() == expected


def test_stimulus_commands_validation():
    with pytest.raises(ValueError, match="Ticks must be non-negative and strictly increasing"):
        vl.stimulus_commands([5, 5], [1, 0], lanes=2, channels=8)
    with pytest.raises(ValueError, match="Values must fit in 8 channel bits"):
        vl.stimulus_commands([5], [0x100], lanes=2, channels=8)
    with pytest.raises(ValueError, match="End tick must be after the last change"):
        vl.stimulus_commands([5], [1], lanes=2, channels=8, end_tick=4)


def test_wrapper_rejects_missing_ports():
    with pytest.raises(LatscopeError, match="The core has no output port 'selftest_out'"):
        vl.core_wrapper({"samples": ("input", 16)}, "x")


def test_wrapper_resets_each_domain_on_its_own_clock():
    # A core with a gated link domain (sync: clk, rst), two filter gates and the capture domain.
    ports = {"samples": ("input", 32), "selftest_out": ("output", 4),
             "tx__payload": ("output", 8), "tx__valid": ("output", 1), "tx__ready": ("input", 1),
             "rx__payload": ("input", 8), "rx__valid": ("input", 1), "rx__ready": ("output", 1),
             "link_quiet": ("output", 1), "filter_quiet": ("output", 2),
             "clk": ("input", 1), "rst": ("input", 1), "capture_clk": ("input", 1),
             "capture_rst": ("input", 1), "filter0_clk": ("input", 1), "filter0_rst": ("input", 1),
             "filter1_clk": ("input", 1), "filter1_rst": ("input", 1)}
    text = vl.core_wrapper(ports, "core_x")
    for clock, reg, clk_port, rst_port in [("clk", "rst_q", "capture_clk", "capture_rst"),
                                           ("link_clk", "rst_link_clk_q", "clk", "rst"),
                                           ("gclk0", "rst_gclk0_q", "filter0_clk", "filter0_rst"),
                                           ("gclk1", "rst_gclk1_q", "filter1_clk", "filter1_rst")]:
        assert f"always @(posedge {clock}) {reg} <= rst;" in text
        assert f".{clk_port}({clock})" in text and f".{rst_port}({reg})" in text


def test_probe_changes_and_rx(probe):
    cmds = vl.Commands().samples(0, 10).samples(0x21, 1000).samples(0x22, 5).rx(b"\x0f")
    cmds.drain(10_000)
    out = probe.run_commands(cmds)
    assert out == _expected_probe_bytes([(10, 0x21), (1010, 0x22)]) + b"\xf0"
    assert probe.last_stats["skipped"] > 900     # the idle stretch was fast-forwarded


def test_fast_forward_is_invisible(probe):
    rng = np.random.default_rng(1)
    cmds = vl.Commands()
    changes, cycle = [], 0
    for _ in range(200):
        hold = int(rng.integers(1, 2000))
        word = int(rng.integers(0, 1 << 16))
        if changes and word == changes[-1][1]:
            word ^= 1
        cmds.samples(word, hold)
        changes.append((cycle, word))
        cycle += hold
    cmds.drain(100_000)
    fast = probe.run_commands(cmds)
    fast_stats = probe.last_stats
    slow = probe.run_commands(vl.Commands().fast_forward(False).raw(bytes(cmds)))
    assert fast == slow == _expected_probe_bytes(changes[1:] if changes[0][1] == 0 else changes)
    assert fast_stats["skipped"] > 0 and probe.last_stats["skipped"] == 0


def test_throttle_limits_byte_rate(probe):
    # 30 changes 4 cycles apart queue 60 bytes (the probe's FIFO holds 64). At one byte per 40
    # cycles, starting within the first few cycles, a 1000-cycle run lets out exactly 25
    # (accepted at t0, t0 + 40, ..., t0 + 960 for any first acceptance 1 <= t0 <= 39).
    cmds = vl.Commands().throttle(40)
    for i in range(30):
        cmds.samples(i + 1, 4)
    cmds.run(1000 - 120)
    out = probe.run_commands(cmds)
    assert len(out) == 25
    full = probe.run_commands(cmds.drain(100_000))
    assert len(full) == 60 and full.startswith(out)
    stall = probe.run_commands(vl.Commands().throttle(0).samples(1, 50).drain(1000))
    assert stall == b""


def test_interactive_reads_before_close(probe):
    with probe.open() as proc:
        proc.write(vl.Commands().rx(b"\x00\x01").run(20))
        data = b""
        while len(data) < 2:
            chunk = proc.read_bytes(16, timeout=10)
            assert chunk, "no reply from the harness within 10 s"
            data += chunk
        assert data == b"\xff\xfe"
        stats = proc.close()
    assert stats["cycles"] == 20


def test_bad_command_is_reported(probe):
    with pytest.raises(LatscopeError, match="unknown command 0x7f"):
        probe.run_commands(b"\x7f")


def test_cable_command_encoding_and_validation(probe):
    # OP_CABLE, channels, lanes, u16 mask, then 16 u16 delays (harness.cpp's command table)
    data = bytes(vl.Commands().cable({0: 3, 5: 1000}, channels=8, lanes=4))
    assert data[:5] == bytes([vl.OP_CABLE, 8, 4]) + (0b100001).to_bytes(2, "little")
    delays = [int.from_bytes(data[5 + 2 * i:7 + 2 * i], "little") for i in range(16)]
    assert delays == [3, 0, 0, 0, 0, 1000] + [0] * 10 and len(data) == 37
    with pytest.raises(ValueError, match="cable: channel 8 delay 0 outside"):
        vl.Commands().cable({8: 0}, channels=8, lanes=2)
    with pytest.raises(ValueError, match="cable: channel 1 delay 1001 outside"):
        vl.Commands().cable({1: 1001}, channels=8, lanes=2)
    bad_lanes = bytes([vl.OP_CABLE, 8, 5, 1, 0]) + bytes(32)
    with pytest.raises(LatscopeError, match="bad CABLE command"):
        probe.run_commands(bad_lanes)
    # removing the cable (mask 0) gives the SAMPLES word back: the probe reports it unchanged
    cmds = vl.Commands().cable({}, channels=8, lanes=2).samples(0, 10).samples(0x21, 100)
    assert probe.run_commands(cmds.drain(10_000)) == _expected_probe_bytes([(10, 0x21)])


def test_bench_periodic_stimulus():
    from latscope.bench.gateware import periodic_stimulus
    ticks, values = periodic_stimulus(5, 6, start=100, channels=(0, 3))
    assert ticks.tolist() == [100, 105, 110, 115, 120, 125]
    # Channels 0 and 3 toggle in turn: 0b1, 0b1001, 0b1000, 0b0, 0b1, 0b1001.
    assert values.tolist() == [1, 9, 8, 0, 1, 9]


@pytest.mark.slow
def test_fast_forward_is_invisible_for_the_core():
    """The real core on random traffic: the bytes sent are identical with and without skipping
    idle time, and skipping did happen."""
    from latscope.capture.link.stream import StreamDecoder
    from latscope.gateware.codec import encode_command
    from latscope.gateware.protocol import Opcode
    inst = vl.VerilatorInstrument(channels=8, lanes=2, counter_width=24, max_glitch=2,
                                  heartbeat_shift=12, fifo_depth=64, capture_hz=48_000_000,
                                  channel_names=[f"c{i}" for i in range(8)], max_payload=256)
    rng = np.random.default_rng(7)
    cmds = vl.Commands().rx(encode_command(0, Opcode.ARM, b"\x01")).run(200)
    level = 0
    for _ in range(400):
        level ^= 1 << int(rng.integers(0, 8))
        if rng.random() < 0.3:   # an edge on lane 1 only: the two lanes differ for one cycle
            cmds.samples(level << 8 | (level ^ 1), 1)
        cmds.samples(level << 8 | level, int(rng.integers(1, 3000)))
    cmds.drain(1_000_000)
    fast = inst.run_commands(cmds)
    fast_stats = inst.last_stats
    slow = inst.run_commands(vl.Commands().fast_forward(False).raw(bytes(cmds)))
    assert fast == slow
    # A partly filled EVENTS frame does not stop the skipping: edges 1..3000 cycles apart with a
    # heartbeat every 4,096 cycles leave a frame partly filled almost all the time, yet most
    # cycles are skipped (96 % measured when this test was written; 11 % when only an empty
    # framer counted as idle).
    assert fast_stats["skipped"] > 0.9 * fast_stats["total_cycles"]
    assert inst.last_stats["skipped"] == 0
    result = StreamDecoder().feed(fast)
    assert result.frames_bad == result.frames_missing == 0 and len(result.time) > 400


@pytest.mark.slow
def test_drain_sends_the_last_partly_filled_frame():
    """One edge, then DRAIN: the core turns quiescent with the event in a partly filled frame;
    the drain runs on to the next heartbeat (skipping the idle time), which sends it."""
    from latscope.capture.link.stream import StreamDecoder
    from latscope.gateware.codec import encode_command
    from latscope.gateware.protocol import Opcode
    inst = vl.VerilatorInstrument(channels=8, lanes=2, counter_width=24, max_glitch=2,
                                  heartbeat_shift=12, fifo_depth=64, capture_hz=48_000_000,
                                  channel_names=[f"c{i}" for i in range(8)], max_payload=256)
    cmds = vl.Commands().rx(encode_command(0, Opcode.SET_EDGES, b"\xff\xff\xff\xff")
                            + encode_command(1, Opcode.ARM, b"\x01")).run(5000)
    cmds.samples(0x0101, 1).drain(100_000)
    data = inst.run_commands(cmds)
    result = StreamDecoder().feed(data)
    assert result.frames_bad == result.frames_missing == 0
    assert len(result.time) == 1 and result.channel.tolist() == [0]
    # the drain ended after the heartbeat at cycle 8192 (the first after the edge at ~5000),
    # and skipped most of the way there
    stats = inst.last_stats
    assert 8192 < stats["cycles"] < 8192 + 200
    assert stats["skipped"] > 2500


@pytest.mark.slow
def test_fast_forward_is_invisible_on_the_demo_core():
    """The simulated bench's core (heartbeat every 2**20 cycles, glitch filters up to 15) on 40
    echo packets of the bench's DUT model: identical bytes with and without fast-forward, every
    event decoded exactly, and over 90 % of the cycles skipped."""
    from latscope.capture.events import DecodeResult
    from latscope.capture.link.stream import StreamDecoder
    from latscope.capture.sim import simbench
    from latscope.gateware.codec import encode_command
    from latscope.gateware.protocol import Opcode
    run = simbench.simulate("el-dm-64", 40, seed=3)
    timing = run.timing
    inst = vl.VerilatorInstrument(capture_hz=int(timing.capture_hz), lanes=timing.lanes,
                                  channel_names=simbench.CHANNEL_ROLES, **simbench.CORE_BUILD)
    settle = 4096
    cmds = vl.Commands().rx(encode_command(1, Opcode.SET_EDGES, b"\xff\xff\xff\xff")
                            + encode_command(2, Opcode.ARM, b"\x01")).run(settle)
    cmds.raw(vl.stimulus_commands(run.stimulus.ticks, run.stimulus.values, lanes=timing.lanes,
                                  channels=8)).drain()
    fast = inst.run_commands(cmds)
    fast_stats = inst.last_stats
    slow = inst.run_commands(vl.Commands().fast_forward(False).raw(bytes(cmds)))
    assert fast == slow
    assert fast_stats["skipped"] > 0.9 * fast_stats["total_cycles"]
    decoder = StreamDecoder()
    result = DecodeResult.concat([decoder.feed(fast), decoder.finish()])
    check = simbench.compare_to_truth(result.time, result.channel, result.rising, run.truth)
    assert check["ok"] and check["max_error"] == 0 and check["decoded"] == run.n_events


CLASSES_MK = """# Verilated -*- Makefile -*-
VM_PARALLEL_BUILDS = {parallel}
VM_CLASSES_FAST += \\
  Vtop \\
  Vtop___024root__0 \\

VM_CLASSES_SLOW += \\
  Vtop___024root__Slow \\

VM_SUPPORT_FAST += \\

VM_SUPPORT_SLOW += \\
  Vtop__Syms__Slow \\

VM_GLOBAL_FAST += \\
  verilated \\
  verilated_threads \\

VM_GLOBAL_SLOW += \\
"""


@pytest.mark.parametrize("parallel, jobs", [(0, 4), (1, 7)])
def test_compile_jobs_come_from_the_generated_makefile(tmp_path, parallel, jobs):
    """Expected: one job for the design (Vtop__ALL) or one per listed class (4), plus the two
    runtime files and the harness."""
    (tmp_path / "Vtop_classes.mk").write_text(CLASSES_MK.format(parallel=parallel))
    assert vl.compile_jobs(tmp_path) == jobs
    assert vl.compile_jobs(tmp_path / "missing") is None


def test_build_progress_names_stages_files_and_time(tmp_path):
    """Plain lines (not a terminal): each stage with its time, each compiler job with its file,
    and a line every plain_interval seconds while a file compiles; the link is not a file."""
    (tmp_path / "Vtop_classes.mk").write_text(CLASSES_MK.format(parallel=0))
    out, now = io.StringIO(), [0.0]
    progress = vl.BuildProgress(out, clock=lambda: now[0], tty=False, plain_interval=30)
    progress.stage("Verilator: translating the Verilog to C++")
    now[0] = 20.0
    progress.line("ccache g++ -Os -c -o verilated.o /usr/share/verilator/include/verilated.cpp",
                  tmp_path)
    progress.line("g++ -O2 -I. -c -o Vtop__ALL.o Vtop__ALL.cpp", tmp_path)
    now[0] = 40.0
    progress.tick()                      # 20 s since the last line: quiet
    now[0] = 51.0
    progress.tick()
    progress.line("g++ Vtop__ALL.o harness.o verilated.o -o harness", tmp_path)
    now[0] = 90.0
    progress.done("2 files")
    assert out.getvalue().splitlines() == [
        "latscope: Verilator: translating the Verilog to C++ ...",
        "latscope:   done in 20.0 s",
        "latscope: g++: compiling the generated C++ and the harness ...",
        "latscope:   g++ file 1/4 (verilated.cpp), 0:00",
        "latscope:   g++ file 2/4 (Vtop__ALL.cpp), 0:00",
        "latscope:   g++ file 2/4 (Vtop__ALL.cpp), 0:31",
        "latscope:   done in 70.0 s (2 files)"]


def test_build_progress_redraws_one_line_on_a_terminal():
    out, now = io.StringIO(), [0.0]
    progress = vl.BuildProgress(out, clock=lambda: now[0], tty=True)
    progress.stage("Verilator: translating the Verilog to C++")
    progress.line("g++ -O2 -c -o Vtop__ALL.o Vtop__ALL.cpp")
    now[0] = 65.0
    progress.tick()
    assert out.getvalue().endswith("\r\x1b[Klatscope:   g++ file 1 (Vtop__ALL.cpp), 1:05")
