"""Provenance travels (``latscope.capture.files.provenance``): a simulated capture exported to
``.sr``, ``.vcd``, ``.csv`` and pcapng says so in each file, and imported back it is still
simulated, from the same profile, seed and label, with the export and the import in its history.

Reference: ``fixtures/bench/gem-64.lsc``, made by the simulated bench (profile gem-64, seed 0,
its metadata's ``simbench`` and ``instrument.simulated``). Each file is also read by a reader
that is not latscope's where one is installed (Python's ``configparser`` for the ``.sr``
metadata, pyvcd, Python's ``csv``, the pcapng block layout read by hand from the spec).
"""

import configparser
import csv
import json
import os
import shutil
import struct
import subprocess
import zipfile

import numpy as np
import pytest

from latscope.capture.files import capfile
from latscope.capture.files.interop import export_csv, make_window
from latscope.capture.files.provenance import KEYS, parse, provenance
from latscope.capture.files.reimport import import_export
from latscope.capture.files.sigrok_import import import_sr
from latscope.capture.files.sigrok_write import export_sr
from latscope.capture.files.vcd import export_vcd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "fixtures", "bench", "gem-64.lsc")


@pytest.fixture(scope="module")
def simulated():
    if not os.path.exists(FIXTURE):
        pytest.skip(f"{FIXTURE} absent")
    with capfile.open_capture(FIXTURE) as cap:
        prov = provenance(cap.metadata)
    assert prov["data"] == "simulated" and prov["simulated"] is True
    assert (prov["profile"], prov["seed"], prov["label"]) == ("gem-64", 0, "gem-64")
    assert prov["command"] == "capture --sim" and prov["history"] == []
    return prov


def _export(fmt, out):
    with capfile.open_capture(FIXTURE) as cap:
        tick = int(cap.tick_hz)
        first = cap.first_time
        # 1 ms of the capture: the .sr stays small (320,000 samples)
        window = make_window(cap, first, first + tick // 1000, None)
        if fmt == "sr":
            export_sr(window, out, tick)
        elif fmt == "vcd":
            export_vcd(window, out)
        else:
            export_csv(window, out)


def _stored_in(fmt, path):
    """The provenance object as a reader other than latscope's finds it in the file."""
    if fmt == "sr":
        with zipfile.ZipFile(path) as archive:
            text = archive.read("metadata").decode()
        ini = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",))
        ini.read_string(text)
        return json.loads(ini["latscope"]["provenance"])
    if fmt == "vcd":
        reader = pytest.importorskip("vcd.reader", reason="pyvcd reads the VCD (pip: pyvcd)")
        with open(path, "rb") as handle:
            comments = [t.data for t in reader.tokenize(handle)
                        if t.kind is reader.TokenKind.COMMENT]
        tagged = [c for c in comments if c.strip().startswith("latscope {")]
        return json.loads(tagged[0].strip()[len("latscope "):])["provenance"]
    with open(path, newline="") as handle:
        first = next(csv.reader(handle))
    line = ",".join(first)
    assert line.startswith("# latscope {")
    return json.loads(line[len("# latscope "):])["provenance"]


@pytest.mark.parametrize("fmt", ["sr", "vcd", "csv"])
def test_a_simulated_capture_stays_simulated_through_export_and_import(tmp_path, simulated,
                                                                       fmt):
    exported = tmp_path / f"win.{fmt}"
    _export(fmt, exported)
    stored = _stored_in(fmt, exported)
    assert stored["data"] == "simulated" and stored["simulated"] is True
    assert (stored["profile"], stored["seed"]) == ("gem-64", 0)
    assert stored["history"][-1]["step"] == f"export {fmt}"
    assert stored["history"][-1]["from"] == "gem-64.lsc"

    back = tmp_path / "back.lsc"
    if fmt == "sr":
        import_sr(exported, back)
    else:
        import_export(exported, back)
    with capfile.open_capture(back) as cap:
        meta = cap.metadata
    assert meta["simulated"] is True
    for key in ("label", "dut", "scenario", "start_time"):
        assert meta[key] == simulated[key]
    prov = provenance(meta)
    assert set(prov) == set(KEYS)
    assert prov["data"] == "simulated" and prov["simulated"] is True
    for key in ("tool", "command", "profile", "seed", "engine", "label", "dut"):
        assert prov[key] == simulated[key]
    assert [s["step"] for s in prov["history"]] == [f"export {fmt}", "import"]
    assert prov["history"][-1]["from"] == f"win.{fmt}"


def test_the_chain_grows_with_every_round_trip(tmp_path, simulated):
    _export("csv", tmp_path / "a.csv")
    import_export(tmp_path / "a.csv", tmp_path / "a.lsc")
    with capfile.open_capture(tmp_path / "a.lsc") as cap:
        window = make_window(cap, None, None, None)
        export_vcd(window, tmp_path / "b.vcd")
    import_export(tmp_path / "b.vcd", tmp_path / "b.lsc")
    with capfile.open_capture(tmp_path / "b.lsc") as cap:
        prov = provenance(cap.metadata)
    assert prov["simulated"] and prov["profile"] == "gem-64"
    assert [s["step"] for s in prov["history"]] == ["export csv", "import", "export vcd",
                                                    "import"]


def test_a_foreign_file_is_measured_and_named(tmp_path):
    vcd = tmp_path / "analyser.vcd"
    vcd.write_text("$timescale 1ns $end\n$var wire 1 ! rx_dv $end\n$enddefinitions $end\n"
                   "#0\n$dumpvars\n0!\n$end\n#10\n1!\n#20\n0!\n")
    import_export(vcd, tmp_path / "x.lsc", tick_hz=1_000_000_000)
    with capfile.open_capture(tmp_path / "x.lsc") as cap:
        prov = provenance(cap.metadata)
        assert "simulated" not in cap.metadata
    assert prov["data"] == "measured" and not prov["simulated"]
    assert prov["source_file"] == "analyser.vcd" and prov["command"] == "import"


def test_a_damaged_provenance_object_is_not_trusted():
    assert parse({"data": "made up", "simulated": False}) is None
    assert parse({"data": "measured"}) is None
    assert parse("simulated") is None
    good = parse({"data": "simulated", "simulated": True, "history": []})
    assert good["data"] == "simulated" and set(good) == set(KEYS)


def test_sigrok_cli_reads_an_export_with_provenance(tmp_path, simulated):
    """sigrok ignores the [latscope] group: the file stays a valid session for sigrok-cli."""
    if shutil.which("sigrok-cli") is None:
        pytest.skip("sigrok-cli is not installed (apt-get install sigrok-cli)")
    out = tmp_path / "win.sr"
    _export("sr", out)
    result = subprocess.run(["sigrok-cli", "-i", str(out), "--show"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "samplerate" in result.stdout.lower()


def _pcapng_section_comments(data):
    """opt_comment values (option code 1) of the first Section Header Block, read from the
    layout in draft-ietf-opsawg-pcapng §4.1 (type, length, byte-order magic, version, section
    length, then options)."""
    block_type, length, magic = struct.unpack_from("<III", data, 0)
    assert block_type == 0x0A0D0D0A and magic == 0x1A2B3C4D
    offset, end, comments = 24, length - 4, []
    while offset < end:
        code, size = struct.unpack_from("<HH", data, offset)
        if code == 0:
            break
        if code == 1:
            comments.append(data[offset + 4:offset + 4 + size].decode())
        offset += 4 + size + (-size) % 4
    return comments


def test_pcapng_says_where_its_frames_came_from(tmp_path):
    from latscope.capture.files.pcapng import PROVENANCE_TAG, export_pcapng
    from latscope.gateware.codec import FLAGS, FRAME_DTYPE
    path = tmp_path / "frames.lsc"
    meta = {"tick_hz": 100_000_000, "channels": {"0": "rx_dv"}, "label": "sim-frames",
            "simbench": {"profile": "gem-64", "seed": 5},
            "instrument": {"simulated": True, "engine": "model"}}
    records = np.zeros(2, FRAME_DTYPE)
    records["frame_index"] = [0, 1]
    records["length"] = 64
    records["flags"] = FLAGS["fcs_ok"]
    with capfile.CaptureWriter(path, meta, fsync=False) as writer:
        writer.append_events([100, 676, 1000, 1576], [0, 0, 0, 0], [1, 0, 1, 0])
        writer.append_frames(records)
    out = tmp_path / "frames.pcapng"
    with capfile.open_capture(path) as cap:
        summary = export_pcapng(cap, out)
    assert summary.packets == 2
    comments = [c for c in _pcapng_section_comments(out.read_bytes())
                if c.startswith(PROVENANCE_TAG + " ")]
    stored = json.loads(comments[0][len(PROVENANCE_TAG) + 1:])
    assert stored["data"] == "simulated" and (stored["profile"], stored["seed"]) == ("gem-64", 5)
    assert stored["history"][-1] == {"step": "export pcapng", "from": "frames.lsc",
                                     "tool": stored["history"][-1]["tool"]}
    scapy_utils = pytest.importorskip("scapy.utils", reason="scapy reads pcapng (pip: scapy)")
    assert len(scapy_utils.rdpcap(str(out))) == 2        # the comment keeps the file readable


def test_info_says_what_the_events_are(tmp_path, simulated):
    from latscope.capture.files.info import info_dict
    _export("csv", tmp_path / "w.csv")
    import_export(tmp_path / "w.csv", tmp_path / "back.lsc")
    info = info_dict(tmp_path / "back.lsc")
    assert info["provenance"]["data"] == "simulated" and info["metadata_from"] == "META"
    assert info["provenance"]["profile"] == "gem-64"
    json.dumps(info, default=str)           # what info --json prints
