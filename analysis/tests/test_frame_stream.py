"""Frame captures are paired window by window (``analysis.frame_stream``, ``FramePlacer``): the
results do not depend on where the chunks of the file end, and equal the whole-capture pairing
(``analysis.frames.analyze_frames`` over every record at once)."""

import json
import pathlib

import numpy as np
import pytest

from latscope.analysis import api, frame_stream
from latscope.analysis.frames import analyze_frames
from latscope.analysis.marker_identity import edges_of_schedule, schedule
from latscope.capture.events import Events
from latscope.capture.files import capfile
from latscope.capture.files.frames import capture_placement
from latscope.gateware.codec import FLAGS, FRAME_DTYPE

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNDER_LOAD = ROOT / "fixtures/under-load/el-dm-64-bg90.lsc"
TICK_HZ = 100_000_000


def _perturbed_events():
    """The under-load fixture (200 requests of class hp, five marker channels) with what makes
    pairing hard: markers missing (rx.udp every 7th request: queued requests become ambiguous,
    tx.send every 11th), replies carrying another number (dropped requests and free replies), one
    reply repeating an answered number (a duplicate), one request with a bad FCS."""
    with capfile.open_capture(UNDER_LOAD) as cap:
        ev = cap.events()
        t, ch, r = np.array(ev.time), np.array(ev.channel), np.array(ev.rising)
        rec = cap.frames()[0].astype(FRAME_DTYPE)
        counters = cap.frame_counters().copy()
        meta = dict(cap.metadata)
    keep = np.ones(len(t), bool)
    for channel, every in ((5, 7), (7, 11)):      # m2 (rx.udp), m4 (tx.send)
        on = np.flatnonzero(ch == channel)
        rises = on[r[on]]
        for k in rises[::every]:
            keep[k] = False
            nxt = on[(on > k)]
            if len(nxt):
                keep[nxt[0]] = False          # its fall
    t, ch, r = t[keep], ch[keep], r[keep]
    tx = np.flatnonzero(rec["direction"] == 1)
    rec["seq"][tx[[20, 77, 150]]] += 1_000_000          # three requests get no reply
    rec["seq"][tx[120]] = rec["seq"][tx[119]]           # a second reply to an answered number
    rx = np.flatnonzero(rec["direction"] == 0)
    rec["flags"][rx[60]] ^= FLAGS["fcs_ok"]
    return meta, (t, ch, r), rec, counters


def _write(path, meta, events, rec, counters, *, chunk_events, frame_block):
    with capfile.CaptureWriter(path, meta, chunk_events=chunk_events, fsync=False) as w:
        for k in range(0, len(events[0]), chunk_events):
            w.append_events(*(col[k:k + chunk_events] for col in events))
        for k in range(0, len(rec), frame_block):
            w.append_frames(rec[k:k + frame_block])
        if counters is not None and len(counters):
            w.append_frame_counters(counters)
    return str(path)


def _whole(path):
    """The pairing over the whole capture at once: every record placed on every DV edge, every
    marker's rising edges (no channel of this capture carries identity codes)."""
    with capfile.open_capture(path) as cap:
        ev = cap.events()
        time, channel, rising = np.array(ev.time), np.array(ev.channel), np.array(ev.rising)
        placement = capture_placement(cap, Events(time, channel, rising))
        markers = {}
        for role, meaning in cap.markers.items():
            ch = next(int(c) for c, name in cap.channel_names.items() if name == role)
            markers[meaning] = time[(channel == ch) & rising]
        return analyze_frames(cap.frames()[0], placement.start, placement.end,
                              tick_hz=int(cap.tick_hz), markers=markers,
                              counters=cap.frame_counters(), reply_class="same")


def _class_figures(fa):
    """Per class: the counts, ambiguous and coalesced requests, and per stage n, percentiles,
    extremes and mean (the figures a user reads)."""
    out = {}
    for cls, c in fa.classes.items():
        d = c.to_dict()
        out[cls] = {k: d[k] for k in ("requests", "replied", "dropped", "unknown", "ambiguous",
                                      "coalesced", "duplicates", "reordered", "fcs_errors")}
        out[cls]["stats"] = {stage: {k: s[k] for k in ("n", "mean_ns", "min_ns", "max_ns",
                                                       "p50_ns", "p90_ns", "p99_ns", "p999_ns",
                                                       "p50_ci_ns", "p99_ci_ns", "counts")}
                             for stage, s in d["stats"].items()}
    return json.loads(json.dumps(out, default=str))


@pytest.fixture(scope="module")
def perturbed():
    return _perturbed_events()


def test_tiny_and_huge_windows_give_the_same_classes(perturbed, tmp_path):
    """The same capture written in chunks of 40 events and frame blocks of 3 records, and in one
    chunk and one block: identical per-class results, equal to the whole-capture pairing. The
    capture has ambiguous, dropped and duplicate requests, so each kind of open state crosses
    chunk boundaries many times."""
    meta, events, rec, counters = perturbed
    tiny = _write(tmp_path / "tiny.lsc", meta, events, rec, counters, chunk_events=40,
                  frame_block=3)
    with capfile.open_capture(tiny) as cap:
        assert len([c for c in cap.chunks if c.type == b"EVTS"]) > len(events[0]) // 40
    huge = _write(tmp_path / "huge.lsc", meta, events, rec, counters,
                  chunk_events=len(events[0]) + 1, frame_block=len(rec))
    a = api.analyze_file(tiny).result.frames
    b = api.analyze_file(huge).result.frames
    want = _whole(huge)
    c = want.classes[1]
    # the perturbation shows: each figure below is non-zero in the whole-capture pairing
    assert c.dropped + c.unknown == 4 and c.duplicates == 1 and c.fcs_errors == 1
    assert c.ambiguous.get("rx.udp") and c.stats["tx.send"].n < c.replied
    assert _class_figures(a) == _class_figures(b) == _class_figures(want)
    assert a.unplaced == b.unplaced == want.unplaced == 0
    assert a.reply_window_s == b.reply_window_s == want.reply_window_s


def test_stage_samples_are_those_of_the_whole_capture(perturbed, tmp_path):
    """With per-packet records, each class stage's latencies and their times are exactly the
    whole-capture pairing's, in the same order, however small the windows."""
    meta, events, rec, counters = perturbed
    path = _write(tmp_path / "tiny.lsc", meta, events, rec, counters, chunk_events=64,
                  frame_block=1)
    got = api.analyze_file(path, packets=True).result.frames
    want = _whole(path)
    for cls, report in want.classes.items():
        assert list(got.classes[cls].samples) == list(report.samples)
        for stage, (at, ticks) in report.samples.items():
            g_at, g_ticks = got.classes[cls].samples[stage]
            assert np.array_equal(g_at, at) and np.array_equal(g_ticks, ticks), stage


def _frame(rec, k, d, seq, index, length=10):
    rec[k]["direction"], rec[k]["cls"], rec[k]["seq"] = d, 1, seq
    rec[k]["flags"] = FLAGS["seq_valid"] | FLAGS["fcs_ok"] | FLAGS["udp"] | FLAGS["ipv4"]
    rec[k]["frame_index"], rec[k]["length"] = index, length


def test_reply_and_marker_in_the_next_window(tmp_path):
    """A request whose marker and reply arrive chunks after its frame ends (two events per
    chunk, one record per block) is paired with them: rx_dv [1,000, 1,100], its rx.udp marker at
    1,500 and its reply at 3,000 (all 10 ns ticks); the second request the same 9,000 later."""
    ev = []
    for base in (0, 9000):
        ev += [(base + 1000, 0, True), (base + 1100, 0, False),     # request
               (base + 1500, 5, True), (base + 1530, 5, False),     # its rx.udp marker
               (base + 3000, 1, True), (base + 3100, 1, False)]     # its reply
    t, ch, r = (np.array(x) for x in zip(*sorted(ev), strict=True))
    rec = np.zeros(4, FRAME_DTYPE)
    _frame(rec, 0, 0, 7, 0)
    _frame(rec, 1, 1, 7, 0)
    _frame(rec, 2, 0, 8, 1)
    _frame(rec, 3, 1, 8, 1)
    meta = {"tick_hz": TICK_HZ, "channels": {"0": "rx_dv", "1": "tx_en", "5": "m2"},
            "markers": {"m2": "rx.udp"}, "frames": {"classes": {"1": "hp"}}}
    path = _write(tmp_path / "edge.lsc", meta, (t, ch, r), rec, None, chunk_events=2,
                  frame_block=1)
    with capfile.open_capture(path) as cap:
        assert len([c for c in cap.chunks if c.type == b"EVTS"]) == 6
    a = api.analyze_file(path)
    e2e, udp = a.stats["node.e2e[hp]"], a.stats["rx.udp[hp]"]
    assert (e2e.n, e2e.min_ns, e2e.max_ns) == (2, 19_000.0, 19_000.0)   # 3,000 - 1,100 ticks
    assert (udp.n, udp.min_ns, udp.max_ns) == (2, 4_000.0, 4_000.0)     # 1,500 - 1,100 ticks
    assert a.result.frames.classes[1].dropped == 0


def _coded_capture(path, chunk_events):
    """40 rounds of two requests (classes 0 and 1) whose coded rx.udp markers come in the
    other order (test_marker_identity's overtaking, repeated 20,000 ticks apart)."""
    ev, rows = [], []
    for k in range(40):
        o = 20_000 * k
        s0, s1 = 2 * k + 10, 2 * k + 11
        rows += [(0, 0, s0, o + 900, o + 1000), (0, 1, s1, o + 1050, o + 1100),
                 (1, 1, s1, o + 4000, o + 4100), (1, 0, s0, o + 6000, o + 6100)]
        for at, seq in ((o + 3000, s1), (o + 5000, s0)):
            mt, mr = edges_of_schedule(*schedule(seq), unit=4, at=at)
            ev += [(int(x), 5, bool(y)) for x, y in zip(mt, mr, strict=True)]
    rec = np.zeros(len(rows), FRAME_DTYPE)
    index = [0, 0]
    for k, (d, cls, seq, start, end) in enumerate(rows):
        rec[k]["direction"], rec[k]["cls"], rec[k]["seq"] = d, cls, seq
        rec[k]["flags"] = FLAGS["seq_valid"] | FLAGS["fcs_ok"]
        rec[k]["frame_index"], rec[k]["length"] = index[d], 4
        index[d] += 1
        ev += [(start, d, True), (end, d, False)]
    order = np.argsort(rec["direction"], kind="stable")     # records of each direction in order
    t, ch, r = (np.array(x) for x in zip(*sorted(ev), strict=True))
    meta = {"tick_hz": TICK_HZ, "channels": {"0": "rx_dv", "1": "tx_en", "5": "m2"},
            "markers": {"m2": "rx.udp"}, "frames": {"classes": {"0": "bg", "1": "hp"}},
            "marker_identity": {"code": "lsid1", "markers": ["m2"]}}
    return _write(path, meta, (t, ch, r), rec[order], None, chunk_events=chunk_events,
                  frame_block=2)


@pytest.mark.parametrize("decide", [frame_stream.DECIDE, 4])
def test_identity_pairing_across_windows(tmp_path, monkeypatch, decide):
    """Coded markers pair by identity whatever the windows, whether the channel is found coded
    at the end of the capture or after its first few markers: seq 2k+10 (class bg) 4,000 ticks,
    2k+11 (hp) 1,900 ticks, every round."""
    monkeypatch.setattr(frame_stream, "DECIDE", decide)
    results = []
    for chunk in (7, 1 << 20):
        a = api.analyze_file(_coded_capture(tmp_path / f"id-{chunk}.lsc", chunk))
        bg, hp = a.stats["rx.udp[bg]"], a.stats["rx.udp[hp]"]
        assert (bg.n, bg.min_ns, bg.max_ns) == (40, 40_000.0, 40_000.0)
        assert (hp.n, hp.min_ns, hp.max_ns) == (40, 19_000.0, 19_000.0)
        results.append(_class_figures(a.result.frames))
    assert results[0] == results[1]


def test_a_shared_interrupt_in_a_later_window(tmp_path):
    """Two requests 300 ticks apart served by one rx.isr marker 200 ticks after the second
    (interrupt coalescing), then a lone one; two events per chunk, so the interrupt is two
    chunks after the first request. Both share it (coalesced 2), as the whole-capture pairing
    says, and so do the results read in one chunk."""
    ev = [(1000, 0, True), (1100, 0, False), (1300, 0, True), (1400, 0, False),
          (1600, 3, True), (1630, 3, False),                          # serves both
          (20000, 0, True), (20100, 0, False), (20500, 3, True), (20530, 3, False)]
    for base in (3000, 3500, 22000):
        ev += [(base, 1, True), (base + 100, 1, False)]
    t, ch, r = (np.array(x) for x in zip(*sorted(ev), strict=True))
    rec = np.zeros(6, FRAME_DTYPE)
    for k in range(3):
        _frame(rec, 2 * k, 0, 7 + k, k)
        _frame(rec, 2 * k + 1, 1, 7 + k, k)
    meta = {"tick_hz": TICK_HZ, "channels": {"0": "rx_dv", "1": "tx_en", "3": "m0"},
            "markers": {"m0": "rx.isr"}, "frames": {"classes": {"1": "hp"}}}
    results = []
    for chunk in (2, 100):
        path = _write(tmp_path / f"isr-{chunk}.lsc", meta, (t, ch, r), rec, None,
                      chunk_events=chunk, frame_block=1)
        fa = api.analyze_file(path).result.frames
        assert fa.classes[1].coalesced == {"rx.isr": 2}
        isr = fa.classes[1].stats["rx.isr"]
        assert (isr.n, isr.min_ns, isr.max_ns) == (3, 2_000.0, 5_000.0)   # 200, 500 ticks
        results.append(_class_figures(fa))
    assert results[0] == results[1] == _class_figures(_whole(path))


def test_an_unanswered_request_sharing_an_interrupt_is_ambiguous(tmp_path):
    """As above, but the first request is never answered (no reply on the wire: lost in the DUT,
    before or after its interrupt). Whether the interrupt after the second request served the
    first too the edges cannot tell, so the first request's rx.isr is ambiguous and left out;
    the second keeps it (coalesced 1), in one chunk and in chunks of two events alike, as the
    whole-capture pairing (``analyze_frames``) says."""
    ev = [(1000, 0, True), (1100, 0, False), (1300, 0, True), (1400, 0, False),
          (1600, 3, True), (1630, 3, False),                          # after both requests
          (20000, 0, True), (20100, 0, False), (20500, 3, True), (20530, 3, False)]
    for base in (3500, 22000):                                       # no reply to the first
        ev += [(base, 1, True), (base + 100, 1, False)]
    t, ch, r = (np.array(x) for x in zip(*sorted(ev), strict=True))
    rec = np.zeros(5, FRAME_DTYPE)
    for k in range(3):
        _frame(rec, k, 0, 7 + k, k)
    _frame(rec, 3, 1, 8, 0)
    _frame(rec, 4, 1, 9, 1)
    rec = rec[np.argsort([1000, 1300, 20000, 3500, 22000], kind="stable")]
    meta = {"tick_hz": TICK_HZ, "channels": {"0": "rx_dv", "1": "tx_en", "3": "m0"},
            "markers": {"m0": "rx.isr"}, "frames": {"classes": {"1": "hp"}}}
    results = []
    for chunk in (2, 100):
        path = _write(tmp_path / f"lost-{chunk}.lsc", meta, (t, ch, r), rec, None,
                      chunk_events=chunk, frame_block=1)
        hp = api.analyze_file(path).result.frames.classes[1]
        assert (hp.requests, hp.replied) == (3, 2)
        assert hp.ambiguous == {"rx.isr": 1} and hp.coalesced == {"rx.isr": 1}
        isr = hp.stats["rx.isr"]
        assert (isr.n, isr.min_ns, isr.max_ns) == (2, 2_000.0, 4_000.0)   # 200, 400 ticks
        results.append(_class_figures(api.analyze_file(path).result.frames))
    assert results[0] == results[1] == _class_figures(_whole(path))
