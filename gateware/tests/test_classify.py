"""The frame classifier (``gateware/classify.py``) against the reference rule table
(``model_sniffer.classify``) and plain counting, with random entries on both directions and random
backpressure on its output."""

import random

import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from latscope.gateware.classify import FrameClassifier
from latscope.gateware.model_sniffer import FLAG_FIELDS, FRAME_FIELDS
from latscope.gateware.protocol import (
    ClassRule,
    CounterRecord,
    FrameRecord,
    FrameType,
    Opcode,
)
from latscope.gateware.sniffer import frame_entry_layout
from latscope.gateware.stream_bench import record_collector

RULES = [   # RX rules, TX rules: (ClassRule fields)
    [dict(enable=1, cls=1, match_port=1, port_dst=1, port_lo=4242, port_hi=4242),
     dict(enable=1, cls=2, match_pcp=1, pcp=6),
     dict(enable=1, cls=3, match_ethertype=1, ethertype=0x86DD),
     dict(enable=0, cls=3)],
    [dict(enable=1, cls=1, match_port=1, port_src=1, port_lo=4242, port_hi=4250),
     dict(enable=1, cls=2, match_ip_proto=1, ip_proto=6),
     dict(enable=1, cls=7, match_ethertype=1, ethertype=0x0800)],   # class 7 >= classes: 0
]
RECORD_MASK = [0b0010, 0b0110]


def random_record(rng):
    r = dict.fromkeys(FRAME_FIELDS + FLAG_FIELDS, 0)
    r.update(length=rng.randrange(0, 1600), fcs_ok=int(rng.random() < 0.9),
             rx_er=int(rng.random() < 0.05), udp=int(rng.random() < 0.7),
             pcp=rng.choice([0, 0, 6]), ip_proto=rng.choice([17, 6, 1]),
             ethertype=rng.choice([0x0800, 0x86DD, 0x0806]),
             src_port=rng.choice([4242, 4245, 5000, 53]),
             dst_port=rng.choice([4242, 9, 4243]), seq=rng.getrandbits(32))
    return r


def reference_class(r, rules, classes):
    for rule in rules:
        if not rule.get("enable"):
            continue
        g = rule.get
        if g("match_ethertype") and r["ethertype"] != g("ethertype"):
            continue
        if g("match_pcp") and r["pcp"] != g("pcp"):
            continue
        if g("match_ip_proto") and r["ip_proto"] != g("ip_proto"):
            continue
        if g("match_port") and not (r["udp"] and (
                (g("port_dst") and g("port_lo") <= r["dst_port"] <= g("port_hi"))
                or (g("port_src") and g("port_lo") <= r["src_port"] <= g("port_hi")))):
            continue
        return rule["cls"] if rule["cls"] < classes else 0
    return 0


def to_entry(r, layout):
    flags = {f: r[f] for f in FLAG_FIELDS}
    rec = {f: r[f] for f in FRAME_FIELDS}
    return layout.const({"record": {**rec, "flags": flags}})


def run(entries, *, ready_p, shift=11, classes=4, queue_depth=4, gap=(0, 6)):
    """Feed ``entries`` [(direction, record dict)]; return the (type, payload bytes) offered."""
    dut = FrameClassifier(classes=classes, queue_depth=queue_depth)
    layout = frame_entry_layout(0)
    rng = random.Random(5)
    out = []

    async def bench(ctx):
        async def config(opcode, args):
            ctx.set(dut.config.valid, 1)
            ctx.set(dut.config.payload, {"opcode": opcode,
                                         "args": int.from_bytes(args, "little")})
            await ctx.tick()
            ctx.set(dut.config.valid, 0)

        for d, rules in enumerate(RULES):
            for i, rule in enumerate(rules):
                raw = data.Layout.cast(ClassRule).const(rule).as_value().value
                await config(Opcode.SET_RULE, bytes([d << 7 | i]) + raw.to_bytes(9, "little"))
            await config(Opcode.SET_CLASS_MODE, bytes([d, RECORD_MASK[d]]))
        await config(Opcode.SET_COUNTER_PERIOD, bytes([shift]))

        async def step():
            ctx.set(dut.records.ready, rng.random() < ready_p)
            await ctx.tick()

        for d, r in entries:
            port = dut.tx if d else dut.rx
            ctx.set(port.valid, 1)
            ctx.set(port.payload, to_entry(r, layout))
            while True:
                await step()
                if ctx.get(port.ready):
                    break
            ctx.set(port.valid, 0)
            for _ in range(rng.randrange(*gap)):
                await step()
        for _ in range(3 << shift):
            await step()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(record_collector(dut.records, out))
    sim.run()
    return out


def decode(out):
    frames, counters = [], []
    for t, payload in out:
        if t == FrameType.FRAME:
            frames.append(data.Const(FrameRecord, int.from_bytes(payload, "little")))
        else:
            assert t == FrameType.COUNTERS
            counters.append(data.Const(CounterRecord, int.from_bytes(payload, "little")))
    return frames, counters


@pytest.mark.parametrize("ready_p", [1.0, 0.05])
def test_classify_count_record(ready_p):
    """300 random entries on both directions. Expected: classes from the reference rule table;
    FRAME records exactly for the recorded classes, numbered per direction; the last COUNTERS
    totals of each class equal to plain counts over the frames below ``frames_seen``; with a
    slow link (ready 5 % of cycles) every frame of a recorded class is either sent or counted in
    ``dropped``. Exact."""
    rng = random.Random(int(ready_p * 100))
    entries = [(rng.randrange(2), random_record(rng)) for _ in range(300)]
    # a 30-byte record takes 30 cycles to leave: with a free link, space frames that far apart
    # and give the queue room for a burst of 8 counter records (24 bytes each)
    gap, depth = ((31, 40), 16) if ready_p == 1.0 else ((0, 6), 4)
    frames, counters = decode(run(entries, ready_p=ready_p, gap=gap, queue_depth=depth))
    index = [0, 0]
    expect = []
    per_dir = [[], []]
    for d, r in entries:
        cls = reference_class(r, RULES[d], 4)
        per_dir[d].append((cls, r))
        if RECORD_MASK[d] >> cls & 1:
            expect.append((d, index[d], cls, r["length"], r["seq"], r["dst_port"]))
        index[d] += 1
    sent = [(int(f.direction), int(f.frame_index), int(f.cls), int(f.length), int(f.seq),
             int(f.dst_port)) for f in frames]
    if ready_p == 1.0:
        assert sent == expect
    else:
        assert set(sent) <= set(expect) and len(sent) < len(expect)
    last = {}
    for c in counters:
        last[int(c.direction), int(c.cls)] = c
    assert len(last) == 8
    dropped_total = 0
    for (d, cls), c in last.items():
        seen = per_dir[d][:int(c.frames_seen)]
        assert int(c.frames_seen) == len(per_dir[d])       # the final snapshot saw everything
        mine = [r for k, r in seen if k == cls]
        assert int(c.frames) == len(mine)
        assert int(c.octets) == sum(r["length"] for r in mine)
        assert int(c.fcs_errors) == sum(1 for r in mine if not r["fcs_ok"] or r["rx_er"])
        dropped_total += int(c.dropped)
    assert len(sent) + dropped_total == len(expect)
    assert [int(f.frame_index) for f in frames if f.direction == 0] == \
        sorted(int(f.frame_index) for f in frames if f.direction == 0)


@pytest.mark.parametrize("kwargs, message", [
    ({"rules": 0}, "Rule count must be an integer in 1..128, not 0"),
    ({"classes": 9}, "Class count must be an integer in 1..8, not 9"),
    ({"header_bytes": -1}, "Header bytes must be an integer in 0..64, not -1"),
    ({"queue_depth": 1}, "Queue depth must be an integer >= 2, not 1"),
])
def test_constructor_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FrameClassifier(**kwargs)
