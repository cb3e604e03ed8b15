"""Ctrl-C and SIGTERM as a user's shell delivers them (issue 9 item 3).

``latscope capture`` runs in its own session with a pseudo-terminal as its controlling terminal,
as under a shell. Ctrl-C there is SIGINT to the whole foreground process group (every thread and
child process of the capture at once); ``kill -TERM -PGID`` is SIGTERM to all of them. Either,
during a simulated capture (``--sim``) or a serial one (a pty emulating the instrument), must
finalise the file, print the stop reason, exit 0 as ``latscope capture --help`` promises, and
print no thread traceback or simulator dump. Before recording starts, Ctrl-C exits 130 and
SIGTERM 143 with one line and no file.
"""

import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.files import capfile
from latscope.capture.link.transport import EmulatedInstrument, PtyDevice

ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")


def _packets(n, period=2000):
    base = np.arange(n, dtype=np.int64) * period
    time_ = np.stack([base, base + 100, base + 300, base + 310], 1).ravel()
    channel = np.tile(np.array([0, 0, 3, 3], np.uint8), n)
    rising = np.tile(np.array([True, False, True, False]), n)
    return time_, channel, rising


def _as_from_a_shell():
    """In the child before exec: SIGINT and SIGTERM at their defaults and unblocked, as a shell
    starts a foreground job (a child inherits ignored or blocked signals from the pytest worker
    that spawns it). Once, in a loaded `make test` run, the SIGINT of
    test_signal_before_recording_is_one_line had no effect and the command slept its 60 s; the
    cause is not established (it did not recur in isolation or after the notebooks' kernels),
    and this rules out inherited dispositions and masks."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


class Terminal:
    """A command in its own session on a new pty, like a shell's foreground job."""

    def __init__(self, argv, cwd):
        self.master, slave = pty.openpty()
        env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="120")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave,
                                     stderr=slave, start_new_session=True,
                                     preexec_fn=_as_from_a_shell)
        os.close(slave)
        self.text = b""

    def read(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:          # EIO: every writer closed the terminal
                    return False
                if not data:
                    return False
                self.text += data
        return True

    def wait_for(self, predicate, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if predicate():
                return True
            if self.proc.poll() is not None:
                return predicate()
            self.read(0.2)
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:        # a failed test: leave nothing running
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass

    def signal_group(self, sig):
        os.killpg(self.proc.pid, sig)      # the session leader's pid is the group id

    def finish(self, seconds=60):
        end = time.monotonic() + seconds
        while self.proc.poll() is None and time.monotonic() < end:
            self.read(0.2)
        self.read(0.5)
        status = self.proc.wait(timeout=max(1.0, end - time.monotonic()))
        return status, self.text.decode(errors="replace").replace("\r", "")


def _has_events(path):
    try:
        with capfile.open_capture(path) as cap:
            return cap.n_events > 0
    except LatscopeError:           # not created yet, or only its header so far
        return False


def _check_finalised(status, text, path, reason):
    assert status == 0, text
    assert "Traceback" not in text and "Exception in thread" not in text, text
    assert f"stopped: {reason}" in text and "finalised" in text, text
    with capfile.open_capture(path) as cap:
        assert cap.complete and cap.note["reason"] == reason and cap.n_events > 0


def _verilator_available():
    return shutil.which("g++") is not None or shutil.which("c++") is not None


@pytest.mark.slow          # the simulated bench's start-up: tens of seconds on a loaded machine
@pytest.mark.parametrize("engine", ["model", "verilator"])
@pytest.mark.parametrize("sig, reason", [(signal.SIGINT, "interrupted (Ctrl-C)"),
                                         (signal.SIGTERM, "interrupted (SIGTERM)")])
def test_simulated_capture_stops_cleanly_on_group_signal(tmp_path, sig, reason, engine):
    # Verilator: the real gateware in a harness process fed by a thread; the signal reaches
    # the whole group, and neither the harness nor the feeding thread may print anything
    if engine == "verilator" and not _verilator_available():
        pytest.skip("the Verilator engine needs a C++ compiler (g++)")
    out = tmp_path / "s.lsc"
    term = Terminal([sys.executable, "-m", "latscope", "capture", "--sim", "gem-64",
                     "--sim-engine", engine, "--sim-rate", "2e4", "--packets", "100000",
                     "-o", str(out)], tmp_path)
    with term:
        # the first Verilator run compiles the simulator (minutes; cached afterwards)
        assert term.wait_for(lambda: _has_events(out), 900), term.text
        term.signal_group(sig)
        status, text = term.finish()
    _check_finalised(status, text, out, reason)


@pytest.mark.parametrize("sig, reason", [(signal.SIGINT, "interrupted (Ctrl-C)"),
                                         (signal.SIGTERM, "interrupted (SIGTERM)")])
def test_serial_capture_stops_cleanly_on_group_signal(tmp_path, sig, reason):
    dev = PtyDevice(EmulatedInstrument(*_packets(10 ** 6), channels=ROLES),
                    frames_per_second=500).start()
    try:
        out = tmp_path / "p.lsc"
        term = Terminal([sys.executable, "-m", "latscope", "capture", "--port", dev.path,
                         "-o", str(out)], tmp_path)
        with term:
            assert term.wait_for(lambda: _has_events(out), 60), term.text
            term.signal_group(sig)
            status, text = term.finish()
    finally:
        dev.close()
    _check_finalised(status, text, out, reason)


@pytest.mark.parametrize("sig, status, word", [(signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGTERM, 143, "terminated")])
def test_signal_before_recording_is_one_line(tmp_path, sig, status, word):
    # the simulated bench's start-up (building or loading the simulator) is interrupted: no file
    out = tmp_path / "early.lsc"
    term = Terminal([sys.executable, "-c",
                     "import time, sys\n"
                     "from latscope.capture.sim import sim_port\n"
                     "def slow(*a, **k):\n"
                     "    print('starting', flush=True)\n"
                     "    time.sleep(60)\n"
                     "sim_port.open_simulated_port = slow\n"
                     "from latscope.cli import main\n"
                     f"sys.exit(main(['capture', '--sim', 'gem-64', '-o', {str(out)!r}]))\n"],
                    tmp_path)
    with term:
        assert term.wait_for(lambda: b"starting" in term.text, 60), term.text
        term.signal_group(sig)
        got, text = term.finish()
    assert got == status, text
    lines = [line for line in text.splitlines() if line.strip() and line != "starting"]
    assert len(lines) == 1 and word in lines[0] and "no file" in lines[0], text
    assert not out.exists()
