"""The instrument's Ethernet link on the host: ``udp://HOST[:PORT]``, and a simulated one.

:class:`UdpTransport` is a :class:`~latscope.capture.link.transport.Transport` over a connected UDP
socket: each ``write`` is one command datagram, ``read`` returns the payloads of the datagrams
received, in order. Datagrams hold whole stream frames (``docs/ethernet.md``), so a datagram the
network loses takes whole frames with it, and the stream decoder counts exactly the events they
held from the frames' sequence numbers and event indices: it is reported as link loss, never
silently. The socket's receive buffer is enlarged for bursts (the kernel may cap it: see
:attr:`UdpTransport.rcvbuf`).

:class:`UdpServer` serves a simulated instrument (an engine of :mod:`latscope.capture.sim.simbench`)
on a UDP socket bound to 127.0.0.1, cutting its bytes into datagrams with the gateware's own rule
(:class:`~latscope.gateware.eth.model.DatagramPacker`) and sending them to the host that sent the
last command, as the board does; so ``latscope capture --port udp://127.0.0.1:PORT`` runs the
real host path.
"""

import errno
import select
import socket
import threading
import time

from latscope import LatscopeError
from latscope.capture.link.transport import Transport, TransportClosed
from latscope.gateware.eth.model import DatagramPacker

__all__ = ["DEFAULT_PORT", "RCVBUF_BYTES", "parse_udp_url", "UdpTransport", "UdpServer"]

#: The instrument's UDP port after reset (docs/boards.md); ``udp://HOST`` means this port.
DEFAULT_PORT = 7438
#: Receive buffer asked for: ~70 ms of a full gigabit link, far more than a burst of the FIFO.
RCVBUF_BYTES = 8 << 20
_MAX_DATAGRAM = 65535
#: Bytes received per read at most (plus one datagram): a few hundred of the board's datagrams.
_RX_BATCH = 1 << 20


def parse_udp_url(spec):
    """``"udp://HOST[:PORT]"`` -> ``(host, port)``; :class:`LatscopeError` with one clear line
    otherwise."""
    if not isinstance(spec, str) or not spec.startswith("udp://"):
        raise LatscopeError(f"not a UDP address (udp://HOST[:PORT]): {spec!r}")
    rest = spec[len("udp://"):].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = rest, str(DEFAULT_PORT)
    if not host:
        raise LatscopeError(f"{spec!r} names no host; use udp://HOST[:PORT], e.g. "
                            f"udp://192.168.1.50:{DEFAULT_PORT}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise LatscopeError(f"UDP port in {spec!r} must be a number 1..65535")
    return host, int(port)


class UdpTransport(Transport):
    """A connected UDP socket to the instrument.

    Parameters
    ----------
    host : str
        Instrument address (IPv4 or a name).
    port : int
        Its UDP port.
    rcvbuf : int
        Receive buffer size to ask for, bytes.

    Attributes
    ----------
    rcvbuf : int
        Receive buffer the kernel granted (Linux reports twice the usable size, and caps
        requests at ``net.core.rmem_max`` unless run as root).
    datagrams, bytes_in : int
        Datagrams and payload bytes received.
    """

    def __init__(self, host, port=DEFAULT_PORT, *, rcvbuf=RCVBUF_BYTES):
        self.name = f"udp://{host}:{port}"
        try:
            infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
        except (socket.gaierror, UnicodeError) as error:
            raise LatscopeError(f"cannot resolve {host!r} for {self.name}: {error}") from None
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for option in (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF):
                if option is None:
                    continue
                try:
                    sock.setsockopt(socket.SOL_SOCKET, option, rcvbuf)
                    break
                except PermissionError:
                    continue
            self.rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            sock.connect(infos[0][4])     # the kernel then passes only the instrument's datagrams
        except OSError as error:
            sock.close()
            raise LatscopeError(f"cannot open {self.name}: {error}") from None
        sock.setblocking(False)
        self._sock = sock
        # Datagrams are received straight into one preallocated buffer, as many as are waiting
        # per call (one copy out, no bytes object per datagram).
        self._rx = bytearray(_RX_BATCH + _MAX_DATAGRAM)
        self._rx_view = memoryview(self._rx)
        self._pending = bytearray()
        self.datagrams = 0
        self.bytes_in = 0

    @classmethod
    def from_url(cls, spec, **kwargs):
        host, port = parse_udp_url(spec)
        return cls(host, port, **kwargs)

    def _closed(self, error=None):
        if self._sock is None:
            return TransportClosed(f"{self.name} was closed by this program")
        if isinstance(error, ConnectionRefusedError):
            return TransportClosed(f"{self.name}: nothing answers there (ICMP port unreachable)")
        return TransportClosed(f"{self.name}: {error}")

    def read(self, max_bytes, timeout):
        if self._sock is None:
            raise self._closed()
        if self._pending:       # the tail of a datagram that crossed max_bytes last time
            out = bytes(self._pending[:max_bytes])
            del self._pending[:max_bytes]
            return out
        try:
            ready, _, _ = select.select([self._sock], [], [], max(0.0, timeout))
        except OSError as error:
            raise self._closed(error) from None
        if not ready:
            return b""
        view, pos = self._rx_view, 0
        while pos < max_bytes and pos <= _RX_BATCH:
            try:
                got = self._sock.recv_into(view[pos:], _MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as error:
                raise self._closed(error) from None
            self.datagrams += 1
            self.bytes_in += got
            pos += got
        if pos > max_bytes:
            self._pending += view[max_bytes:pos]
        return bytes(view[:min(pos, max_bytes)])

    def write(self, data):
        if self._sock is None:
            raise self._closed()
        try:
            self._sock.send(bytes(data))
        except BlockingIOError:
            select.select([], [self._sock], [], 1.0)
            self._sock.send(bytes(data))
        except OSError as error:
            raise self._closed(error) from None

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class UdpServer:
    """Serve a simulated instrument's bytes as the board's UDP datagrams on 127.0.0.1.

    Parameters
    ----------
    engine : object
        As for :class:`~latscope.capture.sim.ptyserve.PtyServer`: ``host_bytes(data)``,
        ``read(max_bytes, timeout)``, ``close()``.
    port : int
        Port to bind on 127.0.0.1 (0: any free port; see :attr:`url`).
    max_frame : int
        Longest stream frame the engine's framer emits (sets the packing threshold).
    drop : callable or None
        Test hook: ``drop(index)`` true drops the addressed datagram with that index (0, 1, ...),
        as a network losing it would.
    rate : float or None
        Largest payload byte rate sent, bytes/s; ``None`` for as fast as the engine produces.

    Attributes
    ----------
    url : str
        ``udp://127.0.0.1:PORT``, for ``--port``.
    sent, dropped, unaddressed : int
        Datagrams sent, dropped by ``drop``, and dropped because no host had sent a command yet
        (the board does the same).
    """

    def __init__(self, engine, *, port=0, max_frame=1046, drop=None, rate=None):
        self.engine = engine
        self.packer = DatagramPacker(max_frame=max_frame)
        self.drop, self.rate = drop, rate
        self.sent = self.dropped = self.unaddressed = 0
        self.bytes_out = self.bytes_in = 0
        self.error = None
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.bind(("127.0.0.1", port))
        except OSError as error:
            self._sock.close()
            raise LatscopeError(f"cannot bind 127.0.0.1:{port}: {error}") from None
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.port = self._sock.getsockname()[1]
        self.url = f"udp://127.0.0.1:{self.port}"
        self._peer = None
        self._index = 0
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="udpserve", daemon=True)
        self._thread.start()

    def _send(self, payloads, started):
        for payload in payloads:
            if self._peer is None:
                self.unaddressed += 1
                continue
            index, self._index = self._index, self._index + 1
            if self.drop is not None and self.drop(index):
                self.dropped += 1
                continue
            if self.rate is not None:
                ahead = self.bytes_out / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            while True:
                try:
                    self._sock.sendto(payload, self._peer)
                    break
                except BlockingIOError:
                    select.select([], [self._sock], [], 0.01)
                except ConnectionRefusedError:   # the host's socket is gone: as a cable pulled
                    break
            self.sent += 1
            self.bytes_out += len(payload)

    def _serve(self):
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([self._sock], [], [], 0)
                if readable:
                    try:
                        data, peer = self._sock.recvfrom(_MAX_DATAGRAM)
                    except OSError as error:
                        if error.errno not in (errno.ECONNREFUSED, errno.EAGAIN):
                            raise
                        data = b""
                    if data:
                        self._peer = peer          # the board's rule: reply to the last commander
                        self.bytes_in += len(data)
                        self.engine.host_bytes(data)
                data = self.engine.read(1 << 14, timeout=0 if readable else 0.002)
                if data:
                    self._send(self.packer.feed(data), started)
                else:
                    self._send(self.packer.idle(), started)
        except BaseException as error:   # noqa: BLE001 - reported through .error and close()
            self.error = error

    def close(self):
        """Stop serving, close the socket and the engine."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(10)
        self._sock.close()
        self.engine.close()
        if self.error is not None:
            raise LatscopeError(f"the simulated instrument failed: {self.error!r}") from self.error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
