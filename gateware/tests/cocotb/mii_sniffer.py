"""cocotb test module (run by ``gateware/tests/test_sniffer_cocotb.py``, not by pytest itself):
cocotbext-eth's ``MiiSource`` (an MII model nobody here wrote) drives the exported
``FrameSniffer`` Verilog in Verilator; every entry the sniffer offers is compared with the
reference parser on the bytes the model sent (``GmiiFrame.from_payload`` adds its own padding and
FCS)."""

import random
import zlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer
from cocotbext.eth import GmiiFrame, MiiSource

from latscope.gateware.model_sniffer import FLAG_FIELDS, FRAME_FIELDS, parse_frame
from latscope.gateware.protocol import FrameRecord


def frames(n, seed=7):
    """``n`` random frames as ``(GmiiFrame to send, the frame's bytes SFD to FCS)``."""
    import scapy.all as s
    rng = random.Random(seed)
    out = []
    for i in range(n):
        payload = b"LT\x00\x01" + (1000 + i).to_bytes(4, "big") + bytes(8 + rng.randrange(40))
        eth = s.Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        kind = rng.choice(["udp", "vlan", "v6", "bad", "other"])
        if kind == "other":         # background UDP: a sequence number's room, not the magic
            payload = b"MT" + bytes(rng.randrange(256) for _ in range(len(payload) - 2))
        if kind == "vlan":
            pkt = eth / s.Dot1Q(prio=rng.randrange(8), vlan=rng.randrange(4096)) / \
                s.IP(dst="192.0.2.3") / s.UDP(sport=4242, dport=4242) / payload
        elif kind == "v6":
            pkt = eth / s.IPv6(dst="2001:db8::3") / s.UDP(sport=1, dport=2) / payload
        else:
            pkt = eth / s.IP(dst="192.0.2.3") / s.UDP(sport=4242, dport=4242) / payload
        raw = bytes(pkt)
        raw += bytes(max(0, 60 - len(raw)))
        if kind == "bad":           # a wrong FCS: raw bytes, preamble and SFD included
            body = raw + (zlib.crc32(raw) ^ 0xFF).to_bytes(4, "little")
            out.append((GmiiFrame(b"\x55" * 7 + b"\xd5" + body), body))
        else:                       # cocotbext-eth pads and computes the FCS itself
            out.append((GmiiFrame.from_payload(raw), raw + zlib.crc32(raw).to_bytes(4, "little")))
    return out


@cocotb.test()
async def mii_source_frames_match_reference(dut):
    cocotb.start_soon(Clock(dut.clk, 40, unit="ns").start())
    dut.rst.value = 1
    dut.seq_offset.value = 4
    dut.er.value = 0
    await Timer(200, unit="ns")
    dut.rst.value = 0
    source = MiiSource(dut.data, dut.er, dut.dv, dut.clk)
    sent = frames(40)
    got = []

    async def monitor():
        while True:
            await RisingEdge(dut.clk)
            if int(dut.frames__valid.value):
                got.append(int(dut.frames__payload.value))

    cocotb.start_soon(monitor())
    for f, _ in sent:
        await source.send(f)
    await source.wait()
    for _ in range(100):
        await RisingEdge(dut.clk)
    assert len(got) == len(sent), (len(got), len(sent))
    from amaranth.lib import data
    layout = data.Layout.cast(FrameRecord)
    for (_, body), value in zip(sent, got, strict=True):
        ref = parse_frame(body)
        rec = data.Const(layout, value)
        fields = {k: int(getattr(rec, k)) for k in FRAME_FIELDS}
        fields.update({k: int(getattr(rec.flags, k)) for k in FLAG_FIELDS})
        assert fields == ref, (body.hex(), fields, ref)
    assert sum(1 for _, body in sent if not parse_frame(body)["fcs_ok"]) > 0
    assert sum(1 for _, body in sent if parse_frame(body)["seq_valid"]) > 10
    assert sum(1 for _, body in sent if parse_frame(body)["traffic_magic"]) > 10
    assert sum(1 for _, body in sent
               if parse_frame(body)["seq_valid"] and not parse_frame(body)["traffic_magic"]) > 3
