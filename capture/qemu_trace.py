"""Emulated-time captures of the Zephyr DUT under QEMU (``qemu_cortex_a9``, Zynq GEM, ``-icount``).

The firmware's gpio_emul edge trace (``CONFIG_LATSCOPE_MARKERS_TRACE_TIME``) gives every marker
edge with the Cortex-A9 global timer value, i.e. QEMU's virtual clock: under ``-icount`` one
emulated timeline. It is turned here into the marker pin activity (m0..m4) an instrument would
see and written as ``.lsc`` captures that the normal analysis reads. Everything produced here is
**emulated time**, not hardware latency.

Time base (QEMU 7.2, ``hw/timer/a9gtimer.c``): ``counter = (virtual_ns - reset_ns) /
(10 * (prescaler + 1))``; Zephyr 3.7 leaves the prescaler at 0: one tick is 10 ns.

Frame wire times are NOT in emulated time: QEMU's ``filter-dump`` stamps frames with the host's
wall clock (seen in this run: pcap times are 2026 epoch seconds while the guest timer starts at
0), so the frame dump only proves what crossed the wire (requests and echoes per port, in
order). Stages are therefore measured from the receive interrupt's entry (``rx.isr``) and from
the send call (``tx.send``); wire-referenced stages (RX_DV, TX_EN) need the instrument.

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
#: default map; B keeps rx.isr and tx.send as references and adds rx.handoff and tx.queue.
MARKERS_A = {"m0": "rx.isr", "m1": "rx.copy", "m2": "rx.udp", "m3": "rx.fast", "m4": "tx.send"}
MARKERS_B = {"m0": "rx.isr", "m1": "rx.handoff", "m2": "tx.send", "m3": "tx.queue"}
SPANS_A = {"rx.copy": "m_isr rising -> m_copy rising"}
SPANS_B = {"rx.handoff": "m_isr rising -> m_handoff rising",
           "tx.queue": "m_send rising -> m_queue rising"}
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
    the receive interrupt's entry (rx.*, tx.send) or from the send call (tx.queue)."""
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
