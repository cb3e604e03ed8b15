"""Tests of the pseudo-terminal server (capture/sim/ptyserve.py), with a scripted engine."""

import os
import threading
import time

import pytest

from latscope import LatscopeError
from latscope.capture.link.transport import SerialTransport, TransportClosed
from latscope.capture.sim.ptyserve import LINK_BYTES_PER_S, QUIET_WAIT_S, PtyServer


class ScriptEngine:
    """Produces ``data`` in pieces of at most ``piece`` bytes; records what the host wrote."""

    def __init__(self, data=b"", piece=1000):
        self.data = bytearray(data)
        self.piece = piece
        self.received = bytearray()
        self.closed = False
        self.lock = threading.Lock()

    @property
    def finished(self):
        return not self.data

    def host_bytes(self, data):
        with self.lock:
            self.received += data

    def read(self, max_bytes, timeout=0.0):
        n = min(max_bytes, self.piece, len(self.data))
        out = bytes(self.data[:n])
        del self.data[:n]
        return out

    def close(self):
        self.closed = True


def _read_all(transport, n, limit=10.0):
    got = bytearray()
    start = time.monotonic()
    while len(got) < n and time.monotonic() - start < limit:
        got += transport.read(1 << 16, 0.05)
    return bytes(got)


def test_bytes_flow_both_ways_unchanged():
    payload = bytes(range(256)) * 400          # every byte value: the pty must be raw
    engine = ScriptEngine(payload)
    with PtyServer(engine) as server:
        assert server.path.startswith("/dev/pts/")
        transport = SerialTransport(server.path)
        try:
            transport.write(b"\x11\x13\x03\x04\r\n\xe7\x1a")   # XON/XOFF, ^C, ^D, CR LF
            got = _read_all(transport, len(payload))
            deadline = time.monotonic() + 5
            while len(engine.received) < 8 and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            transport.close()
    assert got == payload
    assert bytes(engine.received) == b"\x11\x13\x03\x04\r\n\xe7\x1a"
    assert server.bytes_out == len(payload) and server.bytes_in == 8
    assert engine.closed


def test_rate_limit_paces_the_link():
    # 120,000 bytes at 400,000 bytes/s take at least 0.3 s (minus the first read's slack).
    payload = b"\x55" * 120_000
    engine = ScriptEngine(payload, piece=4096)
    with PtyServer(engine, rate=400_000) as server:
        transport = SerialTransport(server.path)
        start = time.monotonic()
        got = _read_all(transport, len(payload))
        elapsed = time.monotonic() - start
        transport.close()
    assert got == payload
    assert elapsed >= 0.28
    assert LINK_BYTES_PER_S == 1_200_000     # 12 Mbaud, 10 bits per byte (8N1)


def test_closing_the_server_ends_the_capture_with_transport_closed():
    engine = ScriptEngine(b"abc")
    server = PtyServer(engine)
    transport = SerialTransport(server.path)
    try:
        assert _read_all(transport, 3) == b"abc"
        server.close()
        with pytest.raises(TransportClosed):
            for _ in range(50):
                transport.read(100, 0.05)
    finally:
        transport.close()


def test_close_when_finished_closes_the_port_after_the_last_byte():
    payload = os.urandom(50_000)
    engine = ScriptEngine(payload)
    server = PtyServer(engine, close_when_finished=True)
    transport = SerialTransport(server.path)
    got = bytearray()
    try:
        with pytest.raises(TransportClosed):
            for _ in range(400):
                got += transport.read(1 << 16, 0.05)
    finally:
        transport.close()
        server.close()
    assert bytes(got) == payload
    assert server.wait(1)


def test_arguments_are_checked():
    with pytest.raises(LatscopeError, match=r"byte rate must be positive or None, not 0"):
        PtyServer(ScriptEngine(), rate=0)
    with pytest.raises(ValueError, match=r"Chunk size must be a positive integer, not 0"):
        PtyServer(ScriptEngine(), chunk=0)


def test_an_engine_failure_is_reported():
    class Broken(ScriptEngine):
        def read(self, max_bytes, timeout=0.0):
            raise RuntimeError("simulator crashed")
    server = PtyServer(Broken())
    assert server.wait(5)
    with pytest.raises(LatscopeError,
                       match=r"the simulated instrument failed: .*simulator crashed"):
        server.close()


class WaitingEngine(ScriptEngine):
    """An engine with nothing to send that waits ``timeout`` for it, as the simulators do;
    counts the reads."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def read(self, max_bytes, timeout=0.0):
        self.reads += 1
        time.sleep(timeout)
        return b""


def test_a_quiet_server_waits_on_the_engine_and_still_hears_the_host():
    """With the host quiet the server waits on the engine in steps of QUIET_WAIT_S (each
    wake-up costs CPU), not in a few-millisecond poll; a command then still reaches the engine
    within about that step."""
    engine = WaitingEngine()
    with PtyServer(engine) as server:
        transport = SerialTransport(server.path)
        try:
            time.sleep(0.2)
            before = engine.reads
            time.sleep(1.0)
            reads = engine.reads - before
            sent = time.monotonic()
            transport.write(b"\x01\x02")
            while len(engine.received) < 2 and time.monotonic() - sent < 5:
                time.sleep(0.001)
            delay = time.monotonic() - sent
        finally:
            transport.close()
    assert reads <= 1.5 / QUIET_WAIT_S        # a busy machine makes fewer, never more
    assert bytes(engine.received) == b"\x01\x02" and delay < 0.5
