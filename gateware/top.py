"""The whole instrument core without pins: capture front end, FIFO, encoder, framer, control.

:class:`LatscopeCore` has two clock domains: ``capture`` (the sample clock of
:class:`~latscope.gateware.capture.CaptureFrontEnd`) and ``sync`` (the link clock of the encoder,
framer and command handler). Entries cross in a :class:`~latscope.gateware.fifo.CaptureFIFO`, the
configuration in a :class:`~latscope.gateware.control.ConfigCrossing`. A board wrapper
(:mod:`latscope.gateware.boards`) adds the I/O buffers, clocks and the UART; simulations connect
``tx``/``rx`` to the host directly.

Timestamp reset: RESET_TIME reaches the front end as ``config.time_reset`` in capture cycle ``t``;
the front end makes sample cycle ``t + 2`` the new cycle 0 and writes no entry in cycle ``t + 2``,
so the core stages the reset entry (:data:`~latscope.gateware.model_stream.ENTRY_RESET`) for the
FIFO then, between the last entry of the old time base and the first of the new one (every entry
passes the same one-cycle write register, so the order holds). The encoder
zeroes its time, event index and lost count on it and sends a heartbeat with the next epoch.
"""

import functools

from amaranth.hdl import Cat, DomainRenamer, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .capture import CaptureFrontEnd, FrontEndConfig
from .checks import rejected
from .control import ConfigCrossing, Control
from .crossings import Synchronizer
from .encoder import Encoder
from .encoder_pipelined import PipelinedEncoder
from .eth.inband import EthLinkStatus
from .fifo import CaptureFIFO, level_at_most
from .framer import Framer
from .frames import FrameCapture
from .linkword import LinkWord, check_link_bytes
from .model_stream import ENTRY_RESET, check_names
from .protocol import MAX_PAYLOAD, Heartbeat, HeartbeatStatus

__all__ = ["LatscopeCore"]


class LatscopeCore(wiring.Component):
    """Samples in, framed event bytes out, commands in.

    Parameters
    ----------
    channels, lanes, counter_width, max_glitch, heartbeat_shift : int
        As for :class:`~latscope.gateware.capture.CaptureFrontEnd`.
    time_width : int
        As for :class:`~latscope.gateware.encoder.Encoder`: bits kept of the time and the event
        and lost counts (64, or down to 48 where the FPGA is small).
    pipelined_encoder : bool
        True: the :class:`~latscope.gateware.encoder_pipelined.PipelinedEncoder` (one unit formed
        per link cycle, full-width adders: the ECP5 boards, whose Ethernet link needs the rate).
        False (default): the two-stage :class:`~latscope.gateware.encoder.Encoder` (64-bit sums
        in halves: the iCE40's 24 MHz link logic). Both send the same bytes.
    link_bytes : int
        Stream bytes per link cycle from the encoder through the framer to ``tx``: 1 (the UART
        builds), or 2 with the pipelined encoder (the Ethernet build: ``tx`` carries
        :class:`~latscope.gateware.linkword.LinkWord`, the same bytes in words of two,
        :mod:`~latscope.gateware.linkword`).
    fifo_depth : int
        Capture FIFO entries, a power of two >= 4.
    async_fifo : bool
        True: ``capture`` and ``sync`` are independent clocks. False: the platform drives both
        domains from one clock, and a synchronous FIFO is used.
    capture_hz : int
        Capture clock frequency, reported by IDENTIFY (a tick is ``1 / (capture_hz * lanes)``).
    board : str
        Reported by IDENTIFY.
    channel_names : sequence of str
        One per channel, reported by IDENTIFY.
    source_hash : int
        Gateware source hash, reported by IDENTIFY.
    fast_forward : bool
        Simulation only: expose ``ff_skip``, ``quiescent`` and ``ff_limit`` (capture domain) so a
        simulator can skip idle time; ``quiescent`` also requires the FIFO empty, no entry on its
        way into it, and the link side idle with its output drained (a partly filled EVENTS frame
        may wait in the framer: only the next unit closes it) and its command parser hunting for
        a frame (with two clocks, for 4 capture cycles, the idle flag's crossing).
    clock_gates : bool
        Simulation only, with ``fast_forward``: each channel's glitch filter registers in clock
        domain ``filter<ch>``, and ``filter_quiet`` (a bit per channel) set when an edge of that
        clock would change none of them (:class:`~latscope.gateware.capture.CaptureFrontEnd`).
        With one clock (``async_fifo=False``) also ``window_skip``: nonzero while the front end
        offers its window skip and the rest is quiet: the largest ``ff_skip`` (from 1) that
        carries an edge just sampled through the glitch filter's window in one cycle.
    max_payload : int
        Token bytes per EVENTS frame.
    command_timeout : int
        Link cycles after which a partly received command is abandoned.
    sniffer : str or None
        ``"mii"`` or ``"rmii"``: add frame-aware capture (:mod:`latscope.gateware.frames`), with
        the DUT's receive pins ``phy_rx`` in clock domain ``phy_rx`` and its transmit pins
        ``phy_tx`` in ``phy_tx``. None (default): edges only.
    frame_options : dict
        ``rules``, ``classes``, ``header_bytes``, ``queue_depth`` of the frame capture.
    net : NetConfig, optional
        Ethernet boards: the addresses after reset; adds SET_NET and the ``net``, ``net_write``,
        ``net_busy`` members (to :class:`~latscope.gateware.eth.link.EthLink`), and ``eth_status``
        (link domain, :class:`~latscope.gateware.eth.inband.EthLinkStatus`: the PHY's link,
        speed and duplex, reported in every heartbeat and STATUS reply).
    input_delay : bool
        The board has an input delay line per channel (ECP5 ``DELAYF``): adds SET_DELAY and the
        ``delay_taps`` member (link domain, taps per channel) for the board layer's
        :class:`~latscope.gateware.delay.DelayControl`. The core itself delays nothing.
    """

    def __init__(self, *, channels=8, lanes=2, counter_width=48, max_glitch=15,
                 heartbeat_shift=20, fifo_depth=1024, async_fifo=True, capture_hz, board="sim",
                 channel_names, source_hash=0, fast_forward=False, max_payload=MAX_PAYLOAD,
                 command_timeout=1 << 16, time_width=64, sniffer=None, frame_options=None,
                 net=None, pipelined_encoder=False, link_bytes=1, input_delay=False,
                 clock_gates=False):
        with rejected(self):
            if not isinstance(pipelined_encoder, bool):
                raise TypeError(f"pipelined_encoder must be a bool, not {pipelined_encoder!r}")
            check_link_bytes(link_bytes)
            if link_bytes != 1 and not pipelined_encoder:
                raise TypeError(f"Link bytes must be 1 with the two-stage encoder "
                                f"(pipelined_encoder=False), not {link_bytes!r}")
            if not isinstance(fifo_depth, int) or fifo_depth < 4 or fifo_depth & (fifo_depth - 1):
                raise TypeError(f"FIFO depth must be a power of two >= 4, not {fifo_depth!r}")
            if not isinstance(async_fifo, bool):
                raise TypeError(f"async_fifo must be a bool, not {async_fifo!r}")
            if not isinstance(fast_forward, bool):
                raise TypeError(f"fast_forward must be a bool, not {fast_forward!r}")
            self.channel_names = check_names(channels, channel_names)
        self.params = dict(channels=channels, lanes=lanes, counter_width=counter_width)
        self.front = CaptureFrontEnd(channels=channels, lanes=lanes, counter_width=counter_width,
                                     max_glitch=max_glitch, heartbeat_shift=heartbeat_shift,
                                     fast_forward=fast_forward, clock_gates=clock_gates)
        encoder = (functools.partial(PipelinedEncoder, link_bytes=link_bytes)
                   if pipelined_encoder else Encoder)
        self.encoder = encoder(channels=channels, lanes=lanes, counter_width=counter_width,
                               time_width=time_width)
        self.framer = Framer(max_payload=max_payload, link_bytes=link_bytes)
        self.link_bytes = link_bytes
        self.frames = (FrameCapture(interface=sniffer, **(frame_options or {}))
                       if sniffer is not None else None)
        self.control = Control(channels=channels, lanes=lanes, counter_width=counter_width,
                               max_glitch=max_glitch, heartbeat_shift=heartbeat_shift,
                               fifo_depth=fifo_depth, capture_hz=capture_hz, board=board,
                               channel_names=self.channel_names, source_hash=source_hash,
                               timeout=command_timeout,
                               frame_rules=self.frames.rules if self.frames else 0,
                               net=net, input_delay=input_delay)
        self.fifo_depth, self.async_fifo, self.fast_forward = fifo_depth, async_fifo, fast_forward
        self.identify = self.control.identify
        members = {
            "samples": In(lanes * channels),
            "selftest_out": Out(lanes),
            "tx": Out(stream.Signature(8 if link_bytes == 1 else LinkWord)),
            "rx": In(stream.Signature(8)),
        }
        if self.frames is not None:
            members.update(phy_rx=In(self.frames.pins), phy_tx=In(self.frames.pins))
        if net is not None:
            # Ethernet boards: SET_NET's registers, carried to the link by its own crossing
            # (gateware/eth/link.py), whose busy flag holds commands like the config crossing's.
            members.update(net=Out(self.control.net.shape(), init=self.control.net_init),
                           net_write=Out(1), net_busy=In(1), eth_status=In(EthLinkStatus))
        if input_delay:
            members.update(delay_taps=Out(self.control.delay_taps.shape()))
        if fast_forward:
            members.update(ff_skip=In(counter_width), quiescent=Out(1),
                           ff_limit=Out(counter_width))
            if not async_fifo and self.frames is None:
                members.update(link_quiet=Out(1))
        if clock_gates:
            members.update(filter_quiet=Out(channels))
            if not async_fifo:
                members.update(window_skip=Out(8))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.front = front = DomainRenamer({"sync": "capture"})(self.front)
        m.submodules.encoder = enc = self.encoder
        m.submodules.framer = framer = self.framer
        m.submodules.control = ctl = self.control
        width = self.encoder.entry_layout.size
        if self.async_fifo:
            m.submodules.fifo = q = CaptureFIFO(width=width, depth=self.fifo_depth,
                                                r_domain="sync", w_domain="capture")
            level = q.r_level
        else:
            m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=width, depth=self.fifo_depth)
            level = q.level

        # capture side: front end -> FIFO, with the reset entry slipped in
        m.d.comb += front.samples.eq(self.samples)
        if self.front.clock_gates:
            m.d.comb += self.filter_quiet.eq(front.filter_quiet)
        if self.async_fifo:
            cross = ConfigCrossing(ctl.config.shape(), init=ctl.config_init, o_domain="capture")
            m.submodules.crossing = cross
            m.d.comb += [cross.i_config.eq(ctl.config), cross.i_pulse.eq(ctl.time_reset),
                         cross.i_write.eq(ctl.config_write)]
            busy = cross.busy
            cfg, time_reset = cross.o_config, cross.o_pulse
        else:
            # One clock: the front end registers the configuration itself; no crossing needed
            # (it would hold two more copies of the configuration word).
            cfg, time_reset = ctl.config, ctl.time_reset
            busy = 0
        if ctl.net_init is not None:
            m.d.comb += [self.net.eq(ctl.net), self.net_write.eq(ctl.net_write)]
            busy = busy | self.net_busy
        m.d.comb += ctl.config_busy.eq(busy)
        if ctl.input_delay:
            m.d.comb += self.delay_taps.eq(ctl.delay_taps)
        fe = Signal(FrontEndConfig)
        m.d.comb += [fe.armed.eq(cfg.armed), fe.time_reset.eq(time_reset),
                     fe.selftest_on.eq(cfg.selftest_on), fe.rise_en.eq(cfg.rise_en),
                     fe.fall_en.eq(cfg.fall_en), fe.selftest_mask.eq(cfg.selftest_mask),
                     fe.selftest_high.eq(cfg.selftest_high), fe.selftest_low.eq(cfg.selftest_low)]
        for ch in range(self.params["channels"]):
            m.d.comb += fe.glitch[ch].eq(cfg.glitch[ch])
        m.d.comb += [front.config.eq(fe),
                     self.selftest_out.eq(Mux(cfg.selftest_drive, front.selftest_out, 0))]

        reset_delay = Signal(2)
        m.d.capture += reset_delay.eq(Cat(time_reset, reset_delay[0]))
        reset_pending = Signal()
        hold = Signal()
        reset_now = Signal()
        m.d.comb += reset_now.eq(reset_pending | reset_delay[1])
        marker = Signal(self.encoder.entry_layout)
        m.d.comb += marker.kind.eq(ENTRY_RESET)
        # Registered write stage: the entry decided in cycle t (the front end's, or the reset
        # entry) is written into the FIFO in cycle t + 1 from `w_valid`/`w_data`, so neither the
        # front end's write-stage logic nor the FIFO's full flag is in series with the FIFO's
        # pointer and memory write logic (the longest paths of both boards before). The front end
        # therefore sees `room`, a register computed a cycle early: a bound on the FIFO's level
        # plus the write in flight leaves room for the one staged now and one more. Reads only
        # lower the level, so an entry in `w_valid` always finds `q.w_rdy` set (for
        # SyncFIFOBuffered one more slot is kept, as its inner FIFO holds depth - 1).
        w_valid = Signal()
        # No domain reset on the staged entry: it is written only with `w_valid`, which has one.
        # (With the reset, the capture domain's reset net, which spans the chip, was in series
        # with the reset-entry load through two LUTs: the ECPIX-5 frame build's longest path.)
        w_data = Signal(self.encoder.entry_layout, reset_less=True)
        room = Signal()
        w_level = q.w_level
        slack = 2 if self.async_fifo else 3
        m.d.comb += [q.w_en.eq(w_valid), q.w_data.eq(w_data)]
        # Level bound from registers only (a subtraction and a comparison in one cycle missed
        # 48 MHz on the iCE40): `level_r` is last cycle's w_level, which had not yet counted
        # last cycle's write (`w_valid_r`); the level now is at most their sum.
        level_r = Signal.like(w_level)
        w_valid_r = Signal()
        m.d.capture += [level_r.eq(w_level), w_valid_r.eq(w_valid)]
        room_next = Signal()
        m.d.comb += room_next.eq(level_at_most(level_r, w_valid_r, w_valid,
                                               self.fifo_depth - slack))
        m.d.capture += room.eq(room_next)
        # Overflow hysteresis: once the FIFO is full the front end sees it full until it has
        # drained to half, so an overload gives a few long OVERFLOW records (29 bytes each)
        # instead of one per free slot, which would crowd the events off the link.
        drained = Signal()           # registered, so no compare is in series with `hold`
        hold_next = Signal()
        m.d.capture += drained.eq(level_r <= self.fifo_depth // 2)
        m.d.comb += hold_next.eq(Mux(~room, 1, Mux(drained, 0, hold)))
        m.d.capture += hold.eq(hold_next)
        # The front end's ready, registered from the next values of its terms (it fans out
        # through the whole write stage; gating it after a flop missed 48 MHz on the iCE40).
        reset_now_next = Signal()
        front_rdy = Signal()
        m.d.comb += reset_now_next.eq(Mux(reset_now, ~room, reset_pending) | reset_delay[0])
        m.d.capture += front_rdy.eq(room_next & ~hold_next & ~reset_now_next)
        m.d.comb += front.fifo_w_rdy.eq(front_rdy)      # low while the reset entry is due
        with m.If(reset_now):
            m.d.capture += [w_valid.eq(room), w_data.eq(marker), reset_pending.eq(~room)]
        with m.Else():
            m.d.capture += [w_valid.eq(front.fifo_w_en), w_data.eq(front.fifo_w_data)]

        # link side: FIFO -> encoder -> framer -> tx; rx -> control -> framer
        wiring.connect(m, q.r_stream, enc.entries)
        wiring.connect(m, enc.units, framer.units)
        # Reply bytes pass a register too (the command handler's byte selection is long).
        rep_valid = Signal()
        rep_byte = Signal.like(ctl.replies.payload)
        m.d.comb += [ctl.replies.ready.eq(~rep_valid | framer.replies.ready),
                     framer.replies.valid.eq(rep_valid), framer.replies.payload.eq(rep_byte)]
        with m.If(ctl.replies.valid & ctl.replies.ready):
            m.d.sync += [rep_valid.eq(1), rep_byte.eq(ctl.replies.payload)]
        with m.Elif(framer.replies.ready):
            m.d.sync += rep_valid.eq(0)
        # Output register: the byte multiplexers of the framer (and the command handler's reply
        # bytes behind them) end in flip-flops, not in the UART's shift register.
        out_valid = Signal()
        out_byte = Signal(framer.tx.payload.shape())
        m.d.comb += [framer.tx.ready.eq(~out_valid | self.tx.ready),
                     self.tx.valid.eq(out_valid), self.tx.payload.eq(out_byte)]
        with m.If(framer.tx.valid & framer.tx.ready):
            m.d.sync += [out_valid.eq(1), out_byte.eq(framer.tx.payload)]
        with m.Elif(self.tx.ready):
            m.d.sync += out_valid.eq(0)
        if self.frames is not None:
            m.submodules.frames = frames = self.frames
            m.d.comb += [frames.phy_rx.eq(self.phy_rx), frames.phy_tx.eq(self.phy_tx),
                         frames.clear.eq(ctl.time_reset)]
            wiring.connect(m, ctl.frame_config, frames.config)
            wiring.connect(m, frames.records, framer.records)
        m.submodules.rx_fifo = rxq = fifo.SyncFIFOBuffered(width=8, depth=32)
        wiring.connect(m, wiring.flipped(self.rx), rxq.w_stream)
        wiring.connect(m, rxq.r_stream, ctl.rx)

        high_water = Signal(16)
        clipped = Signal(16)
        m.d.comb += clipped.eq(Mux(level > 0xFFFF, 0xFFFF, level))
        with m.If(enc.hb_sent):
            m.d.sync += high_water.eq(clipped)
        with m.Elif(clipped > high_water):
            m.d.sync += high_water.eq(clipped)
        overflow = Signal()
        m.submodules.overflow_sync = Synchronizer(front.overflow_active, overflow,
                                                  kind="ff_synchronizer")
        status = Signal(HeartbeatStatus)
        m.d.comb += [status.armed.eq(ctl.config.armed), status.selftest.eq(ctl.config.selftest_on),
                     status.overflow_active.eq(overflow)]
        if ctl.net_init is not None:
            eth = self.eth_status
            m.d.comb += [status.eth_present.eq(1), status.eth_link.eq(eth.link),
                         status.eth_speed.eq(eth.speed), status.eth_full_duplex.eq(eth.full_duplex)]
        m.d.comb += [enc.hb_high_water.eq(high_water), enc.hb_status.eq(status)]
        now = Signal(Heartbeat)
        m.d.comb += [now.time.eq(enc.time), now.events.eq(enc.events), now.lost.eq(enc.lost),
                     now.fifo_high_water.eq(high_water), now.status.eq(status),
                     now.epoch.eq(enc.epoch), ctl.status.eq(now)]

        if self.fast_forward:
            # The link side is idle when nothing moves in it. A partly filled EVENTS frame may
            # wait in the framer (framer.waiting): only the next unit closes it (one that does
            # not fit, or the heartbeat of the next TICK entry, which ff_limit never skips), so
            # skipping cycles leaves it, and the bytes sent, unchanged.
            # The command parser must be hunting for a frame too: between a command's last byte
            # and its effect (a configuration write, a time reset, a reply) it sees no byte and
            # sends none, and a skip then would move that effect by the cycles skipped (the
            # link domain advances one cycle per skip). And the overflow flag must have crossed
            # back to 0, so the link domain holds still while the capture side skips.
            link_idle = Signal()
            link_idle_c = Signal()
            m.d.comb += link_idle.eq(enc.idle & framer.waiting & ~self.tx.valid & ~rxq.r_rdy
                                     & ~ctl.replies.valid & ~rep_valid & ctl.hunting & ~overflow)
            if self.async_fifo:
                m.submodules.idle_sync = Synchronizer(link_idle, link_idle_c,
                                                      o_domain="capture", kind="ff_synchronizer")
            else:
                m.d.comb += link_idle_c.eq(link_idle)
            now_quiet = Signal()
            # Not while an entry is on its way into the FIFO (decided by the front end, or being
            # written): the front end counts itself quiescent in the cycle that decides a TICK, and
            # a skip then would land on the next multiple of 2**heartbeat_shift with this TICK
            # still queued, so two TICKs would meet in the FIFO and raise its high-water mark.
            rest_quiet = Signal()
            m.d.comb += rest_quiet.eq(~front.fifo_w_en & ~q.w_en & (q.w_level == 0) & link_idle_c
                                      & ~reset_now & ~reset_delay.any() & ~time_reset)
            m.d.comb += now_quiet.eq(front.quiescent & rest_quiet)
            if self.async_fifo:
                # The link side's idle flag reaches the capture domain through a synchronizer:
                # wait until it has held for 4 capture cycles.
                quiet = Signal(range(5))
                with m.If(~now_quiet):
                    m.d.capture += quiet.eq(0)
                with m.Elif(quiet != 4):
                    m.d.capture += quiet.eq(quiet + 1)
                m.d.comb += self.quiescent.eq(now_quiet & (quiet == 4))
            else:
                # One clock: the flag is this cycle's, so a skip may come at once. (Before the
                # parser's `hunting` was part of it, four quiet cycles were waited here too, and
                # one alone moved a capture's time base: a skip came between the last byte of
                # RESET_TIME and its effect.)
                m.d.comb += self.quiescent.eq(now_quiet)
            if hasattr(self, "window_skip"):
                # The front end's window skip (CaptureFrontEnd, `window_skip`), offered while the
                # rest is quiet as for a skip: `window_skip` is the largest ff_skip it takes,
                # and an ff_skip from 1 to that in such a cycle takes it.
                window_go = Signal()
                m.d.comb += [self.window_skip.eq(Mux(rest_quiet, front.window_skip, 0)),
                             window_go.eq((self.ff_skip != 0)
                                          & (self.ff_skip <= self.window_skip)),
                             front.window_go.eq(window_go),
                             front.ff_skip.eq(Mux(self.quiescent | window_go, self.ff_skip, 0))]
            else:
                m.d.comb += front.ff_skip.eq(Mux(self.quiescent, self.ff_skip, 0))
            m.d.comb += self.ff_limit.eq(front.ff_limit)
            if hasattr(self, "link_quiet"):
                # A link clock edge now would change no register of the link domain (`sync`)
                # that matters: nothing to write into or read from either FIFO, encoder and
                # framer idle, no reply or output byte, the command parser hunting for a frame
                # (only its idle counter moves, and it restarts with the next byte), and the
                # overflow flag low on both sides of its synchroniser. A simulator may then
                # leave the link clock still while the capture clock runs. With one clock for
                # both domains (async_fifo=False), the FIFO's write needs a link edge: `w_valid`.
                ovf_seen = Signal()
                m.d.sync += ovf_seen.eq(front.overflow_active)
                m.d.comb += self.link_quiet.eq(
                    link_idle & ~w_valid & (level == 0) & ~self.rx.valid & ctl.hunting
                    & ~front.overflow_active & ~ovf_seen & ~overflow)
        return m
