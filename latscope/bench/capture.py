"""Capture section of ``latscope bench``: decoding, capture through a pty, big files, sigrok import.

Rows ``(figure, value, unit, note)``; every ratio is against a baseline measured in the same run.
The byte stream is realistic traffic: the simulated bench's ``gem-64`` echo (14 edges per packet at
3.125 ns ticks) through the gateware's reference models, repeated with rewritten frame headers to
the wanted length (so the stream stays valid and continuous).
"""

import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import zlib

import numpy as np

from latscope.capture.files import capfile

SECTION = "capture: stream decoding, capture through a pseudo-terminal, capture files, import"

__all__ = ["SECTION", "run", "realistic_stream", "measure_read_memory"]


def _base_stream(packets, seed=0):
    """Bytes and event count of ``packets`` echoed gem-64 packets through the reference models."""
    from latscope.capture.sim import simbench
    from latscope.gateware import model_capture as mc
    from latscope.gateware import model_stream as ms
    run = simbench.simulate("gem-64", packets, seed=seed)
    p = simbench.CORE_PARAMS
    latency = mc.pipeline(run.timing.lanes, p["max_glitch"]).latency
    end = int(run.stimulus.ticks[-1]) // run.timing.lanes + 2
    entries = mc.capture_entries_fast(
        run.stimulus, mc.Config(armed=True, rise_en=0xFF, fall_en=0xFF), channels=p["channels"],
        lanes=run.timing.lanes, counter_width=p["counter_width"], max_glitch=p["max_glitch"],
        heartbeat_shift=p["heartbeat_shift"], n_cycles=end + latency + 1)
    link = ms.LinkModel(channels=p["channels"], lanes=run.timing.lanes,
                        counter_width=p["counter_width"])
    for k, c, e, v in zip(entries["kind"].tolist(), entries["cycle"].tolist(),
                          entries["edges"].tolist(), entries["levels"].tolist(), strict=True):
        link.entry(ms.Entry(k, c, e, v))
    # Close the last frame with one more heartbeat.
    beat = 1 << p["heartbeat_shift"]
    link.entry(ms.Entry(1, (end // beat + 1) * beat))
    return bytes(link.output), run.n_events, (end // beat + 2) * beat * run.timing.lanes


def _frames(data):
    """(offset, type, length) of every frame of a clean stream."""
    out, pos = [], 0
    while pos < len(data):
        ftype = data[pos + 2] & 0x0F
        length = int.from_bytes(data[pos + 4:pos + 6], "little")
        out.append((pos, ftype, length))
        pos += 6 + length + 4
    return out


def realistic_stream(n_events, *, base_packets=4000):
    """A valid, continuous instrument byte stream of at least ``n_events`` events.

    Returns ``(bytes, events)``. A base stream of ``base_packets`` echoed 64-byte packets is
    repeated; each copy's EVENTS and HEARTBEAT headers (times, event indices, sequence numbers)
    are shifted and their CRCs recomputed.
    """
    base, base_events, span = _base_stream(base_packets)
    frames = _frames(base)
    copies = -(-n_events // base_events)
    out = bytearray()
    template = bytearray(base)
    for k in range(copies):
        buf = bytearray(template)
        for pos, ftype, length in frames:
            buf[pos + 3] = (base[pos + 3] + k * len(frames)) & 0xFF
            payload = pos + 6
            if ftype == 1:     # EVENTS: base_time u64, event_index u32
                t = int.from_bytes(base[payload:payload + 8], "little") + k * span
                i = (int.from_bytes(base[payload + 8:payload + 12], "little")
                     + k * base_events) & 0xFFFFFFFF
                buf[payload:payload + 8] = t.to_bytes(8, "little")
                buf[payload + 8:payload + 12] = i.to_bytes(4, "little")
            elif ftype == 2:   # HEARTBEAT: time u64, events u64
                t = int.from_bytes(base[payload:payload + 8], "little") + k * span
                e = int.from_bytes(base[payload + 8:payload + 16], "little") + k * base_events
                buf[payload:payload + 8] = t.to_bytes(8, "little")
                buf[payload + 8:payload + 16] = e.to_bytes(8, "little")
            body = bytes(buf[pos + 2:payload + length])
            buf[payload + length:payload + length + 4] = zlib.crc32(body).to_bytes(4, "little")
        out += buf
    return bytes(out), copies * base_events


def _decode_rows(data, events, quick):
    """Decode ``data`` fed in 1 MiB pieces (as a transport hands them over; the pieces are cut
    before timing), best and median of several runs, against the per-byte baseline."""
    from latscope.capture.link import stream
    pieces = [data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)]
    runs = []
    for _ in range(3 if quick else 5):
        decoder = stream.StreamDecoder()
        started = time.perf_counter()
        got = 0
        for piece in pieces:
            got += len(decoder.feed(piece).time)
        final = decoder.finish()
        got += len(final.time)
        runs.append(time.perf_counter() - started)
        assert got == events, (got, events)
    best, median = min(runs), float(np.median(runs))
    counters = decoder.counters
    lost = counters.get("link_lost_events", 0) + counters.get("frames_bad", 0)
    # The per-byte baseline on a slice (it is slow): whole frames, same content.
    cut = _frames(data)[min(len(_frames(data[:2_000_000])) - 1, 2000)][0]
    sample = data[:cut]
    started = time.perf_counter()
    reference = stream.decode_reference(sample)
    ref_s = time.perf_counter() - started
    ref_rate = len(reference.time) / ref_s
    rate = events / best
    return [
        ("decode (StreamDecoder, one core)", rate / 1e6, "M events/s",
         f"best of {len(runs)} (median {events / median / 1e6:.1f}); {events:,} events in 1 MiB "
         f"feeds, {len(data) / events:.2f} B/event, {lost} lost; "
         f"{rate / ref_rate:.0f}x the per-byte baseline"),
        ("decode throughput", len(data) / best / 1e6, "MB/s", "same run"),
        ("decode baseline (decode_reference, per byte)", ref_rate / 1e6, "M events/s",
         f"{len(reference.time):,} events"),
    ]


class _BytesEngine:
    """Serves fixed bytes once the host wrote anything (or at once); ignores commands."""

    def __init__(self, data):
        self.data, self.pos, self.finished = data, 0, False

    def host_bytes(self, data):
        pass

    def read(self, max_bytes, timeout=0.0):
        out = self.data[self.pos:self.pos + max_bytes]
        self.pos += len(out)
        self.finished = self.pos >= len(self.data)
        return out

    def close(self):
        pass


def _pty_capture(data, events, rate):
    """Capture ``data`` served on a pty (at ``rate`` bytes/s or unthrottled) with the host's
    transport, decoder and capture writer. Returns (seconds, events decoded, events lost)."""
    from latscope.capture.files import capfile
    from latscope.capture.link import stream
    from latscope.capture.link.transport import SerialTransport, TransportClosed
    from latscope.capture.sim.ptyserve import PtyServer
    server = PtyServer(_BytesEngine(data), rate=rate)
    transport = SerialTransport(server.path)
    decoder = stream.StreamDecoder()
    got = lost = 0
    with tempfile.TemporaryDirectory() as tmp:
        writer = capfile.CaptureWriter(os.path.join(tmp, "pty.lsc"), {"tick_hz": 320e6})
        started = time.perf_counter()
        quiet = 0
        try:
            while got < events and quiet < 10:
                chunk = transport.read(1 << 16, 0.1)
                quiet = 0 if chunk else quiet + 1
                result = decoder.feed(chunk)
                if len(result.time):
                    writer.append_events(result.time, result.channel, result.rising)
                got += len(result.time)
                lost += result.link_lost_events + result.frames_bad
        except TransportClosed:
            pass
        seconds = time.perf_counter() - started
        writer.close("bench")
    transport.close()
    server.close()
    return seconds, got, lost + (events - got)


def _pty_rows(data, events):
    from latscope.capture.sim.ptyserve import LINK_BYTES_PER_S
    rows = []
    seconds, got, lost = _pty_capture(data, events, LINK_BYTES_PER_S)
    rows.append(("pty capture at the link rate (12 Mbaud)", len(data) / seconds / 1e6, "MB/s",
                 f"{got:,} events in {seconds:.2f} s, host-side loss {lost} "
                 f"(link carries {LINK_BYTES_PER_S / 1e6:.1f} MB/s)"))
    seconds_max, got, lost_max = _pty_capture(data, events, None)
    rows.append(("pty capture, unthrottled (host limit)", len(data) / seconds_max / 1e6, "MB/s",
                 f"host-side loss {lost_max}; "
                 f"{len(data) / seconds_max / LINK_BYTES_PER_S:.1f}x the 12 Mbaud link"))
    return rows


_READER = """
import sys, time
from latscope.capture.files.capfile import open_capture
def status(key):
    for line in open('/proc/self/status'):
        if line.startswith(key + ':'):
            return int(line.split()[1]) * 1024
    return 0
base = status('RssAnon')
t = time.perf_counter()
n = 0
anon = base
with open_capture(sys.argv[1]) as cap:
    for chunk in cap.iter_chunks():
        n += len(chunk.time)
        last = int(chunk.time[-1]) if len(chunk.time) else 0
        anon = max(anon, status('RssAnon'))
print(n, time.perf_counter() - t, status('VmHWM'), base, anon)
"""


def _memory_rows(quick):
    n = 10**7 if quick else 10**8
    block = 1 << 20
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.lsc")
        rng = np.random.default_rng(0)
        started = time.perf_counter()
        writer = capfile.CaptureWriter(path, {"tick_hz": 320e6}, chunk_events=block, fsync=False)
        t0 = 0
        for i in range(0, n, block):
            m = min(block, n - i)
            t = t0 + np.cumsum(rng.integers(1, 200, m))
            t0 = int(t[-1])
            writer.append_events(t, (np.arange(m) % 8).astype(np.uint8),
                                 (np.arange(m) & 8 == 0))
        writer.close("bench")
        write_s = time.perf_counter() - started
        size = os.path.getsize(path)
        out = subprocess.run([sys.executable, "-c", _READER, path], check=True,
                             capture_output=True, text=True).stdout.split()
    count, seconds, peak, base, anon = (int(out[0]), float(out[1]), int(out[2]), int(out[3]),
                                        int(out[4]))
    assert count == n
    return [
        (f"read a {n:.0e}-event capture: peak private memory", anon / 2**20, "MiB",
         f"file {size / 1e9:.2f} GB, iter_chunks; anonymous RSS (interpreter + imports "
         f"{base / 2**20:.1f} MiB); independent of the file size"),
        (f"read a {n:.0e}-event capture: peak RSS", peak / 2**20, "MiB",
         "includes the memory-mapped file's page cache, which the kernel reclaims at will"),
        ("read speed (iter_chunks)", n / seconds / 1e6, "M events/s", f"{seconds:.1f} s"),
        ("write speed (CaptureWriter, no fsync)", n / write_s / 1e6, "M events/s",
         f"{write_s:.1f} s"),
    ]


def _engine_rows(quick):
    from latscope.capture.link.transport import SerialTransport
    from latscope.capture.sim import simbench
    from latscope.capture.sim.ptyserve import PtyServer
    rows = []
    for name in ("model", "verilator"):
        packets = {"model": 1000, "verilator": 300}[name] * (1 if quick else 10)
        run = simbench.simulate("gem-64", packets, seed=1)
        try:
            engine = simbench.open_engine(run, name)
        except Exception as error:   # noqa: BLE001 - reported in the table
            rows.append((f"simulated bench, {name} engine", float("nan"), "k events/s",
                         f"unavailable: {str(error)[:80]}"))
            continue
        from latscope.capture.link import session
        server = PtyServer(engine)
        transport = SerialTransport(server.path)
        try:
            inst = session.Instrument(transport)
            inst.identify()
            inst.reset_time()
            started = time.perf_counter()
            inst.arm()
            got = 0
            while got < run.n_events and time.perf_counter() - started < 300:
                got += sum(len(r.time) for r in inst.read(0.1))
            seconds = time.perf_counter() - started
        finally:
            transport.close()
            server.close()
        rows.append((f"simulated bench, {name} engine", got / seconds / 1e3, "k events/s",
                     f"{packets:,} gem-64 packets through the pty in {seconds:.1f} s"))
    return rows


_SIM_MEMORY = """
import os, resource, sys, tempfile
from latscope.capture.link import session
from latscope.capture.record import record
from latscope.capture.sim.sim_dut import simulate
from latscope.capture.sim.sim_load import simulate_load
from latscope.capture.sim.sim_port import SimulatedSource
from latscope.capture.sim.sim_stream import SimStream, TruthWriter
what, profile, n, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] or None
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "x.lsc")
    if what == "whole":          # the whole run at once, as before the stream
        run = simulate_load(profile, n, load) if load else simulate(profile, n)
        run.save_truth(out)
        events = run.n_events
    elif what == "stream":       # block by block, the truth written as it is produced
        writer = TruthWriter(out)
        stream = SimStream(profile, n, load=load, truth=writer)
        for block in stream.blocks():
            pass
        writer.close(stream.meta)
        events = stream.n_events
    else:                        # a whole capture on the model engine
        outcome = record(SimulatedSource(profile, packets=n, load=load, engine="model"), out,
                         limits=session.Limits())
        events = outcome.events
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, events)
"""


def _peak(what, profile, n, load=None):
    """Peak RSS (bytes) and events of one child process doing ``what`` (see _SIM_MEMORY)."""
    out = subprocess.run([sys.executable, "-c", _SIM_MEMORY, what, profile, str(n), load or ""],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def _sim_memory_rows(quick):
    """Peak memory of the simulated bench against the run's length: the simulation with its
    ground truth written, and whole captures on the model engine, each in a child process."""
    rows = []
    small, large = (10**4, 10**5) if quick else (10**5, 10**6)
    for load in (None, "bg60"):
        profile = "fast-track-64" if load else "gem-64"
        what = f"{profile}" + (f", {load}" if load else "")
        whole, _ = _peak("whole", profile, small, load)
        a, _ = _peak("stream", profile, small, load)
        b, events = _peak("stream", profile, large, load)
        rows.append((f"simulated run + truth, {what}, {small:.0e} packets: peak RSS",
                     a / 2**20, "MiB", f"whole run at once (before): {whole / 2**20:.0f} MiB"))
        rows.append((f"simulated run + truth, {what}, {large:.0e} packets: peak RSS",
                     b / 2**20, "MiB", f"{b / a:.2f}x the {small:.0e}-packet run "
                     f"({events:,} events)"))
    sizes = {None: (2000, 20000), "bg60": (200, 2000)} if quick else \
        {None: (10**4, 10**5), "bg60": (10**3, 10**4)}
    for load in (None, "bg60"):
        profile = "fast-track-64" if load else "gem-64"
        n_small, n_large = sizes[load]
        a, _ = _peak("capture", profile, n_small, load)
        b, events = _peak("capture", profile, n_large, load)
        rows.append((f"capture --sim {profile}{' --sim-load ' + load if load else ''} "
                     f"(model engine), {n_large:.0e} packets: peak RSS", b / 2**20, "MiB",
                     f"{b / a:.2f}x the {n_small:.0e}-packet capture ({events:,} events)"))
    return rows


def run(quick=False):
    rows = []
    rows += _sim_memory_rows(quick)
    events = 500_000 if quick else 5_000_000
    data, n = realistic_stream(events)
    rows += _decode_rows(data, n, quick)
    pty_events = 200_000 if quick else 1_000_000
    cut = _frames(data)
    end = next(pos for pos, _, _ in cut if pos >= len(data) * pty_events // n) \
        if pty_events < n else len(data)
    from latscope.capture.link import stream
    part = data[:end]
    decoder = stream.StreamDecoder()
    part_events = len(decoder.feed(part).time) + len(decoder.finish().time)
    rows += _pty_rows(part, part_events)
    rows += _engine_rows(quick)
    rows += _memory_rows(quick)
    from latscope.capture.files import sigrok_write
    rows += sigrok_write.bench_import(quick)
    return rows


def _rss_anon():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure_read_memory(path):
    """Read every event of a capture chunk by chunk (per-channel counts and the time span, so
    every byte is touched) and measure the memory it took.

    Returns
    -------
    dict
        ``events``, ``file_bytes``, ``seconds``, ``heap_peak_bytes`` (largest Python/NumPy
        allocation footprint during the read, from ``tracemalloc``) and ``anon_rss_growth_bytes``
        (growth of the process's anonymous resident memory, sampled after every chunk; pages of
        the memory-mapped file are page cache, not counted).
    """
    tracemalloc.start()
    base_rss = peak_rss = _rss_anon()
    begin = time.perf_counter()
    counts = np.zeros(256, np.int64)
    first = last = None
    with capfile.open_capture(path) as cap:
        for chunk in cap.iter_chunks():
            counts += np.bincount(chunk.channel, minlength=256)
            if len(chunk.time):
                first = int(chunk.time[0]) if first is None else first
                last = int(chunk.time[-1])
            del chunk
            peak_rss = max(peak_rss, _rss_anon())
        n, size = cap.n_events, cap.size
    seconds = time.perf_counter() - begin
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if int(counts.sum()) != n:
        raise AssertionError("chunk walk lost events")
    return {"events": n, "file_bytes": size, "seconds": seconds, "heap_peak_bytes": heap_peak,
            "anon_rss_growth_bytes": peak_rss - base_rss, "span_ticks": (last or 0) - (first or 0)}
