"""Pairing engine: hand-computed cases, a loop reference model under hypothesis, losses, streaming.

Every expected value here is either worked out by hand in the comment next to it or produced by
``_reference_pair``, a deliberately naive per-start loop that states the rule of
``latscope.analysis.pairing`` directly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latscope.analysis.pairing import (
    DUPLICATE,
    LOST_GAP,
    LOST_STOP,
    MISSED,
    OK,
    PAIRED,
    SPURIOUS,
    TRUNCATED,
    UNDECIDED,
    LossIndex,
    StreamPairer,
    pair_in_order,
    pair_next,
    pair_sequence,
)


def _reference_pair(start, stop, window, losses=(), end_time=None):
    """The rule, one start at a time: first stop >= s, within the window, before the next start."""
    status, index = [], []
    for i, s in enumerate(start):
        nxt = start[i + 1] if i + 1 < len(start) else None
        cand = [j for j, t in enumerate(stop) if t >= s]
        j = cand[0] if cand else None
        ok = j is not None and stop[j] - s <= window and (nxt is None or stop[j] < nxt)
        lo, hi = (stop[j] - window, stop[j]) if ok else (s, s + window)
        lost = any(a <= hi and a + span >= lo for a, span in losses)
        if lost:
            status.append(LOST_GAP)
        elif ok:
            status.append(OK)
        elif end_time is not None and s + window > end_time:
            status.append(TRUNCATED)
        else:
            status.append(MISSED)
        index.append(j if ok else -1)
    cls = []
    for j, t in enumerate(stop):
        if j in index:
            cls.append(PAIRED)
            continue
        owners = [i for i, s in enumerate(start) if s <= t]
        inside = bool(owners) and status[owners[-1]] == OK and t - start[owners[-1]] <= window
        if inside:
            cls.append(DUPLICATE)
        elif any(a <= t and a + span >= t - window for a, span in losses):
            cls.append(LOST_STOP)
        else:
            cls.append(SPURIOUS)
    return index, status, cls


def test_hand_cases():
    # starts 0, 100, 200; stops 10 (pairs 0), 130 (pairs 100), 135 (second stop after 100:
    # duplicate), 400 (200 + 50 < 400: start 200 missed, stop 400 spurious)
    r = pair_next(np.array([0, 100, 200]), np.array([10, 130, 135, 400]), window=50)
    assert r.stop_index.tolist() == [0, 1, -1]
    assert r.status.tolist() == [OK, OK, MISSED]
    assert r.stop_class.tolist() == [PAIRED, PAIRED, DUPLICATE, SPURIOUS]
    assert (r.spurious, r.duplicate, r.lost_stops) == (1, 1, 0)


def test_stop_at_next_start_belongs_to_next_start():
    # stop at 100 == second start: the latest start at or before it (100) owns it
    r = pair_next(np.array([0, 100]), np.array([100]), window=1000)
    assert r.status.tolist() == [MISSED, OK]
    assert r.stop_index.tolist() == [-1, 0]


def test_stop_at_same_tick_as_start_pairs_with_zero_latency():
    r = pair_next(np.array([5]), np.array([5]), window=10)
    assert r.status.tolist() == [OK] and r.stop_index.tolist() == [0]


def test_window_is_inclusive():
    assert pair_next([0], [50], window=50).status.tolist() == [OK]
    assert pair_next([0], [51], window=50).status.tolist() == [MISSED]


def test_never_pairs_across_a_loss():
    # start 0's true stop was lost in [20, 30]; stop 60 must not be paired with it (window 100)
    losses = LossIndex([(20, 10)])
    r = pair_next(np.array([0, 500]), np.array([60, 520]), window=100, losses=losses)
    assert r.status.tolist() == [LOST_GAP, OK]
    # the stop at 60 was taken by start 0 and excluded with it, not counted as spurious
    assert r.stop_class.tolist() == [PAIRED, PAIRED]


def test_unpaired_stop_after_loss_is_lost_not_spurious():
    # the start of stop 60 was lost in [40, 45]; nothing before it within the window
    losses = LossIndex([(40, 5)])
    r = pair_next(np.array([500]), np.array([60, 520]), window=100, losses=losses)
    assert r.status.tolist() == [OK]
    assert r.stop_class.tolist() == [LOST_STOP, PAIRED]


def test_truncated_at_capture_end():
    r = pair_next(np.array([0, 900]), np.array([10]), window=200, end_time=950)
    assert r.status.tolist() == [OK, TRUNCATED]


def test_chain_origin():
    # stage 2 must come after stage 1's stop (at 30): the stop at 20 is not taken
    r = pair_next(np.array([0]), np.array([20, 40]), window=100, origin=np.array([30]))
    assert r.stop_index.tolist() == [1]


def test_sequence_association():
    # start seq 7 at 0 -> stop seq 7 at 30; start seq 8 at 10 -> stop seq 8 at 15; the second
    # stop of seq 8 (at 50) is a duplicate; seq 9 has no start: spurious
    r = pair_sequence([0, 10], [7, 8], [15, 30, 50, 60], [8, 7, 8, 9], window=100)
    assert r.stop_index.tolist() == [1, 0]
    assert r.status.tolist() == [OK, OK]
    assert r.stop_class.tolist() == [PAIRED, PAIRED, DUPLICATE, SPURIOUS]


def test_sequence_arrays_must_match():
    with pytest.raises(ValueError, match="each time array needs a sequence array"):
        pair_sequence([0, 1], [1], [2], [1], window=5)


def test_loss_index_rejects_negative_span():
    with pytest.raises(ValueError, match="loss span must be non-negative"):
        LossIndex([(0, -1)])


@st.composite
def _streams(draw):
    """Packets with a start and usually one stop, plus missing, duplicated and spurious stops and
    optional loss spans."""
    n = draw(st.integers(0, 25))
    gaps = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    start = np.cumsum(gaps).astype(np.int64) if n else np.empty(0, np.int64)
    stops = []
    for s in start.tolist():
        kind = draw(st.sampled_from(["one", "one", "one", "none", "dup", "late"]))
        lat = draw(st.integers(0, 40))
        if kind in ("one", "dup"):
            stops.append(s + lat)
        if kind == "dup":
            stops.append(s + lat + draw(st.integers(0, 5)))
        if kind == "late":
            stops.append(s + 50 + lat)
    stops += draw(st.lists(st.integers(0, 1600), max_size=5))       # spurious anywhere
    losses = draw(st.lists(st.tuples(st.integers(0, 1500), st.integers(0, 30)), max_size=2))
    window = draw(st.integers(1, 45))
    return start, np.sort(np.array(stops, dtype=np.int64)), window, losses


@settings(max_examples=300, deadline=None)
@given(_streams())
def test_vectorised_matches_reference(case):
    start, stop, window, losses = case
    end = int(max(start.max(initial=0), stop.max(initial=0)))
    r = pair_next(start, stop, window, losses=LossIndex(losses), end_time=end)
    index, status, cls = _reference_pair(start.tolist(), stop.tolist(), window, losses, end)
    assert r.status.tolist() == status
    assert np.where(r.status == OK, r.stop_index, -1).tolist() == \
        [i if s == OK else -1 for i, s in zip(index, status, strict=True)]
    assert r.stop_class.tolist() == cls


@settings(max_examples=150, deadline=None)
@given(_streams(), st.integers(1, 7))
def test_streaming_equals_one_shot(case, pieces):
    """Chunked feeding gives the same packets and counts as pairing everything at once."""
    start, stop, window, losses = case
    end = int(max(start.max(initial=0), stop.max(initial=0)))
    li = LossIndex(losses)
    whole = pair_in_order(start, stop, window, losses=li, end_time=end)
    pairer = StreamPairer(["m"], [window], [None], li)
    cuts = np.linspace(0, end + 1, pieces + 1).astype(np.int64)
    got_s, got_lat, got_st = [], [], []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        s_new = start[(start >= a) & (start < b)]
        t_new = stop[(stop >= a) & (stop < b)]
        # every edge before b has been fed
        s, lat, status = pairer.feed(s_new, [t_new], int(b))
        got_s.append(s), got_lat.append(lat[0]), got_st.append(status[0])
    s, lat, status = pairer.feed(np.empty(0, np.int64), [np.empty(0, np.int64)], None,
                                 end_time=end)
    got_s.append(s), got_lat.append(lat[0]), got_st.append(status[0])
    assert np.concatenate(got_s).tolist() == start.tolist()
    assert np.concatenate(got_st).tolist() == whole.status.tolist()
    expected_lat = np.where(whole.status == OK,
                            stop[np.maximum(whole.stop_index, 0)] - start if len(stop) else -1, -1)
    assert np.concatenate(got_lat).tolist() == expected_lat.tolist()
    c = pairer.counts["m"]
    assert (c["spurious"], c["duplicate"], c["lost_stops"], c["undecided"]) == \
        (whole.spurious, whole.duplicate, whole.lost_stops,
         int(np.count_nonzero(whole.stop_class == UNDECIDED)))


def test_stream_chain_equals_one_shot():
    """A chained stage (stop searched from the previous stage's stop), fed in pieces."""
    rng = np.random.default_rng(9)
    start = np.cumsum(rng.integers(200, 400, 300)).astype(np.int64)
    a = np.sort(start + rng.integers(0, 50, 300))
    # stage b: one stop before a's stop (must be skipped) and one after it
    b = np.sort(np.concatenate([a - 1, a + rng.integers(1, 60, 300)]))
    b = b[b >= start[0]]
    whole_a = pair_in_order(start, a, 150)
    origin = np.where(whole_a.status == OK, a[np.maximum(whole_a.stop_index, 0)], -1)
    whole_b = pair_in_order(start, b, 150, origin=origin)
    pairer = StreamPairer(["a", "b"], [150, 150], [None, 0], LossIndex())
    lat_a, lat_b = [], []
    for lo, hi in [(0, 20_000), (20_000, 50_000), (50_000, 10**9)]:
        pieces = [x[(x >= lo) & (x < hi)] for x in (start, a, b)]
        _, lat, _ = pairer.feed(pieces[0], pieces[1:], hi if hi < 10**9 else None,
                                end_time=int(b.max()))
        lat_a.append(lat[0]), lat_b.append(lat[1])
    exp_b = np.where(whole_b.status == OK, b[np.maximum(whole_b.stop_index, 0)] - start, -1)
    assert np.concatenate(lat_b).tolist() == exp_b.tolist()
    assert np.all(np.concatenate(lat_b)[np.concatenate(lat_a) >= 0] >=
                  np.concatenate(lat_a)[np.concatenate(lat_a) >= 0])
    assert np.count_nonzero(exp_b >= 0) > 250
