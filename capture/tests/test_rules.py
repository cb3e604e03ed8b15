"""Frame classes from the capture config (``capture/link/rules.py``): the ``[frames]`` TOML table is
parsed, turned into SET_RULE/SET_CLASS_MODE/SET_SEQ_OFFSET/SET_COUNTER_PERIOD commands, and those
commands load the real classifier (``gateware/classify.py``, Amaranth simulator), which must then
class and record frames of the simulated bench's wire exactly as the reference rule table
(``model_sniffer.classify``) does. Bad tables give one clear line."""

import subprocess
import sys
import textwrap

import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from latscope import LatscopeError
from latscope.capture.link import rules as rl
from latscope.capture.link import session
from latscope.capture.sim import sim_wire as w
from latscope.gateware.classify import FrameClassifier
from latscope.gateware.model_sniffer import FLAG_FIELDS, FRAME_FIELDS, classify, parse_frame
from latscope.gateware.protocol import CounterRecord, FrameRecord, FrameType, Opcode
from latscope.gateware.sniffer import frame_entry_layout
from latscope.gateware.stream_bench import record_collector

CONFIG = textwrap.dedent("""\
    [dut]
    label = "fast-track-under-load"

    [frames]
    classes = ["other", "hp", "bg"]
    record = ["hp"]
    counter_period = 9
    seq_offset = 4

    [[frames.rx]]
    class = "hp"
    dst_port = [5000, 5009]

    [[frames.rx]]
    class = "bg"
    ethertype = 0x0800

    [[frames.tx]]
    class = "hp"
    src_port = [5000, 5009]

    [[frames.tx]]
    class = "bg"
    pcp = 3
    """)


def _load(tmp_path, text):
    path = tmp_path / "capture.toml"
    path.write_text(text)
    return session.load_config(path)


def test_config_parses_into_rules_and_metadata(tmp_path):
    config = _load(tmp_path, CONFIG)
    fr = config.frames
    assert fr.classes == ["other", "hp", "bg"] and fr.record == {"hp"} and fr.record_mask == 0b010
    assert fr.rules[0] == [dict(enable=1, cls=1, match_port=1, port_lo=5000, port_hi=5009,
                                port_src=0, port_dst=1),
                           dict(enable=1, cls=2, match_ethertype=1, ethertype=0x0800)]
    assert fr.rules[1][1] == dict(enable=1, cls=2, match_pcp=1, pcp=3)
    ops = [op for op, _ in fr.commands()]
    # 4 rule slots per direction (unused ones disabled), a class mode per direction, offset, period
    assert ops == ([Opcode.SET_RULE] * 4 + [Opcode.SET_CLASS_MODE]) * 2 + [
        Opcode.SET_SEQ_OFFSET, Opcode.SET_COUNTER_PERIOD]
    meta = session.capture_metadata({"tick_hz": 8e8, "channel_names": ["rx_dv"]}, config)
    assert meta["frames"]["classes"] == {"0": "other", "1": "hp", "2": "bg"}
    assert rl.class_names(meta) == {0: "other", 1: "hp", 2: "bg"}
    assert "frames" not in config.extra


def _classifier_run(commands, entries, *, shift):
    """The real classifier, configured by ``commands``, fed ``entries`` [(direction, record)]."""
    dut = FrameClassifier(classes=4, queue_depth=8)
    layout = frame_entry_layout(0)
    out = []

    async def bench(ctx):
        ctx.set(dut.records.ready, 1)
        for opcode, args in commands:
            ctx.set(dut.config.valid, 1)
            ctx.set(dut.config.payload, {"opcode": opcode, "args": int.from_bytes(args, "little")})
            await ctx.tick()
        ctx.set(dut.config.valid, 0)
        for d, r in entries:
            port = dut.tx if d else dut.rx
            ctx.set(port.valid, 1)
            ctx.set(port.payload, layout.const({"record": {
                **{f: r[f] for f in FRAME_FIELDS}, "flags": {f: r[f] for f in FLAG_FIELDS}}}))
            await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)
            # a 30-byte FRAME record leaves in 30 cycles; frames come at most one per 672 ns
            await ctx.tick().repeat(40)
        await ctx.tick().repeat(3 << shift)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(record_collector(dut.records, out))
    sim.run()
    frames = [data.Const(FrameRecord, int.from_bytes(p, "little")) for t, p in out
              if t == FrameType.FRAME]
    counters = [data.Const(CounterRecord, int.from_bytes(p, "little")) for t, p in out
                if t == FrameType.COUNTERS]
    return frames, counters


def test_rule_table_round_trip_through_the_gateware(tmp_path):
    fr = _load(tmp_path, CONFIG).frames
    wire = []     # (direction, frame): hp probes, IPv4 background, a tagged reply, an odd port
    for seq in range(6):
        wire.append((0, w.udp_frame(64, seq, dst_port=5000 + seq)))           # hp
        wire.append((0, w.udp_frame(594, 100 + seq, src_port=9, dst_port=9)))  # bg
        wire.append((1, w.udp_frame(64, seq, src_port=5000 + seq, dst_port=4242)))   # hp
        wire.append((1, w.udp_frame(68, 200 + seq, pcp=3, src_port=7, dst_port=7)))  # bg
        wire.append((1, w.udp_frame(68, 300 + seq, pcp=1, src_port=7, dst_port=7)))  # other
    entries = [(d, parse_frame(f)) for d, f in wire]
    frames, counters = _classifier_run(fr.commands(), entries, shift=fr.counter_period)
    expected = [(d, classify(r, fr.rules[d]), r["seq"]) for d, r in entries]
    want = [(d, c, s) for d, c, s in expected if fr.classes[c] in fr.record]
    assert [(f.direction, f.cls, f.seq) for f in frames] == want
    assert len(want) == 12
    assert all(c.dropped == 0 for c in counters)
    last = {(c.direction, c.cls): c.frames for c in counters}
    for d in (0, 1):
        for c in range(3):
            assert last.get((d, c), 0) == sum(1 for e in expected if e[:2] == (d, c))


@pytest.mark.parametrize("frames_toml,message", [
    ('classes = ["other", "hp"]\n[[frames.rx]]\nclass = "bg"\n', r"class 'bg' is not in"),
    ('classes = ["other", "hp"]\n[[frames.rx]]\nclass = "hp"\ndst_port = [9, 1]\n',
     r"range \[9, 1\] is empty"),
    ('classes = ["other", "hp"]\n[[frames.rx]]\nclass = "hp"\ndst_port = 1\nsrc_port = 2\n',
     r"one port range per rule"),
    ('classes = ["other", "hp"]\n[[frames.rx]]\nclass = "hp"\nvlan = 3\n', r"unknown key 'vlan'"),
    ('classes = ["other", "hp"]\n[[frames.rx]]\nclass = "hp"\npcp = 9\n', r"pcp must be .*0\.\.7"),
    ('classes = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]\n', r"9 classes; the gateware has 8"),
    ('classes = ["other"]\nrecord = ["hp"]\n', r"record must list class names"),
    ('classes = ["other", "hp"]\n' + '[[frames.tx]]\nclass = "hp"\n' * 5, r"5 tx rules"),
    ('colour = "red"\n', r"unknown key 'colour'"),
])
def test_bad_tables_are_one_clear_line(tmp_path, frames_toml, message):
    with pytest.raises(LatscopeError, match=message):
        _load(tmp_path, "[frames]\n" + frames_toml)


def test_capture_cli_rejects_a_bad_table_in_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[frames]\nclasses = ["other"]\n[[frames.rx]]\nclass = "hp"\n')
    proc = subprocess.run([sys.executable, "-m", "latscope.cli", "capture", "--sim", "gem-64",
                           "--packets", "5", "--config", str(bad), "-o",
                           str(tmp_path / "x.lsc")], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "class 'hp' is not in [frames] classes" in lines[0]
    assert not (tmp_path / "x.lsc").exists()


def test_instrument_without_frame_capture_refuses_in_one_line(tmp_path, capsys):
    """The edge-only simulated instrument answers SET_RULE with UNKNOWN_OPCODE, as a build
    without sniffers does (protocol.py): the capture stops before it starts, in one line."""
    from latscope.cli import main
    config = tmp_path / "frames.toml"
    config.write_text('[frames]\nclasses = ["other", "hp"]\n')
    out = tmp_path / "x.lsc"
    status = main(["capture", "--sim", "gem-64", "--sim-engine", "model", "--packets", "5",
                   "--config", str(config), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status != 0 and len(err) == 1
    assert "has no frame capture" in err[0] and "--frames mii" in err[0]
    assert not out.exists()
