"""Every stage of every packet under queueing, replayed through the real gateware (issue 20,
item 3): the simulated bench's queued-burst run played into the capture core in Verilator, the
instrument's bytes decoded and analysed, with plain markers and with LSID-1 identity markers.

``test_queued_bench`` checks the same scenario on the simulation's own edges; here the edges are
the instrument's (its lanes, filters and stream encoding). Expected values are the bench's
``truth["ticks/<stage>"]``; the tolerance is one tick (each edge is rounded up to its tick).
"""

import dataclasses
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from latscope.analysis.engine import analyze_events
from latscope.analysis.marker_identity import edges_of_schedule, schedule
from latscope.capture.events import DecodeResult
from latscope.capture.files.vcd import change_lines
from latscope.capture.link.stream import StreamDecoder
from latscope.capture.sim import simbench as sb
from latscope.capture.sim.verilator_play import play, verilator_available

_spec = importlib.util.spec_from_file_location("queued_cases",
                                               Path(__file__).with_name("queued_cases.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

#: Eight bursts of six requests.
PACKETS = 48


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not verilator_available(),
                       reason="needs latscope.gateware.top and a C++ compiler for Verilator"),
]


@pytest.fixture(scope="module")
def run():
    return sb.simulate("gem-64", PACKETS, seed=7,
                       traffic=sb.Traffic(mode="burst", burst=6, app_busy_us=8.0))


def _through_gateware(run):
    """Arm the simulated instrument, play ``run``'s stimulus through the capture core (idle time
    fast-forwarded), drain, decode: ``(time, channel, rising)`` as the instrument reports them."""
    data, _ = play(run)
    decoder = StreamDecoder()
    result = DecodeResult.concat([decoder.feed(data), decoder.finish()])
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


def _with_identity_codes(vcd, out, roles):
    """``vcd`` (a pins VCD of ``sim_load.write_pins_vcd``) with every pulse of the marker wires
    ``roles`` replaced by its LSID-1 code (``docs/marker-identity.md``): the k-th pulse of a wire
    says sequence number k (the run's requests are numbered from 0 and served in order by one
    app thread, so a wire's k-th marker is request k's), in units of the pulse's own width."""
    head, body = vcd.read_text().split("$enddefinitions $end", 1)
    ident = {m.group(2): m.group(1) for m in re.finditer(r"\$var wire 1 (\S+) (\S+) \$end", head)}
    coded = {ident[r] for r in roles}
    changes, t = [], 0
    for line in body.split("\n"):
        line = line.strip()
        if line.startswith("#"):
            t = int(line[1:])
        elif line and line[0] in "01" and t > 0:
            changes.append((t, line[1:], int(line[0])))
    keep = [c for c in changes if c[1] not in coded]
    for code in coded:
        edges = [(at, level) for at, c, level in changes if c == code]
        rises = [at for at, level in edges if level]
        falls = [at for at, level in edges if not level]
        for k, (a, b) in enumerate(zip(rises, falls, strict=True)):
            et, er = edges_of_schedule(*schedule(k), unit=b - a, at=a)
            keep += [(int(x), code, int(y)) for x, y in zip(et, er, strict=True)]
    keep.sort()
    lines = [head + "$enddefinitions $end", "#0", "$dumpvars"]
    lines += [f"0{c}" for c in ident.values()] + ["$end"]
    lines += change_lines(keep)
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize("identity", [False, True], ids=["plain", "identity"])
def test_queued_bursts_replayed_as_pins_every_stage_of_every_packet(tmp_path, identity):
    """The same kind of traffic on a wire under 60 % background load (``sim_load``: 16 requests
    in bursts of 8, the app thread busy 8 µs after each send), written as an MII pin recording
    and replayed through the real gateware with its frame sniffers (``latscope replay-pins
    --frames mii``, Verilator), with plain markers and with the stage markers carrying LSID-1
    identity codes (rx.isr stays plain, as in the firmware): every request is paired by its
    sequence number and every stage of every request is within one tick of the wire's truth
    (``truth["stage/<stage>"]``, ns; replay-pins generates the PHY clock phase-locked to each
    frame's valid, so the edges keep their times), none ambiguous."""
    from latscope.analysis import api
    from latscope.capture.files import capfile
    from latscope.capture.sim import replay, sim_load
    scenario = sim_load.LoadScenario(name="short-burst", load=0.6, probe_rate_pps=50_000.0,
                                     drop_probability=0.0, burst=8, app_busy_us=8.0)
    run = sim_load.simulate_load("el-dm-64", 16, scenario, seed=2)
    assert np.count_nonzero(run.truth["queue_ns"] > 0) >= 12       # 14 of 16 wait
    vcd = sim_load.write_pins_vcd(run, tmp_path / "pins.vcd")
    if identity:
        vcd = _with_identity_codes(vcd, tmp_path / "coded.vcd", ("m1", "m2", "m3", "m4"))
    out = tmp_path / "replayed.lsc"
    assert replay.replay_pins(str(vcd), str(out), frames="mii", board="ecpix5")[
        "exit_status"] == 0
    if identity:        # the gateware timestamped every code pulse: 10 pulses per marker
        with capfile.open_capture(str(out)) as cap:
            ev = cap.events()
            m1 = next(int(c) for c, name in cap.channel_names.items() if name == "m1")
            assert np.count_nonzero((np.asarray(ev.channel) == m1)
                                    & np.asarray(ev.rising)) == 16 * 10
    a = api.analyze_file(str(out), markers=run.meta["markers"])
    (report,) = a.result.frames.classes.values()      # replay-pins loads no rules: one class
    assert (report.requests, report.replied, report.dropped) == (16, 16, 0)
    assert report.ambiguous == {}
    tick_ns = 1e9 / a.result.tick_hz
    # the class stage and the truth's name for it (tx.send's marker starts the wire's tx.wire)
    stages = {"rx.isr": "rx.isr", "rx.copy": "rx.copy", "rx.udp": "rx.udp",
              "tx.xmit": "tx.xmit", "tx.send": "tx.wire", "node.e2e": "node.e2e"}
    assert set(report.samples) == set(stages)
    for stage, true_name in stages.items():
        at, ticks = report.samples[stage]
        got = ticks[np.argsort(at, kind="stable")] * tick_ns
        want = run.truth[f"stage/{true_name}"]
        assert len(got) == len(want) == 16, stage
        assert np.max(np.abs(got - want)) <= tick_ns, stage
