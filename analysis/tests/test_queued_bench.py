"""Every stage of every packet under queueing, against the simulated bench's ground truth
(issue 20, item 3), with plain markers and with LSID-1 identity markers.

The simulated DUT (``capture.sim_dut``, ``Traffic(mode="burst")``) receives bursts of requests
faster than its app thread serves them (one in-order thread whose send returns when its frame
starts on the wire, plus ``app_busy_us`` of further work), so markers of a request come after
later requests have arrived. Expected values are the bench's own ``truth["ticks/<stage>"]``: the
latency in ticks the instrument must report for each packet; the tolerance is one tick (each edge
is rounded up to its tick).
"""

import numpy as np
import pytest

from latscope.analysis.engine import analyze_events
from latscope.analysis.marker_identity import edges_of_schedule, schedule
from latscope.analysis.pairing import OK, pair_next
from latscope.capture.sim import simbench as sb

PACKETS = 240
MARKER_CHANNELS = range(3, 8)


@pytest.fixture(scope="module")
def run():
    return sb.simulate("gem-64", PACKETS, seed=7,
                       traffic=sb.Traffic(mode="burst", burst=6, app_busy_us=8.0))


def coded(run):
    """The run's events with every marker pulse replaced by its LSID-1 code (sequence number =
    packet index, unit = the pulse's own width in ticks)."""
    t = run.truth["time"]
    ch = run.truth["channel"]
    r = run.truth["rising"]
    pk = run.truth["packet"]
    marker = np.isin(ch, MARKER_CHANNELS)
    keep = [(t[~marker], ch[~marker], r[~marker])]
    for c in MARKER_CHANNELS:
        sel = ch == c
        rise = t[sel & r]
        fall = t[sel & ~r]
        packet = pk[sel & r]
        for a, b, p in zip(rise, fall, packet, strict=True):
            et, er = edges_of_schedule(*schedule(int(p)), unit=int(b - a), at=int(a))
            keep.append((et, np.full(len(et), c, np.uint8), er))
    time = np.concatenate([k[0] for k in keep])
    channel = np.concatenate([k[1] for k in keep])
    rising = np.concatenate([k[2] for k in keep])
    order = np.lexsort((channel, time))
    return time[order], channel[order], rising[order]


def check_every_stage(result, truth):
    rx = next(p for p in result.packets if "rx.isr" in p.latency)
    for stage in ("rx.isr", "rx.copy", "rx.udp"):
        assert np.all(rx.status[stage] == OK), stage
        got = rx.latency[stage]
        assert len(got) == PACKETS
        assert np.max(np.abs(got - truth[f"ticks/{stage}"])) <= 1, stage
    for stage in ("tx.wire", "tx.xmit"):
        table = next(p for p in result.packets if stage in p.latency)
        assert np.all(table.status[stage] == OK), stage
        assert np.max(np.abs(table.latency[stage] - truth[f"ticks/{stage}"])) <= 1, stage
    assert result.ambiguous == {}


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
    check_every_stage(result, run.truth)


def test_every_stage_of_every_packet_with_identity_markers(run):
    t, ch, r = coded(run)
    result = analyze_events(t, ch, r, tick_hz=int(run.meta["tick_hz"]),
                            markers=run.meta["markers"], keep_packets=True,
                            coded_markers=list(run.meta["markers"]))
    check_every_stage(result, run.truth)
