"""The self-test bench: the simulated instrument for ``latscope selftest --sim`` and
``latscope doctor --sim``, the real gateware compiled by Verilator with idle pins (no DUT
traffic), served on a pseudo-terminal so the hardware code path runs unchanged."""

import threading

from latscope import LatscopeError
from latscope.capture.sim import simbench
from latscope.capture.sim.ptyserve import PtyServer
from latscope.gateware import verilator

__all__ = ["SelftestBenchEngine", "SimulatedInstrument", "open_simulated_instrument"]


class SelftestBenchEngine:
    """The simulated instrument for self-test: the real gateware (``LatscopeCore`` compiled by
    :mod:`latscope.gateware.verilator`, with the simulated bench's parameters), idle pins (no DUT
    traffic), for :class:`latscope.capture.sim.ptyserve.PtyServer`.

    Time advances in steps of ``step_cycles`` capture cycles, a new step only once the simulator
    has finished the previous one (it reports its cycle count after each), so host commands are
    answered within one step however slowly the simulator runs. (The simulated bench's own engine
    lets time run at wall-clock pace, which the simulator can follow only while the core
    fast-forwards; with the self-test on it never does.)

    ``cable`` (channel -> ticks) fits a simulated fan-out cable (the harness's CABLE command): each
    listed channel sees the self-test output pin that many ticks late, in place of its idle pin,
    so ``--calibrate`` can run; without it no channel is connected to ``selftest_out``.
    """
    name = "verilator"

    def __init__(self, *, step_cycles=1 << 15, cable=None):
        if isinstance(step_cycles, bool) or not isinstance(step_cycles, int) or step_cycles < 1:
            raise ValueError(f"Step must be a positive number of cycles, not {step_cycles!r}")
        self._v = verilator
        self.timing = simbench.InstrumentTiming()
        self.step_cycles = step_cycles
        self.command_cycles = simbench.COMMAND_CYCLES
        instrument = verilator.VerilatorInstrument(
            capture_hz=int(self.timing.capture_hz), lanes=self.timing.lanes,
            channel_names=simbench.CHANNEL_ROLES, **simbench.CORE_BUILD)
        self.proc = instrument.open()
        self.cable = dict(cable or {})
        if self.cable:
            self.proc.write(verilator.Commands().cable(
                self.cable, channels=simbench.CORE_PARAMS["channels"], lanes=self.timing.lanes))
        self._lock = threading.Lock()
        self._requested = 0
        self.started = False
        self.finished = False

    def metadata(self):
        meta = {"simulated": True, "engine": self.name, "traffic": "none (self-test bench)"}
        if self.cable:
            meta["cable_delay_ticks"] = {str(ch): d for ch, d in sorted(self.cable.items())}
        return meta

    def host_bytes(self, data):
        with self._lock:
            self._requested += self.command_cycles
            self.proc.write(self._v.Commands().rx(data).run(self.command_cycles).stats())

    def read(self, max_bytes, timeout=0.0):
        data = self.proc.read_bytes(max_bytes, timeout=timeout)
        if not data:
            with self._lock:
                done = self.proc.stats.get("total_cycles", 0)
                if done >= self._requested:
                    self._requested = done + self.step_cycles
                    self.proc.write(self._v.Commands().run(self.step_cycles).stats())
        return data

    def close(self):
        try:
            self.proc.close_input()
        except OSError:
            pass
        try:
            self.proc.__exit__(None, None, None)
        except Exception:   # noqa: BLE001 - shutting down
            pass


class SimulatedInstrument:
    """Handle of :func:`open_simulated_instrument`: the bench, its server and the pty path."""

    def __init__(self, engine, server):
        self.engine, self.server, self.path = engine, server, server.path

    def close(self):
        self.server.close()


def open_simulated_instrument(engine="auto", *, cable=None):
    """Start the self-test bench (:class:`SelftestBenchEngine`) on a pseudo-terminal.

    Parameters
    ----------
    engine : {"auto", "verilator"}
        The simulated bench's reference-model engine cannot serve: its capture model
        (``capture_entries_fast``) does not model the self-test generator.
    cable : dict, optional
        A simulated fan-out cable, channel -> delay in ticks (:class:`SelftestBenchEngine`).

    Returns
    -------
    (str, handle)
        The pty path, and a handle to ``close()`` afterwards.
    """
    if engine not in ("auto", "verilator"):
        raise LatscopeError(f"self-test on the simulated bench needs the verilator engine (the "
                            f"reference-model engine does not model the self-test generator); "
                            f"not {engine!r}")
    try:
        bench = SelftestBenchEngine(cable=cable)
    except ImportError as error:
        raise LatscopeError(f"the simulated instrument needs Verilator: {error}") from None
    server = PtyServer(bench)
    return server.path, SimulatedInstrument(bench, server)
