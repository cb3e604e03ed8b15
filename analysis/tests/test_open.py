"""One reader, one pass: :func:`latscope.analysis.api.analyze_file` opens each file once through
:func:`latscope.capture.files.open.open_events`, reads its events in one pass without ever holding
the whole capture, and the chunked results equal the whole-file results exactly (``==`` on every
figure, frame captures included)."""

import json
from pathlib import Path

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import api, file_pass
from latscope.analysis.definitions import default_definitions, resolve_channel, resolve_markers
from latscope.analysis.engine import analyze_events
from latscope.analysis.frames import analyze_frames
from latscope.analysis.sigrokref import write_sr
from latscope.capture.events import Events
from latscope.capture.files import capfile
from latscope.capture.files.frames import capture_placement
from latscope.capture.files.open import open_events
from latscope.cli import main

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "fixtures/bench/gem-64.lsc"                 # 12 EVTS chunks
FRAMES = ROOT / "fixtures/under-load/el-dm-64-bg60.lsc"     # 15 EVTS chunks, 400 frame records
PROBES = {0: "rx_dv", 1: "tx_en", 3: "m_isr", 4: "m_copy", 5: "m_udp", 6: "m_xmit", 7: "m_send"}


@pytest.fixture
def reads(monkeypatch):
    """Every open_events call the API makes: ``{"path", "passes", "events", "n_events"}``; and
    reading a whole capture into memory (``Capture.events``) fails the test."""
    calls = []

    def counting(path, mapping=None):
        source = open_events(path, mapping)
        entry = {"path": str(path), "passes": 0, "events": 0, "n_events": source.info.n_events}
        calls.append(entry)
        whole = source.chunks

        def chunks(channels=None):
            entry["passes"] += 1
            for chunk in whole(channels):
                entry["events"] += len(chunk.time)
                yield chunk
        source.chunks = chunks
        return source

    def whole_capture(self):
        raise AssertionError("the analysis read a whole capture into memory")
    monkeypatch.setattr(api, "open_events", counting)
    monkeypatch.setattr(capfile.Capture, "events", whole_capture)
    return calls


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """gem-64 as .vcd, .csv (latscope export) and .sr (probes named by role)."""
    out = tmp_path_factory.mktemp("exports")
    paths = {}
    for fmt in ("vcd", "csv"):
        paths[fmt] = out / f"gem.{fmt}"
        assert main(["export", "--format", fmt, "-o", str(paths[fmt]), str(PLAIN)]) == 0
    with capfile.open_capture(PLAIN) as cap:
        ev = cap.events()
        paths["sr"] = out / "gem.sr"
        write_sr(str(paths["sr"]), [(np.array(ev.time), np.array(ev.channel),
                                     np.array(ev.rising))],
                 samplerate=int(cap.tick_hz), probes=PROBES)
    return paths


@pytest.mark.parametrize("which", ["plain", "frames", "vcd", "csv", "sr"])
def test_each_file_is_opened_once_and_read_in_one_pass(which, reads, exports):
    path = {"plain": PLAIN, "frames": FRAMES}.get(which) or exports[which]
    a = api.analyze_file(path, packets=True)
    assert [c["path"] for c in reads] == [str(path)]
    assert reads[0]["passes"] == 1
    if reads[0]["n_events"] is not None:             # .sr: events are decoded, not stored
        assert reads[0]["events"] == reads[0]["n_events"] == a.result.events


def _whole_file(path):
    """The analysis as it was made before the one reader: every event in memory at once, the
    frame records placed on all events (``capture_placement(cap, events)``)."""
    with capfile.open_capture(path) as cap:
        ev = cap.events()
        time, channel, rising = np.array(ev.time), np.array(ev.channel), np.array(ev.rising)
        names, note = api.rx_valid_names(cap.channel_names, [(channel, rising)])
        marker_map = resolve_markers(default_definitions(), names, cap.markers, None)
        metadata = dict(cap.metadata, rx_valid=note) if note else cap.metadata
        result = analyze_events(time, channel, rising, tick_hz=cap.tick_hz, channel_names=names,
                                markers=marker_map.markers, losses=cap.losses,
                                keep_packets=True, metadata=metadata)
        fa = None
        if cap.n_frames:
            records, _ = cap.frames()
            placement = capture_placement(cap, Events(time, channel, rising))
            markers = {}
            for role, meaning in marker_map.markers.items():
                ch = resolve_channel(role, cap.channel_names, marker_map.markers)
                if ch is not None:
                    markers[meaning] = time[(channel == ch) & rising]
            fa = analyze_frames(records, placement.start, placement.end,
                                tick_hz=result.tick_hz, markers=markers,
                                counters=cap.frame_counters(),
                                losses=[(r.first_time, r.span) for r in cap.losses],
                                reply_class=file_pass.reply_class(cap.metadata))
    return result, fa


def _text(value):
    return json.dumps(value, sort_keys=True, default=str)


@pytest.mark.parametrize("path", [PLAIN, FRAMES], ids=["plain", "frames"])
def test_chunked_results_equal_whole_file_results(path):
    whole, whole_frames = _whole_file(path)
    chunked = api.analyze_file(path, packets=True).result
    assert chunked.events == whole.events
    for name, stats in whole.stats.items():
        assert _text(chunked.stats[name].to_dict()) == _text(stats.to_dict()), name
    for table, ref in zip(chunked.packets, whole.packets, strict=False):
        assert table.start_edge == ref.start_edge
        assert np.array_equal(table.start, ref.start)
        for name in ref.latency:
            assert np.array_equal(table.latency[name], ref.latency[name])
            assert np.array_equal(table.status[name], ref.status[name])
    if whole_frames is None:
        assert getattr(chunked, "frames", None) is None
    else:
        assert len(whole_frames.classes) > 0
        assert _text(chunked.frames.to_dict()) == _text(whole_frames.to_dict())
        for cls, report in whole_frames.classes.items():
            for stage, (at, ticks) in report.samples.items():
                got_at, got_ticks = chunked.frames.classes[cls].samples[stage]
                assert np.array_equal(got_at, at) and np.array_equal(got_ticks, ticks)


def test_reader_parses_the_metadata(tmp_path):
    """The offsets, origin and frame records are parsed fields of what the reader returns."""
    path = tmp_path / "cal.lsc"
    with capfile.CaptureWriter(path, {"tick_hz": 1000, "channels": {"0": "rx_dv"},
                                      "channel_offsets_ticks": [3, -1],
                                      "simbench": {"profile": "gem-64"}}) as w:
        w.append_events([1, 2, 3], [0, 0, 0], [True, False, True])
    with open_events(path) as source:
        info = source.info
        assert info.channel_offsets.tolist() == [3, -1]
        assert info.origin == "simulated"
        assert info.frames is None and info.integrity["finalised"]
        assert [c.time.tolist() for c in source.chunks()] == [[1, 2, 3]]
    with open_events(FRAMES) as source:
        assert len(source.info.frames) == 400
        assert source.info.frame_counters is not None


def test_missing_file_is_one_error_line(tmp_path):
    with pytest.raises(LatscopeError, match="no such file"):
        open_events(tmp_path / "nothing.lsc")


def test_compare_reads_each_file_once(reads, capsys):
    """``latscope compare`` analyses each input once: one open, one pass per file."""
    paths = [str(PLAIN), str(FRAMES)]
    assert main(["compare", *paths]) == 0
    assert sorted(c["path"] for c in reads) == sorted(paths)
    assert all(c["passes"] == 1 and c["events"] == c["n_events"] for c in reads)
    assert "comparison" in capsys.readouterr().out.lower()
