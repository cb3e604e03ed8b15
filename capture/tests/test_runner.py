"""latscope run and the DUT control client. The control vectors are shared with the C core's
ctest (zephyr-app/lib/latscope_core/tests/control_vectors.txt, written by hand from the spec)."""

import json
from pathlib import Path

import pytest

from latscope import LatscopeError
from latscope.capture import runner
from latscope.capture.link.session import CaptureOutcome

VECTORS = Path(__file__).parents[2] / "zephyr-app/lib/latscope_core/tests/control_vectors.txt"


def _vectors():
    for line in VECTORS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, req, resp = line.split()
            yield name, bytes.fromhex(req), None if resp == "-" else bytes.fromhex(resp)


def test_control_encoding_matches_shared_vectors():
    checked = 0
    for name, req, resp in _vectors():
        if len(req) < 8 or req[:3] != b"LC\x01" or int.from_bytes(req[6:8], "big") != \
                len(req) - 8:
            continue                      # malformed on purpose: the C side checks those
        opcode, rid = req[3], int.from_bytes(req[4:6], "big")
        assert runner.encode_request(opcode, rid, req[8:]) == req, name
        op, rid2, status, body = runner.decode_response(resp)
        assert (op, rid2) == (opcode, rid), name
        if name == "get_info":
            assert body == b"version=0.1.0\nboard=host\n"
        if name == "get_counters":
            assert body[0] == 11 and int.from_bytes(body[1 + 4 * 6:1 + 4 * 7], "big") == 10
        if name == "set_path_fast_unsupported":
            assert runner.STATUS[status] == "unsupported"
        checked += 1
    assert checked == 12


def test_decode_response_errors():
    with pytest.raises(LatscopeError, match="not a latscope control response"):
        runner.decode_response(b"LC\x01\x01\x00\x01\x00\x00\x00")
    with pytest.raises(LatscopeError, match="length field disagrees"):
        runner.decode_response(bytes.fromhex("4c43018100010000000500"))


def test_experiment_validation(tmp_path):
    f = tmp_path / "e.toml"
    f.write_text('target = "sim"\npaths = ["gem"]\nsizes = [63]\n')
    with pytest.raises(LatscopeError, match="sizes must be Ethernet frame bytes, 64 to 1518"):
        runner.load_experiment(f)
    f.write_text('target = "192.0.2.1"\npaths = ["gem"]\nsizes = [64]\ninstrument = "/x"\n')
    with pytest.raises(LatscopeError, match="hardware paths must be among"):
        runner.load_experiment(f)
    with pytest.raises(LatscopeError, match="cannot read experiment .*no such file or directory"):
        runner.load_experiment(tmp_path / "missing.toml")


def test_sim_matrix(tmp_path):
    pytest.importorskip("latscope.capture.sim.simbench", reason="simulated bench not present yet")
    f = tmp_path / "exp.toml"
    f.write_text('name = "t"\ntarget = "sim"\npaths = ["gem", "fast-track"]\nsizes = [64, 256]\n'
                 'packets = 20\nengine = "model"\n')
    from latscope.capture.files.capfile import open_capture
    from latscope.cli import main
    assert main(["run", str(f), "-o", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert [(c["path"], c["size"]) for c in summary["cells"]] == \
        [("gem", 64), ("gem", 256), ("fast-track", 64), ("fast-track", 256)]
    for cell in summary["cells"]:
        with open_capture(tmp_path / "out" / cell["capture"]) as cap:
            events = cap.events()
            assert cell["ok"] and len(events[0]) > 0


class _FakeDut:
    """Loopback stand-in for the DUT: a control server answering GET_INFO/SET_PATH/SET_SIZES as
    docs/zephyr-app.md specifies, and one UDP echo socket per path. Records every request and
    the monotonic time of every echoed datagram."""

    def __init__(self):
        import socket
        import threading
        self.ctrl = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.ctrl.bind(("127.0.0.1", 0))
        self.echo = {p: socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for p in runner.PATHS}
        for s in self.echo.values():
            s.bind(("127.0.0.1", 0))
        self.requests, self.echoed = [], []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._serve_ctrl, daemon=True)] + [
            threading.Thread(target=self._serve_echo, args=(p,), daemon=True)
            for p in runner.PATHS]
        for t in self.threads:
            t.start()

    def ports(self):
        return {p: s.getsockname()[1] for p, s in self.echo.items()}

    def _serve_ctrl(self):
        import struct
        self.ctrl.settimeout(0.05)
        while not self.stop.is_set():
            try:
                data, peer = self.ctrl.recvfrom(2048)
            except OSError:
                continue
            opcode, rid = data[3], struct.unpack_from(">H", data, 4)[0]
            self.requests.append((opcode, data[8:]))
            body = b"firmware=latscope-dut\noverlays=\n" if opcode == 1 else b""
            self.ctrl.sendto(b"LC\x01" + bytes([opcode | 0x80]) +
                             struct.pack(">HBBH", rid, 0, 0, len(body)) + body, peer)

    def _serve_echo(self, path):
        import time
        s = self.echo[path]
        s.settimeout(0.05)
        while not self.stop.is_set():
            try:
                data, peer = s.recvfrom(2048)
            except OSError:
                continue
            self.echoed.append((path, len(data), time.monotonic()))
            s.sendto(data, peer)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        self.ctrl.close()
        for s in self.echo.values():
            s.close()


def test_hardware_matrix_runs_capture_alongside_traffic(tmp_path):
    """Hardware target on loopback: every cell selects path and size over the control port, the
    capture (a stand-in for `latscope capture --port`) runs while the traffic is sent, and the
    summary lists each cell's capture and traffic record."""
    import time
    dut = _FakeDut()
    spans = []

    def fake_capture(source, output, *, limits, **options):
        start = time.monotonic()
        out = Path(output)
        deadline = start + 5
        want = limits.packets
        while time.monotonic() < deadline:   # a real capture ends after --packets packets
            if sum(1 for e in dut.echoed if e[2] >= start) >= want:
                break
            time.sleep(0.01)
        spans.append((start, time.monotonic(), (source, limits)))
        out.write_bytes(b"capture")
        return CaptureOutcome(reason="packet limit reached", exit_status=0)

    try:
        exp = {"name": "hw", "target": "127.0.0.1", "paths": ["socket", "fast"],
               "sizes": [64, 256], "configurations": ["default"], "packets": 5, "seed": 1,
               "engine": "model", "instrument": "/dev/null", "rate": 500,
               "control_port": dut.ctrl.getsockname()[1], "ports": dut.ports()}
        summary = runner.run_experiment(exp, tmp_path, capture=fake_capture)
    finally:
        dut.close()
    assert summary["ok"] and len(summary["cells"]) == 4
    assert summary["firmware"]["firmware"] == "latscope-dut"
    # SET_PATH (2) then SET_SIZES (4) per cell, payload = frame - 46 bytes (64 -> 18).
    set_sizes = [body for op, body in dut.requests if op == 4]
    assert set_sizes == [b"\x01\x00\x12", b"\x01\x00\xd2"] * 2
    for cell, (start, end, (source, limits)) in zip(summary["cells"], spans, strict=True):
        assert cell["traffic"]["sent"] == cell["traffic"]["received"] == 5
        assert source == "/dev/null" and limits.duration is not None
        # Every echo of this cell happened while its capture was running.
        size = cell["size"] - runner.FRAME_OVERHEAD
        times = [t for p, n, t in dut.echoed if p == cell["path"] and n == size]
        assert len(times) >= 5 and all(start <= t <= end for t in times[-5:])
        lines = (tmp_path / cell["traffic"]["file"]).read_text().splitlines()
        assert json.loads(lines[0])["type"] == "run" and len(lines) == 6


DOCS = Path(__file__).parents[2] / "docs"


def test_shipped_example_experiment_parses_and_names_real_profiles(tmp_path):
    """docs/experiment.toml is valid for the runner, every sim cell names a shipped profile, and
    the run turns it into one `latscope capture --sim` per cell (capture replaced by a recorder)."""
    from latscope.capture.sim import simbench
    exp = runner.load_experiment(DOCS / "experiment.toml")
    assert exp["target"] == "sim"
    for path in exp["paths"]:
        for size in exp["sizes"]:
            assert simbench.load_profile(f"{path}-{size}").size == size
    calls = []

    def fake_capture(source, output, *, limits, **options):
        calls.append((source, limits))
        Path(output).write_bytes(b"")
        return CaptureOutcome(reason="packet limit reached", exit_status=0)

    summary = runner.run_experiment(exp, tmp_path, capture=fake_capture)
    cells = len(exp["paths"]) * len(exp["sizes"]) * len(exp["configurations"])
    assert len(calls) == len(summary["cells"]) == cells and summary["ok"]
    sims = {source.profile for source, _ in calls}
    assert sims == {f"{p}-{s}" for p in exp["paths"] for s in exp["sizes"]}
    assert all(source.packets == limits.packets == exp["packets"] for source, limits in calls)


def test_shipped_example_experiment_hardware_block_is_valid(tmp_path):
    """The commented hardware block of docs/experiment.toml, uncommented, is a valid experiment."""
    lines = []
    for line in (DOCS / "experiment.toml").read_text().splitlines():
        if line.startswith("# ") and "=" in line.split("#")[1] and \
                line[2:].split("=")[0].strip().isidentifier():
            line = line[2:]
        lines.append(line)
    text = "\n".join(lines)
    # later keys replace the sim ones: drop the first target/paths
    text = text.replace('target = "sim"', "", 1).replace(
        'paths = ["gem", "el-dm", "el-so", "fast-track"]', "", 1)
    f = tmp_path / "hw.toml"
    f.write_text(text)
    exp = runner.load_experiment(f)
    assert exp["target"] == "192.0.2.10" and exp["paths"] == ["socket", "netctx", "fast"]
    assert exp["instrument"] == "/dev/ttyUSB1" and exp["rate"] == 200
    assert exp["ports"] == {"socket": 4242, "netctx": 4243, "fast": 4244}


def test_sim_matrix_under_load_with_frame_classes(tmp_path):
    """An experiment's ``load`` and ``[frames]`` reach every capture: the captures carry frame
    records of the experiment's classes and the background counted as its ``bulk`` class."""
    f = tmp_path / "exp.toml"
    f.write_text('name = "t"\ntarget = "sim"\npaths = ["el-dm", "fast-track"]\nsizes = [64]\n'
                 'packets = 30\nengine = "model"\nload = "bg30"\n'
                 '[frames]\nclasses = ["other", "probe", "bulk"]\nrecord = ["probe"]\n'
                 '[[frames.rx]]\nclass = "probe"\ndst_port = 5000\n'
                 '[[frames.rx]]\nclass = "bulk"\nport = [9, 9]\n'
                 '[[frames.tx]]\nclass = "probe"\nsrc_port = 5000\n')
    from latscope.capture.files.capfile import open_capture
    from latscope.cli import main
    assert main(["run", str(f), "-o", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert len(summary["cells"]) == 2
    for cell in summary["cells"]:
        assert cell["ok"]
        with open_capture(tmp_path / "out" / cell["capture"]) as cap:
            assert cap.metadata["frames"]["classes"] == {"0": "other", "1": "probe",
                                                         "2": "bulk"}
            records, _ = cap.frames()
            assert set(records["cls"].tolist()) == {1} and len(records) >= 30
            counters = cap.frame_counters()
            bulk = counters[(counters["direction"] == 0) & (counters["cls"] == 2)]
            assert int(bulk[-1]["frames"]) > 100           # 30 ms of 30 % IMIX: ~300 frames
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "t"\ntarget = "10.0.0.1"\ninstrument = "/dev/null"\n'
                   'paths = ["socket"]\nsizes = [64]\nload = "bg30"\n')
    with pytest.raises(LatscopeError, match="load is for the simulated bench"):
        runner.load_experiment(bad)
