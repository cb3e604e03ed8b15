"""Tests of the simulated bench's DUT model, profiles and engines (capture/sim/simbench.py)."""

import math
import os

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.sim import simbench as sb
from latscope.capture.sim.verilator_play import verilator_available

# Table I of the origin paper (seed 002), mean and 3σ in µs, for the cells the profiles take from it
# (Rx PBUF -> rx.copy, Rx UDP -> rx.udp, Tx PBUF -> tx.xmit, Tx UDP -> tx.wire). Retyped from the
# paper so that a typo in a profile file is caught here.
TABLE_I = {
    ("gem", 64): {"rx.copy": (6.84, .33), "rx.udp": (7.48, .35), "tx.xmit": (3.01, .45),
                  "tx.wire": (3.65, .32)},
    ("gem", 256): {"rx.copy": (7.69, .32), "rx.udp": (8.44, .38), "tx.xmit": (4.13, .38),
                   "tx.wire": (4.77, .34)},
    ("gem", 1024): {"rx.copy": (11.45, .31), "rx.udp": (12.09, .34), "tx.xmit": (8.71, .35),
                    "tx.wire": (9.38, .34)},
    ("el-dm", 64): {"rx.copy": (1.75, .17), "rx.udp": (2.95, .20), "tx.xmit": (1.52, .05),
                    "tx.wire": (2.10, .07)},
    ("el-dm", 256): {"rx.copy": (2.70, .18), "rx.udp": (4.13, .21), "tx.xmit": (2.48, .05),
                     "tx.wire": (3.31, .07)},
    ("el-dm", 1024): {"rx.copy": (5.44, .19), "rx.udp": (7.74, .20), "tx.xmit": (6.23, .05),
                      "tx.wire": (7.92, .08)},
    ("el-so", 64): {"rx.copy": (3.32, .19), "rx.udp": (4.53, .23), "tx.xmit": (2.74, .06),
                    "tx.wire": (3.62, .08)},
    ("el-so", 256): {"rx.copy": (8.22, .18), "rx.udp": (9.65, .20), "tx.xmit": (8.02, .05),
                     "tx.wire": (9.18, .08)},
    ("el-so", 1024): {"rx.copy": (27.80, .18), "rx.udp": (30.09, .21), "tx.xmit": (29.05, .06),
                      "tx.wire": (31.07, .08)},
    # Fast-track text: 64 B 1.51 µs, 256 B 2.85 µs, 1024 B unchanged 7.74 µs (3σ: assumption).
    ("fast-track", 64): {"rx.fast": (1.51, None)},
    ("fast-track", 256): {"rx.fast": (2.85, None)},
    ("fast-track", 1024): {"rx.fast": (7.74, None)},
}


def test_shipped_profiles_cover_the_paper():
    names = sb.list_profiles()
    assert names == [f"{family}-{size}" for family in ("gem", "el-dm", "el-so", "fast-track")
                     for size in (64, 256, 1024)]


@pytest.mark.parametrize("family,size", sorted(TABLE_I))
def test_profile_numbers_are_table_i(family, size):
    profile = sb.load_profile(f"{family}-{size}")
    assert profile.size == size
    for stage, (mean, three_sigma) in TABLE_I[(family, size)].items():
        assert profile.stages[stage].mean_us == mean
        if three_sigma is not None:
            assert profile.stages[stage].three_sigma_us == three_sigma
        assert profile.stages[stage].source
    for stage, spec in profile.stages.items():   # every number has a stated source
        assert spec.source, stage


@pytest.mark.parametrize("name", sb.list_profiles())
def test_model_statistics_match_the_profile(name):
    # 20,000 packets. Tolerances: the body (packets without a tail) must have the target mean
    # within 5 standard errors (σ/sqrt(n)) plus 0.5 ns, and the target 3σ within 5 standard errors
    # of a sample standard deviation of a gamma(k=4) body: SE(s)/s = sqrt((2 + 6/k) / (4 n)), i.e.
    # 3.3 % at n = 20,000. Both include the clock-grid re-timing the model compensates.
    run = sb.simulate(name, 20_000, seed=11)
    profile = run.profile
    body = (run.truth["tail_rx"] == 0) & (run.truth["tail_tx"] == 0)
    n = int(body.sum())
    assert n > 19_900
    rel = 5 * math.sqrt((2 + 6 / profile.gamma_shape) / (4 * n))
    for stage, spec in profile.stages.items():
        ns = run.truth[f"stage/{stage}"][body]
        sigma = spec.three_sigma_us * 1000 / 3
        assert abs(ns.mean() - spec.mean_us * 1000) < 5 * sigma / math.sqrt(n) + 0.5, stage
        assert abs(ns.std(ddof=1) / sigma - 1) < rel, stage


def test_tails_have_the_profile_frequency_and_size():
    profile = sb.load_profile("el-dm-64")
    run = sb.simulate(profile, 200_000, seed=5)
    p = sum(t.probability for t in profile.tails)
    for key in ("tail_rx", "tail_tx"):
        hits = int((run.truth[key] > 0).sum())
        # Binomial(n, p): mean n p = 220, sd 14.8; 5 sd either side.
        assert abs(hits - 200_000 * p) < 5 * math.sqrt(200_000 * p * (1 - p)), key
    # A receive tail delays the last stage by at least the tail's minimum beyond the body's range.
    tail = run.truth["tail_rx"] == 1
    udp = run.truth["stage/rx.udp"]
    body_max = udp[run.truth["tail_rx"] == 0].max()
    assert np.all(udp[tail & (run.truth["stage/rx.isr"] > 1000 * profile.tails[0].min_us)]
                  > profile.tails[0].min_us * 1000)
    assert udp.max() > body_max + 1000 * profile.tails[0].min_us


@pytest.mark.parametrize("name", ["gem-64", "el-so-1024", "fast-track-256"])
def test_timelines_are_physical(name):
    run = sb.simulate(name, 3000, seed=2)
    p, t = run.profile, run.truth
    wire = (sb.PREAMBLE_SFD_BYTES + p.size + sb.FCS_BYTES) * 80.0
    assert np.allclose(t["rx_end_ns"] - t["rx_start_ns"], wire)
    assert np.allclose(t["tx_end_ns"] - t["tx_start_ns"], wire)
    # MII edges on the 40 ns clock grid (one phase for the run).
    phase = t["rx_start_ns"][0] % 40.0
    for key in ("rx_start_ns", "rx_end_ns", "tx_start_ns", "tx_end_ns"):
        off = (t[key] - phase) % 40.0
        assert np.all(np.minimum(off, 40.0 - off) < 1e-6), key
    # Inter-frame gap on each direction, one packet in flight, stages in order.
    assert np.all(t["rx_start_ns"][1:] - t["rx_end_ns"][:-1] >= sb.IFG_NS)
    assert np.all(t["tx_start_ns"][1:] - t["tx_end_ns"][:-1] >= sb.IFG_NS)
    assert np.all(t["rx_start_ns"][1:] > t["tx_end_ns"][:-1])
    chain = np.stack([t[f"stage/{s}"] for s in p.rx_chain], axis=1)
    assert np.all(chain[:, 0] > 0) and np.all(np.diff(chain, axis=1) > 0)
    assert np.all(t["stage/tx.wire"] > t["stage/tx.xmit"])
    # The latency in ticks the instrument must report is within one tick of the true latency.
    for stage in p.stages:
        err = t[f"ticks/{stage}"] * run.timing.tick_ns - t[f"stage/{stage}"]
        assert np.all(np.abs(err) < run.timing.tick_ns), stage


def test_stimulus_holds_exactly_the_expected_edges():
    run = sb.simulate("gem-256", 500, seed=4)
    s, t = run.stimulus, run.truth
    assert np.all(np.diff(s.ticks) > 0)
    prev = np.concatenate([[0], s.values[:-1]]).astype(np.int64)
    change = s.values.astype(np.int64) ^ prev
    ticks, channels, rising = [], [], []
    for ch in range(8):
        hit = (change >> ch & 1).astype(bool)
        ticks.append(s.ticks[hit])
        channels.append(np.full(hit.sum(), ch))
        rising.append((s.values[hit] >> ch & 1).astype(bool))
    ticks, channels, rising = map(np.concatenate, (ticks, channels, rising))
    order = np.lexsort((channels, ticks))
    assert np.array_equal(ticks[order], t["time"])
    assert np.array_equal(channels[order], t["channel"])
    assert np.array_equal(rising[order], t["rising"])
    # Ticks are the first sample at or after each exact edge time.
    assert np.all(t["time"] * run.timing.tick_ns >= t["time_ns"] - 1e-6)
    assert np.all((t["time"] - 1) * run.timing.tick_ns < t["time_ns"])
    assert run.n_events == 500 * 14


def test_same_seed_same_run():
    a = sb.simulate("el-dm-64", 200, seed=9)
    b = sb.simulate("el-dm-64", 200, seed=9)
    c = sb.simulate("el-dm-64", 200, seed=10)
    assert np.array_equal(a.truth["time"], b.truth["time"])
    assert not np.array_equal(a.truth["time"], c.truth["time"])


def test_paced_traffic_queues_honestly():
    # 64-byte echo takes ~50 µs with the default 20 µs host turnaround: 50 kpps cannot be kept.
    traffic = sb.Traffic(mode="paced", rate_pps=50_000)
    run = sb.simulate("el-dm-64", 1000, traffic=traffic, seed=1)
    intended = 160.0 + np.arange(1000) * 20_000.0
    assert np.all(run.truth["queue_ns"] >= 0)
    assert run.truth["queue_ns"][-1] > 0
    slow = sb.simulate("el-dm-64", 1000, seed=1, traffic=sb.Traffic(mode="paced", rate_pps=5000))
    assert np.all(slow.truth["queue_ns"] == 0)
    starts = slow.truth["rx_start_ns"] - slow.timing.lead_ticks * slow.timing.tick_ns
    assert np.all(np.abs(starts - (160.0 + np.arange(1000) * 200_000.0)) < 40.0)
    assert intended.shape == (1000,)


def test_bad_arguments_are_rejected_with_clear_messages():
    with pytest.raises(LatscopeError, match=r"packet count must be a positive integer, not 0"):
        sb.simulate("gem-64", 0)
    with pytest.raises(LatscopeError,
                       match=r"traffic mode must be 'echo', 'paced' or 'burst', not 'x'"):
        sb.Traffic(mode="x")
    with pytest.raises(LatscopeError, match=r"burst must be a whole number of requests >= 1, "
                                            r"not 0"):
        sb.Traffic(mode="burst", burst=0)
    with pytest.raises(LatscopeError, match=r"app busy time must be >= 0 µs, not -1"):
        sb.Traffic(mode="burst", app_busy_us=-1)
    with pytest.raises(LatscopeError, match=r"paced traffic needs a rate above 0"):
        sb.Traffic(mode="paced")
    with pytest.raises(LatscopeError, match=r"lanes must be 1, 2 or 4, not 3"):
        sb.InstrumentTiming(lanes=3)


GOOD = """
[profile]
name = "t"
cpu_hz = 666_666_667
markers = { m0 = "rx.isr", m1 = "rx.copy", m4 = "tx.send" }
rx_chain = ["rx.isr", "rx.copy"]
reply_after = "rx.copy"
gamma_shape = 4.0
correlation = 0.5
marker_pulse_ns = 90.0
app = { mean_us = 0.4, three_sigma_us = 0.06 }

[size.128]
"rx.isr" = { mean_us = 0.7, three_sigma_us = 0.05 }
"rx.copy" = { mean_us = 2.0, three_sigma_us = 0.2 }
"tx.wire" = { mean_us = 2.5, three_sigma_us = 0.1 }
"""


def _write(tmp_path, text):
    path = tmp_path / "custom.toml"
    path.write_text(text)
    return str(path)


def test_profile_from_a_file(tmp_path):
    path = _write(tmp_path, GOOD)
    profile = sb.load_profile(path)
    assert profile.name == "custom-128" and profile.rx_chain == ("rx.isr", "rx.copy")
    run = sb.simulate(path + ":128", 50)
    assert run.n_events == 50 * 10


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace("[profile]", "[profile"), r"is not valid TOML"),
    (lambda t: t.replace('reply_after = "rx.copy"', ""), r"missing 'reply_after'"),
    (lambda t: t.replace('m1 = "rx.copy"', 'm9 = "rx.copy"'), r"'m9' is not one of m0, m1"),
    (lambda t: t.replace('m1 = "rx.copy"', 'm1 = "rx.bogus"'), r"unknown meaning 'rx.bogus'"),
    (lambda t: t.replace('"rx.copy" = { mean_us = 2.0', '"rx.copy" = { mean_us = 0.5'),
     r"rx_chain stage means must increase"),
    (lambda t: t.replace('"tx.wire" = { mean_us = 2.5, three_sigma_us = 0.1 }', ""),
     r"missing stage 'tx.wire'"),
    (lambda t: t.replace("three_sigma_us = 0.1 }", "three_sigma_us = 0.01 }"),
     r"3σ of 0.01 µs is below what the 40 ns clock grid alone gives"),
    (lambda t: t.replace("correlation = 0.5", "correlation = 1.5"),
     r"correlation must be within \[0, 1\), not 1.5"),
    (lambda t: t.replace("gamma_shape = 4.0", 'gamma_shape = "four"'),
     r"'gamma_shape' must be float, not 'four'"),
    (lambda t: t + '"rx.udp" = { mean_us = 3.0, three_sigma_us = 0.2 }\n',
     r"unknown or unused stage 'rx.udp'"),
    (lambda t: t.replace('m4 = "tx.send"', 'm4 = "tx.xmit"'),
     r"stage 'tx.wire' needs a marker carrying 'tx.send'"),
])
def test_bad_profiles_give_clear_errors(tmp_path, edit, message):
    path = _write(tmp_path, edit(GOOD))
    with pytest.raises(sb.ProfileError, match=message) as info:
        sb.load_profile(path)
    assert isinstance(info.value, LatscopeError)
    assert "custom.toml" in str(info.value)


def test_unknown_profile_names_the_shipped_ones(tmp_path):
    with pytest.raises(sb.ProfileError, match=r"unknown profile 'nope-64'; shipped profiles: "
                                              r"gem-64, gem-256, gem-1024, el-dm-64"):
        sb.load_profile("nope-64")
    with pytest.raises(sb.ProfileError, match=r"no size 65; it has 64, 256, 1024"):
        sb.load_profile("gem-65")
    with pytest.raises(sb.ProfileError, match=r"no size 65; it has 64, 256, 1024"):
        sb.load_profile(str(_shipped("gem")) + ":65")
    with pytest.raises(sb.ProfileError, match=r"does not exist"):
        sb.load_profile(str(tmp_path / "missing.toml"))


def _shipped(family):
    return os.path.join(os.path.dirname(sb.__file__), "profiles", f"{family}.toml")


def test_compare_to_truth_detects_missing_and_moved_events():
    run = sb.simulate("el-dm-64", 100, seed=2)
    t = run.truth
    ok = sb.compare_to_truth(t["time"] + 32, t["channel"], t["rising"], t)
    assert ok["ok"] and ok["offset"] == 32 and ok["max_error"] == 0
    drop = np.ones(len(t["time"]), bool)
    drop[500] = False
    missing = sb.compare_to_truth(t["time"][drop], t["channel"][drop], t["rising"][drop], t)
    assert not missing["ok"] and missing["missing"] == 1
    moved = t["time"].copy()
    moved[700] += 2
    late = sb.compare_to_truth(moved, t["channel"], t["rising"], t)
    assert not late["ok"] and late["max_error"] == 2


def test_truth_file_beside_the_capture(tmp_path):
    from latscope.capture.files import capfile
    run = sb.simulate("gem-64", 20, seed=1)
    capture = tmp_path / "c.lsc"
    target = run.save_truth(capture, engine="model", tick_offset=32)
    assert target == capfile.truth_path(capture)
    with np.load(target) as npz:
        assert np.array_equal(npz["simbench/time"], run.truth["time"])
        assert np.array_equal(npz["simbench/stage_rx.udp"], run.truth["stage/rx.udp"])
        meta = __import__("json").loads(str(npz["simbench/meta"]))
    assert meta["profile"] == "gem-64" and meta["tick_offset"] == 32
    assert meta["engine"] == "model"


def _full_path_run(engine_name, packets):
    """Simulate, serve on a pty, capture with the session code over SerialTransport."""
    from latscope.capture.link import session
    from latscope.capture.link.transport import SerialTransport
    from latscope.capture.sim.ptyserve import PtyServer
    run = sb.simulate("gem-64", packets, seed=7)
    engine = sb.open_engine(run, engine_name)
    server = PtyServer(engine)
    transport = SerialTransport(server.path)
    try:
        # The Amaranth simulator runs ~10^3 cycles/s: a reply takes seconds on a loaded machine
        # (CI runs two test workers on two cores), not the 0.5 s a real instrument gets.
        instrument = session.Instrument(transport,
                                        reply_timeout=10.0 if engine_name == "amaranth" else 0.5)
        identity = instrument.identify()
        assert identity["tick_hz"] == run.timing.tick_hz
        assert identity["board"] == "sim"
        session.configure(instrument, session.CaptureConfig(), identity)
        instrument.arm()
        got = []
        deadline = 120.0
        import time
        start = time.monotonic()
        while sum(len(r.time) for r in got) < run.n_events and time.monotonic() - start < deadline:
            got += instrument.read(0.1)
    finally:
        transport.close()
        server.close()
    time_ = np.concatenate([r.time for r in got])
    channel = np.concatenate([r.channel for r in got])
    rising = np.concatenate([r.rising for r in got])
    losses = [loss for r in got for loss in r.losses]
    return run, engine, time_, channel, rising, losses


def test_ground_truth_recovered_through_the_pty_model_engine():
    run, engine, time_, channel, rising, losses = _full_path_run("model", 300)
    assert not losses
    result = sb.compare_to_truth(time_, channel, rising, run.truth, tolerance_ticks=1)
    assert result["ok"], result
    assert result["missing"] == 0 and result["extra"] == 0
    assert result["offset"] == engine.tick_offset     # the model knows where time zero was


@pytest.mark.slow
@pytest.mark.skipif(not verilator_available(),
                    reason="needs latscope.gateware.top and a C++ compiler for Verilator")
def test_ground_truth_recovered_through_the_pty_real_gateware():
    # The real gateware (Verilator) must report every expected edge within one tick of the truth.
    run, engine, time_, channel, rising, losses = _full_path_run("verilator", 300)
    assert engine.name == "verilator"
    assert not losses
    result = sb.compare_to_truth(time_, channel, rising, run.truth, tolerance_ticks=1)
    assert result["ok"], result


def _gateware_available():
    try:
        import latscope.gateware.top  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _gateware_available(), reason="needs latscope.gateware.top")
def test_ground_truth_recovered_through_the_pty_amaranth_simulator():
    # The real gateware in the Amaranth simulator (~10^3 cycles/s): three packets, 42 events.
    run, engine, time_, channel, rising, losses = _full_path_run("amaranth", 3)
    assert engine.name == "amaranth"
    assert not losses
    result = sb.compare_to_truth(time_, channel, rising, run.truth, tolerance_ticks=1)
    assert result["ok"], result


def test_amaranth_engine_refuses_long_runs():
    run = sb.simulate("gem-64", 200)
    with pytest.raises(LatscopeError, match=r"use it for at most 2000 events \(this run has "
                                            r"2800\); use the verilator or model engine"):
        sb.AmaranthEngine(run)


def test_open_engine_rejects_unknown_names():
    run = sb.simulate("gem-64", 2)
    with pytest.raises(LatscopeError, match=r"engine must be one of auto, verilator, amaranth, "
                                            r"model, not 'fast'"):
        sb.open_engine(run, "fast")


def test_open_engine_checks_a_given_simulator_binary(tmp_path):
    run = sb.simulate("gem-64", 2)
    missing = tmp_path / "harness"
    with pytest.raises(LatscopeError, match=r"^the Verilator engine is not available: no "
                                            r"simulator binary at .*harness$"):
        sb.open_engine(run, "verilator", binary=missing)
    messages = []
    engine = sb.open_engine(run, "auto", binary=missing, log=messages.append)
    assert engine.name == "model"
    assert messages == [f"simulated bench: Verilator engine unavailable (no simulator binary at "
                        f"{missing}); using the gateware's reference models"]


def test_latscope_capture_sim_in_one_step(tmp_path, capsys):
    from latscope import cli
    from latscope.capture.files import capfile
    out = tmp_path / "sim.lsc"
    status = cli.main(["capture", "--sim", "el-dm-64", "--packets", "40", "--sim-engine",
                       "model", "--sim-seed", "3", "-o", str(out), "--quiet"])
    assert status == 0, capsys.readouterr().err
    with capfile.open_capture(out) as cap:
        assert cap.metadata["instrument"]["simulated"] is True
        assert cap.metadata["instrument"]["engine"] == "model"
        assert cap.metadata["instrument"]["board"] == "sim"      # the identity is kept
        assert cap.metadata["label"] == "el-dm-64"
        assert cap.markers == sb.load_profile("el-dm-64").markers
        events = cap.events()
        truth = cap.truth()["simbench"]
        # Every event of the 40 packets, the last packet's markers and echo included.
        assert len(events.time) == 40 * 14 == len(truth["time"])
        check = sb.compare_to_truth(events.time, events.channel, events.rising, truth)
        import json
        meta = json.loads(str(truth["meta"]))
        del events
    assert check["ok"] and check["max_error"] == 0
    assert meta["engine"] == "model" and meta["seed"] == 3
    assert check["offset"] == meta["tick_offset"]


def test_latscope_capture_sim_rejects_a_bad_profile(tmp_path, capsys):
    from latscope import cli
    status = cli.main(["capture", "--sim", "gem-65", "-o", str(tmp_path / "x.lsc")])
    assert status == 2
    assert "no size 65; it has 64, 256, 1024" in capsys.readouterr().err
