"""Per-channel offsets (capture/link/calibration.py) and their use by the analysis engine.

Expected values are constructed: a known skew per channel is added to a common edge train, so the
measured offsets must equal it exactly (integers), and latencies computed from the skewed capture
with the offsets in its metadata must equal the latencies of the unskewed capture exactly.
"""

import json

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.analysis.engine import analyze_chunks, analyze_events
from latscope.analysis.synth import synthetic_events
from latscope.capture.link import calibration as cal


def fanout(skews, *, n=200, period=97, seed=0):
    """Events of a self-test pattern seen on channels 0..len(skews)-1, channel c late by
    skews[c] ticks; the capture starts between two channels' copies of the first edge."""
    rng = np.random.default_rng(seed)
    base = np.cumsum(rng.integers(period // 2, period, n)) + 1000
    t = np.concatenate([base + s for s in skews])
    ch = np.repeat(np.arange(len(skews)), n)
    up = np.tile(np.arange(n) % 2 == 0, len(skews))
    keep = t >= base[0] + 1         # channels not late miss the first edge: a partial start
    order = np.argsort(t[keep], kind="stable")
    return t[keep][order], ch[keep][order], up[keep][order]


def test_measures_known_skews_exactly():
    skews = [0, 2, 1, 0, 5, 0, 1, 0]          # ticks late; the lower median of them is 0
    t, ch, up = fanout(skews)
    r = cal.measure_offsets(t, ch, up, channels=range(8))
    assert r.offsets == tuple(skews)
    assert r.spread == (0,) * 8 and r.edges > 190
    diffs = np.subtract.outer(r.offsets, r.offsets)
    assert np.array_equal(diffs, np.subtract.outer(skews, skews))   # pairwise skew exact


@pytest.mark.parametrize("mutate, message", [
    (lambda t, ch, up: (t, ch, np.where(ch == 3, ~up, up)), "channel(s) 3 saw other edges"),
    (lambda t, ch, up: (t[ch != 2], ch[ch != 2], up[ch != 2]), "no edges on channel(s) 2"),
    (lambda t, ch, up: (np.where(ch == 1, t + 500, t), ch, up), "more than the 64-tick limit"),
])
def test_refuses_inconsistent_fanouts(mutate, message):
    t, ch, up = fanout([0, 1, 0, 2])
    t2, ch2, up2 = mutate(t, ch, up)
    order = np.argsort(t2, kind="stable")
    with pytest.raises(LatscopeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cal.measure_offsets(t2[order], ch2[order], up2[order], channels=range(4))


def test_calibration_file_round_trip(tmp_path):
    t, ch, up = fanout([0, 3, 1])
    r = cal.measure_offsets(t, ch, up, channels=[0, 1, 2])
    ident = {"channels": 8, "board": "ecpix5", "tick_hz": 800_000_000, "source_hash": 5}
    path = tmp_path / "cal.json"
    cal.write_calibration(path, r, identity=ident)
    meta = cal.load_calibration(path, identity=ident)
    assert meta[cal.METADATA_KEY] == [-1, 2, 0, 0, 0, 0, 0, 0]
    with pytest.raises(LatscopeError, match="made with tick_hz 800000000, the instrument has "
                                            "320000000"):
        cal.load_calibration(path, identity=dict(ident, tick_hz=320_000_000))
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(LatscopeError, match="is not a latscope calibration file"):
        cal.load_calibration(path)
    with pytest.raises(LatscopeError, match="cannot read calibration file"):
        cal.load_calibration(tmp_path / "missing.json")


def test_engine_applies_offsets_from_metadata():
    """Synthetic capture; channels delayed by known skews (a board whose pins lag): with the
    measured offsets in the metadata the engine's latencies equal the unskewed ones exactly,
    also chunked; without them they are off by the skew difference."""
    time, channel, rising, truth = synthetic_events(3000, seed=9)
    markers = {"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"}
    skew = np.array([0, 4, 0, 7, 0, 2, 0, 0])                    # ticks late per channel
    late = time + skew[channel]
    order = np.argsort(late, kind="stable")
    lt, lc, lr = late[order], channel[order], rising[order]
    plain = analyze_events(time, channel, rising, tick_hz=800_000_000, markers=markers,
                           keep_packets=True)
    # offsets as the fan-out calibration would give them for these skews (median channel 0)
    meta = {cal.METADATA_KEY: [int(s) for s in skew]}
    fixed = analyze_events(lt, lc, lr, tick_hz=800_000_000, markers=markers, keep_packets=True,
                           metadata=meta)
    chunks = [(lt[i:i + 257], lc[i:i + 257], lr[i:i + 257]) for i in range(0, len(lt), 257)]
    fixed_chunked = analyze_chunks(chunks, tick_hz=800_000_000, markers=markers,
                                   keep_packets=True, metadata=meta)
    raw = analyze_events(lt, lc, lr, tick_hz=800_000_000, markers=markers, keep_packets=True)
    for name in ("rx.isr", "rx.udp"):
        assert np.array_equal(fixed.packets[0].latency[name], truth[name])
        assert np.array_equal(fixed_chunked.packets[0].latency[name], truth[name])
        assert np.array_equal(plain.packets[0].latency[name], truth[name])
    # rx.isr: rx_dv (channel 0) falling -> m0 (channel 3) rising: 7 ticks too long uncorrected
    assert np.array_equal(raw.packets[0].latency["rx.isr"], truth["rx.isr"] + 7)
    assert fixed.to_dict()["measurements"] == plain.to_dict()["measurements"]


def test_bad_offsets_in_metadata_are_refused():
    with pytest.raises(LatscopeError, match="must be a list of whole ticks per channel"):
        cal.offsets_from_metadata({cal.METADATA_KEY: {"rx_dv": 1}})
