"""A simulated run produced block by block, so that memory does not grow with its length.

:class:`SimStream` simulates a run of any length as consecutive blocks of
:data:`BLOCK_PACKETS` packets (:data:`LOAD_BLOCK_PACKETS` under load), each a
:class:`~latscope.capture.sim.sim_dut.SimRun` (or
:class:`~latscope.capture.sim.sim_load.LoadRun`) of its own: block 0 is exactly the run
:func:`~latscope.capture.sim.sim_dut.simulate` (or
:func:`~latscope.capture.sim.sim_load.simulate_load`) gives with the run's seed, so a run of at most
one block is unchanged; block ``b`` is simulated with its own seed (drawn from ``(seed, b)``) and
clock phases, and placed after the previous block: the host's turnaround after the last echo, or
the next multiple of the request period under load (paced traffic keeps its schedule). Its
packets, requests and frames are numbered on from the previous blocks. Engines take the blocks
as they need them; :class:`TruthWriter` writes the ground truth of each block as it is produced.

Part of :mod:`latscope.capture.sim.simbench`.
"""

import functools
import json
import math
import os
import shutil
import tempfile
import threading
import zipfile

import numpy as np

from latscope import LatscopeError
from latscope.capture.files import capfile
from latscope.capture.sim.sim_dut import InstrumentTiming, SimRun, simulate
from latscope.capture.sim.sim_load import (
    LoadRun,
    load_scenario,
    probe_frame,
    request_offset_ns,
    simulate_load,
)
from latscope.capture.sim.sim_profile import MII_CLOCK_NS, load_profile

__all__ = ["SimStream", "TruthWriter", "BLOCK_PACKETS", "LOAD_BLOCK_PACKETS"]

#: Packets per block of an echo or paced run (a block's arrays take a few tens of MB).
BLOCK_PACKETS = 1 << 14
#: Measured requests per block of a run under load (1 s at 1 kHz: ~20,000 frames at 60 %).
LOAD_BLOCK_PACKETS = 1000


def _block_seed(seed, block):
    """Seed of block ``block`` (block 0: the run's own seed)."""
    if block == 0:
        return seed
    return int(np.random.SeedSequence((seed, block)).generate_state(1, np.uint64)[0])


class SimStream:
    """A simulated run of ``packets`` packets of ``profile``, produced by :meth:`blocks`.

    Parameters are those of :func:`~latscope.capture.sim.sim_dut.simulate` and, with ``load``, of
    :func:`~latscope.capture.sim.sim_load.simulate_load`. The first block is simulated at once (it
    checks the parameters and fills :attr:`meta`); the others when :meth:`blocks` reaches them.
    ``truth``: a :class:`TruthWriter` that receives each block's ground truth as it is produced.

    Attributes
    ----------
    n_packets : int
        Packets (measured requests under load) of the whole run.
    n_events : int or None
        Events the instrument must report for the whole run; under load known only once every
        block was produced (``None`` before).
    events_done : int
        Events of the blocks produced so far.

    Examples
    --------
    >>> stream = SimStream("el-dm-64", 40_000, seed=1)
    >>> stream.n_events, [block.n_packets for block in stream.blocks()]
    (560000, [16384, 16384, 7232])
    """

    def __init__(self, profile, packets, *, seed=0, load=None, traffic=None, timing=None,
                 truth=None):
        if isinstance(profile, (str, os.PathLike)):
            profile = load_profile(profile)
        if isinstance(packets, bool) or not isinstance(packets, (int, np.integer)) \
                or packets < 1:
            raise LatscopeError(f"packet count must be a positive integer, not {packets!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise LatscopeError(f"seed must be a non-negative integer, not {seed!r}")
        self.profile, self.seed = profile, int(seed)
        self.n_packets = int(packets)
        self.scenario = load_scenario(load) if load is not None else None
        self.timing = timing or InstrumentTiming()
        self.block_packets = LOAD_BLOCK_PACKETS if self.scenario is not None else BLOCK_PACKETS
        self.traffic = traffic
        self._first = self._simulate(0, min(self.n_packets, self.block_packets))
        self.traffic = self._first.traffic
        self.meta = dict(self._first.meta, packets=self.n_packets)
        if self.n_packets > self.block_packets:
            self.meta["block_packets"] = self.block_packets
        if self.scenario is None:       # every packet has the same edges
            per_packet = self._first.n_events // self._first.n_packets
            self.n_events = per_packet * self.n_packets
        else:
            self.n_events = None if self.n_packets > self.block_packets else \
                self._first.n_events
        self.truth = truth
        #: called with :attr:`n_events` when it becomes known (the last block is produced)
        self.on_total = None
        if truth is not None:
            truth.append(self._first.truth)
        self.events_done = 0
        self.blocks_done = 0
        self._used = False

    def _simulate(self, block, n):
        seed = _block_seed(self.seed, block)
        if self.scenario is not None:
            return simulate_load(self.profile, n, self.scenario, seed=seed, timing=self.timing)
        return simulate(self.profile, n, seed=seed, traffic=self.traffic, timing=self.timing)

    def blocks(self):
        """Yield the run's blocks in time order, each a ``SimRun`` (``LoadRun`` under load) in
        the run's time base: ticks and times from the run's start, packets, requests and frames
        numbered from the run's first (``wire[d]["first_index"]``). Each block's truth goes to
        the stream's :class:`TruthWriter` before the block is yielded. A stream plays once."""
        if self._used:
            raise LatscopeError("a simulated run's blocks can be played only once")
        self._used = True
        tick_ns = self.timing.tick_ns
        lead_ns = self.timing.lead_ticks * tick_ns
        shift_ticks = 0
        done = 0
        block = 0
        frames = [0, 0]
        while done < self.n_packets:
            n = min(self.block_packets, self.n_packets - done)
            run = self._first if block == 0 else self._simulate(block, n)
            self._first = None
            if block:
                run = self._shifted(run, shift_ticks, done, frames)
            if block and self.truth is not None:
                self.truth.append(run.truth)
            self.events_done += run.n_events
            self.blocks_done = block + 1
            done += n
            block += 1
            if done >= self.n_packets:
                self.n_events = self.events_done
                if self.on_total is not None:
                    self.on_total(self.n_events)
            if isinstance(run, LoadRun):
                frames = [frames[d] + len(run.wire[d]["frames"]) for d in (0, 1)]
            last_ns = float(run.truth["time_ns"][-1]) if run.n_events else \
                shift_ticks * tick_ns + lead_ns
            yield run
            del run
            # where the next block's own time 0 goes (its first edge follows its lead time)
            if self.scenario is not None:
                period = 1e9 / self.scenario.probe_rate_pps
                start_ns = math.ceil((last_ns - lead_ns + 1000.0) / period) * period
            else:
                start_ns = last_ns - lead_ns + 1000.0 * self.traffic.host_turnaround_us
                if self.traffic.mode == "paced":
                    start_ns = max(start_ns, done * 1e9 / self.traffic.rate_pps)
                start_ns = math.ceil(start_ns / MII_CLOCK_NS) * MII_CLOCK_NS
            shift_ticks = math.ceil(start_ns / tick_ns)

    def _shifted(self, run, shift_ticks, first_packet, frames):
        """``run`` moved ``shift_ticks`` later, its packets numbered from ``first_packet`` (its
        frames from ``frames[d]``)."""
        shift_ns = shift_ticks * self.timing.tick_ns
        truth = dict(run.truth)
        truth["time"] = truth["time"] + shift_ticks
        for key, value in run.truth.items():
            if key.endswith("_ns") and key != "queue_ns":
                truth[key] = value + shift_ns
        if "packet" in truth:
            truth["packet"] = truth["packet"] + first_packet
        stimulus = type(run.stimulus)(run.stimulus.ticks + shift_ticks, run.stimulus.values)
        fields = dict(profile=run.profile, timing=run.timing, traffic=run.traffic,
                      stimulus=stimulus, truth=truth, meta=run.meta)
        if not isinstance(run, LoadRun):
            return SimRun(**fields)
        run_id = self.seed & 0xFFFF
        intended = 4 * MII_CLOCK_NS + shift_ns    # the block's first request's intended time
        offset = functools.partial(request_offset_ns, scenario=self.scenario)
        wire = {}
        for d, w in run.wire.items():
            probe = np.asarray(w["probe"])
            sizes = [len(f) for f in w["frames"]]
            if d == 0:
                built = [probe_frame(sizes[i], k + first_packet, intended + offset(k), run_id)
                         if k >= 0 else w["frames"][i] for i, k in enumerate(probe)]
                probe = np.where(probe >= 0, probe + first_packet, probe)
            else:
                built = [probe_frame(sizes[i], k + first_packet, intended + offset(k), run_id,
                                     reply=True) for i, k in enumerate(probe)]
                probe = probe + first_packet
            wire[d] = {"frames": built, "start_ns": w["start_ns"] + shift_ns,
                       "end_ns": w["end_ns"] + shift_ns, "probe": probe,
                       "first_index": frames[d]}
        return LoadRun(**fields, wire=wire, scenario=run.scenario)

    def materialize(self):
        """The whole run as one ``SimRun`` (for short runs: it holds every array)."""
        runs = list(self.blocks())
        if len(runs) == 1:
            return runs[0]
        first = runs[0]
        merged = {}
        for key, value in first.truth.items():
            if np.ndim(value) == 0:
                merged[key] = np.array(sum(r.truth[key] for r in runs))
            else:
                merged[key] = np.concatenate([r.truth[key] for r in runs])
        stimulus = type(first.stimulus)(np.concatenate([r.stimulus.ticks for r in runs]),
                                        np.concatenate([r.stimulus.values for r in runs]))
        fields = dict(profile=first.profile, timing=first.timing, traffic=first.traffic,
                      stimulus=stimulus, truth=merged, meta=dict(self.meta))
        if not isinstance(first, LoadRun):
            return SimRun(**fields)
        wire = {d: {"frames": [f for r in runs for f in r.wire[d]["frames"]],
                    **{k: np.concatenate([r.wire[d][k] for r in runs])
                       for k in ("start_ns", "end_ns", "probe")}} for d in (0, 1)}
        return LoadRun(**fields, wire=wire, scenario=first.scenario)


class TruthWriter:
    """Write a run's ground truth beside its capture (``capfile.truth_path``) as it is produced.

    :meth:`append` adds a block's truth (arrays are appended to one file per key in a folder
    beside the capture; 0-d counts are summed); :meth:`close` assembles the ``.truth.npz``
    (:meth:`SimRun.save_truth`'s format: one ``simbench/KEY`` array per key, ``simbench/meta``
    as JSON) and replaces the file atomically. Memory stays that of one block.

    An engine appends from its own thread while the capture may close the writer at any moment
    (Ctrl-C, a limit): a lock makes each block's append whole before or after the close, and an
    append after it is ignored (the truth then holds the blocks simulated up to the close, every
    key the same length).
    """

    def __init__(self, capture_path):
        self.path = capfile.truth_path(capture_path)
        folder = os.path.dirname(os.path.abspath(self.path))
        self._parts = tempfile.mkdtemp(prefix=os.path.basename(self.path) + ".parts-",
                                       dir=folder)
        self._keys = {}      # key -> (dtype, length) of the arrays appended
        self._sums = {}      # key -> 0-d total
        self._lock = threading.Lock()
        self._closed = False

    def append(self, truth):
        """Append one block's truth (``{key: array}``; ``stage/S`` keys as in ``SimRun``);
        nothing once the writer is closed or abandoned."""
        with self._lock:
            if not self._closed:
                self._append(truth)

    def _append(self, truth):
        for key, value in truth.items():
            name = key.replace("/", "_")
            value = np.asarray(value)
            if value.ndim == 0:
                self._sums[name] = self._sums.get(name, 0) + value
                continue
            dtype, length = self._keys.get(name, (value.dtype, 0))
            if value.dtype != dtype:
                raise ValueError(f"truth key {key!r} changed type: {dtype} then {value.dtype}")
            with open(os.path.join(self._parts, name), "ab") as f:
                f.write(np.ascontiguousarray(value).tobytes())
            self._keys[name] = (dtype, length + len(value))

    def close(self, meta):
        """Write the ``.truth.npz`` with ``meta`` (a JSON-ready dict); returns its path."""
        with self._lock:
            self._closed = True
            return self._write(meta)

    def _write(self, meta):
        temp = self.path + ".tmp"
        try:
            # the fastest level: nearly all of deflate's size gain for a fraction of its CPU
            with zipfile.ZipFile(temp, "w", compression=zipfile.ZIP_DEFLATED,
                                 compresslevel=1) as zf:
                for name, (dtype, length) in self._keys.items():
                    with zf.open(f"simbench/{name}.npy", "w", force_zip64=True) as out:
                        np.lib.format.write_array_header_1_0(out, {
                            "descr": np.lib.format.dtype_to_descr(dtype),
                            "fortran_order": False, "shape": (length,)})
                        with open(os.path.join(self._parts, name), "rb") as part:
                            shutil.copyfileobj(part, out, 1 << 20)
                for name, total in self._sums.items():
                    self._member(zf, name, np.asarray(total))
                self._member(zf, "meta", np.array(json.dumps(meta)))
            os.replace(temp, self.path)
        except BaseException:
            if os.path.exists(temp):
                os.remove(temp)
            raise
        finally:
            shutil.rmtree(self._parts, ignore_errors=True)
        return self.path

    @staticmethod
    def _member(zf, name, array):
        with zf.open(f"simbench/{name}.npy", "w", force_zip64=True) as out:
            np.lib.format.write_array(out, array, allow_pickle=False)

    def abandon(self):
        """Remove what was written (no truth file is left)."""
        with self._lock:
            self._closed = True
            shutil.rmtree(self._parts, ignore_errors=True)

