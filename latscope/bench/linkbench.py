"""Link benchmark (``latscope bench --only links``): the UART and the Ethernet link, measured the
same way on the same stimuli, simulated.

The lossless rates come from the board's own core as the board runs it: the ECPIX-5's
``LatscopeCore`` with its asynchronous capture FIFO, the capture domain at 200 MHz and the link
domain (encoder, framer) at 48 MHz, every clock edge evaluated in Verilator
(:mod:`latscope.bench.linkclocks`). A link is modelled by the byte rate its transmitter accepts
from the framer:

- **UART**: 12 Mbaud 8N1, 1.2 MB/s: one byte per 40 link cycles.
- **Ethernet**: one transfer per 48 MHz link cycle: on the ECPIX-5's two-byte link path
  (``link_bytes=2``, :mod:`latscope.gateware.linkword`) a word of two bytes, 96 MB/s, the
  framer's own limit: the streamer reads its FIFO at 125 MHz, a byte per cycle, and puts
  ~117 MB/s of UDP payload on the wire, so it never holds the framer back.

Figures: the highest lossless event rate of each link on each stimulus (worst case: periodic
edges over 8 channels, where every delta needs a 2- or 3-byte token; realistic: the 64-byte
echo of the ``el-dm-64`` profile, its timeline stretched; on Ethernet also bursts of three edges
2 ticks apart, mostly one-byte tokens), found by bisection with runs at least ten times longer
than what the capture FIFO and the framer's buffers could hide, every event checked against its
stimulus tick, channel and edge; the link utilisation (bytes over capacity) and the stimulus's
own bytes per event at that rate; Ethernet wire bytes per event with every UDP/IPv4/Ethernet
header, FCS, preamble and gap counted (the gateware's packing rule,
:class:`~latscope.gateware.eth.model.DatagramPacker`); the host decoder's rate on the bytes the
Ethernet link carried at its lossless rate (the next limit); a 100 Mb/s line-rate 64-byte echo
over Ethernet (10^6 packets; the single-clock simulated instrument with fast-forward, which
10^6 packets need: the echo's 0.75 M events/s is far inside both cores' rates); and the host's
receive rate through the real UDP socket path on 127.0.0.1.
"""

import math
import threading
import time

import numpy as np

from latscope import LatscopeError

SECTION = "links: UART and Ethernet, on the same stimuli (simulated)"

UART_BYTES_PER_S = 12e6 / 10
ETH_LINK_CLOCK_HZ = 48e6                  # the framer's byte clock on the ECPIX-5
ETH_PAYLOAD_BYTES_PER_S = 125e6 * 1472 / (1472 + 8 + 14 + 20 + 8 + 4 + 12)
#: Per datagram on the wire besides its payload: preamble+SFD 8, Ethernet 14, IPv4 20, UDP 8,
#: FCS 4, inter-frame gap 12.
ETH_OVERHEAD = 8 + 14 + 20 + 8 + 4 + 12


def eth_wire_bytes(stream_bytes):
    """Bytes on the wire carrying ``stream_bytes`` as the board's datagrams (padding included)."""
    from latscope.gateware.eth.model import DatagramPacker
    packer = DatagramPacker(max_frame=6 + 12 + 1024 + 4)
    datagrams = packer.feed(stream_bytes) + packer.idle()
    return sum(max(len(p) + 42, 60) + 4 + 8 + 12 for p in datagrams), len(datagrams)


def _buffer_events(board, per_event):
    """Events the capture FIFO and the framer's two payload buffers can hold."""
    return board.fifo_depth + 2 * 1024 / per_event


def periodic(rate, duration_s, tick_hz):
    """Worst case: every ``tick_hz / rate`` ticks the next of 8 channels toggles."""
    from latscope.bench.gateware import periodic_stimulus
    period = max(1, round(tick_hz / rate))
    count = max(16, int(duration_s * tick_hz / period))
    return periodic_stimulus(period, count, channels=range(8))


def bursts(rate, duration_s, tick_hz, *, size=3, spacing=2):
    """Bursts: every ``size * tick_hz / rate`` ticks, ``size`` channels toggle ``spacing`` ticks
    apart (one-byte EVENT tokens after the first of each burst: edges of one stage a few ns
    apart, as a DUT's RX_DV and a marker are)."""
    period = max(size * spacing + 1, round(size * tick_hz / rate))
    count = max(16, int(duration_s * tick_hz / period)) * size
    k = np.arange(count)
    ticks = 4096 + period * (k // size) + spacing * (k % size)
    values = np.bitwise_xor.accumulate(1 << (k % size))
    return ticks.astype(np.int64), values


def echo_base(board, packets):
    """The ``el-dm-64`` echo (back-to-back 64-byte requests at 100 Mb/s) as (ticks, values)."""
    from latscope.capture.sim.simbench import InstrumentTiming, Traffic, simulate
    run = simulate("el-dm-64", packets, seed=1,
                   traffic=Traffic(host_turnaround_us=1.0, turnaround_jitter_us=0.0),
                   timing=InstrumentTiming(capture_hz=board.capture_hz, lanes=board.lanes))
    return np.asarray(run.stimulus.ticks, np.int64), np.asarray(run.stimulus.values), run


def stretched(base, rate, duration_s, tick_hz):
    """The echo's timeline scaled so its mean event rate is ``rate``, repeated as often as
    needed to last ``duration_s`` (so a short base never makes a run too short to show loss)."""
    ticks, values = base
    native = len(ticks) / ((ticks[-1] - ticks[0]) / tick_hz)
    scale = native / rate
    t = ticks[0] + np.round((ticks - ticks[0]) * scale).astype(np.int64)
    keep = np.concatenate([[True], np.diff(t) > 0])      # two edges never share a tick
    t, v = t[keep], values[keep]
    span = int(t[-1] - t[0]) + max(1, round(tick_hz / rate))
    copies = max(1, math.ceil(duration_s * tick_hz / span))
    if v[-1] != 0:                    # every copy must start from the levels it assumes
        t, v = np.append(t, t[-1] + 1), np.append(v, 0)
        span += 1
    t = np.concatenate([t + k * span for k in range(copies)])
    v = np.tile(v, copies)
    n = int(np.searchsorted(t, t[0] + duration_s * tick_hz))
    return t[:max(16, n)], v[:max(16, n)]


def play(inst, ticks, values, throttle, tick_hz, lanes):
    """Run a stimulus; return a dict of events, losses, bytes and span. Every command must be
    answered OK (the bench's own set-up is checked, not assumed). ``lanes`` must be the core's:
    ticks map to capture cycles and sample-word lanes by it (a 2-lane stimulus on the 4-lane
    core leaves lanes 2-3 low, so every high level becomes a pulse train)."""
    from latscope.bench.gateware import run_stimulus
    from latscope.gateware.protocol import Status
    core_lanes = getattr(inst, "core_params", {}).get("lanes", lanes)
    if core_lanes != lanes:
        raise ValueError(f"stimulus for {lanes} lanes on a core with {core_lanes}")
    data, result, _ = run_stimulus(inst, ticks, values, throttle=throttle,
                                    lanes=lanes)
    bad = [r for r in result.replies if r.status != Status.OK]
    if bad or len(result.replies) < 2:
        raise RuntimeError(f"the bench's set-up commands were not all accepted: {bad}")
    levels = np.asarray(values, np.int64)
    changes = np.bitwise_xor(levels, np.concatenate([[0], levels[:-1]])).astype(np.uint8)
    expected = int(np.unpackbits(changes).sum())          # every toggled channel is an event
    return {"events": len(result.time), "expected": expected,
            "lost": result.overflow_lost_events + result.link_lost_events,
            "bytes": len(data), "data": data,
            "span_s": (int(ticks[-1]) - int(ticks[0])) / tick_hz}


def _block_starts(ticks, lanes, block):
    """Indices where the stimulus is cut into blocks of about ``block`` changes: each cut is at
    the start of a capture cycle holding no earlier change, so the blocks' commands, each run
    from its own cycle 0, concatenate to exactly the whole stimulus's commands."""
    cycles = ticks // lanes
    starts = [0]
    i = block
    while i < len(ticks):
        while i < len(ticks) and cycles[i] == cycles[i - 1]:
            i += 1
        if i < len(ticks):
            starts.append(i)
        i += block
    return starts


def echo_stream(inst, board, packets, throttle, *, block_packets=20_000, settle=8192,
                keep_bytes=0):
    """The 64-byte echo at 100 Mb/s line rate (``el-dm-64``, back-to-back requests) of
    ``packets`` packets through the simulated instrument, streamed: commands are written block
    by block and the gateware's bytes are decoded as they come, so neither the command stream
    nor the byte stream is ever held whole: memory is the stimulus, its expected events and the
    decoded ones, a few hundred bytes per packet.

    Checked, not assumed: every command answered OK; every event decoded with the host decoder
    (frame CRCs, sequence numbers and event indices, so a lost or damaged frame is link loss);
    every decoded event at its stimulus tick plus one constant pipeline offset, on its channel
    with its direction. Returns a dict: packets, events, expected, lost, mismatched, bytes,
    frames, datagrams, wire_bytes (every Ethernet/IPv4/UDP header, FCS, preamble and gap),
    span_s (simulated), wall_s and the harness statistics, and data: the first ``keep_bytes``
    bytes themselves.
    """
    from latscope.bench.gateware import arm_commands
    from latscope.capture.link.stream import StreamDecoder
    from latscope.gateware.eth.model import DatagramPacker
    from latscope.gateware.protocol import Status
    from latscope.gateware.verilator import Commands, stimulus_commands
    lanes, channels = board.lanes, 8
    ticks, values, _ = echo_base(board, packets)
    levels = np.asarray(values, np.int64)
    changes = np.bitwise_xor(levels, np.concatenate([[0], levels[:-1]])).astype(np.uint8)
    per_change = np.unpackbits(changes[:, None], axis=1, bitorder="little")
    expected = int(per_change.sum())
    shifted = np.asarray(ticks, np.int64) + settle * lanes
    starts = _block_starts(shifted, lanes, block_packets * 14)
    cut_cycles = [0] + [int(shifted[i]) // lanes for i in starts[1:]]
    started = time.monotonic()
    proc = inst.open()

    def writer():
        try:
            proc.write(bytes(Commands().throttle(throttle).rx(arm_commands()).run(settle)))
            for k, a in enumerate(starts):
                b = starts[k + 1] if k + 1 < len(starts) else len(shifted)
                base = cut_cycles[k] * lanes
                end = cut_cycles[k + 1] * lanes - base if k + 1 < len(starts) else None
                initial = int(levels[a - 1]) if a else 0
                proc.write(stimulus_commands(shifted[a:b] - base, levels[a:b], lanes=lanes,
                                             channels=channels, end_tick=end,
                                             initial=initial))
            proc.write(bytes(Commands().drain().run(1 << 21).drain()))
        except LatscopeError:
            pass                      # reported by wait()
        finally:
            try:
                proc.close_input()
            except BrokenPipeError:
                pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    decoder, packer = StreamDecoder(), DatagramPacker(max_frame=6 + 12 + 1024 + 4)
    times, chans, rising, replies, kept = [], [], [], [], []
    lost = nbytes = frames = datagrams = wire = kept_bytes = 0

    def take(result):
        nonlocal lost, frames
        times.append(result.time)
        chans.append(result.channel)
        rising.append(result.rising)
        replies.extend(result.replies)
        lost += result.overflow_lost_events + result.link_lost_events
        frames += result.frames_ok

    def pack(payloads):
        nonlocal datagrams, wire
        datagrams += len(payloads)
        wire += sum(max(len(p) + 42, 60) + 4 + 8 + 12 for p in payloads)

    while True:
        data = proc.read_bytes(1 << 20, timeout=None)
        if not data:
            break
        nbytes += len(data)
        if kept_bytes < keep_bytes:
            kept.append(data[:keep_bytes - kept_bytes])
            kept_bytes += len(kept[-1])
        take(decoder.feed(data))
        pack(packer.feed(data))
    take(decoder.finish())
    pack(packer.idle())
    thread.join()
    stats = proc.wait()
    bad = [r for r in replies if r.status != Status.OK]
    if bad or len(replies) < 2:
        raise RuntimeError(f"the bench's set-up commands were not all accepted: {bad}")
    time_, chan_, rise_ = (np.concatenate(x) for x in (times, chans, rising))
    # The stimulus's own events, in the order the instrument reports simultaneous ones (by
    # channel within a tick).
    rows, bits = np.nonzero(per_change)
    want_time = shifted[rows]
    want_chan = bits.astype(np.uint8)
    want_rise = ((levels[rows] >> bits) & 1).astype(bool)
    mismatched = expected
    if len(time_) == expected and expected:
        offset = int(time_[0] - want_time[0])
        mismatched = int(np.count_nonzero((time_ - want_time != offset) | (chan_ != want_chan)
                                          | (rise_ != want_rise)))
    return {"packets": packets, "events": len(time_), "expected": expected, "lost": lost,
            "mismatched": mismatched, "bytes": nbytes, "frames": frames,
            "datagrams": datagrams, "wire_bytes": wire,
            "span_s": (int(ticks[-1]) - int(ticks[0])) / board.tick_hz,
            "wall_s": time.monotonic() - started, "stats": stats,
            "data": b"".join(kept)}


def bisect(trial, board, make, lo, hi, steps, per_event_guess):
    """Highest lossless rate between ``lo`` (assumed lossless, checked) and ``hi`` (lossy), each
    run long enough to hold 10x the events the buffers can hide at the excess rate.
    ``trial(ticks, values)`` plays one stimulus and returns :func:`play`'s dict (or
    :func:`~latscope.bench.linkclocks.play`'s); lossless is every expected event received, none
    reported lost and, where the trial checks them, none off its stimulus tick."""
    best = None
    for _ in range(steps):
        rate = math.sqrt(lo * hi) if best is not None or lo > 0 else hi / 2
        duration = max(0.001, 10 * _buffer_events(board, per_event_guess) / rate)
        ticks, values = make(rate, duration)
        out = trial(ticks, values)
        if (out["lost"] == 0 and out["events"] == out["expected"]
                and not out.get("mismatched", 0)):
            best, lo = (rate, out), rate
        else:
            hi = rate
    return best, hi


#: The board's stand-in for :func:`host_udp_rate`: a separate process (the board is a separate
#: device) sending the datagrams in a file (u16 length + payload each) from 127.0.0.1 to the
#: port it is told, only there, a round of at most ``argv[2]`` payload bytes per "go" line.
_SENDER = r"""
import socket, sys
data = open(sys.argv[1], "rb").read()
grams, i = [], 0
while i < len(data):
    n = int.from_bytes(data[i:i + 2], "little")
    grams.append(data[i + 2:i + 2 + n])
    i += 2 + n
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
sock.connect(("127.0.0.1", int(sys.stdin.readline())))
i = 0
while sys.stdin.readline():
    start, size = i, 0
    while i < len(grams) and size + len(grams[i]) <= int(sys.argv[2]):
        sock.send(grams[i])
        size += len(grams[i])
        i += 1
    print(i - start, flush=True)
"""

#: Bytes decoded per call on the host path (the decoder is vectorised: its cost is per call as
#: much as per byte).
HOST_BATCH = 1 << 18


def host_udp_rate(stream_bytes, *, round_bytes=2 << 20):
    """Events/s the host receives and decodes through the real UDP socket path on 127.0.0.1.

    The board's datagrams of ``stream_bytes`` come from a sender process in rounds of at most
    ``round_bytes`` payload bytes, each sent whole into the receive socket's buffer before the
    clock runs; the receiver (:class:`~latscope.capture.link.udp.UdpTransport`, several datagrams
    per wake-up) then takes them out and the stream decoder decodes them in batches of
    :data:`HOST_BATCH` bytes. Only the receiving side is timed, so the figure is the host's
    capacity, not the sender's speed on a shared machine. Returns ``(events, lost, seconds,
    sent, received)``: lost counts the events the decoder reports lost (a datagram the kernel
    dropped is link loss, as on a network)."""
    import os
    import subprocess
    import sys
    import tempfile

    from latscope.capture.link.stream import StreamDecoder
    from latscope.capture.link.udp import UdpTransport
    from latscope.gateware.eth.model import DatagramPacker
    packer = DatagramPacker(max_frame=6 + 12 + 1024 + 4)
    datagrams = packer.feed(stream_bytes) + packer.idle()
    with tempfile.NamedTemporaryFile(suffix=".grams", delete=False) as f:
        f.write(b"".join(len(d).to_bytes(2, "little") + d for d in datagrams))
    sender = subprocess.Popen([sys.executable, "-c", _SENDER, f.name, str(round_bytes)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rx = None
    try:
        rx = UdpTransport("127.0.0.1", int(sender.stdout.readline()))
        sender.stdin.write(f"{rx._sock.getsockname()[1]}\n")
        decoder = StreamDecoder()
        events = lost = 0
        seconds = 0.0

        def decode(result):
            nonlocal events, lost
            events += len(result.time)
            lost += result.link_lost_events + result.overflow_lost_events

        while True:
            sender.stdin.write("go\n")
            sender.stdin.flush()
            count = int(sender.stdout.readline())
            if not count:
                break
            want = rx.datagrams + count
            started = time.perf_counter()
            while rx.datagrams < want:
                data = rx.read(HOST_BATCH, 0.2)     # every datagram waiting, up to a batch
                if not data:
                    break             # the rest of the round was dropped
                decode(decoder.feed(data))
            seconds += time.perf_counter() - started
        decode(decoder.finish())
        return events, lost, seconds, len(datagrams), rx.datagrams
    finally:
        if rx is not None:
            rx.close()
        sender.kill()
        sender.wait()
        sender.stdin.close()
        sender.stdout.close()
        os.unlink(f.name)


def decoder_rate(stream_bytes, batch=HOST_BATCH):
    """Events/s of the stream decoder alone on ``stream_bytes`` already in memory, fed in
    ``batch``-byte calls: the host path's baseline (what the socket path costs on top)."""
    from latscope.capture.link.stream import StreamDecoder
    decoder = StreamDecoder()
    events = 0
    started = time.perf_counter()
    for i in range(0, len(stream_bytes), batch):
        events += len(decoder.feed(stream_bytes[i:i + batch]).time)
    events += len(decoder.finish().time)
    return events, time.perf_counter() - started


def run(quick):
    """Rows ``(figure, value, unit, note)``."""
    from latscope.bench import linkclocks
    from latscope.bench.gateware import sim_instrument
    from latscope.gateware.boards import BOARDS
    board = BOARDS["ecpix5"]
    tick_hz = board.tick_hz
    binary = linkclocks.build(board)
    throttles = linkclocks.link_throttles(board)
    rows = []
    steps = 6 if quick else 8
    base = echo_base(board, 300 if quick else 3000)
    stimuli = {
        "worst case (periodic, 8 channels)":
            lambda rate, d: periodic(rate, d, tick_hz),
        "realistic (64-byte echo, stretched)":
            lambda rate, d: stretched(base[:2], rate, d, tick_hz),
        "bursts (3 channels, edges 2 ticks apart)":
            lambda rate, d: bursts(rate, d, tick_hz),
    }
    guesses = {"worst": 3.1, "realistic": 2.3, "bursts": 1.4}
    found, at_rate = {}, {}
    link_bytes = board.core_params().get("link_bytes", 1)
    for link, throttle in throttles.items():
        # bytes/s the link takes from the framer: the UART's byte time per byte, the
        # Ethernet streamer's FIFO a transfer (link_bytes) per link cycle
        cycles, per_byte = throttle
        capacity = board.sync_hz / cycles * (1 if per_byte else link_bytes)

        def trial(ticks, values, throttle=throttle):
            return linkclocks.play(binary, board, ticks, values, throttle=throttle)

        for name, make in stimuli.items():
            if link == "UART" and name.startswith("bursts"):
                continue          # the UART is byte-limited on every stimulus alike
            guess = guesses[name.split()[0]]
            top = 1.6 * capacity / guess
            (best, hi) = bisect(trial, board, make, 0.0, top, steps, guess)
            if best is None:
                rows.append((f"{link}: lossless rate, {name}", "none", "events/s",
                             f"lossy at every rate tried (down to {hi:,.0f}/s)"))
                continue
            rate, out = best
            per_event = out["bytes"] / out["events"]
            util = out["bytes"] / (capacity * out["span_s"])
            found[link, name] = rate
            at_rate[link, name] = out
            wire = ""
            if link == "Ethernet":
                wire_bytes, n_dgrams = eth_wire_bytes(out["data"])
                wire = (f"; {wire_bytes / out['events']:.3f} B/event on the wire with UDP/IP/"
                        f"Ethernet overhead ({n_dgrams:,} datagrams)")
            rows.append((f"{link}: lossless rate, {name}", round(rate), "events/s",
                         f"two-clock core, capture {board.capture_hz / 1e6:g} MHz, link "
                         f"{board.sync_hz / 1e6:g} MHz; bisection of {steps} runs; at this rate "
                         f"{out['events']:,} events over {out['span_s'] * 1e3:.1f} ms simulated, "
                         f"none lost or off its stimulus tick; stimulus {per_event:.3f} B/event "
                         f"(stream); link utilisation {util:.0%} of {capacity / 1e6:.2f} MB/s"
                         f"{wire}; first lossy rate tried {hi:,.0f}/s"))
    for name in stimuli:
        if ("UART", name) in found and ("Ethernet", name) in found:
            ratio = found["Ethernet", name] / found["UART", name]
            rows.append((f"Ethernet / UART, {name}", round(ratio, 1), "x",
                         "lossless rates measured above, same stimulus, same run"))
    for name in stimuli:
        if ("Ethernet", name) not in at_rate:
            continue
        # the host decoder on the bytes the Ethernet link carried at its lossless rate
        data = at_rate["Ethernet", name]["data"]
        events, seconds = min((decoder_rate(data) for _ in range(3)), key=lambda r: r[1])
        host = events / seconds
        rows.append((f"host: stream decoder on the Ethernet bytes, {name}", round(host),
                     "events/s", f"{events:,} events from memory in {HOST_BATCH // 1024} KiB "
                     f"calls, best of 3; {host / found['Ethernet', name]:.1f}x the link's "
                     f"lossless rate on this stimulus"))

    inst = sim_instrument(board)
    inst.build(verbose=False)
    uart_throttle = round(board.capture_hz / UART_BYTES_PER_S)            # 133 cycles/byte
    eth_throttle = math.ceil(board.capture_hz / ETH_LINK_CLOCK_HZ)        # 4 cycles/byte

    # 100 Mb/s line-rate echo over Ethernet, streamed through the harness block by block
    packets = 20_000 if quick else 1_000_000
    out = echo_stream(inst, board, packets, eth_throttle, keep_bytes=16 << 20)
    st = out["stats"]
    rows.append(("Ethernet: 64-byte echo at 100 Mb/s line rate", out["lost"], "events lost",
                 f"{packets:,} packets; {out['events']:,} of {out['expected']:,} events "
                 f"received, {out['mismatched']:,} not at their stimulus time/channel/edge; "
                 f"{out['frames']:,} stream frames in {out['datagrams']:,} datagrams "
                 f"({out['events'] / out['span_s']:,.0f} events/s over "
                 f"{out['span_s']:.2f} s simulated); {out['bytes'] / out['events']:.3f} B/event "
                 f"stream, {out['wire_bytes'] / out['events']:.3f} B/event on the wire; "
                 f"Verilator {st.get('evaluated', 0) / 1e6:.0f} M cycles evaluated of "
                 f"{st.get('total_cycles', 0) / 1e6:.0f} M (the rest fast-forwarded), "
                 f"{out['wall_s']:.0f} s wall, "
                 f"{st.get('evaluated', 0) / max(st.get('wall_s', 1e-9), 1e-9) / 1e3:.0f} k "
                 f"cycles/s"))
    if not quick:
        # The UART cannot carry the echo; 5,000 packets show it (each tx byte is 133 evaluated
        # cycles there, so the whole run would take hours).
        ticks, values, _ = echo_base(board, 5_000)
        uart_out = play(inst, ticks, values, uart_throttle, tick_hz, board.lanes)
        rows.append(("UART: the same echo (5,000 packets)", uart_out["lost"], "events lost",
                     f"{uart_out['events']:,} of {uart_out['expected']:,} received; the "
                     f"UART would need {uart_out['bytes'] / uart_out['span_s'] / 1e6:.2f} MB/s "
                     f"of its 1.2"))

    # host receive rate through the real UDP socket path, and the decoder alone on the same
    # bytes: best of three each (the machine's other load only ever slows a run down)
    stream_bytes = out["data"]
    udp = max((host_udp_rate(stream_bytes) for _ in range(3)), key=lambda r: r[0] / r[2])
    events, lost, seconds, sent, received = udp
    base_events, base_seconds = min((decoder_rate(stream_bytes) for _ in range(3)),
                                    key=lambda r: r[1])
    rate, base = events / seconds, base_events / base_seconds
    rows.append(("host: UDP receive + decode rate", round(rate), "events/s",
                 f"{events:,} events (the echo's first {len(stream_bytes) / 2**20:.0f} MiB) from "
                 f"{received:,} of {sent:,} datagrams on 127.0.0.1 in {seconds:.3f} s of "
                 f"receiving (a sender process fills the socket buffer in rounds of <= 2 MiB, "
                 f"then only the receiver is timed); several datagrams per wake-up, decoded in "
                 f"batches of <= {HOST_BATCH // 1024} KiB; {lost:,} events reported lost "
                 f"(kernel drops would show here as link loss); best of 3; goal >= 10 M "
                 f"events/s"))
    rows.append(("host: stream decoder alone, same bytes (baseline)", round(base), "events/s",
                 f"{base_events:,} events from memory in {HOST_BATCH // 1024} KiB calls, best of "
                 f"3, same run; the UDP path runs at {rate / base:.2f}x of it"))
    return rows
