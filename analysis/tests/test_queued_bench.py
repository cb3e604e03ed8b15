"""Every stage of every packet under queueing, against the simulated bench's ground truth
(issue 20, item 3), with plain markers and with LSID-1 identity markers.

The simulated DUT (``capture.sim_dut``, ``Traffic(mode="burst")``) receives bursts of requests
faster than its app thread serves them (one in-order thread whose send returns when its frame
starts on the wire, plus ``app_busy_us`` of further work), so markers of a request come after
later requests have arrived. Expected values are the bench's own ``truth["ticks/<stage>"]``: the
latency in ticks the instrument must report for each packet; the tolerance is one tick (each edge
is rounded up to its tick).
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from latscope.analysis.engine import analyze_events
from latscope.analysis.pairing import OK, pair_next
from latscope.capture.sim import simbench as sb

_spec = importlib.util.spec_from_file_location("queued_cases",
                                               Path(__file__).with_name("queued_cases.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

PACKETS = 240


@pytest.fixture(scope="module")
def run():
    return sb.simulate("gem-64", PACKETS, seed=7,
                       traffic=sb.Traffic(mode="burst", burst=6, app_busy_us=8.0))


def test_the_run_queues(run):
    """The scenario is what it claims: requests wait for the app thread, and a request's rx.udp
    marker often comes after the next request has ended, where the old "first marker after the
    request, before the next one" rule pairs wrongly."""
    assert np.count_nonzero(run.truth["queue_ns"] > 0) > PACKETS // 2
    t, ch, r = run.truth["time"], run.truth["channel"], run.truth["rising"]
    ends = t[(ch == 0) & ~r]
    udp = t[(ch == 5) & r]
    old = pair_next(ends, udp, 800_000)
    wrong = (old.status != OK) | (udp[np.maximum(old.stop_index, 0)] - ends
                                  != run.truth["ticks/rx.udp"])
    assert np.count_nonzero(wrong) > PACKETS // 4


def test_every_stage_of_every_packet_with_plain_markers(run):
    t, ch, r = run.truth["time"], run.truth["channel"], run.truth["rising"]
    result = analyze_events(t, ch, r, tick_hz=int(run.meta["tick_hz"]),
                            markers=run.meta["markers"], keep_packets=True)
    cases.check_every_stage(result, run.truth)


def test_every_stage_of_every_packet_with_identity_markers(run):
    t, ch, r = cases.coded(run)
    result = analyze_events(t, ch, r, tick_hz=int(run.meta["tick_hz"]),
                            markers=run.meta["markers"], keep_packets=True,
                            coded_markers=list(run.meta["markers"]))
    cases.check_every_stage(result, run.truth)
