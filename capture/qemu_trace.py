"""Emulated-time captures of the Zephyr DUT under QEMU (``qemu_cortex_a9``, Zynq GEM, ``-icount``).

The firmware's gpio_emul edge trace (``CONFIG_LATSCOPE_MARKERS_TRACE_TIME``) gives every marker
edge with the Cortex-A9 global timer value, i.e. QEMU's virtual clock: under ``-icount`` one
emulated timeline. It is turned here into the marker pin activity (m0..m4) an instrument would
see and written as ``.lsc`` captures that the normal analysis reads. Everything produced here is
**emulated time**, not hardware latency.

Time base (QEMU 7.2, ``hw/timer/a9gtimer.c``): ``counter = (virtual_ns - enable_ns) /
(10 * (prescaler + 1))`` from the register write that enables the timer; Zephyr 3.7 leaves the
prescaler at 0: one tick is 10 ns.

Frame wire times: QEMU's ``filter-dump`` stamps every frame with QEMU's virtual clock (µs) plus
a whole number of host wall-clock seconds fixed when the dump opens (QEMU 7.2 ``net/dump.c``), so
the dump's times are emulated time too, one constant away from the A9 timer's (derivation and
its limits below, :func:`dump_offset_ns`). :func:`captures_from_run` measures from the receive
interrupt's entry (``rx.isr``) and the send call (``tx.send``) without the dump;
:func:`pin_captures_from_run` puts the frames on MII pins on the same timeline, so stages are
measured from RX_DV falling and to TX_EN rising, through ``latscope replay-pins``
(``fixtures/zephyr-qemu/wire_run.py``).

:func:`captures_from_run` writes the trace directly as captures (1 ns ticks);
:func:`replay_through_gateware` plays the same edges as pin levels through the simulated
instrument (the real gateware in Verilator) and captures its output like a board's.
"""

import re
import struct

import numpy as np

from latscope import LatscopeError

#: Instrument channel of each role (project convention, analysis.definitions.CHANNEL_ROLES).
CHANNELS = {0: "rx_dv", 1: "tx_en", 3: "m0", 4: "m1", 5: "m2", 6: "m3", 7: "m4"}
GTIMER_NS = 10                      # A9 global timer tick under QEMU 7.2 at prescaler 0
BYTE_NS = 80                        # 100 Mb/s
EDGE = re.compile(r"^latscope-edge: (\d+) m([0-4]) (rise|fall) t=(\d+)\s*$")
_PCAP_US = 0xA1B2C3D4
_PCAP_NS = 0xA1B23C4D


def parse_trace(text):
    """Marker edges with emulated time from a console log.

    Returns
    -------
    time_ns, marker, rising : numpy arrays
        Emulated ns since machine reset, marker channel 0..4, 1 for a rising edge.
    """
    rows = []
    for line in text.splitlines():
        if line.startswith("latscope-edge: lost"):
            raise LatscopeError("the edge trace lost edges: the trace is incomplete")
        m = EDGE.match(line)
        if m:
            rows.append((int(m[1]), int(m[4]) * GTIMER_NS, int(m[2]), m[3] == "rise"))
    if not rows:
        raise LatscopeError("no timestamped edge lines (latscope-edge: ... t=...) in the log")
    index = [r[0] for r in rows]
    if index != list(range(index[0], index[0] + len(rows))):
        raise LatscopeError("edge trace indices are not contiguous: lines are missing")
    arr = np.array([(r[1], r[2], r[3]) for r in rows], dtype=np.int64)
    return arr[:, 0], arr[:, 1].astype(np.uint8), arr[:, 2].astype(np.uint8)


def read_pcap(data):
    """Frames of a classic little-endian pcap (Ethernet): list of ``(time_ns, bytes)``."""
    if len(data) < 24:
        raise LatscopeError("pcap too short for its global header")
    magic, _, _, _, _, _, linktype = struct.unpack_from("<IHHiIII", data, 0)
    if magic not in (_PCAP_US, _PCAP_NS) or linktype != 1:
        raise LatscopeError(f"not a little-endian Ethernet pcap (magic {magic:#x}, "
                            f"link type {linktype})")
    scale = 1000 if magic == _PCAP_US else 1
    frames, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        if off + incl > len(data):
            raise LatscopeError("pcap ends inside a frame")
        frames.append((sec * 1_000_000_000 + frac * scale, bytes(data[off:off + incl])))
        off += incl
    return frames


def udp_ports(frame):
    """(source port, destination port) of an untagged IPv4/UDP frame, else None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    ihl = (frame[14] & 15) * 4
    if len(frame) < 14 + ihl + 8:
        return None
    return struct.unpack_from(">HH", frame, 14 + ihl)


def wire_edges(frames, dut_mac, port):
    """RX_DV / TX_EN edges of the frames of one echo port (requests to it, echoes from it).

    Returns
    -------
    time_ns, channel, rising : numpy arrays (unsorted)
    """
    rows = []
    for t, f in frames:
        ports = udp_ports(f)
        if ports is None:
            continue
        dur = (8 + max(len(f), 60) + 4) * BYTE_NS
        if f[6:12] == dut_mac and ports[0] == port:           # echo leaving the DUT
            rows += [(t, 1, 1), (t + dur, 1, 0)]
        elif f[0:6] == dut_mac and ports[1] == port:          # request reaching the DUT
            rows += [(t - dur, 0, 1), (t, 0, 0)]
    if not rows:
        return (np.zeros(0, np.int64),) * 3
    arr = np.array(rows, dtype=np.int64)
    return arr[:, 0], arr[:, 1], arr[:, 2]


def write_capture(path, events, markers, label, provenance):
    """Write one window as a ``.lsc`` with 1 ns ticks (emulated time)."""
    from latscope.capture import capfile

    meta = {"tick_hz": 1e9, "channels": {str(k): v for k, v in CHANNELS.items()},
            "markers": markers, "label": label, "time_base": "emulated",
            "source": provenance}
    writer = capfile.CaptureWriter(path, meta, fsync=False, overwrite=True)
    writer.append_events(*events)
    writer.close("complete")
    return path


#: Marker maps of the scripted run (fixtures/zephyr-qemu/make_fixture.py): A is the firmware's
#: default map; B keeps rx.isr as the reference and takes the points A has no room for:
#: rx.handoff and the transmit path after the send call (tx.queue, tx.handoff, tx.xmit).
MARKERS_A = {"m0": "rx.isr", "m1": "rx.copy", "m2": "rx.udp", "m3": "rx.fast", "m4": "tx.send"}
MARKERS_B = {"m0": "rx.isr", "m1": "rx.handoff", "m2": "tx.queue", "m3": "tx.handoff",
             "m4": "tx.xmit"}
SPANS_A = {"rx.copy": "m_isr rising -> m_copy rising"}
SPANS_B = {"rx.handoff": "m_isr rising -> m_handoff rising",
           "tx.queue": "m_isr rising -> m_queue rising",
           "tx.handoff": "m_isr rising -> m_driver rising",
           "tx.xmit": "m_isr rising -> m_xmit rising"}
WINDOW_NS = 5_000_000               # a stop must follow its start within 5 ms (emulated)


def _definitions(spans):
    from latscope.analysis.definitions import parse_definitions

    return parse_definitions({"measurement": {
        name: {"span": span, "direction": name[:2], "window_ns": WINDOW_NS}
        for name, span in spans.items()}})


def captures_from_run(run, console_text, out_dir):
    """Split one scripted run into a capture per (path, marker map).

    The marker trace is cut at the emulated time of the first ``rx.isr`` pulse of each
    (path, map) phase: phases run one after another, each ``run["packets"]`` echoes, one in
    flight, in the order of ``run["paths"]`` and maps A, B.

    Parameters
    ----------
    run : dict
        ``run.json`` of the fixture (paths, packets).
    console_text : str
    out_dir : pathlib.Path

    Returns
    -------
    list of (path, map name, capture path, definitions)
    """
    time, marker, rising = parse_trace(console_text)
    n = run["packets"]
    phases = [(path, name) for path in run["paths"] for name in ("a", "b")]
    # Each phase's packets: n pulses on the rx.copy (A) or rx.handoff (B) channel m1, which
    # only the selected path's datagrams raise; the phase starts at the rx.isr pulse before the
    # first of them.
    m1 = np.flatnonzero((marker == 1) & (rising == 1))
    if len(m1) != n * len(phases):
        raise LatscopeError(f"{len(m1)} m1 pulses in the trace, expected "
                            f"{n * len(phases)} ({len(phases)} phases of {n} packets)")
    isr = np.flatnonzero((marker == 0) & (rising == 1))
    starts = []
    for k in range(len(phases)):
        first = m1[k * n]
        before = isr[isr < first]
        starts.append(int(time[before[-1]]) if len(before) else int(time[first]))
    starts.append(int(time[-1]) + 1)
    out = []
    for k, (path, name) in enumerate(phases):
        app = "rx.fast" if path == "fast" else "rx.udp"
        if name == "a":
            spans = {**SPANS_A, app: f"m_isr rising -> m_{app[3:]} rising",
                     "tx.send": "m_isr rising -> m_send rising"}
        else:
            spans = SPANS_B
        keep = (time >= starts[k]) & (time < starts[k + 1])
        events = (time[keep], (marker[keep] + 3).astype(np.uint8), rising[keep])
        file = out_dir / f"qemu-{path}-{name}.lsc"
        write_capture(file, events, MARKERS_A if name == "a" else MARKERS_B,
                      f"qemu_cortex_a9 {path} map {name}",
                      "fixtures/zephyr-qemu (QEMU -icount shift=3; emulated time)")
        out.append((path, name, file, _definitions(spans)))
    return out


def analyse_run(run, console_text, out_dir):
    """Statistics of every stage of every path: ``{path: {stage: LatencyStats}}``, each from
    the receive interrupt's entry (``rx.isr``) of the same packet."""
    from latscope.analysis import api

    result = {}
    for path, _, file, defs in captures_from_run(run, console_text, out_dir):
        a = api.analyze_file(str(file), definitions=defs)
        result.setdefault(path, {}).update(a.stats)
    return result


class _ReplayRun:
    """The little of :class:`latscope.capture.simbench.SimRun` an engine uses: the stimulus
    (pin levels per instrument tick) and the instrument's timing."""

    def __init__(self, stimulus, timing, n_events):
        self.stimulus, self.timing, self.n_events = stimulus, timing, n_events
        self.meta = {}

    @property
    def end_tick(self):
        return int(self.stimulus.ticks[-1]) if len(self.stimulus.ticks) else 0


def replay_through_gateware(events, path, markers, label, *, engine="verilator", timeout=600.0):
    """Play one window's marker edges as pin activity through the simulated instrument (the
    real gateware in Verilator by default) and capture its output into ``path`` over a
    pseudo-terminal, as with a board. Edge times are rounded to the instrument's tick
    (ECPIX-5 build: 3.125 ns). Returns the capture's path."""
    from latscope.capture import capfile, session, simbench
    from latscope.capture.ptyserve import PtyServer
    from latscope.capture.transport import SerialTransport

    timing = simbench.InstrumentTiming()
    time_ns, channel, rising = events
    ticks = np.round((time_ns - time_ns[0]) / timing.tick_ns).astype(np.int64) + \
        timing.lead_ticks
    run = _ReplayRun(simbench._stimulus(ticks, channel, rising), timing, len(ticks))
    eng = simbench.open_engine(run, engine)
    server = PtyServer(eng)
    transport = None
    try:
        transport = SerialTransport(server.path)
        instrument = session.Instrument(transport)
        identity = instrument.identify()
        config = session.CaptureConfig(markers=dict(markers), label=label,
                                       dut="qemu_cortex_a9 (emulated time)")
        session.configure(instrument, config, identity)
        meta = session.capture_metadata(identity, config, port=server.path, extra={
            "time_base": "emulated", "source": "fixtures/zephyr-qemu via the gateware"})
        meta["instrument"].update(simulated=True, engine=eng.name)
        writer = capfile.CaptureWriter(path, meta, overwrite=True)
        session.run_capture(instrument, writer,
                            limits=session.Limits(events=run.n_events, duration=timeout))
    finally:
        if transport is not None:
            transport.close()
        server.close()
    return path


# --- frame wire times in emulated time -----------------------------------------------------------
# QEMU 7.2's filter-dump (net/dump.c, dump_receive_iov) stamps each frame with
# ``qemu_clock_get_us(QEMU_CLOCK_VIRTUAL)`` plus ``start_ts``, the host's wall clock in whole
# seconds when the dump was opened: the pcap's times ARE emulated time (1 µs, truncated), offset
# by a constant. The A9 global timer (hw/timer/a9gtimer.c) counts ``(virtual_ns - t_enable) /
# 10`` from the moment the firmware enables it, so the two timelines differ by one constant
# ``start_ts - t_enable`` that neither file states. It is established from the run itself
# (:func:`dump_offset_ns`): every frame the GEM receives raises its receive interrupt, whose
# entry the firmware marks (``rx.isr``, m0) — k-th received frame, k-th pulse — and the
# offset is the smallest ``isr - dump`` time over all of them: the fastest interrupt entry is
# taken as immediate. QEMU delivers a frame into the GEM's ring and raises the interrupt in the
# same instant of virtual time; the entry path before the marker is a few dozen instructions
# (8 ns each under ``-icount shift=3``), and the dump's µs truncation adds 0–1 µs: that is the
# uncertainty of every wire-referenced stage (stated in docs/zephyr-results.md).
# Limit seen in the committed run: the dump reads the clock on QEMU's I/O thread, and a request
# that arrives while the guest sleeps (WFI, one echo in flight) carries the stamp of the moment
# it went to sleep (often the same µs as the echo before it): under -icount the idle time is
# accounted only when the vCPU wakes. Such a request's RX_DV falls early on the emulated
# timeline, and its rx stages include the idle time (maxima of hundreds of µs; in the fast path
# one request 11.9 ms, beyond the 1 ms window: counted missed). The dump alone cannot tell
# which requests were stamped late, so wire-referenced rx figures are upper bounds of the
# emulated latency for those requests; the tx side (the guest is running when it sends) is not
# affected.
#: Phase of each frame relative to its dump time: a received frame's dump time is the end of its
#: last bit (RX_DV falls: the whole frame is in the ring), a sent frame's the start of its first
#: (TX_EN rises: the driver started the MAC), as in :func:`wire_edges`.
NIBBLE_NS = 40                       # MII at 100 Mb/s
OFFSET_CLUSTER_NS = 1_000            # dump truncation: a µs
#: Pin channels of a wire-level capture (:func:`pin_captures_from_run`): the instrument's
#: roles, then the MII data pins the sniffers need.
PIN_CHANNELS = {**CHANNELS, **{8 + i: f"rxd{i}" for i in range(4)},
                **{12 + i: f"txd{i}" for i in range(4)}}


def _mac(run):
    return bytes(int(b, 16) for b in run["dut_mac"].split(":"))


def received_frames(frames, dut_mac):
    """Frames the DUT receives (unicast to it, or group addressed), in dump order."""
    return [(t, f) for t, f in frames if f[0:6] == dut_mac or f[0] & 1]


def dump_offset_ns(frames, console_text, dut_mac):
    """Emulated time (A9 timer, ns) minus dump time of the same instant (see above).

    Raises LatscopeError when the received frames and the ``rx.isr`` pulses do not pair up (a
    different count, or fewer than a quarter of them within a µs of the fastest)."""
    time, marker, rising = parse_trace(console_text)
    isr = time[(marker == 0) & (rising == 1)]
    rx = np.array([t for t, _ in received_frames(frames, dut_mac)], np.int64)
    if len(rx) != len(isr):
        raise LatscopeError(f"{len(rx)} frames received in the dump but {len(isr)} rx.isr "
                            f"pulses in the trace: they cannot be paired")
    delay = isr - rx
    offset = int(delay.min())
    if np.count_nonzero(delay - offset < OFFSET_CLUSTER_NS) < len(delay) // 4:
        raise LatscopeError("the dump's receive times and the rx.isr pulses do not line up")
    return offset


def mii_frame_nibbles(frame):
    """A dumped frame as it crosses an MII: padded to 60 bytes, FCS appended (``zlib.crc32``),
    preamble and SFD first, low nibble of each byte first."""
    import zlib

    frame = bytes(frame) + bytes(max(0, 60 - len(frame)))
    frame += zlib.crc32(frame).to_bytes(4, "little")
    out = []
    for byte in b"\x55" * 7 + b"\xd5" + frame:
        out += [byte & 15, byte >> 4]
    return out


def _serialise(rows, start, nibbles, valid, data_first):
    """Edges of one frame on valid + 4 data pins from ``start`` (ns): appends (t, ch, rising)."""
    level = [0, 0, 0, 0]
    rows.append((start, valid, 1))
    for k, nib in enumerate(nibbles + [0]):
        t = start + k * NIBBLE_NS
        for i in range(4):
            bit = (nib >> i) & 1
            if bit != level[i]:
                rows.append((t, data_first + i, bit))
                level[i] = bit
    rows.append((start + len(nibbles) * NIBBLE_NS, valid, 0))


def pin_captures_from_run(run, console_text, pcap_data, out_dir):
    """One wire-level capture per (path, marker map): the phase's marker edges and its frames on
    MII pins (RX_DV/RXD, TX_EN/TXD), all in emulated ns (1 ns ticks), so the pins can be
    exported and replayed through the gateware (``latscope replay-pins --frames mii``).

    Returns
    -------
    list of (path, map name, capture path, offset_ns)
    """
    frames = read_pcap(pcap_data)
    mac = _mac(run)
    offset = dump_offset_ns(frames, console_text, mac)
    time, marker, rising = parse_trace(console_text)
    out = [(path, name) for path in run["paths"] for name in ("a", "b")]
    starts = _phase_starts(run, time, marker, rising)      # as captures_from_run cuts them
    received = received_frames(frames, mac)
    isr = time[(marker == 0) & (rising == 1)]
    result = []
    for k, (path, name) in enumerate(out):
        lo, hi = starts[k], starts[k + 1]
        keep = (time >= lo) & (time < hi)
        rows = list(zip(time[keep].tolist(), (marker[keep] + 3).tolist(), rising[keep].tolist(),
                        strict=True))
        port = run["guest_ports"][path]
        for (t, f), t_isr in zip(received, isr, strict=True):     # k-th frame, k-th rx.isr
            ports = udp_ports(f)
            if ports is not None and ports[1] == port and lo <= t_isr < hi:
                nibbles = mii_frame_nibbles(f)                     # request: RX, ends at t
                _serialise(rows, t + offset - len(nibbles) * NIBBLE_NS, nibbles, 0, 8)
        for t, f in frames:
            ports = udp_ports(f)
            if f[6:12] == mac and ports is not None and ports[0] == port \
                    and lo <= t + offset < hi:
                _serialise(rows, t + offset, mii_frame_nibbles(f), 1, 12)   # echo: TX
        arr = np.array(sorted(rows), np.int64)
        file = out_dir / f"qemu-wire-{path}-{name}.lsc"
        from latscope.capture import capfile
        meta = {"tick_hz": 1e9, "channels": {str(c): v for c, v in PIN_CHANNELS.items()},
                "markers": MARKERS_A if name == "a" else MARKERS_B,
                "label": f"qemu_cortex_a9 {path} map {name} (wire)", "time_base": "emulated",
                "source": "fixtures/zephyr-qemu (QEMU -icount shift=3; emulated time; frame "
                          f"wire times from filter-dump + {offset} ns)"}
        writer = capfile.CaptureWriter(file, meta, fsync=False, overwrite=True)
        writer.append_events(arr[:, 0], arr[:, 1].astype(np.uint8), arr[:, 2].astype(bool))
        writer.close("complete")
        result.append((path, name, file, offset))
    return result


def _phase_starts(run, time, marker, rising):
    """Emulated time of each phase's start (as :func:`captures_from_run` cuts), and the end."""
    n = run["packets"]
    phases = len(run["paths"]) * 2
    m1 = np.flatnonzero((marker == 1) & (rising == 1))
    isr = np.flatnonzero((marker == 0) & (rising == 1))
    starts = []
    for k in range(phases):
        first = m1[k * n]
        before = isr[isr < first]
        starts.append(int(time[before[-1]]) if len(before) else int(time[first]))
    starts.append(int(time[-1]) + 1)
    return starts


def wire_definitions(path=None):
    """The measurements of the wire-level run: ``fixtures/zephyr-qemu/wire-definitions.toml``
    (or ``path``): every stage from RX_DV falling or to TX_EN rising."""
    from pathlib import Path

    from latscope.analysis.definitions import load_definitions

    if path is None:
        path = Path(__file__).resolve().parents[1] / "fixtures" / "zephyr-qemu" / \
            "wire-definitions.toml"
    return load_definitions(str(path))
