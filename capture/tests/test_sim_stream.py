"""A simulated run produced block by block (``capture/sim/sim_stream.py``): a one-block run is the
simulation itself, blocks tile time, the ground truth is written as blocks are produced, every
engine's capture of a multi-block run equals its ground truth, and a run of any length starts at
once and answers the host at once."""

import time
import tracemalloc

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture import record
from latscope.capture.files import capfile
from latscope.capture.link import session
from latscope.capture.sim import sim_stream, simbench
from latscope.capture.sim.sim_load import simulate_load
from latscope.capture.sim.sim_port import SimulatedSource
from latscope.capture.sim.sim_stream import SimStream, TruthWriter


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 100 packets (40 requests under load), so that short runs have several."""
    monkeypatch.setattr(sim_stream, "BLOCK_PACKETS", 100)
    monkeypatch.setattr(sim_stream, "LOAD_BLOCK_PACKETS", 40)


def test_a_one_block_run_is_the_simulation_itself():
    """Expected: every truth array and the stimulus equal ``simulate``'s with the same seed."""
    run = simbench.simulate("gem-64", 300, seed=5)
    (block,) = SimStream("gem-64", 300, seed=5).blocks()
    assert set(block.truth) == set(run.truth)
    for key, value in run.truth.items():
        np.testing.assert_array_equal(block.truth[key], value, err_msg=key)
    np.testing.assert_array_equal(block.stimulus.ticks, run.stimulus.ticks)
    np.testing.assert_array_equal(block.stimulus.values, run.stimulus.values)


def test_a_one_block_run_under_load_is_simulate_load_itself():
    run = simulate_load("fast-track-64", 30, "bg30", seed=2)
    (block,) = SimStream("fast-track-64", 30, seed=2, load="bg30").blocks()
    np.testing.assert_array_equal(block.truth["time"], run.truth["time"])
    assert block.wire[0]["frames"] == run.wire[0]["frames"]
    assert block.wire[1]["frames"] == run.wire[1]["frames"]


@pytest.mark.parametrize("traffic", [None, simbench.Traffic(mode="paced", rate_pps=20_000)])
def test_blocks_tile_time_and_number_packets_on(small_blocks, traffic):
    """Blocks of 100 packets: ticks strictly increase across blocks, packets are numbered 0..n-1
    in order, the event count is the promised one, and paced traffic keeps its schedule (request
    k starts at or after k / rate)."""
    stream = SimStream("el-dm-64", 350, seed=3, traffic=traffic)
    promised = stream.n_events
    blocks = list(stream.blocks())
    assert [b.n_packets for b in blocks] == [100, 100, 100, 50]
    ticks = np.concatenate([b.stimulus.ticks for b in blocks])
    assert np.all(np.diff(ticks) > 0)
    packets = np.concatenate([b.truth["packet"] for b in blocks])
    assert sorted(set(packets.tolist())) == list(range(350))
    assert stream.n_events == promised == sum(b.n_events for b in blocks) == 350 * 14
    if traffic is not None:
        starts = np.concatenate([b.truth["rx_start_ns"] for b in blocks])
        lead = stream.timing.lead_ticks * stream.timing.tick_ns
        assert np.all(starts - lead >= np.arange(350) * 1e9 / traffic.rate_pps)


def test_blocks_under_load_number_requests_and_frames_on(small_blocks):
    """Under load: the requests' sequence numbers in the frames run 0..n-1 over the blocks, and
    each block's frame numbers follow the previous blocks'."""
    from latscope.gateware.model_sniffer import parse_frame
    stream = SimStream("fast-track-64", 100, seed=4, load="bg30")
    assert stream.n_events is None
    seen, first = [], [0, 0]
    for block in stream.blocks():
        for d in (0, 1):
            assert block.wire[d].get("first_index", 0) == first[d]
            first[d] += len(block.wire[d]["frames"])
        seen += [parse_frame(f)["seq"] for f, k in zip(block.wire[0]["frames"],
                                                        block.wire[0]["probe"], strict=True)
                 if k >= 0]
    assert seen == list(range(100))
    assert stream.n_events == stream.events_done > 0


def test_truth_writer_writes_what_the_blocks_held(tmp_path, small_blocks):
    """The assembled .truth.npz holds the concatenated truth of every block (exact), summed
    counts, and the metadata; its parts folder is gone."""
    out = tmp_path / "x.lsc"
    writer = TruthWriter(str(out))
    stream = SimStream("fast-track-64", 90, seed=1, load="bg30", truth=writer)
    blocks = list(stream.blocks())
    writer.close({**stream.meta, "engine": "none"})
    assert [p.name for p in tmp_path.iterdir()] == ["x.lsc.truth.npz"]
    with np.load(capfile.truth_path(out)) as npz:
        for key in ("time", "channel", "rising", "time_ns", "stage/node.e2e", "dropped"):
            want = np.concatenate([b.truth[key] for b in blocks])
            np.testing.assert_array_equal(npz[f"simbench/{key.replace('/', '_')}"], want)
        assert int(npz["simbench/bg_frames"]) == sum(int(b.truth["bg_frames"]) for b in blocks)
        assert '"engine": "none"' in str(npz["simbench/meta"])


def test_truth_writer_closed_while_an_engine_appends(tmp_path):
    """An engine appends each block's truth from its own thread while the capture closes the
    writer (Ctrl-C, a limit): every key of the file must hold the same whole blocks, and an
    append after the close changes nothing. (Before the writer's lock, `latscope capture --sim`
    stopped with Ctrl-C once left `time` a block shorter than `channel`.)"""
    import threading
    out = tmp_path / "x.lsc"
    writer = TruthWriter(str(out))
    block = 5000
    keys = [f"k{i}" for i in range(40)]
    appended = []

    def engine():
        n = 0
        while not stop.is_set():
            writer.append({key: np.full(block, n, np.int64) for key in keys})
            appended.append(n)
            n += 1

    stop = threading.Event()
    thread = threading.Thread(target=engine)
    thread.start()
    while len(appended) < 3:
        time.sleep(0.001)
    writer.close({"engine": "none"})
    writer.append({key: np.zeros(block, np.int64) for key in keys})   # after the close: ignored
    stop.set()
    thread.join()
    with np.load(capfile.truth_path(out)) as npz:
        lengths = {len(npz[f"simbench/{key}"]) for key in keys}
        assert len(lengths) == 1
        n_blocks = lengths.pop() // block
        assert n_blocks >= 3
        for key in keys:
            np.testing.assert_array_equal(npz[f"simbench/{key}"],
                                          np.repeat(np.arange(n_blocks), block))


def test_a_huge_run_starts_at_once_without_allocating():
    """10^12 packets: the stream promises its event count and yields its first block at once;
    the memory allocated is that of one block (expected: under 100 MB; a whole run of 10^12
    packets would need terabytes)."""
    tracemalloc.start()
    try:
        started = time.process_time()
        stream = SimStream("gem-64", 10 ** 12)
        first = next(stream.blocks())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    with pytest.raises(LatscopeError, match="played only once"):
        next(stream.blocks())
    assert stream.n_events == 14 * 10 ** 12 and first.n_packets == sim_stream.BLOCK_PACKETS
    assert peak < 100e6 and time.process_time() - started < 10


def test_packets_and_seed_are_checked():
    with pytest.raises(LatscopeError, match="seed must be a non-negative integer, not -1"):
        SimStream("gem-64", 10, seed=-1)
    with pytest.raises(LatscopeError, match="packet count must be a positive integer"):
        SimStream("gem-64", 0)


@pytest.mark.parametrize("load", [None, "bg30", "bg60-burst"])
def test_model_engine_capture_of_several_blocks_equals_the_truth(tmp_path, small_blocks, load):
    """record() from the simulated bench, 130 packets in blocks of 100 (40 requests in blocks
    of 40 under load): the capture holds every event of the truth file, each at its tick
    (compare_to_truth: ok, max_error 0), and under load the FPGA counted every background
    frame of the truth."""
    out = tmp_path / "s.lsc"
    packets = 130 if load is None else 100
    source = SimulatedSource("fast-track-64", packets=packets, seed=7, load=load,
                             engine="model")
    outcome = record.record(source, str(out))
    assert outcome.exit_status == 0, outcome.reason
    with capfile.open_capture(out) as cap:
        events = cap.events()
        truth = cap.truth()["simbench"]
        check = simbench.compare_to_truth(events.time, events.channel, events.rising, truth)
        counters = cap.frame_counters() if load else None
    assert check["ok"] and check["max_error"] == 0 and check["decoded"] == len(truth["time"]), \
        check
    assert outcome.events == source.port.run.n_events
    if load:
        bg = counters[(counters["direction"] == 0) & (counters["cls"] == 2)]
        assert int(bg[-1]["frames"]) == int(truth["bg_frames"])


def test_verilator_capture_of_several_blocks_equals_the_truth(tmp_path, small_blocks):
    """The real gateware in Verilator, 230 packets in blocks of 100: exact against the truth.
    Skips where the simulated instrument cannot be built."""
    pytest.importorskip("amaranth")
    out = tmp_path / "v.lsc"
    source = SimulatedSource("gem-64", packets=230, seed=3, engine="verilator")
    try:
        outcome = record.record(source, str(out))
    except LatscopeError as error:
        if "not available" in str(error):
            pytest.skip(f"Verilator engine unavailable: {error}")
        raise
    assert outcome.exit_status == 0, outcome.reason
    with capfile.open_capture(out) as cap:
        events = cap.events()
        check = simbench.compare_to_truth(events.time, events.channel, events.rising,
                                          cap.truth()["simbench"])
    assert check["ok"] and check["max_error"] == 0 and check["decoded"] == 230 * 14, check


def test_a_long_run_under_load_answers_at_once(tmp_path):
    """10^6 requests beside 60 % load: the capture is configured and recording within seconds
    (before, the whole run was simulated first and ARM went unanswered), and a stop request
    ends it with a finalised file whose events match the start of the truth."""
    out = tmp_path / "long.lsc"
    started = time.monotonic()
    recording = []

    def stop():
        recording.append(time.monotonic())
        return "enough" if recording[-1] - recording[0] > 2.0 else None
    outcome = record.record(SimulatedSource("fast-track-64", packets=10 ** 6, load="bg60",
                                            engine="model"), str(out), stop=stop)
    assert recording[0] - started < 15, "the capture did not start recording in time"
    assert outcome.exit_status == 0 and outcome.reason == "enough" and outcome.events > 0
    with capfile.open_capture(out) as cap:
        events = cap.events()
        truth = cap.truth()["simbench"]
    n = len(events.time)
    assert len(truth["time"]) >= n
    np.testing.assert_array_equal(events.time - events.time[0],
                                  truth["time"][:n] - truth["time"][0])


@pytest.mark.slow
def test_hundred_thousand_requests_under_load_equal_the_truth(tmp_path):
    """10^5 requests at 60 % load (~9·10^6 events, a few minutes on the model engine): every
    event at its tick and every background frame counted."""
    out = tmp_path / "big.lsc"
    source = SimulatedSource("fast-track-64", packets=100_000, load="bg60", engine="model")
    outcome = record.record(source, str(out), limits=session.Limits())
    assert outcome.exit_status == 0, outcome.reason
    with capfile.open_capture(out) as cap:
        events = cap.events()
        truth = cap.truth()["simbench"]
        check = simbench.compare_to_truth(events.time, events.channel, events.rising, truth)
        counters = cap.frame_counters()
    assert check["ok"] and check["max_error"] == 0 and check["decoded"] == len(truth["time"]), \
        check
    bg = counters[(counters["direction"] == 0) & (counters["cls"] == 2)]
    assert int(bg[-1]["frames"]) == int(truth["bg_frames"])


def test_a_bench_that_cannot_start_leaves_no_truth_behind(tmp_path):
    """A bad serving rate is refused before anything is served: no truth file and no folder of
    truth parts is left beside the output."""
    out = tmp_path / "r0.lsc"
    with pytest.raises(LatscopeError):
        record.record(SimulatedSource("gem-64", packets=10, engine="model", rate=0.0), str(out))
    assert list(tmp_path.iterdir()) == []
