"""``latscope replay-pins``: recorded or generated pin activity through the real gateware.

A VCD (any writer's scalar wires, or a ``latscope export --format vcd``) or a sigrok ``.sr`` holds
levels of the pins a board would see: ``RX_DV``/``TX_EN``/``CRS_DV`` and the DUT's markers (the
capture channels) and, for frame capture, the MII/RMII clocks and data. :func:`replay_pins` plays
them through :class:`~latscope.gateware.top.LatscopeCore` compiled with Verilator
(:mod:`latscope.gateware.verilator`; the capture front end and, with ``frames``, the sniffers of
:mod:`latscope.gateware.frames`) and records what the instrument sends through the normal host
path (:class:`PinReplayTransport` -> :mod:`latscope.capture.link.session` -> ``.lsc``), so
``latscope analyze/info/verify/export`` read the result like a board's capture. It is how a user
checks their wiring from a logic-analyzer recording, and how tests feed stimulus from independent
models.

How recording times become the instrument's (``docs/replay-pins.md`` says the same for users):

- **Capture channels** are resampled to the instrument's tick (``1 / (capture_hz * lanes)``;
  ECPIX-5 1.25 ns, ``ecpix5-x1`` 3.125 ns, iCEBreaker 10.4 ns): an edge at recording time ``t``
  becomes a level change at the nearest tick, ``floor(t / tick + 1/2)``, counted from the first
  edge of the recording. A pulse whose two edges land on the same tick (narrower than about one
  tick) is dropped: a board samples each pin once per tick and may or may not see it. Dropped
  pulses are counted in the capture's metadata (``replay.dropped_pulses``).
- **PHY pins** (``--frames``) are sampled as the MAC side of the bus does: at each rising edge of
  the PHY clock the data, valid and error pins take the levels they had *just before* that edge
  (the PHY launches data on the previous edge, so the recording's levels before the edge are the
  ones set up). The clock is the recording's ``rx_clk``/``tx_clk``/``ref_clk`` when mapped;
  otherwise it is generated at the nominal rate (MII 25 MHz, RMII 50 MHz) with its rising edges
  in the middle of each bit time, phase-locked to the rising edge of valid that starts each
  burst. Clock edges are played at the nearest capture clock cycle. Only clock cycles from two
  before a valid pulse to 24 after it are played: elsewhere the sniffer is idle, and a long
  recording then costs no PHY-clock simulation.
"""

import dataclasses
import os
import threading
import time as _time

import numpy as np

from latscope import LatscopeError
from latscope.capture.files import capfile, sigrok
from latscope.capture.files.outputs import PendingOutput, check_output
from latscope.capture.files.reimport import read_vcd
from latscope.capture.link import session
from latscope.gateware import protocol, verilator
from latscope.gateware.boards import frame_pins, get_board
from latscope.gateware.build import frame_build_options
from latscope.gateware.verilator import (
    OP_PHY,
    OP_SAMPLES,
    PHY_BITS,
    PHY_SIDE_SHIFT,
    VerilatorInstrument,
)
from latscope.userio import check_input

__all__ = ["CAPTURE_ROLES", "PHY_ROLES", "PinRecording", "read_recording", "parse_pin_map",
           "PinStimulus", "build_stimulus", "PinReplayTransport", "replay_pins",
           "nearest_ticks", "ps_from_samples"]

#: Capture channel of each pin role (project convention, analysis.definitions.CHANNEL_ROLES).
CAPTURE_ROLES = {"rx_dv": 0, "tx_en": 1, "crs_dv": 2, "m0": 3, "m1": 4, "m2": 5, "m3": 6, "m4": 7}
#: Pins only the frame sniffers see.
PHY_ROLES = ("rx_clk", "tx_clk", "ref_clk", "rx_er", "rxd0", "rxd1", "rxd2", "rxd3",
             "txd0", "txd1", "txd2", "txd3")
PHY_HZ = {"mii": 25_000_000, "rmii": 50_000_000}
#: Stimulus tick of the first edge (idle before it, as on the simulated bench).
LEAD_TICKS = 4096
#: PHY clock cycles played before and after each valid pulse.
PHY_BEFORE, PHY_AFTER = 2, 24
PS = 10**12


@dataclasses.dataclass
class PinRecording:
    """Pin activity read from a file: per role, edge times in ps and their direction."""
    edges: dict             # role -> (time_ps int64 array, rising bool array), time-sorted
    initial: dict           # role -> level before the first edge
    markers: dict           # marker role -> meaning, when the file says
    source: str             # "vcd" or "sigrok"
    signals: dict           # role -> the file's signal name


def parse_pin_map(text):
    """``"ROLE=SIGNAL,..."`` -> ``[(role, signal)]``; roles must be pin roles."""
    known = list(CAPTURE_ROLES) + list(PHY_ROLES)
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        role, sep, signal = item.partition("=")
        role, signal = role.strip(), signal.strip()
        if not sep or not role or not signal:
            raise LatscopeError(f"--map entry {item!r} is not ROLE=SIGNAL (e.g. rx_dv=D0)")
        if role not in known:
            raise LatscopeError(f"--map: unknown role {role!r} (roles: {', '.join(known)})")
        if any(role == r for r, _ in out):
            raise LatscopeError(f"--map names role {role!r} twice")
        other = next((r for r, s in out if s == signal), None)
        if other is not None:
            raise LatscopeError(f"--map maps signal {signal!r} to two roles, {other!r} and "
                                f"{role!r}; give each role its own signal")
        out.append((role, signal))
    return out


def ps_from_samples(index, samplerate):
    """Nearest whole ps of sample ``index`` at ``samplerate`` (exact integer arithmetic)."""
    num, den = _ratio(PS, samplerate)
    whole, rem = np.divmod(np.asarray(index, np.int64), den)
    return whole * num + (rem * (2 * num) + den) // (2 * den)


def read_recording(path, pin_map=None, *, samplerate=None):
    """Read the pins ``pin_map`` names (``"ROLE=SIGNAL,..."``; default: every signal named like
    a role) from a ``.vcd`` or ``.sr`` file.

    Returns
    -------
    PinRecording
    """
    path = os.fspath(path)
    pairs = parse_pin_map(pin_map)
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".vcd":
        ev = read_vcd(path, tick_hz=PS)                 # whole ps
        names = [ev.channel_names[i] for i in range(len(ev.channel_names))]
        if not pairs:
            pairs = [(n, n) for n in names if n in CAPTURE_ROLES or n in PHY_ROLES]
        index = {}
        for role, signal in pairs:
            if signal not in names:
                raise LatscopeError(f"{path} has no 1-bit signal {signal!r} (its signals: "
                                    f"{', '.join(names)})")
            index[role] = names.index(signal)
        edges, initial = {}, {}
        for role, ch in index.items():
            sel = ev.channel == ch
            edges[role] = (ev.time[sel].astype(np.int64), ev.rising[sel].astype(bool))
            initial[role] = int(ev.initial.get(names[ch], 0))
        markers = dict(ev.markers or {})
        source = "vcd"
    elif suffix == ".sr":
        with sigrok.SrReader(path, samplerate=samplerate) as reader:
            info = reader.info
            if info.samplerate is None:
                raise LatscopeError(f"{path}: the metadata has no samplerate; give one with "
                                    f"--samplerate")
            probes = list(info.probes[:info.data_probes])
            if not pairs:
                pairs = [(n, n) for n in probes if n in CAPTURE_ROLES or n in PHY_ROLES]
            bits = []
            for _, signal in pairs:
                try:
                    bits.append(info.probe_index(signal))
                except LatscopeError:
                    raise LatscopeError(f"{path} has no probe {signal!r} (its probes: "
                                        f"{', '.join(p for p in probes if p)})") from None
            blocks = list(reader.iter_edges(bits)) if bits else []
            levels = reader.initial_levels or [False] * len(bits)
            markers = sigrok.sr_markers(info, [(r, b) for (r, _), b in
                                               zip(pairs, bits, strict=True)]) or {}
        time = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros(0, np.int64)
        chan = np.concatenate([b[1] for b in blocks]) if blocks else np.zeros(0, np.uint8)
        rise = np.concatenate([b[2] for b in blocks]) if blocks else np.zeros(0, bool)
        time_ps = ps_from_samples(time, int(info.samplerate))
        edges, initial = {}, {}
        for k, (role, _) in enumerate(pairs):
            sel = chan == k
            edges[role] = (time_ps[sel], rise[sel].astype(bool))
            initial[role] = int(levels[k])
        source = "sigrok"
    else:
        what = f"{suffix} files" if suffix else "a file without a suffix"
        raise LatscopeError(f"{path}: replay-pins reads .vcd or .sr files, not {what}")
    if not pairs:
        raise LatscopeError(f"{path}: no signal is named like a pin role and --map names none "
                            f"(e.g. --map rx_dv=D0,m0=D3)")
    markers = {r: m for r, m in markers.items() if r in edges and r.startswith("m")}
    return PinRecording(edges, initial, markers, source, dict(pairs))


def _ratio(a, b):
    """``a / b`` as a reduced pair of ints (keeps the int64 products below small)."""
    from math import gcd
    g = gcd(int(a), int(b))
    return int(a) // g, int(b) // g


def nearest_ticks(time_ps, rate_hz, origin_ps):
    """Nearest whole period of ``rate_hz`` to each time, counted from ``origin_ps`` (exact
    integer arithmetic: ticks = round(t * rate / 1e12), halves up)."""
    num, den = _ratio(rate_hz, PS)
    t = np.asarray(time_ps, np.int64) - origin_ps
    whole, rem = np.divmod(t, den)
    return whole * num + (rem * (2 * num) + den) // (2 * den)


def _drop_collapsed(ticks, rising):
    """Remove pairs of consecutive edges of one pin that fall on the same tick (pulses narrower
    than the resolution); returns the kept ticks, rising and the number of pulses dropped."""
    dropped = 0
    while len(ticks) > 1:
        same = np.flatnonzero(ticks[1:] == ticks[:-1])
        if not len(same):
            break
        keep = np.ones(len(ticks), bool)
        last = -2
        for i in same.tolist():          # non-overlapping pairs, first come first removed
            if i > last + 1:
                keep[i] = keep[i + 1] = False
                dropped += 1
                last = i + 1
        ticks, rising = ticks[keep], rising[keep]
    return ticks, rising, dropped


def _level_before(times, rising, initial, at, *, strictly=True):
    """Level of one pin just before (``strictly``) or at each time of ``at``."""
    idx = np.searchsorted(times, at, side="left" if strictly else "right")
    level = np.full(len(at), int(initial), np.int64)
    has = idx > 0
    level[has] = rising[idx[has] - 1].astype(np.int64)
    return level


@dataclasses.dataclass
class PinStimulus:
    """What the harness plays: capture-channel levels per tick and the PHY word per cycle."""
    ticks: np.ndarray        # ticks (from LEAD_TICKS) where capture-channel levels change
    values: np.ndarray       # levels (bit = channel) from that tick on
    initial: int             # levels before the first change
    phy_cycles: np.ndarray   # capture cycles of PHY word changes (non-decreasing)
    phy_words: np.ndarray    # the PHY word set at that cycle, in order
    edges: int               # capture-channel edges played
    dropped_pulses: int      # pulses narrower than a tick, not played
    origin_ps: int           # recording time of stimulus tick LEAD_TICKS
    phy_clock: dict          # side -> "recorded <role>" or "generated N MHz"

    @property
    def end_tick(self):
        last = int(self.ticks[-1]) if len(self.ticks) else LEAD_TICKS
        return last


def _phy_side(rec, frames, side, *, tick_hz, lanes, origin_ps):
    """(cycles, order, mask, bits) of one side's PHY pins, or None when its valid pin is not
    mapped; bits are the side's pins (clk, dv, er, data) shifted into the harness word."""

    mii = frames == "mii"
    width = 4 if mii else 2
    dv_role = ("rx_dv" if mii else "crs_dv") if side == "rx" else "tx_en"
    prefix = "rxd" if side == "rx" else "txd"
    data_roles = [f"{prefix}{i}" for i in range(width)]
    er_role = "rx_er" if (mii and side == "rx") else None
    clk_role = (f"{side}_clk" if mii else "ref_clk")
    if dv_role not in rec.edges:
        return None, None
    missing = [r for r in data_roles if r not in rec.edges]
    if missing:
        raise LatscopeError(f"--frames {frames}: {dv_role} is mapped but {', '.join(missing)} "
                            f"{'is' if len(missing) == 1 else 'are'} not (map every data pin "
                            f"of that side)")
    dv_t, dv_r = rec.edges[dv_role]
    period = PS // PHY_HZ[frames]
    capture_hz = tick_hz // lanes
    cycle_ps = PS / capture_hz
    if period < 2 * cycle_ps:
        raise LatscopeError(f"the {PHY_HZ[frames] / 1e6:g} MHz PHY clock is too fast for this "
                            f"build's {capture_hz / 1e6:g} MHz capture clock to play")
    # windows of PHY activity around each valid pulse
    rises = dv_t[dv_r]
    falls = dv_t[~dv_r]
    starts = rises - PHY_BEFORE * period
    ends = np.array([falls[falls >= r][0] if (falls >= r).any() else r for r in rises],
                    np.int64) + PHY_AFTER * period
    if rec.initial.get(dv_role):          # valid already high at the start of the recording
        first = falls[0] if len(falls) else (dv_t[-1] if len(dv_t) else 0)
        starts = np.concatenate([[first - 64 * period], starts])
        ends = np.concatenate([[first + PHY_AFTER * period], ends])
    if clk_role in rec.edges:
        ct, cr = rec.edges[clk_role]
        clk = ct[cr]
        inside = np.zeros(len(clk), bool)
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            lo, hi = np.searchsorted(clk, [s, e])
            inside[lo:hi] = True
        edges_ps = clk[inside]
        how = f"recorded {clk_role}"
    else:
        parts, last_end = [], None
        for s, e in sorted(zip(starts.tolist(), ends.tolist(), strict=True)):
            r = s + PHY_BEFORE * period + period // 2      # mid-bit after the valid edge
            if last_end is not None and s <= last_end:     # continues the burst: same phase
                r = parts[-1][-1] + period if parts and len(parts[-1]) else r
            n = max(0, (e - r) // period + 1)
            if n:
                parts.append(r + period * np.arange(n, dtype=np.int64))
            last_end = e if last_end is None else max(last_end, e)
        edges_ps = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        how = f"generated {PHY_HZ[frames] / 1e6:g} MHz"
    if not len(edges_ps):
        return None, how
    bits = np.zeros(len(edges_ps), np.int64)
    pins = [(dv_role, PHY_BITS["dv"])] + [(r, PHY_BITS["data"] + i)
                                         for i, r in enumerate(data_roles)]
    if er_role and er_role in rec.edges:
        pins.append((er_role, PHY_BITS["er"]))
    for role, bit in pins:
        t, r = rec.edges[role]
        bits |= _level_before(t, r, rec.initial.get(role, 0), edges_ps) << bit
    shift = PHY_SIDE_SHIFT[side]
    tick = LEAD_TICKS + nearest_ticks(edges_ps, tick_hz, origin_ps)
    cycles = tick // lanes
    if np.any(np.diff(cycles) < 2):
        raise LatscopeError(f"the {side} PHY clock ({how}) has rising edges less than two "
                            f"capture cycles apart: too fast to play")
    if len(cycles) and cycles[0] < 1:
        raise LatscopeError("a PHY clock edge before the first played tick")
    half = max(1, int(round(period / cycle_ps / 2)))
    side_mask = 0xFF << shift
    clk_bit = 1 << (shift + PHY_BITS["clk"])
    # per edge: data with the clock low, the same data with the clock high (same cycle, in
    # that order, so the flops see stable data), the clock low again half a period later
    n = len(cycles)
    ev_cycles = np.empty(3 * n, np.int64)
    ev_order = np.empty(3 * n, np.int64)
    ev_bits = np.empty(3 * n, np.int64)
    ev_cycles[0::3], ev_order[0::3], ev_bits[0::3] = cycles, 0, bits << shift
    ev_cycles[1::3], ev_order[1::3], ev_bits[1::3] = cycles, 1, (bits << shift) | clk_bit
    low = np.minimum(cycles + half, np.concatenate([cycles[1:] - 1, [cycles[-1] + half]]))
    ev_cycles[2::3], ev_order[2::3], ev_bits[2::3] = low, 2, bits << shift
    return (ev_cycles, ev_order, side_mask, ev_bits), how


def build_stimulus(rec, *, tick_hz, lanes, frames=None):
    """Resample a :class:`PinRecording` for an instrument with ``tick_hz`` ticks per second and
    ``lanes`` ticks per capture cycle (module docstring: how); returns a :class:`PinStimulus`."""
    tick_hz = int(tick_hz)
    capture = [r for r in rec.edges if r in CAPTURE_ROLES]
    if not capture:
        raise LatscopeError("nothing to capture: map at least one of "
                            + ", ".join(CAPTURE_ROLES))
    all_t = [rec.edges[r][0] for r in rec.edges if len(rec.edges[r][0])]
    if not any(len(rec.edges[r][0]) for r in capture):
        raise LatscopeError("the mapped capture pins (" + ", ".join(capture) + ") never change "
                            "in the recording: an empty window, nothing to replay")
    origin = int(min(int(t[0]) for t in all_t))
    ticks, chans, rises, dropped = [], [], [], 0
    initial = 0
    for role in capture:
        ch = CAPTURE_ROLES[role]
        initial |= int(rec.initial.get(role, 0)) << ch
        t, r = rec.edges[role]
        tk, r, d = _drop_collapsed(LEAD_TICKS + nearest_ticks(t, tick_hz, origin), r.copy())
        dropped += d
        ticks.append(tk)
        chans.append(np.full(len(tk), ch, np.int64))
        rises.append(r)
    ticks = np.concatenate(ticks)
    chans = np.concatenate(chans)
    order = np.argsort(ticks, kind="stable")
    ticks, chans = ticks[order], chans[order]
    toggles = np.int64(1) << chans
    levels = initial ^ np.bitwise_xor.accumulate(toggles) if len(toggles) else toggles
    last = np.ones(len(ticks), bool)
    last[:-1] = ticks[1:] != ticks[:-1]
    phy_cycles, phy_words, how = np.zeros(0, np.int64), np.zeros(0, np.int64), {}
    if frames is not None:
        sides = []
        for side in ("rx", "tx"):
            ev, h = _phy_side(rec, frames, side, tick_hz=tick_hz, lanes=lanes, origin_ps=origin)
            if ev is not None:
                sides.append(ev)
                how[side] = h
        if not sides:
            raise LatscopeError(f"--frames {frames}: map the valid pin of at least one side "
                                f"({'rx_dv' if frames == 'mii' else 'crs_dv'} or tx_en) with its "
                                f"data pins")
        cyc = np.concatenate([s[0] for s in sides])
        odr = np.concatenate([s[1] for s in sides])
        msk = np.concatenate([np.full(len(s[0]), s[2], np.int64) for s in sides])
        bts = np.concatenate([s[3] for s in sides])
        order = np.lexsort((odr, cyc))
        cyc, msk, bts = cyc[order], msk[order], bts[order]
        word, words = 0, np.empty(len(cyc), np.int64)
        for i, (m, b) in enumerate(zip(msk.tolist(), bts.tolist(), strict=True)):
            word = (word & ~m) | b
            words[i] = word
        phy_cycles, phy_words = cyc, words
    return PinStimulus(ticks[last], levels[last], initial, phy_cycles, phy_words,
                       int(len(ticks)), dropped, origin, how)


def stimulus_chunks(stim, *, lanes, channels, tail_cycles, chunk_cycles=4096):
    """Harness commands (bytes chunks) playing ``stim``: per capture cycle with a change, its
    PHY words, then its sample word for one cycle, then the steady word until the next change;
    ``tail_cycles`` more at the end."""

    ticks = np.asarray(stim.ticks, np.int64)
    change = np.unique(np.concatenate([ticks // lanes, stim.phy_cycles]))
    all_ticks = np.concatenate([[-1], ticks])
    all_values = np.concatenate([[stim.initial], stim.values]).astype(np.int64)
    words = np.zeros(len(change), np.int64)
    for lane in range(lanes):
        idx = np.searchsorted(all_ticks, change * lanes + lane, side="right") - 1
        words |= all_values[idx] << (lane * channels)
    idx = np.searchsorted(all_ticks, change * lanes + lanes - 1, side="right") - 1
    steady = np.zeros(len(change), np.int64)
    for lane in range(lanes):
        steady |= all_values[idx] << (lane * channels)
    gaps = np.concatenate([change[1:], [change[-1] + 1 + tail_cycles]]) - change - 1
    phy_at = np.searchsorted(stim.phy_cycles, change, side="left")
    phy_end = np.searchsorted(stim.phy_cycles, change, side="right")
    init_word = sum(int(stim.initial) << (lane * channels) for lane in range(lanes))
    out, part = [], bytearray()
    part += bytes([OP_SAMPLES]) + init_word.to_bytes(4, "little") + int(change[0]).to_bytes(
        8, "little")
    samples = bytes([OP_SAMPLES])
    phy_words = stim.phy_words.tolist()
    last_cut = int(change[0])
    for k, c in enumerate(change.tolist()):
        for j in range(int(phy_at[k]), int(phy_end[k])):
            part += bytes([OP_PHY]) + int(phy_words[j]).to_bytes(4, "little")
        part += samples + int(words[k]).to_bytes(4, "little") + (1).to_bytes(8, "little")
        if gaps[k] > 0:
            part += samples + int(steady[k]).to_bytes(4, "little") + int(gaps[k]).to_bytes(
                8, "little")
        if c - last_cut >= chunk_cycles or len(part) > 1 << 16:
            out.append(bytes(part))
            part = bytearray()
            last_cut = c
    if part:
        out.append(bytes(part))
    return out


def _arm_in(data):
    """True when ``data`` (bytes the host wrote) holds an ARM-on COMMAND frame."""
    import zlib

    buf = bytes(data)
    at = buf.find(protocol.SYNC)
    while at >= 0 and at + 6 <= len(buf):
        length = int.from_bytes(buf[at + 4:at + 6], "little")
        end = at + 6 + length + 4
        if length <= 64 and end <= len(buf):
            body = buf[at + 2:at + 6 + length]
            crc = int.from_bytes(buf[at + 6 + length:end], "little")
            if zlib.crc32(body) == crc and (body[0] & 0x0F) == 4:
                if body[4:6] == bytes([protocol.Opcode.ARM, 1]):
                    return True
                at = buf.find(protocol.SYNC, end)
                continue
        at = buf.find(protocol.SYNC, at + 2)
    return False


class PinReplayTransport:
    """A :class:`~latscope.capture.link.transport.Transport` to the real gateware in Verilator
    playing a recording: the host's commands go to the core's UART input (each followed by enough
    cycles for the reply); the stimulus starts when the host arms the instrument. :attr:`finished`
    is true once the whole stimulus was played and the output went quiet."""

    #: Capture cycles run after a host command so that the gateware answers it.
    COMMAND_CYCLES = 4096

    def __init__(self, proc, chunks, *, initial_word=0):
        self._v = verilator
        self.proc = proc
        self._chunks = chunks
        self._lock = threading.Lock()
        self._feeder = None
        self._fed = False
        self._closing = False
        self._quiet_since = None
        self.started = False
        self.error = None
        # pins at their recorded levels before anything else: no edge at arming
        self.proc.write(verilator.Commands().samples(initial_word, 0))

    def read(self, max_bytes, timeout):
        data = self.proc.read_bytes(max_bytes, timeout=timeout)
        if self._fed:
            now = _time.monotonic()
            if data or self._quiet_since is None:
                self._quiet_since = now
        return data

    @property
    def finished(self):
        return self._fed and self._quiet_since is not None and \
            _time.monotonic() - self._quiet_since > 0.5

    def write(self, data):
        arm = _arm_in(data)
        with self._lock:
            if self.started and not self._fed:
                self.proc.write(self._v.Commands().rx(data))   # the stimulus keeps time running
            else:
                self.proc.write(self._v.Commands().rx(data).run(self.COMMAND_CYCLES).stats())
        if arm and not self.started:
            self.started = True
            self._feeder = threading.Thread(target=self._feed, name="replay-feed", daemon=True)
            self._feeder.start()

    def _feed(self):
        try:
            for chunk in self._chunks:
                with self._lock:
                    self.proc.write(chunk)
            with self._lock:
                self.proc.write(self._v.Commands().stats())
        except LatscopeError as error:
            self.error = error
        except (ValueError, OSError):
            if not self._closing:
                raise
        self._fed = True

    def close(self):
        self._closing = True
        try:
            self.proc.close_input()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.__exit__(None, None, None)
        except Exception:   # noqa: BLE001 - shutting down
            pass


def _board_timing(board, frames):
    """(tick_hz, lanes) of ``board``'s capture path; refuses ``frames`` it cannot sniff."""

    b = get_board(board)
    if frames is not None:
        frame_pins(b, frames)          # a board without that interface: one clear line
    return int(b.tick_hz), b.lanes


def _instrument_for(board, frames, header_bytes=0):
    """(VerilatorInstrument, core parameters) of ``board``'s capture path, with sniffers that
    keep ``header_bytes`` of each frame."""
    from latscope.capture.sim.simbench import CORE_PARAMS  # why: scipy, only to build a core

    b = get_board(board)
    params = dict(CORE_PARAMS)
    names = [name for name, _ in sorted(CAPTURE_ROLES.items(), key=lambda kv: kv[1])]
    # only a non-zero count is passed: the core's parameters name its cached simulator binary
    extra = {"frame_options": {"header_bytes": header_bytes}} if header_bytes else {}
    inst = VerilatorInstrument(capture_hz=int(b.capture_hz), lanes=b.lanes, channel_names=names,
                               sniffer=frames, **params, **extra)
    return inst, params


def replay_pins(source, output, pin_map=None, *, board="ecpix5", frames=None, samplerate=None,
                markers=None, label=None, force=False, timeout=600.0,
                log=None, header_bytes=0, glitch=None):
    """Play the pins of ``source`` through the real gateware and write the capture ``output``.

    Parameters
    ----------
    source : path
        ``.vcd`` or ``.sr``.
    output : path
        The ``.lsc`` to write, under :mod:`latscope.capture.files.outputs`'s policy: it appears only
        when the replay has run (a failed or interrupted replay leaves the previous file or
        nothing), and it may never be ``source`` itself.
    force : bool
        Replace an existing ``output``.
    pin_map : str, optional
        ``"ROLE=SIGNAL,..."`` (:func:`parse_pin_map`); default: signals named like roles.
    board : str
        ``ecpix5`` (1.25 ns), ``ecpix5-x1`` (3.125 ns) or ``icebreaker`` (10.4 ns).
    frames : {None, "mii", "rmii"}
        Also run the frame sniffers (ECPIX-5 builds) on the mapped PHY pins.
    header_bytes : int
        With ``frames``: each FRAME record keeps the frame's first ``header_bytes`` bytes (0 to
        64), as a ``latscope gateware build --header-bytes`` bitstream does.
    markers : dict, optional
        Marker meanings (default: those the file stores).
    timeout : float
        Wall-clock limit of the capture, s.
    glitch : dict, optional
        ``{role: ns}`` glitch filter widths (0: off), rounded up to capture cycles; channels not
        given keep the capture default (``session.default_glitch``: ``crs_dv`` filtered for
        RMII's end-of-frame toggling).

    Returns
    -------
    dict
        What was played and captured (``edges``, ``dropped_pulses``, ``events``, ``frames``,
        ``phy_clock``, ``reason``).
    """

    log = log or (lambda message: None)
    if frames not in (None, "mii", "rmii"):
        raise LatscopeError(f"--frames must be mii or rmii, not {frames!r}")
    frame_build_options(frames, header_bytes or None)    # the build's checks and messages

    output = os.fspath(output)
    check_input(os.fspath(source), "recording (.vcd or .sr)")
    check_output(output, [source], force=force, allow_stdout=False)
    tick_hz, lanes = _board_timing(board, frames)
    rec = read_recording(source, pin_map, samplerate=samplerate)
    stim = build_stimulus(rec, tick_hz=tick_hz, lanes=lanes, frames=frames)
    inst, params = _instrument_for(board, frames, header_bytes)
    tail = (1 << params["heartbeat_shift"]) + PinReplayTransport.COMMAND_CYCLES
    chunks = stimulus_chunks(stim, lanes=lanes, channels=params["channels"], tail_cycles=tail)
    init_word = sum(int(stim.initial) << (lane * params["channels"]) for lane in range(lanes))
    log(f"replay-pins: {stim.edges} edges"
        + (f", {len(stim.phy_cycles) // 3} PHY clock cycles ({', '.join(stim.phy_clock.values())})"
           if frames else "")
        + f" through the {board} gateware in Verilator ({1e9 / tick_hz:.4g} ns ticks)")
    pending = PendingOutput(output, [source], force=force, allow_stdout=False)
    try:
        proc = inst.open()
        transport = PinReplayTransport(proc, chunks, initial_word=init_word)
    except BaseException:
        pending.discard()
        raise
    try:
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        config = session.CaptureConfig(markers=dict(markers or rec.markers or {}),
                                       label=label or f"replay of {os.path.basename(source)}",
                                       dut="recorded pins (replay-pins)",
                                       glitch=glitch_cycles(glitch or {}, identity))
        session.configure(instrument, config, identity)
        replay_meta = {
            "source_file": os.path.basename(os.fspath(source)), "source_format": rec.source,
            "map": rec.signals, "board": board, "frames": frames,
            "header_bytes": header_bytes if frames else None,
            "resampling": "nearest tick; pulses narrower than a tick dropped",
            "origin_ps": stim.origin_ps, "lead_ticks": LEAD_TICKS,
            "dropped_pulses": stim.dropped_pulses, "phy_clock": stim.phy_clock}
        meta = session.capture_metadata(identity, config, port="verilator (replay-pins)",
                                        extra={"replay": replay_meta})
        meta["instrument"].update(simulated=True, engine="verilator")
        writer = capfile.CaptureWriter(pending.path, meta, overwrite=True)
        deadline = _time.monotonic() + timeout

        def stop():
            if transport.error is not None:
                raise transport.error
            if transport.finished:
                return "replay complete"
            if _time.monotonic() > deadline:
                return f"replay timed out after {timeout:g} s"
            return None
        outcome = session.run_capture(instrument, writer, stop=stop)
    except BaseException:
        pending.discard()
        raise
    finally:
        transport.close()
    pending.commit()
    frames_n = 0
    if frames is not None:
        with capfile.open_capture(output) as cap:
            frames_n = len(cap.frames()[0])
    return {"edges": stim.edges, "dropped_pulses": stim.dropped_pulses,
            "events": outcome.events, "frames": frames_n, "phy_clock": stim.phy_clock,
            "reason": outcome.reason, "exit_status": outcome.exit_status}


def glitch_cycles(widths_ns, identity):
    """``{role: ns}`` to ``{channel: capture cycles}`` for the instrument ``identity`` (rounded
    up; a width past the instrument's ``max_glitch`` is one clear error)."""
    names = list(identity.get("channel_names") or [])
    hz = int(identity["capture_hz"])
    limit = int(identity.get("max_glitch") or 0)
    out = {}
    for role, ns in widths_ns.items():
        if role not in names:
            raise LatscopeError(f"--glitch: no channel {role!r} (the instrument has "
                                f"{', '.join(names)})")
        cycles = -(-int(ns) * hz // 1_000_000_000)
        if cycles > limit:
            raise LatscopeError(f"--glitch {role}={ns}: {cycles} capture cycles at "
                                f"{hz / 1e6:g} MHz, this build's filter takes at most {limit} "
                                f"({limit * 1e9 / hz:g} ns)")
        out[names.index(role)] = cycles
    return out
