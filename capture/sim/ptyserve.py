"""Serve a simulated instrument's bytes on a pseudo-terminal.

:class:`PtyServer` opens a pseudo-terminal pair, sets it raw, and runs a thread that moves bytes
between the pty master and an *engine* (an object with ``host_bytes(data)``, ``read(max_bytes,
timeout) -> bytes`` and ``close()``, such as the engines of :mod:`latscope.capture.sim.simbench`):
what the host writes to the slave goes to the engine (the gateware answers commands itself), what
the engine produces is written to the master, at most at ``rate`` bytes/s (the link's rate) or as
fast as the reader takes it. The capture side opens :attr:`PtyServer.path` exactly as a serial port,
so ``latscope capture --port PATH`` runs the hardware code path. :meth:`PtyServer.close` closes the
master: the reader then sees the port vanish, as when a board is unplugged.
"""

import errno
import fcntl
import os
import select
import struct
import termios
import threading
import time
import tty

from latscope import LatscopeError

__all__ = ["PtyServer", "LINK_BYTES_PER_S"]

#: The boards' link: FT2232H UART at 12 Mbaud, 8N1 (10 bits per byte).
LINK_BYTES_PER_S = 1_200_000
#: Seconds after the host's last byte during which the server polls for more every few
#: milliseconds (a command is usually followed by the next one).
HOST_ACTIVE_S = 0.5
#: Longest wait for the engine's bytes while the host is quiet: each wake-up costs CPU, and a
#: command that arrives then waits at most this long.
QUIET_WAIT_S = 0.02


class PtyServer:
    """Serve ``engine`` on a new pseudo-terminal.

    Parameters
    ----------
    engine : object
        ``host_bytes(data)``, ``read(max_bytes, timeout) -> bytes``, ``close()``; optional
        ``finished`` attribute (the stimulus has been played and its bytes produced).
    rate : float or None
        Largest byte rate written to the host, bytes/s; ``None`` for as fast as possible.
    close_when_finished : bool
        Close the master once the engine is finished and every byte was written (the reader then
        sees the port close).

    Attributes
    ----------
    path : str
        The slave device (``/dev/pts/N``) to open as a serial port.
    bytes_out, bytes_in : int
        Bytes written to the host and received from it so far.
    error : BaseException or None
        What stopped the serving thread, if it failed.
    """

    def __init__(self, engine, *, rate=None, close_when_finished=False, chunk=1 << 14):
        if rate is not None and not rate > 0:
            raise LatscopeError(f"byte rate must be positive or None, not {rate!r}")
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"Chunk size must be a positive integer, not {chunk!r}")
        self.engine = engine
        self.rate = rate
        self.chunk = chunk
        self.close_when_finished = close_when_finished
        self.bytes_out = 0
        self.bytes_in = 0
        self.error = None
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        self.path = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="ptyserve", daemon=True)
        self._thread.start()

    @property
    def running(self):
        return self._thread.is_alive()

    def _serve(self):
        pending = b""
        started = time.monotonic()
        sent_at_start = 0
        host_seen = -HOST_ACTIVE_S     # when the host last wrote
        try:
            while not self._stop.is_set():
                want_write = bool(pending)
                now = time.monotonic()
                host_active = now - host_seen < HOST_ACTIVE_S
                if want_write:      # host bytes or room for ours, whichever comes first
                    wait = 0.005 if host_active else QUIET_WAIT_S
                else:               # waiting for the engine (below), after its bytes
                    wait = 0.005 if host_active else 0
                readable, writable, _ = select.select(
                    [self._master], [self._master] if want_write else [], [], wait)
                if readable:
                    try:
                        data = os.read(self._master, 4096)
                    except OSError as error:
                        if error.errno != errno.EIO:     # EIO: no reader has the slave open
                            raise
                        data = b""
                    if data:
                        self.bytes_in += len(data)
                        host_seen = time.monotonic()
                        self.engine.host_bytes(data)
                if not pending:
                    wait = 0 if readable else 0.002 if host_active else QUIET_WAIT_S
                    asked = time.monotonic()
                    pending = self.engine.read(self.chunk, timeout=wait)
                    if not pending and self.close_when_finished \
                            and getattr(self.engine, "finished", False):
                        self._wait_drained()
                        break
                    rest = wait - (time.monotonic() - asked)
                    if not pending and rest > 0.001:
                        # an engine that does not wait: wait for the host instead
                        select.select([self._master], [], [], rest)
                    continue
                if writable or not want_write:
                    allowed = len(pending)
                    if self.rate is not None:
                        budget = int((time.monotonic() - started) * self.rate) \
                            - (self.bytes_out - sent_at_start)
                        if budget <= 0:
                            time.sleep(min(0.01, -budget / self.rate + 0.0005))
                            continue
                        allowed = min(allowed, budget)
                    try:
                        n = os.write(self._master, pending[:allowed])
                    except BlockingIOError:
                        continue
                    self.bytes_out += n
                    pending = pending[n:]
        except BaseException as error:   # noqa: BLE001 - reported through .error and close()
            self.error = error
        finally:
            if not self._stop.is_set():    # finished on its own (or failed): the port goes away
                self._close_master()

    def _wait_drained(self, limit=10.0):
        """Wait (at most ``limit`` s) until the reader took every byte: closing the master hangs
        the terminal up, which discards unread input. The slave's input must be empty twice,
        5 ms apart: bytes just written reach it through the kernel's buffer a moment later."""
        deadline = time.monotonic() + limit
        empty = 0
        while time.monotonic() < deadline and not self._stop.is_set():
            waiting = struct.unpack("i", fcntl.ioctl(self._slave, termios.FIONREAD,
                                                     b"\0\0\0\0"))[0]
            empty = 0 if waiting else empty + 1
            if empty == 2:
                return
            time.sleep(0.005)

    def _close_master(self):
        with self._lock:
            if self._master is not None:
                os.close(self._master)
                self._master = None

    def close(self):
        """Stop serving, close the master (the reader sees the port vanish) and the engine."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(10)
        self._close_master()
        if self._slave is not None:
            os.close(self._slave)
            self._slave = None
        self.engine.close()
        if self.error is not None and not isinstance(self.error, OSError):
            raise LatscopeError(f"the simulated instrument failed: {self.error!r}") from self.error

    def wait(self, timeout=None):
        """Wait until the serving thread ends (with ``close_when_finished``); True if it ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
