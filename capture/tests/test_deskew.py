"""Sub-tick alignment (``capture/link/deskew.py``) against the timing models of
``gateware/model_delay.py``: directly, and through the Transport interface on the delay-line bench.

Where the expected values come from: the skews are the inputs given to the model in ps; the truth
after alignment is computed from the model's own parameters (each channel's cable delay plus its
setting times its true tap, less the calibration's whole-tick offset). Tolerances:

* the arrival estimate of a channel is ``lag * tick - (T1 - 1/2) * tap_est``: within half a tap of
  the truth from the step's quantisation, plus ``T1 * |tap_est - tap|`` from the tap estimate
  ``tick / (T2 - T1)``, whose span ``T2 - T1`` is the true ``tick / tap`` rounded either way,
  so ``|tap_est - tap| <= tap**2 / (tick - tap)``. With the nominal 25 ps tap the span is exactly
  50 and a skew is recovered within one tap (two half-tap errors);
* after alignment every channel sits within one of its taps before a tick boundary, so the true
  channel-to-channel skew is below the largest tap, whatever the taps' sizes.
"""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from latscope import LatscopeError
from latscope.capture import record
from latscope.capture import selftest as st
from latscope.capture.files.capfile import open_capture
from latscope.capture.link import calibration
from latscope.capture.link.deskew import align, find_steps
from latscope.capture.link.session import Instrument, Limits
from latscope.capture.sim.delay_bench import DelayBench
from latscope.gateware.model_delay import ChannelTiming

TICK_PS = 1250.0


def model_measure(timing, channels, runs=None):
    """``measure(taps, reference)`` evaluated on the model directly: one pattern edge at an
    arbitrary tick, stamped on every channel."""
    def measure(taps, reference):
        if runs is not None:
            runs.append(dict(taps))
        timing.taps = {c: taps.get(c, 0) for c in channels}
        t0 = 98_765 * timing.tick_ps
        stamp = {c: timing.tick(c, t0) for c in channels}
        return {c: stamp[c] - stamp[reference] for c in channels}
    return measure


def true_after(timing, result):
    """Each channel's true arrival at the chosen settings less its whole-tick offset, ps."""
    return [timing.skew_ps[c] + result.taps[i] * timing.tap_ps[c] - result.offsets_ticks[i]
            * timing.tick_ps for i, c in enumerate(result.channels)]


def estimate_bound(timing, result, i):
    """The arrival estimate's error bound of channel ``result.channels[i]``: half a tap, plus
    the taps counted times the error of the tap used (module docstring); the tap used is checked
    against its own bound where it was measured."""
    tap, used = timing.tap_ps[result.channels[i]], result.tap_ps[i]
    if result.tap_measured[i]:
        assert abs(used - tap) <= tap * tap / (timing.tick_ps - tap) + 1e-9
    return tap / 2 + (result.steps[i] - 0.5) * abs(used - tap) + 1e-6


def test_find_steps_bisects_to_the_first_setting_that_moves_a_tick():
    """Channel 1 arrives 1000 ps into a tick, taps of 25 ps: the boundary is 250 ps away, so
    10 taps reach it (ceil stamps an edge on the boundary in that tick) and the 11th moves it;
    the next boundary is 50 taps later."""
    timing = ChannelTiming(tick_ps=TICK_PS, skew_ps={0: 0.0, 1: 1000.0}, tap_ps={0: 25, 1: 25})
    runs = []
    result = find_steps(model_measure(timing, [0, 1], runs), [0, 1], 0)
    assert result.steps == {1: [11, 61]}
    assert result.base == {0: 0, 1: 1}
    assert len(runs) <= 2 + 2 * 7                  # base, top, two bisections of 127 settings


def test_align_recovers_nominal_skews_within_one_tap_and_aligns_below_one_tap():
    skew = {0: 100.0, 1: 700.0, 2: 1300.0, 3: 3000.0, 4: 0.0, 5: 50.0, 6: 400.0, 7: 1249.0}
    timing = ChannelTiming(tick_ps=TICK_PS, skew_ps=skew, tap_ps=dict.fromkeys(skew, 25))
    result = align(model_measure(timing, list(skew)), list(skew), tick_ps=TICK_PS)
    assert result.tap_ps == (25.0,) * 8 and all(result.tap_measured)
    for i, c in enumerate(result.channels):
        for j, d in enumerate(result.channels):
            measured = result.skew_before_ps[i] - result.skew_before_ps[j]
            assert abs(measured - (skew[c] - skew[d])) <= 25
    after = true_after(timing, result)
    assert max(after) - min(after) < 25
    assert result.steps_after == (1,) * 8           # every channel one tap before its step
    assert result.spread_after_ps < 25


@settings(max_examples=40, deadline=None)
@given(skews=st_.lists(st_.floats(0, 4000), min_size=2, max_size=8),
       taps=st_.lists(st_.floats(18, 32), min_size=8, max_size=8))
def test_align_on_random_skews_and_tap_sizes(skews, taps):
    """Random cable delays and a different tap size per channel (the tolerance of the silicon's
    step): every estimate within its bound (where a channel's second step is out of reach its
    tap is the others' mean, and the bound takes that tap's error), and after alignment below the
    largest tap."""
    chans = list(range(len(skews)))
    timing = ChannelTiming(tick_ps=TICK_PS, skew_ps=dict(zip(chans, skews, strict=True)),
                           tap_ps=dict(zip(chans, taps, strict=False)))
    result = align(model_measure(timing, chans), chans, tick_ps=TICK_PS)
    for i, c in enumerate(chans):
        for j, d in enumerate(chans):
            measured = result.skew_before_ps[i] - result.skew_before_ps[j]
            bound = estimate_bound(timing, result, i) + estimate_bound(timing, result, j)
            assert abs(measured - (skews[c] - skews[d])) <= bound
    after = true_after(timing, result)
    assert max(after) - min(after) < max(timing.tap_ps[c] for c in chans)
    assert all(0 <= t < 128 for t in result.taps)


def test_sub_tick_calibration_through_the_transport(tmp_path):
    """The whole host path (SET_DELAY, SELFTEST, RESET_TIME, ARM, the event stream) on the
    delay-line bench: taps of 23 ps (not the nominal 25) are measured, the skews recovered
    within their bounds, the channels aligned below one tap, the whole-tick offsets measured
    at the settings, and the file carries the settings for the capture."""
    skew = {0: 130.0, 2: 980.0, 3: 2210.0, 5: 640.0}
    bench = DelayBench(skew, tap_ps=23.0)
    out = tmp_path / "cal.json"
    result = st.calibrate(str(out), simulated=True, sub_tick=True, cable_ps=skew,
                          sim_tap_ps=23.0, channels=list(skew), high_ticks=101, low_ticks=99,
                          edges=40)
    sub = result["sub_tick"]
    span = {round(TICK_PS / t) for t in sub["tap_ps"]}
    assert span <= {54, 55}                         # tick / 23 ps = 54.3 taps
    assert sub["steps_after"] == [1, 1, 1, 1]
    timing = ChannelTiming(tick_ps=TICK_PS, skew_ps=skew, tap_ps=dict.fromkeys(skew, 23.0),
                           taps=dict(zip(sub["channels"], sub["taps"], strict=True)))
    arrival = [timing.delay_ps(c) - off * TICK_PS
               for c, off in zip(sub["channels"], result["calibration"]["offsets_ticks"],
                                 strict=True)]
    assert max(arrival) - min(arrival) < 23.0
    meta = calibration.load_calibration(out, identity=result["instrument"])
    assert meta[calibration.INPUT_DELAY_KEY] == [sub["taps"][sub["channels"].index(c)]
                                                 if c in skew else 0 for c in range(8)]
    assert meta[calibration.SUB_TICK_KEY]["spread_after_ps"] == sub["spread_after_ps"]
    assert bench.closed is False                   # (the calibration opened its own bench)


def test_bench_stamps_follow_the_sampling_formula():
    """A run on the bench: channel ``c``'s rising edges are ``ceil((t + skew + taps * tap) /
    tick)`` ticks after the pattern's, with the pattern on channel 7 inside the gateware."""
    skew = {0: 0.0, 1: 1251.0, 2: 2400.0}
    bench = DelayBench(skew, tap_ps=25.0)
    instrument = Instrument(bench)
    identity = instrument.identify()
    instrument.set_delay(2, 5)
    cap = st.run_selftest(instrument, identity, channels=[7], high_ticks=101, low_ticks=99,
                          loopback=[0, 1, 2], edges=20)
    first = {c: int(cap.time[(cap.channel == c) & cap.rising][0]) for c in (0, 1, 2, 7)}
    for c, ps in skew.items():
        delay = ps + (5 * 25.0 if c == 2 else 0)
        assert first[c] - first[7] == math.ceil(delay / TICK_PS)


def test_instrument_without_delay_lines_is_refused_in_one_line():
    bench = DelayBench({0: 0.0, 1: 0.0}, delay_lines=False)
    instrument = Instrument(bench)
    identity = instrument.identify()
    with pytest.raises(LatscopeError, match=r"^this instrument \(board sim\) has no input delay "
                                            r"lines: .*gateware build --board ecpix5`") as error:
        st.align_sub_tick(instrument, identity, [0, 1], high_ticks=101, low_ticks=99)
    assert "\n" not in str(error.value)


def test_alignment_needs_wired_channels():
    timing = ChannelTiming(tick_ps=TICK_PS, skew_ps={0: 0.0, 1: 0.0}, tap_ps={0: 25, 1: 25})
    with pytest.raises(LatscopeError, match="at least 2 channels"):
        align(model_measure(timing, [0]), [0], tick_ps=TICK_PS)

    def stuck(taps, reference):          # a channel whose stamp never moves
        return {0: 0, 1: 0}
    with pytest.raises(LatscopeError, match=r"channel\(s\) 0, 1 did not move by a tick"):
        align(stuck, [0, 1], tick_ps=TICK_PS)


def test_bench_rejects_bad_cable():
    with pytest.raises(ValueError, match="Cable delays must be 0..100000 ps on channels 0..7, "
                                         "not -1 on channel 0"):
        DelayBench({0: -1})


def test_random_seeded_bench_runs_are_reproducible():
    """The pattern's phase against the time base is drawn per run, yet lags are not affected."""
    rng = random.Random(3)
    skew = {c: rng.uniform(0, 2500) for c in range(3)}
    lags = []
    for seed in (1, 2):
        bench = DelayBench(skew, seed=seed)
        instrument = Instrument(bench)
        measure = st.lag_measure(instrument, instrument.identify(), list(skew), high_ticks=101,
                                 low_ticks=99)
        lags.append(measure({}, 0))
    assert lags[0] == lags[1]


def test_sub_tick_calibration_with_jittered_edges(tmp_path):
    """Edges with 4 ps of Gaussian jitter: each step is found where the median of a run's rising
    edges moves, so alignment holds within one tap plus the jitter's reach (3 sigma, 12 ps) on
    both channels of a pair."""
    skew = {1: 333.0, 4: 1500.0, 6: 20.0}
    result = st.calibrate(str(tmp_path / "cal.json"), simulated=True, sub_tick=True,
                          cable_ps=skew, channels=list(skew), high_ticks=101, low_ticks=99,
                          edges=40, jitter_ps=4.0)
    sub = result["sub_tick"]
    timing = ChannelTiming(tick_ps=TICK_PS, skew_ps=skew, tap_ps=dict.fromkeys(skew, 25.0),
                           taps=dict(zip(sub["channels"], sub["taps"], strict=True)))
    arrival = [timing.delay_ps(c) - off * TICK_PS
               for c, off in zip(sub["channels"], result["calibration"]["offsets_ticks"],
                                 strict=True)]
    assert max(arrival) - min(arrival) < 25.0 + 2 * 12.0


def test_capture_with_the_file_sets_the_delay_lines_and_records_them(tmp_path, monkeypatch):
    """``latscope capture --calibration`` with a sub-tick file (``record.record``): the
    instrument's delay lines are set to the file's settings before recording, and the capture's
    metadata holds them with the measurement and the whole-tick offsets."""
    skew = {0: 10.0, 1: 900.0, 2: 1700.0}
    cal = tmp_path / "cal.json"
    result = st.calibrate(str(cal), simulated=True, sub_tick=True, cable_ps=skew,
                          channels=list(skew), high_ticks=101, low_ticks=99, edges=40)
    bench = DelayBench(skew)
    monkeypatch.setattr(record, "open_port", lambda port, baud: bench)
    out = tmp_path / "run.lsc"
    record.record("bench", str(out), calibration=str(cal), limits=Limits(duration=0.2))
    sub = result["sub_tick"]
    want = [sub["taps"][sub["channels"].index(c)] if c in skew else 0 for c in range(8)]
    assert bench.commands.delay_taps == want
    meta = open_capture(out).metadata
    assert meta[calibration.INPUT_DELAY_KEY] == want
    assert meta[calibration.SUB_TICK_KEY]["taps"] == sub["taps"]
    assert meta[calibration.METADATA_KEY][:3] == result["calibration"]["offsets_ticks"]
