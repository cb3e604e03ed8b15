"""Frame-aware capture through the whole core (``LatscopeCore(sniffer="mii")``) in the Amaranth
simulator: scapy frames nibble by nibble on both directions' MII pins in their own clock domains,
the same RX_DV/TX_EN levels on the capture channels, commands configuring the rule tables; the
bytes the core sends are decoded by the host decoder. Expected values: the reference parser and
rule table (``gateware/model_sniffer.py``) on the same frames, and the edges' own timestamps."""

import random
import zlib

import numpy as np
import pytest
from amaranth.sim import Simulator

from latscope.capture.link.stream import StreamDecoder
from latscope.gateware.codec import FLAGS, rule_command
from latscope.gateware.frames import FrameCapture
from latscope.gateware.model_sniffer import classify, mii_nibbles, parse_frame
from latscope.gateware.protocol import TRAFFIC_SEQ_OFFSET, Opcode
from latscope.gateware.stream_bench import send_commands
from latscope.gateware.top import LatscopeCore

scapy_all = pytest.importorskip("scapy.all", reason="scapy builds the test frames (pip: scapy)")

CAPTURE_PERIOD, LINK_PERIOD, MII_PERIOD = 10e-9, 13e-9, 40e-9
TX_CLOCK_RATIO = 1 + 100e-6
RULES = {0: [dict(enable=1, cls=1, match_port=1, port_dst=1, port_lo=4242, port_hi=4242)],
         1: [dict(enable=1, cls=1, match_port=1, port_src=1, port_lo=4242, port_hi=4242),
             dict(enable=1, cls=2, match_pcp=1, pcp=5)]}
RECORD = {0: 0b0010, 1: 0b0111}          # RX: record only class 1; TX: classes 0..2


def make_frame(rng, seq, *, probe):
    eth = scapy_all.Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    port = 4242 if probe else rng.choice([53, 9000])
    payload = b"LT\x00\x01" + seq.to_bytes(4, "big") + bytes(8 + rng.randrange(0, 40))
    pkt = eth / scapy_all.IP(src="192.0.2.1", dst="192.0.2.2") / scapy_all.UDP(
        sport=port, dport=port) / payload
    if rng.random() < 0.2:
        pkt = (eth / scapy_all.Dot1Q(prio=5, vlan=7) / scapy_all.IP(dst="192.0.2.2")
               / scapy_all.UDP(sport=1, dport=2) / payload)
    raw = bytes(pkt)
    raw += bytes(max(0, 60 - len(raw)))
    fcs = zlib.crc32(raw) ^ (1 if rng.random() < 0.1 else 0)
    return raw + fcs.to_bytes(4, "little")


def commands():
    cmds = [(Opcode.ARM, b"\x01")]
    for d, rules in RULES.items():
        for i, rule in enumerate(rules):
            cmds.append(rule_command(d, i, **rule))
        cmds.append((Opcode.SET_CLASS_MODE, bytes([d, RECORD[d]])))
    cmds.append((Opcode.SET_COUNTER_PERIOD, bytes([11])))
    return cmds


def run_core(frames_rx, frames_tx, *, extra_link_cycles=4000):
    dut = LatscopeCore(channels=2, lanes=1, counter_width=24, heartbeat_shift=12, fifo_depth=16,
                       capture_hz=100_000_000, channel_names=["rx_dv", "tx_en"], max_payload=64,
                       sniffer="mii", frame_options={"header_bytes": 32})
    out = bytearray()
    state = {"replies": 0, "go": False, "level": [0, 0], "done": [False, False]}
    cmds = commands()

    async def host(ctx):
        await send_commands(ctx, dut, cmds, state)
        state["go"] = True
        while not all(state["done"]):
            await ctx.tick("sync")
        await ctx.tick("sync").repeat(extra_link_cycles)

    async def sink(ctx):
        decoder = StreamDecoder()
        ctx.set(dut.tx.ready, 1)
        async for _, _, valid, byte in ctx.tick("sync").sample(dut.tx.valid, dut.tx.payload):
            if valid:
                out.append(byte)
                state["replies"] += len(decoder.feed(bytes([byte])).replies)

    def phy(direction, frames):
        pins = dut.phy_tx if direction else dut.phy_rx
        domain = "phy_tx" if direction else "phy_rx"

        async def bench(ctx):
            while not state["go"]:
                await ctx.tick(domain)
            await ctx.tick(domain).repeat(50 + 37 * direction)
            for frame in frames:
                for dv, er, nibble in mii_nibbles(frame):
                    ctx.set(pins.dv, dv)
                    ctx.set(pins.er, er)
                    ctx.set(pins.data, nibble)
                    state["level"][direction] = dv
                    await ctx.tick(domain)
                ctx.set(pins.dv, 0)
                state["level"][direction] = 0
                await ctx.tick(domain).repeat(24)
            state["done"][direction] = True
        return bench

    async def capture_pins(ctx):
        # RX_DV and TX_EN as the capture front end sees them (the board wires the same pins to
        # the sniffer and to a capture channel)
        while True:
            ctx.set(dut.samples, state["level"][0] | state["level"][1] << 1)
            await ctx.tick("capture")

    sim = Simulator(dut)
    sim.add_clock(CAPTURE_PERIOD, domain="capture")
    sim.add_clock(LINK_PERIOD, domain="sync")
    sim.add_clock(MII_PERIOD, domain="phy_rx")
    # TX_CLK 100 ppm fast of RX_CLK (IEEE 802.3 22.2.2.1 allows +-100 ppm) and out of phase with
    # every other clock, so the crossings see unrelated edges
    sim.add_clock(MII_PERIOD * TX_CLOCK_RATIO, domain="phy_tx", phase=0.37 * MII_PERIOD)
    sim.add_testbench(host)
    sim.add_process(sink)
    sim.add_testbench(phy(0, frames_rx))
    sim.add_testbench(phy(1, frames_tx))
    sim.add_testbench(capture_pins, background=True)
    sim.run()
    return StreamDecoder().feed(bytes(out))


def test_core_records_classifies_counts_and_matches_edges(tmp_path):
    """12 frames each way (probes on port 4242 mixed with background, some tagged PCP 5, some
    with a bad FCS). Checks: FRAME records exactly for the recorded classes with the reference
    parser's fields and the reference class; COUNTERS totals equal to plain counts over all
    frames; frame ``k`` of a direction spans the ``k``-th rising to the next falling edge of its
    channel, ``(16 + 2 * length)`` MII clocks (preamble, SFD and data nibbles) long, to within
    one capture cycle plus one MII clock (the pins are sampled in a different clock domain).
    Then the decoded stream goes into a capture file and out as pcapng, read back by scapy (an
    independent pcapng reader): each recorded frame's first 32 bytes, length, direction and
    nanosecond timestamp (its first edge) exactly."""
    rng = random.Random(3)
    frames = {d: [make_frame(rng, 1000 + 10 * d + i, probe=rng.random() < 0.5) for i in range(12)]
              for d in (0, 1)}
    result = run_core(frames[0], frames[1])
    assert result.frames_bad == 0 and result.frames_unknown == 0
    recs = result.frames
    for d in (0, 1):
        mine = recs[recs["direction"] == d]
        expected = []
        for k, frame in enumerate(frames[d]):
            ref = parse_frame(frame)
            cls = classify(ref, RULES[d])
            if RECORD[d] >> cls & 1:
                expected.append((k, cls, ref["length"], ref["seq"], ref["fcs_ok"], ref["vlan"],
                                 ref["pcp"], ref["dst_port"]))
        got = [(int(r["frame_index"]), int(r["cls"]), int(r["length"]), int(r["seq"]),
                int(bool(r["flags"] & FLAGS["fcs_ok"])), int(bool(r["flags"] & FLAGS["vlan"])),
                int(r["pcp"]), int(r["dst_port"])) for r in mine]
        assert got == expected
        assert len(expected) >= 3

        # counters: the last snapshot of each class holds every frame
        last = {}
        for c in result.frame_counters[result.frame_counters["direction"] == d]:
            last[int(c["cls"])] = c
        assert set(last) == {0, 1, 2, 3}         # the default 4 classes, each snapshotted
        for cls, c in last.items():
            members = [f for f in frames[d] if classify(parse_frame(f), RULES[d]) == cls]
            assert int(c["frames_seen"]) == len(frames[d])
            assert int(c["frames"]) == len(members)
            assert int(c["octets"]) == sum(len(f) for f in members)
            assert int(c["fcs_errors"]) == sum(1 for f in members if not parse_frame(f)["fcs_ok"])
            assert int(c["dropped"]) == 0
        assert sum(int(c["frames"]) for c in last.values()) == len(frames[d])

        # edges: frame k <-> k-th rising edge of channel d
        ch = result.channel == d
        rise = result.time[ch & result.rising]
        fall = result.time[ch & ~result.rising]
        assert len(rise) == len(fall) == len(frames[d])
        period = MII_PERIOD * (TX_CLOCK_RATIO if d else 1.0)
        for k, frame in enumerate(frames[d]):
            width_s = (fall[k] - rise[k]) * CAPTURE_PERIOD
            expect_s = (16 + 2 * len(frame)) * period
            assert abs(width_s - expect_s) <= CAPTURE_PERIOD + period
        assert np.all(np.diff(rise) > 0)

    # gateware -> host decoder -> .lsc -> pcapng -> scapy
    from latscope.capture.files import capfile
    from latscope.capture.files.pcapng import export_pcapng
    path = tmp_path / "frames.lsc"
    with capfile.CaptureWriter(path, {"tick_hz": 1 / CAPTURE_PERIOD,
                                      "channels": {"0": "rx_dv", "1": "tx_en"}}) as w:
        w.append_events(result.time, result.channel, result.rising)
        w.append_frames(result.frames, result.frame_headers)
        w.append_frame_counters(result.frame_counters)
    with capfile.open_capture(path) as cap:
        summary = export_pcapng(cap, tmp_path / "frames.pcapng")
    assert summary.packets == len(recs) and summary.skipped == 0
    packets = scapy_all.rdpcap(str(tmp_path / "frames.pcapng"))
    expected = []
    for r in recs:
        d, k = int(r["direction"]), int(r["frame_index"])
        ch = result.channel == d
        t_ns = int(round(result.time[ch & result.rising][k] * CAPTURE_PERIOD * 1e9))
        expected.append((t_ns, frames[d][k][:32], len(frames[d][k]), 1 if d == 0 else 2))
    expected.sort(key=lambda e: e[0])
    got = [(int(round(float(p.time) * 1e9)), bytes(p),
            p.wirelen, p.direction) for p in packets]
    assert got == expected


def test_sequence_offset_crosses_whole_into_both_sniffer_clocks():
    """SET_SEQ_OFFSET reaches each sniffer's clock through a handshake: a sniffer sees each value
    the link side held, whole and in order, including one written while the previous transfer
    was still under way (0x00FF, at once 0xFF00, later 0x5A5A). The PHY clocks are unrelated to
    the link clock (40 ns and 100 ppm slower, out of phase; link 13 ns). A zero-delay simulation
    cannot show a torn value (what per-bit synchronisers risk on a board); the crossing check
    refuses a multi-bit FF synchronizer (test_crossings.py)."""
    dut = FrameCapture(interface="mii")
    writes = [0x00FF, 0xFF00, 0x5A5A]
    seen = {"phy_rx": [], "phy_tx": []}
    done = []

    async def host(ctx):
        await ctx.tick().repeat(8)
        for k, value in enumerate(writes):
            ctx.set(dut.config.valid, 1)
            ctx.set(dut.config.payload.opcode, Opcode.SET_SEQ_OFFSET)
            ctx.set(dut.config.payload.args, value)
            await ctx.tick()
            ctx.set(dut.config.valid, 0)
            if k == 1:      # the third write comes after the second has crossed
                await ctx.tick().repeat(60)
        await ctx.tick().repeat(60)
        done.append(True)

    def watch(domain, sniffer):
        async def bench(ctx):
            while not done:
                value = ctx.get(sniffer.seq_offset)
                if not seen[domain] or seen[domain][-1] != value:
                    seen[domain].append(value)
                await ctx.tick(domain)
        return bench

    sim = Simulator(dut)
    sim.add_clock(LINK_PERIOD, domain="sync")
    sim.add_clock(MII_PERIOD, domain="phy_rx")
    sim.add_clock(MII_PERIOD * TX_CLOCK_RATIO, domain="phy_tx", phase=0.37 * MII_PERIOD)
    sim.add_testbench(host)
    sim.add_testbench(watch("phy_rx", dut.rx_sniffer), background=True)
    sim.add_testbench(watch("phy_tx", dut.tx_sniffer), background=True)
    sim.run()
    for domain, values in seen.items():
        assert values == [TRAFFIC_SEQ_OFFSET, *writes], (domain, [hex(v) for v in values])
