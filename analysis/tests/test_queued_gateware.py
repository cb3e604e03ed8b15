"""Every stage of every packet under queueing, replayed through the real gateware (issue 20,
item 3): the simulated bench's queued-burst run played into the capture core in Verilator, the
instrument's bytes decoded and analysed, with plain markers and with LSID-1 identity markers.

``test_queued_bench`` checks the same scenario on the simulation's own edges; here the edges are
the instrument's (its lanes, filters and stream encoding). Expected values are the bench's
``truth["ticks/<stage>"]``; the tolerance is one tick (each edge is rounded up to its tick).
"""

import dataclasses
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from latscope.analysis.engine import analyze_events
from latscope.capture.events import DecodeResult
from latscope.capture.link.stream import StreamDecoder
from latscope.capture.sim import simbench as sb

_spec = importlib.util.spec_from_file_location("queued_cases",
                                               Path(__file__).with_name("queued_cases.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

#: Eight bursts of six requests.
PACKETS = 48


def _verilator_available():
    try:
        import latscope.gateware.top  # noqa: F401
    except ImportError:
        return False
    return shutil.which("g++") is not None or shutil.which("c++") is not None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _verilator_available(),
                       reason="needs latscope.gateware.top and a C++ compiler for Verilator"),
]


@pytest.fixture(scope="module")
def run():
    return sb.simulate("gem-64", PACKETS, seed=7,
                       traffic=sb.Traffic(mode="burst", burst=6, app_busy_us=8.0))


def _through_gateware(run):
    """Arm the simulated instrument, play ``run``'s stimulus through the capture core (idle time
    fast-forwarded), drain, decode: ``(time, channel, rising)`` as the instrument reports them."""
    # why: Verilator and the gateware's command codec are heavy, needed only here
    from latscope.gateware.codec import encode_command
    from latscope.gateware.protocol import Opcode
    from latscope.gateware.verilator import Commands, VerilatorInstrument
    timing = run.timing
    inst = VerilatorInstrument(capture_hz=int(timing.capture_hz), lanes=timing.lanes,
                               channel_names=sb.CHANNEL_ROLES, **sb.CORE_PARAMS)
    cmds = Commands().fast_forward(True)
    cmds.rx(encode_command(1, Opcode.SET_EDGES, b"\xff\xff\xff\xff")
            + encode_command(2, Opcode.ARM, b"\x01")).run(sb.COMMAND_CYCLES)
    for part in sb.harness_stimulus(run, timing.lanes, chunk=64):
        cmds.raw(part)
    cmds.drain()
    decoder = StreamDecoder()
    result = DecodeResult.concat([decoder.feed(inst.run_commands(cmds)), decoder.finish()])
    return result.time, result.channel, result.rising


def _with_events(run, time, channel, rising):
    """``run`` with its stimulus and expected events replaced by these edges (ticks); the
    packets' stage truth is unchanged."""
    truth = dict(run.truth, time=time, channel=channel, rising=rising)
    return dataclasses.replace(run, stimulus=sb.stimulus_of_edges(time, channel, rising),
                               truth=truth)


def _analyze(events, run, **kwargs):
    t, ch, r = events
    return analyze_events(t, ch, r, tick_hz=int(run.meta["tick_hz"]),
                          markers=run.meta["markers"], keep_packets=True, **kwargs)


def _replayed(run):
    """The gateware's events for ``run``, checked edge for edge against its expected events
    (one constant offset: the instrument's tick of stimulus tick 0)."""
    events = _through_gateware(run)
    check = sb.compare_to_truth(*events, run.truth, tolerance_ticks=0)
    assert check["ok"] and check["decoded"] == run.n_events, check
    return events


def test_the_run_queues(run):
    """The scenario is a queue: most requests wait for the app thread."""
    assert np.count_nonzero(run.truth["queue_ns"] > 0) > PACKETS // 2


def test_every_stage_of_every_packet_with_plain_markers_through_gateware(run):
    events = _replayed(run)
    cases.check_every_stage(_analyze(events, run), run.truth)


def test_every_stage_of_every_packet_with_identity_markers_through_gateware(run):
    identity = _with_events(run, *cases.coded(run))
    # The codes add edges: more than two per marker pulse, for every marker of every packet.
    assert identity.n_events > run.n_events + 2 * PACKETS * len(run.meta["markers"])
    events = _replayed(identity)
    result = _analyze(events, run, coded_markers=list(run.meta["markers"]))
    cases.check_every_stage(result, run.truth)
