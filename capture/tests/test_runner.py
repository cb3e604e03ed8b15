"""latscope run and the DUT control client. The control vectors are shared with the C core's
ctest (zephyr-app/lib/latscope_core/tests/control_vectors.txt, written by hand from the spec)."""

import json
from pathlib import Path

import pytest
from latscope.capture import runner

from latscope import LatscopeError

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
            assert body[0] == 9 and int.from_bytes(body[1 + 4 * 6:1 + 4 * 7], "big") == 10
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
    with pytest.raises(LatscopeError, match="no such experiment file"):
        runner.load_experiment(tmp_path / "missing.toml")


def test_sim_matrix(tmp_path):
    pytest.importorskip("latscope.capture.simbench", reason="simulated bench not present yet")
    f = tmp_path / "exp.toml"
    f.write_text('name = "t"\ntarget = "sim"\npaths = ["gem", "fast-track"]\nsizes = [64, 256]\n'
                 'packets = 20\nengine = "model"\n')
    from latscope.capture.capfile import open_capture

    from latscope.cli import main
    assert main(["run", str(f), "-o", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert [(c["path"], c["size"]) for c in summary["cells"]] == \
        [("gem", 64), ("gem", 256), ("fast-track", 64), ("fast-track", 256)]
    for cell in summary["cells"]:
        with open_capture(tmp_path / "out" / cell["capture"]) as cap:
            events = cap.events()
            assert cell["ok"] and len(events[0]) > 0
