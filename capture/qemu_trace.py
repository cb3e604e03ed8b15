"""Emulated-time capture of the Zephyr DUT under QEMU (``qemu_cortex_a9``, Zynq GEM, ``-icount``).

The firmware's gpio_emul edge trace (``CONFIG_LATSCOPE_MARKERS_TRACE_TIME``) gives every marker
edge with the Cortex-A9 global timer value; QEMU's ``filter-dump`` gives every frame on the
GEM's network with its virtual-clock time (microseconds, pcap). Both run on QEMU's virtual
clock, so with ``-icount`` they form one emulated timeline, turned here into the pin activity an
instrument would see (RX_DV, TX_EN, m0..m4) and written as a ``.lsc`` capture that the normal
analysis reads. Everything produced here is **emulated time**, not hardware latency.

Time bases (QEMU 7.2, ``hw/timer/a9gtimer.c``, ``net/dump.c``):

- global timer: ``counter = (virtual_ns - reset_ns) / (10 * (prescaler + 1))``; Zephyr 3.7
  leaves the prescaler at 0, so one tick is 10 ns from machine reset (virtual time 0);
- pcap: virtual time of the frame in microseconds (1 µs resolution; RX frames are written
  when QEMU hands them to the GEM, TX frames when the guest starts transmission).

Wire model (100 Mb/s MII, what an instrument on the PHY would see): an RX frame's RX_DV falls
at its pcap time (QEMU delivers a frame at once) and rose one frame time earlier; a TX frame's
TX_EN rises at its pcap time and falls one frame time later; a frame time is (8 preamble/SFD +
max(len, 60) + 4 FCS) bytes x 80 ns.
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


def build_events(trace, frames, dut_mac, port, start_ns, stop_ns):
    """Time-sorted (time_ns, channel, rising) of one window: the port's wire edges plus every
    marker edge (instrument channel 3 + marker) inside ``[start_ns, stop_ns)``."""
    mt, mch, mrise = trace
    keep = (mt >= start_ns) & (mt < stop_ns)
    wt, wch, wrise = wire_edges(frames, dut_mac, port)
    wkeep = (wt >= start_ns) & (wt < stop_ns)
    time = np.concatenate([wt[wkeep], mt[keep]])
    channel = np.concatenate([wch[wkeep], mch[keep].astype(np.int64) + 3])
    rising = np.concatenate([wrise[wkeep], mrise[keep].astype(np.int64)])
    order = np.lexsort((channel, time))
    return time[order], channel[order].astype(np.uint8), rising[order].astype(np.uint8)


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


#: What each window measures: (map, path kind) -> {name: span}. Map A is the firmware's default
#: map, map B puts rx.handoff on m0 and tx.queue on m1 (fixtures/zephyr-qemu/make_fixture.py).
MARKERS_A = {"m0": "rx.isr", "m1": "rx.copy", "m2": "rx.udp", "m3": "rx.fast", "m4": "tx.send"}
MARKERS_B = {"m0": "rx.handoff", "m1": "tx.queue"}
SPANS_A = {"rx.isr": "rx_dv falling -> m_isr rising", "rx.copy": "rx_dv falling -> m_copy rising",
           "tx.send": "m_send rising -> tx_en rising"}
SPANS_B = {"rx.handoff": "rx_dv falling -> m_handoff rising",
           "tx.queue": "m_queue rising -> tx_en rising"}
WINDOW_NS = 5_000_000               # a stop must follow its start within 5 ms (emulated)


def _definitions(spans):
    from latscope.analysis.definitions import parse_definitions

    return parse_definitions({"measurement": {
        name: {"span": span, "direction": name[:2], "window_ns": WINDOW_NS}
        for name, span in spans.items()}})


def captures_from_run(run, console_text, pcap_bytes, out_dir):
    """Split one scripted run into a capture per (path, marker map).

    Parameters
    ----------
    run : dict
        ``run.json`` of the fixture (paths, guest ports, packets, DUT MAC).
    console_text, pcap_bytes
        The console log and QEMU's frame dump.
    out_dir : pathlib.Path

    Returns
    -------
    list of (path, map name, capture path, definitions)
    """
    trace = parse_trace(console_text)
    frames = read_pcap(pcap_bytes)
    mac = bytes(int(b, 16) for b in run["dut_mac"].split(":"))
    n = run["packets"]
    firsts = []                          # per path: rise of its first and its (n+1)th request
    for path in run["paths"]:
        wt, wch, wrise = wire_edges(frames, mac, run["guest_ports"][path])
        starts = np.sort(wt[(wch == 0) & (wrise == 1)])
        if len(starts) != 2 * n:
            raise LatscopeError(f"{path}: {len(starts)} requests in the frame dump, "
                                f"expected {2 * n}")
        firsts.append((starts[0], starts[n]))
    out = []
    end = int(max(trace[0].max(), max(t for t, _ in frames))) + WINDOW_NS
    for i, path in enumerate(run["paths"]):
        nxt = firsts[i + 1][0] if i + 1 < len(firsts) else end
        udp = "rx.udp" if path != "fast" else "rx.fast"
        spans_a = {**SPANS_A, udp: f"rx_dv falling -> m_{udp[3:]} rising"}
        for name, lo, hi, markers, spans in (
                ("a", firsts[i][0] - 1000, firsts[i][1] - 1000, MARKERS_A, spans_a),
                ("b", firsts[i][1] - 1000, nxt - 1000, MARKERS_B, SPANS_B)):
            events = build_events(trace, frames, mac, run["guest_ports"][path], lo, hi)
            file = out_dir / f"qemu-{path}-{name}.lsc"
            write_capture(file, events, markers, f"qemu_cortex_a9 {path} map {name}",
                          "fixtures/zephyr-qemu (QEMU -icount shift=3; emulated time)")
            out.append((path, name, file, _definitions(spans)))
    return out


def analyse_run(run, console_text, pcap_bytes, out_dir):
    """Statistics of every stage of every path: ``{path: {stage: LatencyStats}}``."""
    from latscope.analysis import api

    result = {}
    for path, _, file, defs in captures_from_run(run, console_text, pcap_bytes, out_dir):
        a = api.analyze_file(str(file), definitions=defs)
        result.setdefault(path, {}).update(a.stats)
    return result
