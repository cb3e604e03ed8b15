"""Frame line-rate benchmark (``latscope bench --only frames``), simulated.

Both directions of a 100 Mb/s MII (or RMII) bus at line rate, 64-byte frames with the minimum
inter-frame gap (148,810 frames/s each way), through the real frame-capture gateware: the
ECPIX-5's ``LatscopeCore(sniffer=...)`` exported to Verilog and compiled with Verilator, every
clock domain on its own clock (capture 200 MHz, link 48 MHz, MII RX_CLK 25 MHz and TX_CLK
25 MHz + 100 ppm; RMII one 50 MHz REF_CLK) and every clock of every domain evaluated. The frames
come from a generator in the C++ harness (``latscope/bench/framebench.cpp``): a few templates built
here with scapy, each frame given its own sequence number and its FCS (CRC-32) there. The same
RX_DV/TX_EN levels reach the capture channels.

The link is modelled by the rate its transmitter accepts the framer's bytes: the UART (12 Mbaud
8N1) one byte per 40 link cycles, 1.2 MB/s; the Ethernet link one transfer per link cycle (the
ECPIX-5's two-byte link path: 96 MB/s, :mod:`latscope.gateware.linkword`)
(1000BASE-T would carry 119.7 MB/s of UDP payload).

The host decoder (:class:`~latscope.capture.link.stream.StreamDecoder`) reads the output and every
frame is checked against the stimulus: each FRAME record has the frame index, class, length,
FCS flag and sequence number the generator gave that frame; the last COUNTERS record of each
class holds exactly the frames of that class; a recorded class's frames are recorded or counted
as ``dropped`` (the record queue was full). ``unaccounted`` (frames neither recorded, nor
dropped-and-counted, nor in a counted-only class's totals) must be 0.

With ``Scenario(edges=True)`` the capture front end also timestamps the rising and falling
edges of the RX_DV and TX_EN channels, and each is checked against the time the harness changed
that level (:mod:`~latscope.bench.framebench_edges`): every edge exactly on its stimulus tick
(counted from the front end's time 0, the first capture cycle out of reset), none missing or
extra, and every FRAME record's start and end, by the rule of ``docs/stream-format.md`` section 8
(``capture.frames.frame_edge_times``), on its frame's stimulus edges.

Example
-------
>>> result = run_scenario(Scenario("uart-probes", frames=20_000))     # doctest: +SKIP
>>> result.unaccounted                                                # doctest: +SKIP
0
"""

import os
import struct
from dataclasses import dataclass, field
from inspect import signature
from pathlib import Path

import numpy as np

from latscope import LatscopeError
from latscope.bench import twoclock

__all__ = ["Scenario", "FrameBenchResult", "run_scenario", "frame_templates", "build", "run",
           "SECTION", "PROBE_PORT", "LINE_RATE_FPS"]

SECTION = "frames: 100 Mb/s line rate through the sniffers, both directions (simulated)"
HARNESS_SOURCE = Path(__file__).with_name("framebench.cpp")

FRAME_BYTES = 64
#: 64-byte frames at 100 Mb/s: preamble and SFD 8 + frame 64 + gap 12 bytes = 6.72 us each.
LINE_RATE_FPS = 100e6 / ((8 + FRAME_BYTES + 12) * 8)
PROBE_PORT = 4242
#: Non-IP background frames (IEEE 802 local experimental EtherType 1).
EXPERIMENTAL_ETHERTYPE = 0x88B5
SEQ_BASE = (0x10000000, 0x20000000)
#: Link cycles per byte the UART accepts: 48 MHz / (12 Mbaud / 10 bits).
UART_CYCLES_PER_BYTE = 40
LINK_HZ = 48e6
COUNTER_SHIFT = 18                      # COUNTERS every 2**18 link cycles (5.5 ms)
#: When the generators start: the commands and their replies (~15 bytes each at the UART's 40
#: link cycles per byte) are done by then; the checks find any frame classified before its rule
#: was in place, and any edge timestamped before the timestamp reset
START_PS = 400_000_000
RESET_PS = 400_000                      # the harness holds every domain in reset until then

#: Rule tables: class 1 the probes (UDP to the probe port on RX, from it on TX: the DUT's
#: replies), class 2 non-IP frames, class 0 everything else (UDP background).
RULES = {0: [dict(enable=1, cls=1, match_port=1, port_dst=1, port_lo=PROBE_PORT,
                  port_hi=PROBE_PORT),
             dict(enable=1, cls=2, match_ethertype=1, ethertype=EXPERIMENTAL_ETHERTYPE)],
         1: [dict(enable=1, cls=1, match_port=1, port_src=1, port_lo=PROBE_PORT,
                  port_hi=PROBE_PORT),
             dict(enable=1, cls=2, match_ethertype=1, ethertype=EXPERIMENTAL_ETHERTYPE)]}
RECORD_MASKS = {"probes": 0b0010, "all": 0b0111}
#: With edges on, the harness keeps one level change per channel to sample from, so a capture
#: period (5 ns x divider) must be shorter than the shortest level interval, the 960 ns gap.
EDGES_MAX_DIVIDER = 128


@dataclass(frozen=True)
class Scenario:
    """One run of the bench.

    Parameters
    ----------
    name : str
        Row label.
    frames : int
        Frames per direction.
    interface : str
        ``"mii"`` or ``"rmii"``.
    link : str
        ``"uart"`` (1.2 MB/s) or ``"eth"`` (one transfer, two bytes on the ECPIX-5's link
        path, per 48 MHz link cycle).
    record : str
        ``"probes"``: only class 1 recorded, the rest counted; ``"all"``: every class recorded.
    probe_every : int
        One frame in this many is a probe (the templates cycle with this period).
    capture_divider : int
        1: the capture domain at the ECPIX-5's 200 MHz. ``k``: at 200 MHz / ``k``, to make long
        runs affordable (Verilator spends ~90 % of the time on the capture domain at 200 MHz).
        It carries no frame data (the frame path is PHY domains -> link domain), only the TICK
        entries behind the heartbeats, which then come ``k`` times less often, and with
        ``edges`` the edges, on ticks of 1.25 ns x ``k``.
    edges : bool
        Also capture the rising and falling edges of RX_DV and TX_EN and check each against its
        stimulus tick and the FRAME records (MII only: RMII's CRS_DV toggling needs a glitch
        filter setting this bench does not make).
    """
    name: str
    frames: int
    interface: str = "mii"
    link: str = "uart"
    record: str = "probes"
    probe_every: int = 16
    capture_divider: int = 1
    edges: bool = False

    def __post_init__(self):
        if self.interface not in ("mii", "rmii"):
            raise ValueError(f"Interface must be 'mii' or 'rmii', not {self.interface!r}")
        if self.link not in ("uart", "eth"):
            raise ValueError(f"Link must be 'uart' or 'eth', not {self.link!r}")
        if self.record not in RECORD_MASKS:
            raise ValueError(f"Record must be one of {sorted(RECORD_MASKS)}, not {self.record!r}")
        if not isinstance(self.frames, int) or not 1 <= self.frames < 2**31:
            raise ValueError(f"Frames must be an integer in 1..2**31-1, not {self.frames!r}")
        if not isinstance(self.capture_divider, int) or not 1 <= self.capture_divider <= 256:
            raise ValueError(f"Capture divider must be an integer in 1..256, not "
                             f"{self.capture_divider!r}")
        if not isinstance(self.probe_every, int) or not 4 <= self.probe_every <= 256:
            raise ValueError(f"Probe period must be an integer in 4..256, not "
                             f"{self.probe_every!r}")
        if self.edges and self.interface != "mii":
            raise ValueError("Edges can be checked on MII only (RMII's CRS_DV toggles at the "
                             "end of a frame)")
        if self.edges and self.capture_divider > EDGES_MAX_DIVIDER:
            raise ValueError(f"With edges the capture divider must be at most "
                             f"{EDGES_MAX_DIVIDER}, not {self.capture_divider}")


@dataclass
class FrameBenchResult:
    """What one run delivered and how every frame was accounted for (per direction, rx then
    tx, where a pair)."""
    scenario: Scenario
    frames: tuple = (0, 0)             # generated
    recorded: tuple = (0, 0)           # FRAME records received, each checked
    counted_only: tuple = (0, 0)       # frames of classes not recorded, in COUNTERS totals
    dropped: tuple = (0, 0)            # recorded classes' frames the queue had no room for
    # must be 0: frames neither recorded, nor dropped-and-counted, nor counted; with edges on,
    # also every edge mismatch and every lost edge (a frame whose timing is not accounted for)
    unaccounted: int = 0
    frames_unaccounted: int = 0        # the frames' part of ``unaccounted``
    mismatches: int = 0                # records disagreeing with the stimulus; must be 0
    edge_mismatches: int = 0           # edges missing, extra or off their stimulus tick, and
                                       # FRAME records not on their frame's edges; must be 0
    edges_lost: int = 0                # edges the front end counted as lost (OVERFLOW)
    edge_check: dict = field(default_factory=dict)     # framebench_edges.check_edges's counts
    stream_errors: dict = field(default_factory=dict)
    sim_s: float = 0.0                 # simulated time
    traffic_s: float = 0.0             # simulated time the generators ran
    wall_s: float = 0.0
    cpu_s: float = 0.0                 # CPU time of the harness process
    evaluated: int = 0                 # harness evaluations (clock edges, coincident ones once)
    link_bytes: int = 0
    harness: dict = field(default_factory=dict)

    @property
    def records_per_s(self):
        """FRAME records delivered per second of traffic."""
        return sum(self.recorded) / self.traffic_s if self.traffic_s else 0.0

    @property
    def link_use(self):
        """Bytes sent over the bytes the link could carry in the simulated time."""
        from latscope.gateware.boards import get_board  # the gateware loads only when run
        link_bytes = get_board("ecpix5").core_params().get("link_bytes", 1)
        rate = (LINK_HZ / UART_CYCLES_PER_BYTE if self.scenario.link == "uart"
                else LINK_HZ * link_bytes)
        return self.link_bytes / (rate * self.sim_s) if self.sim_s else 0.0


def frame_templates(direction, probe_every, interface="mii"):
    """The frames a direction cycles through, all 64 bytes with FCS: template 0 a probe (UDP
    from/to :data:`PROBE_PORT` with the traffic payload), then UDP background (some with an
    802.1Q tag), and one non-IP frame. Returns ``[(frame, seq_pos, carrier_early)]``;
    ``seq_pos`` is the byte offset of the sequence number (-1: none). On RMII receive, some
    frames lose carrier early (CRS_DV toggles over their last nibbles)."""
    import zlib

    from scapy.all import IP, UDP, Dot1Q, Ether

    from latscope.capture.traffic import encode_payload
    from latscope.gateware.protocol import TRAFFIC_SEQ_OFFSET
    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    out = []
    for k in range(probe_every):
        if k == 0:
            port = (4000, PROBE_PORT) if direction == 0 else (PROBE_PORT, 4000)
            pkt = eth / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=port[0], dport=port[1])
            head = 14 + 20 + 8
        elif k == probe_every - 1:
            pkt = Ether(src="02:00:00:00:00:03", dst="ff:ff:ff:ff:ff:ff",
                        type=EXPERIMENTAL_ETHERTYPE) / bytes(46)
            head = None
        elif k % 3 == 0:
            pkt = (eth / Dot1Q(prio=k % 8, vlan=100 + k) / IP(src="192.0.2.7", dst="192.0.2.8")
                   / UDP(sport=9000 + k, dport=9000))
            head = 14 + 4 + 20 + 8
        else:
            pkt = eth / IP(src="192.0.2.5", dst="192.0.2.6") / UDP(sport=9000 + k, dport=9001)
            head = 14 + 20 + 8
        if head is not None:
            size = FRAME_BYTES - 4 - head       # a tagged frame has room for 14 of the 16 bytes
            pkt = pkt / encode_payload(7, 0, 0, max(size, 16))[:size]
        raw = bytes(pkt)
        if len(raw) != FRAME_BYTES - 4:
            raise AssertionError(f"template {k} is {len(raw)} bytes")
        frame = raw + zlib.crc32(raw).to_bytes(4, "little")
        seq_pos = -1 if head is None else head + TRAFFIC_SEQ_OFFSET
        early = (k % 4) if interface == "rmii" and direction == 0 else 0
        out.append((frame, seq_pos, early))
    return out


def frame_classes(templates, direction):
    from latscope.gateware.model_sniffer import classify, parse_frame
    return np.array([classify(parse_frame(f), RULES[direction]) for f, _, _ in templates])


def _edge_channels():
    """``{direction: capture channel}`` of MII RX_DV and TX_EN."""
    from latscope.gateware.boards import CHANNEL_ROLES
    return {0: CHANNEL_ROLES.index("rx_dv"), 1: CHANNEL_ROLES.index("tx_en")}


def _commands(record, edges=False):
    from latscope.gateware.codec import encode_command, rule_command
    from latscope.gateware.protocol import Opcode
    # SET_EDGES's rising and falling masks (capture.session.Session.set_edges's layout); 0:
    # frames only
    mask = sum(1 << ch for ch in _edge_channels().values()) if edges else 0
    cmds = [(Opcode.SET_EDGES, struct.pack("<HH", mask, mask))]
    for d, rules in RULES.items():
        for i, rule in enumerate(rules):
            cmds.append(rule_command(d, i, **rule))
        cmds.append((Opcode.SET_CLASS_MODE, bytes([d, RECORD_MASKS[record]])))
    cmds.append((Opcode.SET_COUNTER_PERIOD, bytes([COUNTER_SHIFT])))
    cmds.append((Opcode.ARM, b"\x01"))
    return cmds, b"".join(encode_command(n, op, args) for n, (op, args) in enumerate(cmds))


def _core(interface):
    from latscope.gateware.boards import get_board
    from latscope.gateware.top import LatscopeCore
    board = get_board("ecpix5")
    params = board.core_params(sniffer=interface)
    return board, params, LatscopeCore(**params)


def _wrapper(ports):
    return twoclock.wrapper(ports, clocks=("capture_clk", "phy_rx_clk", "phy_tx_clk"),
                            inputs=("phy_rx", "phy_tx"), bench="frame-capture")


def build(interface="mii", *, verbose=True):
    """Export the ECPIX-5 frame-capture core, compile it with the harness (cached like the
    simulated instrument, :func:`latscope.gateware.verilator.cache_dir`) and return the binary's
    path."""
    _, params, core = _core(interface)
    return twoclock.build(core, params, HARNESS_SOURCE, name="framebench",
                          make_wrapper=_wrapper, verbose=verbose,
                          what=f"the frame bench (ECPIX-5 core, {interface} sniffers)")


def _setup(scenario, board, templates, host_bytes):
    mii = scenario.interface == "mii"
    periods = (round(1e12 / board.capture_hz) * scenario.capture_divider, round(1e12 / LINK_HZ),
               40_000 if mii else 20_000, 39_996 if mii else 20_000)
    channels = ("rx_dv" if mii else "crs_dv", "tx_en")
    from latscope.gateware.boards import CHANNEL_ROLES
    # the UART: its byte time for each byte; the Ethernet streamer's FIFO: a transfer (a byte,
    # or a word on the two-byte path) per link cycle
    throttle, per_byte = (UART_CYCLES_PER_BYTE, 1) if scenario.link == "uart" else (1, 0)
    start_ps = START_PS
    tail_ps = int(2.5 * (1 << COUNTER_SHIFT) * 1e12 / LINK_HZ) + 2_000_000
    if scenario.edges:
        # the last EVENTS buffer closes when the next TICK is due (framer.py), at most
        # 2**heartbeat_shift capture cycles after the last edge: the run lasts past it
        from latscope.gateware.top import LatscopeCore
        shift = board.core_params(sniffer=scenario.interface).get(
            "heartbeat_shift", signature(LatscopeCore).parameters["heartbeat_shift"].default)
        tail_ps = max(tail_ps, (1 << shift) * periods[0] + 4_000_000)
    parts = [struct.pack("<II4IBBBBBIIIIIQ", 0x4C534642, 2, *periods, 0 if mii else 1,
                         board.lanes, len(CHANNEL_ROLES), CHANNEL_ROLES.index(channels[0]),
                         CHANNEL_ROLES.index(channels[1]), throttle, per_byte, RESET_PS, start_ps,
                         24 if mii else 48, tail_ps),
             struct.pack("<H", len(host_bytes)), host_bytes]
    for d in (0, 1):
        parts.append(struct.pack("<QII", scenario.frames, SEQ_BASE[d], len(templates[d])))
        for frame, seq_pos, early in templates[d]:
            parts.append(struct.pack("<HhB", len(frame), seq_pos, early) + frame)
    return b"".join(parts), periods


class FrameChecker:
    """Checks the decoded stream against the stimulus as it arrives (bounded memory)."""

    def __init__(self, scenario, templates, classes):
        self.scenario, self.templates, self.classes = scenario, templates, classes
        self.record_mask = RECORD_MASKS[scenario.record]
        self.recorded = np.zeros((2, 8), np.int64)
        self.last_index = [-1, -1]
        self.mismatches = 0
        self.last_counters = {}
        self.replies = []
        self.errors = {}
        # with edges on: the decoded events and the records' (direction, frame_index), for
        # check_edges at the end (a few bytes per frame)
        self.events, self.record_ids = [], []
        self.edges_lost = 0

    def feed(self, result):
        from latscope.gateware.codec import FLAGS
        for name in ("frames_bad", "frames_missing", "frames_unknown", "truncated"):
            value = getattr(result, name, 0)
            if value:
                self.errors[name] = self.errors.get(name, 0) + value
        if result.losses:
            self.errors["losses"] = self.errors.get("losses", 0) + len(result.losses)
        self.replies += result.replies
        recs = result.frames
        if self.scenario.edges:
            self.events.append((result.time, result.channel, result.rising))
            self.record_ids.append(recs[["direction", "frame_index"]].copy())
            self.edges_lost += result.overflow_lost_events
        for d in (0, 1):
            mine = recs[recs["direction"] == d]
            if not len(mine):
                continue
            idx = mine["frame_index"].astype(np.int64)
            cls = self.classes[d][idx % len(self.classes[d])]
            expected_seq = np.where(
                _has_seq(self.templates[d])[idx % len(self.classes[d])],
                (SEQ_BASE[d] + idx) & 0xFFFFFFFF, 0)
            good = ((mine["cls"] == cls) & (mine["length"] == FRAME_BYTES)
                    & (mine["seq"] == expected_seq)
                    & ((mine["flags"] & FLAGS["fcs_ok"]) != 0)
                    & ((mine["flags"] & (FLAGS["rx_er"] | FLAGS["odd_nibble"]
                                         | FLAGS["runt"])) == 0)
                    & ((self.record_mask >> cls) & 1 == 1)
                    & (idx < self.scenario.frames))
            order = np.diff(np.concatenate([[self.last_index[d]], idx])) > 0
            self.mismatches += int(np.count_nonzero(~(good & order)))
            self.last_index[d] = int(idx[-1])
            np.add.at(self.recorded[d], mine["cls"].astype(np.int64) & 7, 1)
        for c in result.frame_counters:
            key = (int(c["direction"]), int(c["cls"]))
            self.last_counters[key] = c


def _has_seq(templates):
    return np.array([pos >= 0 for _, pos, _ in templates])


def run_harness(binary, setup, on_result, *, pins_path=None, edges_path=None):
    """Run the harness ``binary`` on ``setup`` bytes, passing each decoded piece of its output
    (a :class:`~latscope.capture.link.stream.DecodeResult`) to ``on_result``; returns ``(stats,
    link_bytes, wall_s)``. With ``pins_path`` the harness also writes the pins it drove there
    (``framebench.cpp``, ``FRAMEBENCH_PINS``), with ``edges_path`` the level changes of the
    capture channels (``FRAMEBENCH_EDGES``,
    :data:`~latscope.bench.framebench_edges.STIMULUS_EDGE_DTYPE`)."""
    from latscope.capture.link.stream import StreamDecoder
    decoder = StreamDecoder()
    env = dict(os.environ)
    if pins_path is not None:
        env["FRAMEBENCH_PINS"] = str(pins_path)
    if edges_path is not None:
        env["FRAMEBENCH_EDGES"] = str(edges_path)
    link_bytes = 0

    def take(data):
        nonlocal link_bytes
        link_bytes += len(data)
        on_result(decoder.feed(data))

    stats, wall = twoclock.run_harness(binary, setup, take, tag="framebench",
                                       what="frame bench", env=env)
    last = decoder.finish()
    # The simulation stops at a fixed time, possibly inside a frame: that last piece is not a
    # fault of the stream (the accounting still needs the final COUNTERS records whole).
    last.truncated = 0
    on_result(last)
    return stats, link_bytes, wall


def _check_replies(replies, cmds):
    bad = [r for r in replies if r.status != 0]
    if len(replies) != len(cmds) or bad:
        raise LatscopeError(f"The frame bench's commands were not all accepted: "
                            f"{len(replies)} replies of {len(cmds)}, refused "
                            f"{[(r.command_seq, r.status) for r in bad]}")


def run_scenario(scenario, *, binary=None):
    """Run ``scenario`` and account for every frame; a :class:`FrameBenchResult`."""
    from latscope.gateware.boards import get_board
    board = get_board("ecpix5")
    templates = [frame_templates(d, scenario.probe_every, scenario.interface) for d in (0, 1)]
    classes = [frame_classes(templates[d], d) for d in (0, 1)]
    cmds, host_bytes = _commands(scenario.record, scenario.edges)
    setup, periods = _setup(scenario, board, templates, host_bytes)
    binary = binary or build(scenario.interface)
    checker = FrameChecker(scenario, templates, classes)
    if not scenario.edges:
        stats, link_bytes, wall = run_harness(binary, setup, checker.feed)
        _check_replies(checker.replies, cmds)
        return account(scenario, checker, classes, stats, periods, link_bytes, wall)
    import tempfile

    from latscope.bench.framebench_edges import STIMULUS_EDGE_DTYPE, check_edges
    with tempfile.TemporaryDirectory(prefix="latscope-framebench-") as tmp:
        path = Path(tmp) / "edges.bin"
        stats, link_bytes, wall = run_harness(binary, setup, checker.feed, edges_path=path)
        stimulus = np.fromfile(path, STIMULUS_EDGE_DTYPE)
    _check_replies(checker.replies, cmds)
    result = account(scenario, checker, classes, stats, periods, link_bytes, wall)
    time_, channel, rising = (np.concatenate(x) for x in zip(*checker.events, strict=True))
    check = check_edges(stimulus, periods[0], board.lanes, time_, channel, rising,
                        np.concatenate(checker.record_ids), _edge_channels(), RESET_PS)
    result.edge_check = check
    result.edge_mismatches = check["mismatches"]
    result.edges_lost = checker.edges_lost
    result.frames_unaccounted = result.unaccounted
    result.unaccounted += result.edge_mismatches + result.edges_lost
    return result


def run_frames(interface, frames, *, carrier_early=None, pins_path=None):
    """Send ``frames`` (bytes with their FCS, as given: runts and bad FCSs too) once each way,
    back to back with the minimum gap, through the frame-capture core with every class
    recorded over the Ethernet link model; returns ``(result, stats)``, ``result`` the whole
    decoded stream (:class:`~latscope.capture.link.stream.DecodeResult`). ``carrier_early[k]``:
    on RMII receive, frame ``k``'s CRS_DV toggles over its last that many nibbles."""
    from latscope.capture.link.stream import DecodeResult
    from latscope.gateware.boards import get_board
    board = get_board("ecpix5")
    early = list(carrier_early) if carrier_early is not None else [0] * len(frames)
    templates = [[(bytes(f), -1, early[k] if d == 0 else 0) for k, f in enumerate(frames)]
                 for d in (0, 1)]
    scenario = Scenario("frames", frames=len(frames), interface=interface, link="eth",
                        record="all", capture_divider=8)
    cmds, host_bytes = _commands("all")
    setup, _ = _setup(scenario, board, templates, host_bytes)
    parts = []
    stats, _, _ = run_harness(build(interface), setup, parts.append, pins_path=pins_path)
    result = DecodeResult.concat(parts)
    _check_replies(result.replies, cmds)
    return result, stats


def account(scenario, checker, classes, stats, periods, link_bytes, wall):
    n = scenario.frames
    recorded, counted_only, dropped = [], [], []
    unaccounted = 0
    mask = checker.record_mask
    for d in (0, 1):
        expected = np.bincount(classes[d], minlength=8)[:8] * (n // len(classes[d]))
        expected += np.bincount(classes[d][:n % len(classes[d])], minlength=8)[:8]
        rec_d = cnt_d = drop_d = 0
        covered = 0
        for cls in range(8):
            c = checker.last_counters.get((d, cls))
            if c is None:
                if expected[cls]:
                    unaccounted += int(expected[cls])
                continue
            if int(c["frames_seen"]) != n:
                # the totals do not include every frame: the rest are unaccounted
                unaccounted += int(expected[cls])
                continue
            frames, drop = int(c["frames"]), int(c["dropped"])
            rec = int(checker.recorded[d][cls])
            if frames != expected[cls] or int(c["octets"]) != FRAME_BYTES * frames \
                    or int(c["fcs_errors"]) != 0:
                checker.mismatches += 1
            if mask >> cls & 1:
                unaccounted += abs(frames - rec - drop)
                rec_d += rec
                drop_d += drop
            else:
                if rec or drop:
                    checker.mismatches += 1
                cnt_d += frames
            covered += min(frames, int(expected[cls]))
        unaccounted += n - covered
        recorded.append(rec_d)
        counted_only.append(cnt_d)
        dropped.append(drop_d)
    gen_frames = (stats.get("rx_frames", 0), stats.get("tx_frames", 0))
    if gen_frames != (n, n):
        checker.mismatches += 1
    sim_s = stats.get("sim_ps", 0) / 1e12
    traffic_s = max(stats.get("rx_symbols", 0) * periods[2],
                    stats.get("tx_symbols", 0) * periods[3]) / 1e12
    return FrameBenchResult(
        scenario=scenario, frames=gen_frames, recorded=tuple(recorded),
        counted_only=tuple(counted_only), dropped=tuple(dropped), unaccounted=unaccounted,
        frames_unaccounted=unaccounted,
        mismatches=checker.mismatches, stream_errors=checker.errors, sim_s=sim_s,
        traffic_s=traffic_s, wall_s=wall, cpu_s=stats.get("cpu_s", 0.0),
        evaluated=stats.get("evaluated", 0),
        link_bytes=link_bytes, harness=stats)


#: ``make bench``: 10^6 frames each way (6.7 s simulated; ~15 CPU-minutes each here), the capture
#: domain at 200 MHz / 64 (see :class:`Scenario`); recording everything over the UART only long
#: enough to measure what it carries; the edges checked at the real 200 MHz (1.25 ns ticks) on
#: 10^5 frames each way (~7 CPU-minutes: the capture domain then takes most of the time).
SCENARIOS_FULL = (
    Scenario("uart-probes", frames=1_000_000, link="uart", record="probes", capture_divider=64),
    Scenario("eth-all", frames=1_000_000, link="eth", record="all", capture_divider=64),
    Scenario("uart-all", frames=100_000, link="uart", record="all", capture_divider=64),
    Scenario("rmii-eth-all", frames=1_000_000, interface="rmii", link="eth", record="all",
             capture_divider=64),
    Scenario("eth-all-edges", frames=100_000, link="eth", record="all", capture_divider=1,
             edges=True),
)
SCENARIOS_QUICK = (
    Scenario("uart-probes", frames=20_000, link="uart", record="probes", capture_divider=8),
    Scenario("eth-all", frames=20_000, link="eth", record="all", capture_divider=8),
    Scenario("uart-all", frames=10_000, link="uart", record="all", capture_divider=8),
    Scenario("rmii-eth-all", frames=20_000, interface="rmii", link="eth", record="all",
             capture_divider=8),
    Scenario("eth-all-edges", frames=5_000, link="eth", record="all", capture_divider=1,
             edges=True),
)


def run(quick=False, scenarios=None):
    """Bench rows ``(figure, value, unit, note)`` for ``latscope bench``."""
    rows = []
    for sc in scenarios or (SCENARIOS_QUICK if quick else SCENARIOS_FULL):
        r = run_scenario(sc)
        what = (f"{sc.interface.upper()} {sc.frames:,} x 2 frames, "
                f"{'probes recorded, rest counted' if sc.record == 'probes' else 'all recorded'}"
                f" over {'UART' if sc.link == 'uart' else 'Ethernet'}")
        rows += [
            (f"{sc.name}: unaccounted frames", r.unaccounted, "frames",
             f"{what}; {r.mismatches} records disagreeing with the stimulus; stream errors "
             f"{r.stream_errors or 'none'}"),
        ]
        if sc.edges:
            c = r.edge_check
            rows.append((f"{sc.name}: RX_DV/TX_EN edges off their stimulus tick, missing or "
                         f"extra / lost", f"{r.edge_mismatches} / {r.edges_lost}", "edges",
                         f"{4 * sc.frames:,} edges at 1.25 ns x {sc.capture_divider} ticks, "
                         f"offset {c['offset']} ticks (the reset); {c['records_off']} FRAME "
                         f"records off their frame's edges"))
        rows += [
            (f"{sc.name}: recorded / counted only / dropped (counted)",
             f"{sum(r.recorded):,} / {sum(r.counted_only):,} / {sum(r.dropped):,}", "frames",
             f"of {sum(r.frames):,} generated at {LINE_RATE_FPS:,.0f} frames/s each way"),
            (f"{sc.name}: FRAME records delivered", r.records_per_s, "records/s",
             f"link use {100 * r.link_use:.1f} %"),
            (f"{sc.name}: simulation", r.evaluated / r.cpu_s / 1e6 if r.cpu_s else 0.0,
             "M clock edges/CPU-s",
             f"{r.sim_s:.3f} s simulated in {r.cpu_s:.0f} CPU-s ({r.wall_s:.0f} s wall); every "
             f"clock of 4 domains, capture at 200 MHz / {sc.capture_divider}"),
        ]
    return rows
