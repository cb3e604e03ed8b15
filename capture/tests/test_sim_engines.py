"""The Verilator engine's stimulus path (sim_engines.harness_stimulus): fast-forwarded, it gives
the bytes of a run that steps every cycle, for echo traffic (edges within packets) and under
background load, with the harness's link and filter clock gates and one evaluation per cycle or
without them, and those bytes decode to the simulation's ground truth exactly."""


import numpy as np
import pytest

from latscope.capture.events import DecodeResult
from latscope.capture.link.stream import StreamDecoder
from latscope.capture.sim import simbench
from latscope.capture.sim.sim_load import simulate_load
from latscope.capture.sim.verilator_play import play, verilator_available

needs_verilator = pytest.mark.skipif(
    not verilator_available(),
    reason="needs latscope.gateware.top and a C++ compiler for Verilator")


def _check_same_and_true(run):
    fast, fast_stats = play(run, fast=True)
    slow, slow_stats = play(run, fast=False)
    # fast-forward, but every cycle evaluated twice, all of it each time, the link clock
    # never left still and no edge carried through the filter's window by a window skip
    plain, plain_stats = play(run, fast=True, link_gate=False, one_eval=False,
                              input_logic_once=False, window_skip=False)
    assert fast == slow == plain
    assert slow_stats["skipped"] == 0 and fast_stats["total_cycles"] == slow_stats["total_cycles"]
    assert slow_stats["link_gated"] == 0 and plain_stats["link_gated"] == 0
    # the link clock was left still in some evaluated cycles (most, for echo traffic)
    assert 0 < fast_stats["link_gated"] < fast_stats["evaluated"]
    # and the channels' filter clocks in most channel-cycles, never without gates
    assert slow_stats["gates_still"] == 0 and plain_stats["gates_still"] == 0
    channel_cycles = simbench.CORE_PARAMS["channels"] * fast_stats["evaluated"]
    assert 0.5 * channel_cycles < fast_stats["gates_still"] < channel_cycles
    # window skips in the fast run only
    assert fast_stats["window_skips"] > 0
    assert slow_stats["window_skips"] == 0 and plain_stats["window_skips"] == 0
    decoder = StreamDecoder()
    result = DecodeResult.concat([decoder.feed(fast), decoder.finish()])
    check = simbench.compare_to_truth(result.time, result.channel, result.rising, run.truth)
    assert check["ok"] and check["max_error"] == 0 and check["decoded"] == run.n_events
    assert check["missing"] == 0 and check["extra"] == 0
    return fast_stats


@pytest.mark.slow
@needs_verilator
def test_fast_forward_within_packets_is_invisible():
    # gem-64 echo: 14 edges per packet, marker pulses 18 capture cycles wide and 100 to 1,200
    # cycles apart, so most of the skipping happens between edges of one packet.
    run = simbench.simulate("gem-64", 6, seed=5)
    cycles = np.unique(run.stimulus.ticks // run.timing.lanes)
    assert len(cycles) == 14 * 6
    stats = _check_same_and_true(run)
    # Skipped: the stretches between edges, within and between packets (95 % measured when
    # this test was written, most of the rest is the pipeline after each edge).
    assert stats["skipped"] > 0.9 * stats["total_cycles"]
    # Window skips: at most one per edge, 14 per packet (a marker pulse's falling edge gets one
    # once its rising one has left the pipeline); 83 of those 84 measured when this test was
    # written (a window skip, like any, needs the rest quiet and the next heartbeat far).
    assert 13 * 6 <= stats["window_skips"] <= 14 * 6


@pytest.mark.slow
@needs_verilator
def test_fast_forward_under_load_is_invisible():
    # --sim-load's stimulus (a request among 60 % background traffic) through the same core.
    run = simulate_load("fast-track-64", 2, "bg60", seed=2)
    assert run.n_events > 100
    stats = _check_same_and_true(run)
    assert stats["skipped"] > 0
