"""The Ethernet link on the host: udp:// addresses, UdpTransport against the simulated bench's
UdpServer on a real socket (127.0.0.1 only), datagram loss reported as link loss, and
``latscope capture --port udp://127.0.0.1:PORT`` end to end."""

import time

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.link import open_port, session
from latscope.capture.link.transport import (
    EmulatedInstrument,
    SerialTransport,
    TransportClosed,
)
from latscope.capture.link.udp import DEFAULT_PORT, UdpServer, UdpTransport, parse_udp_url
from latscope.capture.sim import simbench as sb
from latscope.gateware.eth.model import DatagramPacker, stream_frame_lengths


def test_udp_urls():
    assert parse_udp_url("udp://127.0.0.1:5000") == ("127.0.0.1", 5000)
    assert parse_udp_url("udp://127.0.0.1") == ("127.0.0.1", DEFAULT_PORT)
    for bad, message in [("udp://", "names no host"), ("udp://127.0.0.1:0", "1..65535"),
                         ("udp://127.0.0.1:x", "1..65535"), ("tcp://x", "not a UDP address")]:
        with pytest.raises(LatscopeError, match=message):
            parse_udp_url(bad)
    with pytest.raises(LatscopeError, match="cannot resolve"):
        UdpTransport("no-such-host.invalid", 5000)


def test_open_port_chooses_the_transport():
    with open_port("udp://127.0.0.1:9") as transport:
        assert isinstance(transport, UdpTransport)
        assert transport.rcvbuf >= 200_000          # at least Linux's default was granted
    with pytest.raises(LatscopeError, match="cannot open serial port"):
        open_port("/dev/no-such-tty")
    assert SerialTransport is not None


def test_unanswered_port_is_a_closed_link():
    with UdpTransport("127.0.0.1", 9) as transport:     # discard port: nothing listens here
        transport.write(b"\x00")
        with pytest.raises(TransportClosed, match="nothing answers"):
            for _ in range(50):
                transport.read(100, 0.02)


def test_packer_model_keeps_whole_frames():
    from latscope.capture.link.transport import encode_frame
    frames = [encode_frame(1, i, bytes(n)) for i, n in enumerate([5, 1000, 300, 40, 1024, 0])]
    packer = DatagramPacker(max_frame=1046)
    out = packer.feed(b"".join(frames)) + packer.idle()
    assert b"".join(out) == b"".join(frames)
    for payload in out:
        assert sum(stream_frame_lengths(payload)) == len(payload) <= 1472
    assert len(out) >= 2
    with pytest.raises(ValueError, match="Longest stream frame"):
        DatagramPacker(max_frame=5)


def _capture_over_udp(packets, *, drop=None, seed=5):
    run = sb.simulate("gem-64", packets, seed=seed)
    engine = sb.open_engine(run, "model")
    server = UdpServer(engine, drop=drop)
    transport = UdpTransport.from_url(server.url)
    got = []
    try:
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        assert identity["tick_hz"] == run.timing.tick_hz
        session.configure(instrument, session.CaptureConfig(), identity)
        instrument.arm()
        start = time.monotonic()
        while time.monotonic() - start < 60:
            got += instrument.read(0.1)
            seen = sum(len(r.time) for r in got)
            lost = sum(loss.lost for r in got for loss in r.losses)
            if seen + lost >= run.n_events:
                break
    finally:
        transport.close()
        server.close()
    return run, engine, server, transport, got


def test_ground_truth_recovered_over_udp():
    run, engine, server, transport, got = _capture_over_udp(300)
    time_ = np.concatenate([r.time for r in got])
    channel = np.concatenate([r.channel for r in got])
    rising = np.concatenate([r.rising for r in got])
    assert not [loss for r in got for loss in r.losses]
    result = sb.compare_to_truth(time_, channel, rising, run.truth, tolerance_ticks=1)
    assert result["ok"] and result["missing"] == 0 and result["extra"] == 0, result
    assert server.dropped == 0 and transport.datagrams <= server.sent   # heartbeats may follow


def test_lost_datagrams_are_link_loss_with_exact_counts():
    dropped = {12, 13, 20}        # after the replies to the set-up commands (~8 datagrams)
    run, engine, server, transport, got = _capture_over_udp(600, drop=dropped.__contains__)
    assert server.dropped == len(dropped)
    losses = [loss for r in got for loss in r.losses]
    seen = sum(len(r.time) for r in got)
    assert losses and all(loss.cause == "link" for loss in losses)
    # every event is either received or counted lost: nothing vanishes silently
    assert seen + sum(loss.lost for loss in losses) == run.n_events
    assert seen < run.n_events


def test_latscope_capture_over_udp_port(tmp_path, capsys):
    """``latscope capture --port udp://127.0.0.1:PORT``: the real CLI and host path."""
    from latscope import cli
    from latscope.capture.files import capfile
    run = sb.simulate("el-dm-64", 50, seed=2)
    server = UdpServer(sb.open_engine(run, "model"))
    out = tmp_path / "udp.lsc"
    try:
        status = cli.main(["capture", "--port", server.url, "--events", str(run.n_events),
                           "-o", str(out), "--quiet", "--json"])
    finally:
        server.close()
    captured = capsys.readouterr()
    assert status == 0, captured.err
    with capfile.open_capture(out) as cap:
        events = cap.events()
        assert len(events.time) == run.n_events
        check = sb.compare_to_truth(events.time, events.channel, events.rising, run.truth)
        assert cap.metadata["port"] == server.url
        del events
    assert check["ok"] and check["max_error"] == 0


def test_latscope_capture_sim_link_udp(tmp_path, capsys):
    from latscope import cli
    from latscope.capture.files import capfile
    out = tmp_path / "sim-udp.lsc"
    status = cli.main(["capture", "--sim", "el-dm-64", "--packets", "30", "--sim-engine",
                       "model", "--sim-link", "udp", "-o", str(out), "--quiet"])
    assert status == 0, capsys.readouterr().err
    with capfile.open_capture(out) as cap:
        assert len(cap.events().time) == 30 * 14


class _EmulatedEngine:
    """An :class:`EmulatedInstrument` as a UdpServer engine (``host_bytes``, ``read``)."""

    def __init__(self, instrument):
        self.instrument, self._out = instrument, bytearray()

    def host_bytes(self, data):
        self._out += self.instrument.handle(data)

    def read(self, max_bytes, timeout=0.0):
        if not self._out:
            self._out += self.instrument.next_frames(4)
        data, self._out = bytes(self._out[:max_bytes]), self._out[max_bytes:]
        return data

    def close(self):
        pass


@pytest.mark.parametrize("link,speed,full,refused", [
    (True, 100, False, "not 100 Mb/s half duplex"),
    (True, 10, True, "not 10 Mb/s full duplex"),
    (True, 1000, False, "not 1000 Mb/s half duplex"),
    (False, 1000, True, "not down"),
    (True, 1000, True, None),
])
def test_capture_over_udp_refuses_a_link_that_is_not_gigabit(tmp_path, capsys, link, speed, full,
                                                             refused):
    """``latscope capture --port udp://...`` asks STATUS after IDENTIFY: an instrument reporting
    any link but 1000 Mb/s full duplex is refused with one line, exit 2, and no file."""
    from latscope import cli
    time_ = np.arange(40, dtype=np.int64) * 50
    emu = EmulatedInstrument(time_, np.zeros(40, np.uint8), np.arange(40) % 2 == 0,
                             eth_link=(link, speed, full))
    out = tmp_path / "eth.lsc"
    with UdpServer(_EmulatedEngine(emu)) as server:
        status = cli.main(["capture", "--port", server.url, "--events", "40", "-o", str(out),
                           "--quiet"])
    err = capsys.readouterr().err
    if refused is None:
        assert status == 0, err
        assert out.exists()
        return
    assert status == 2 and not out.exists()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"Ethernet link must be 1000 Mb/s full duplex, {refused}" in err
    assert not emu.armed


def test_bad_udp_port_is_one_line(capsys):
    from latscope import cli
    status = cli.main(["capture", "--port", "udp://127.0.0.1:99999", "-o", "/tmp/never.lsc"])
    err = capsys.readouterr().err
    assert status != 0 and "1..65535" in err and "Traceback" not in err


@pytest.mark.slow
def test_latscope_selftest_over_udp_port(capsys):
    """``latscope selftest --port udp://127.0.0.1:PORT`` on the real gateware (Verilator)."""
    import json
    import shutil
    if shutil.which("g++") is None:
        pytest.skip("needs a C++ compiler (g++) for the Verilator model")
    from latscope import cli
    from latscope.capture.sim.selftest_bench import SelftestBenchEngine
    server = UdpServer(SelftestBenchEngine())
    try:
        status = cli.main(["selftest", "--port", server.url, "--high", "101", "--low", "99",
                           "--edges", "40", "--json"])
    finally:
        server.close()
    out = capsys.readouterr()
    assert status == 0, out.err
    result = json.loads(out.out)
    assert result["ok"] and result["pattern"]["lost"] == 0
    assert all(c["edges"] == 40 and c["errors"] == 0 for c in result["pattern"]["channels"])


def test_reads_keep_datagram_order_across_max_bytes():
    # Several waiting datagrams come back from one read, in order; a datagram crossing
    # max_bytes is split, its tail returned by the next read before anything newer.
    import socket
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    rx = UdpTransport("127.0.0.1", tx.getsockname()[1])
    try:
        tx.connect(rx._sock.getsockname())
        sent = [bytes([i]) * 100 for i in range(5)]
        for payload in sent[:3]:
            tx.send(payload)
        time.sleep(0.05)
        got = [rx.read(150, 1.0), rx.read(1000, 1.0)]
        assert got[0] == sent[0] + sent[1][:50] and got[1] == sent[1][50:]
        for payload in sent[3:]:
            tx.send(payload)
        time.sleep(0.05)
        rest = b""
        while len(rest) < 300:
            chunk = rx.read(1 << 20, 1.0)
            assert chunk
            rest += chunk
        assert rest == b"".join(sent[2:])
        assert rx.datagrams == 5 and rx.bytes_in == 500
    finally:
        rx.close()
        tx.close()
