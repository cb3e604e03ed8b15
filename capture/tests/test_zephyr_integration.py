"""Zephyr DUT firmware end to end: build with west, run in a network namespace this test creates,
echo on every path with `latscope traffic`, and check the exact order and count of marker edges
reported through gpio_emul callbacks (native_sim). A second test builds for qemu_cortex_a9 (Zynq
GEM) and echoes through QEMU's user-mode network. Both skip plainly without a Zephyr tree (set
ZEPHYR_BASE to a Zephyr 3.7 tree; `west` on PATH), and the native_sim one without root for
`ip netns`. The edge-trace parser is tested on its own, without Zephyr.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

APP = Path(__file__).parents[2] / "zephyr-app"
ZEPHYR = os.environ.get("ZEPHYR_BASE", "")
NS = f"lsz{os.getpid() % 10000}"
HAVE_ZEPHYR = bool(ZEPHYR) and Path(ZEPHYR, "VERSION").exists()


def _load_zephyr_run():
    """zephyr-app/pytest/zephyr_run.py, which starts the firmware for twister's traffic test
    too (it runs there without latscope installed, so it lives beside that test)."""
    spec = importlib.util.spec_from_file_location("zephyr_run", APP / "pytest/zephyr_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zephyr_run = _load_zephyr_run()


def needs_zephyr(test):
    """Mark a test slow and skip it plainly without a Zephyr tree or west."""
    test = pytest.mark.skipif(not shutil.which("west"), reason="west not on PATH")(test)
    test = pytest.mark.skipif(not HAVE_ZEPHYR,
                              reason="no Zephyr tree: set ZEPHYR_BASE to run this test")(test)
    return pytest.mark.slow(test)


#: Marker channels expected per packet and path. Map A is the default map (m0 rx.isr, m1 rx.copy,
#: m2 rx.udp, m3 rx.fast, m4 tx.send); m0 only where the board marks interrupt entry. Map B puts
#: the shim's RX hand-off and the three TX driver-side points on m0..m3 (SET_MARKERS), in
#: firmware order: rx.handoff, tx.queue, tx.handoff (L2 -> driver), tx.xmit (driver starts MAC).
EXPECTED = {"socket": ["m0", "m1", "m2", "m4"], "netctx": ["m0", "m1", "m2", "m4"],
            "fast": ["m0", "m1", "m3", "m4"]}
MAP_B = [6, 7, 8, 5, 0xFF]            # rx.handoff, tx.queue, tx.handoff, tx.xmit (protocol values)
EXPECTED_B = ["m0", "m1", "m2", "m3"]
MAP_A = [0, 1, 2, 3, 4]
PACKETS = 4                                       # per path and map, one in flight
BURST = 8                                         # full-size frames sent back to back
EDGE = re.compile(r"^latscope-edge: (\d+) (m[0-4]) (rise|fall)(?: t=\d+)?$")
EDGE_T = re.compile(r"^latscope-edge: (\d+) m([0-4]) (rise|fall) t=(\d+)$")


def parse_edges(text):
    """Marker edges of a console log as ``[(channel, "rise"|"fall"), ...]`` in trace order.

    Raises AssertionError if the trace reports lost edges, the console dropped log messages,
    or the trace indices are not exactly 0, 1, 2, ... (a missing or mangled line).
    """
    assert "messages dropped" not in text, "console dropped messages"
    assert "latscope-edge: lost" not in text, "edge trace queue overflowed"
    edges, indices = [], []
    for line in text.splitlines():
        if line.startswith("latscope-edge:"):
            m = EDGE.match(line)
            assert m, f"malformed trace line {line!r}"
            indices.append(int(m[1]))
            edges.append((m[2], m[3]))
    assert indices == list(range(len(indices))), "edge trace indices not contiguous from 0"
    return edges


def expected_edges(paths, packets, isr=True, map_b=False, isr_name="m0"):
    """Each packet's markers as rise/fall pairs, path after path (map A, then map B). Map A's
    rx.isr pulse is named ``isr_name`` (``"m0?"``: optional, see :func:`match_edges`)."""
    out = []
    for path in paths:
        chans = [ch if ch != "m0" else isr_name for ch in EXPECTED[path] if isr or ch != "m0"]
        out += [(ch, lv) for _ in range(packets) for ch in chans for lv in ("rise", "fall")]
        if map_b:
            out += [(ch, lv) for _ in range(packets) for ch in EXPECTED_B
                    for lv in ("rise", "fall")]
    return out


def isr_marks_of_test_frames(edges):
    """rx.isr (m0, map A) also fires for frames no marker follows (control requests, ARP): keep
    an m0 pulse only when the next edge is rx.copy's (m1) rise or another kept pattern of map B
    (m0 = rx.handoff followed by m1 = tx.queue)."""
    out = []
    for i, e in enumerate(edges):
        if e[0] == "m0":
            j = i if e[1] == "rise" else i - 1
            if j + 2 >= len(edges) or edges[j + 2] != ("m1", "rise"):
                continue
        out.append(e)
    return out


def match_edges(edges, want):
    """Compare a trace with the expected edges, where an expected ``"m0?"`` pulse (map A's
    rx.isr) may be absent: the Xilinx GEM driver drains its RX ring with the receive interrupt
    masked, so a frame that arrives meanwhile is taken by the same pass and raises no interrupt
    (and so no rx.isr) of its own. Any other difference (order, extra, missing) raises
    AssertionError. Returns how many optional pulses were absent."""
    i = j = missing = 0
    while i < len(want):
        ch, level = want[i]
        if j < len(edges) and edges[j] == (ch.rstrip("?"), level):
            i, j = i + 1, j + 1
        elif ch.endswith("?") and level == "rise":
            i, missing = i + 2, missing + 1          # its rise and fall
        else:
            got = edges[j] if j < len(edges) else "end of trace"
            raise AssertionError(f"trace edge {j}: {got}, expected {want[i]}")
    assert j == len(edges), f"{len(edges) - j} unexpected edges after the expected ones"
    return missing


def test_parse_edges_checks_order_count_and_loss():
    good = "boot\nlatscope-edge: 0 m0 rise\nlatscope-edge: 1 m0 fall\n"
    assert parse_edges(good) == [("m0", "rise"), ("m0", "fall")]
    with pytest.raises(AssertionError, match="not contiguous"):
        parse_edges("latscope-edge: 0 m0 rise\nlatscope-edge: 2 m1 rise\n")
    with pytest.raises(AssertionError, match="dropped"):
        parse_edges(good + "--- 2 messages dropped ---\n")
    with pytest.raises(AssertionError, match="overflowed"):
        parse_edges(good + "latscope-edge: lost 3\n")
    with pytest.raises(AssertionError, match="malformed"):
        parse_edges("latscope-edge: 0 m9 rise\n")
    # 1 packet of the fast path: m0 m1 m3 m4, each a rise then a fall (8 edges).
    assert expected_edges(["fast"], 1)[::2] == [("m0", "rise"), ("m1", "rise"),
                                                ("m3", "rise"), ("m4", "rise")]
    assert expected_edges(["fast"], 1, isr=False, map_b=True)[::2] == [
        ("m1", "rise"), ("m3", "rise"), ("m4", "rise"), ("m0", "rise"), ("m1", "rise"),
        ("m2", "rise"), ("m3", "rise")]
    assert len(expected_edges(["socket", "netctx", "fast"], PACKETS)) == 96
    # Stray interrupt marks (control traffic) go; those before a frame's rx.copy stay.
    stray = [("m0", "rise"), ("m0", "fall")]
    frame = [("m0", "rise"), ("m0", "fall"), ("m1", "rise"), ("m1", "fall")]
    assert isr_marks_of_test_frames(stray + frame + stray + stray + frame) == frame + frame
    # An optional rx.isr may be absent, nothing else may differ.
    want = expected_edges(["fast"], 2, isr_name="m0?")
    got = [(c.rstrip("?"), lv) for c, lv in want]
    assert match_edges(got, want) == 0
    assert match_edges(got[2:], want) == 1
    assert match_edges(got[:8] + got[10:], want) == 1
    with pytest.raises(AssertionError, match="expected"):
        match_edges(got[:2] + got[4:], want)               # rx.copy (m1) missing
    with pytest.raises(AssertionError, match="unexpected"):
        match_edges(got + [("m4", "rise")], want)
    with pytest.raises(AssertionError, match="expected"):
        match_edges(got[2:], expected_edges(["fast"], 2))  # rx.isr not optional there


def _west_build(board, build, *extra):
    env = dict(os.environ)
    if board.startswith("native_sim"):
        env["ZEPHYR_TOOLCHAIN_VARIANT"] = "host"
    else:
        env.setdefault("ZEPHYR_TOOLCHAIN_VARIANT", "gnuarmemb")
        env.setdefault("GNUARMEMB_TOOLCHAIN_PATH", "/usr")
    res = subprocess.run(["west", "build", "-b", board, "-d", str(build), str(APP), *extra],
                         env=env, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


DRIVE = """
import json
from latscope.capture import runner, traffic
c = runner.ControlClient(HOST, port=CTRL)
out = {'info': c.info()}
if out['info']['point.rx.isr'] == 'not-measured':   # the firmware refuses unmarkable points
    MAP_A = [0xFF] + MAP_A[1:]
c.request('reset_counters')
out['after_reset'] = c.counters()
for path in PATHS:
    c.set_path(path)
    c.request('set_markers', bytes(MAP_A))
    r = traffic.run_traffic((HOST, PORTS[path]), [18, 210], N, one_in_flight=True, timeout=2)
    c.request('set_markers', bytes(MAP_B))
    r2 = traffic.run_traffic((HOST, PORTS[path]), [18, 210], N, one_in_flight=True, timeout=2)
    out[path] = [r.received, r2.received]
c.request('set_markers', bytes(MAP_A))
# A burst of BURST full-size frames (1472-byte payloads: 1518-byte frames) sent back to back:
# prj.conf sizes the buffers for it. Not marked: only the small test sizes are selected.
import socket
c.set_path('socket')
c.set_sizes([18, 210])
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b.settimeout(3)
for i in range(BURST):
    b.sendto(bytes([i]) * 1472, (HOST, PORTS['socket']))
got = set()
try:
    while len(got) < BURST:
        d = b.recv(2048)
        if len(d) == 1472:
            got.add(d[0])
except socket.timeout:
    pass
out['burst'] = len(got)
out['counters'] = c.counters()
print(json.dumps(out))
"""


def _drive(prefix, host, ctrl, ports, timeout=180):
    """Run the control + traffic script (in a netns via ``prefix``), return its JSON."""
    script = (f"HOST={host!r}; CTRL={ctrl}; PORTS={ports!r}; N={PACKETS}; "
              f"PATHS={list(ports)!r}; MAP_A={MAP_A!r}; MAP_B={MAP_B!r}; BURST={BURST}\n"
              + DRIVE)
    res = subprocess.run([*prefix, sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@needs_zephyr
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                    reason="needs root and iproute2 for a network namespace")
def test_native_sim_echo_and_markers(tmp_path):
    build = tmp_path / "build"
    _west_build("native_sim/native/64", build)
    log_path = tmp_path / "console.log"
    with zephyr_run.native_sim_in_netns(build / "zephyr/zephyr.exe", log_path, NS) as ns:
        zephyr_run.wait_for(log_path, lambda t: "latscope: ready" in t, 10)
        out = _drive(ns, zephyr_run.NATIVE_SIM_GUEST, zephyr_run.CONTROL_PORT,
                     {"socket": 4242, "netctx": 4243, "fast": 4244})
        want = expected_edges(["socket", "netctx", "fast"], PACKETS, isr=False, map_b=True)
        # The trace thread prints at the lowest priority: wait (bounded) until it caught up.
        text = zephyr_run.wait_for(log_path, lambda t: t.count("latscope-edge:") >= len(want),
                                   10)
    info = out["info"]
    assert info["firmware"] == "latscope-dut"
    assert info["board"] == "native_sim/native/64"
    assert_tx_thread(info, log_path.read_text())
    # The TAP driver has no interrupt: rx.isr is reported as not measured, never pulsed.
    assert info["point.rx.isr"] == "not-measured"
    assert info["not_measured"] == "rx.isr"
    assert info["point.rx.copy"] == "net_recv_data:recv-filter-entry"
    assert info["point.tx.handoff"] == "net_l2_send:net_capture_pkt-wrap"
    assert info["point.tx.xmit"] == "net_pkt_read:tx-copy-done,tap-write-follows"
    assert info["markers"] == "m1=rx.copy,m2=rx.udp,m3=rx.fast,m4=tx.send"   # m0 dropped at boot
    # RESET_COUNTERS zeroes every counter; since then only the GET_COUNTERS request's own frame
    # passed the driver shim.
    assert out["after_reset"] == {**dict.fromkeys(out["after_reset"], 0), "rx_frames": 1}
    assert out["socket"] == out["netctx"] == out["fast"] == [PACKETS, PACKETS]
    c = out["counters"]
    assert out["burst"] == BURST
    assert c["tx_echo"] == 3 * 2 * PACKETS + BURST and c["rx_fast"] == 2 * PACKETS
    assert c["size_skipped"] == BURST and c["tx_errors"] == 0
    assert c["fast_rejected"] == c["fast_busy"] == 0
    # Map A: 3 markers per packet (no rx.isr); map B: 4.
    assert c["marker_pulses"] == 3 * PACKETS * (3 + 4)
    edges = parse_edges(text)
    # Exact: every packet's markers, each a rise then a fall, in the path's marker order.
    assert edges == want


QEMU_PORTS = {"socket": 14242, "netctx": 14243, "fast": 14244}


def assert_tx_thread(info, console):
    """prj.conf's NET_TC_TX_COUNT=1, checked by the running firmware: it counted one TX
    traffic-class thread at boot (GET_INFO ``tx_threads``, and its boot line), so the fast
    track's send only queues and never waits on TX completion."""
    assert info["tx_threads"] == "1"
    assert ("latscope: tx_threads=1, fast track queues replies (does not wait on TX "
            "completion)") in console
    assert "expected 1 TX threads" not in console


#: The firmware's UDP ports of the three paths.
GUEST_PORTS = (4242, 4243, 4244)


def _forwards(ctrl, host_ports):
    """QEMU's port forwards: host ``ctrl`` to the control port, ``host_ports`` (path: port) to
    the paths' ports in order."""
    return {ctrl: zephyr_run.CONTROL_PORT} | dict(
        zip(host_ports.values(), GUEST_PORTS, strict=True))


def _qemu_echo_and_markers(tmp_path, *build_args):
    """Build for qemu_cortex_a9 (``build_args`` after ``--``), boot it under QEMU -icount, echo
    on every path with both marker maps (A, then B), and check what any build must show: echoes
    and counters, and every test frame's markers in order, rx.isr optional per frame (see
    :func:`match_edges`). Returns GET_INFO, the console text and how many rx.isr were absent."""
    build = tmp_path / "build"
    _west_build("qemu_cortex_a9", build, *(("--", *build_args) if build_args else ()))
    ctrl = zephyr_run.free_udp_port()
    log_path = tmp_path / "console.log"
    with zephyr_run.qemu_zynq(build / "zephyr/zephyr.elf", log_path,
                              _forwards(ctrl, QEMU_PORTS)):
        text = zephyr_run.wait_for(log_path, lambda t: "latscope: ready" in t, 60)
        assert "latscope: ready" in text, text[-2000:]
        time.sleep(1)
        out = _drive([], "127.0.0.1", ctrl, QEMU_PORTS)
        want = expected_edges(["socket", "netctx", "fast"], PACKETS, isr=True, map_b=True,
                              isr_name="m0?")
        text = zephyr_run.wait_for(log_path, lambda t: t.count("latscope-edge:") >= len(want),
                                   10)
    info = out["info"]
    assert info["board"].startswith("qemu_cortex_a9")
    assert_tx_thread(info, text)
    assert out["socket"] == out["netctx"] == out["fast"] == [PACKETS, PACKETS]
    c = out["counters"]
    assert out["burst"] == BURST
    assert c["tx_echo"] == 3 * 2 * PACKETS + BURST and c["rx_fast"] == 2 * PACKETS
    # rx.isr also pulses for control requests and ARP: at least the test frames' pulses.
    assert c["marker_pulses"] >= 3 * PACKETS * (4 + 4)
    edges = parse_edges(text)
    # Every test frame's markers in order (map A: rx.isr, rx.copy, rx.udp or rx.fast, tx.send;
    # map B: rx.handoff, tx.queue, tx.handoff, tx.xmit); rx.isr may be absent for a frame that
    # arrived while the driver was still draining its RX ring (seen in 3 of 23 runs).
    return info, text, match_edges(isr_marks_of_test_frames(edges), want)


def calls_by_function(elf):
    """Direct calls (ARM ``bl``) in an ELF as ``{caller: {callee, ...}}``, from
    ``arm-none-eabi-objdump -d``; LTO's local-symbol suffixes (``.lto_priv.0``) are removed."""
    res = subprocess.run(["arm-none-eabi-objdump", "-d", str(elf)], capture_output=True,
                         text=True, check=True)
    calls, caller = {}, None
    for line in res.stdout.splitlines():
        if m := re.match(r"^[0-9a-f]+ <([^>+]+)>:$", line):
            caller = m[1].split(".lto_priv")[0]
        elif caller and (m := re.search(r"\tbl\s+[0-9a-f]+ <([^>+]+)>$", line)):
            calls.setdefault(caller, set()).add(m[1].split(".lto_priv")[0])
    return calls


@needs_zephyr
@pytest.mark.skipif(not shutil.which("qemu-system-arm"), reason="qemu-system-arm not installed")
@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc missing")
def test_qemu_cortex_a9_gem_echo(tmp_path):
    """Zynq-7000 GEM under QEMU: echoes on every path through QEMU's user network (slirp
    forwards host UDP ports to the guest's 10.0.2.15). QEMU models no Zynq GPIO, so the board
    overlay puts the markers on a gpio_emul controller whose edge trace goes to the UART."""
    info, _, isr_absent = _qemu_echo_and_markers(tmp_path)
    # One GEM line for RX and TX: rx.isr only when the GEM shows a receive cause.
    assert info["point.rx.isr"] == "isr:shared-line,gem-rx-status"
    assert info["not_measured"] == ""
    assert info["point.tx.handoff"] == "net_l2_send:net_capture_pkt-wrap"
    assert info["point.tx.xmit"] == "net_pkt_read:tx-copy-done,gem-starttx-follows"
    assert isr_absent <= PACKETS


@needs_zephyr
@pytest.mark.skipif(not shutil.which("qemu-system-arm"), reason="qemu-system-arm not installed")
@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc missing")
def test_qemu_lto_build_keeps_every_marker(tmp_path):
    """overlay-lto.conf (CONFIG_LTO) on the Zynq GEM under QEMU: every marker point reports a
    mechanism in GET_INFO and fires for every test frame, in order, on every path. Under LTO a
    plain -Wl,--wrap is silently bypassed where caller and callee share an LTO unit, so the
    build keeps the wrapped functions' defining sources out of LTO (docs/zephyr-app.md,
    "Driver shim"); without that, tx.handoff and tx.xmit would be missing from the trace."""
    info, _, isr_absent = _qemu_echo_and_markers(tmp_path, "-DEXTRA_CONF_FILE=overlay-lto.conf")
    # In the image, the L2's send and the GEM driver's send call the wrappers, not the real
    # functions the compiler could otherwise have bound them to.
    calls = calls_by_function(tmp_path / "build/zephyr/zephyr.elf")
    assert "__wrap_net_capture_pkt" in calls["ethernet_send"]
    assert not {"net_capture_pkt", "net_capture_pkt_with_status"} & calls["ethernet_send"]
    assert "__wrap_net_pkt_read" in calls["eth_xlnx_gem_send"]
    assert "net_pkt_read" not in calls["eth_xlnx_gem_send"]
    assert info["overlays"] == "overlay-lto.conf"
    points = {k.removeprefix("point."): v for k, v in info.items() if k.startswith("point.")}
    assert len(points) == 9 and "not-measured" not in points.values(), points
    assert info["not_measured"] == ""
    assert points["tx.handoff"] == "net_l2_send:net_capture_pkt-wrap"
    assert points["tx.xmit"] == "net_pkt_read:tx-copy-done,gem-starttx-follows"
    assert isr_absent <= PACKETS


IDENTITY_DRIVE = """
import json, socket, struct
from latscope.capture import runner
c = runner.ControlClient(HOST, port=CTRL)
out = {'info': c.info()}
for path, port in PORTS.items():
    c.set_path(path)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    got = []
    for seq in SEQS:
        msg = struct.pack('>HHIQ', 0x4C54, 1, seq, 0) + bytes(2)
        s.sendto(msg, (HOST, port))
        got.append(s.recv(2048) == msg)
    out[path] = sum(got)
print(json.dumps(out))
"""


@needs_zephyr
@pytest.mark.skipif(not shutil.which("qemu-system-arm"), reason="qemu-system-arm not installed")
@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc missing")
def test_qemu_identity_markers_carry_each_probes_sequence_number(tmp_path):
    """CONFIG_LATSCOPE_MARKERS_IDENTITY on the Zynq GEM under QEMU -icount: every marker the
    firmware raises for a probe (rx.copy, rx.udp / rx.fast, tx.send) decodes, with the host's
    LSID-1 decoder, to the low byte of that probe's sequence number (from its UDP payload),
    and rx.isr (no packet known at interrupt entry) stays plain. The pulse unit is 500 ns:
    under QEMU a gpio_emul write costs far more than the default 50 ns unit, which would push
    a 1's width below twice a 0's (docs/marker-identity.md, "Cost per marker")."""
    from latscope.analysis.marker_identity import decode

    build = tmp_path / "build"
    _west_build("qemu_cortex_a9", build, "--", "-DCONFIG_LATSCOPE_MARKERS_IDENTITY=y",
                "-DCONFIG_LATSCOPE_MARKERS_PULSE_NS=500")
    ctrl = zephyr_run.free_udp_port()
    host_ports = {p: zephyr_run.free_udp_port() for p in QEMU_PORTS}
    log_path = tmp_path / "console.log"
    seqs = [0x1FE, 0x1FF, 0x200, 0x2A5, 7]            # low bytes FE FF 00 A5 07
    with zephyr_run.qemu_zynq(build / "zephyr/zephyr.elf", log_path,
                              _forwards(ctrl, host_ports)):
        ready = zephyr_run.wait_for(log_path, lambda t: "latscope: ready" in t, 60)
        assert "latscope: ready" in ready
        time.sleep(1)
        script = (f"HOST='127.0.0.1'; CTRL={ctrl}; PORTS={host_ports!r}; SEQS={seqs!r}\n"
                  + IDENTITY_DRIVE)
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=180)
        assert res.returncode == 0, res.stderr[-3000:]
        out = json.loads(res.stdout)
        # 3 paths x 5 probes x 3 coded markers x 10 pulses x 2 edges, plus rx.isr pulses
        want = 3 * len(seqs) * 3 * 20
        text = zephyr_run.wait_for(log_path, lambda t: t.count("latscope-edge:") >= want, 60)
    assert out["info"]["marker_code"] == "lsid1"
    assert all(out[p] == len(seqs) for p in QEMU_PORTS), out
    rows = [EDGE_T.match(line) for line in text.splitlines() if line.startswith("latscope-edge:")]
    assert all(rows), "malformed trace line"
    t = np.array([int(m[4]) for m in rows])
    ch = np.array([int(m[2]) for m in rows])
    rise = np.array([m[3] == "rise" for m in rows])
    low = [s & 0xFF for s in seqs]
    codes = {k: decode(t[ch == k], rise[ch == k]) for k in range(5)}
    assert codes[0].coded == 0                          # rx.isr: plain
    # m1 rx.copy: every probe of every path; m2 rx.udp (socket, netctx); m3 rx.fast; m4 tx.send
    assert codes[1].ident.tolist() == low * 3
    assert codes[2].ident.tolist() == low * 2
    assert codes[3].ident.tolist() == low
    assert codes[4].ident.tolist() == low * 3
    for k in range(1, 5):
        assert codes[k].damaged == 0, k
