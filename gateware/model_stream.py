"""Reference model of the link side of the gateware: capture entries in, exact bytes out.

This is the executable form of ``docs/stream-format.md``. :class:`LinkModel` mirrors the encoder
(:mod:`latscope.gateware.encoder`) and the framer (:mod:`latscope.gateware.framer`) and
:class:`CommandModel` mirrors the command handler (:mod:`latscope.gateware.control`). The gateware
testbenches compare the simulated gateware with these models byte for byte; the simulated bench and
the host decoder tests use them to make streams without running a simulator.
"""

import zlib

from amaranth.lib import data

from latscope import LatscopeError

from .codec import unpack
from .eth.model import NetConfig
from .model_capture import (
    Entry,  # the one definition of a FIFO entry, shared with the capture model
)
from .protocol import (
    CONT_BITS,
    DELAY_TAPS,
    EVENT_FIRST_BITS,
    EVENT_MAX_CONT,
    MAX_PAYLOAD,
    OVERFLOW_CONT,
    PROTOCOL_VERSION,
    SYNC_WORD,
    TIME_FIRST_BITS,
    TIME_MAX_CONT,
    EntryKind,
    EventsHeader,
    FrameHeader,
    FrameType,
    Heartbeat,
    HeartbeatStatus,
    IdentifyReply,
    Opcode,
    Overflow,
    ReplyHeader,
    Status,
    Token,
    capture_entry_layout,
)

__all__ = [
    "ENTRY_RESET", "MAX_COMMAND_PAYLOAD", "GATEWARE_VERSION", "Entry", "pack",
    "event_token", "time_token", "overflow_token", "edge_unit", "frame", "LinkModel",
    "CommandModel", "identify_data", "names_text",
]

#: Entry kind the top level writes into the capture FIFO after a timestamp reset: the free value 3
#: of the 2-bit ``kind`` (``EntryKind.RESET`` once protocol.py names it).
ENTRY_RESET = int(EntryKind.RESET)
#: Longest COMMAND payload the device accepts (opcode plus arguments); longer frames are BAD_FRAME.
MAX_COMMAND_PAYLOAD = 16
#: Version of the gateware (major, minor), reported by IDENTIFY.
GATEWARE_VERSION = (0, 1)

_EVENT_DELTA_BITS = EVENT_FIRST_BITS + EVENT_MAX_CONT * CONT_BITS
_CONT_MASK = (1 << CONT_BITS) - 1
_MASK64 = (1 << 64) - 1


def pack(layout, fields):
    """Serialise a ``data.Struct`` (or layout) filled from a dict to its integer value."""
    return data.Layout.cast(layout).const(fields).as_value().value


def to_bytes(layout, fields):
    """Serialise ``fields`` with ``layout`` to little-endian bytes."""
    size = data.Layout.cast(layout).size
    return pack(layout, fields).to_bytes((size + 7) // 8, "little")


def pack_entry(entry, *, channels, lanes, counter_width):
    """The integer value of ``entry`` in :func:`.protocol.capture_entry_layout`."""
    layout = capture_entry_layout(channels=channels, lanes=lanes, counter_width=counter_width)
    if entry.kind == EntryKind.OVERFLOW:
        payload = {"lost": {"count": entry.count, "span": entry.span}}
    else:
        payload = {"edges": {"edges": entry.edges, "levels": entry.levels}}
    return pack(layout, {"kind": entry.kind, "cycle": entry.cycle, "payload": payload})


def _cont(value, count):
    return bytes(Token.CONT | ((value >> (CONT_BITS * i)) & _CONT_MASK) for i in range(count))


def event_token(channel, rising, delta):
    """Bytes of an EVENT token; ``delta`` must fit in 21 bits."""
    if not 0 <= delta < 1 << _EVENT_DELTA_BITS:
        raise ValueError(f"event delta {delta} does not fit in {_EVENT_DELTA_BITS} bits")
    conts = 0
    while delta >> (EVENT_FIRST_BITS + CONT_BITS * conts):
        conts += 1
    lead = Token.EVENT | (channel << 4) | (int(rising) << 3) | (delta & 7)
    return bytes([lead]) + _cont(delta >> EVENT_FIRST_BITS, conts)


def time_token(delta):
    """Bytes of a TIME token advancing time by ``delta`` (1 to 10 continuation bytes)."""
    conts = 1
    while delta >> (TIME_FIRST_BITS + CONT_BITS * conts):
        conts += 1
    assert conts <= TIME_MAX_CONT
    return bytes([Token.TIME | (delta & 0xF)]) + _cont(delta >> TIME_FIRST_BITS, conts)


def overflow_token(lost, first_time, span):
    """Bytes of an OVERFLOW token carrying the :class:`Overflow` layout."""
    value = pack(Overflow, {"lost": lost, "first_time": first_time, "span": span})
    return bytes([Token.OVERFLOW]) + _cont(value, OVERFLOW_CONT)


def edge_unit(channel, rising, delta):
    """Bytes for one event ``delta`` ticks after the previous one: a TIME token first when the
    delta does not fit an EVENT token (the EVENT then has delta 0)."""
    if delta < 1 << _EVENT_DELTA_BITS:
        return event_token(channel, rising, delta)
    return time_token(delta) + event_token(channel, rising, 0)


def frame(frame_type, seq, payload):
    """A complete frame: header, ``payload`` (including any EventsHeader), CRC-32."""
    header = to_bytes(FrameHeader, {"sync": SYNC_WORD, "type": frame_type,
                                    "version": PROTOCOL_VERSION, "seq": seq & 0xFF,
                                    "length": len(payload)})
    body = header[2:] + bytes(payload)
    return header[:2] + body + zlib.crc32(body).to_bytes(4, "little")


class LinkModel:
    """Capture entries in, device-to-host bytes out: the encoder and framer as Python.

    Parameters
    ----------
    channels, lanes, counter_width : int
        As for :class:`~latscope.gateware.top.LatscopeCore`.
    max_payload : int
        Token bytes per EVENTS frame (the gateware's ping-pong buffer size).
    record_units : bool
        Keep the encoder's units in :attr:`units` (for the encoder's testbench).

    Frames are emitted when they close (full, a heartbeat, a reset), as the gateware does; a frame
    still filling is not in :attr:`output` yet.
    """

    def __init__(self, *, channels=8, lanes=2, counter_width=48, max_payload=MAX_PAYLOAD,
                 record_units=False):
        self.channels, self.lanes, self.counter_width = channels, lanes, counter_width
        self.max_payload = max_payload
        self.prev_cycle = 0
        self.ext = 0          # ticks of the last entry's cycle, lane 0
        self.last_time = 0    # ticks of the last event emitted
        self.events = 0
        self.lost = 0
        self.epoch = 0
        self.seq = 0
        self.output = bytearray()
        #: Every unit handed to the framer: (heartbeat, bytes, base_time, event_index, flush),
        #: what :class:`~latscope.gateware.encoder.Encoder` emits (enable with ``record_units``).
        self.units = [] if record_units else None
        self._fill = bytearray()
        self._fill_type = None
        self._fill_base = (0, 0)

    # --- framer ------------------------------------------------------------------------------
    def _close(self):
        if not self._fill:
            return
        payload = bytes(self._fill)
        if self._fill_type == FrameType.EVENTS:
            payload = to_bytes(EventsHeader, {"base_time": self._fill_base[0],
                                              "event_index": self._fill_base[1]}) + payload
        self.output += frame(self._fill_type, self.seq, payload)
        self.seq = (self.seq + 1) & 0xFF
        self._fill.clear()

    def _unit(self, frame_type, unit, *, flush=False):
        if self.units is not None:
            self.units.append((frame_type == FrameType.HEARTBEAT, bytes(unit), self.last_time,
                               self.events & 0xFFFFFFFF, flush))
        if self._fill and (self._fill_type != frame_type
                           or len(self._fill) + len(unit) > self.max_payload):
            self._close()
        if not self._fill:
            self._fill_type = frame_type
            self._fill_base = (self.last_time, self.events & 0xFFFFFFFF)
        self._fill += unit
        if flush:
            self._close()

    def reply(self, command_seq, opcode, status, reply_data=b""):
        """Emit a REPLY frame now (the gateware sends it between two frames)."""
        payload = to_bytes(ReplyHeader, {"command_seq": command_seq, "opcode": opcode,
                                         "status": status}) + bytes(reply_data)
        self.output += frame(FrameType.REPLY, self.seq, payload)
        self.seq = (self.seq + 1) & 0xFF

    # --- encoder -----------------------------------------------------------------------------
    def _advance(self, cycle):
        delta = (cycle - self.prev_cycle) % (1 << self.counter_width)
        self.prev_cycle = cycle
        self.ext = (self.ext + delta * self.lanes) & _MASK64

    def heartbeat_fields(self, *, fifo_high_water=0, status=0):
        """The Heartbeat layout's fields as the encoder would send them now; ``status`` is a dict
        of HeartbeatStatus fields or their packed integer value."""
        if isinstance(status, int):     # the HeartbeatStatus bits as one integer
            status = unpack(HeartbeatStatus, status)
        return {"time": self.ext, "events": self.events, "lost": self.lost,
                "fifo_high_water": fifo_high_water, "status": status, "epoch": self.epoch}

    def entry(self, entry, *, fifo_high_water=0, status=0):
        """Process one :class:`Entry`; ``fifo_high_water``/``status`` go into a heartbeat."""
        if entry.kind == ENTRY_RESET:
            self.prev_cycle = self.ext = self.last_time = self.events = self.lost = 0
            self.epoch = (self.epoch + 1) & 0xFF
            entry = None
        else:
            self._advance(entry.cycle)
        if entry is None or entry.kind == EntryKind.TICK:
            hb = self.heartbeat_fields(fifo_high_water=fifo_high_water, status=status)
            self._unit(FrameType.HEARTBEAT, to_bytes(Heartbeat, hb), flush=True)
        elif entry.kind == EntryKind.OVERFLOW:
            self.lost += entry.count
            self._unit(FrameType.EVENTS, overflow_token(
                entry.count, self.ext, (entry.span + 1) * self.lanes))
        elif entry.kind == EntryKind.EVENTS:
            for bit in range(self.lanes * self.channels):
                if not entry.edges >> bit & 1:
                    continue
                lane, channel = divmod(bit, self.channels)
                t = self.ext + lane
                delta = (t - self.last_time) & _MASK64
                self._unit(FrameType.EVENTS, edge_unit(channel, entry.levels >> bit & 1, delta))
                self.last_time = t
                self.events += 1
        else:
            raise ValueError(f"unknown entry kind {entry.kind}")

    def run(self, entries, **heartbeat):
        """Process ``entries``; return the bytes emitted by them."""
        start = len(self.output)
        for entry in entries:
            self.entry(entry, **heartbeat)
        return bytes(self.output[start:])


def names_text(board, channel_names):
    """The UTF-8 text following IdentifyReply: ``board=<name>;channels=<n0>,<n1>,...``."""
    return f"board={board};channels={','.join(channel_names)}".encode()


def identify_data(*, channels, lanes, counter_width, max_glitch, heartbeat_shift, fifo_depth,
                  capture_hz, board, channel_names, source_hash=0, version=GATEWARE_VERSION):
    """Reply data of IDENTIFY for a design with these parameters."""
    return to_bytes(IdentifyReply, {
        "protocol_version": PROTOCOL_VERSION, "gateware_major": version[0],
        "gateware_minor": version[1], "lanes": lanes, "source_hash": source_hash,
        "capture_hz": capture_hz, "channels": channels, "counter_width": counter_width,
        "max_glitch": max_glitch, "heartbeat_shift": heartbeat_shift, "fifo_depth": fifo_depth,
    }) + names_text(board, channel_names)


class CommandModel:
    """The command handler as Python: a COMMAND frame's payload in, a reply and new config out.

    ``config`` holds the registers the gateware holds: ``armed``, ``rise_en``, ``fall_en``,
    ``glitch`` (list per channel), ``selftest_on``, ``selftest_drive``, ``selftest_mask``,
    ``selftest_high``, ``selftest_low``; ``resets`` counts RESET_TIME commands.
    """

    def __init__(self, *, channels=8, max_glitch=15, identify=b"", lanes=2, net=None,
                 input_delay=False):
        self.channels, self.max_glitch, self.identify = channels, max_glitch, identify
        # shortest self-test width: model_capture.selftest_min_ticks (not imported: no cycle)
        self.min_width = max(2, lanes)
        #: The NetConfig (SET_NET) on an Ethernet design, None where SET_NET is unknown.
        self.net = net
        every = (1 << channels) - 1
        self.config = {"armed": 0, "rise_en": every, "fall_en": every, "glitch": [0] * channels,
                       "selftest_on": 0, "selftest_drive": 0, "selftest_mask": 0,
                       "selftest_high": self.min_width, "selftest_low": self.min_width}
        self.resets = 0
        #: Taps per channel (SET_DELAY) on a design with input delay lines, else None.
        self.delay_taps = [0] * channels if input_delay else None

    def handle(self, payload, *, status_data=b""):
        """Answer a COMMAND payload (opcode then arguments) with ``(opcode, status, data)``;
        ``status_data`` is the Heartbeat bytes a STATUS command returns."""
        if not payload:
            return 0, Status.BAD_LENGTH, b""
        opcode, args = payload[0], bytes(payload[1:])
        lengths = {Opcode.IDENTIFY: 0, Opcode.ARM: 1, Opcode.SET_EDGES: 4, Opcode.SET_GLITCH: 2,
                   Opcode.RESET_TIME: 0, Opcode.SELFTEST: 7, Opcode.STATUS: 0}
        if self.net is not None:
            lengths[Opcode.SET_NET] = 12
        if self.delay_taps is not None:
            lengths[Opcode.SET_DELAY] = 2
        if opcode not in lengths:
            return opcode, Status.UNKNOWN_OPCODE, b""
        if len(args) != lengths[opcode]:
            return opcode, Status.BAD_LENGTH, b""
        cfg, limit = self.config, 1 << self.channels
        if opcode == Opcode.IDENTIFY:
            return opcode, Status.OK, self.identify
        if opcode == Opcode.STATUS:
            return opcode, Status.OK, status_data
        if opcode == Opcode.SET_NET:
            net = NetConfig.from_bytes(args)
            if args[0] & 1 or net.port == 0:
                return opcode, Status.BAD_ARGUMENT, b""
            self.net = net
        elif opcode == Opcode.SET_DELAY:
            if args[0] >= self.channels or args[1] >= DELAY_TAPS:
                return opcode, Status.BAD_ARGUMENT, b""
            self.delay_taps[args[0]] = args[1]
        elif opcode == Opcode.RESET_TIME:
            self.resets += 1
        elif opcode == Opcode.ARM:
            if args[0] > 1:
                return opcode, Status.BAD_ARGUMENT, b""
            cfg["armed"] = args[0]
        elif opcode == Opcode.SET_EDGES:
            rise, fall = int.from_bytes(args[:2], "little"), int.from_bytes(args[2:], "little")
            if rise >= limit or fall >= limit:
                return opcode, Status.BAD_ARGUMENT, b""
            cfg["rise_en"], cfg["fall_en"] = rise, fall
        elif opcode == Opcode.SET_GLITCH:
            if args[0] >= self.channels or args[1] > self.max_glitch:
                return opcode, Status.BAD_ARGUMENT, b""
            cfg["glitch"][args[0]] = args[1]
        elif opcode == Opcode.SELFTEST:
            flags = args[0]
            mask, high, low = (int.from_bytes(args[i:i + 2], "little") for i in (1, 3, 5))
            if flags > 3 or mask >= limit or high < self.min_width or low < self.min_width:
                return opcode, Status.BAD_ARGUMENT, b""
            cfg.update(selftest_on=flags & 1, selftest_drive=flags >> 1 & 1, selftest_mask=mask,
                       selftest_high=high, selftest_low=low)
        return opcode, Status.OK, b""


def check_names(channels, channel_names):
    """Validate channel names for IDENTIFY; returns them as a tuple."""
    names = tuple(channel_names)
    if len(names) != channels:
        raise LatscopeError(f"need {channels} channel names, got {len(names)}")
    for name in names:
        if not isinstance(name, str) or not name or any(c in name for c in ",;=") \
                or not name.isprintable():
            raise LatscopeError(f"channel name {name!r} must be non-empty printable text "
                                "without ',', ';' or '='")
    return names


def echo_traffic(periods, *, seed=0, lanes=2, capture_hz=160_000_000, channels=8,
                 period_ns=6720.0, heartbeat_shift=20, counter_width=48):
    """Capture entries for a 64-byte frame echo at 100 Mb/s line rate: the realistic busy case.

    Every ``period_ns`` (6.72 µs: 64-byte frame plus preamble and gap) channel 0 (RX_DV) rises and
    falls 5.76 µs later; the DUT's interrupt, copy and send markers (channels 2, 3) toggle with
    jittered software delays, and channel 1 (TX_EN) carries the echoed frame. Each edge is on a
    lane (tick = 1 / (capture_hz * lanes)); edges in one capture cycle share an entry; TICK entries
    mark every ``2**heartbeat_shift`` cycles. Returns ``(entries, n_events)``.
    """
    import numpy as np
    rng = np.random.default_rng(seed)
    tick_ns = 1e9 / (capture_hz * lanes)
    rx_ns = 72 * 80.0                                    # preamble + 64 bytes at 80 ns/byte
    starts = np.arange(periods) * period_ns + rng.uniform(0, 40, periods)
    # (channel, rising, time) of each edge; delays (ns) are typical ISR/stack figures
    isr = starts + rx_ns + rng.gamma(4, 200, periods)
    copy = isr + rng.gamma(4, 250, periods)
    tx = copy + rng.gamma(4, 300, periods)
    edges = [(0, 1, starts), (0, 0, starts + rx_ns), (2, 1, isr), (2, 0, isr + 120),
             (3, 1, copy), (3, 0, copy + 80), (1, 1, tx), (1, 0, tx + rx_ns)]
    ch = np.concatenate([np.full(periods, c) for c, _, _ in edges])
    rise = np.concatenate([np.full(periods, r) for _, r, _ in edges])
    ticks = np.concatenate([np.round(t / tick_ns).astype(np.int64) for _, _, t in edges])
    order = np.lexsort((ch, ticks))
    ch, rise, ticks = ch[order], rise[order], ticks[order]
    # a channel cannot have two edges in one tick: drop the (rare) collisions
    keep = np.ones(len(ticks), bool)
    keep[1:] = (ticks[1:] != ticks[:-1]) | (ch[1:] != ch[:-1])
    ch, rise, ticks = ch[keep], rise[keep], ticks[keep]
    entries, wrap, period = [], 1 << counter_width, 1 << heartbeat_shift
    cycles = ticks // lanes
    bounds = np.flatnonzero(np.diff(cycles)) + 1
    next_tick = period
    for group in np.split(np.arange(len(ticks)), bounds):
        cycle = int(cycles[group[0]])
        while next_tick <= cycle:
            entries.append(Entry(1, next_tick % wrap))
            next_tick += period
        bits = levels = 0
        for i in group.tolist():
            bit = int(ticks[i] % lanes) * channels + int(ch[i])
            bits |= 1 << bit
            levels |= int(rise[i]) << bit
        entries.append(Entry(0, cycle % wrap, bits, levels))
    return entries, len(ticks)
