"""Byte transports between the host and the instrument, and a pure-Python emulated instrument.

Every transport offers ``read(max_bytes, timeout) -> bytes`` (``b""`` on timeout), ``write(data)``
and ``close()``, and raises :class:`TransportClosed` when the peer is gone (a pseudo-terminal's
master closed, a USB-serial adapter unplugged, the end of a replay). The session code in
:mod:`latscope.capture.link.session` runs unchanged on all of them.

:class:`EmulatedInstrument` speaks the wire protocol of ``gateware/protocol.py`` from a list of
events, encoded independently of the host decoder, so tests cross-check the decoder against it
and run the whole capture path (pty, session, file) without Verilator. The simulated bench
(``capture/sim/simbench.py``) serves the real gateware's bytes instead.
"""

import abc
import errno
import os
import select
import struct
import threading
import time as _time
import tty
import zlib

import numpy as np

from latscope import LatscopeError
from latscope.gateware import protocol

__all__ = [
    "TransportClosed", "Transport", "SerialTransport", "ReplayTransport", "RecordingTransport",
    "FdTransport", "encode_frame", "encode_event_tokens", "EmulatedInstrument",
    "EmulatedTransport", "PtyDevice",
]

_FRAME_HEADER = struct.Struct("<HBBH")     # sync, type | version << 4, seq, length
_EVENTS_HEADER = struct.Struct("<QI")
_HEARTBEAT = struct.Struct("<QQQHBB")
_IDENTIFY = struct.Struct("<BBBBQIBBBBI")


class TransportClosed(LatscopeError):
    """The other end of the transport is gone: port closed or unplugged, replay ended."""


class Transport(abc.ABC):
    """A bidirectional byte stream to the instrument."""

    @abc.abstractmethod
    def read(self, max_bytes, timeout):
        """Return up to ``max_bytes`` bytes, waiting at most ``timeout`` seconds for the first;
        ``b""`` on timeout. Raises :class:`TransportClosed` when the peer is gone."""

    @abc.abstractmethod
    def write(self, data):
        """Send ``data``. Raises :class:`TransportClosed` when the peer is gone."""

    @abc.abstractmethod
    def close(self):
        """Release the transport; idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: The boards' serial rate in bit/s (the FT2232H's 12 Mbaud).
DEFAULT_BAUD = 12_000_000


class SerialTransport(Transport):
    """A serial port through pyserial; also opens a pseudo-terminal's slave path.

    Parameters
    ----------
    path : str
        Device, e.g. ``/dev/ttyUSB1`` or ``/dev/pts/7``.
    baud : int
        Bits per second (default 12 Mbaud, the FT2232H's rate used by the boards). Ignored by
        pseudo-terminals.
    """

    def __init__(self, path, baud=DEFAULT_BAUD):
        import serial
        if not isinstance(baud, int) or baud <= 0:
            raise ValueError(f"Baud rate must be a positive integer, not {baud!r}")
        self.path = path
        self._serial_exception = serial.SerialException
        port = serial.Serial(None, baud, timeout=0, write_timeout=5)
        port.port = path
        # pyserial flushes the input queue when it opens a port; bytes a pty server (or the
        # instrument) sent before this open would vanish silently. Keep them: the decoder
        # resynchronises on stale bytes, and the session discards events from before RESET_TIME.
        port._reset_input_buffer = lambda: None
        try:
            port.open()
        except (serial.SerialException, OSError) as error:
            raise LatscopeError(f"cannot open serial port {path}: {error}") from None
        finally:
            del port._reset_input_buffer
        self._port = port

    def read(self, max_bytes, timeout):
        port = self._port
        if port is None:
            raise TransportClosed(f"{self.path} was closed by this program")
        try:
            # wait here, not through pyserial's timeout: setting that reconfigures the port
            # (termios calls) whenever it changes, and callers vary it from read to read
            if not select.select([port.fileno()], [], [], max(0.0, timeout))[0]:
                return b""
            return port.read(max_bytes)  # the port's own timeout stays 0: what is there
        except (self._serial_exception, OSError) as error:
            raise TransportClosed(f"{self.path} closed or unplugged ({error})") from None

    def write(self, data):
        if self._port is None:
            raise TransportClosed(f"{self.path} was closed by this program")
        try:
            self._port.write(data)
        except (self._serial_exception, OSError) as error:
            raise TransportClosed(f"{self.path} closed or unplugged ({error})") from None

    def close(self):
        if self._port is not None:
            try:
                self._port.close()
            except (self._serial_exception, OSError):
                pass
            self._port = None


class FdTransport(Transport):
    """A raw file descriptor (e.g. a pty master or a pipe); the descriptor is closed on close."""

    def __init__(self, fd, name="fd"):
        self.fd, self.name = fd, name

    def read(self, max_bytes, timeout):
        if self.fd is None:
            raise TransportClosed(f"{self.name} was closed by this program")
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.fd, max_bytes)
        except OSError as error:
            if error.errno in (errno.EIO, errno.EBADF):
                raise TransportClosed(f"{self.name}: peer closed") from None
            raise
        if not data:
            raise TransportClosed(f"{self.name}: peer closed")
        return data

    def write(self, data):
        view = memoryview(data)
        while view.nbytes:
            try:
                view = view[os.write(self.fd, view):]
            except OSError as error:
                raise TransportClosed(f"{self.name}: peer closed ({error.strerror})") from None

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class ReplayTransport(Transport):
    """Replay a recorded byte stream (a file path or bytes), ``chunk`` bytes per read.

    Writes are accepted and kept in :attr:`written`; if ``responder`` is given it is called with
    each write and the bytes it returns are queued ahead of the rest of the replay (so an
    :class:`EmulatedInstrument`'s ``handle`` can answer commands). At the end of the recording
    :meth:`read` raises :class:`TransportClosed`, as an unplugged port would, unless
    ``end="timeout"``, in which case it returns ``b""`` after ``timeout``.
    """

    def __init__(self, source, chunk=4096, *, responder=None, end="closed"):
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"Chunk size must be a positive integer, not {chunk!r}")
        if end not in ("closed", "timeout"):
            raise ValueError(f"End behaviour must be 'closed' or 'timeout', not {end!r}")
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._data = bytes(source)
            self.name = "replay"
        else:
            with open(source, "rb") as f:
                self._data = f.read()
            self.name = os.fspath(source)
        self.chunk, self.end, self.responder = chunk, end, responder
        self._pos = 0
        self._queued = bytearray()
        self.written = []
        self.closed = False

    def read(self, max_bytes, timeout):
        if self.closed:
            raise TransportClosed(f"{self.name} was closed by this program")
        if self._queued:
            data = bytes(self._queued[:max_bytes])
            del self._queued[:max_bytes]
            return data
        if self._pos >= len(self._data):
            if self.end == "closed":
                raise TransportClosed(f"{self.name}: end of recording")
            _time.sleep(timeout)
            return b""
        data = self._data[self._pos:self._pos + min(self.chunk, max_bytes)]
        self._pos += len(data)
        return data

    def write(self, data):
        if self.closed:
            raise TransportClosed(f"{self.name} was closed by this program")
        self.written.append(bytes(data))
        if self.responder is not None:
            self._queued += self.responder(bytes(data)) or b""

    def close(self):
        self.closed = True


class RecordingTransport(Transport):
    """Wrap a transport and tee every byte read from it to ``path`` (for replay or debugging)."""

    def __init__(self, inner, path):
        self.inner = inner
        self._file = open(path, "wb")

    def read(self, max_bytes, timeout):
        data = self.inner.read(max_bytes, timeout)
        if data:
            self._file.write(data)
            self._file.flush()
        return data

    def write(self, data):
        self.inner.write(data)

    def close(self):
        self.inner.close()
        if not self._file.closed:
            self._file.close()


# --- reference encoder ---------------------------------------------------------------------------

def encode_frame(frame_type, seq, payload, *, version=protocol.PROTOCOL_VERSION):
    """One frame: sync, header, ``payload``, CRC-32 (``docs/stream-format.md``)."""
    if len(payload) > 0xFFFF:
        raise ValueError(f"Payload must be at most 65535 bytes, not {len(payload)}")
    head = _FRAME_HEADER.pack(protocol.SYNC_WORD, int(frame_type) | (version << 4), seq & 0xFF,
                              len(payload))
    crc = zlib.crc32(head[2:] + payload)
    return head + payload + crc.to_bytes(4, "little")


def _cont(value, count):
    return bytes(protocol.Token.CONT | ((value >> (6 * i)) & 0x3F) for i in range(count))


def encode_event_tokens(prev_time, time, channel, rising):
    """Tokens for events after ``prev_time`` (a TIME token precedes a delta over 21 bits)."""
    out = bytearray()
    for t, c, r in zip(time.tolist(), channel.tolist(), rising.tolist(), strict=True):
        delta = t - prev_time
        if delta < 0:
            raise ValueError("Event times must be non-decreasing")
        if delta >= 1 << 21:
            k = max(1, -(-(delta.bit_length() - 4) // 6))
            out.append(protocol.Token.TIME | (delta & 0xF))
            out += _cont(delta >> 4, k)
            delta = 0
        k = 0 if delta < 8 else -(-(delta.bit_length() - 3) // 6)
        out.append((c & 7) << 4 | (8 if r else 0) | (delta & 7))
        out += _cont(delta >> 3, k)
        prev_time = t
    return bytes(out)


def _overflow_token(lost, first_time, span):
    value = lost | first_time << 40 | span << 104
    return bytes([protocol.Token.OVERFLOW]) + _cont(value, protocol.OVERFLOW_CONT)


class EmulatedInstrument:
    """A pure-Python instrument that plays a fixed list of events once armed.

    Parameters
    ----------
    time, channel, rising : array_like
        Events in ticks, non-decreasing.
    channels : list of str
        Channel names reported by IDENTIFY.
    capture_hz, lanes : int
        Reported clock; ``tick_hz = capture_hz * lanes``.
    frame_events : int
        Events per EVENTS frame.
    protocol_version : int
        Version put in IDENTIFY and frame headers (to test refusal of a mismatch).
    overflows : dict of int to (lost, first_time, span)
        OVERFLOW tokens inserted before the event of that index (the dropped events are not in
        the event list).
    corrupt : dict of int to str
        EVENTS frame number -> ``"drop"`` (lose 3 bytes in mid-frame) or ``"flip"`` (flip one
        bit), to inject link errors. The events of those frames are lost exactly.
    heartbeat_every : int or None
        Send a HEARTBEAT frame after every this many EVENTS frames.
    eth_link : tuple (link, speed_mbps, full_duplex) or None
        The Gigabit Ethernet link state to report in STATUS and heartbeats (``HeartbeatStatus``
        bits 3-7); ``None`` for a gateware without the Ethernet link.

    A decrease of ``time`` is played as a timestamp reset: the frame ends before it and the
    event index and time base restart at 0.
    """

    def __init__(self, time, channel, rising, *, channels=("rx_dv", "tx_en", "m0", "m1"),
                 capture_hz=100_000_000, lanes=2, frame_events=64,
                 protocol_version=protocol.PROTOCOL_VERSION, overflows=None, corrupt=None,
                 heartbeat_every=None, eth_link=None):
        self.time = np.asarray(time, np.int64)
        self.channel = np.asarray(channel, np.uint8)
        self.rising = np.asarray(rising, bool)
        if not (len(self.time) == len(self.channel) == len(self.rising)):
            raise ValueError("Event columns must be of equal length")
        if not isinstance(frame_events, int) or frame_events < 1:
            raise ValueError(f"Events per frame must be a positive integer, not {frame_events!r}")
        self.channels = list(channels)
        self.capture_hz, self.lanes = capture_hz, lanes
        self.frame_events = frame_events
        self.version = protocol_version
        self.overflows = dict(overflows or {})
        self.corrupt = dict(corrupt or {})
        self.heartbeat_every = heartbeat_every
        self.eth_bits = 0
        if eth_link is not None:
            link, speed_mbps, full_duplex = eth_link
            code = {10: 0, 100: 1, 1000: 2}[speed_mbps]     # docs/stream-format.md, EthSpeed
            self.eth_bits = 1 << 3 | int(bool(link)) << 4 | code << 5 | int(bool(full_duplex)) << 7
        self.armed = False
        self.sent = 0                 # events put in frames
        self.frames_sent = 0          # EVENTS frames
        self.lost_on_link = 0         # events in frames corrupted on purpose
        self.commands = []            # (opcode, args) received
        self._seq = 0
        self._prev_time = 0
        self._lost_total = 0
        self._epoch_start = 0
        self._rx = bytearray()

    @property
    def done(self):
        """All events have been sent."""
        return self.sent >= len(self.time)

    def _frame(self, frame_type, payload):
        frame = encode_frame(frame_type, self._seq, payload, version=self.version)
        self._seq = (self._seq + 1) & 0xFF
        return frame

    def identify_data(self):
        head = _IDENTIFY.pack(self.version, 0, 1, self.lanes, 0x0123456789ABCDEF, self.capture_hz,
                              len(self.channels), 48, 15, 16, 512)
        return head + f"board=emulated;channels={','.join(self.channels)}".encode()

    def handle(self, data):
        """Take bytes from the host; return the REPLY frames for complete COMMAND frames."""
        self._rx += data
        out = bytearray()
        while True:
            start = self._rx.find(protocol.SYNC)
            if start < 0:
                del self._rx[:max(0, len(self._rx) - 1)]
                return bytes(out)
            del self._rx[:start]
            if len(self._rx) < 6:
                return bytes(out)
            _, tv, seq, length = _FRAME_HEADER.unpack_from(self._rx)
            if len(self._rx) < 6 + length + 4:
                return bytes(out)
            body = bytes(self._rx[2:6 + length])
            crc = int.from_bytes(self._rx[6 + length:10 + length], "little")
            if zlib.crc32(body) != crc or tv & 0xF != protocol.FrameType.COMMAND or length < 1:
                del self._rx[:2]
                out += self._frame(protocol.FrameType.REPLY,
                                   bytes([0, 0, protocol.Status.BAD_FRAME]))
                continue
            del self._rx[:10 + length]
            opcode, args = body[4], body[5:]
            self.commands.append((opcode, args))
            status, reply = protocol.Status.OK, b""
            if opcode == protocol.Opcode.IDENTIFY:
                reply = self.identify_data()
            elif opcode == protocol.Opcode.ARM:
                self.armed = bool(args[:1] == b"\x01")
            elif opcode == protocol.Opcode.STATUS:
                reply = self.heartbeat_payload()
            elif opcode not in set(protocol.Opcode):
                status = protocol.Status.UNKNOWN_OPCODE
            out += self._frame(protocol.FrameType.REPLY, bytes([seq, opcode, status]) + reply)

    def heartbeat_payload(self):
        t = int(self.time[self.sent - 1]) if self.sent else 0
        return _HEARTBEAT.pack(t, self.sent - self._epoch_start, self._lost_total, 0,
                               int(self.armed) | self.eth_bits, 0)

    def _prev_base(self, lo):
        return int(self.time[lo - 1]) if lo > self._epoch_start else 0

    def next_frames(self, max_frames=1):
        """Return up to ``max_frames`` EVENTS frames (with corruption and heartbeats as set up),
        or ``b""`` when disarmed or done."""
        out = bytearray()
        for _ in range(max_frames):
            if not self.armed or self.done:
                break
            lo = self.sent
            hi = min(lo + self.frame_events, len(self.time))
            if lo and self.time[lo] < self.time[lo - 1]:     # a timestamp reset: restart counts
                self._prev_time, self._epoch_start, self._lost_total = 0, lo, 0
            back = np.flatnonzero(self.time[lo + 1:hi] < self.time[lo:hi - 1])
            if len(back):
                hi = lo + int(back[0]) + 1                     # end the frame before a reset
            tokens = bytearray()
            index = lo - self._epoch_start        # events emitted, not counting dropped
            for i in range(lo, hi):
                if i in self.overflows:
                    lost, first, span = self.overflows[i]
                    tokens += _overflow_token(lost, first, span)
                    self._lost_total += lost
                tokens += encode_event_tokens(self._prev_time, self.time[i:i + 1],
                                              self.channel[i:i + 1], self.rising[i:i + 1])
                self._prev_time = int(self.time[i])
            payload = _EVENTS_HEADER.pack(self._prev_base(lo),
                                          index & 0xFFFFFFFF) + bytes(tokens)
            frame = bytearray(self._frame(protocol.FrameType.EVENTS, payload))
            fault = self.corrupt.get(self.frames_sent)
            if fault == "drop":
                del frame[len(frame) // 2:len(frame) // 2 + 3]
                self.lost_on_link += hi - lo
            elif fault == "flip":
                frame[len(frame) // 2] ^= 0x10
                self.lost_on_link += hi - lo
            elif fault is not None:
                raise ValueError(f"Corruption must be 'drop' or 'flip', not {fault!r}")
            out += frame
            self.sent = hi
            self.frames_sent += 1
            if self.heartbeat_every and self.frames_sent % self.heartbeat_every == 0:
                out += self._frame(protocol.FrameType.HEARTBEAT, self.heartbeat_payload())
        return bytes(out)


class EmulatedTransport(Transport):
    """An :class:`EmulatedInstrument` as an in-process transport: writes are commands, reads
    return its replies and then ``frames_per_read`` EVENTS frames. Once the instrument has sent
    everything, reads time out (``b""``), or raise :class:`TransportClosed` if
    ``close_when_done``."""

    def __init__(self, instrument, frames_per_read=4, close_when_done=False):
        self.instrument = instrument
        self.frames_per_read = frames_per_read
        self.close_when_done = close_when_done
        self._queued = bytearray()
        self.closed = False

    def read(self, max_bytes, timeout):
        if self.closed:
            raise TransportClosed("emulated instrument was closed by this program")
        if not self._queued:
            self._queued += self.instrument.next_frames(self.frames_per_read)
        if not self._queued:
            if self.close_when_done and self.instrument.done:
                raise TransportClosed("emulated instrument: end of events")
            _time.sleep(min(timeout, 0.01))
            return b""
        data = bytes(self._queued[:max_bytes])
        del self._queued[:max_bytes]
        return data

    def write(self, data):
        if self.closed:
            raise TransportClosed("emulated instrument was closed by this program")
        self._queued += self.instrument.handle(bytes(data))

    def close(self):
        self.closed = True


class PtyDevice:
    """Serve an :class:`EmulatedInstrument` on a pseudo-terminal.

    ``path`` is the slave's name, to open with :class:`SerialTransport` (in this or another
    process). :meth:`pump` runs the device for a while in the calling thread; :meth:`start` runs
    it in a background thread until :meth:`close`, which closes the master: the capture side then
    sees the port vanish.

    Parameters
    ----------
    instrument : EmulatedInstrument
    frames_per_second : float or None
        Pace of EVENTS frames (``None``: as fast as the pty takes them).
    """

    def __init__(self, instrument, frames_per_second=None):
        self.instrument = instrument
        self.master, slave = os.openpty()
        tty.setraw(slave)
        tty.setraw(self.master)
        self.path = os.ttyname(slave)
        # Keep the slave open until the capture side has opened it, so early writes are kept.
        self._slave = slave
        self.period = 1.0 / frames_per_second if frames_per_second else 0.0
        self._stop = threading.Event()
        self._thread = None
        self._next = _time.monotonic()
        self._pending = bytearray()
        os.set_blocking(self.master, False)

    def step(self, timeout=0.01):
        """Answer commands and send what is due; returns False once the master is closed."""
        if self.master is None:
            return False
        want_write = bool(self._pending) or (self.instrument.armed and not self.instrument.done)
        r, w, _ = select.select([self.master], [self.master] if want_write else [], [], timeout)
        if r:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                data = b""
            if data:
                self._pending += self.instrument.handle(data)
        now = _time.monotonic()
        if not self._pending and self.instrument.armed and not self.instrument.done and \
                now >= self._next:
            self._pending += self.instrument.next_frames(1)
            self._next = max(now, self._next + self.period) if self.period else now
        if self._pending and (w or not want_write):
            try:
                sent = os.write(self.master, self._pending)
                del self._pending[:sent]
            except BlockingIOError:
                pass
            except OSError:
                return False
        return True

    def pump(self, seconds):
        """Run the device for ``seconds`` in this thread."""
        end = _time.monotonic() + seconds
        while _time.monotonic() < end and self.step(min(0.01, max(0.0, end - _time.monotonic()))):
            pass

    def release_slave(self):
        """Close this side's handle on the slave (once the capture side has it open), so that
        closing the master is seen by the capture side."""
        if self._slave is not None:
            os.close(self._slave)
            self._slave = None

    def start(self):
        def run():
            while not self._stop.is_set() and self.step(0.01):
                pass
        self._thread = threading.Thread(target=run, name="pty-device", daemon=True)
        self._thread.start()
        return self

    def close(self):
        """Stop serving and close both ends this object holds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        self.release_slave()
        if self.master is not None:
            os.close(self.master)
            self.master = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
