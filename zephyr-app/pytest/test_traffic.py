"""Twister scenario (harness: pytest) that sends traffic to the DUT firmware and checks the
echoes and the marker trace, not only the boot banner. Standard library only: twister runs it
in its own Python, without latscope installed.

- native_sim: the image runs inside a network namespace this test creates (its name carries
  the process id), so parallel twister jobs never share a TAP device; needs root and iproute2.
- qemu_cortex_a9: Debian's qemu-system-arm (-M xilinx-zynq-a9, -icount) on a user-mode network
  with host ports chosen free at run time; no shared state between runs.
The twister `dut` fixture is not used: the test starts the image itself (namespace / QEMU).
"""
import json
import os
import re
import shutil
import socket
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


def _wait(path, pattern, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = Path(path).read_text(errors="replace")
        if pattern(text):
            return text
        time.sleep(0.2)
    return Path(path).read_text(errors="replace")


def _client(prefix, host, ctrl, ports):
    res = subprocess.run([*prefix, sys.executable, "-c", CLIENT, host, str(ctrl),
                          json.dumps(ports), str(PACKETS)],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_native_sim(build, log):
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("native_sim traffic needs root and iproute2 for its network namespace")
    ns = f"lstw{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    proc = None
    try:
        with open(log, "w") as f:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, str(build / "zephyr/zephyr.exe")],
                                    stdout=f, stderr=subprocess.STDOUT)
        for _ in range(50):
            if subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "show", "zeth"],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        pre = ["ip", "netns", "exec", ns]
        subprocess.run([*pre, "ip", "addr", "add", "192.0.2.2/24", "dev", "zeth"], check=True)
        subprocess.run([*pre, "ip", "link", "set", "zeth", "up"], check=True)
        _wait(log, lambda t: "latscope: ready" in t, 20)
        out = _client(pre, "192.0.2.1", 4240, {p: v for p, v in PATHS.items()})
        text = _wait(log, lambda t: t.count("latscope-edge:") >= len(_expected(False)), 10)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns])
    return out, text


def _run_qemu(build, log):
    if not shutil.which("qemu-system-arm"):
        pytest.skip("qemu-system-arm not installed")
    ctrl = _free_port()
    host = {p: _free_port() for p in PATHS}
    fwd = [f"hostfwd=udp:127.0.0.1:{ctrl}-10.0.2.15:4240"] + [
        f"hostfwd=udp:127.0.0.1:{host[p]}-10.0.2.15:{PATHS[p][1]}" for p in PATHS]
    Path(log).touch()
    proc = subprocess.Popen(
        ["qemu-system-arm", "-M", "xilinx-zynq-a9", "-cpu", "cortex-a9", "-m", "64",
         "-nographic", "-serial", f"file:{log}", "-serial", "null", "-monitor", "none",
         "-icount", "shift=3,align=off,sleep=on", "-rtc", "clock=vm",
         "-kernel", str(build / "zephyr/zephyr.elf"),
         "-nic", "user,model=cadence_gem,net=10.0.2.0/24," + ",".join(fwd)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait(log, lambda t: "latscope: ready" in t, 60)
        time.sleep(1)
        out = _client([], "127.0.0.1", ctrl, {p: (PATHS[p][0], host[p]) for p in PATHS})
        text = _wait(log, lambda t: t.count("latscope-edge:") >= len(_expected(True)), 10)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
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
