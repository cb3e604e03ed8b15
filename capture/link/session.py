"""Instrument session: commands with sequence numbers and retries, capture config, capture loop.

:class:`Instrument` talks to the instrument over any
:class:`~latscope.capture.link.transport.Transport`. Replies and events share one byte stream:
everything decoded while waiting for a reply (events, losses, heartbeats) is kept and handed to the
capture loop, never dropped.

:func:`run_capture` records into a :class:`~latscope.capture.files.capfile.CaptureWriter` until a
limit, a stop request (Ctrl-C, SIGTERM) or a lost link, and always finalises the file with a
``NOTE`` chunk saying why it stopped.
"""

import dataclasses
import os
import struct
import time as _time
import zlib

import numpy as np

from latscope import LatscopeError, __version__
from latscope.capture.files.capfile import CaptureWriteError
from latscope.capture.link.ethlink import check_ethernet_link, ethernet_link
from latscope.capture.link.rules import rules_from_dict
from latscope.capture.link.stream import StreamDecoder
from latscope.capture.link.transport import TransportClosed
from latscope.gateware import protocol
from latscope.gateware.codec import (
    HEARTBEAT_DTYPE,
    delay_command,
    encode_command,
    parse_identify,
    unpack,
)
from latscope.userio import read_toml

__all__ = [
    "Instrument", "CaptureConfig", "load_config", "Limits", "CaptureOutcome", "run_capture",
    "EXIT_OK", "EXIT_LINK_LOST", "EXIT_CRASH",
]

#: Exit statuses of ``latscope capture`` (2 is any user error before recording started).
EXIT_OK = 0            # stopped on a limit, Ctrl-C or SIGTERM; the file is complete
EXIT_LINK_LOST = 3     # the port closed or was unplugged; the file holds everything received
EXIT_CRASH = 4         # the decoder or writer failed; the file holds everything before it

_ROLES_HELP = "rx_dv, tx_en, crs_dv, m0..m4, or any name"

#: Seconds the capture loop goes on reading after bytes arrived before it decodes and writes
#: them: decoding and writing cost about as much per call as per kilobyte, and a pseudo-terminal
#: hands over at most 4 kB per read.
GATHER_S = 0.1


class Instrument:
    """A latscope instrument on a transport.

    Parameters
    ----------
    transport : Transport
    reply_timeout : float
        Seconds to wait for each reply before sending the command again.
    retries : int
        Sends of one command before giving up with :class:`LatscopeError`.
    decoder : StreamDecoder or None
        Defaults to a new ``latscope.capture.link.stream.StreamDecoder``.
    """

    def __init__(self, transport, *, reply_timeout=0.5, retries=3, decoder=None):
        if not reply_timeout > 0:
            raise ValueError(f"Reply timeout must be a positive number of seconds, "
                             f"not {reply_timeout!r}")
        if not isinstance(retries, int) or retries < 1:
            raise ValueError(f"Retries must be a positive integer, not {retries!r}")
        self.transport = transport
        self.reply_timeout = reply_timeout
        self.retries = retries
        self.decoder = decoder if decoder is not None else StreamDecoder()
        self._seq = 0
        self._backlog = []         # DecodeResults not yet handed out by read()
        self._replies = []
        self.bytes_received = 0
        self.identity = None
        self._raw_tail = b""

    # --- plumbing --------------------------------------------------------------------------------
    def _feed(self, data):
        self.bytes_received += len(data)
        self._raw_tail = (self._raw_tail + data)[-8192:]
        result = self.decoder.feed(data)
        self._replies.extend(result.replies)
        self._backlog.append(result)

    def read(self, timeout=0.1, max_bytes=1 << 16, gather=0.0):
        """Read what arrives within ``timeout`` seconds; return the decoded results (a list of
        ``DecodeResult``) including everything buffered while waiting for replies.

        ``gather``: once bytes arrived, go on reading what arrives within that many seconds
        (at most ``max_bytes`` in all) before decoding them together: the transport is still
        read as fast as the bytes come, but decoded in fewer, larger pieces."""
        data = self.transport.read(max_bytes, timeout)
        if data and gather > 0:
            parts, size = [data], len(data)
            deadline = _time.monotonic() + gather
            while size < max_bytes:
                remaining = deadline - _time.monotonic()
                if remaining <= 0:
                    break
                try:
                    more = self.transport.read(max_bytes - size, remaining)
                except TransportClosed:
                    self._feed(b"".join(parts))    # kept for finish(), as a reply wait keeps
                    raise
                if not more:
                    break
                parts.append(more)
                size += len(more)
            data = b"".join(parts)
        if data:
            self._feed(data)
        backlog, self._backlog = self._backlog, []
        return backlog

    def finish(self):
        """Flush the decoder at the end of a capture; returns the last results."""
        result = self.decoder.finish()
        self._replies.extend(result.replies)
        self._backlog.append(result)
        backlog, self._backlog = self._backlog, []
        return backlog

    def discard(self):
        """Drop events decoded so far (those sent before a RESET_TIME belong to no capture);
        returns how many were dropped."""
        dropped = sum(len(r.time) for r in self._backlog)
        self._backlog = []
        return dropped

    def command(self, opcode, args=b""):
        """Send a command and return its reply data; retries on timeout.

        Raises
        ------
        LatscopeError
            No reply after all retries, or the reply's status is not OK.
        TransportClosed
            The port went away.
        """
        opcode = protocol.Opcode(opcode)
        for _attempt in range(self.retries):
            seq = self._seq
            self._seq = (self._seq + 1) & 0xFF
            self.transport.write(encode_command(seq, opcode, bytes(args)))
            deadline = _time.monotonic() + self.reply_timeout
            while True:
                for i, (command_seq, reply_opcode, status, data) in enumerate(self._replies):
                    if command_seq == seq and reply_opcode == opcode:
                        del self._replies[:i + 1]
                        if status != protocol.Status.OK:
                            try:
                                name = protocol.Status(status).name
                            except ValueError:
                                name = f"unknown status {status}"
                            raise LatscopeError(f"instrument refused {opcode.name}: {name}")
                        return bytes(data)
                remaining = deadline - _time.monotonic()
                if remaining <= 0:
                    break
                data = self.transport.read(1 << 16, min(remaining, 0.05))
                if data:
                    self._feed(data)
        raise LatscopeError(f"no reply to {opcode.name} after {self.retries} tries of "
                            f"{self.reply_timeout:g} s: is this a latscope instrument, "
                            f"with a compatible protocol version ({protocol.PROTOCOL_VERSION})?")

    # --- commands --------------------------------------------------------------------------------
    def identify(self):
        """Ask who the instrument is; refuse an incompatible protocol version.

        Returns
        -------
        dict
            The IDENTIFY fields (``protocol_version``, ``lanes``, ``capture_hz``, ``channels``,
            ``board``, ``channel_names`` ...) plus ``tick_hz = capture_hz * lanes``.
        """
        try:
            data = self.command(protocol.Opcode.IDENTIFY)
        except LatscopeError:
            other = _sniff_versions(self._raw_tail) - {protocol.PROTOCOL_VERSION}
            if other:
                raise LatscopeError(self._version_message(sorted(other)[0])) from None
            raise
        info = dict(parse_identify(data))
        version = info.get("protocol_version")
        if version != protocol.PROTOCOL_VERSION:
            raise LatscopeError(self._version_message(version))
        info["tick_hz"] = info["capture_hz"] * info["lanes"]
        self.identity = info
        return info

    @staticmethod
    def _version_message(version):
        return (f"instrument speaks protocol version {version}, this latscope {__version__} "
                f"speaks version {protocol.PROTOCOL_VERSION}: update the gateware or latscope "
                f"so they match")

    def arm(self):
        """Start streaming events."""
        self.command(protocol.Opcode.ARM, b"\x01")

    def disarm(self):
        """Stop streaming events."""
        self.command(protocol.Opcode.ARM, b"\x00")

    def set_edges(self, rise, fall):
        """Enable rising/falling edges: bit ``k`` of each mask is channel ``k``."""
        for name, mask in (("Rising", rise), ("Falling", fall)):
            if not isinstance(mask, int) or not 0 <= mask < 1 << 16:
                raise ValueError(f"{name}-edge mask must be an integer in [0, 65535], not {mask!r}")
        self.command(protocol.Opcode.SET_EDGES, struct.pack("<HH", rise, fall))

    def set_glitch(self, channel, width):
        """Set ``channel``'s minimum pulse width in capture cycles (0 turns the filter off)."""
        if not isinstance(channel, int) or not 0 <= channel < protocol.NUM_CHANNELS:
            raise ValueError(f"Channel must be an integer in [0, {protocol.NUM_CHANNELS - 1}], "
                             f"not {channel!r}")
        if not isinstance(width, int) or not 0 <= width <= 255:
            raise ValueError(f"Glitch width must be an integer in [0, 255] capture cycles, "
                             f"not {width!r}")
        self.command(protocol.Opcode.SET_GLITCH, bytes([channel, width]))

    def set_delay(self, channel, taps):
        """Set ``channel``'s input delay line to ``taps`` (``Opcode.SET_DELAY``, 0..127 taps of
        ``protocol.DELAY_TAP_PS`` nominal). Raises :class:`LatscopeError` in one line when the
        instrument has no input delay lines (it answers UNKNOWN_OPCODE)."""
        opcode, args = delay_command(channel, taps)
        try:
            self.command(opcode, args)
        except LatscopeError as error:
            if str(error).endswith(protocol.Status.UNKNOWN_OPCODE.name):
                board = (self.identity or {}).get("board", "?")
                raise LatscopeError(f"this instrument (board {board}) has no input delay lines: "
                                    f"sub-tick alignment needs an ECPIX-5 build with them "
                                    f"(`latscope gateware build --board ecpix5`, the default)"
                                    ) from None
            raise

    def reset_time(self):
        """Zero the timestamp counter, event index and lost count."""
        self.command(protocol.Opcode.RESET_TIME)

    def selftest(self, on=True, *, drive_pin=False, channels=None, high_ticks=2, low_ticks=2):
        """Switch the built-in edge generator on or off (see ``Opcode.SELFTEST``). ``channels`` is
        a bit mask; by default every channel the identified instrument has (all 8 before
        ``identify()``)."""
        if channels is None:
            count = int((self.identity or {}).get("channels") or protocol.NUM_CHANNELS)
            channels = (1 << count) - 1
        lanes = int((self.identity or {}).get("lanes") or 1)
        least = max(2, lanes)       # the generator's limit (model_capture.selftest_min_ticks)
        if high_ticks < least or low_ticks < least:
            raise ValueError(f"Self-test high and low times must be at least {least} ticks "
                             f"with {lanes} lanes, not {high_ticks!r} and {low_ticks!r}")
        if drive_pin and (high_ticks < 3 or low_ticks < 3):
            # A 2-tick pulse on the output pin is shorter than one capture cycle plus the pin's
            # edge times: it may not come back through a cable intact.
            raise ValueError(f"Self-test pulses driven on the output pin must be at least 3 "
                             f"ticks high and low, not {high_ticks!r} and {low_ticks!r}")
        flags = int(bool(on)) | int(bool(drive_pin)) << 1
        self.command(protocol.Opcode.SELFTEST,
                     struct.pack("<BHHH", flags, channels, high_ticks, low_ticks))

    def status(self):
        """Current counters, as the HEARTBEAT fields in a dict; the status byte's flags as
        ``armed``, ``selftest``, ``overflow_active`` and ``ethernet`` (an
        :class:`~latscope.capture.link.ethlink.EthernetLink`)."""
        data = self.command(protocol.Opcode.STATUS)
        if len(data) < HEARTBEAT_DTYPE.itemsize:
            raise LatscopeError(f"STATUS reply too short ({len(data)} bytes)")
        beat = np.frombuffer(data, HEARTBEAT_DTYPE, count=1)[0]
        flags = unpack(protocol.HeartbeatStatus, int(beat["status"]))
        return {"time": int(beat["time"]), "events": int(beat["events"]),
                "lost": int(beat["lost"]), "fifo_high_water": int(beat["fifo_high_water"]),
                "armed": bool(flags["armed"]), "selftest": bool(flags["selftest"]),
                "overflow_active": bool(flags["overflow_active"]),
                "ethernet": ethernet_link(int(beat["status"])), "epoch": int(beat["epoch"])}

    def check_ethernet_link(self):
        """Ask STATUS and raise :class:`LatscopeError` (one line) when the gateware reports an
        Ethernet link that cannot carry datagrams (down, not 1000 Mb/s or not full duplex);
        returns the :class:`~latscope.capture.link.ethlink.EthernetLink`."""
        link = self.status()["ethernet"]
        check_ethernet_link(link)
        return link


def _sniff_versions(raw):
    """Protocol versions in the headers of CRC-valid frames found in ``raw`` (to name a
    mismatched instrument's version, whose frames the decoder rejects)."""
    versions = set()
    start = raw.find(protocol.SYNC)
    while start >= 0 and start + 10 <= len(raw):
        tv, length = raw[start + 2], int.from_bytes(raw[start + 4:start + 6], "little")
        end = start + 6 + length
        if end + 4 <= len(raw) and \
                zlib.crc32(raw[start + 2:end]) == int.from_bytes(raw[end:end + 4], "little"):
            versions.add(tv >> 4)
        start = raw.find(protocol.SYNC, start + 1)
    return versions


# --- configuration -------------------------------------------------------------------------------

@dataclasses.dataclass
class CaptureConfig:
    """What a capture records and how it is described (``docs/capture-format.md`` shows the TOML).

    Attributes
    ----------
    channels : dict of int to str
        Channel index -> role (``rx_dv``, ``tx_en``, ``crs_dv``, ``m0`` ...). Empty: the names
        the instrument reports.
    markers : dict of str to str
        Marker channel -> meaning, e.g. ``{"m0": "rx.isr"}``.
    glitch : dict of int to int
        Channel -> minimum pulse width in capture cycles.
    rising, falling : set of int or None
        Channels whose rising/falling edges are recorded (``None``: all).
    dut, label, scenario : str
        Device-under-test description, configuration label, traffic scenario.
    extra : dict
        Other tables of the file, stored in the metadata as they are.
    frames : latscope.capture.link.rules.FrameRules or None
        The ``[frames]`` table: frame classes and rule tables, sent to the instrument.
    """
    channels: dict = dataclasses.field(default_factory=dict)
    markers: dict = dataclasses.field(default_factory=dict)
    glitch: dict = dataclasses.field(default_factory=dict)
    rising: set = None
    falling: set = None
    dut: str = ""
    label: str = ""
    scenario: str = ""
    extra: dict = dataclasses.field(default_factory=dict)
    frames: object = None

    def channel_index(self, name, where):
        """Index of a channel given as an index or a role name."""
        if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
            index = int(name)
        else:
            matches = [i for i, role in self.channels.items() if role == name]
            if not matches:
                raise LatscopeError(f"{where}: unknown channel {name!r}; the channel map has "
                                    f"{sorted(set(self.channels.values())) or 'no names'}")
            index = matches[0]
        if not 0 <= index < protocol.NUM_CHANNELS:
            raise LatscopeError(f"{where}: channel {index} is outside "
                                f"0..{protocol.NUM_CHANNELS - 1}")
        return index


def load_config(path):
    """Read a capture config TOML file into a :class:`CaptureConfig` (errors name the key)."""
    raw = read_toml(path, "config")
    return config_from_dict(raw, where=os.fspath(path))


def config_from_dict(raw, where="config"):
    """Build a :class:`CaptureConfig` from the parsed TOML tables."""
    raw = dict(raw)
    config = CaptureConfig()
    for key, role in dict(raw.pop("channels", {})).items():
        if not str(key).isdigit() or not 0 <= int(key) < protocol.NUM_CHANNELS:
            raise LatscopeError(f"{where}: [channels] keys are channel indices 0.."
                                f"{protocol.NUM_CHANNELS - 1}, not {key!r}")
        if not isinstance(role, str) or not role:
            raise LatscopeError(f"{where}: [channels] {key} must name a role ({_ROLES_HELP})")
        other = next((k for k, r in config.channels.items() if r == role), None)
        if other is not None:       # which channel's edges would be the role is undecidable
            raise LatscopeError(f"{where}: [channels] gives role {role!r} to two channels, "
                                f"{other} and {key}; give each role one channel")
        config.channels[int(key)] = role
    for key, meaning in dict(raw.pop("markers", {})).items():
        if not isinstance(meaning, str):
            raise LatscopeError(f"{where}: [markers] {key} must be a string such as \"rx.isr\"")
        config.markers[str(key)] = meaning
    for key, width in dict(raw.pop("glitch", {})).items():
        if isinstance(width, bool) or not isinstance(width, int) or not 0 <= width <= 255:
            raise LatscopeError(f"{where}: [glitch] {key} must be a width in capture cycles "
                                f"0..255, not {width!r}")
        config.glitch[config.channel_index(key, f"{where}: [glitch]")] = width
    edges = dict(raw.pop("edges", {}))
    for kind in ("rising", "falling"):
        if kind in edges:
            if not isinstance(edges[kind], list):
                raise LatscopeError(f"{where}: [edges] {kind} must be a list of channels")
            setattr(config, kind, {config.channel_index(c, f"{where}: [edges] {kind}")
                                   for c in edges.pop(kind)})
    if edges:
        raise LatscopeError(f"{where}: [edges] has unknown keys {sorted(edges)}")
    dut = dict(raw.pop("dut", {}))
    config.dut = str(dut.pop("description", ""))
    config.label = str(dut.pop("label", ""))
    if dut:
        config.extra["dut"] = dut
    if "frames" in raw:
        config.frames = rules_from_dict(raw.pop("frames"), where)
    traffic = dict(raw.pop("traffic", {}))
    config.scenario = str(traffic.pop("scenario", ""))
    if traffic:
        config.extra["traffic"] = traffic
    config.extra.update(raw)
    return config


# --- capture -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Limits:
    """Stop conditions; ``None`` means no limit. ``packets`` counts falling edges of the channel
    whose role is ``rx_dv`` (one per received frame)."""
    duration: float = None
    events: int = None
    packets: int = None

    def __post_init__(self):
        for name in ("duration", "events", "packets"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise LatscopeError(f"--{name} must be positive, not {value!r}")

    def met(self, events, packets):
        """True when ``events`` or ``packets`` reach their limit."""
        return (self.events is not None and events >= self.events) or \
            (self.packets is not None and packets >= self.packets)

    def reached(self, name):
        """The stop reason naming the limit: ``"packet limit reached (20,000 packets)"``."""
        if name == "duration":
            return f"duration limit reached ({self.duration:g} s)"
        value = getattr(self, name)
        return f"{name[:-1]} limit reached ({value:,} {name})"


@dataclasses.dataclass
class CaptureOutcome:
    """What happened in a capture: ``reason`` in words, ``exit_status`` and the totals."""
    reason: str
    exit_status: int
    events: int = 0
    packets: int = 0
    bytes: int = 0
    lost_overflow: int = 0
    lost_link: int = 0
    frames_bad: int = 0
    bytes_skipped: int = 0
    seconds: float = 0.0
    finalised: bool = False


class _TimeBaseReset(Exception):
    pass


def capture_metadata(identity, config, *, port="", extra=None):
    """The ``META`` dict of a capture from the IDENTIFY answer and the config."""
    names = identity.get("channel_names") or []
    channels = config.channels or {i: n for i, n in enumerate(names)}
    meta = {
        "tick_hz": identity["tick_hz"],
        "resolution_s": 1.0 / identity["tick_hz"],
        "instrument": {k: v for k, v in identity.items() if k != "tick_hz"},
        "port": port,
        "channels": {str(k): v for k, v in sorted(channels.items())},
        "markers": config.markers,
        "glitch_cycles": {str(k): v for k, v in sorted(config.glitch.items())},
        "edges": {"rising": sorted(config.rising) if config.rising is not None else "all",
                  "falling": sorted(config.falling) if config.falling is not None else "all"},
        "dut": config.dut,
        "label": config.label,
        "scenario": config.scenario,
        "software": {"latscope": __version__, "protocol_version": protocol.PROTOCOL_VERSION},
        "start_time": _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime()),
    }
    if config.frames is not None:
        meta["frames"] = config.frames.metadata()
    for key, value in {**config.extra, **(extra or {})}.items():
        if isinstance(value, dict) and isinstance(meta.get(key), dict):
            meta[key] = {**meta[key], **value}        # e.g. instrument.simulated = true
        else:
            meta[key] = value
    return meta


#: Default glitch filter of a ``crs_dv`` channel, ns. RMII 1.2 s5.3.2: at the end of a frame
#: whose carrier dropped early, CRS_DV is low on the first dibit of each nibble and high on the
#: second, 20 ns low / 20 ns high at 100 Mb/s; every such low must vanish or each one adds a pulse
#: and frame records no longer tie to pulses (``capture.frames.place_frames``). 50 ns is above the
#: whole 40 ns toggle period (a low and a high misread by a tick still vanish) and far below
#: anything real on CRS_DV: a frame (>= 5.76 us) and the gap between frames (>= 0.96 us). At
#: 10 Mb/s the toggling is 200 ns / 200 ns, beyond most builds' ``max_glitch``: set ``[glitch]``.
CRS_DV_GLITCH_NS = 50


def default_glitch(config, identity):
    """``{channel: capture cycles}`` to send: ``config.glitch`` plus, for every channel whose
    role is ``crs_dv`` and that the config leaves unset, :data:`CRS_DV_GLITCH_NS` in capture
    cycles (rounded up, at most the instrument's ``max_glitch``; none if it has no filter)."""
    glitch = dict(config.glitch)
    names = config.channels or dict(enumerate(identity.get("channel_names") or []))
    limit = int(identity.get("max_glitch") or 0)
    hz = identity.get("capture_hz")
    if limit and hz:
        width = min(limit, -(-CRS_DV_GLITCH_NS * int(hz) // 1_000_000_000))
        for ch, role in names.items():
            if role == "crs_dv" and int(ch) not in glitch:
                glitch[int(ch)] = width
    return glitch


def configure(instrument, config, identity):
    """Send the config's edge enables and glitch widths, then zero the time base.

    ``config.glitch`` gets the defaults the instrument is sent (:func:`default_glitch`: the RMII
    ``crs_dv`` filter), so the capture's metadata records them."""
    instrument.disarm()    # nothing may be in flight across the reset below
    config.glitch = default_glitch(config, identity)
    n = int(identity.get("channels") or protocol.NUM_CHANNELS)
    everything = (1 << n) - 1
    rise = everything if config.rising is None else sum(1 << c for c in config.rising)
    fall = everything if config.falling is None else sum(1 << c for c in config.falling)
    instrument.set_edges(rise, fall)
    for channel, width in sorted(config.glitch.items()):
        instrument.set_glitch(channel, width)
    if config.frames is not None:
        for opcode, args in config.frames.commands():
            try:
                instrument.command(opcode, args)
            except LatscopeError as error:
                if "UNKNOWN_OPCODE" in str(error):
                    raise LatscopeError(
                        f"the config has a [frames] table but this instrument has no frame "
                        f"capture (board {identity.get('board', '?')!r} answers "
                        f"{opcode.name} with UNKNOWN_OPCODE): use a frame-capture build "
                        f"(--frames mii) or remove [frames]") from None
                raise
    instrument.reset_time()
    instrument.discard()
    instrument.decoder.expect_reset()


def run_capture(instrument, writer, *, limits=None, rx_dv_channel=None, progress=None,
                stop=None, clock=_time.monotonic):
    """Record from an identified, configured ``instrument`` into ``writer`` and close it.

    Parameters
    ----------
    instrument : Instrument
    writer : CaptureWriter
        Finalised (``NOTE`` chunk) whatever happens.
    limits : Limits
    rx_dv_channel : int, sequence of int, or None
        Channel(s) whose falling edges count packets (``rx_dv`` and ``crs_dv``: only the bus the
        DUT uses has pulses).
    progress : callable or None
        Called as ``progress(outcome_so_far)`` after each read.
    stop : callable or None
        Returns a reason string (e.g. ``"interrupted (SIGTERM)"``) when the capture must stop.

    Returns
    -------
    CaptureOutcome
    """
    limits = limits or Limits()
    out = CaptureOutcome(reason="", exit_status=EXIT_OK)
    start = clock()
    armed = False
    error = None
    write_error = None
    time_reset = False

    last_time = [None]

    def consume(results):
        for r in results:
            time = np.asarray(r.time)
            channel = np.asarray(r.channel)
            rising = np.asarray(r.rising)
            keep = len(time)
            reset = bool(r.resets)
            if keep:
                previous = np.concatenate([[time[0] if last_time[0] is None else last_time[0]],
                                           time[:-1]])
                back = np.flatnonzero(time < previous)
                if len(back):
                    reset, keep = True, int(back[0])
                elif reset:      # restarted, but where is unknown: keep none of this batch
                    keep = 0
            if reset:
                if keep:
                    writer.append_events(time[:keep], channel[:keep], rising[:keep])
                    out.events += keep
                raise _TimeBaseReset(len(time) - keep)
            if keep:
                last_time[0] = int(time[-1])
            if limits.events is not None:
                keep = min(keep, limits.events - out.events)
            if rx_dv_channel is not None:
                ends = np.flatnonzero(np.isin(channel[:keep], rx_dv_channel) & ~rising[:keep])
                need = len(ends) if limits.packets is None else limits.packets - out.packets
                if limits.packets is not None and len(ends) >= need:
                    keep = int(ends[need - 1]) + 1
                out.packets += int(min(len(ends), need))
            if keep:
                writer.append_events(time[:keep], channel[:keep], rising[:keep])
            out.events += keep
            if r.losses:
                writer.append_losses(r.losses)
                for loss in r.losses:
                    if loss.cause == "overflow":
                        out.lost_overflow += int(loss.lost)
                    else:
                        out.lost_link += int(loss.lost)
            heartbeats = r.heartbeats
            ending = keep < len(time) or limits.met(out.events, out.packets)
            if len(heartbeats) and keep and ending:
                # the capture ends with this batch: its heartbeats up to the first one at or
                # after the last event recorded (the instrument's state at the end), whatever
                # else the batch held
                after = np.flatnonzero(heartbeats["time"] >= time[keep - 1])
                if len(after):
                    heartbeats = heartbeats[:after[0] + 1]
            if len(heartbeats):
                writer.append_heartbeats(heartbeats)
            if len(r.frames):
                writer.append_frames(r.frames, r.frame_headers)
            if len(r.frame_counters):
                writer.append_frame_counters(r.frame_counters)
            out.frames_bad += r.frames_bad
            out.bytes_skipped += r.bytes_skipped
            if keep < len(time):
                return True
        return False

    try:
        instrument.arm()
        armed = True
        start = clock()
        while True:
            reason = stop() if stop else None
            if reason:
                out.reason = reason
                break
            if consume(instrument.read(0.1, gather=GATHER_S)) \
                    or limits.met(out.events, out.packets):
                out.reason = limits.reached("events" if limits.events is not None
                                            and out.events >= limits.events else "packets")
                break
            out.seconds = clock() - start
            out.bytes = instrument.bytes_received
            if limits.duration is not None and out.seconds >= limits.duration:
                out.reason = limits.reached("duration")
                break
            if progress:
                progress(out)
    except KeyboardInterrupt:
        out.reason = "interrupted (Ctrl-C)"
    except _TimeBaseReset as exc:
        out.reason = (f"the instrument's time base restarted during the capture (reset or "
                      f"power cycle); the {exc.args[0]} events received after it and any later "
                      f"are not in this file")
        out.exit_status = EXIT_LINK_LOST
        time_reset = True
    except TransportClosed as exc:
        out.reason = f"link lost: {exc}"
        out.exit_status = EXIT_LINK_LOST
        armed = False
    except CaptureWriteError as exc:  # a full disk: the writer cut and finalised the file
        out.reason = str(exc)
        out.exit_status = EXIT_CRASH
        out.events = exc.events         # what the file holds, not what was received
        write_error = exc
    except LatscopeError as exc:
        out.reason = f"link failure: {exc}"
        out.exit_status = EXIT_LINK_LOST
    except Exception as exc:      # decoder or writer crash: keep the file, report it
        out.reason = f"crash: {type(exc).__name__}: {exc}"
        out.exit_status = EXIT_CRASH
        error = exc
    # Wind down: disarm (best effort; events in flight arrive while waiting for its reply),
    # then take everything decoded but not yet consumed and flush the decoder. After a lost
    # link this still yields what was buffered while waiting for replies.
    if armed and out.exit_status == EXIT_OK:
        try:
            instrument.disarm()
        except (TransportClosed, LatscopeError):
            pass
    if out.exit_status != EXIT_CRASH:
        try:
            pending = instrument.finish()
            if not time_reset and \
                    not (limits.events is not None and out.events >= limits.events) and \
                    not (limits.packets is not None and out.packets >= limits.packets):
                consume(pending)
            else:   # events past the limit or a restart are not recorded, losses still are
                for r in pending:
                    if r.losses:
                        writer.append_losses(r.losses)
        except KeyboardInterrupt:
            pass
        except _TimeBaseReset as exc:
            out.reason += (f"; the time base restarted at the end: {exc.args[0]} events after "
                           f"the restart are not in this file")
        except Exception as exc:  # noqa: BLE001 - a decoder failure at the end is reported
            out.reason += f"; decoder failed while finishing: {exc}"
    out.seconds = clock() - start
    out.bytes = instrument.bytes_received
    try:
        if write_error is not None:
            out.finalised = write_error.finalised       # the writer is closed already
        else:
            writer.close(reason=out.reason, packets=out.packets, bytes=out.bytes,
                         seconds=round(out.seconds, 6), frames_bad=out.frames_bad,
                         bytes_skipped=out.bytes_skipped, exit_status=out.exit_status)
            out.finalised = True
    except CaptureWriteError as exc:     # no room for the NOTE: the file is cut back, readable
        out.reason += f"; {exc}"
        out.exit_status = EXIT_CRASH
    except OSError as exc:        # e.g. disk full: the chunks already written stay readable
        out.reason += f"; the file could not be finalised ({exc.strerror or exc})"
        out.exit_status = max(out.exit_status, EXIT_CRASH)
        writer.abandon()
    if error is not None:
        out.error = error
    return out
