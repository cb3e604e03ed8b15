"""Marker meanings travel with every export (issue 9 item 1).

Reference: the analysis of the original capture. ``fixtures/bench/gem-64.lsc`` (simulated bench,
320 MHz ticks) has ``m3 = tx.xmit``, where the Zephyr app's default table says ``m3 = rx.fast``:
the case a user met (20,000 packets measured as the wrong stage, no warning). Each export
(sr at the tick rate, vcd, csv) is analysed directly and after ``latscope import``; every
figure of every measurement must equal the original's exactly (same ticks, same packets). The
VCD and CSV readers are checked against independent parsers too (pyvcd; Python's csv module).
"""

import json
import os

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import api
from latscope.capture.files import capfile
from latscope.capture.files.reimport import read_csv, read_vcd
from latscope.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "fixtures", "bench", "gem-64.lsc")


@pytest.fixture(scope="module")
def original():
    if not os.path.exists(FIXTURE):
        pytest.skip(f"{FIXTURE} absent")
    return api.analyze_file(FIXTURE)


def _figures(analysis):
    out = {}
    for name, s in analysis.stats.items():
        d = s.to_dict()
        d.pop("drift", None)        # window means depend on when the first packet started
        d.pop("warmup", None)
        d.pop("worst", None)
        out[name] = d
    return out


@pytest.mark.slow        # the .sr export holds 18.7 M samples
@pytest.mark.parametrize("fmt", ["sr", "vcd", "csv"])
def test_every_measurement_survives_export(tmp_path, original, fmt, capsys):
    assert original.metadata["marker_map"] == {"markers": {"m0": "rx.isr", "m1": "rx.copy",
                                                           "m2": "rx.udp", "m3": "tx.xmit",
                                                           "m4": "tx.send"},
                                               "source": "the capture"}
    assert original.stats["tx.xmit"].n == 1200 and "rx.fast" in original.result.unavailable
    exported = tmp_path / f"x.{fmt}"
    assert main(["export", FIXTURE, "-o", str(exported)]) == 0
    imported = tmp_path / "back.lsc"
    assert main(["import", str(exported), "-o", str(imported)]) == 0
    capsys.readouterr()
    with capfile.open_capture(imported) as cap:
        assert cap.markers["m3"] == "tx.xmit"
    for path in (exported, imported):
        again = api.analyze_file(str(path))
        assert again.metadata["marker_map"]["markers"]["m3"] == "tx.xmit"
        assert again.metadata["marker_map"]["source"] == "the capture"
        assert sorted(again.stats) == sorted(original.stats)
        assert again.result.unavailable == original.result.unavailable
        assert _figures(again) == _figures(original), path
    # the CLI says which map it used
    assert main(["analyze", str(exported)]) == 0
    assert "markers: m0=rx.isr, m1=rx.copy, m2=rx.udp, m3=tx.xmit, m4=tx.send (from the " \
           "capture)" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["vcd", "csv"])
def test_small_window_round_trip_every_event(tmp_path, fmt, capsys):
    # events, not just statistics: every edge inside the window comes back on its tick
    if not os.path.exists(FIXTURE):
        pytest.skip(f"{FIXTURE} absent")
    exported = tmp_path / f"w.{fmt}"
    assert main(["export", FIXTURE, "-o", str(exported), "--from", "1ms", "--to", "3ms"]) == 0
    capsys.readouterr()
    with capfile.open_capture(FIXTURE) as cap:
        ev = cap.events()
        lo, hi = int(np.ceil(1e-3 * 320e6)), int(3e-3 * 320e6)
        keep = (ev.time > lo) & (ev.time < hi)
        names = cap.channel_names
        expect = [(int(t), names[int(c)], bool(r)) for t, c, r in
                  zip(ev.time[keep], ev.channel[keep], ev.rising[keep], strict=True)]
        markers = cap.markers
    back = read_vcd(exported) if fmt == "vcd" else read_csv(exported)
    got = [(int(t), back.channel_names[int(c)], bool(r)) for t, c, r in
           zip(back.time, back.channel, back.rising, strict=True)]
    if fmt == "csv":        # CSV keeps the events at the window start too
        got = [e for e in got if e[0] > lo]
    assert got == expect
    assert back.tick_hz == 320_000_000 and back.markers == markers


def test_vcd_reader_agrees_with_pyvcd(tmp_path, capsys):
    vcd_reader = pytest.importorskip("vcd.reader")
    if not os.path.exists(FIXTURE):
        pytest.skip(f"{FIXTURE} absent")
    exported = tmp_path / "p.vcd"
    assert main(["export", FIXTURE, "-o", str(exported), "--to", "2ms"]) == 0
    capsys.readouterr()
    ours = read_vcd(exported)
    codes, changes, now, dumping = {}, [], None, False
    with open(exported, "rb") as f:
        for token in vcd_reader.tokenize(f):
            kind = token.kind
            if kind is vcd_reader.TokenKind.VAR:
                codes[token.var.id_code] = token.var.reference
            elif kind is vcd_reader.TokenKind.CHANGE_TIME:
                now = token.time_change
            elif kind is vcd_reader.TokenKind.DUMPVARS:
                dumping = True
            elif kind is vcd_reader.TokenKind.END:
                dumping = False
            elif kind is vcd_reader.TokenKind.CHANGE_SCALAR and not dumping:
                changes.append((now, codes[token.scalar_change.id_code],
                                token.scalar_change.value == "1"))
    # pyvcd gives times in the file's unit (1 ps here): 3125 ps per 320 MHz tick
    assert [(t // 3125, n, r) for t, n, r in changes] == \
        [(int(t), ours.channel_names[int(c)], bool(r))
         for t, c, r in zip(ours.time, ours.channel, ours.rising, strict=True)]


def test_csv_descriptor_is_a_comment_to_csv_readers(tmp_path, capsys):
    import csv
    if not os.path.exists(FIXTURE):
        pytest.skip(f"{FIXTURE} absent")
    exported = tmp_path / "c.csv"
    assert main(["export", FIXTURE, "-o", str(exported), "--to", "1ms"]) == 0
    capsys.readouterr()
    with open(exported, newline="") as f:
        first = f.readline()
        rows = list(csv.reader(f))
    assert first.startswith("# latscope {")
    descriptor = json.loads(first[len("# latscope "):])
    assert descriptor["markers"]["m3"] == "tx.xmit" and descriptor["tick_hz"] == 320_000_000
    assert rows[0] == ["time_ns", "channel", "edge"] and len(rows) > 1


def _capture_without_markers(path):
    # marker channels named m0..m4 and no meanings: what a capture without a config records
    t = np.array([0, 100, 130, 200, 1000, 1100, 1150, 1300], np.int64)
    c = np.array([0, 0, 6, 6, 0, 0, 6, 6], np.uint8)
    r = np.array([1, 0, 1, 0, 1, 0, 1, 0], bool)
    names = {str(k): v for k, v in {0: "rx_dv", 1: "tx_en", 6: "m3"}.items()}
    with capfile.CaptureWriter(path, {"tick_hz": 100_000_000, "channels": names},
                               fsync=False) as w:
        w.append_events(t, c, r)


def test_ambiguous_markers_are_refused_until_markers_settles_them(tmp_path, capsys):
    path = tmp_path / "nomarkers.lsc"
    _capture_without_markers(path)
    with pytest.raises(LatscopeError, match=r"does not say what its marker channel\(s\) m3 "
                                            r"mean.*give them with --markers"):
        api.analyze_file(str(path))
    assert main(["analyze", str(path)]) == 2
    assert "--markers" in capsys.readouterr().err
    a = api.analyze_file(str(path), markers="m3=rx.isr")
    assert a.stats["rx.isr"].n == 2 and a.stats["rx.isr"].min_ns == 300.0
    assert a.metadata["marker_map"] == {"markers": {"m3": "rx.isr"}, "source": "--markers"}
    assert main(["analyze", str(path), "--markers", "m3=rx.isr"]) == 0
    assert "markers: m3=rx.isr (from --markers)" in capsys.readouterr().out
    with pytest.raises(LatscopeError, match="--markers names m7, which the capture does not"):
        api.analyze_file(str(path), markers="m7=rx.isr")
    # the Zephyr app's table, asked for by name, is a choice, not a silent fallback
    b = api.analyze_file(str(path), markers="default")
    assert b.metadata["marker_map"]["markers"] == {"m3": "rx.fast"}
