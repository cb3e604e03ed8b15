"""The Ethernet streamer and receiver (gateware/eth/mac.py) against the reference model
(gateware/eth/model.py), and both against scapy, a parser nobody here wrote."""

import random

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from latscope.capture.link.transport import encode_frame
from latscope.gateware.eth import model
from latscope.gateware.eth.mac import EthReceiver, UdpStreamer
from latscope.gateware.protocol import FrameType
from latscope.gateware.stream_bench import until_high

scapy_all = pytest.importorskip("scapy.all", reason="scapy (pip install scapy) checks the frames")

NET = model.DEFAULT_NET
HOST = dict(mac=0x0A0B0C0D0E0F, ip=model.parse_ipv4("192.168.1.10"), port=50123)


def _wrap(dut):
    m = Module()
    m.domains.eth = ClockDomain()
    m.submodules.dut = dut
    return m


def _stream_frames(rng, n):
    """Stream frames of random sizes, as the framer would send them."""
    out = []
    for i in range(n):
        size = rng.choice([19, 31, 200, 600, rng.randrange(0, 1024)])
        out.append(encode_frame(FrameType.EVENTS, i, bytes(rng.randrange(256)
                                                            for _ in range(size))))
    return out


def _set_net(ctx, dut):
    ctx.set(dut.net.mac, NET.mac)
    ctx.set(dut.net.ip, NET.ip)
    ctx.set(dut.net.port, NET.port)


def test_streamer_datagrams_match_model_and_scapy():
    rng = random.Random(12)
    frames = _stream_frames(rng, 14)
    idle = 64
    dut = UdpStreamer(max_frame=1046, idle_cycles=idle)
    sim = Simulator(_wrap(dut))
    sim.add_clock(8e-9, domain="eth")
    wire = []           # (en, byte) per cycle

    async def feeder(ctx):
        _set_net(ctx, dut)
        ctx.set(dut.dest.valid, 1)
        ctx.set(dut.dest.mac, HOST["mac"])
        ctx.set(dut.dest.ip, HOST["ip"])
        ctx.set(dut.dest.port, HOST["port"])
        for i, frame in enumerate(frames):
            for byte in frame:
                ctx.set(dut.stream_in.valid, 1)
                ctx.set(dut.stream_in.payload, byte)
                await until_high(ctx, dut.stream_in.ready, "eth")
                if rng.random() < 0.2:        # the framer's bytes arrive with gaps
                    ctx.set(dut.stream_in.valid, 0)
                    await ctx.tick("eth").repeat(rng.randrange(1, 4))
            ctx.set(dut.stream_in.valid, 0)
            if i % 5 == 4:                    # a pause: the pending datagram leaves
                await ctx.tick("eth").repeat(idle + 10)

    async def monitor(ctx):
        async for _clk, _rst, en, byte in ctx.tick("eth").sample(dut.tx.en, dut.tx.data):
            wire.append((en, byte))

    sim.add_testbench(feeder)
    sim.add_process(monitor)
    sim.run_until(8e-9 * 30_000)

    # model: the same bytes and pauses through the reference packer
    packer = model.DatagramPacker(max_frame=1046)
    expected = []
    for i, frame in enumerate(frames):
        expected += packer.feed(frame)
        if i % 5 == 4:
            expected += packer.idle()
    expected += packer.idle()
    got, cur, gaps, run = [], bytearray(), [], 0
    for en, byte in wire:
        if en:
            if not cur and got:
                gaps.append(run)
            cur.append(byte)
            run = 0
        else:
            run += 1
            if cur:
                got.append(bytes(cur))
                cur = bytearray()
    assert not cur
    assert len(got) == len(expected) >= 4
    assert min(gaps) >= 12                   # inter-frame gap, 802.3 §4.4.2
    for ident, (frame, payload) in enumerate(zip(got, expected, strict=True)):
        assert frame[:8] == model.PREAMBLE
        want = model.udp_frame(src_mac=NET.mac, dst_mac=HOST["mac"], src_ip=NET.ip,
                               dst_ip=HOST["ip"], src_port=NET.port, dst_port=HOST["port"],
                               payload=payload, ident=ident)
        assert frame[8:] == want
        pkt = scapy_all.Ether(frame[8:-4])
        assert pkt.dst == model.mac_text(HOST["mac"]) and pkt.src == model.mac_text(NET.mac)
        ip, udp = pkt[scapy_all.IP], pkt[scapy_all.UDP]
        assert (ip.src, ip.dst) == (model.ipv4_text(NET.ip), model.ipv4_text(HOST["ip"]))
        assert (udp.sport, udp.dport) == (NET.port, HOST["port"])
        assert bytes(udp.payload) == payload and udp.len == 8 + len(payload)
        assert ip.len == 28 + len(payload)
        # scapy recomputes the header checksum when the field is deleted: it must agree
        recomputed = scapy_all.IP(bytes(ip))
        del recomputed.chksum
        assert scapy_all.IP(bytes(recomputed)).chksum == ip.chksum
        assert len(frame) - 8 >= 64
    # every datagram holds whole stream frames, all of them in order
    assert b"".join(expected) == b"".join(frames)


def test_streamer_drops_without_destination_and_answers_arp():
    dut = UdpStreamer(max_frame=1046, idle_cycles=16)
    sim = Simulator(_wrap(dut))
    sim.add_clock(8e-9, domain="eth")
    wire = []
    frame = encode_frame(FrameType.HEARTBEAT, 0, bytes(31))

    async def bench(ctx):
        _set_net(ctx, dut)
        for byte in frame:
            ctx.set(dut.stream_in.valid, 1)
            ctx.set(dut.stream_in.payload, byte)
            await until_high(ctx, dut.stream_in.ready, "eth")
        ctx.set(dut.stream_in.valid, 0)
        await ctx.tick("eth").repeat(40)
        assert ctx.get(dut.dropped) == 1 and ctx.get(dut.sent) == 0
        ctx.set(dut.arp.valid, 1)
        ctx.set(dut.arp.mac, HOST["mac"])
        ctx.set(dut.arp.ip, HOST["ip"])
        await until_high(ctx, dut.arp_done, "eth")
        ctx.set(dut.arp.valid, 0)
        await ctx.tick("eth").repeat(120)

    async def monitor(ctx):
        async for _clk, _rst, en, byte in ctx.tick("eth").sample(dut.tx.en, dut.tx.data):
            if en:
                wire.append(byte)

    sim.add_testbench(bench)
    sim.add_process(monitor)
    sim.run_until(8e-9 * 400)
    want = model.arp_reply(net=NET, tha=HOST["mac"], tpa=HOST["ip"])
    assert bytes(wire) == model.PREAMBLE + want
    arp = scapy_all.Ether(want)[scapy_all.ARP]
    assert arp.op == 2 and arp.psrc == model.ipv4_text(NET.ip)
    assert arp.hwsrc == model.mac_text(NET.mac) and arp.pdst == model.ipv4_text(HOST["ip"])


def _scapy_udp(payload, *, dport=NET.port, dst=None, bad_fcs=False):
    pkt = (scapy_all.Ether(src=model.mac_text(HOST["mac"]), dst=dst or model.mac_text(NET.mac))
           / scapy_all.IP(src=model.ipv4_text(HOST["ip"]), dst=model.ipv4_text(NET.ip))
           / scapy_all.UDP(sport=HOST["port"], dport=dport) / scapy_all.Raw(payload))
    raw = bytes(pkt)
    raw += bytes(max(0, 60 - len(raw)))
    fcs = model.fcs(raw)
    if bad_fcs:
        fcs = bytes([fcs[0] ^ 1]) + fcs[1:]
    return raw + fcs


def test_receiver_commands_arp_and_rejections():
    dut = EthReceiver()
    sim = Simulator(_wrap(dut))
    sim.add_clock(8e-9, domain="eth")
    cmd = encode_frame(FrameType.COMMAND, 3, b"\x01")
    arp = (scapy_all.Ether(src=model.mac_text(HOST["mac"]), dst="ff:ff:ff:ff:ff:ff")
           / scapy_all.ARP(op=1, hwsrc=model.mac_text(HOST["mac"]),
                           psrc=model.ipv4_text(HOST["ip"]), pdst=model.ipv4_text(NET.ip)))
    arp_raw = bytes(arp) + bytes(max(0, 60 - len(bytes(arp))))
    arp_raw += model.fcs(arp_raw)
    frames = [
        ("bad fcs", _scapy_udp(cmd, bad_fcs=True)),
        ("other port", _scapy_udp(cmd, dport=NET.port + 1)),
        ("other mac", _scapy_udp(cmd, dst="02:00:00:00:00:99")),
        ("command", _scapy_udp(cmd)),
        ("arp", arp_raw),
        ("long command", _scapy_udp(bytes(range(40)))),
    ]
    received = bytearray()

    async def bench(ctx):
        _set_net(ctx, dut)
        for _name, raw in frames:
            for i, byte in enumerate(raw):
                ctx.set(dut.rx.valid, 1)
                ctx.set(dut.rx.payload, {"data": byte, "last": int(i == len(raw) - 1)})
                await ctx.tick("eth")
            ctx.set(dut.rx.valid, 0)
            await ctx.tick("eth").repeat(80)
        assert ctx.get(dut.bad) == 1
        assert ctx.get(dut.good) == 3
        assert ctx.get(dut.dest.valid) == 1
        assert ctx.get(dut.dest.mac) == HOST["mac"] and ctx.get(dut.dest.ip) == HOST["ip"]
        assert ctx.get(dut.dest.port) == HOST["port"]
        assert ctx.get(dut.arp.valid) == 1
        assert ctx.get(dut.arp.mac) == HOST["mac"] and ctx.get(dut.arp.ip) == HOST["ip"]

    async def drain(ctx):
        ctx.set(dut.commands.ready, 1)
        async for _clk, _rst, valid, byte in ctx.tick("eth").sample(dut.commands.valid,
                                                       dut.commands.payload):
            if valid:
                received.extend([byte])

    sim.add_testbench(bench)
    sim.add_process(drain)
    sim.run_until(8e-9 * 1400)
    assert bytes(received) == cmd + bytes(range(40))


def test_constructor_messages():
    with pytest.raises(TypeError, match=r"Longest stream frame must be an integer in 10\.\.1472"):
        UdpStreamer(max_frame=2000)
    with pytest.raises(TypeError, match="Buffer size must be a power of two >= 1472"):
        UdpStreamer(max_frame=1046, buffer_bytes=1000)
    with pytest.raises(TypeError, match="Command buffer must be a power of two >= 16"):
        EthReceiver(max_command=10)
