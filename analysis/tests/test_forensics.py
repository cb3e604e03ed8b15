"""Tail forensics (:mod:`latscope.analysis.forensics`): which packets, their windows, the queue
ahead of them and the frames on the wire. Expected values are worked out by hand from the
arrays each test builds."""

import pathlib
from fractions import Fraction

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import api
from latscope.analysis.forensics import (
    FrameRecords,
    explain,
    format_forensics,
    frames_summary,
    slowest,
)

NAMES = ["rx_dv", "tx_en", "crs_dv", "m0"]


def _edges(events):
    events = sorted(events)
    return (np.array([e[0] for e in events]), np.array([e[1] for e in events]),
            np.array([e[2] for e in events], dtype=bool))


def test_a_queued_request_and_the_frames_before_it():
    # requests end at 0, 1000 and 1200 ticks (1 ns each); the second's interrupt is late
    # (700), so the third arrives while the second is still in flight; a reply goes out
    # between 300 and 400
    start = np.array([0, 1000, 1200])
    latency = np.array([100, 700, 600])
    events = [(-80, 0, True), (0, 0, False), (100, 3, True),
              (300, 1, True), (400, 1, False),
              (920, 0, True), (1000, 0, False), (1120, 0, True), (1200, 0, False),
              (1700, 3, True), (1800, 3, True)]
    f = explain(start, latency, *_edges(events), tick_hz=1_000_000_000, channel_names=NAMES,
                measurement="rx.isr", top=2, before_ns=800)
    assert [p.packet for p in f.packets] == [1, 2]
    slow = f.packets[0]
    assert slow.latency_ns == 700.0 and slow.queued == 0 and slow.rank == 1
    assert f.packets[1].queued == 1            # packet 1 (stop 1700) is still in flight at 1200
    # window [1000 - 800, 1700]: the reply on the wire, its own frame, the next one
    assert [(w.direction, w.start_ns, w.duration_ns) for w in slow.frames] == \
        [("tx", -700.0, 100.0), ("rx", -80.0, 80.0), ("rx", 120.0, 80.0)]
    assert slow.events[-1].t_ns == 700.0 and slow.events[-1].channel == "m0"
    assert slow.faster_fraction == pytest.approx(2 / 3)
    assert f.p999_ns is None and not slow.beyond_p999      # 3 packets: no p99.9
    text = format_forensics(f)
    assert "#1 packet 1" in text and "1 earlier request(s) still queued" in text


def test_every_packet_beyond_p999_is_explained():
    rng = np.random.default_rng(1)
    latency = rng.integers(100, 200, 5000)
    latency[[7, 70, 700, 4000, 4500, 4999]] = [900, 950, 990, 1000, 1010, 1020]
    start = np.arange(5000) * 10_000
    time = np.sort(np.concatenate([start, start + latency]))
    channel = np.zeros(len(time), dtype=np.int64)
    rising = np.zeros(len(time), dtype=bool)
    f = explain(start, latency, time, channel, rising, tick_hz=1_000_000_000,
                channel_names=NAMES, measurement="rx.isr", top=2)
    # p99.9 of 5,000 is the 4,995th smallest value: the six set above are the largest, so it
    # is 900, and 950, 990, 1000, 1010, 1020 lie beyond it
    assert f.p999_ns == 900.0
    assert [p.packet for p in f.packets] == [4999, 4500, 4000, 700, 70]
    assert all(p.beyond_p999 for p in f.packets)
    assert slowest(latency, 2).tolist() == [4999, 4500]


def test_bad_requests_are_refused():
    with pytest.raises(LatscopeError, match="positive integer, not 0"):
        explain([0], [1], [0], [0], [False], tick_hz=1, channel_names=NAMES, measurement="x",
                top=0)
    with pytest.raises(LatscopeError, match="at least one measured packet"):
        explain([0], [-1], [0], [0], [False], tick_hz=1, channel_names=NAMES, measurement="x")


UNDER_LOAD = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "under-load"


@pytest.mark.skipif(not (UNDER_LOAD / "el-dm-64-bg90.lsc").exists(),
                    reason="fixtures/under-load is not present")
def test_api_explains_a_class_stage_from_the_capture():
    """api.explain reads the capture again: the slowest rx.udp[hp] request is the stage's
    maximum, its window holds its own frame's end at 0 and its marker at its latency."""
    a = api.load(str(UNDER_LOAD / "el-dm-64-bg90.lsc"))
    f = api.explain(a, "rx.udp[hp]", top=2)
    s = a.stats["rx.udp[hp]"]
    assert f.n == s.n and f.packets[0].latency_ns == s.max_ns
    own = f.packets[0].events
    assert any(e.t_ns == 0 and e.channel == "rx_dv" and not e.rising for e in own)
    assert own[-1].channel == "rx.udp" and own[-1].t_ns == pytest.approx(s.max_ns)
    with pytest.raises(LatscopeError, match="Measurement to explain must be"):
        api.explain(a, "rx.nothing")


def test_frames_on_the_wire_carry_class_and_size_from_their_records():
    # the packet's own request (rx, ends at 0), a background frame before it that the capture
    # counts but does not record, and a reply of another request on the transmit side
    start, latency = np.array([1000]), np.array([500])
    events = [(100, 0, True), (600, 0, False),          # rx, unrecorded, 500 ns
              (700, 1, True), (780, 1, False),          # tx hp, 60 B
              (900, 0, True), (1000, 0, False),         # rx hp, its own, 68 B
              (1500, 3, True)]
    records = FrameRecords(start=np.array([700, 900, -1]), direction=np.array([1, 0, 0]),
                           cls=np.array(["hp", "hp", "hp"], dtype=object),
                           length=np.array([60, 68, 64]), unrecorded="unrecorded (bg)")
    f = explain(start, latency, *_edges(events), tick_hz=1_000_000_000, channel_names=NAMES,
                measurement="rx.isr", top=1, before_ns=1000, records=records)
    p = f.packets[0]
    assert [(w.direction, w.cls, w.length, w.own) for w in p.frames] == [
        ("rx", None, None, False), ("tx", "hp", 60, False), ("rx", "hp", 68, True)]
    assert frames_summary(p, f.unrecorded) == "rx unrecorded (bg) 0.500 µs ×1; tx hp 60 B ×1"
    text = format_forensics(f)
    assert "other frames on the wire: rx unrecorded (bg) 0.500 µs ×1; tx hp 60 B ×1" in text
    assert "-0.100  rx_dv rising  (its own frame: rx hp 68 B)" in text
    assert "-0.300  tx_en rising  (frame tx hp 60 B)" in text
    # without records the frames are still listed, by duration
    bare = explain(start, latency, *_edges(events), tick_hz=1_000_000_000, channel_names=NAMES,
                   measurement="rx.isr", top=1, before_ns=1000)
    assert frames_summary(bare.packets[0]) == "rx 0.500 µs ×1; tx 0.080 µs ×1"


@pytest.mark.slow
def test_api_names_the_frames_of_a_capture_under_load(tmp_path):
    """A capture under background load (the demo's): every recorded frame in a slow packet's
    window is named by its class and length (the hp requests are 64 B UDP payloads: 68 B on
    the wire per the simulated bench's profile), the background frames as unrecorded."""
    demo_load = pytest.importorskip("latscope.capture.sim.demo_load")
    row = demo_load.capture_under_load("el-dm-64", str(tmp_path), packets=100)
    a = api.load(row["path"])
    f = api.explain(a, "rx.udp[hp]", top=5)
    assert f.unrecorded == "unrecorded (other/bg)"
    frames = [w for p in f.packets for w in p.frames]
    own = [w for w in frames if w.own]
    assert len(own) == 5 and all(w.cls == "hp" and w.length == 68 for w in own)
    assert all(w.cls in ("hp", None) for w in frames)
    assert any(w.cls is None and w.direction == "rx" for w in frames)   # background load
    # --from/--to on a frame capture: the requests whose frame starts in the window, no others
    # (the records are placed against every DV edge of the capture, then kept by their start).
    # The requests come in queued bursts: the window's bounds are put in the middle of the
    # quiet gaps after the 3rd and the 8th burst, so every request of bursts 4..8 has its
    # frame, markers and reply inside it and no other request has any
    table = next(t for t in a.result.packets if "rx.udp[hp]" in t.latency)
    ends = np.sort(table.start[table.latency["rx.udp[hp]"] >= 0])
    whole = len(ends)
    gaps = np.flatnonzero(np.diff(ends) > 4 * np.median(np.diff(ends)))
    assert len(gaps) >= 8, gaps
    lo = (int(ends[gaps[2]]) + int(ends[gaps[2] + 1])) // 2
    hi = (int(ends[gaps[7]]) + int(ends[gaps[7] + 1])) // 2
    tick_hz = a.result.tick_hz
    cut = api.analyze_file(row["path"], packets=True, start_s=Fraction(lo, tick_hz),
                           stop_s=Fraction(hi, tick_hz))
    inside = ends[(ends >= lo) & (ends < hi)]
    got = next(t for t in cut.result.packets if "rx.udp[hp]" in t.latency)
    assert sorted(got.start[got.latency["rx.udp[hp]"] >= 0]) == sorted(inside)
    assert cut.stats["rx.udp[hp]"].n == len(inside) < whole
    assert cut.result.frames.unplaced == 0 and cut.metadata["window"]["start_tick"] == lo


def test_a_frame_the_window_cuts_is_completed_from_the_edges_beyond_it():
    # window [200, 1500] ns (before_ns 800 of the start 1000, to the stop 1500): a background
    # frame from 100 to 300 opens inside it, one from 1400 to 1900 is still on the wire at
    # the stop; both get their whole duration, and the one with a record its class and size
    start, latency = np.array([1000]), np.array([500])
    events = [(100, 0, True), (300, 0, False), (900, 0, True), (1000, 0, False),
              (1400, 0, True), (1500, 3, True), (1900, 0, False)]
    records = FrameRecords(start=np.array([100]), direction=np.array([0]),
                           cls=np.array(["bg"], dtype=object), length=np.array([1500]))
    f = explain(start, latency, *_edges(events), tick_hz=1_000_000_000, channel_names=NAMES,
                measurement="rx.isr", top=1, before_ns=800, records=records)
    assert [(w.start_ns, w.duration_ns, w.cls, w.length, w.own) for w in f.packets[0].frames] \
        == [(-900.0, 200.0, "bg", 1500, False), (-100.0, 100.0, None, None, True),
            (400.0, 500.0, None, None, False)]
    assert frames_summary(f.packets[0]) == "rx bg 1500 B ×1, rx 0.500 µs ×1"
