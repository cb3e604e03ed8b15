"""``latscope doctor``: the judging functions on constructed measurements, and the whole command
on the simulated instrument (real gateware in Verilator) with each injected fault."""

import json

import numpy as np
import pytest

from latscope.capture import doctor
from latscope.capture.link.ethlink import ethernet_link
from latscope.capture.link.session import Instrument
from latscope.capture.link.transport import EmulatedInstrument, EmulatedTransport
from latscope.cli import main
from latscope.commands.doctor import format_verdict

HIGH, LOW = doctor.PATTERN


def _loopback_events(channels, *, swap=(), dead=(), skew=None, periods=40, start=1000):
    """Edges of the pattern HIGH/LOW as the instrument would time-stamp them on each channel:
    the level of tick t is sampled in lane t % 2; with the lanes swapped, tick t shows the level
    of tick t ^ 1 (the two samples of a cycle exchanged)."""
    skew = skew or {}
    period = HIGH + LOW
    n = start + periods * period + 4
    times, chans, rises = [], [], []
    for ch in channels:
        if ch in dead:
            continue
        t = np.arange(n)
        phase = (t - start - skew.get(ch, 0)) % period
        level = (t >= start + skew.get(ch, 0)) & (phase < HIGH)
        if ch in swap:
            level = level[t ^ 1 if n % 2 == 0 else np.minimum(t ^ 1, n - 1)]
        change = np.flatnonzero(np.diff(level.astype(int))) + 1
        times += change.tolist()
        chans += [ch] * len(change)
        rises += level[change].tolist()
    order = np.argsort(times, kind="stable")
    return (np.array(times, np.int64)[order], np.array(chans, np.uint8)[order],
            np.array(rises, bool)[order])


def test_loopback_passes_when_all_channels_agree():
    t, c, r = _loopback_events(range(8))
    step = doctor.judge_loopback(t, c, r, wired=list(range(8)), high_ticks=HIGH, low_ticks=LOW)
    assert step.ok is True
    assert step.data["offset_ticks"] == dict.fromkeys(range(8), 0)


def test_loopback_names_swapped_lanes():
    t, c, r = _loopback_events(range(8), swap={3})
    step = doctor.judge_loopback(t, c, r, wired=list(range(8)), high_ticks=HIGH, low_ticks=LOW)
    assert step.ok is False
    assert step.detail.startswith("DDR lanes swapped on channel 3")
    assert step.data["swapped"] == [3] and "lane order" in step.next_step


def test_loopback_names_dead_channel():
    t, c, r = _loopback_events(range(8), dead={5})
    step = doctor.judge_loopback(t, c, r, wired=list(range(8)), high_ticks=HIGH, low_ticks=LOW)
    assert step.ok is False and step.detail.startswith("dead channel 5")
    assert "cable" in step.next_step


def test_loopback_names_channel_skew():
    t, c, r = _loopback_events(range(4), skew={2: 2})
    step = doctor.judge_loopback(t, c, r, wired=list(range(4)), high_ticks=HIGH, low_ticks=LOW)
    assert step.ok is False
    assert step.detail == ("pin-to-timestamp offset differs between channels: ch 0 +0, "
                           "ch 1 +0, ch 2 +2, ch 3 +0")


def test_soak_names_a_lossy_link():
    ok = dict(seconds=60.0, frames_ok=50_000, frames_bad=0, frames_lost=0, events=1_000_000,
              overflow_lost=5, wanted_s=60.0)
    assert doctor.judge_soak(**ok).ok is True
    step = doctor.judge_soak(**{**ok, "frames_bad": 3, "frames_lost": 2})
    assert step.ok is False
    assert step.detail == "lossy link: 3 frames with bad CRC, 2 frames lost of 50002 in 60.0 s"
    assert doctor.judge_soak(**{**ok, "seconds": 10.0}).ok is False
    assert doctor.judge_soak(**{**ok, "frames_ok": 0}).ok is False


def test_identity_versions():
    ident = {"board": "ecpix5", "protocol_version": 1, "gateware_major": 0, "gateware_minor": 1,
             "channels": 8, "tick_hz": 320e6}
    assert doctor.judge_identity(ident, host_protocol=1, host_gateware=(0, 1)).ok is True
    step = doctor.judge_identity(ident, host_protocol=2, host_gateware=(0, 1))
    assert step.ok is False and "host speaks protocol 2" in step.detail
    step = doctor.judge_identity({**ident, "gateware_minor": 0}, host_protocol=1,
                                 host_gateware=(0, 1))
    assert step.ok is False and "host expects gateware 0.1" in step.detail
    step = doctor.judge_identity("no reply to IDENTIFY after 3 tries")
    assert step.ok is False and "port" in step.next_step


def test_bad_options_one_line(capsys):
    assert main(["doctor", "--port", "/dev/null", "--fault", "lossy-link"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "latscope doctor: error: --fault needs --sim"
    assert main(["doctor", "--sim", "--soak", "-1"]) == 2
    assert "--soak must be 0 or more seconds" in capsys.readouterr().err


@pytest.mark.parametrize("link,speed,full,ok,detail", [
    (True, 1000, True, True, "the PHY reports a link at 1000 Mb/s full duplex"),
    (True, 1000, False, False,
     "Ethernet link must be 1000 Mb/s full duplex, not 1000 Mb/s half duplex"),
    (True, 100, True, False, "Ethernet link must be 1000 Mb/s full duplex, not 100 Mb/s full "
                             "duplex"),
    (True, 100, False, False, "Ethernet link must be 1000 Mb/s full duplex, not 100 Mb/s half "
                              "duplex"),
    (True, 10, True, False, "Ethernet link must be 1000 Mb/s full duplex, not 10 Mb/s full "
                            "duplex"),
    (False, 1000, True, False, "Ethernet link must be 1000 Mb/s full duplex, not down (the PHY "
                               "reports no link)"),
])
def test_ethernet_step_from_the_instruments_status(link, speed, full, ok, detail):
    """The doctor's ``ethernet`` step on an emulated instrument reporting each link state in
    STATUS (through the Transport interface); a failed step fails the verdict (exit 1) with the
    one-line reason and the next step."""
    emu = EmulatedInstrument([], [], [], eth_link=(link, speed, full))
    verdict = doctor.run_doctor(Instrument(EmulatedTransport(emu), reply_timeout=0.2),
                                soak_s=0, edges=4, timeout=0.2)
    steps = {s.name: s for s in verdict.steps}
    assert list(steps) == ["identify", "ethernet", "channels", "loop-back", "link soak"]
    step = steps["ethernet"]
    assert (step.ok, step.detail) == (ok, detail)
    assert step.data["speed_mbps"] == speed and step.data["full_duplex"] == full
    text = format_verdict(verdict)
    assert f"{'PASS' if ok else 'FAIL'}  ethernet   {detail}\n" in text
    if not ok:
        assert verdict.ok is False and "gigabit" in step.next_step


def test_ethernet_step_skipped_without_ethernet():
    step = doctor.judge_ethernet(ethernet_link(0b0000_0001))
    assert step.ok is None and step.detail == "not run: this gateware has no Ethernet link"
    step = doctor.judge_ethernet("no reply to STATUS")
    assert step.ok is False and step.detail == "no STATUS: no reply to STATUS"


def _doctor(capsys, *extra):
    code = main(["doctor", "--sim", "--loopback", "all", "--soak", "1.5", "--json", *extra])
    out = capsys.readouterr().out
    return code, {s["name"]: s for s in json.loads(out)["steps"]}


@pytest.mark.slow
def test_simulated_instrument_passes(capsys):
    code, steps = _doctor(capsys)
    assert code == 0
    # the simulated build is the UART one: no Ethernet link to check
    assert [s["ok"] for s in steps.values()] == [True, None, True, True, True]
    assert steps["loop-back"]["data"]["offset_ticks"] == {str(c): 0 for c in range(8)}
    assert steps["link soak"]["data"]["frames_bad"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("fault,step,words", [
    ("swap-lanes", "loop-back", "DDR lanes swapped on channel 0, 1, 2, 3, 4, 5, 6, 7"),
    ("dead-channel", "loop-back", "dead channel 5"),
    ("lossy-link", "link soak", "lossy link"),
])
def test_simulated_faults_are_named(capsys, fault, step, words):
    code, steps = _doctor(capsys, "--fault", fault)
    assert code == 1
    assert steps[step]["ok"] is False and steps[step]["detail"].startswith(words)
    assert steps[step]["next_step"]
