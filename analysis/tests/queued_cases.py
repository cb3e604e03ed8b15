"""Shared by the queued-burst tests (``test_queued_bench``: the simulation's own edges;
``test_queued_gateware``: the same runs through the real gateware): the LSID-1 recoding of a
run's marker pulses and the every-stage check against the bench's ground truth.

Test modules load it by path (pytest runs with ``--import-mode=importlib``, so the tests folder
is not on ``sys.path``)."""

import numpy as np

from latscope.analysis.marker_identity import edges_of_schedule, schedule
from latscope.analysis.pairing import OK

MARKER_CHANNELS = range(3, 8)


def coded(run):
    """The run's events with every marker pulse replaced by its LSID-1 code (sequence number =
    packet index, unit = the pulse's own width in ticks): ``(time, channel, rising)`` sorted by
    tick, then channel."""
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
    """Every stage of every packet in ``result`` (``analyze_events(..., keep_packets=True)``)
    paired and within one tick of ``truth["ticks/<stage>"]`` (each edge is rounded up to its
    tick), and no packet ambiguous."""
    packets = len(truth["ticks/rx.isr"])
    rx = next(p for p in result.packets if "rx.isr" in p.latency)
    for stage in ("rx.isr", "rx.copy", "rx.udp"):
        assert np.all(rx.status[stage] == OK), stage
        got = rx.latency[stage]
        assert len(got) == packets
        assert np.max(np.abs(got - truth[f"ticks/{stage}"])) <= 1, stage
    for stage in ("tx.wire", "tx.xmit"):
        table = next(p for p in result.packets if stage in p.latency)
        assert np.all(table.status[stage] == OK), stage
        assert len(table.latency[stage]) == packets
        assert np.max(np.abs(table.latency[stage] - truth[f"ticks/{stage}"])) <= 1, stage
    assert result.ambiguous == {}
