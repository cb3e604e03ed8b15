"""The frame line-rate bench (``latscope/bench/framebench.py``): its stimulus checked by independent
tools (scapy parses every template, ``zlib.crc32`` its FCS), its accounting shown to catch a lost
frame, and (slow) short runs of the real ECPIX-5 frame-capture gateware in Verilator at 100 Mb/s
line rate with every frame accounted for."""

import shutil
import zlib

import numpy as np
import pytest

from latscope.bench import framebench as fb
from latscope.bench import framebench_edges as fe
from latscope.gateware.codec import COUNTER_DTYPE

scapy_all = pytest.importorskip("scapy.all", reason="scapy builds the bench's frames")


@pytest.mark.parametrize("interface", ["mii", "rmii"])
def test_templates_are_minimum_frames_that_scapy_reads(interface):
    for d in (0, 1):
        templates = fb.frame_templates(d, 16, interface)
        assert len(templates) == 16
        for k, (frame, seq_pos, early) in enumerate(templates):
            assert len(frame) == fb.FRAME_BYTES
            assert zlib.crc32(frame[:-4]).to_bytes(4, "little") == frame[-4:]
            pkt = scapy_all.Ether(frame[:-4])
            if seq_pos < 0:
                assert pkt.type == fb.EXPERIMENTAL_ETHERTYPE and k == 15
                continue
            udp = pkt[scapy_all.UDP]
            # the sequence number's place: 4 bytes into the UDP payload (protocol.py)
            assert seq_pos == len(frame) - 4 - len(bytes(udp.payload)) + 4
            if k == 0:
                assert (udp.dport if d == 0 else udp.sport) == fb.PROBE_PORT
            assert early == ((k % 4) if interface == "rmii" and d == 0 else 0)
        # the reference rule table gives: probe, UDP background, non-IP
        classes = fb.frame_classes(templates, d)
        assert classes[0] == 1 and classes[-1] == 2 and set(classes[1:-1]) == {0}


def test_scenario_rejects_bad_parameters():
    with pytest.raises(ValueError, match="Interface must be 'mii' or 'rmii', not 'gmii'"):
        fb.Scenario("x", frames=10, interface="gmii")
    with pytest.raises(ValueError, match="Link must be 'uart' or 'eth', not 'usb'"):
        fb.Scenario("x", frames=10, link="usb")
    with pytest.raises(ValueError, match="Frames must be an integer in 1..2\\*\\*31-1, not 0"):
        fb.Scenario("x", frames=0)
    with pytest.raises(ValueError, match="Capture divider must be an integer in 1..256"):
        fb.Scenario("x", frames=10, capture_divider=0)


def _counters(n, per_class, dropped=0):
    rows = np.zeros(len(per_class) * 2, COUNTER_DTYPE)
    i = 0
    for d in (0, 1):
        for cls, frames in enumerate(per_class):
            rows[i] = (d, cls, n, frames, 0, dropped if cls == 1 else 0,
                       fb.FRAME_BYTES * frames)
            i += 1
    return rows


def test_accounting_finds_a_lost_frame():
    """The bookkeeping on made-up records: 32 frames each way (2 probes, 28 background, 2
    non-IP) with every probe recorded is fully accounted; one probe record missing without a
    ``dropped`` count is one unaccounted frame; counted as dropped, it is accounted."""
    sc = fb.Scenario("x", frames=32)
    templates = [fb.frame_templates(d, 16) for d in (0, 1)]
    classes = [fb.frame_classes(templates[d], d) for d in (0, 1)]
    stats = dict(rx_frames=32, tx_frames=32, sim_ps=10**9, rx_symbols=5376, tx_symbols=5376)

    def account(probes_recorded, dropped):
        checker = fb.FrameChecker(sc, templates, classes)
        for c in _counters(32, [28, 2, 2], dropped):
            checker.last_counters[(int(c["direction"]), int(c["cls"]))] = c
        checker.recorded[:, 1] = probes_recorded
        return fb.account(sc, checker, classes, stats, (5000, 20833, 40000, 39996), 0, 1.0)

    full = account(2, 0)
    assert (full.unaccounted, full.mismatches) == (0, 0)
    assert full.recorded == (2, 2) and full.counted_only == (30, 30) and full.dropped == (0, 0)
    assert account(1, 0).unaccounted == 2          # one per direction
    assert account(1, 1).unaccounted == 0
    assert account(1, 1).dropped == (1, 1)


def _need_tools():
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to build the Verilator model")


@pytest.mark.slow
def test_line_rate_over_uart_records_probes_and_counts_the_rest():
    """2 x 20,000 64-byte frames at 100 Mb/s line rate, minimum gap, through the ECPIX-5
    frame-capture core in Verilator with every domain at its own clock (capture at the real
    200 MHz), over the UART's 1.2 MB/s: every probe (1 in 16) recorded with the index, class,
    length, FCS flag and sequence number its frame was sent with; the rest in the COUNTERS
    totals; nothing dropped; zero unaccounted. Expected counts come from the stimulus."""
    _need_tools()
    r = fb.run_scenario(fb.Scenario("uart-probes", frames=20_000))
    assert r.frames == (20_000, 20_000)
    assert r.stream_errors == {} and r.mismatches == 0 and r.unaccounted == 0
    assert r.recorded == (1250, 1250)                    # 20,000 / 16 probes each way
    assert r.counted_only == (18_750, 18_750) and r.dropped == (0, 0)
    # line rate: 168 MII clocks per frame (8 + 64 + 12 bytes), 40 ns (RX) and 39.996 ns (TX)
    assert r.traffic_s == pytest.approx(20_000 * 168 * 40e-9, rel=1e-6)


@pytest.mark.slow
def test_recording_everything_over_the_uart_drops_only_what_it_counts():
    """Every class recorded: 2 x 148,810 FRAME records/s cannot fit the UART, so the record
    queue overflows; each record it has no room for is counted as ``dropped`` in its class's
    COUNTERS, and recorded + dropped is every frame (capture domain at 200 MHz / 8 to keep the
    run short; it carries no frame data)."""
    _need_tools()
    r = fb.run_scenario(fb.Scenario("uart-all", frames=4000, record="all", capture_divider=8))
    assert r.stream_errors == {} and r.mismatches == 0 and r.unaccounted == 0
    assert min(r.dropped) > 1000
    assert all(rec + drop == 4000 for rec, drop in zip(r.recorded, r.dropped, strict=True))
    assert r.link_use > 0.5


def _harness_sample_tick(change_ps, period_ps, lanes):
    """Brute force of framebench.cpp's lane sampling: walk the capture edges and lanes in time
    order until a sample time is at or after the change (``Level::at``: ``t >= changed_at``)."""
    n = 1
    while True:
        for j in range(lanes):
            if (n - 1) * period_ps + (period_ps * j + period_ps // 2) // lanes >= change_ps:
                return (n - 1) * lanes + j
        n += 1


@pytest.mark.parametrize("period_ps", [5000, 15000, 40000])
def test_stimulus_ticks_follow_the_harness_lane_sampling(period_ps):
    """Every level change time around a few capture cycles (each ps, plus MII clock edges + 1
    ps) maps to the tick the harness's own sampling rule gives, at the real 200 MHz and at the
    200 MHz / 3 and / 8 the bench also runs (ticks 3 and 8 times coarser)."""
    times = np.concatenate([np.arange(0, 3 * period_ps + 1),
                            40_000 * np.arange(1, 50) + 1, 39_996 * np.arange(1, 50) + 1])
    got = fe.stimulus_ticks(times, period_ps, 4)
    want = [_harness_sample_tick(int(t), period_ps, 4) for t in times]
    assert got.tolist() == want


def test_edge_check_doctests():
    import doctest
    result = doctest.testmod(fe)
    assert result.attempted >= 2 and result.failed == 0


def _synthetic_run(frames=6, period=5376, high=4608, first=1000):
    """Stimulus and decoded edges of ``frames`` MII frames on two channels, in ticks: frame k
    rises at ``first + k * period`` (TX 7 ticks later) and falls ``high`` ticks after."""
    want, got = {}, {}
    for d in (0, 1):
        rise = first + 7 * d + period * np.arange(frames)
        t = np.ravel(np.column_stack([rise, rise + high]))
        r = np.tile([True, False], frames)
        want[d], got[d] = (t, r), (t.copy(), r.copy())
    return want, got


def test_compare_edges_finds_a_missing_an_extra_and_a_shifted_edge():
    """Made-up edges of one channel, 6 frames: identical ones match; one falling edge removed is
    1 missing; one more rising edge mid-gap is 1 extra; a rising edge 1 tick late is 1 shifted
    (not a missing plus an extra); the expected counts are the edits made."""
    want, got = _synthetic_run()
    wt, wr = want[0]
    window = 5376 // 2
    assert fe.compare_edges(wt, wr, *got[0], window=window) == dict(missing=0, extra=0,
                                                                    shifted=0)
    keep = np.ones(len(wt), bool)
    keep[5] = False                                      # frame 2's falling edge
    assert fe.compare_edges(wt, wr, wt[keep], wr[keep], window=window) == dict(
        missing=1, extra=0, shifted=0)
    more_t = np.insert(wt, 4, wt[3] + 300)               # a rising edge in frame 1's gap
    more_r = np.insert(wr, 4, True)
    assert fe.compare_edges(wt, wr, more_t, more_r, window=window) == dict(
        missing=0, extra=1, shifted=0)
    late = wt.copy()
    late[6] += 1                                         # frame 3 starts one tick late
    assert fe.compare_edges(wt, wr, late, wr, window=window) == dict(
        missing=0, extra=0, shifted=1)
    twice_t, twice_r = np.insert(wt, 0, wt[0]), np.insert(wr, 0, True)
    assert fe.compare_edges(wt, wr, twice_t, twice_r, window=window)["extra"] == 1


def test_check_edges_ties_records_to_their_stimulus_edges():
    """check_edges on a made-up run (period 5000 ps, 4 lanes, reset released at 400,000 ps:
    time 0 is stimulus tick 316): the stimulus in ps, the decoded events at stimulus tick -
    316, every frame recorded. Exact: 0 mismatches. A decoded rising edge one tick late is 1
    shifted edge and 1 record off its edge (frame_edge_times); a missing falling edge is 1
    missing and moves that frame's end to the next frame's end (1 record off); an edge on a
    channel nobody drove is counted."""
    from latscope.gateware.boards import CHANNEL_ROLES
    from latscope.gateware.codec import FRAME_DTYPE
    frames, channel_of = 6, {0: CHANNEL_ROLES.index("rx_dv"), 1: CHANNEL_ROLES.index("tx_en")}
    # MII frame k: DV high from 168 k to 168 k + 144 PHY clocks (40 ns RX, 39.996 ns TX)
    rows = []
    for d, clock in ((0, 40_000), (1, 39_996)):
        for k in range(frames):
            rows += [(400_000_000 + clock * 168 * k + 1, d, 1),
                     (400_000_000 + clock * (168 * k + 144) + 1, d, 0)]
    stim = np.array(rows, fe.STIMULUS_EDGE_DTYPE)
    ticks = fe.stimulus_ticks(stim["ps"].astype(np.int64), 5000, 4) - 316
    order = np.argsort(ticks, kind="stable")
    time = ticks[order]
    channel = np.array([channel_of[d] for d in stim["direction"]], np.uint8)[order]
    rising = (stim["level"] == 1)[order]
    records = np.zeros(2 * frames, FRAME_DTYPE)
    records["direction"] = np.repeat([0, 1], frames)
    records["frame_index"] = np.tile(np.arange(frames), 2)

    def check(t, c, r):
        return fe.check_edges(stim, 5000, 4, t, c, r, records, channel_of, fb.RESET_PS)

    exact = check(time, channel, rising)
    assert exact["offset"] == exact["first_offset"] == -316
    assert exact["mismatches"] == 0
    late = time.copy()
    k = np.flatnonzero((channel == channel_of[1]) & rising)[2]
    late[k] += 1
    off = check(late, channel, rising)
    assert (off["shifted"], off["records_off"], off["mismatches"]) == (1, 1, 2)
    keep = np.ones(len(time), bool)
    keep[np.flatnonzero((channel == channel_of[0]) & ~rising)[3]] = False
    gone = check(time[keep], channel[keep], rising[keep])
    assert (gone["missing"], gone["records_off"], gone["mismatches"]) == (1, 1, 2)
    stray = check(np.append(time, time[-1] + 5), np.append(channel, 5).astype(np.uint8),
                  np.append(rising, True))
    assert (stray["other_channels"], stray["mismatches"]) == (1, 1)


@pytest.mark.slow
def test_edges_at_line_rate_agree_with_the_frame_records():
    """2 x 20,000 64-byte frames at 100 Mb/s line rate over the Ethernet link model, every class
    recorded and the RX_DV/TX_EN rising and falling edges captured at the real 200 MHz (1.25 ns
    ticks): every frame recorded; each of the 80,000 edges exactly on the tick the harness's
    level change gives (framebench_edges.stimulus_ticks, time 0 at the first capture cycle out of
    reset: no tolerance); each FRAME record's start and end (capture.frames.frame_edge_times)
    on its frame's edges; no edge lost; 0 unaccounted. Expected values come from the stimulus."""
    _need_tools()
    r = fb.run_scenario(fb.Scenario("eth-all-edges", frames=20_000, link="eth", record="all",
                                    capture_divider=1, edges=True))
    assert r.frames == (20_000, 20_000) and r.recorded == (20_000, 20_000)
    assert r.stream_errors == {} and r.mismatches == 0 and r.dropped == (0, 0)
    assert r.edge_check["offset"] == r.edge_check["first_offset"] == -316    # 79 cycles x 4
    assert r.edge_mismatches == 0 and r.edges_lost == 0 and r.unaccounted == 0


@pytest.mark.slow
def test_edges_over_the_uart_are_lost_only_where_counted():
    """Edges on over the UART at line rate (2 x 10,000 frames, probes recorded, capture at
    200 MHz / 8: 10 ns ticks): ~1.2 MB/s of edge tokens beside the records overflow the front
    end's FIFO. Every edge missing is one the OVERFLOW records count (no edge extra or off its
    tick), the frames are all accounted (recorded, dropped-and-counted or counted), and the only
    unaccounted items are the lost edges themselves (and FRAME records whose k-th rising edge,
    by the section 8 rule, moved because earlier edges were lost)."""
    _need_tools()
    r = fb.run_scenario(fb.Scenario("uart-probes-edges", frames=10_000, link="uart",
                                    record="probes", capture_divider=8, edges=True))
    c = r.edge_check
    assert r.edges_lost > 0 and c["missing"] == r.edges_lost
    assert c["extra"] == c["shifted"] == c["other_channels"] == 0
    assert r.mismatches == 0 and r.frames_unaccounted == 0
    assert all(rec + drop == 625 for rec, drop in zip(r.recorded, r.dropped, strict=True))
    assert r.counted_only == (9375, 9375)
    assert r.unaccounted == r.edges_lost + r.edge_mismatches
    assert set(r.stream_errors) == {"losses"}
