"""Markers with identity (LSID-1, docs/marker-identity.md): the host decoder against the golden
vectors the C encoder is tested on (zephyr-app/lib/latscope_core/tests/test_marker_code.c), and
pairing by identity where order alone is wrong.

Expected identities are the vectors' sequence numbers (low byte); expected latencies are worked
out from the hand-built edges next to each test."""

import pathlib

import numpy as np
import pytest

from latscope.analysis import api
from latscope.analysis.definitions import default_definitions
from latscope.analysis.engine import analyze_events
from latscope.analysis.frames import analyze_frames
from latscope.analysis.marker_identity import (
    CODED,
    DAMAGED,
    PLAIN,
    decode,
    edges_of_schedule,
    is_coded_channel,
    marker_rises,
    schedule,
)
from latscope.capture.files import capfile
from latscope.capture.files.frames import FLAGS, FRAME_DTYPE

VECTORS = (pathlib.Path(__file__).parents[2] / "zephyr-app" / "lib" / "latscope_core" / "tests"
           / "marker_code_vectors.txt")
#: 50 ns units at the instrument's 1.25 ns tick
UNIT = 40


def vectors():
    out = []
    for line in VECTORS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        head, low = line.split("|")
        seq, *high = (int(x) for x in head.split())
        out.append((seq, high, [int(x) for x in low.split()]))
    return out


def realistic_edges(high, low, at, rng):
    """A schedule as a GPIO makes it: each level lasts a fixed write overhead (30 ticks, a port
    write's tens of ns) plus its units of busy loop, and every edge moves by up to 4 ticks."""
    t, out, rising = at, [], []
    for h, lo in zip(high, low, strict=True):
        out.append(t + int(rng.integers(-4, 5)))
        t += 30 + h * UNIT
        out.append(t + int(rng.integers(-4, 5)))
        t += 30 + lo * UNIT
        rising += [True, False]
    return np.array(out, np.int64), np.array(rising, bool)


def test_golden_vectors_are_the_python_schedule():
    vs = vectors()
    assert len(vs) >= 10
    for seq, high, low in vs:
        assert schedule(seq) == (high, low), seq


def test_decoder_reads_every_golden_vector():
    rng = np.random.default_rng(20)
    times, rising, at, firsts = [], [], 10_000, []
    for _, high, low in vectors():
        t, r = realistic_edges(high, low, at, rng)
        times.append(t), rising.append(r), firsts.append(int(t[0]))
        at = int(t[-1]) + 5_000
    codes = decode(np.concatenate(times), np.concatenate(rising))
    assert codes.status.tolist() == [CODED] * len(vectors())
    assert codes.ident.tolist() == [seq & 0xFF for seq, _, _ in vectors()]
    # the marker's first edge is the measurement point, unchanged by the code after it
    assert codes.time.tolist() == firsts
    assert is_coded_channel(codes)


def test_parity_error_and_plain_markers():
    high, low = schedule(0x5A)
    high[3] = 5 - high[3]                          # one bit flipped: 1 <-> 4 units
    t, r = edges_of_schedule(high, low, unit=UNIT, at=0)
    plain_t = np.array([100_000, 100_040, 200_000, 200_040])
    plain_r = np.array([True, False, True, False])
    codes = decode(np.concatenate([t, plain_t]), np.concatenate([r, plain_r]))
    assert codes.status.tolist() == [DAMAGED, PLAIN, PLAIN]
    assert codes.ident.tolist() == [-1, -1, -1]
    assert codes.time.tolist() == [0, 100_000, 200_000]
    assert not is_coded_channel(codes)


@pytest.mark.parametrize("cut", range(0, 61, 3))
def test_marker_rises_chunked_equals_whole(cut):
    ts, rs = [], []
    for k, seq in enumerate((1, 200, 77)):
        t, r = edges_of_schedule(*schedule(seq), unit=UNIT, at=20_000 * k)
        ts.append(t), rs.append(r)
    t, r = np.concatenate(ts), np.concatenate(rs)
    whole, _ = marker_rises(t, r)
    a, state = marker_rises(t[:cut], r[:cut])
    b, _ = marker_rises(t[cut:], r[cut:], state)
    assert np.concatenate([a, b]).tolist() == whole.tolist()
    assert t[whole].tolist() == [0, 20_000, 40_000]


def test_engine_counts_only_the_marker_edge_of_coded_markers():
    """rx_dv (channel 0) ends at 0 and 50,000; coded markers (m0 = rx.isr) at 800 and 50,900:
    800 and 900 ticks, whatever the code pulses after them."""
    ev = [(-100, 0, True), (0, 0, False), (49_900, 0, True), (50_000, 0, False)]
    for at, seq in ((800, 1), (50_900, 2)):
        t, r = edges_of_schedule(*schedule(seq), unit=UNIT, at=at)
        ev += [(int(x), 3, bool(y)) for x, y in zip(t, r, strict=True)]
    ev.sort()
    t, ch, rising = (np.array(x) for x in zip(*ev, strict=True))
    defs = default_definitions().select(["rx.isr"])
    coded = analyze_events(t, ch, rising, tick_hz=800_000_000, definitions=defs,
                           coded_markers=["m0"])
    s = coded.stats["rx.isr"]
    assert (s.n, s.min_ns, s.max_ns, s.counts["ambiguous"]) == (2, 1000.0, 1125.0, 0)
    plain = analyze_events(t, ch, rising, tick_hz=800_000_000, definitions=defs)
    assert plain.stats["rx.isr"].counts["duplicate"] == 18     # 9 code pulses per marker


def overtaking():
    """Two classes whose requests share the rx.udp marker; class 1 overtakes class 0 in the
    queue. Request ends (ticks): c0 seq 10 at 1,000, c1 seq 20 at 1,100; the app serves seq 20
    first (marker at 3,000) then seq 10 (marker at 5,000). True rx.udp: seq 10 4,000 ticks,
    seq 20 1,900 ticks. Replies: seq 20 at 4,000, seq 10 at 6,000."""
    rows = [(0, 0, 10, 900, 1000), (0, 1, 20, 1050, 1100),
            (1, 1, 20, 4000, 4100), (1, 0, 10, 6000, 6100)]
    rec = np.zeros(len(rows), FRAME_DTYPE)
    index = [0, 0]
    for k, (d, cls, seq, _, _) in enumerate(rows):
        rec[k]["direction"], rec[k]["cls"], rec[k]["seq"] = d, cls, seq
        rec[k]["flags"] = FLAGS["seq_valid"] | FLAGS["fcs_ok"]
        rec[k]["frame_index"] = index[d]
        rec[k]["length"] = 4
        index[d] += 1
    start = np.array([r[3] for r in rows], np.int64)
    end = np.array([r[4] for r in rows], np.int64)
    return rec, start, end, np.array([3000, 5000]), np.array([20, 10])


def test_identity_pairs_what_order_cannot():
    rec, start, end, marks, ids = overtaking()
    by_order = analyze_frames(rec, start, end, tick_hz=100_000_000, markers={"rx.udp": marks})
    # in order both requests are one busy period with two markers: taken in arrival order, so
    # the pairing is wrong and nothing on the edges says so; the note says what differs
    c0 = by_order.classes[0].samples.get("rx.udp")
    assert c0 is not None and c0[1].tolist() == [2000]          # 3,000 - 1,000: the wrong one
    by_id = analyze_frames(rec, start, end, tick_hz=100_000_000, markers={"rx.udp": marks},
                           marker_ids={"rx.udp": ids})
    assert by_id.classes[0].samples["rx.udp"][1].tolist() == [4000]
    assert by_id.classes[1].samples["rx.udp"][1].tolist() == [1900]


def test_analyze_file_decodes_coded_markers(tmp_path):
    """A capture file whose m2 (rx.udp) markers carry LSID-1: the per-class stage pairs by
    identity (the same events as test_identity_pairs_what_order_cannot)."""
    rec, start, end, marks, ids = overtaking()
    ev = [(int(s), int(d), True) for s, d in zip(start, rec["direction"], strict=True)]
    ev += [(int(e), int(d), False) for e, d in zip(end, rec["direction"], strict=True)]
    for at, seq in zip(marks, ids, strict=True):
        t, r = edges_of_schedule(*schedule(int(seq)), unit=4, at=int(at))    # 40 ns units
        ev += [(int(x), 5, bool(y)) for x, y in zip(t, r, strict=True)]
    ev.sort()
    t, ch, rising = (np.array(x) for x in zip(*ev, strict=True))
    meta = {"tick_hz": 100_000_000, "channels": {"0": "rx_dv", "1": "tx_en", "5": "m2"},
            "markers": {"m2": "rx.udp"}, "frame_classes": {"0": "bg", "1": "hp"},
            "marker_identity": {"code": "lsid1", "markers": ["m2"]}}
    with capfile.CaptureWriter(tmp_path / "id.lsc", meta) as w:
        w.append_events(t, ch, rising)
        w.append_frames(rec)
    a = api.analyze_file(tmp_path / "id.lsc")
    assert a.stats["rx.udp[bg]"].min_ns == 40_000 and a.stats["rx.udp[hp]"].min_ns == 19_000
    # the plain measurement sees one edge per marker (the code pulses are dropped)
    assert a.stats["rx.udp"].counts["duplicate"] == 0
