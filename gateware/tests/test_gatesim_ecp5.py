"""Gate-level equivalence on the ECPIX-5 (gateware/gatesim_ecp5.py): the synth_ecp5 netlist of the
shipped 1.25 ns top (IDDRX2F gearing, Ethernet link) sends the same UART bytes at the same times,
and drives its other outputs alike, as the RTL through a whole session (slow); the RTL session
itself captures every stimulus edge at its own tick; our own gearing models reproduce the lane
timing of Lattice's models; and the harness pieces on their own."""

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.link.stream import StreamDecoder
from latscope.gateware import gatesim, gatesim_ecp5
from latscope.gateware.codec import parse_identify
from latscope.gateware.lane_order import simulator_available
from latscope.gateware.model_delay import DelayfModel
from latscope.gateware.protocol import DELAY_TAPS, Opcode, Status


def test_board_timing_follows_the_pll_parameters():
    """Expected values from the PLL arithmetic in gateware/boards.py: the edge clock is 100 MHz /
    CLKI_DIV 1 * CLKFB_DIV 4 = 400 MHz (half period 1,250 ps = one tick); the link clock is the
    x1 PLL's CLKOS, 480 MHz VCO / 10 = 48 MHz, half period 10,416.7 ps rounded to 10,417 by our
    model; the UART bit is 4 link cycles. Exact integers."""
    t = gatesim_ecp5.board_timing("ecpix5")
    assert (t.tick_ps, t.lanes, t.capture_ps) == (1250, 4, 5000)
    assert (t.sync_ps, t.tx_bit_ps, t.rx_bit_ps) == (20834, 83336, 83336)
    x1 = gatesim_ecp5.board_timing("ecpix5-x1")
    assert (x1.tick_ps, x1.lanes, x1.capture_ps) == (3125, 2, 6250)   # 160 MHz, DDR
    with pytest.raises(LatscopeError, match="for ECP5 boards, not 'icebreaker'"):
        gatesim_ecp5.board_timing("icebreaker")


def test_session_stimulus_covers_the_cases():
    stim, counts = gatesim_ecp5.session_stimulus("ecpix5")
    timing = gatesim_ecp5.board_timing("ecpix5")
    times = [t for t, _, _ in stim]
    assert times == sorted(set(times))
    pin_changes = [(t, p) for (t, p, _), (_, q, _) in zip(stim[1:], stim[:-1], strict=True)
                   if p != q]
    rx_changes = [t for (t, _, r), (_, _, s) in zip(stim[1:], stim[:-1], strict=True) if r != s]
    # pins change half a tick after a tick edge, never on one; UART RX never on a link edge
    assert pin_changes and all(t % timing.tick_ps == timing.tick_ps // 2 for t, _ in pin_changes)
    assert rx_changes and all(t % (timing.sync_ps // 2) for t in rx_changes)
    ops = [op for op, _ in gatesim_ecp5.session_commands("ecpix5")]
    assert {Opcode.IDENTIFY, Opcode.STATUS, Opcode.SET_EDGES, Opcode.SET_GLITCH, Opcode.SELFTEST,
            Opcode.SET_NET, Opcode.SET_DELAY, Opcode.RESET_TIME, Opcode.ARM, 0x3F} == set(ops)
    assert counts["commands"] == len(ops) + 2
    assert counts["same_tick"] > 100 and counts["near"] > 100
    assert counts["edge_changes"] > 3000          # random edges plus the overflow burst
    assert all(any(p >> c & 1 for _, p, _ in stim) for c in range(8))
    # the shipped ecpix5 build has delay lines: every cell set up, one lowered (a reload), all
    # back at the load value before the first pin change
    settings = gatesim_ecp5.delay_settings("ecpix5")
    assert {c for c, taps in settings if taps > 0} == set(range(8))
    assert (0, DELAY_TAPS - 1) in settings and (0, 5) in settings
    assert settings[-8:] == [(c, 0) for c in range(8)]
    assert ops.count(Opcode.SET_DELAY) == len(settings)
    assert gatesim_ecp5.delay_settings("ecpix5-x1") == []


def test_read_delay_controls_keys_by_channel(tmp_path):
    """The model's lines as Verilator writes them for the RTL (hierarchy) and the flattened
    netlist (one escaped name) give the same records; an unknown DELAYF is refused."""
    (tmp_path / "rtl").mkdir()
    (tmp_path / "rtl" / "delayf.txt").write_text(
        "5000 tb.dut.ch_x2.ch_delay_12 1 0 0\n4000 tb.dut.ch_x2.ch_delay_1 0 0 0\n")
    assert gatesim_ecp5.read_delay_controls(tmp_path, "rtl") == [(4000, 1, 0, 0, 0),
                                                                 (5000, 12, 1, 0, 0)]
    assert gatesim_ecp5.read_delay_controls(tmp_path, "netlist") == []
    (tmp_path / "rtl" / "delayf.txt").write_text("1 tb.dut.other 1 0 0\n")
    with pytest.raises(LatscopeError, match="outside the channel delay lines: tb.dut.other"):
        gatesim_ecp5.read_delay_controls(tmp_path, "rtl")


def test_cell_library_is_yosys_models_plus_ours_labelled(tmp_path):
    text = gatesim_ecp5.cell_library(tmp_path).read_text()
    for yosys_cell in ("TRELLIS_FF", "TRELLIS_IO", "LUT4", "CCU2C", "TRELLIS_DPR16X4",
                       "FD1S3AX", "OFS1P3DX", "IB", "OBZ"):
        assert len(re_modules(text, yosys_cell)) == 1, yosys_cell
    for ours in ("DP16KD", "EHXPLLL", "ECLKSYNCB", "CLKDIVF", "IDDRX2F", "ODDRX2F", "IDDRX1F",
                 "ODDRX1F", "DELAYF"):
        assert len(re_modules(text, ours)) == 1, ours
    assert "module DP16KD: replaced by latscope's own model" in text
    assert text.count("latscope's own behavioural model") >= 3
    assert "(* blackbox *)" not in text


def re_modules(text, name):
    import re
    return re.findall(rf"^\s*module\s+{name}\s*\(", text, re.M)


def test_testbench_connects_the_top_by_port_name():
    design = ("module latscope(clk100_0__io, rst_0__io, latscope_ch_0__io, uart_0__tx__io, "
              "uart_0__rx__io, latscope_selftest_0__io, rgb_led_0__g__io);\n"
              "  input clk100_0__io;\n  input rst_0__io;\n  input [7:0] latscope_ch_0__io;\n"
              "  output uart_0__tx__io;\n  input uart_0__rx__io;\n"
              "  output latscope_selftest_0__io;\n  output rgb_led_0__g__io;\nendmodule\n")
    tb = gatesim_ecp5.testbench(design, gatesim_ecp5.board_timing("ecpix5"))
    assert ".latscope_ch_0__io(pins_w)" in tb and ".uart_0__rx__io(rx_w)" in tb
    assert ".rst_0__io(1'b1)" in tb                      # PinsN: high is released
    assert "wire [63:0] observed = {o_latscope_selftest_0__io}" in tb
    with pytest.raises(LatscopeError, match="no port"):
        gatesim_ecp5.testbench(design.replace("uart_0__rx__io", "x"),
                               gatesim_ecp5.board_timing("ecpix5"))


def test_compare_outputs_names_the_first_difference():
    a = [(100, 0x1), (200, 0x0)]
    assert gatesim_ecp5.compare_outputs(a, a) == 2
    with pytest.raises(AssertionError, match="at output change 1: rtl 0x0 at 200 ps, netlist "
                                             "0x0 at 201 ps"):
        gatesim_ecp5.compare_outputs(a, [(100, 0x1), (201, 0x0)])
    with pytest.raises(AssertionError, match="netlist has 1 output changes, rtl 2"):
        gatesim_ecp5.compare_outputs(a, a[:1])


_NO_SIM = simulator_available()


@pytest.mark.slow
@pytest.mark.skipif(_NO_SIM is not None, reason=f"no simulator: {_NO_SIM}")
def test_own_gearing_models_reproduce_lattice_lane_timing():
    """The X2 lane-order probe on OUR IDDRX2F/ODDRX2F/ECLKSYNCB/CLKDIVF models gives exactly what
    Lattice's models gave on 2026-11-23 (docs/lane-order.md): Q_j from instant r_m - 6 + j,
    D_j out after r_m + 14 + j, loop-back 21 ticks. Exact integers."""
    t = gatesim_ecp5.check_gearing_models()
    assert t.input_delay == (6, 5, 4, 3) and t.in_order and t.lane0_edge == "rising"
    assert t.output_slot == (14, 15, 16, 17) and t.output_in_order
    assert t.loopback_ticks == 21 and t.cycles_checked > 500


def _edges(pin_changes, tick_ps):
    """Per-channel edges ``(tick, channel, rising)`` of the stimulus, in tick then channel order."""
    out, prev = [], 0
    for t, pins in pin_changes:
        k = (t - tick_ps // 2) // tick_ps
        for c in range(8):
            if (pins ^ prev) >> c & 1:
                out.append((k, c, bool(pins >> c & 1)))
        prev = pins
    return out


@pytest.fixture(scope="module")
def ecpix5_rtl(tmp_path_factory):
    if _NO_SIM is not None:
        pytest.skip(f"no simulator: {_NO_SIM}")
    work = tmp_path_factory.mktemp("gatesim-ecp5")
    gatesim_ecp5.synthesize("ecpix5", work)
    stim, counts = gatesim_ecp5.session_stimulus("ecpix5")
    frames, outputs = gatesim_ecp5.simulate("ecpix5", work, "rtl", stim, counts["end_ps"])
    return work, stim, counts, frames, outputs


@pytest.mark.slow
def test_ecpix5_rtl_session_is_a_real_session(ecpix5_rtl):
    """The reference run did what the session says: every command answered (the unknown opcode
    refused), IDENTIFY names the board, the burst overflowed the FIFO; and every stimulus edge
    before the first loss came out on its own channel and direction at its own tick, one constant
    offset from the pin (the 4-lane gearing in order through the whole top)."""
    work, _, counts, frames, outputs = ecpix5_rtl
    assert all(f.framing_ok for f in frames)
    decoder = StreamDecoder(lanes=4)
    result = decoder.feed(bytes(f.value for f in frames))
    replies = {r.command_seq: r for r in result.replies}
    ops = [op for op, _ in gatesim_ecp5.session_commands("ecpix5")]
    assert sorted(replies) == list(range(counts["commands"]))
    assert parse_identify(replies[0].data)["board"] == "ecpix5"
    unknown = ops.index(0x3F)
    assert replies[unknown].status == Status.UNKNOWN_OPCODE
    assert all(r.status == Status.OK for s, r in replies.items() if s != unknown), \
        {s: (r.opcode, r.status) for s, r in replies.items()}
    assert decoder.counters["frames_bad"] == 0
    overflow = [loss for loss in result.losses if loss.cause == "overflow" and loss.lost > 0]
    assert overflow
    # every edge before the first loss, exactly
    timing = gatesim_ecp5.board_timing("ecpix5")
    expected = _edges(counts["pin_changes"], timing.tick_ps)
    first_loss = min(loss.first_time for loss in overflow)
    got = sorted(zip(result.time.tolist(), result.channel.tolist(), result.rising.tolist(),
                     strict=True))
    offset = got[0][0] - expected[0][0]
    shifted = [(k + offset, c, r) for k, c, r in expected if k + offset < first_loss]
    assert [e for e in got if e[0] < first_loss] == shifted
    assert len(shifted) > 1000
    # same-tick edges on different channels, and different lanes of one capture cycle
    ticks = np.array([e[0] for e in shifted])
    assert np.sum(np.diff(ticks) == 0) > 50
    cycles = ticks // 4
    assert np.sum((np.diff(cycles) == 0) & (np.diff(ticks) > 0)) > 50
    # the self-test drove its pin (ODDRX2F) while on
    assert len(outputs) > 10
    # SET_DELAY reached the cells: Lattice's DELAYF counter (model_delay), stepped through each
    # cell's recorded LOADN/MOVE/DIRECTION changes, settles at every setting of the session in
    # order, and the cells are at their load value before the first pin change
    controls = gatesim_ecp5.read_delay_controls(work, "rtl")
    expected = {c: [] for c in range(8)}
    for c, taps in gatesim_ecp5.delay_settings("ecpix5"):
        expected[c].append(taps)
    assert settled_settings(controls) == expected
    first_pin = counts["pin_changes"][0][0]
    assert controls and max(t for t, *_ in controls) < first_pin


def settled_settings(controls):
    """Per channel, the counter values the cell's counter settled at (the value before each drop,
    and the last), from its control changes."""
    cells = {c: DelayfModel() for c in range(8)}
    values = {c: [0] for c in range(8)}
    for _, c, loadn, move, direction in controls:
        cells[c].step(loadn=loadn, move=move, direction=direction)
        if cells[c].counter != values[c][-1]:
            values[c].append(cells[c].counter)
    return {c: [v for k, v in enumerate(seq) if k + 1 == len(seq) or seq[k + 1] < v]
            for c, seq in values.items()}


@pytest.mark.slow
def test_ecpix5_netlist_equals_rtl(ecpix5_rtl):
    work, stim, counts, reference, ref_outputs = ecpix5_rtl
    frames, outputs = gatesim_ecp5.simulate("ecpix5", work, "netlist", stim, counts["end_ps"])
    assert gatesim.compare_uart(reference, frames, names=("rtl", "netlist")) == len(reference)
    assert gatesim_ecp5.compare_outputs(ref_outputs, outputs) == len(ref_outputs)
    # the delay controller drove the DELAYF cells alike, change by change
    controls = gatesim_ecp5.read_delay_controls(work, "rtl")
    assert len(controls) > 2 * 400            # at least the steps up (model: 2 changes each)
    assert gatesim_ecp5.read_delay_controls(work, "netlist") == controls
