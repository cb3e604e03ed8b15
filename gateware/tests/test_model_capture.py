"""Tests of the capture front-end reference model on cases worked out by hand, and of the fast
vectorised path against the exact one. All values are integers compared exactly."""

import numpy as np
import pytest

from latscope.gateware import model_capture as mc

PARAMS = dict(channels=2, lanes=2, counter_width=10, max_glitch=0, heartbeat_shift=6)


def test_stimulus_from_edges_and_expansion():
    stim = mc.Stimulus.from_edges([[3, 5, 8], [5]])
    # by hand: tick 3 ch0 up -> 1; tick 5 ch0 down, ch1 up -> 2; tick 8 ch0 up -> 3
    assert stim.ticks.tolist() == [3, 5, 8]
    assert stim.values.tolist() == [1, 2, 3]
    assert stim.levels(10).tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
    # samples, lanes=2: cycle c holds ticks 2c (bits 0-1) and 2c+1 (bits 2-3)
    assert stim.samples(5, lanes=2, channels=2).tolist() == [0, 1 << 2, 1 | 2 << 2, 2 | 2 << 2,
                                                             3 | 3 << 2]
    assert mc.Stimulus.from_levels(stim.levels(10)).ticks.tolist() == [3, 5, 8]
    assert mc.Stimulus.from_edges([[], []]).levels(3).tolist() == [0, 0, 0]


def test_stimulus_rejects_bad_input():
    with pytest.raises(ValueError, match="Channel 1 lists the same edge tick twice"):
        mc.Stimulus.from_edges([[1], [4, 4]])
    with pytest.raises(ValueError, match="strictly increasing"):
        mc.Stimulus([3, 3], [1, 0])
    with pytest.raises(ValueError, match="same length"):
        mc.Stimulus([3], [1, 0])


def test_glitch_filter_definition():
    # y[n] = x[n] if x[n..n+h-1] all equal, else y[n-1]; hand-evaluated for h = 3
    x = np.array([0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 1, 0, 0], np.uint8)
    want = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    assert mc.filter_channel(x, np.full(len(x), 3)).tolist() == want
    assert mc.filter_channel(x, np.zeros(len(x), int)).tolist() == x.tolist()
    assert mc.filter_channel(x, np.ones(len(x), int)).tolist() == x.tolist()


def test_pipeline_timing():
    assert mc.pipeline(2, 0).latency == 6 and mc.pipeline(1, 0).latency == 6
    assert mc.pipeline(2, 15).latency == 23
    assert mc.pipeline(2, 3).lag == {"selftest": -2, "selftest_mask": 1, "glitch": 4,
                                     "edges": 7}


def test_config_at_pulses_time_reset():
    history = [(5, mc.Config(time_reset=True)), (9, mc.Config(armed=False))]
    assert mc.config_at(history, 4) == mc.RESET_CONFIG
    assert mc.config_at(history, 5).time_reset
    assert mc.config_at(history, 6) == mc.Config()
    assert not mc.config_at(history, 9).armed
    with pytest.raises(ValueError, match="two entries for the same cycle"):
        mc.config_at([(1, mc.Config()), (1, mc.Config())], 0)


def test_single_edge_and_first_tick():
    # edge on ch1 at tick 7 = cycle 3 lane 1; bit lane*channels+ch = 3
    entries = mc.capture_entries(mc.Stimulus.from_edges([[], [7]]), mc.Config(), **PARAMS,
                                 n_cycles=20)
    # lane 0 of cycle 3 (tick 6) is still low: only bit 3 is high
    assert entries == [mc.Entry(mc.TICK, 0), mc.Entry(mc.EVENTS, 3, edges=1 << 3, levels=1 << 3)]
    # written in clock cycle 3 + latency: with 3 + 6 = 9 cycles nothing but the tick is out
    assert mc.capture_entries(mc.Stimulus.from_edges([[], [7]]), mc.Config(), **PARAMS,
                              n_cycles=9) == [mc.Entry(mc.TICK, 0)]


def test_tick_deferred_past_events_and_counter_wrap():
    # edges in cycles 64 and 65 (ticks 128, 131) occupy the due tick's slot: it goes to cycle 66
    stim = mc.Stimulus.from_edges([[128, 131], []])
    entries = mc.capture_entries(stim, mc.Config(), **PARAMS, n_cycles=1100)
    ticks = [e.cycle for e in entries if e.kind == mc.TICK]
    # sample cycles up to 1100 - 6 - 1 = 1093 are written; the 10-bit counter wraps at 1024
    assert ticks == [0, 66] + list(range(128, 1024, 64)) + [0, 64]
    disarmed = mc.capture_entries(stim, mc.Config(armed=False), **PARAMS, n_cycles=1100)
    assert [e.cycle for e in disarmed] == [0, 64] + list(range(128, 1024, 64)) + [0, 64]


def test_overflow_exact_count_and_span():
    # ch0 toggles at ticks 40, 41, 50, 60 -> cycles 20 (2 edges), 25, 30 (a fall, level 0
    # on both lanes). FIFO full in clock
    # cycles 26 .. 31 (sample cycles 20 .. 25): 3 edges lost, span 25 - 20 = 5. Record written
    # in clock 32; the tick due at cycle 0 was written long before.
    stim = mc.Stimulus.from_edges([[40, 41, 50, 60], []])
    ready = np.ones(50, bool)
    ready[26:32] = False
    entries = mc.capture_entries(stim, mc.Config(), **PARAMS, fifo_ready=ready, n_cycles=50)
    assert entries[1:] == [mc.Entry(mc.OVERFLOW, 20, count=3, span=5),
                           mc.Entry(mc.EVENTS, 30, edges=1, levels=0)]
    # FIFO ready again exactly when cycle 30 is in the write stage: that event is dropped too
    ready[26:36] = False
    ready[36] = True
    entries = mc.capture_entries(stim, mc.Config(), **PARAMS, fifo_ready=ready, n_cycles=50)
    assert entries[1:] == [mc.Entry(mc.OVERFLOW, 20, count=4, span=10)]


def test_overflow_span_saturates():
    # 8-bit counter, FIFO full for 400 cycles with an edge every 2 cycles: span saturates at 255
    params = dict(PARAMS, counter_width=8, heartbeat_shift=7)
    stim = mc.Stimulus.from_edges([np.arange(0, 1000, 4), []])
    ready = np.ones(500, bool)
    ready[10:410] = False
    entries = mc.capture_entries(stim, mc.Config(), **params, fifo_ready=ready, n_cycles=500)
    overflow = [e for e in entries if e.kind == mc.OVERFLOW]
    assert len(overflow) == 1 and overflow[0].span == 255
    assert overflow[0].count == 201                    # sample cycles 4..404, one edge each even


def test_selftest_pattern_in_model():
    history = [(10, mc.Config(selftest_on=True, selftest_mask=1, selftest_high=3,
                              selftest_low=2))]
    raw, filtered = mc.filtered_levels(mc.Stimulus.from_edges([[]]), history, channels=1,
                                       lanes=2, max_glitch=0, n_cycles=30)
    start = (10 + 2) * 2                                # phase 0 at lane 0 of cycle t_on + 2
    assert raw[:start].tolist() == [0] * start
    assert raw[start:].tolist() == [int(i % 5 < 3) for i in range(60 - start)]


@pytest.mark.parametrize("seed, lanes, max_glitch",
                         [(1, 2, 0), (2, 2, 3), (3, 1, 4), (4, 2, 7), (5, 4, 0), (6, 4, 3)])
def test_fast_path_equals_exact(seed, lanes, max_glitch):
    rng = np.random.default_rng(seed)
    channels, n_cycles = 5, 3000
    stim = mc.random_stimulus(rng, channels=channels, n_ticks=n_cycles * lanes,
                              edges_per_channel=200, shared=40, pulses=30, toggle_bursts=5,
                              burst_width=2 * lanes)
    config = mc.Config(rise_en=int(rng.integers(0, 32)), fall_en=int(rng.integers(0, 32)),
                       glitch=tuple(int(g) for g in rng.integers(0, max_glitch + 2, channels)))
    params = dict(channels=channels, lanes=lanes, counter_width=10, max_glitch=max_glitch,
                  heartbeat_shift=5, n_cycles=n_cycles)
    exact = mc.entries_to_array(mc.capture_entries(stim, config, **params))
    fast = mc.capture_entries_fast(stim, config, **params)
    assert len(exact) > 300
    assert np.array_equal(exact, fast)


def test_fast_path_counts_a_million_edges():
    # 8 channels, 125,000 toggles each at random distinct ticks over 2**34 ticks, no filter,
    # all edges enabled: the entries must hold exactly one edge bit per toggle (written range).
    rng = np.random.default_rng(5)
    n_cycles = 1 << 33
    per_channel = [np.sort(rng.choice(1 << 34, 125_000, replace=False)) for _ in range(8)]
    stim = mc.Stimulus.from_edges(per_channel)
    out = mc.capture_entries_fast(stim, mc.Config(), channels=8, lanes=2, counter_width=48,
                                  max_glitch=15, heartbeat_shift=20, n_cycles=n_cycles)
    last = (n_cycles - mc.pipeline(2, 15).latency) * 2
    expected = sum(int((t < last).sum()) for t in per_channel)
    events = out[out["kind"] == mc.EVENTS]
    got = sum(bin(int(v)).count("1") for v in events["edges"])
    assert got == expected
    assert np.sum(out["kind"] == mc.TICK) == pytest.approx((n_cycles >> 20), abs=1)
    assert np.all(np.diff(out["cycle"].astype(np.int64)) > 0)


def test_fast_path_rejects_what_it_does_not_model():
    stim = mc.Stimulus.from_edges([[1]])
    p = dict(channels=1, lanes=2, counter_width=10, max_glitch=0, heartbeat_shift=5,
             n_cycles=10)
    with pytest.raises(ValueError, match="does not model self-test or time reset"):
        mc.capture_entries_fast(stim, mc.Config(selftest_on=True), **p)
    with pytest.raises(TypeError, match="takes one Config"):
        mc.capture_entries_fast(stim, [(0, mc.Config())], **p)
    with pytest.raises(ValueError, match="Lane count must be 1 \\(SDR\\), 2 \\(DDR\\) or 4 .*, "
                                         "not 3"):
        mc.capture_entries(stim, mc.Config(), **dict(p, lanes=3))
