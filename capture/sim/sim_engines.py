"""Engines of the simulated bench: the instrument that plays a :class:`SimRun`'s stimulus (the
real gateware in Verilator or in the Amaranth simulator, or the gateware's reference models) and
answers the host's commands.

Part of :mod:`latscope.capture.sim.simbench` (import from there).
"""

import numpy as np

from latscope import LatscopeError
from latscope.capture.sim.sim_profile import CHANNEL_ROLES
from latscope.capture.sim.sim_stream import SimStream
from latscope.gateware.verilator import stimulus_commands

# --- Engines: the instrument that sees the stimulus -----------------------------------------------

ENGINES = ("verilator", "amaranth", "model")

#: Parameters of the simulated instrument (the ECPIX-5 build's capture side, board name "sim").
CORE_PARAMS = dict(channels=8, counter_width=48, max_glitch=15, heartbeat_shift=20,
                   fifo_depth=1024)
#: The simulated instrument's gateware: CORE_PARAMS and the ECPIX-5 build's pipelined encoder (one
#: event per link cycle). Its link stays one byte wide, the width of the harness's tx port.
CORE_BUILD = dict(CORE_PARAMS, pipelined_encoder=True)
#: Capture cycles the bench runs after each host command so that the gateware answers it.
COMMAND_CYCLES = 4096
#: Stimulus changes per chunk written to an engine (bounded memory, host commands interleave).
CHUNK_CHANGES = 1 << 15


class _HostCommands:
    """Splits the host's byte stream into COMMAND frames: ``feed(data)`` yields
    ``(seq, payload)`` for each complete frame with a good CRC, ``(None, None)`` for a bad one."""

    def __init__(self):
        import zlib

        from latscope.gateware import protocol
        self._crc = zlib.crc32
        self._sync = protocol.SYNC
        self._buffer = bytearray()

    def feed(self, data):
        buf = self._buffer
        buf += data
        while True:
            at = buf.find(self._sync)
            if at < 0:
                del buf[:max(0, len(buf) - 1)]
                return
            del buf[:at]
            if len(buf) < 6:
                return
            length = int.from_bytes(buf[4:6], "little")
            if length > 64:
                del buf[:2]
                yield None, None
                continue
            if len(buf) < 6 + length + 4:
                return
            body = bytes(buf[2:6 + length])
            crc = int.from_bytes(buf[6 + length:10 + length], "little")
            if self._crc(body) != crc or (buf[2] & 0x0F) != 4:
                del buf[:2]
                yield None, None
                continue
            del buf[:10 + length]
            yield body[1], body[4:]


def _blocks(run):
    """The blocks of ``run`` in time order: a :class:`SimStream`'s, or the ``SimRun`` itself."""
    return run.blocks() if isinstance(run, SimStream) else iter([run])


def _chunks(stimulus, lanes, chunk=CHUNK_CHANGES, start=0):
    """Split a stimulus at cycle boundaries, from tick ``start`` (a cycle boundary, all levels
    low from there to the first change) on: yields ``(start_tick, ticks - start_tick, values,
    end_tick - start_tick, initial)``; consecutive chunks tile time exactly."""
    ticks, values = stimulus.ticks, stimulus.values
    n = len(ticks)
    initial, i = 0, 0
    while i < n:
        j = min(n, i + chunk)
        if j < n:   # end the chunk at the start of the cycle holding change j
            end = int(ticks[j]) // lanes * lanes
            while j > i and int(ticks[j - 1]) >= end:
                j -= 1
            if j == i:       # a whole chunk inside one cycle cannot happen (lanes <= 4)
                j, end = i + 1, (int(ticks[i]) // lanes + 1) * lanes
        else:
            end = (int(ticks[-1]) // lanes + 2) * lanes
        yield (start, ticks[i:j] - start, values[i:j], end - start, initial)
        initial = int(values[j - 1])
        start, i = end, j


def harness_stimulus(run, lanes, *, chunk=2048):
    """The harness commands that play ``run``'s stimulus (a :class:`SimRun`, or a
    :class:`SimStream` block by block) from harness cycle 0 on, as :class:`VerilatorEngine`
    feeds them: one bytes object per piece of at most ``chunk`` changes, consecutive pieces
    tiling time exactly (:func:`latscope.gateware.verilator.stimulus_commands`)."""
    start = 0
    for block in _blocks(run):
        for first, ticks, values, end, initial in _chunks(block.stimulus, lanes, chunk=chunk,
                                                          start=start):
            yield stimulus_commands(ticks, values, lanes=lanes, channels=CORE_PARAMS["channels"],
                                    end_tick=end, initial=initial)
            start = first + end


class _Engine:
    """Common state of an engine: the run it plays and whether it has started or finished."""
    name = "?"

    def __init__(self, run):
        self.run = run
        self.started = False          # the host armed the instrument; the stimulus is playing
        self.finished = False         # every byte the stimulus causes has been produced
        self.tick_offset = None       # instrument tick of stimulus tick 0, when the engine knows
        self.link_rate = None         # bytes/s of the instrument's link (None: as fast as possible)

    def metadata(self):
        return {"simulated": True, "engine": self.name}


class ModelEngine(_Engine):
    """The gateware's Python reference models: the capture front-end's
    (:func:`latscope.gateware.model_capture.capture_entries_fast`: entries from the stimulus, no
    overflow) and the link side's (:class:`latscope.gateware.model_stream.LinkModel`: entries to
    bytes; :class:`~latscope.gateware.model_stream.CommandModel`: replies). About 10 µs of Python
    per event; starts at once (nothing to compile)."""
    name = "model"

    def __init__(self, run):
        super().__init__(run)
        from latscope.gateware import model_stream as ms
        self._ms = ms
        timing = run.timing
        self.lanes, self.channels = timing.lanes, CORE_PARAMS["channels"]
        self.hb = CORE_PARAMS["heartbeat_shift"]
        identify = ms.identify_data(
            lanes=timing.lanes, capture_hz=int(timing.capture_hz), board="sim",
            channel_names=CHANNEL_ROLES, **CORE_PARAMS)
        self.link = ms.LinkModel(channels=self.channels, lanes=self.lanes,
                                 counter_width=CORE_PARAMS["counter_width"])
        self.commands = ms.CommandModel(channels=self.channels,
                                        max_glitch=CORE_PARAMS["max_glitch"], identify=identify,
                                        lanes=self.lanes)
        self.parser = _HostCommands()
        #: FRAME/COUNTERS records when the run has a wire (a frame-capture build), else None
        self.frames = FrameRecords(run, timing.lanes) \
            if getattr(run, "scenario", None) is not None else None
        self.cycle = 0                  # capture cycles since the last timestamp reset
        self._out = bytearray()
        self._pending = None            # iterator over lists of entries of the stimulus
        self._last_wall = None

    def host_bytes(self, data):
        from latscope.gateware.protocol import Opcode, Status
        for seq, payload in self.parser.feed(data):
            if seq is None:
                self.link.reply(0, 0, Status.BAD_FRAME)
                continue
            if self.frames is not None and payload[:1] and payload[0] in self.frames.OPCODES:
                self.link.reply(seq, payload[0], self.frames.configure(payload))
                continue
            status_data = b""
            if payload[:1] == bytes([Opcode.STATUS]):
                status_data = self._ms.to_bytes(self._ms.Heartbeat, self.link.heartbeat_fields(
                    status=self.commands.config["armed"]))
            opcode, status, reply = self.commands.handle(payload, status_data=status_data)
            self.link.reply(seq, opcode, status, reply)
            if status == Status.OK and opcode == Opcode.RESET_TIME:
                self.link.entry(self._ms.Entry(self._ms.ENTRY_RESET, 0))
                self.cycle = 0
            if status == Status.OK and opcode == Opcode.ARM and payload[1] == 1 \
                    and not self.started:
                self.started = True
                start = self.cycle + 16
                self.tick_offset = start * self.lanes
                self._pending = self._stimulus_entries(start)
                if self.frames is not None:
                    self.frames.start(self.tick_offset)
        self._out += self.link.output
        self.link.output.clear()

    def _stimulus_entries(self, start_cycle, chunk=4096):
        """Lists of entries for the stimulus played from ``start_cycle`` on (ticks included),
        block by block (each block starts and ends with every level low)."""
        from latscope.gateware import model_capture as mc
        cfg = self.commands.config
        latency = mc.pipeline(self.lanes, CORE_PARAMS["max_glitch"]).latency
        Entry = self._ms.Entry
        for block in _blocks(self.run):
            if self.frames is not None:
                self.frames.add(block)
            stim = block.stimulus
            shifted = mc.Stimulus(stim.ticks + start_cycle * self.lanes, stim.values)
            end = int(shifted.ticks[-1]) // self.lanes + 2 if len(stim.ticks) else \
                self.cycle + 2
            entries = mc.capture_entries_fast(
                shifted, mc.Config(armed=True, rise_en=cfg["rise_en"], fall_en=cfg["fall_en"],
                                   glitch=tuple(cfg["glitch"])),
                channels=self.channels, lanes=self.lanes,
                counter_width=CORE_PARAMS["counter_width"],
                max_glitch=CORE_PARAMS["max_glitch"], heartbeat_shift=self.hb,
                n_cycles=end + latency + 1)
            # Ticks up to now were already sent (while idle, or with the previous block).
            entries = entries[(entries["kind"] != mc.TICK) | (entries["cycle"] > self.cycle)]
            for i in range(0, len(entries), chunk):
                part = entries[i:i + chunk]
                yield [Entry(int(k), int(c), int(e), int(v)) for k, c, e, v in
                       zip(part["kind"], part["cycle"], part["edges"], part["levels"],
                           strict=True)]
            del entries
            self.cycle = max(self.cycle, end)

    def _records(self, final=False):
        """Frame records due by now, each its own frame between the EVENTS frames (the framer
        sends a record when the link is free; the host places it by its frame index)."""
        if self.frames is None:
            return
        ms = self._ms
        for frame_type, payload in self.frames.until(self.cycle, final=final):
            self.link.output += ms.frame(frame_type, self.link.seq, payload)
            self.link.seq = (self.link.seq + 1) & 0xFF

    def _ticks_until(self, cycle):
        """TICK entries for the multiples of 2**hb in (self.cycle, cycle]."""
        step = 1 << self.hb
        first = self.cycle // step + 1
        return [self._ms.Entry(1, k * step) for k in range(first, cycle // step + 1)]

    def _advance(self, cycle):
        for entry in self._ticks_until(cycle):
            self.link.entry(entry)
        self.cycle = max(self.cycle, cycle)

    def read(self, max_bytes, timeout=0.0):
        import time as _t
        if not self._out and self._pending is not None:
            entries = next(self._pending, None)
            if entries is None:
                self._pending = None
                self._records(final=True)
                # Run on past the next heartbeat so that the last EVENTS frame is sent.
                self._advance(((self.cycle >> self.hb) + 1) << self.hb)
                self.finished = True
            else:
                for entry in entries:
                    self.link.entry(entry)
                self.cycle = max(self.cycle, entries[-1].cycle)
                self._records()
            self._out += self.link.output
            self.link.output.clear()
        elif not self._out:
            now = _t.monotonic()
            if self._last_wall is not None:   # idle: time passes as on the bench
                self._advance(self.cycle + int((now - self._last_wall)
                                               * self.run.timing.capture_hz))
                self._out += self.link.output
                self.link.output.clear()
            self._last_wall = now
        data = bytes(self._out[:max_bytes])
        del self._out[:max_bytes]
        if not data and timeout:
            _t.sleep(min(timeout, 0.01))
        return data

    def close(self):
        pass


class VerilatorEngine(_Engine):
    """The real gateware (:class:`latscope.gateware.top.LatscopeCore`) compiled with Verilator
    (:mod:`latscope.gateware.verilator`); idle stretches are skipped by the core's fast-forward,
    including those with a partly filled EVENTS frame waiting for its next unit, so an echo
    packet (14 edges over ~8,000 capture cycles) costs ~460 evaluated cycles, ~0.4 ms.

    ``link="fast"`` takes a byte from the core every cycle (the simulated run then takes as long as
    the events need, not as long as a 12 Mbaud UART would); ``link="uart"`` accepts one byte per
    ``capture_hz / 1.2e6`` cycles, the FT2232H's 12 Mbaud 8N1 rate, so FIFO overflow behaves as on
    the board (slower to simulate). ``binary``: a simulator binary already built for this core
    (``VerilatorInstrument.build()``), so that runs started together use one build even if the
    gateware sources change meanwhile; default: build (or find in the cache) now."""
    name = "verilator"

    def __init__(self, run, *, link="fast", binary=None):
        super().__init__(run)
        import threading

        from latscope.gateware import verilator
        if link not in ("fast", "uart"):
            raise LatscopeError(f"link must be 'fast' or 'uart', not {link!r}")
        if binary is not None:
            from pathlib import Path
            binary = Path(binary)
            if not binary.is_file():
                raise LatscopeError(f"no simulator binary at {binary}")
        self._v = verilator
        timing = run.timing
        self.instrument = verilator.VerilatorInstrument(
            capture_hz=int(timing.capture_hz), lanes=timing.lanes, channel_names=CHANNEL_ROLES,
            **CORE_BUILD)
        if binary is not None:
            self.instrument._binary = binary
        self.proc = self.instrument.open()
        self.link = link
        throttle = max(1, round(timing.capture_hz / 1.2e6)) if link == "uart" else 1
        self.proc.write(self._v.Commands().throttle(throttle))
        self.parser = _HostCommands()
        self._lock = threading.Lock()
        self._feeder = None
        self._fed = False
        self._quiet_since = None
        self._last_wall = None
        self._closing = False
        self.error = None

    def metadata(self):
        return {**super().metadata(), "link": self.link}

    def host_bytes(self, data):
        from latscope.gateware.protocol import Opcode
        arm = any(seq is not None and payload[:2] == bytes([Opcode.ARM, 1])
                  for seq, payload in self.parser.feed(data))
        with self._lock:
            if self.started and not self._fed:
                self.proc.write(self._v.Commands().rx(data))   # the stimulus keeps time running
            else:
                # STATS makes the harness flush its output now: the reply leaves at once.
                self.proc.write(self._v.Commands().rx(data).run(COMMAND_CYCLES).stats())
        if arm and not self.started:
            import threading
            self.started = True
            self._feeder = threading.Thread(target=self._feed, name="simbench-feed", daemon=True)
            self._feeder.start()

    def _feed(self):
        timing = self.run.timing
        try:
            # Small chunks: the harness flushes its output whenever it waits for input, so the
            # host sees events (and replies) about every chunk.
            for commands in harness_stimulus(self.run, timing.lanes):
                with self._lock:
                    self.proc.write(commands)
                if self._closing:
                    return
            with self._lock:   # past the next heartbeat, so the last EVENTS frame is sent
                self.proc.write(self._v.Commands().run(
                    (1 << CORE_PARAMS["heartbeat_shift"]) + COMMAND_CYCLES).stats())
        except LatscopeError as error:
            self.error = error
        except (ValueError, OSError):
            # the capture stopped (Ctrl-C, SIGTERM, a limit) and closed the harness's input
            # while this thread was still feeding it: nothing to report
            if not self._closing:
                raise
        self._fed = True

    def read(self, max_bytes, timeout=0.0):
        import time as _t
        data = self.proc.read_bytes(max_bytes, timeout=timeout)
        if self._fed:    # finished: the whole stimulus was sent and the output is quiet
            now = _t.monotonic()
            if data or self._quiet_since is None:
                self._quiet_since = now
            elif now - self._quiet_since > 0.5:
                self.finished = True
        if not data and (not self.started or self._fed):
            now = _t.monotonic()
            if self._last_wall is not None and now - self._last_wall > 0.05:
                # At most one heartbeat period per step, so a command that arrives next is
                # answered within milliseconds of wall time.
                cycles = min(int((now - self._last_wall) * self.run.timing.capture_hz),
                             1 << CORE_PARAMS["heartbeat_shift"])
                with self._lock:   # idle: time passes as on the bench (heartbeats keep coming)
                    self.proc.write(self._v.Commands().run(cycles))
                self._last_wall = now
            elif self._last_wall is None:
                self._last_wall = now
        return data

    def close(self):
        self._closing = True          # before the input closes: the feeder then stops quietly
        try:
            self.proc.close_input()
        except (BrokenPipeError, OSError):
            pass
        if self._feeder is not None:
            # The feeder simulates and appends the ground truth block by block: the truth is
            # closed after this, so the feeder must have ended (its next write fails at once on
            # the closed input; a block's simulation takes well under a second).
            self._feeder.join(30)
        try:
            self.proc.__exit__(None, None, None)
        except Exception:   # noqa: BLE001 - shutting down
            pass


def open_engine(run, engine="auto", *, link="fast", log=None, binary=None):
    """Start an engine that plays ``run`` (a :class:`SimRun`).

    Parameters
    ----------
    engine : {"auto", "verilator", "amaranth", "model"}
        ``auto`` takes Verilator when the gateware and a C++ compiler are present, else the
        reference models (and says so through ``log``).
    link : {"fast", "uart"}
        Verilator only: the link's byte rate in simulated time (see :class:`VerilatorEngine`).
    log : callable, optional
        Receives one-line messages for the user (which engine, why a fallback).
    binary : path, optional
        Verilator only: the simulator binary to run (see :class:`VerilatorEngine`).
    """
    if engine not in ("auto",) + ENGINES:
        raise LatscopeError(f"engine must be one of auto, {', '.join(ENGINES)}, not {engine!r}")
    log = log or (lambda message: None)
    if engine in ("auto", "verilator"):
        try:
            return VerilatorEngine(run, link=link, binary=binary)
        except (ImportError, LatscopeError) as error:
            if engine == "verilator":
                raise LatscopeError(f"the Verilator engine is not available: {error}") from None
            log(f"simulated bench: Verilator engine unavailable ({error}); "
                "using the gateware's reference models")
            return ModelEngine(run)
    if engine == "amaranth":
        if isinstance(run, SimStream):      # tiny runs only: one block
            if run.n_events is None or run.n_events > AmaranthEngine.MAX_EVENTS:
                AmaranthEngine.refuse(run.n_events)
            run = run.materialize()
        return AmaranthEngine(run)
    return ModelEngine(run)


class AmaranthEngine(_Engine):
    """The real gateware (:class:`latscope.gateware.top.LatscopeCore`) in the Amaranth simulator.

    About 1.5·10^3 evaluated cycles/s here, so only for tiny runs (at most :attr:`MAX_EVENTS`
    events); the core is the one the other engines simulate (:data:`CORE_BUILD`), and its
    fast-forward port skips the idle time between edges, as in Verilator.
    """
    name = "amaranth"
    MAX_EVENTS = 2000
    HEARTBEAT_SHIFT = CORE_PARAMS["heartbeat_shift"]

    def __init__(self, run):
        super().__init__(run)
        if run.n_events > self.MAX_EVENTS:
            self.refuse(run.n_events)
        import queue
        import threading

        from amaranth.hdl import DomainRenamer, Module
        from amaranth.sim import Simulator

        from latscope.gateware.top import LatscopeCore
        timing = run.timing
        params = dict(CORE_BUILD, heartbeat_shift=self.HEARTBEAT_SHIFT)
        self.core = LatscopeCore(async_fifo=False, fast_forward=True, board="sim",
                                 capture_hz=int(timing.capture_hz), lanes=timing.lanes,
                                 channel_names=CHANNEL_ROLES, **params)
        m = Module()
        m.submodules.core = DomainRenamer({"capture": "sync"})(self.core)
        self._sim = Simulator(m)
        self._sim.add_clock(1 / timing.capture_hz, domain="sync")
        self._sim.add_testbench(self._bench)
        self._schedule = _cycle_words(run.stimulus, timing.lanes, CORE_PARAMS["channels"])
        self._host = queue.Queue()
        self._out = queue.Queue()
        self._queue_empty = queue.Empty
        self._pending = b""
        self._stop = threading.Event()
        self.error = None
        self._thread = threading.Thread(target=self._run, name="simbench-amaranth", daemon=True)
        self._thread.start()

    @classmethod
    def refuse(cls, n_events):
        raise LatscopeError(f"the Amaranth-simulator engine runs about 10^3 cycles/s: use it "
                            f"for at most {cls.MAX_EVENTS} events (this run has "
                            f"{n_events if n_events is not None else 'more'}); use the "
                            f"verilator or model engine")

    def _run(self):
        try:
            self._sim.run()
        except BaseException as error:   # noqa: BLE001 - reported by read()
            self.error = error
        self._out.put(None)

    async def _bench(self, ctx):
        import collections
        import time as _t

        from latscope.gateware.protocol import Opcode
        core = self.core
        cycles, words = self._schedule
        parser = _HostCommands()
        rx = collections.deque()
        out = bytearray()
        start = None         # cycle at which the stimulus starts
        k = 0                # next entry of the schedule
        cycle = 0
        end = None           # cycle after which the run is flushed
        last_wall = last_flush = _t.monotonic()
        ctx.set(core.tx.ready, 1)
        while not self._stop.is_set():
            try:
                while True:
                    data = self._host.get_nowait()
                    rx.extend(data)
                    if start is None and any(seq is not None and p[:2] == bytes([Opcode.ARM, 1])
                                             for seq, p in parser.feed(data)):
                        start = cycle + COMMAND_CYCLES
                        self.started = True
            except self._queue_empty:
                pass
            while start is not None and k < len(cycles) and start + cycles[k] <= cycle:
                ctx.set(core.samples, int(words[k]))
                k += 1
            if start is not None and k == len(cycles) and end is None:
                end = cycle + (2 << self.HEARTBEAT_SHIFT)
            ctx.set(core.rx.valid, 1 if rx else 0)
            ctx.set(core.rx.payload, rx[0] if rx else 0)
            skip = 0
            if not rx and ctx.get(core.quiescent):
                limit = ctx.get(core.ff_limit)
                if start is not None and k < len(cycles):
                    limit = min(limit, start + int(cycles[k]) - cycle - 1)
                elif start is None or (end is not None and cycle >= end):
                    # Idle: wait for the host a little, then let time pass as on the bench.
                    if out:
                        self._out.put(bytes(out))
                        out.clear()
                    _t.sleep(0.01)
                    now = _t.monotonic()
                    limit = min(limit, int((now - last_wall) * self.run.timing.capture_hz))
                    last_wall = now
                skip = max(0, limit)
            ctx.set(core.ff_skip, skip)
            _, _, tx_valid, tx_data, rx_ready = await ctx.tick().sample(
                core.tx.valid, core.tx.payload, core.rx.ready)
            ctx.set(core.ff_skip, 0)
            if tx_valid:
                out.append(tx_data)
            if rx and rx_ready:
                rx.popleft()
            cycle += 1 + skip
            if len(out) >= 256 or (out and _t.monotonic() - last_flush > 0.05):
                # in chunks, but a reply (or a few events) waits at most ~50 ms of wall time
                self._out.put(bytes(out))
                out.clear()
                last_flush = _t.monotonic()
            if end is not None and cycle >= end and not self.finished:
                if out:
                    self._out.put(bytes(out))
                    out.clear()
                self.finished = True
        if out:
            self._out.put(bytes(out))

    def host_bytes(self, data):
        self._host.put(bytes(data))

    def read(self, max_bytes, timeout=0.0):
        if not self._pending:
            try:
                chunk = self._out.get(timeout=timeout) if timeout else self._out.get_nowait()
            except self._queue_empty:
                chunk = b""
            if chunk is None:
                self._out.put(None)
                if self.error is not None:
                    raise LatscopeError(f"the Amaranth simulation failed: {self.error!r}")
                chunk = b""
            self._pending = chunk
        data, self._pending = self._pending[:max_bytes], self._pending[max_bytes:]
        return data

    def metadata(self):
        return {**super().metadata(), "heartbeat_shift": self.HEARTBEAT_SHIFT}

    def close(self):
        self._stop.set()
        self._thread.join(30)


def _cycle_words(stimulus, lanes, channels):
    """The sample word (bit ``lane*channels + ch``) from each listed cycle (relative to the
    stimulus start) on: ``(cycles, words)``; a change cycle mixes lanes, the next one holds."""
    ticks = np.asarray(stimulus.ticks, np.int64)
    values = np.asarray(stimulus.values, np.int64)
    if not len(ticks):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    all_ticks = np.concatenate([[-1], ticks])
    all_values = np.concatenate([[0], values])
    change = np.unique(ticks // lanes)
    word = np.zeros(len(change), np.int64)
    for lane in range(lanes):
        idx = np.searchsorted(all_ticks, change * lanes + lane, side="right") - 1
        word |= all_values[idx] << (lane * channels)
    last = all_values[np.searchsorted(all_ticks, change * lanes + lanes - 1, side="right") - 1]
    steady = sum(last << (lane * channels) for lane in range(lanes))
    cycles = np.concatenate([change, change + 1])
    words = np.concatenate([word, steady])
    order = np.argsort(cycles, kind="stable")
    cycles, words = cycles[order], words[order]
    keep = np.ones(len(cycles), bool)    # a change at c+1 replaces the steady word of c
    keep[:-1] = cycles[1:] != cycles[:-1]
    return cycles[keep], words[keep]




# --- Frame records for runs with a wire (capture/sim/sim_load.py) ------------------------------

class FrameRecords:
    """FRAME and COUNTERS records of a :class:`~latscope.capture.sim.sim_load.LoadRun`'s wire, as
    the frame-capture gateware sends them: every frame parsed by the sniffers' reference model
    (:func:`latscope.gateware.model_sniffer.parse_frame`), classed by the rule table the host
    loaded (opcodes 0x10..0x13, :func:`~latscope.gateware.model_sniffer.classify`), numbered per
    direction, recorded if its class is, always counted; COUNTERS snapshots of the running totals
    every ``2**counter_period`` capture cycles and at the end."""

    OPCODES = (0x10, 0x11, 0x12, 0x13)
    #: Rules per direction and classes of the simulated frame-capture build (FrameClassifier's
    #: defaults, as on the ECPIX-5 ``--frames`` build).
    RULES, CLASSES = 4, 4

    def __init__(self, run, lanes):
        from latscope.gateware.protocol import TRAFFIC_SEQ_OFFSET
        self.run, self.lanes = run, lanes
        self.rules = {0: {}, 1: {}}
        self.record_mask = {0: 0xFF, 1: 0xFF}
        self.seq_offset = TRAFFIC_SEQ_OFFSET
        self.period = 0
        self.classes = self.CLASSES
        self.offset = None           # instrument tick of stimulus tick 0
        self._events = None
        self._totals = None
        self._last_snapshot = 0

    def configure(self, payload):
        """Apply one of opcodes 0x10..0x13; returns the reply status."""
        from amaranth.lib import data

        from latscope.gateware.classify import CONFIG_ARG_BYTES
        from latscope.gateware.protocol import ClassRule, Opcode, Status
        opcode, args = payload[0], bytes(payload[1:])
        if len(args) != CONFIG_ARG_BYTES[Opcode(opcode)]:
            return Status.BAD_LENGTH
        if opcode == Opcode.SET_RULE:
            value = data.Const(ClassRule, int.from_bytes(args[1:], "little"))
            if args[0] & 0x7F >= self.RULES or int(value.reserved):
                return Status.BAD_ARGUMENT
            fields = {name: int(getattr(value, name)) for name, _ in data.Layout.cast(ClassRule)
                      if name != "reserved"}
            self.rules[args[0] >> 7][args[0] & 0x7F] = fields
        elif opcode == Opcode.SET_CLASS_MODE:
            if args[0] > 1:
                return Status.BAD_ARGUMENT
            self.record_mask[args[0]] = args[1]
        elif opcode == Opcode.SET_SEQ_OFFSET:
            self.seq_offset = int.from_bytes(args, "little")
        else:
            self.period = min(args[0], 40)
        return Status.OK

    def start(self, tick_offset):
        """The stimulus starts at instrument tick ``tick_offset``; frames come with
        :meth:`add`."""
        import collections
        self.offset = tick_offset
        self._events = collections.deque()
        self._totals = {}
        self._seen = [0, 0]

    def add(self, block):
        """Number and class the frames of ``block`` (a ``LoadRun`` of the run, in time order,
        after the frames of the blocks before it)."""
        from latscope.gateware.model_sniffer import classify, parse_frame
        tick_ns = self.run.timing.tick_ns
        events = []
        for d in (0, 1):
            w = block.wire[d]
            first = w.get("first_index", 0)
            rules = [self.rules[d][i] for i in sorted(self.rules[d])]
            parsed = {}        # background frames repeat: parse and class each once
            for index, (frame, end) in enumerate(zip(w["frames"], w["end_ns"], strict=True)):
                if frame not in parsed:
                    rec = parse_frame(frame, seq_offset=self.seq_offset)
                    cls = classify(rec, rules)
                    parsed[frame] = (rec, cls if cls < self.classes else 0)
                rec, cls = parsed[frame]
                cycle = (int(np.ceil(end / tick_ns - 1e-9)) + self.offset) // self.lanes
                events.append((cycle, d, first + index, cls, rec))
        events.sort(key=lambda e: (e[0], e[1]))
        self._events.extend(events)

    def _counter_payloads(self):
        from latscope.gateware.model_stream import to_bytes
        from latscope.gateware.protocol import CounterRecord
        out = []
        for d in (0, 1):
            for c in range(self.CLASSES):
                frames, errors, octets = self._totals.get((d, c), (0, 0, 0))
                out.append(to_bytes(CounterRecord, {
                    "direction": d, "cls": c, "frames_seen": self._seen[d] & 0xFFFFFFFF,
                    "frames": frames & 0xFFFFFFFF, "fcs_errors": errors & 0xFFFFFFFF,
                    "dropped": 0, "octets": octets & (2**48 - 1)}))
        return out

    def until(self, cycle, *, final=False):
        """``(frame_type, payload)`` of the records due by capture cycle ``cycle``."""
        from latscope.gateware.model_sniffer import FLAG_FIELDS, FRAME_FIELDS
        from latscope.gateware.model_stream import to_bytes
        from latscope.gateware.protocol import FrameRecord, FrameType
        out = []
        if self._events is None:
            return out
        events = self._events
        while events and (final or events[0][0] <= cycle):
            at, d, index, cls, rec = events.popleft()
            if self.period and at >> self.period != self._last_snapshot >> self.period:
                out += [(FrameType.COUNTERS, p) for p in self._counter_payloads()]
                self._last_snapshot = at
            frames, errors, octets = self._totals.get((d, cls), (0, 0, 0))
            bad = not rec["fcs_ok"] or rec["rx_er"]
            self._totals[(d, cls)] = (frames + 1, errors + int(bad), octets + rec["length"])
            self._seen[d] += 1
            if self.record_mask[d] >> cls & 1:
                fields = {f: rec[f] for f in FRAME_FIELDS}
                fields.update(frame_index=index, direction=d, cls=cls,
                              flags={f: rec[f] for f in FLAG_FIELDS})
                out.append((FrameType.FRAME, to_bytes(FrameRecord, fields)))
        if final and self.period:
            out += [(FrameType.COUNTERS, p) for p in self._counter_payloads()]
        return out
