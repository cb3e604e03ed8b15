"""Command handler: COMMAND frames in, REPLY payloads and configuration registers out.

:class:`Control` (link clock domain) searches the received bytes for the sync word, checks the
header and the CRC-32, executes the command and offers a reply to the framer. Every frame that
starts with a sync gets exactly one reply: BAD_FRAME for a bad header, a bad CRC or a frame cut off
(no byte for ``timeout`` cycles), UNKNOWN_OPCODE, BAD_LENGTH or BAD_ARGUMENT for a well-formed
command the device will not execute, OK with data otherwise.

:class:`ConfigCrossing` carries the registers into the capture clock domain: after each command the
link side toggles a request flag that crosses through a
:class:`~latscope.gateware.crossings.Synchronizer`;
the capture side copies the registers (which the command handler holds until the transfer is
acknowledged, ``config_busy``) and returns the toggle as acknowledgement. The timestamp-reset
request crosses as a toggle (the circuit of :class:`~amaranth.lib.cdc.PulseSynchronizer`).
:class:`latscope.gateware.model_stream.CommandModel` is the reference.
"""

from amaranth.hdl import C, Cat, Module, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from .checks import check, rejected
from .classify import CONFIG_ARG_BYTES, ConfigWrite
from .crossings import Synchronizer, mark
from .eth.net import NetLayout, net_init
from .framer import ReplyByte
from .model_capture import selftest_min_ticks
from .model_stream import MAX_COMMAND_PAYLOAD, check_names, identify_data
from .protocol import (
    DELAY_TAPS,
    PROTOCOL_VERSION,
    SYNC,
    ClassRule,
    FrameHeader,
    FrameType,
    Heartbeat,
    Opcode,
    ReplyHeader,
    Status,
)

__all__ = ["config_layout", "delay_layout", "Control", "ConfigCrossing"]

_RH_BYTES = ReplyHeader.as_shape().size // 8
_HB_BYTES = Heartbeat.as_shape().size // 8
_ARG_LENGTHS = {Opcode.IDENTIFY: 0, Opcode.ARM: 1, Opcode.SET_EDGES: 4, Opcode.SET_GLITCH: 2,
                Opcode.RESET_TIME: 0, Opcode.SELFTEST: 7, Opcode.STATUS: 0}


def config_layout(*, channels, max_glitch):
    """Layout of the configuration registers the command handler holds."""
    return data.StructLayout({
        "armed": 1,
        "rise_en": channels,
        "fall_en": channels,
        "glitch": data.ArrayLayout(bits_for(max_glitch), channels),
        "selftest_on": 1,
        "selftest_drive": 1,
        "selftest_mask": channels,
        "selftest_high": 16,
        "selftest_low": 16,
    })


def delay_layout(*, channels):
    """Layout of the input delay lines' settings (SET_DELAY): taps per channel."""
    return data.ArrayLayout(bits_for(DELAY_TAPS - 1), channels)


class Control(wiring.Component):
    """Parses COMMAND frames, executes them, replies.

    Parameters
    ----------
    channels, lanes, counter_width, max_glitch, heartbeat_shift, fifo_depth, capture_hz : int
        The design's parameters, reported by IDENTIFY; ``channels`` and ``max_glitch`` also bound
        the arguments of SET_EDGES, SET_GLITCH and SELFTEST.
    board : str
        Board name reported by IDENTIFY.
    channel_names : sequence of str
        One name per channel, reported by IDENTIFY.
    source_hash : int
        The gateware source's git hash (first 16 hex digits as a 64-bit integer).
    timeout : int
        Link clock cycles without a byte after which a partly received frame is abandoned with a
        BAD_FRAME reply.

    Attributes
    ----------
    rx : In(stream.Signature(8))
        Bytes from the host.
    replies : Out(stream.Signature(ReplyByte))
        REPLY payloads, to the framer.
    config : Out(config_layout(...))
        The registers, link clock domain.
    time_reset : Out(1)
        Pulses when RESET_TIME executes.
    status : In(Heartbeat)
        Current values, returned by STATUS.
    config_write : Out(1)
        High in the cycle a command executes (the registers may change at its end): starts a
        :class:`ConfigCrossing` transfer.
    config_busy : In(1)
        A crossing transfer is under way: commands wait, so the registers stay unchanged until
        the capture side has copied them. Low (never waiting) without a crossing.
    frame_config : Out(stream.Signature(ConfigWrite))
        With ``frame_rules``: opcodes 0x10..0x13 after their arguments were checked, one cycle
        each, for the :class:`~latscope.gateware.classify.FrameClassifier` (always ready).
    delay_taps : Out(delay_layout(...))
        With ``input_delay``: the taps SET_DELAY set per channel (link clock domain), for the
        board's delay lines (:class:`~latscope.gateware.delay.DelayControl`); 0 after reset.
    """

    def __init__(self, *, channels=8, lanes=2, counter_width=48, max_glitch=15,
                 heartbeat_shift=20, fifo_depth=1024, capture_hz, board="sim", channel_names,
                 source_hash=0, timeout=1 << 16, frame_rules=0,
                 net=None, input_delay=False):
        with rejected(self):
            check("Channel count", channels, 1, 8)
            check("Lane count", lanes, 1, 255)
            check("Counter width", counter_width, 8, 63)
            check("Maximum glitch width", max_glitch, 0, 255)
            check("Heartbeat shift", heartbeat_shift, 1, 62)
            check("FIFO depth", fifo_depth, 1)
            check("Capture frequency", capture_hz, 1, (1 << 32) - 1)
            check("Source hash", source_hash, 0, (1 << 64) - 1)
            check("Timeout", timeout, 16)
            check("Frame rule count", frame_rules, 0, 128)
            if not isinstance(input_delay, bool):
                raise TypeError(f"Input delay must be True or False, not {input_delay!r}")
            if not isinstance(board, str) or not board or any(c in board for c in ",;="):
                raise TypeError(f"Board name must be non-empty text without ',', ';' or '=', "
                                f"not {board!r}")
            self.channel_names = check_names(channels, channel_names)
        self.channels, self.max_glitch, self.timeout = channels, max_glitch, timeout
        self.frame_rules = frame_rules
        self._arg_lengths = dict(_ARG_LENGTHS)
        if frame_rules:
            self._arg_lengths.update(CONFIG_ARG_BYTES)
        self.identify = identify_data(
            channels=channels, lanes=lanes, counter_width=counter_width, max_glitch=max_glitch,
            heartbeat_shift=heartbeat_shift, fifo_depth=fifo_depth, capture_hz=capture_hz,
            board=board, channel_names=self.channel_names, source_hash=source_hash)
        self.config_layout = config_layout(channels=channels, max_glitch=max_glitch)
        every = (1 << channels) - 1
        self.lanes = lanes
        least = selftest_min_ticks(lanes)
        self.config_init = {"rise_en": every, "fall_en": every, "selftest_high": least,
                            "selftest_low": least}
        # SET_NET exists only where there is an Ethernet link (``net``: its NetConfig at reset).
        self.net_init = None
        net_members = {}
        if net is not None:
            self.net_init = net_init(net)
            net_members = {"net": Out(NetLayout, init=self.net_init), "net_write": Out(1)}
            self._arg_lengths[Opcode.SET_NET] = 12
        members = net_members | {
            "rx": In(stream.Signature(8)),
            "replies": Out(stream.Signature(ReplyByte)),
            "config": Out(self.config_layout, init=self.config_init),
            "time_reset": Out(1),
            "status": In(Heartbeat),
            "config_write": Out(1),
            "config_busy": In(1),
        }
        if frame_rules:
            members["frame_config"] = Out(stream.Signature(ConfigWrite))
        # SET_DELAY exists only where the board has input delay lines.
        self.input_delay = input_delay
        if input_delay:
            self._arg_lengths[Opcode.SET_DELAY] = 2
            members["delay_taps"] = Out(delay_layout(channels=channels))
        super().__init__(members)
        # 1 while the parser waits for a frame's sync word (no command under way); a simulator's
        # link clock gate reads it (top.LatscopeCore.link_quiet), so it is not a port.
        self.hunting = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = crc = catalog.CRC32_ISO_HDLC(data_width=8).create()
        rx = self.rx
        byte = rx.payload
        got = Signal()
        m.d.comb += [got.eq(rx.valid & rx.ready), crc.data.eq(byte)]

        prev = Signal(8)
        with m.If(got):
            m.d.sync += prev.eq(byte)
        hdr = Signal(32)                  # FrameHeader after the sync word
        hdr_view = FrameHeader(Cat(C(0, 16), hdr))
        args = Signal(8 * MAX_COMMAND_PAYLOAD)
        count = Signal(16)
        idle_cycles = Signal(range(self.timeout + 1))
        status = Signal(8)
        opcode = Signal(8)
        seq = Signal(8)
        snapshot = Signal(_HB_BYTES * 8)
        reply_len = Signal(16)
        which = Signal(2)                 # reply data: 0 none, 1 identify, 2 status
        arg = [args.word_select(i, 8) for i in range(MAX_COMMAND_PAYLOAD)]
        length = Signal(16)
        m.d.comb += length.eq(hdr_view.length)

        timed_out = Signal()
        with m.If(got):
            m.d.sync += idle_cycles.eq(0)
        with m.Elif(idle_cycles != self.timeout):
            m.d.sync += idle_cycles.eq(idle_cycles + 1)
        m.d.comb += timed_out.eq(idle_cycles == self.timeout)

        def bad_frame():
            m.d.sync += [status.eq(Status.BAD_FRAME), opcode.eq(0), seq.eq(0), which.eq(0),
                         count.eq(0)]
            m.next = "REPLY"

        # The IDENTIFY data in a ROM (a block RAM where there is one: as LUTs it took a tenth of
        # an iCE40 UP5K), indexed by `count` itself (padded past the header, so no subtraction
        # in the path) and read a cycle ahead: the address is the value `count` takes next in
        # the REPLY state. Entering REPLY, `count` is 0 and stays so for the header bytes, which
        # do not come from the ROM, so the address is right by the first ROM byte.
        rom_init = bytes(_RH_BYTES) + bytes(self.identify)
        m.submodules.identify_rom = rom = Memory(shape=8, depth=len(rom_init),
                                                 init=list(rom_init),
                                                 attrs={"rom_style": "block"})
        rom_port = rom.read_port(domain="sync")
        count_next = Signal.like(count)
        m.d.comb += [count_next.eq(count), rom_port.addr.eq(count_next)]

        with m.FSM():
            with m.State("HUNT"):
                m.d.comb += [rx.ready.eq(1), self.hunting.eq(1)]
                with m.If(got & (prev == SYNC[0]) & (byte == SYNC[1])):
                    m.d.comb += crc.start.eq(1)
                    m.d.sync += [count.eq(0), prev.eq(0)]
                    m.next = "HEADER"

            with m.State("HEADER"):
                m.d.comb += [rx.ready.eq(1), crc.valid.eq(got)]
                with m.If(got):
                    m.d.sync += [hdr.word_select(count[:2], 8).eq(byte), count.eq(count + 1)]
                    with m.If(count == 3):
                        m.next = "CHECK"
                with m.Elif(timed_out):
                    bad_frame()

            with m.State("CHECK"):
                m.d.sync += [count.eq(0), args.eq(0)]
                with m.If((hdr_view.type != FrameType.COMMAND)
                          | (hdr_view.version != PROTOCOL_VERSION)
                          | (length > MAX_COMMAND_PAYLOAD)):
                    bad_frame()
                with m.Elif(length == 0):
                    m.next = "CRC"
                with m.Else():
                    m.next = "PAYLOAD"

            with m.State("PAYLOAD"):
                m.d.comb += [rx.ready.eq(1), crc.valid.eq(got)]
                with m.If(got):
                    m.d.sync += [args.word_select(count[:4], 8).eq(byte), count.eq(count + 1)]
                    with m.If(count == length - 1):
                        m.d.sync += count.eq(0)
                        m.next = "CRC"
                with m.Elif(timed_out):
                    bad_frame()

            with m.State("CRC"):
                m.d.comb += [rx.ready.eq(1), crc.valid.eq(got)]
                with m.If(got):
                    m.d.sync += count.eq(count + 1)
                    with m.If(count == 3):
                        m.d.sync += count.eq(0)
                        m.next = "VERIFY"
                with m.Elif(timed_out):
                    bad_frame()

            with m.State("VERIFY"):
                with m.If(crc.match_detected):
                    m.d.sync += [seq.eq(hdr_view.seq), opcode.eq(arg[0]), which.eq(0),
                                 snapshot.eq(self.status.as_value())]
                    m.next = "EXECUTE"
                with m.Else():
                    bad_frame()

            with m.State("EXECUTE"):
                with m.If(~self.config_busy):
                    m.d.comb += self.config_write.eq(1)
                    if self.net_init is not None:
                        m.d.comb += self.net_write.eq(1)
                    self._execute(m, arg, length, status, which)
                    m.next = "REPLY"

            with m.State("REPLY"):
                data_len = Signal(16)
                with m.Switch(which):
                    with m.Case(1):
                        m.d.comb += data_len.eq(len(self.identify))
                    with m.Case(2):
                        m.d.comb += data_len.eq(_HB_BYTES)
                m.d.comb += reply_len.eq(_RH_BYTES + data_len)
                header = Signal(ReplyHeader)
                m.d.comb += [header.command_seq.eq(seq), header.opcode.eq(opcode),
                             header.status.eq(status)]
                out = self.replies.payload
                m.d.comb += [self.replies.valid.eq(1), out.length.eq(reply_len)]
                with m.If(count < _RH_BYTES):
                    m.d.comb += out.data.eq(header.as_value().word_select(count[:2], 8))
                with m.Elif(which == 1):
                    m.d.comb += out.data.eq(rom_port.data)
                with m.Else():
                    padded = Cat(C(0, 8 * _RH_BYTES), snapshot)
                    m.d.comb += out.data.eq(padded.word_select(count[:6], 8))
                with m.If(self.replies.ready):
                    m.d.comb += count_next.eq(count + 1)
                    m.d.sync += count.eq(count + 1)
                    with m.If(count == reply_len - 1):
                        m.d.sync += [count.eq(0), prev.eq(0)]
                        m.next = "HUNT"
        return m

    def _execute(self, m, arg, length, status, which):
        cfg = self.config
        nargs = Signal(16)
        m.d.comb += nargs.eq(length - 1)
        u16 = [Cat(arg[i], arg[i + 1]) for i in range(1, MAX_COMMAND_PAYLOAD - 1)]
        beyond = lambda value: (value >> self.channels) != 0   # a bit above the last channel
        ok = Status.OK
        with m.If(length == 0):
            m.d.sync += status.eq(Status.BAD_LENGTH)
        with m.Else():
            self._dispatch(m, arg, nargs, u16, beyond, status, which, cfg, ok)

    def _dispatch(self, m, arg, nargs, u16, beyond, status, which, cfg, ok):
        with m.Switch(arg[0]):
            for opcode, nbytes in self._arg_lengths.items():
                with m.Case(opcode):
                    with m.If(nargs != nbytes):
                        m.d.sync += status.eq(Status.BAD_LENGTH)
                    with m.Else():
                        self._command(m, opcode, arg, u16, beyond, status, which, cfg, ok)
            with m.Default():
                m.d.sync += status.eq(Status.UNKNOWN_OPCODE)

    def _command(self, m, opcode, arg, u16, beyond, status, which, cfg, ok):
        bad = Status.BAD_ARGUMENT
        if opcode == Opcode.IDENTIFY:
            m.d.sync += [status.eq(ok), which.eq(1)]
        elif opcode == Opcode.STATUS:
            m.d.sync += [status.eq(ok), which.eq(2)]
        elif opcode == Opcode.RESET_TIME:
            m.d.sync += status.eq(ok)
            m.d.comb += self.time_reset.eq(1)
        elif opcode == Opcode.ARM:
            with m.If(arg[1] > 1):
                m.d.sync += status.eq(bad)
            with m.Else():
                m.d.sync += [status.eq(ok), cfg.armed.eq(arg[1][0])]
        elif opcode == Opcode.SET_EDGES:
            rise, fall = u16[0], u16[2]
            with m.If(beyond(rise) | beyond(fall)):
                m.d.sync += status.eq(bad)
            with m.Else():
                m.d.sync += [status.eq(ok), cfg.rise_en.eq(rise), cfg.fall_en.eq(fall)]
        elif opcode == Opcode.SET_GLITCH:
            with m.If((arg[1] >= self.channels) | (arg[2] > self.max_glitch)):
                m.d.sync += status.eq(bad)
            with m.Else():
                m.d.sync += [status.eq(ok), cfg.glitch[arg[1][:3]].eq(arg[2])]
        elif opcode == Opcode.SET_NET:
            mac, ip = Cat(*arg[6:0:-1]), Cat(*arg[10:6:-1])
            port = Cat(arg[11], arg[12])
            with m.If(arg[1][0] | (port == 0)):          # group (multicast) MAC, or no port
                m.d.sync += status.eq(bad)
            with m.Else():
                m.d.sync += [status.eq(ok), self.net.mac.eq(mac), self.net.ip.eq(ip),
                             self.net.port.eq(port)]
        elif opcode == Opcode.SET_DELAY:
            with m.If((arg[1] >= self.channels) | (arg[2] >= DELAY_TAPS)):
                m.d.sync += status.eq(bad)
            with m.Else():
                m.d.sync += [status.eq(ok), self.delay_taps[arg[1][:3]].eq(arg[2])]
        elif opcode == Opcode.SELFTEST:
            mask, high, low = u16[1], u16[3], u16[5]
            least = selftest_min_ticks(self.lanes)
            with m.If((arg[1] > 3) | beyond(mask) | (high < least) | (low < least)):
                m.d.sync += status.eq(bad)
            with m.Else():
                m.d.sync += [status.eq(ok), cfg.selftest_on.eq(arg[1][0]),
                             cfg.selftest_drive.eq(arg[1][1]), cfg.selftest_mask.eq(mask),
                             cfg.selftest_high.eq(high), cfg.selftest_low.eq(low)]
        elif opcode in CONFIG_ARG_BYTES:
            # frame capture: check the arguments here, the classifier applies them
            rule = Signal(ClassRule)
            m.d.comb += rule.eq(Cat(*arg[2:2 + ClassRule.as_shape().size // 8]))
            invalid = {
                Opcode.SET_RULE: (arg[1][:7] >= self.frame_rules) | (rule.reserved != 0),
                Opcode.SET_CLASS_MODE: arg[1] > 1,
                Opcode.SET_SEQ_OFFSET: C(0),
                Opcode.SET_COUNTER_PERIOD: arg[1] > 40,
            }[opcode]
            with m.If(invalid):
                m.d.sync += status.eq(bad)
            with m.Else():
                out = self.frame_config
                m.d.sync += status.eq(ok)
                m.d.comb += [out.valid.eq(1), out.payload.opcode.eq(opcode),
                             out.payload.args.eq(Cat(*arg[1:1 + CONFIG_ARG_BYTES[opcode]]))]


class ConfigCrossing(wiring.Component):
    """Carries a configuration word and a pulse from one clock domain to another.

    Parameters
    ----------
    shape : shape-castable
        Of the configuration word.
    init : optional
        Initial value of the word on both sides.
    o_domain : str
        Domain of ``o_config`` and ``o_pulse``; ``i_config``, ``i_write``, ``i_pulse`` and ``busy``
        are in "sync".

    A one-cycle ``i_write`` (with ``busy`` low) starts a transfer of ``i_config`` as it is in the
    following cycles; ``busy`` is high from the next cycle until the output side has copied it.
    The source must keep ``i_config`` unchanged while ``busy`` is high (the command handler
    waits for that), so the output side can copy the word directly, without a second copy on the
    link side: every output value is one the input held (never a mix of two), and each input
    pulse gives one output pulse.
    """

    def __init__(self, shape, *, init=None, o_domain="capture"):
        with rejected(self):
            if not isinstance(o_domain, str) or o_domain == "sync":
                raise TypeError(f"Output domain must be a domain name other than 'sync', "
                                f"not {o_domain!r}")
        self.o_domain = o_domain
        super().__init__({
            "i_config": In(shape, init=init), "i_write": In(1), "i_pulse": In(1),
            "busy": Out(1),
            "o_config": Out(shape, init=init), "o_pulse": Out(1),
        })
        # Loaded from the other domain once the request toggle has crossed (see elaborate).
        mark(self.o_config, "toggle_handshake")

    def elaborate(self, platform):
        m = Module()
        req = Signal()
        ack = Signal()
        req_o = Signal()
        ack_i = Signal()
        seen = Signal()
        m.submodules.req_sync = Synchronizer(req, req_o, o_domain=self.o_domain,
                                             kind="toggle_handshake")
        m.submodules.ack_sync = Synchronizer(ack, ack_i, o_domain="sync", kind="toggle_handshake")
        m.d.comb += self.busy.eq(req != ack_i)
        with m.If(self.i_write & ~self.busy):
            m.d.sync += req.eq(~req)
        # ``i_config`` has been stable since the request toggled (two output-domain flops ago).
        # the strobe that loads the data word
        load = mark(Signal(), "toggle_handshake", strobe=True)
        m.d.comb += load.eq(req_o != seen)
        with m.If(load):
            m.d[self.o_domain] += [Value.cast(self.o_config).eq(Value.cast(self.i_config)),
                                   seen.eq(req_o)]
        m.d.comb += ack.eq(seen)
        # The pulse crosses as a toggle (amaranth.lib.cdc.PulseSynchronizer's circuit, with the
        # synchroniser's first stage declared as a crossing).
        i_toggle = Signal()
        o_toggle = Signal()
        r_toggle = Signal()
        m.d.sync += i_toggle.eq(i_toggle ^ self.i_pulse)
        m.submodules.pulse_sync = Synchronizer(i_toggle, o_toggle, o_domain=self.o_domain,
                                               kind="toggle_handshake")
        m.d[self.o_domain] += r_toggle.eq(o_toggle)
        m.d.comb += self.o_pulse.eq(o_toggle ^ r_toggle)
        return m
