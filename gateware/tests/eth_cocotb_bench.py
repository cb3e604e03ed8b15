"""cocotb testbench (run by test_eth_cocotb.py, not collected by pytest): the instrument's RGMII
pins against cocotbext-eth's RgmiiSource/RgmiiSink, every frame parsed by scapy.

Round trips over Ethernet alone: ARP request -> reply; IDENTIFY, SET_NET, STATUS, SELFTEST and
ARM commands -> replies and events in UDP datagrams; then a command over the UART moves the
stream back to the UART.
"""

import zlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer, with_timeout
from cocotbext.eth import GmiiFrame, RgmiiSink, RgmiiSource
from scapy.all import ARP, IP, UDP, Ether, Raw

from latscope.capture.link.stream import StreamDecoder
from latscope.gateware.codec import encode_command, parse_identify
from latscope.gateware.eth import model
from latscope.gateware.protocol import Opcode, Status

NET = model.DEFAULT_NET
HOST_MAC, HOST_IP, HOST_PORT = "0a:0b:0c:0d:0e:0f", "192.168.1.10", 50123


def _with_fcs(pkt):
    raw = bytes(pkt)
    raw += bytes(max(0, 60 - len(raw)))
    return raw + zlib.crc32(raw).to_bytes(4, "little")


def _udp_to(payload, ip=NET.ip, port=NET.port, mac=NET.mac):
    return _with_fcs(Ether(src=HOST_MAC, dst=model.mac_text(mac))
                     / IP(src=HOST_IP, dst=model.ipv4_text(ip))
                     / UDP(sport=HOST_PORT, dport=port) / Raw(payload))


def udp_payload(pkt):
    """A datagram's payload without the Ethernet padding scapy keeps after it."""
    return bytes(pkt[UDP])[8:pkt[UDP].len]


class Bench:
    def __init__(self, dut):
        self.dut = dut
        self.sink = RgmiiSink(dut.txd, dut.tx_ctl, dut.tx_clk)
        self.source = RgmiiSource(dut.rxd, dut.rx_ctl, dut.eth_rx_clk)
        self.decoder = StreamDecoder()
        self.results = []       # DecodeResults of every datagram's payload, in order
        self.frames = []        # every Ethernet frame received (FCS stripped), all checked

    async def start(self):
        dut = self.dut
        resets = (dut.rst, dut.capture_rst, dut.eth_rst, dut.eth90_rst, dut.eth_rx_rst)
        for rst in resets:
            rst.value = 1
        dut.samples.value = 0
        dut.uart_rx__valid.value = 0
        dut.uart_tx__ready.value = 1
        cocotb.start_soon(Clock(dut.clk, 20, unit="ns").start())
        cocotb.start_soon(Clock(dut.capture_clk, 6, unit="ns").start())
        cocotb.start_soon(Clock(dut.eth_clk, 8, unit="ns").start())
        cocotb.start_soon(Clock(dut.eth_rx_clk, 8, unit="ns").start())   # the PHY's own clock
        await Timer(2, unit="ns")                                       # 90 degrees later
        cocotb.start_soon(Clock(dut.eth90_clk, 8, unit="ns").start())
        await Timer(200, unit="ns")
        for rst in resets:
            rst.value = 0
        await ClockCycles(dut.clk, 10)

    async def recv(self, timeout_us=300):
        """The next frame from the instrument, checked: FCS, minimum size, and for IPv4 the
        header checksum (recomputed by scapy) and the IP and UDP lengths."""
        frame = await with_timeout(self.sink.recv(), timeout_us, "us")
        assert frame.check_fcs(), "bad FCS"
        data = bytes(frame.get_payload())      # after the SFD, FCS removed
        assert len(data) >= 60
        pkt = Ether(data)
        if IP in pkt:
            ip = pkt[IP]
            fresh = IP(bytes(ip))
            del fresh.chksum
            assert IP(bytes(fresh)).chksum == ip.chksum, "bad IPv4 header checksum"
            payload = udp_payload(pkt)
            assert ip.len == 20 + pkt[UDP].len == 28 + len(payload)
            assert payload == pkt[Raw].load
            assert pkt[UDP].chksum == 0
            self.results.append(self.decoder.feed(payload))
        self.frames.append(pkt)
        return pkt

    async def send_command(self, seq, opcode, args=b"", net=NET):
        await self.source.send(GmiiFrame.from_payload(
            _udp_to(encode_command(seq, opcode, args), ip=net.ip, port=net.port,
                    mac=net.mac)[:-4]))

    async def command(self, seq, opcode, args=b"", net=NET):
        """Send a command datagram to ``net``; return its reply and the datagram holding it."""
        await self.send_command(seq, opcode, args, net)
        for _ in range(40):
            pkt = await self.recv()
            for reply in self.results[-1].replies if UDP in pkt else []:
                if reply.command_seq == seq:
                    return reply, pkt
        raise AssertionError(f"no reply to command {seq}")


@cocotb.test()
async def ethernet_round_trips(dut):
    bench = Bench(dut)
    await bench.start()

    # ARP: who has the instrument's address?
    arp = _with_fcs(Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff")
                    / ARP(op=1, hwsrc=HOST_MAC, psrc=HOST_IP, pdst=model.ipv4_text(NET.ip)))
    await bench.source.send(GmiiFrame.from_payload(arp[:-4]))
    pkt = await bench.recv()
    assert ARP in pkt and pkt[ARP].op == 2
    assert pkt.dst == HOST_MAC and pkt.src == model.mac_text(NET.mac)
    assert pkt[ARP].hwsrc == model.mac_text(NET.mac)
    assert pkt[ARP].psrc == model.ipv4_text(NET.ip) and pkt[ARP].pdst == HOST_IP

    # IDENTIFY over UDP: the reply comes back to the sender's MAC, address and port
    reply, pkt = await bench.command(1, Opcode.IDENTIFY)
    assert reply.status == Status.OK
    info = parse_identify(reply.data)
    assert info["board"] == "ecpix5" and info["channels"] == 8
    assert (pkt.dst, pkt[IP].dst, pkt[UDP].dport) == (HOST_MAC, HOST_IP, HOST_PORT)
    assert (pkt.src, pkt[IP].src, pkt[UDP].sport) == (model.mac_text(NET.mac),
                                                      model.ipv4_text(NET.ip), NET.port)
    assert dut.eth_selected.value == 1

    # SET_NET: a new address; the old one no longer answers, the new one does
    new = model.NetConfig(mac=0x024C53000077, ip=model.parse_ipv4("192.168.1.77"), port=7439)
    reply, _ = await bench.command(2, Opcode.SET_NET, new.to_bytes())
    assert reply.status == Status.OK
    await bench.send_command(3, Opcode.STATUS)          # to the old address: ignored
    await ClockCycles(dut.eth_clk, 2000)
    reply, pkt = await bench.command(4, Opcode.STATUS, net=new)
    assert reply.status == Status.OK
    assert (pkt.src, pkt[IP].src, pkt[UDP].sport) == (model.mac_text(new.mac),
                                                      "192.168.1.77", 7439)
    seen = {r.command_seq for res in bench.results for r in res.replies}
    assert 3 not in seen

    # a group (multicast) MAC is refused
    reply, _ = await bench.command(5, Opcode.SET_NET, bytes([1]) + bytes(9) + b"\x01\x00",
                                   net=new)
    assert reply.status == Status.BAD_ARGUMENT

    # events: the internal self-test square wave on channel 0 (200 ticks high, 200 low: 5 M
    # edges/s, within what this small simulated FIFO and link clock carry), armed, Ethernet only
    reply, _ = await bench.command(6, Opcode.SELFTEST, bytes([1, 1, 0, 200, 0, 200, 0]), net=new)
    assert reply.status == Status.OK
    reply, _ = await bench.command(7, Opcode.ARM, bytes([1]), net=new)
    assert reply.status == Status.OK
    events = 0
    for _ in range(60):
        await bench.recv()
        events += len(bench.results[-1].time)
        if events >= 400:
            break
    assert events >= 400
    losses = [loss for res in bench.results for loss in res.losses]
    assert not losses, losses
    assert sum(res.frames_bad + res.frames_missing for res in bench.results) == 0
    payloads = [udp_payload(p) for p in bench.frames if UDP in p]
    assert max(len(p) for p in payloads) <= model.MAX_UDP_PAYLOAD
    # datagrams hold whole stream frames, several of them when busy
    for p in payloads:
        assert sum(model.stream_frame_lengths(p)) == len(p)
    assert max(len(model.stream_frame_lengths(p)) for p in payloads) >= 2

    # the UART still works: IDENTIFY over it takes the stream back to the UART
    uart = bytearray()

    async def collect():
        while True:
            await RisingEdge(dut.clk)
            if dut.uart_tx__valid.value and dut.uart_tx__ready.value:
                uart.append(int(dut.uart_tx__payload.value))

    cocotb.start_soon(collect())
    for byte in encode_command(8, Opcode.IDENTIFY):
        dut.uart_rx__payload.value = byte
        dut.uart_rx__valid.value = 1
        await RisingEdge(dut.clk)
        while not dut.uart_rx__ready.value:
            await RisingEdge(dut.clk)
    dut.uart_rx__valid.value = 0
    uart_decoder = StreamDecoder()
    replies = []
    for _ in range(300):
        await ClockCycles(dut.clk, 100)
        replies += [r for r in uart_decoder.feed(bytes(uart)).replies if r.command_seq == 8]
        uart.clear()
        if replies:
            break
    assert replies and replies[0].status == Status.OK
    assert dut.eth_selected.value == 0
