"""Gateware benchmark (``latscope bench --only gateware``).

Figures, per board where they depend on it:

- resolution (ns per tick) from the clock plan; Fmax of the capture clock, its margin over the
  constraint and the resources, from the board's last build summary (``build/gateware-<board>/
  summary.json``) or, without ``--quick``, from a build made now;
- bytes per event on realistic traffic: the simulated bench's echo of 64-byte frames at 100 Mb/s
  (``el-dm-64`` profile, back-to-back requests) played through the real gateware in Verilator,
  counting every byte on the wire (frame headers, CRCs, heartbeats);
- the sustained event rate the 12 Mbaud link carries, computed from the bytes per event (the
  measured rates of the UART and Ethernet links are in :mod:`latscope.bench.linkbench`);
- the burst the capture FIFO absorbs at full input rate (an edge on every tick of one channel, so
  one FIFO entry per capture cycle): events accepted before the first overflow record.

Simulated figures use the ECPIX-5 parameters (200 MHz capture, 4 lanes, 1.25 ns ticks) in the
single-clock simulation core; the link is modelled by its byte rate.
"""

import time
from pathlib import Path

import numpy as np

SECTION = "gateware: boards, resolution, link and FIFO capacity"

#: nextpnr placement seeds the iCEBreaker build is checked with in `make bench`.
PLACEMENT_SEEDS = (1, 2, 3)
LINK_BYTES_PER_S = 12e6 / 10          # 12 Mbaud 8N1 UART: 10 bit times per byte


def sim_instrument(board, **overrides):
    """A :class:`~latscope.gateware.verilator.VerilatorInstrument` built like ``board``'s bitstream
    (capture clock, lanes, channel names, FIFO depth), with ``overrides`` for any of them."""
    from latscope.gateware.boards import CHANNEL_ROLES
    from latscope.gateware.verilator import VerilatorInstrument
    params = dict(capture_hz=int(board.capture_hz), lanes=board.lanes,
                  channel_names=CHANNEL_ROLES, fifo_depth=board.fifo_depth)
    params.update(overrides)
    return VerilatorInstrument(**params)


def arm_commands(channels=8):
    """Host bytes that arm the instrument with every edge enabled. The masks name only the
    design's channels: a bit above the last one is BAD_ARGUMENT, and the command then changes
    nothing (an earlier 0xFFFF mask was refused that way, unnoticed)."""
    from latscope.gateware.codec import encode_command
    from latscope.gateware.protocol import Opcode
    mask = ((1 << channels) - 1).to_bytes(2, "little")
    return (encode_command(1, Opcode.SET_EDGES, mask * 2)
            + encode_command(2, Opcode.ARM, b"\x01"))


def decode(data):
    """Decode a byte stream with the host decoder; one :class:`DecodeResult`."""
    from latscope.capture.link.stream import DecodeResult, StreamDecoder
    decoder = StreamDecoder()
    return DecodeResult.concat([decoder.feed(data), decoder.finish()])


def periodic_stimulus(period_ticks, count, *, start=4096, channels=(0,)):
    """Square waves: every ``period_ticks`` ticks the next listed channel toggles."""
    ticks = start + period_ticks * np.arange(count, dtype=np.int64)
    chans = np.asarray(channels)[np.arange(count) % len(channels)]
    toggles = np.zeros(count, np.int64)
    toggles[:] = 1 << chans
    values = np.bitwise_xor.accumulate(toggles)
    return ticks, values


def run_stimulus(inst, ticks, values, *, throttle=1, settle=8192, lanes=2, channels=8):
    """Arm, play the stimulus, drain; return (bytes, decoded, harness statistics)."""
    from latscope.gateware.verilator import Commands, stimulus_commands
    cmds = Commands().throttle(throttle).rx(arm_commands()).run(settle)
    cmds.raw(stimulus_commands(np.asarray(ticks) + settle * lanes, values, lanes=lanes,
                               channels=channels))
    cmds.drain().run(1 << 21).drain()
    data = inst.run_commands(cmds)
    return data, decode(data), inst.last_stats


def bytes_per_event(inst, board, packets):
    """Wire bytes per event for the echo of 64-byte frames at line rate, in Verilator."""
    from latscope.capture.sim.simbench import InstrumentTiming, Traffic, simulate
    run = simulate("el-dm-64", packets, seed=1,
                   traffic=Traffic(host_turnaround_us=1.0, turnaround_jitter_us=0.0),
                   timing=InstrumentTiming(capture_hz=board.capture_hz, lanes=board.lanes))
    data, result, stats = run_stimulus(inst, run.stimulus.ticks, run.stimulus.values,
                                       lanes=board.lanes)
    events = len(result.time)
    span_s = (int(run.stimulus.ticks[-1]) - int(run.stimulus.ticks[0])) / board.tick_hz
    return {"bytes": len(data), "events": events, "expected": int(run.n_events),
            "lost": result.overflow_lost_events + result.link_lost_events,
            "event_rate": events / span_s, "stats": stats}


def fifo_burst(inst, board, *, throttle):
    """Events accepted before the first overflow at one FIFO entry per cycle (an edge on every
    tick of channel 0, so ``lanes`` events per entry)."""
    count = 8 * board.fifo_depth * board.lanes
    ticks = 4096 + np.arange(count, dtype=np.int64)
    values = (np.arange(count) + 1) & 1
    _, result, _ = run_stimulus(inst, ticks, values, throttle=throttle, lanes=board.lanes)
    losses = [r for r in result.losses if r.cause == "overflow"]
    if not losses:
        return None
    first = min(r.first_time for r in losses)
    return int(np.count_nonzero(result.time < first))


def run(quick):
    """Rows ``(figure, value, unit, note)`` for the gateware section."""
    from latscope.gateware.boards import BOARDS
    from latscope.gateware.build import build_bitstream, load_summary
    rows = []
    for name, board in sorted(BOARDS.items()):
        rows.append((f"{name}: resolution", f"{board.resolution_ns:.3f}", "ns",
                     f"{board.capture_hz / 1e6:g} MHz capture x {board.lanes} lanes "
                     + (f"(IDDRX2F 2:1 gearing, {board.eclk_hz / 1e6:g} MHz edge clock)"
                        if board.gearing == "x2" else "(DDR)")))
        # Without --quick every board is built now: a summary left by an earlier build may
        # describe other gateware.
        summary = load_summary(name) if quick else None
        note = "from the last build summary (may predate the current gateware)"
        if not quick:
            started = time.monotonic()
            try:
                summary = build_bitstream(name, log=lambda line: None)
                note = f"built now in {time.monotonic() - started:.0f} s"
            except Exception as error:   # noqa: BLE001 - report, don't abort the bench
                rows.append((f"{name}: build", "failed", "", str(error).splitlines()[0][:120]))
        if summary is None:
            if quick:
                rows.append((f"{name}: Fmax", "not built", "",
                             f"run `latscope gateware build --board {name}`"))
            continue
        rows.append((f"{name}: capture Fmax", f"{summary['fmax_mhz']:.1f}", "MHz",
                     f"needs {summary['capture_clock_mhz']:g} MHz; margin "
                     f"{summary['margin_pct']:+.1f} %; timing "
                     f"{'met' if summary['timing_met'] else 'NOT met'} ({note})"))
        for c in summary["clocks"]:
            if c["domain"] == "link":
                rows.append((f"{name}: link Fmax", f"{c['fmax_mhz']:.1f}", "MHz",
                             f"needs {c['constraint_mhz']:.0f} MHz; margin "
                             f"{c['margin_pct']:+.1f} %"))
        res = ", ".join(f"{k} {v['used']}/{v['available']}"
                        for k, v in summary["resources"].items() if v["used"])
        rows.append((f"{name}: resources", res, "", ""))
        if summary.get("pin_to_sample_skew_ps") is not None:
            rows.append((f"{name}: pin-to-sample skew", f"{summary['pin_to_sample_skew_ps']}",
                         "ps", "worst between channels in nextpnr's model; the pad paths are "
                               "not timed by nextpnr (docs/boards.md)"))
        cross = summary.get("crossings")
        if cross and cross["crossings"]:
            # asynchronous resets have no period to meet (gateware/crossings.py)
            timed = [c for c in cross["crossings"] if c["kind"] != "async_reset"]
            worst = max(timed or cross["crossings"],
                        key=lambda c: c["delay_ns"] / c["period_ns"])
            rows.append((f"{name}: clock-domain crossings", len(cross["crossings"]), "",
                         f"all declared and within the destination period: "
                         f"{'yes' if cross['ok'] else 'NO'}; tightest {worst['name']} "
                         f"{worst['delay_ns']:.2f} ns of {worst['period_ns']:.2f} ns"))
        if name == "icebreaker" and not quick:
            # The UP5K's margin depends on placement: the shipped design must close on several.
            for seed in PLACEMENT_SEEDS:
                try:
                    s = build_bitstream(name, Path("build") / f"gateware-{name}-seed{seed}",
                                        seed=seed, log=lambda line: None)
                    rows.append((f"{name}: capture Fmax, seed {seed}", f"{s['fmax_mhz']:.1f}",
                                 "MHz", f"margin {s['margin_pct']:+.1f} %; crossings "
                                        f"{'ok' if s['crossings']['ok'] else 'FAILED'}"))
                except Exception as error:   # noqa: BLE001 - report, don't abort the bench
                    rows.append((f"{name}: capture Fmax, seed {seed}", "failed", "",
                                 str(error).splitlines()[0][:120]))

    try:
        import latscope.gateware.top  # noqa: F401
    except ImportError as error:
        rows.append(("simulated figures", "skipped", "", f"gateware core not importable: {error}"))
        return rows

    board = BOARDS["ecpix5"]
    inst = sim_instrument(board)
    inst.build(verbose=False)
    throttle = round(board.capture_hz / LINK_BYTES_PER_S)    # cycles per byte at 1.2 MB/s

    started = time.monotonic()
    bpe = bytes_per_event(inst, board, 200 if quick else 2000)
    per_event = bpe["bytes"] / bpe["events"]
    sim_s = time.monotonic() - started
    rows.append(("bytes per event (64-byte echo, 100 Mb/s)", round(per_event, 3), "B",
                 f"{bpe['events']:,} events ({bpe['expected']:,} expected, {bpe['lost']} lost); "
                 "all wire bytes incl. headers, CRC, heartbeats; real gateware in Verilator"))
    rows.append(("event rate of that traffic", round(bpe["event_rate"]), "events/s",
                 f"needs {bpe['event_rate'] * per_event / LINK_BYTES_PER_S:.0%} of the 12 Mbaud "
                 f"link (measured with an unthrottled link; the FIFO absorbs the excess of short "
                 f"runs only)"))
    computed = LINK_BYTES_PER_S / per_event
    rows.append(("sustained event rate, computed", round(computed), "events/s",
                 "1.2 MB/s (12 Mbaud 8N1) / bytes per event"))
    ice = BOARDS["icebreaker"]
    ice_bytes_per_s = ice.baud / 10
    rows.append(("sustained event rate, computed (icebreaker)",
                 round(ice_bytes_per_s / per_event), "events/s",
                 f"{ice_bytes_per_s / 1e6:g} MB/s ({ice.baud / 1e6:g} Mbaud 8N1, link clock "
                 f"{ice.sync_hz / 1e6:g} MHz) / bytes per event; "
                 f"{ice_bytes_per_s / LINK_BYTES_PER_S:.2f}x the ECPIX-5 rate"))

    rows.append(("sustained event rate, measured", "see links", "",
                 "the links section (latscope bench --only links) bisects the lossless rate of "
                 "the UART and of Ethernet on the same worst-case and realistic stimuli"))

    burst = fifo_burst(inst, board, throttle=throttle)
    rows.append(("FIFO burst at full input rate", burst if burst is not None else "no overflow",
                 "events", f"edge on every tick of one channel (1 entry = {board.lanes} events "
                           f"per cycle); fifo_depth {board.fifo_depth} entries"))
    stats = bpe["stats"]
    if stats.get("wall_s"):
        skipped = stats["skipped"] / max(1, stats["total_cycles"])
        evaluated = stats["evaluated"] / stats["wall_s"] / 1e6
        rows.append(("Verilator speed", round(stats["total_cycles"] / stats["wall_s"] / 1e6, 2),
                     "M cycles/s", f"with fast-forward ({skipped:.0%} of cycles skipped); "
                                   f"{evaluated:.2f} M evaluated cycles/s; the bytes-per-event "
                                   f"figure took {sim_s:.1f} s"))
    rows.append(("CPU per simulated packet", "see sim", "",
                 "the sim section (latscope bench --only sim) measures the simulated instrument's "
                 "CPU per packet for this build and the ECPIX-5 x1 build"))
    return rows
