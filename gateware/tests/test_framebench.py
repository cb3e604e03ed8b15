"""The frame line-rate bench (``gateware/framebench.py``): its stimulus checked by independent
tools (scapy parses every template, ``zlib.crc32`` its FCS), its accounting shown to catch a lost
frame, and (slow) short runs of the real ECPIX-5 frame-capture gateware in Verilator at 100 Mb/s
line rate with every frame accounted for."""

import shutil
import zlib

import numpy as np
import pytest

from latscope.capture.frames import COUNTER_DTYPE
from latscope.gateware import framebench as fb

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
        classes = fb._classes(templates, d)
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
    classes = [fb._classes(templates[d], d) for d in (0, 1)]
    stats = dict(rx_frames=32, tx_frames=32, sim_ps=10**9, rx_symbols=5376, tx_symbols=5376)

    def account(probes_recorded, dropped):
        checker = fb._Checker(sc, templates, classes)
        for c in _counters(32, [28, 2, 2], dropped):
            checker.last_counters[(int(c["direction"]), int(c["cls"]))] = c
        checker.recorded[:, 1] = probes_recorded
        return fb._account(sc, checker, classes, stats, (5000, 20833, 40000, 39996), 0, 1.0)

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
