"""The paper's configurations on the simulated bench, captured and compared.

For every shipped profile (GEM, Ethernet Lite with device memory, Ethernet Lite strong-ordered, the
fast track; 64, 256 and 1024-byte frames) the simulated DUT drives the real gateware in
simulation (:class:`~latscope.capture.sim.simbench.VerilatorEngine`: ``LatscopeCore`` compiled by
Verilator, idle time skipped by the core's fast-forward port), the bytes are served on a
pseudo-terminal and recorded by :func:`~latscope.capture.record.record`, as ``latscope capture
--sim`` records them: through the same session code as a board on a serial port
(:mod:`latscope.capture.link.session`), the ground truth written beside the capture as the
simulation produces it. Captures run two at a time (one per core), the two under load
(:mod:`latscope.capture.sim.demo_load`) in the same workers after them. Every capture is
compared with the ground truth of the simulation it recorded
(:func:`~latscope.capture.sim.simbench.compare_to_truth`: no missing, extra or mis-timed event), and
any mismatch fails the command. ``latscope demo`` (``latscope/commands/demo.py``) then analyses the
captures, prints a comparison table next to the paper's Table I and writes the report.

``--engine auto`` (the default) runs every packet through the real gateware when Verilator and a
C++ compiler are present (the first run compiles the simulated instrument once and says so), and
falls back to the gateware's bit-exact reference models (``--engine model``), saying why, when
they are not.
"""

import concurrent.futures
import math
import multiprocessing
import os
import queue as _queue
import sys
import time

from latscope import LatscopeError
from latscope.capture.files import capfile
from latscope.capture.link import session
from latscope.capture.record import record
from latscope.capture.sim import demo_load, simbench
from latscope.capture.sim.sim_port import SimulatedSource
from latscope.gateware import verilator

__all__ = ["capture_profile", "choose_engine", "run_demo"]

#: Packets captured by default, over all profiles (the issue asks for at least 10^5).
DEFAULT_PACKETS = 100_000
QUICK_PACKETS = 2_400


def capture_profile(profile, packets, out_dir, *, seed=0, engine="auto", rate=None,
                    timeout=600.0, log=None, binary=None, board=None):
    """Simulate ``packets`` of ``profile`` and capture them through a pseudo-terminal.

    The capture is recorded by :func:`~latscope.capture.record.record` from the simulated bench
    (:class:`~latscope.capture.sim.sim_port.SimulatedSource`), as ``latscope capture --sim``
    records it: through :class:`~latscope.capture.link.transport.SerialTransport` and
    :mod:`latscope.capture.link.session` as with a board, the simulation's ground truth written
    beside the capture as the simulation produces it. The capture is then checked against that
    ground truth (the same simulation, not a second one). ``binary``: the Verilator engine's
    simulator binary (see :func:`simbench.open_engine`). ``board``: a mapping where the capture
    posts its progress (``{profile: (packets done, packets, seconds)}``, see
    :class:`ProgressBoard`). Returns a dict: ``profile``, ``path``, ``events``, ``expected``,
    ``packets``, ``engine``, ``seconds``, ``reason``, ``bytes``, ``lost``, ``check``
    (:func:`simbench.compare_to_truth`).
    """
    started = time.monotonic()
    name = simbench.load_profile(profile).name
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.lsc")
    for old in (path, capfile.truth_path(path)):   # the demo's own earlier output
        if os.path.exists(old):
            os.remove(old)
    source = SimulatedSource(profile, packets=packets, seed=seed, engine=engine, rate=rate,
                             binary=binary)
    post = _Poster(_QueuePoster() if board == _QUEUE else board, name, packets)
    outcome = record(source, path, limits=session.Limits(duration=timeout), overwrite=True,
                     progress=post, log=log or (lambda message: None))
    run = source.port.run               # the simulation just captured
    with capfile.open_capture(path) as cap:
        events = cap.events()
        check = simbench.compare_to_truth(events.time, events.channel, events.rising,
                                          cap.truth()["simbench"])
        n_events = len(events.time)
        del events
    return {"profile": name, "path": path, "events": n_events,
            "expected": run.n_events, "packets": run.n_packets,
            "engine": source.port.engine.name,
            "seconds": round(time.monotonic() - started, 2), "reason": outcome.reason,
            "bytes": outcome.bytes, "lost": outcome.lost_overflow + outcome.lost_link,
            "check": check}


def _log(message):
    print(message, file=sys.stderr, flush=True)


class _Poster:
    """A capture's progress (for :func:`~latscope.capture.record.record`): posts ``(packets,
    packets in all, seconds)`` to a shared mapping at most twice a second (each post is a
    message to the main process). Packets done are estimated from the events received and the
    event limit (every simulated packet has the same edges)."""

    def __init__(self, shared, name, packets):
        self.shared, self.name, self.packets = shared, name, packets
        #: set by ``record``: the capture's limits (its event limit is the simulation's events)
        self.limits = None
        self._last = None

    def done(self):
        """The capture ended (the board forgets it when its result arrives)."""

    def __call__(self, outcome):
        if self.shared is None:
            return
        now = time.monotonic()
        if self._last is not None and now - self._last < 0.5:
            return
        self._last = now
        events = self.limits.events if self.limits is not None else None
        done = outcome.events * self.packets // max(1, events or outcome.events)
        try:
            self.shared[self.name] = (done, self.packets, outcome.seconds)
        except (OSError, EOFError):     # the main process is gone or stopping: stop posting
            self.shared = None


class ProgressBoard:
    """The demo's live progress: packets, rate and time left of every running capture.

    The captures post into :attr:`shared` (from worker processes through a queue); :meth:`show`
    draws one line for them, redrawn in place on a terminal, or, elsewhere, printed as plain
    lines at most every ``plain_interval`` seconds.
    """

    def __init__(self, shared, stream=None, *, plain_interval=10.0, clock=time.monotonic):
        self.shared = shared
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.plain_interval, self.clock = plain_interval, clock
        self._last_plain = None
        self._drawn = False

    @staticmethod
    def text(entries):
        """``"gem-64 4,120/8,334 packets 1,230/s ETA 0:03 | ..."`` for ``{name: (done, total,
        seconds)}``."""
        parts = []
        for name, (done, total, seconds) in sorted(entries.items()):
            rate = done / seconds if seconds > 0 else 0.0
            eta = f"{max(0.0, (total - done) / rate):.0f} s" if rate > 0 else "-"
            parts.append(f"{name} {done:,}/{total:,} packets {rate:,.0f}/s ETA {eta}")
        return " | ".join(parts)

    def show(self):
        """Draw the running captures' progress now (nothing when none is running)."""
        try:
            entries = dict(self.shared)
        except (OSError, EOFError):     # the manager stopped (shutting down)
            return
        if not entries:
            return
        line = "  capturing: " + self.text(entries)
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
            self._drawn = True
        else:
            now = self.clock()
            if self._last_plain is not None and now - self._last_plain < self.plain_interval:
                return
            self._last_plain = now
            self.stream.write(line + "\n")
        self.stream.flush()

    def finished(self, name):
        """Forget a finished capture and clear the live line (a result line follows)."""
        try:
            self.shared.pop(name, None)
        except (OSError, EOFError):
            pass
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def verilator_binary():
    """Build the simulated instrument once (or find it in the cache), before the workers start;
    they all run this binary. Returns ``(path, None)``, or ``(None, reason)`` when it cannot be
    built."""
    try:
        timing = simbench.InstrumentTiming()
        instrument = verilator.VerilatorInstrument(
            capture_hz=int(timing.capture_hz), lanes=timing.lanes,
            channel_names=simbench.CHANNEL_ROLES, **simbench.CORE_BUILD)
        binary = instrument.build()
        return str(binary), None
    except (ImportError, LatscopeError) as error:
        return None, str(error).splitlines()[0]


def run_all(profiles, each, out_dir, engine, jobs, seed, log, binary=None, stream=None,
             on_result=None):
    return _run_tasks(profiles, each, out_dir, engine, jobs, seed, log, binary, stream,
                      on_result)[0]


def _run_tasks(profiles, each, out_dir, engine, jobs, seed, log, binary=None, stream=None,
               on_result=None, under_load=None):
    """``(results of profiles, rows under load)``: the profiles' captures, then, with
    ``under_load`` (keyword arguments of :func:`~latscope.capture.sim.demo_load.
    capture_under_load`), the captures under load in the same workers, so that they fill a
    core the last profiles leave idle."""
    results, loaded = {}, {}
    load_profiles = demo_load.PROFILES if under_load is not None else ()
    if under_load is not None:
        os.makedirs(under_load["out_dir"], exist_ok=True)

    def finish(row, done):
        log(_progress_line(row, done, len(profiles)) if "scenario" not in row else
            _load_line(row))
        if on_result is not None:       # while the other captures run
            on_result(row)

    if jobs <= 1:
        board = ProgressBoard({}, stream)
        for k, name in enumerate(profiles):
            results[name] = capture_profile(name, each, out_dir, seed=seed + k, engine=engine,
                                            binary=binary, board=_Drawing(board))
            board.finished(name)
            finish(results[name], len(results))
        for name in load_profiles:
            loaded[name] = demo_load.capture_under_load(name, **under_load)
            finish(loaded[name], None)
        return [results[name] for name in profiles], [loaded[n] for n in load_profiles]
    context = multiprocessing.get_context("spawn")
    # the workers post progress into a queue (its feeder thread writes the pipe, so a Ctrl-C
    # in either process cannot leave it half-written)
    posts = context.Queue()
    board = ProgressBoard({}, stream)
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context,
                                                initializer=_worker_posts,
                                                initargs=(posts,)) as pool:
        futures = {pool.submit(capture_profile, name, each, out_dir, seed=seed + k,
                               engine=engine, binary=binary, board=_QUEUE): name
                   for k, name in enumerate(profiles)}
        for name in load_profiles:          # queued after the profiles
            futures[pool.submit(demo_load.capture_under_load, name, **under_load)] = \
                (_LOAD, name)
        pending = set(futures)
        try:
            while pending:
                done, pending = concurrent.futures.wait(
                    pending, timeout=0.5, return_when=concurrent.futures.FIRST_COMPLETED)
                _drain(posts, board.shared)
                for future in done:
                    name = futures[future]
                    if isinstance(name, tuple):
                        loaded[name[1]] = row = future.result()
                        finish(row, None)
                        continue
                    results[name] = future.result()
                    board.finished(name)
                    finish(results[name], len(results))
                if pending:
                    board.show()
        except KeyboardInterrupt:
            # the captures running stop on the same Ctrl-C; the queued ones never start
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return [results[name] for name in profiles], [loaded[n] for n in load_profiles]


#: A future's key for a capture under load (``(_LOAD, profile)``).
_LOAD = "load"

#: ``board`` argument of :func:`capture_profile` in a demo worker: post to the worker's queue.
_QUEUE = "queue"
_posts = None


def _worker_posts(queue):
    global _posts
    _posts = queue


class _QueuePoster(dict):
    def __setitem__(self, key, value):
        _posts.put_nowait((key, value))


def _drain(queue, shared):
    """Move the progress posted so far into ``shared``."""
    while True:
        try:
            key, value = queue.get_nowait()
        except (EOFError, OSError, _queue.Empty):
            return
        shared[key] = value


class _Drawing(dict):
    """The board's mapping in the capturing process itself: each post redraws the board."""

    def __init__(self, board):
        super().__init__()
        self.board = board

    def __setitem__(self, key, value):
        self.board.shared[key] = value
        self.board.show()


def choose_engine(engine, log=_log):
    """The engine the demo runs, and the simulator binary for Verilator: ``(engine, binary)``.

    ``"auto"`` becomes ``"verilator"`` when the simulated instrument builds (compiled once, here,
    before the workers start; every capture then runs that binary), else ``"model"``, logging
    why; ``"verilator"`` raises :class:`LatscopeError` when it cannot be built; other engines are
    returned as given (binary ``None``).
    """
    if engine not in ("auto", "verilator"):
        return engine, None
    binary, reason = verilator_binary()
    if reason is None:
        return "verilator", binary
    if engine == "verilator":
        raise LatscopeError(f"the Verilator engine is not available: {reason}")
    log(f"latscope demo: Verilator unavailable ({reason}); running every packet on the "
        "gateware's bit-exact reference models instead of the real gateware")
    return "model", None


def run_demo(profiles, packets_total, out_dir, *, engine="auto", jobs=2, seed=0, log=_log,
             on_result=None, under_load=None):
    """Capture every profile (``packets_total`` spread evenly) on one engine.

    ``engine="auto"`` runs every packet through the real gateware compiled by Verilator when it
    can be built, else on the gateware's reference models (see :func:`choose_engine`);
    ``"verilator"``, ``"model"`` or ``"amaranth"`` run everything on that engine. Every capture
    is compared with its ground truth (``result["check"]``); ``latscope demo`` fails on a mismatch.
    ``on_result``: called in this process with each capture's dict as it finishes, while the
    other captures run (``latscope demo`` analyses each there). ``under_load``: keyword
    arguments of :func:`~latscope.capture.sim.demo_load.capture_under_load` (``out_dir``,
    ``packets``, ``seed``, ...): the captures under load (:data:`~latscope.capture.sim.
    demo_load.PROFILES`) then run in the same workers after the profiles' captures.

    Returns the per-capture dicts of :func:`capture_profile`, in the order of ``profiles``; with
    ``under_load``, ``(those, the rows under load in PROFILES order)``.
    """
    os.makedirs(out_dir, exist_ok=True)
    each = max(1, math.ceil(packets_total / len(profiles)))
    engine, binary = choose_engine(engine, log)
    results, loaded = _run_tasks(profiles, each, out_dir, engine, jobs, seed, log, binary,
                                 on_result=on_result, under_load=under_load)
    return results if under_load is None else (results, loaded)


def _load_line(row):
    status = "ok" if row["check"]["ok"] else f"MISMATCH ({row['check']})"
    return (f"  [load]  {row['profile']:<16} under {row['scenario']}, "
            f"{row['counted_bg']:,} background frames counted  model     truth {status}")


def _progress_line(r, done, total):
    status = "ok" if r["check"]["ok"] else f"MISMATCH ({r['reason']}; {r['check']})"
    return (f"  [{done:2d}/{total}] {r['profile']:<16} {r['packets']:>7,} packets "
            f"{r['events']:>9,} events  {r['seconds']:6.1f} s  {r['engine']:<9} truth {status}")
