"""Twister scenario (harness: pytest) that sends traffic to the DUT firmware and checks the
echoes and the marker trace, not only the boot banner. Standard library only: twister runs it
in its own Python, without latscope installed.

- native_sim: the image runs inside a network namespace this test creates (its name carries
  the process id), so parallel twister jobs never share a TAP device; needs root and iproute2.
- qemu_cortex_a9: Debian's qemu-system-arm (-M xilinx-zynq-a9, -icount) on a user-mode network
  with host ports chosen free at run time; no shared state between runs.
The twister `dut` fixture is not used: the test starts the image itself (namespace / QEMU).
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

import pytest

PACKETS = 4
PATHS = {"socket": (0, 4242), "netctx": (1, 4243), "fast": (2, 4244)}
EXPECTED = {"socket": ["m0", "m1", "m2", "m4"], "netctx": ["m0", "m1", "m2", "m4"],
            "fast": ["m0", "m1", "m3", "m4"]}
EDGE = re.compile(r"^latscope-edge: (\d+) (m[0-4]) (rise|fall)(?: t=\d+)?\s*$")

# Control protocol client (docs/zephyr-app.md): 'L' 'C' 1 op id:u16 len:u16 body.
CLIENT = r'''
import json, socket, struct, sys
host, ctrl, ports, n = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.0)
rid = [0]
def req(op, body=b""):
    for _ in range(5):
        rid[0] += 1
        s.sendto(b"LC\x01" + bytes([op]) + struct.pack(">HH", rid[0], len(body)) + body,
                 (host, ctrl))
        try:
            data = s.recv(2048)
        except socket.timeout:
            continue
        if data[:2] == b"LC" and struct.unpack(">H", data[4:6])[0] == rid[0]:
            assert data[6] == 0, f"op {op}: status {data[6]}"
            return data[10:10 + struct.unpack(">H", data[8:10])[0]]
    raise SystemExit(f"no answer to op {op}")
info = dict(l.split("=", 1) for l in req(1).decode().splitlines() if "=" in l)
out = {"info": info}
for path, (code, port) in ports.items():
    req(2, bytes([code]))
    e = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); e.settimeout(2.0)
    got = 0
    for i in range(n):
        msg = struct.pack(">HHIQ", 0x4C54, 1, i, 0) + bytes(2)
        e.sendto(msg, (host, port))
        try:
            got += e.recv(2048) == msg
        except socket.timeout:
            pass
    out[path] = got
body = req(6)
out["counters"] = list(struct.unpack(">" + "I" * body[0], body[1:1 + 4 * body[0]]))
print(json.dumps(out))
'''


def _edges(text):
    assert "latscope-edge: lost" not in text and "messages dropped" not in text
    lines = [EDGE.match(ln) for ln in text.splitlines() if ln.startswith("latscope-edge:")]
    assert all(lines), "malformed edge line"
    assert [int(m[1]) for m in lines] == list(range(len(lines))), "edge lines missing"
    return [(m[2], m[3]) for m in lines]


def _expected(isr):
    return [(ch, lv) for path in PATHS for _ in range(PACKETS) for ch in EXPECTED[path]
            if isr or ch != "m0" for lv in ("rise", "fall")]


def _keep_frame_isr(edges):
    """rx.isr also fires for control requests: keep an m0 pulse only right before an m1 rise."""
    out = []
    for i, e in enumerate(edges):
        j = i if e[1] == "rise" else i - 1
        if e[0] == "m0" and (j + 2 >= len(edges) or edges[j + 2] != ("m1", "rise")):
            continue
        out.append(e)
    return out


def _load_sibling(name):
    """The helper module ``name`` beside this file, by path: twister's pytest may not put this
    folder on sys.path."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zephyr_run = _load_sibling("zephyr_run")


def _client(prefix, host, ctrl, ports):
    res = subprocess.run([*prefix, sys.executable, "-c", CLIENT, host, str(ctrl),
                          json.dumps(ports), str(PACKETS)],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def _run_native_sim(build, log):
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("native_sim traffic needs root and iproute2 for its network namespace")
    with zephyr_run.native_sim_in_netns(build / "zephyr/zephyr.exe", log,
                                        f"lstw{os.getpid()}") as prefix:
        zephyr_run.wait_for(log, lambda t: "latscope: ready" in t, 20)
        out = _client(prefix, zephyr_run.NATIVE_SIM_GUEST, zephyr_run.CONTROL_PORT, PATHS)
        text = zephyr_run.wait_for(
            log, lambda t: t.count("latscope-edge:") >= len(_expected(False)), 10)
    return out, text


def _run_qemu(build, log):
    if not shutil.which("qemu-system-arm"):
        pytest.skip("qemu-system-arm not installed")
    ctrl = zephyr_run.free_udp_port()
    host = {p: zephyr_run.free_udp_port() for p in PATHS}
    forwards = {ctrl: zephyr_run.CONTROL_PORT} | {host[p]: PATHS[p][1] for p in PATHS}
    with zephyr_run.qemu_zynq(build / "zephyr/zephyr.elf", log, forwards):
        zephyr_run.wait_for(log, lambda t: "latscope: ready" in t, 60)
        time.sleep(1)
        out = _client([], "127.0.0.1", ctrl, {p: (PATHS[p][0], host[p]) for p in PATHS})
        text = zephyr_run.wait_for(
            log, lambda t: t.count("latscope-edge:") >= len(_expected(True)), 10)
    return out, text


def test_echoes_and_marker_trace(request, tmp_path):
    build = Path(request.config.getoption("--build-dir"))
    config = (build / "zephyr/.config").read_text()
    log = tmp_path / "console.log"
    if "CONFIG_BOARD_NATIVE_SIM=y" in config:
        out, text = _run_native_sim(build, log)
    elif "CONFIG_BOARD_QEMU_CORTEX_A9=y" in config:
        out, text = _run_qemu(build, log)
    else:
        pytest.skip("traffic scenario for native_sim and qemu_cortex_a9 only")
    isr = out["info"]["point.rx.isr"] != "not-measured"
    assert all(out[p] == PACKETS for p in PATHS), out
    assert out["counters"][3] == 3 * PACKETS          # tx_echo
    assert out["counters"][1] == PACKETS              # rx_fast
    edges = _edges(text)
    assert (_keep_frame_isr(edges) if isr else edges) == _expected(isr)
    # prj.conf's NET_TC_TX_COUNT=1, as the running firmware found it: the fast track only queues
    if "CONFIG_NET_TC_TX_COUNT=1" in config:
        assert out["info"]["tx_threads"] == "1"
        assert "latscope: tx_threads=1, fast track queues replies" in text
