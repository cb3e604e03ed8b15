"""The engine against ground truth: the simulated bench's per-packet latencies, synthetic streams,
losses, chunking, capture files."""

import glob
import math
from fractions import Fraction

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis import api
from latscope.analysis.definitions import default_definitions, parse_definitions
from latscope.analysis.engine import Analyzer, analyze_chunks, analyze_events
from latscope.analysis.pairing import OK
from latscope.analysis.stats import PERCENTILES
from latscope.analysis.synth import synthetic_chunks, synthetic_events
from latscope.capture.events import LossRecord

simbench = pytest.importorskip("latscope.capture.sim.simbench")
capfile = pytest.importorskip("latscope.capture.files.capfile")

def order_statistic(values, percent):
    """The ceil(q n)-th smallest value, with q n computed exactly (NumPy's inverted_cdf computes
    99.9 / 100 * 4000 as 3996.0000000000005 and takes the 3997th)."""
    n = len(values)
    rank = max(1, math.ceil(Fraction(str(percent)) / 100 * n))
    return np.sort(values)[rank - 1]


ROLES = {i: r for i, r in enumerate(("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4"))}


def _write_capture(path, run, losses=(), **extra):
    t = run.truth
    meta = {"tick_hz": run.meta["tick_hz"], "channels": {str(k): v for k, v in ROLES.items()},
            "markers": run.meta["markers"], "config": run.meta["profile"],
            "frame_bytes": run.meta["frame_bytes"], **extra}
    with capfile.CaptureWriter(path, meta, fsync=False, chunk_events=997) as w:
        w.append_events(t["time"], t["channel"], t["rising"])
        for loss in losses:
            w.append_loss(LossRecord(*loss))
    run.save_truth(path)
    return path


@pytest.mark.parametrize("profile", ["gem-64", "el-dm-256", "fast-track-64"])
def test_simulated_bench_ground_truth(profile):
    """Every per-packet latency equals the bench's truth in ticks (so within one bin of the true
    ns value), and every percentile's interval holds the true latencies' percentile."""
    run = simbench.simulate(profile, 4000, seed=11)
    t = run.truth
    r = analyze_events(t["time"], t["channel"], t["rising"], tick_hz=run.meta["tick_hz"],
                       markers=run.meta["markers"], keep_packets=True)
    tick_ns = 1e9 / run.meta["tick_hz"]
    seen = set()
    for table in r.packets:
        for name, lat in table.latency.items():
            seen.add(name)
            assert np.all(table.status[name] == OK)
            assert np.array_equal(lat, t[f"ticks/{name}"])
            assert np.all(np.abs(lat * tick_ns - t[f"stage/{name}"]) <= tick_ns)
    assert seen == set(run.meta["stages"])
    for name in seen:
        s = r.stats[name]
        true_ns = np.sort(t[f"stage/{name}"])
        for p in PERCENTILES:
            q = s.quantiles[p]
            true_q = order_statistic(true_ns, p)
            # the reported value is the true sample percentile quantised to a tick
            assert abs(q.value_ns - true_q) <= tick_ns
            lo = -np.inf if q.lower_ns is None else q.lower_ns - tick_ns
            hi = np.inf if q.upper_ns is None else q.upper_ns + tick_ns
            assert lo <= true_q <= hi
        assert s.counts["missed"] == s.counts["spurious"] == 0


def test_capture_file_and_chunks_equal_in_memory(tmp_path):
    run = simbench.simulate("gem-64", 1500, seed=3)
    path = _write_capture(str(tmp_path / "gem.lsc"), run)
    a = api.load(path)
    t = run.truth
    b = api.from_events(t["time"], t["channel"], t["rising"], tick_hz=run.meta["tick_hz"],
                        markers=run.meta["markers"])
    assert a.label == "gem-64" and a.size == 64
    assert a.to_dict()["measurements"] == b.to_dict()["measurements"]
    frame = a.packets()
    assert len(frame) == 3 * 1500       # three start edges: rx_dv falling, m_send, m_xmit
    rx = frame[frame.group == "rx_dv falling"]
    tick_ns = 1e9 / run.meta["tick_hz"]          # 1.25 ns on the default bench (exact in binary)
    assert np.allclose(rx["rx.udp_ns"].to_numpy(), t["ticks/rx.udp"] * tick_ns, rtol=0, atol=0)
    assert (rx["rx.udp_status"] == "ok").all()
    summary = a.summary()
    assert summary.loc["rx.udp", "n"] == 1500
    assert summary.loc["rx.udp", "p99_ns"] == a.stats["rx.udp"].p99_ns


def test_losses_exclude_packets(tmp_path):
    """A loss record removes events; the packets around it are lost-gap, never mispaired."""
    run = simbench.simulate("el-dm-64", 600, seed=5)
    t = run.truth
    # drop every event of packets 100..109 except the rx_dv falling edge of packet 100, and
    # declare the loss from that packet's first event to packet 109's last
    pk = t["packet"]
    drop = (pk >= 100) & (pk <= 109) & ~((pk == 100) & (t["channel"] == 0) & ~t["rising"])
    first = int(t["time"][pk == 100].min())
    span = int(t["time"][pk == 109].max()) - first
    keep = ~drop
    losses = [(first, span, int(drop.sum()), "overflow")]
    window_ns = 20_000
    defs = parse_definitions({"measurement": {"rx.udp": {
        "span": "rx_dv falling -> m_udp rising", "window_ns": window_ns}}})
    r = analyze_events(t["time"][keep], t["channel"][keep], t["rising"][keep],
                       tick_hz=run.meta["tick_hz"], markers=run.meta["markers"],
                       losses=[(first, span)], keep_packets=True, definitions=defs)
    s = r.stats["rx.udp"]
    assert s.counts["lost_gap"] >= 1
    assert s.counts["missed"] == 0 and s.counts["spurious"] == 0
    rx = r.packets[0]
    ok = rx.status["rx.udp"] == OK
    # every paired packet has exactly its true latency: nothing paired across the gap
    tick_ns = 1e9 / run.meta["tick_hz"]
    truth_by_start = dict(zip(np.round(t["rx_end_ns"] / tick_ns - 1e-9).astype(np.int64).tolist(),
                              t["ticks/rx.udp"].tolist(), strict=True))
    for start, lat in zip(rx.start[ok].tolist(), rx.latency["rx.udp"][ok].tolist(), strict=True):
        expect = truth_by_start.get(start)
        if expect is None:      # tick rounding of the start edge: look one tick either side
            expect = truth_by_start.get(start - 1, truth_by_start.get(start + 1))
        assert lat == expect
    # expected by the rule: a pair is excluded when [stop - window, stop] meets the loss
    start_tick = np.array([t["time"][(pk == k) & (t["channel"] == 0) & ~t["rising"]][0]
                           for k in range(600)])
    stop_tick = start_tick + t["ticks/rx.udp"]
    w = math.ceil(window_ns * run.meta["tick_hz"] / 1e9)     # the window in ticks
    clear = (stop_tick < first) | (stop_tick - w > first + span)
    assert s.n == int(clear.sum())
    assert s.counts["lost_gap"] == 600 - 9 - int(clear.sum())   # packets 101..109: no start
    # the same through a capture file with a LOSS record
    path = str(tmp_path / "loss.lsc")
    meta = {"tick_hz": run.meta["tick_hz"], "channels": {str(k): v for k, v in ROLES.items()},
            "markers": run.meta["markers"]}
    with capfile.CaptureWriter(path, meta, fsync=False) as w:
        w.append_events(t["time"][keep], t["channel"][keep], t["rising"][keep])
        w.append_loss(LossRecord(*losses[0]))
    f = api.analyze_file(path, definitions=defs)
    assert f.stats["rx.udp"].n == s.n and f.stats["rx.udp"].counts == s.counts


def test_synthetic_chunked_truth():
    time, channel, rising, truth = synthetic_events(5000, seed=4)
    markers = {"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"}
    whole = analyze_events(time, channel, rising, tick_hz=320_000_000, markers=markers,
                           keep_packets=True)
    chunks = [(time[i:i + 333], channel[i:i + 333], rising[i:i + 333])
              for i in range(0, len(time), 333)]
    parts = analyze_chunks(chunks, tick_hz=320_000_000, markers=markers, keep_packets=True)
    assert np.array_equal(whole.packets[0].latency["rx.isr"], truth["rx.isr"])
    assert np.array_equal(parts.packets[0].latency["rx.udp"], truth["rx.udp"])
    assert np.array_equal(parts.packets[1].latency["tx.wire"], truth["tx.wire"])
    assert parts.to_dict()["measurements"] == whole.to_dict()["measurements"]
    assert set(whole.unavailable) == {"rx.copy", "rx.fast", "tx.xmit", "rx.driver", "rx.ipudp"}


def test_bounded_memory_switch_to_histogram():
    markers = {"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"}
    r = analyze_chunks(synthetic_chunks(200_000, chunk_events=50_000, seed=1), tick_hz=320_000_000,
                       markers=markers, exact_limit=5_000)
    e = analyze_chunks(synthetic_chunks(200_000, chunk_events=50_000, seed=1), tick_hz=320_000_000,
                       markers=markers)
    for name in ("rx.isr", "rx.udp", "tx.wire"):
        assert r.stats[name].method == "histogram" and e.stats[name].method == "exact"
        assert r.stats[name].n == e.stats[name].n == 20_000
        for p in PERCENTILES:
            assert r.stats[name].quantiles[p].value_ns == pytest.approx(
                e.stats[name].quantiles[p].value_ns, rel=r.stats[name].relative_error)


def test_missed_and_spurious_counted():
    # rx_dv falling at 0, 1000, 2000; m0 rising at 100 (pairs), none for 1000, at 2100 and an
    # extra m0 rising at 2500 (duplicate inside the window of 2000), and one at -50 (spurious)
    time = np.array([-50, 0, 100, 1000, 2000, 2100, 2500])
    channel = np.array([3, 0, 3, 0, 0, 3, 3])
    rising = np.array([1, 0, 1, 0, 0, 1, 1], dtype=bool)
    defs = parse_definitions({"measurement": {"rx.isr": {
        "span": "rx_dv falling -> m_isr rising", "window_ns": 600}}})
    r = analyze_events(time, channel, rising, tick_hz=1_000_000_000, definitions=defs)
    c = r.stats["rx.isr"].counts
    assert (c["packets"], c["ok"], c["missed"], c["duplicate"], c["spurious"]) == (3, 2, 1, 1, 1)


def test_errors():
    with pytest.raises(LatscopeError, match="tick_hz must be a positive whole number"):
        Analyzer(tick_hz=0)
    with pytest.raises(LatscopeError, match="tick_hz must be a positive whole number"):
        Analyzer(tick_hz=1.5)
    a = Analyzer(tick_hz=1000)
    with pytest.raises(LatscopeError, match="non-decreasing time order"):
        a.feed(np.array([5, 3]), np.array([0, 0]), np.array([0, 0], bool))
    with pytest.raises(LatscopeError, match="cannot compute rx.copy: the capture has no channel "
                                            "for 'm_copy'"):
        Analyzer(default_definitions(), tick_hz=1000, markers={"m0": "rx.isr"},
                 require=["rx.copy"])
    with pytest.raises(LatscopeError, match="no such file"):
        api.analyze_file("/nonexistent/x.lsc")


FIXTURES = sorted(glob.glob(f"{api.repository_root()}/fixtures/bench/*.lsc")
                  if api.repository_root() else [])


@pytest.mark.skipif(not FIXTURES, reason="fixtures/bench has no captures")
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.rsplit("/", 1)[-1])
def test_bench_fixture_recovers_truth(path):
    """Captures made through the instrument (gateware model, pty, decoder, capture file): every
    per-packet latency equals the truth in ticks; every percentile's interval holds the truth."""
    a = api.load(path)
    with capfile.open_capture(path) as cap:
        truth = cap.truth()["simbench"]
    tick_ns = 1e9 / a.result.tick_hz
    checked = 0
    for table in a.result.packets:
        for name, lat in table.latency.items():
            assert np.array_equal(lat, truth[f"ticks_{name}"]), name
            s = a.stats[name]
            true_ns = truth[f"stage_{name}"]
            for p, q in s.quantiles.items():
                true_q = order_statistic(true_ns, p)
                lo = -np.inf if q.lower_ns is None else q.lower_ns - tick_ns
                hi = np.inf if q.upper_ns is None else q.upper_ns + tick_ns
                assert lo <= true_q <= hi
            checked += 1
    assert checked >= 3


def test_definitions_stored_in_capture(tmp_path):
    run = simbench.simulate("gem-64", 200, seed=2)
    stored = {"measurement": {"udp.only": {"span": "rx_dv falling -> m_udp rising",
                                           "window_ns": 50_000}}}
    path = _write_capture(str(tmp_path / "d.lsc"), run, definitions=stored)
    a = api.analyze_file(path)
    assert list(a.stats) == ["udp.only"]
    assert a.stats["udp.only"].n == 200
    # an explicit definitions argument wins over the stored ones
    b = api.analyze_file(path, definitions=default_definitions().select(["rx.isr"]))
    assert list(b.stats) == ["rx.isr"]
