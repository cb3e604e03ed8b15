"""Reference model of the capture front-end (:mod:`latscope.gateware.capture`), Python/NumPy only.

The model states what :class:`~latscope.gateware.capture.CaptureFrontEnd` writes into the capture
FIFO, entry for entry, for a given pin activity, configuration history and FIFO-ready schedule. The
gateware testbenches compare against :func:`capture_entries`; the simulated bench and the Verilator
soak use the vectorised :func:`capture_entries_fast` to check millions of edges.

Time. A *clock cycle* ``t`` counts capture clocks from power-up (the first clock period is 0). The
samples presented at the front-end's ``samples`` port during clock cycle ``k`` form *sample cycle*
``k``; with ``lanes`` samples per cycle the sample of lane ``l`` is tick ``k*lanes + l`` (lane 0
earlier). :class:`Stimulus` describes pin levels per tick. An entry's ``cycle`` is the value of the
free-running counter for its sample cycle: ``k`` counted from power-up or from the last timestamp
reset, modulo ``2**counter_width``.

Configuration. A configuration history is a list of ``(t, Config)``: ``Config`` is presented at the
``config`` port from clock cycle ``t`` until the next entry's cycle (before the first entry the
port holds the reset value :data:`RESET_CONFIG`). ``Config.time_reset`` is a one-cycle pulse: it is
presented only in the entry's own cycle ``t``. Every field acts on the sample cycles that are at the
field's pipeline stage when it arrives; :func:`pipeline` gives these *lags*: sample cycle ``k`` is
governed by the configuration presented in clock cycle ``k + lag``.

FIFO. ``fifo_ready[t]`` is the FIFO's ``w_rdy`` in clock cycle ``t``; the front-end samples it in
its write stage, which holds sample cycle ``t - latency`` (see :func:`pipeline`).
"""

from dataclasses import dataclass, field, replace

import numpy as np

__all__ = [
    "MAX_CHANNELS", "LOST_MAX", "EVENTS", "TICK", "OVERFLOW",
    "Config", "RESET_CONFIG", "Pipeline", "pipeline", "config_at", "check_parameters",
    "selftest_min_ticks",
    "Stimulus", "Entry", "ENTRY_DTYPE", "entries_to_array",
    "capture_entries", "capture_entries_fast", "filtered_levels", "random_stimulus",
    "filter_channel",
]

#: Largest channel count of the front-end (``FrontEndConfig`` holds 16-bit channel masks).
MAX_CHANNELS = 16
#: OVERFLOW entries' ``lost.count`` saturates here (a 40-bit field).
LOST_MAX = 2**40 - 1
#: Entry kinds, equal to :class:`latscope.gateware.protocol.EntryKind` (not imported here so that
#: the model needs no Amaranth).
EVENTS, TICK, OVERFLOW = 0, 1, 2
#: Width of the self-test phase registers, bits.
_PHASE_BITS = 17


@dataclass(frozen=True)
class Config:
    """One value of the front-end's ``config`` port (``FrontEndConfig``), as Python values.

    ``rise_en``, ``fall_en`` and ``selftest_mask`` are channel bit masks (bit ``ch``); ``glitch``
    holds the minimum pulse width per channel in capture cycles (missing channels are 0; values
    above ``max_glitch`` act as ``max_glitch``); ``selftest_high`` and ``selftest_low`` are ticks.
    """
    armed: bool = True
    rise_en: int = 0xFFFF
    fall_en: int = 0xFFFF
    glitch: tuple = ()
    selftest_on: bool = False
    selftest_mask: int = 0
    selftest_high: int = 2
    selftest_low: int = 2
    time_reset: bool = False

    def glitch_of(self, ch):
        """Minimum pulse width of channel ``ch`` as configured (before clamping), cycles."""
        return self.glitch[ch] if ch < len(self.glitch) else 0


#: The ``config`` port's reset value: every field zero (disarmed, no edges enabled, self-test off).
RESET_CONFIG = Config(armed=False, rise_en=0, fall_en=0, glitch=(), selftest_on=False,
                      selftest_mask=0, selftest_high=0, selftest_low=0)


@dataclass(frozen=True)
class Pipeline:
    """Pipeline timing of a front-end, in clock cycles.

    Attributes
    ----------
    latency : int
        Clock cycles from presenting sample cycle ``k`` to the write stage that writes its entry
        (cycle ``k + latency``). The entry still carries ``k``: the pin-to-timestamp offset of the
        front-end is 0.
    lag : dict
        Per configuration field: sample cycle ``k`` is governed by the value presented in clock
        cycle ``k + lag[field]``. ``selftest`` covers ``selftest_on``, ``selftest_high`` and
        ``selftest_low`` (the pattern of sample cycle ``k`` is computed from the value presented
        in cycle ``k - 2``).
    reset_delay : int
        A ``time_reset`` pulse presented in cycle ``t`` makes sample cycle ``t + reset_delay`` the
        new cycle 0.
    """
    latency: int
    lag: dict = field(default_factory=dict)
    reset_delay: int = 2


def pipeline(lanes, max_glitch):
    """Timing of the front-end pipeline for ``lanes`` and ``max_glitch``; see :class:`Pipeline`.

    Stages: 2 synchroniser flops, the self-test injection register, then (only if
    ``max_glitch > 0``) a window of ``max_glitch + 1`` cycles, a registered hold check and the
    filter register, then edge detection, two popcount stages and the combinational write stage.
    """
    level = 3 if max_glitch == 0 else max_glitch + 5   # cycle in which the filtered level register
    return Pipeline(                                    # holds sample cycle 0
        latency=level + 3,
        lag={"selftest": -2, "selftest_mask": 1, "glitch": max_glitch + 1,
             "edges": level - 1},                       # rise_en, fall_en, armed
        reset_delay=2,
    )


def selftest_min_ticks(lanes):
    """Shortest self-test high or low time, ticks: 2, and at least ``lanes``.

    The generator computes each lane's pattern bit from lane 0's phase with one comparison per
    lane, which holds while a lane's phase wraps at most once per cycle into the high part
    (``period > lanes`` and every wrapped phase ``< high``): both widths ``>= lanes``.
    """
    return max(2, lanes)


def check_parameters(*, channels, lanes, counter_width, max_glitch, heartbeat_shift):
    """Raise ``TypeError``/``ValueError`` with a precise message for bad front-end parameters.

    Shared by the gateware constructor and the model, so both accept exactly the same designs.
    """
    def integer(name, value):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not {value!r}")
    integer("Channel count", channels)
    if not 1 <= channels <= MAX_CHANNELS:
        raise ValueError(f"Channel count must be from 1 to {MAX_CHANNELS}, not {channels!r}")
    integer("Lane count", lanes)
    if lanes not in (1, 2, 4):
        raise ValueError(f"Lane count must be 1 (SDR), 2 (DDR) or 4 (DDR with 2:1 gearing), "
                         f"not {lanes!r}")
    integer("Counter width", counter_width)
    if not 8 <= counter_width <= 64:
        raise ValueError(f"Counter width must be from 8 to 64 bits, not {counter_width!r}")
    integer("Maximum glitch width", max_glitch)
    if not 0 <= max_glitch <= 255:
        raise ValueError(f"Maximum glitch width must be from 0 to 255 capture cycles, "
                         f"not {max_glitch!r}")
    integer("Heartbeat shift", heartbeat_shift)
    if not 1 <= heartbeat_shift < counter_width:
        raise ValueError(f"Heartbeat shift must be from 1 to counter width - 1 "
                         f"({counter_width - 1}) so that ticks come at least twice per counter "
                         f"wrap, not {heartbeat_shift!r}")


def config_timeline(config):
    if isinstance(config, Config):
        return [(0, config)]
    timeline = sorted(((int(t), c) for t, c in config), key=lambda tc: tc[0])
    for _t, c in timeline:
        if not isinstance(c, Config):
            raise TypeError(f"Configuration history entries must be (cycle, Config), not {c!r}")
    cycles = [t for t, _ in timeline]
    if len(set(cycles)) != len(cycles):
        raise ValueError("Configuration history has two entries for the same cycle")
    return timeline


def config_at(config, t):
    """The ``Config`` presented at the ``config`` port in clock cycle ``t``.

    ``config`` is a ``Config`` (presented from cycle 0) or a history ``[(cycle, Config), ...]``.
    ``time_reset`` is true only in the cycle of the history entry that sets it.
    """
    current, start = RESET_CONFIG, None
    for cycle, c in config_timeline(config):
        if cycle <= t:
            current, start = c, cycle
    if current.time_reset and start != t:
        current = replace(current, time_reset=False)
    return current


def _field(timeline, cycles, getter):
    """``getter(config presented in clock cycle c)`` for every c in ``cycles`` (an array)."""
    starts = np.array([t for t, _ in timeline], dtype=np.int64)
    values = np.array([getter(RESET_CONFIG)] + [getter(c) for _, c in timeline])
    return values[np.searchsorted(starts, cycles, side="right")]


# --- Stimulus ------------------------------------------------------------------------------------

@dataclass
class Stimulus:
    """Pin activity: from tick ``ticks[i]`` on, bit ``ch`` of ``values[i]`` is channel ``ch``.

    ``ticks`` (int64) is strictly increasing; all channels are 0 before the first tick listed.
    A tick is ``cycle * lanes + lane``.
    """
    ticks: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        self.ticks = np.asarray(self.ticks, dtype=np.int64)
        self.values = np.asarray(self.values, dtype=np.uint16)
        if self.ticks.ndim != 1 or self.ticks.shape != self.values.shape:
            raise ValueError("Stimulus ticks and values must be 1-D arrays of the same length")
        if len(self.ticks) and (self.ticks[0] < 0 or np.any(np.diff(self.ticks) <= 0)):
            raise ValueError("Stimulus ticks must be non-negative and strictly increasing")

    @classmethod
    def from_edges(cls, edges):
        """Build from per-channel toggle lists: ``edges[ch]`` holds the ticks where channel
        ``ch`` changes level (it starts at 0), each tick at most once per channel."""
        all_ticks, all_bits = [], []
        for ch, toggles in enumerate(edges):
            toggles = np.asarray(toggles, dtype=np.int64)
            if len(np.unique(toggles)) != len(toggles):
                raise ValueError(f"Channel {ch} lists the same edge tick twice")
            all_ticks.append(toggles)
            all_bits.append(np.full(len(toggles), 1 << ch, dtype=np.uint16))
        if not all_ticks:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.uint16))
        ticks = np.concatenate(all_ticks)
        bits = np.concatenate(all_bits)
        order = np.argsort(ticks, kind="stable")
        ticks, bits = ticks[order], bits[order]
        uniq, start = np.unique(ticks, return_index=True)
        toggle = np.bitwise_or.reduceat(bits, start) if len(bits) else bits
        return cls(uniq, np.bitwise_xor.accumulate(toggle.astype(np.uint16)))

    @classmethod
    def from_levels(cls, levels):
        """Build from a dense array of per-tick levels (bit ``ch`` = channel ``ch``) from tick 0."""
        levels = np.asarray(levels, dtype=np.uint16)
        prev = np.concatenate([[0], levels[:-1]]).astype(np.uint16)
        idx = np.flatnonzero(levels != prev)
        return cls(idx.astype(np.int64), levels[idx])

    def levels(self, n_ticks):
        """Dense per-tick levels for ticks ``0 .. n_ticks-1`` (uint16)."""
        idx = np.searchsorted(self.ticks, np.arange(n_ticks, dtype=np.int64), side="right") - 1
        values = np.concatenate([[0], self.values]).astype(np.uint16)
        out = values[idx + 1]
        return out.astype(np.uint16)

    def samples(self, n_cycles, *, lanes, channels):
        """Per-cycle values for the ``samples`` port: bit ``lane*channels + ch`` (uint64)."""
        lv = self.levels(n_cycles * lanes).astype(np.uint64).reshape(n_cycles, lanes)
        lv &= np.uint64((1 << channels) - 1)
        out = np.zeros(n_cycles, np.uint64)
        for lane in range(lanes):
            out |= lv[:, lane] << np.uint64(lane * channels)
        return out


# --- Entries -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One capture FIFO entry. EVENTS: ``edges`` and ``levels`` (bit ``lane*channels + ch``);
    OVERFLOW: ``count`` (edges lost) and ``span`` (cycles from the first to the last lost one);
    TICK: only ``cycle``. Unused fields are 0."""
    kind: int
    cycle: int
    edges: int = 0
    levels: int = 0
    count: int = 0
    span: int = 0


ENTRY_DTYPE = np.dtype([("kind", np.uint8), ("cycle", np.uint64), ("edges", np.uint64),
                        ("levels", np.uint64), ("count", np.uint64), ("span", np.uint64)])


def entries_to_array(entries):
    """A list of :class:`Entry` as a structured array of :data:`ENTRY_DTYPE`."""
    return np.array([(e.kind, e.cycle, e.edges, e.levels, e.count, e.span) for e in entries],
                    dtype=ENTRY_DTYPE)


def filter_channel(x, hold):
    """Look-ahead glitch filter of one channel: ``x`` 0/1 per tick, ``hold`` samples per tick.

    ``y[n] = x[n]`` if ``x[n .. n+hold[n]-1]`` are all equal, else ``y[n-1]`` (``y[-1] = 0``).
    The run after the last change counts as endless.
    """
    n = len(x)
    change = np.flatnonzero(np.diff(x)) + 1                  # first tick of each later run
    run_end = np.concatenate([change, [np.iinfo(np.int64).max // 2]])
    run_of = np.searchsorted(change, np.arange(n), side="right")
    ahead = run_end[run_of] - np.arange(n)                   # equal samples from n on, incl. n
    ok = ahead >= hold
    last_ok = np.maximum.accumulate(np.where(ok, np.arange(n), -1))
    return np.where(last_ok >= 0, x[np.maximum(last_ok, 0)], 0).astype(np.uint8)


def selftest_pattern(timeline, n_cycles, lanes):
    """Per cycle: the generator's pattern bits (lane-major) and whether it is active."""
    pattern = np.zeros(n_cycles, np.uint8)
    active = np.zeros(n_cycles, bool)
    if not any(c.selftest_on for _, c in timeline):
        return pattern, active
    mask = (1 << _PHASE_BITS) - 1
    phase = list(range(lanes))
    pat, act, widths = 0, False, None
    for t in range(n_cycles):
        pattern[t], active[t] = pat, act
        c = config_at(timeline, t - 1)            # the registered copy of the config port
        if c.selftest_on:
            if act and (c.selftest_high, c.selftest_low) != widths:
                phase = list(range(lanes))       # new widths while running: restart
            widths = (c.selftest_high, c.selftest_low)
            high, low = widths
            least = selftest_min_ticks(lanes)
            if high < least or low < least:
                raise ValueError(f"self-test widths must be at least {least} ticks with "
                                 f"{lanes} lanes, not {high}/{low}")
            period = high + low
            pat = sum(int(p < high) << j for j, p in enumerate(phase))
            phase = [(p + lanes - period if p + lanes >= period else p + lanes) & mask
                     for p in phase]
            act = True
        else:
            pat, act, phase = 0, False, list(range(lanes))
    return pattern, active


def filtered_levels(stimulus, config, *, channels, lanes, max_glitch, n_cycles):
    """Per-tick levels after self-test injection and glitch filter, ticks ``0 .. n_cycles*lanes-1``.

    Returns ``(raw, filtered)`` uint16 arrays (bit ``ch``): ``raw`` is what enters the filter
    (pins with the self-test pattern injected).
    """
    timeline = config_timeline(config)
    pipe = pipeline(lanes, max_glitch)
    n_ticks = n_cycles * lanes
    cycles = np.arange(n_cycles, dtype=np.int64)
    raw = stimulus.levels(n_ticks) & np.uint16((1 << channels) - 1)
    pattern, active = selftest_pattern(timeline, n_cycles, lanes)
    if active.any():
        inj = _field(timeline, cycles + pipe.lag["selftest_mask"], lambda c: c.selftest_mask)
        inj = np.where(active, inj, 0).astype(np.uint16) & np.uint16((1 << channels) - 1)
        inj_t = np.repeat(inj, lanes)
        pat_t = ((pattern[:, None] >> np.arange(lanes)) & 1).reshape(-1).astype(bool)
        raw = np.where(pat_t, raw | inj_t, raw & ~inj_t).astype(np.uint16)
    filtered = np.zeros(n_ticks, np.uint16)
    for ch in range(channels):
        x = ((raw >> ch) & 1).astype(np.uint8)
        g = _field(timeline, cycles + pipe.lag["glitch"], lambda c, ch=ch: c.glitch_of(ch))
        hold = np.repeat(np.minimum(g, max_glitch) * lanes, lanes)
        filtered |= (filter_channel(x, hold).astype(np.uint16) << ch)
    return raw, filtered


def _popcount(v):
    return bin(int(v)).count("1")


def _cycle_edges(filtered, timeline, *, channels, lanes, max_glitch, n_cycles):
    """Per sample cycle: enabled edge bits and level bits, lane-major (uint64 each)."""
    pipe = pipeline(lanes, max_glitch)
    cycles = np.arange(n_cycles, dtype=np.int64)
    prev = np.concatenate([[0], filtered[:-1]]).astype(np.uint16)
    at = cycles + pipe.lag["edges"]
    rise = np.repeat(_field(timeline, at, lambda c: c.rise_en), lanes).astype(np.uint16)
    fall = np.repeat(_field(timeline, at, lambda c: c.fall_en), lanes).astype(np.uint16)
    armed = np.repeat(_field(timeline, at, lambda c: bool(c.armed)), lanes)
    changed = filtered ^ prev
    edges = (changed & filtered & rise) | (changed & ~filtered & fall)
    edges = np.where(armed, edges, 0).astype(np.uint64) & np.uint64((1 << channels) - 1)
    lv = filtered.astype(np.uint64).reshape(n_cycles, lanes)
    ed = edges.reshape(n_cycles, lanes)
    levels = np.zeros(n_cycles, np.uint64)
    edge_bits = np.zeros(n_cycles, np.uint64)
    for lane in range(lanes):
        levels |= lv[:, lane] << np.uint64(lane * channels)
        edge_bits |= ed[:, lane] << np.uint64(lane * channels)
    return edge_bits, levels


def capture_entries(stimulus, config, *, channels, lanes, counter_width, max_glitch,
                    heartbeat_shift, fifo_ready=None, n_cycles):
    """Every entry the front-end writes during clock cycles ``0 .. n_cycles-1``, in order.

    Parameters
    ----------
    stimulus : Stimulus
        Pin levels per tick.
    config : Config or list of (int, Config)
        The ``config`` port: one value from cycle 0, or a history (see the module docstring).
    channels, lanes, counter_width, max_glitch, heartbeat_shift : int
        The front-end's parameters.
    fifo_ready : array of bool, optional
        ``fifo_w_rdy`` per clock cycle (length ``n_cycles``); always ready if omitted.
    n_cycles : int
        Clock cycles simulated.

    Returns
    -------
    list of Entry
        In write order. An entry written in clock cycle ``t`` is for sample cycle
        ``t - pipeline(lanes, max_glitch).latency``.
    """
    check_parameters(channels=channels, lanes=lanes, counter_width=counter_width,
                     max_glitch=max_glitch, heartbeat_shift=heartbeat_shift)
    timeline = config_timeline(config)
    pipe = pipeline(lanes, max_glitch)
    if fifo_ready is None:
        fifo_ready = np.ones(n_cycles, bool)
    fifo_ready = np.asarray(fifo_ready, bool)
    if len(fifo_ready) < n_cycles:
        raise ValueError(f"fifo_ready has {len(fifo_ready)} cycles, fewer than n_cycles")
    _, filtered = filtered_levels(stimulus, timeline, channels=channels, lanes=lanes,
                                  max_glitch=max_glitch, n_cycles=n_cycles)
    edges, levels = _cycle_edges(filtered, timeline, channels=channels, lanes=lanes,
                                 max_glitch=max_glitch, n_cycles=n_cycles)
    # a pulse presented in cycle t clears the write stage at the end of clock cycle t + 1, and
    # sample cycle t + 2 (= t + reset_delay) becomes cycle 0
    resets = {t + pipe.reset_delay - 1 for t, c in timeline if c.time_reset and t >= 0}
    wrap = 1 << counter_width
    beat = 1 << heartbeat_shift
    span_max = wrap - 1

    out = []
    epoch = 0                                     # sample cycle that is counter value 0
    ovf = tick_pending = False
    first = count = span = since = 0
    for w in range(n_cycles):
        k = w - pipe.latency
        if k >= epoch:
            cyc = (k - epoch) % wrap
            ev = bool(edges[k])
            pc = _popcount(edges[k]) if ev else 0
            due = tick_pending or cyc % beat == 0
            since_next = min(since + 1, span_max)
            if not fifo_ready[w]:
                tick_pending = False
                if ev and ovf:
                    count, span = min(count + pc, LOST_MAX), since
                elif ev:
                    ovf, first, count, span, since_next = True, cyc, pc, 0, 1
            elif ovf:
                out.append(Entry(OVERFLOW, first, count=min(count + pc, LOST_MAX) if ev else count,
                                 span=since if ev else span))
                ovf, tick_pending = False, due
            elif ev:
                out.append(Entry(EVENTS, cyc, edges=int(edges[k]), levels=int(levels[k])))
                tick_pending = due
            elif due:
                out.append(Entry(TICK, cyc))
                tick_pending = False
            since = since_next if ovf else since
        if w in resets:
            epoch = w + 1
            ovf = tick_pending = False
    return out


def capture_entries_fast(stimulus, config, *, channels, lanes, counter_width, max_glitch,
                         heartbeat_shift, n_cycles):
    """Vectorised :func:`capture_entries` for long, sparse stimuli.

    Restrictions: one ``Config`` from cycle 0 with self-test off and no time reset; the FIFO is
    always ready (so there is no OVERFLOW entry). Works on change points only, so ``n_cycles`` may
    be far larger than memory would allow for dense arrays.

    Returns
    -------
    numpy.ndarray
        Structured array of :data:`ENTRY_DTYPE`, in write order.
    """
    check_parameters(channels=channels, lanes=lanes, counter_width=counter_width,
                     max_glitch=max_glitch, heartbeat_shift=heartbeat_shift)
    if not isinstance(config, Config):
        raise TypeError("capture_entries_fast takes one Config, not a history")
    if config.selftest_on or config.time_reset:
        raise ValueError("capture_entries_fast does not model self-test or time reset")
    pipe = pipeline(lanes, max_glitch)
    last = n_cycles - pipe.latency                # sample cycles 0 .. last-1 are written
    ticks, values = stimulus.ticks, stimulus.values.astype(np.uint16)
    prev_values = np.concatenate([[0], values[:-1]]).astype(np.uint16)
    ev_tick, ev_bit = [], []
    filt_changes = []
    for ch in range(channels):
        chg = ((values ^ prev_values) >> ch) & 1
        starts = ticks[chg.astype(bool)]
        hold = min(config.glitch_of(ch), max_glitch) * lanes
        if hold > 1 and len(starts):
            length = np.diff(np.concatenate([starts, [np.iinfo(np.int64).max // 2]]))
            lvl = (np.arange(len(starts)) + 1) & 1                 # runs alternate from 1
            long = length >= hold
            s_long, l_long = starts[long], lvl[long]
            prev_long = np.concatenate([[0], l_long[:-1]])
            starts = s_long[l_long != prev_long]
        filt_changes.append(starts)
        rising = ((np.arange(len(starts)) + 1) & 1).astype(bool)
        enabled = np.where(rising, config.rise_en >> ch & 1, config.fall_en >> ch & 1)
        sel = enabled.astype(bool) & (starts < last * lanes)
        if not config.armed:
            sel[:] = False
        ev_tick.append(starts[sel])
        ev_bit.append(((starts[sel] % lanes) * channels + ch).astype(np.uint64))
    ev_tick = np.concatenate(ev_tick) if ev_tick else np.zeros(0, np.int64)
    ev_bit = np.concatenate(ev_bit) if ev_bit else np.zeros(0, np.uint64)
    ev_cycle_all = ev_tick // lanes
    ev_cycles, inverse = np.unique(ev_cycle_all, return_inverse=True)
    edge_bits = np.zeros(len(ev_cycles), np.uint64)
    np.bitwise_or.at(edge_bits, inverse, np.uint64(1) << ev_bit)
    level_bits = np.zeros(len(ev_cycles), np.uint64)
    for ch in range(channels):
        for lane in range(lanes):
            t = ev_cycles * lanes + lane
            lv = (np.searchsorted(filt_changes[ch], t, side="right") & 1).astype(np.uint64)
            level_bits |= lv << np.uint64(lane * channels + ch)

    # Ticks: due at multiples of 2**heartbeat_shift, written in the first cycle without events.
    beat = 1 << heartbeat_shift
    due = np.arange(0, max(last, 0), beat, dtype=np.int64)
    if len(ev_cycles):
        run_start = np.concatenate([[True], np.diff(ev_cycles) != 1])
        run_id = np.cumsum(run_start) - 1
        run_last = ev_cycles[np.concatenate([np.flatnonzero(run_start[1:]), [len(ev_cycles) - 1]])]
        idx = np.searchsorted(ev_cycles, due)
        hit = (idx < len(ev_cycles)) & (ev_cycles[np.minimum(idx, len(ev_cycles) - 1)] == due)
        moved = run_last[run_id[np.minimum(idx, len(ev_cycles) - 1)]] + 1
        due = np.unique(np.where(hit, moved, due))
    tick_cycles = due[due < last]

    out = np.zeros(len(ev_cycles) + len(tick_cycles), ENTRY_DTYPE)
    order = np.argsort(np.concatenate([ev_cycles, tick_cycles]), kind="stable")
    kinds = np.concatenate([np.full(len(ev_cycles), EVENTS), np.full(len(tick_cycles), TICK)])
    cyc = np.concatenate([ev_cycles, tick_cycles]).astype(np.uint64)
    out["kind"] = kinds[order]
    out["cycle"] = cyc[order] & np.uint64((1 << counter_width) - 1)
    out["edges"] = np.concatenate([edge_bits, np.zeros(len(tick_cycles), np.uint64)])[order]
    out["levels"] = np.concatenate([level_bits, np.zeros(len(tick_cycles), np.uint64)])[order]
    return out


def random_stimulus(rng, *, channels, n_ticks, edges_per_channel=40, shared=10, pulses=5,
                    toggle_bursts=1, burst_width=6):
    """Random pin activity for tests: independent edges, edges shared by all channels (so they
    coincide), 1-sample pulses, and RMII-like bursts of pulses ``burst_width`` ticks wide.

    Parameters
    ----------
    rng : numpy.random.Generator
    channels, n_ticks : int
        Channels and the tick range ``[0, n_ticks)`` to fill.
    edges_per_channel, shared, pulses, toggle_bursts, burst_width : int
        Independent toggles per channel, toggle ticks common to all channels, 1-tick pulses per
        channel, toggle bursts per channel (5 to 9 toggles ``burst_width`` apart).
    """
    common = rng.choice(n_ticks, size=min(shared, n_ticks), replace=False)
    per_channel = []
    for _ch in range(channels):
        ticks = [rng.integers(0, n_ticks, edges_per_channel), common]
        for start in rng.integers(0, n_ticks - 1, pulses):
            ticks.append([start, start + 1])
        for start in rng.integers(0, n_ticks, toggle_bursts):
            ticks.append(start + burst_width * np.arange(rng.integers(5, 10)))
        ticks = np.concatenate([np.asarray(t, np.int64) for t in ticks])
        ticks = ticks[(ticks >= 0) & (ticks < n_ticks)]
        # a tick listed an even number of times cancels out; keep the odd ones once
        uniq, counts = np.unique(ticks, return_counts=True)
        per_channel.append(uniq[counts % 2 == 1])
    return Stimulus.from_edges(per_channel)
