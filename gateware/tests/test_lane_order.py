"""Lane order of the DDR input (and output), established by simulating Amaranth's vendor lowering.

Expected values come from the simulations themselves, cross-checked by hand against the cell
models (see docs/lane-order.md): on both families ``i[0]`` is the rising-edge sample and ``i[1]``
the falling-edge sample of the same cycle, presented one cycle later; ``o[0]`` is sent first.
All comparisons are exact (0 tolerance): the simulations are cycle-exact and noise-free.
"""

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.gateware import lane_order as lo
from latscope.gateware import model_capture as mc


def _need_simulator():
    reason = lo.simulator_available()
    if reason:
        pytest.skip(f"DDR lane-order simulation needs Verilator and g++: {reason}")


# --- simulation of the lowered netlists (first run compiles ~40 s per family; cached after) -----

@pytest.mark.slow
@pytest.mark.parametrize("family, out_latency, loopback", [
    ("ice40", 1, 5),     # SB_IO DDR output: o[0] captured at the rising edge, sent in that cycle
    ("ecp5", 3, 9),      # ODDRX1F: input register + two pipeline stages (as Lattice's model)
])
def test_lane_order_by_simulation(family, out_latency, loopback):
    _need_simulator()
    report = lo.establish(family, cycles=200, setups=(1250, 3750))
    # i during cycle m = (pad at rising edge of cycle m-1, pad at falling edge of cycle m-1)
    assert report.input.instant_delay == (2, 1)
    assert report.input.earlier_lane == 0
    assert report.input.latency == 1
    assert report.output.first_lane == 0
    assert report.output.slot_delay == (2 * out_latency, 2 * out_latency + 1)
    assert report.output.latency == out_latency
    assert report.loopback_ticks == loopback


@pytest.mark.slow
def test_netlist_is_the_vendor_lowering():
    """The simulated netlists hold the vendor primitives Amaranth's lowering emits."""
    ice40, clk = lo.lowered_verilog("ice40")
    assert clk == "clk12_0__io"
    assert "SB_IO" in ice40 and "SB_DFF" in ice40
    assert ".PIN_TYPE(6'h00)" in ice40            # PIN_INPUT_DDR, no output: the DDR input
    assert ".PIN_TYPE(6'h31)" in ice40            # OUTPUT_DDR_ENABLE_REGISTERED + PIN_INPUT
    assert ".D_IN_1(" in ice40 and ".D_OUT_1(" in ice40
    ecp5, clk = lo.lowered_verilog("ecp5")
    assert clk == "clk25_0__io"
    assert "IDDRX1F" in ecp5 and "ODDRX1F" in ecp5


def test_simulate_rejects_bad_stimulus():
    with pytest.raises(ValueError, match="Setup time must be between 0 and 5000 ps"):
        lo.simulate("ice40", np.zeros(2 * 16 + 2), np.zeros((16, 2)), setup_ps=3000)
    with pytest.raises(ValueError, match="Probe stimulus must be pad levels for 2 \\* cycles"):
        lo.simulate("ice40", np.zeros(10), np.zeros((16, 2)))
    with pytest.raises(ValueError, match="Device family must be one of ice40, ecp5, not 'gw1n'"):
        lo.lowered_verilog("gw1n")


# --- the analysis on synthetic probe runs (negative controls) ----------------------------------

def _run(d0, d1, cycles=64, seed=3):
    rng = np.random.default_rng(seed)
    pad = rng.integers(0, 2, 2 * cycles + 2, dtype=np.uint8)
    i = np.zeros((cycles, 2), np.uint8)
    for lane, d in enumerate((d0, d1)):
        for m in range(cycles):
            i[m, lane] = pad[2 * m - d] if 2 * m - d >= 0 else 0
    o = rng.integers(0, 2, (cycles, 2), dtype=np.uint8)
    out = np.zeros(2 * cycles, np.uint8)
    for m in range(cycles):          # o[1] first, one cycle late: a swapped output
        for lane, s in ((1, 2), (0, 3)):
            if 2 * m + s < len(out):
                out[2 * m + s] = o[m, lane]
    return lo.ProbeRun(pad=pad, o=o, i=i, out=out)


def test_analysis_detects_swapped_input_lanes():
    timing = lo.analyse_input(_run(1, 2))
    assert timing.earlier_lane == 1 and timing.latency == 1
    assert lo.analyse_input(_run(4, 3)) == lo.InputTiming((4, 3), 0, 2)


def test_analysis_rejects_a_pair_split_across_cycles():
    # falling edge of cycle m-2 with rising edge of cycle m-1 (Xilinx "SAME_EDGE" style pairing)
    with pytest.raises(LatscopeError, match="do not hold the rising- and falling-edge samples"):
        lo.analyse_input(_run(3, 2))


def test_analysis_detects_swapped_output_lanes():
    timing = lo.analyse_output(_run(2, 1))
    assert timing == lo.OutputTiming(slot_delay=(3, 2), first_lane=1, latency=1)


# --- the hardware check: self-test loop-back ---------------------------------------------------

@pytest.mark.parametrize("high, low", [(3, 5), (3, 4), (5, 2), (7, 7)])
@pytest.mark.parametrize("offset", [0, 1, 4, 7])
def test_loopback_in_order_and_swapped(high, low, offset):
    times, rising = lo.loopback_edges(high, low, periods=12, offset=offset)
    result = lo.check_loopback(times, rising, high, low)
    assert result.order is lo.LaneOrder.IN_ORDER, result.reason
    assert result.match_in_order == 1.0
    times, rising = lo.loopback_edges(high, low, periods=12, offset=offset, swapped=True)
    result = lo.check_loopback(times, rising, high, low)
    assert result.order is lo.LaneOrder.SWAPPED, result.reason
    assert result.match_swapped == 1.0
    assert result.match_in_order < 0.9


def test_loopback_swap_turns_odd_edges_into_glitches():
    """The signature the check relies on: with lanes exchanged, an edge on an odd tick becomes a
    one-tick glitch (three edges) and an edge on an even tick stays put."""
    good, good_rising = lo.loopback_edges(3, 5, periods=1, offset=0)
    assert list(good) == [2, 5] and list(good_rising) == [True, False]   # pattern from tick 2
    times, rising = lo.loopback_edges(3, 5, periods=1, offset=0, swapped=True)
    assert list(times) == [2, 4, 5, 6]            # the fall at odd tick 5 became 4, 5, 6
    assert list(rising) == [True, False, True, False]


def test_loopback_even_pattern_is_inconclusive():
    times, rising = lo.loopback_edges(4, 6, periods=12, offset=2)
    result = lo.check_loopback(times, rising, 4, 6)
    assert result.order is lo.LaneOrder.INCONCLUSIVE
    assert "use odd high/low tick counts" in result.reason
    assert result.edges_per_lane[1] == 0


def test_loopback_too_short_or_wrong_pattern_is_inconclusive():
    times, rising = lo.loopback_edges(3, 5, periods=2)
    assert lo.check_loopback(times, rising, 3, 5).order is lo.LaneOrder.INCONCLUSIVE
    times, rising = lo.loopback_edges(3, 5, periods=12)
    result = lo.check_loopback(times, rising, 4, 5)
    assert result.order is lo.LaneOrder.INCONCLUSIVE
    assert "neither order explains the edges" in result.reason


def test_loopback_from_the_reference_model_self_test():
    """The front-end's own self-test pattern (reference model, ticks = cycle*2 + lane) looped back
    with a constant delay passes; the same with the two samples of each cycle exchanged fails."""
    high, low, n_cycles = 3, 6, 200
    config = mc.Config(selftest_on=True, selftest_mask=1, selftest_high=high, selftest_low=low)
    raw, _ = mc.filtered_levels(mc.Stimulus([], []), config, channels=1, lanes=2, max_glitch=0,
                                n_cycles=n_cycles)
    level = (raw & 1).astype(np.int8)
    for delay in (0, 3, 6):                          # constant pad-to-pad delay in ticks
        seen = np.concatenate([np.zeros(delay, np.int8), level])[:len(level)]
        for swapped in (False, True):
            x = seen.reshape(-1, 2)[:, ::-1].reshape(-1) if swapped else seen
            change = np.flatnonzero(np.diff(x)) + 1
            result = lo.check_loopback(change, x[change].astype(bool), high, low)
            want = lo.LaneOrder.SWAPPED if swapped else lo.LaneOrder.IN_ORDER
            assert result.order is want, (delay, swapped, result.reason)


def test_check_loopback_validates_arguments():
    with pytest.raises(ValueError, match="must be 1-D arrays of the same length"):
        lo.check_loopback([1, 2, 3], [True, False], 3, 5)
    with pytest.raises(TypeError, match="Edge times must be integers"):
        lo.check_loopback([1.5, 2.5], [True, False], 3, 5)
    with pytest.raises(ValueError, match="non-negative and strictly increasing"):
        lo.check_loopback([4, 2], [True, False], 3, 5)
    with pytest.raises(ValueError, match="High time of the self-test pattern must be an integer "
                                         "of at least 2 ticks, not 1"):
        lo.check_loopback([2, 4], [True, False], 1, 5)
    with pytest.raises(ValueError, match="Low time .* not True"):
        lo.check_loopback([2, 4], [True, False], 3, True)
    with pytest.raises(ValueError, match="Threshold must be in"):
        lo.check_loopback([2, 4], [True, False], 3, 5, threshold=0)


# --- vendor cell models (LATSCOPE_ECP5_CELL_MODELS) ----------------------------------------------

# A stand-in for a Lattice library file: the same style (GSR through a global instance unless
# `mixed_hdl` is defined) and the same IDDRX1F behaviour as latscope's model, written here.
LATTICE_STYLE_IDDRX1F = r"""
`timescale 1 ns / 1 ps
module IDDRX1F(D, SCLK, RST, Q0, Q1);
input D, SCLK, RST;
output Q0, Q1;
parameter GSR = "ENABLED";
reg pos, neg, q0, q1;
tri1 GSR_sig, PUR_sig;
`ifndef mixed_hdl
   assign GSR_sig = GSR_INST.GSRNET;
   assign PUR_sig = PUR_INST.PURNET;
`else
   gsr_pur_assign gsr_pur_assign_inst (GSR_sig, PUR_sig);
`endif
initial begin pos = 0; neg = 0; q0 = 0; q1 = 0; end
always @(posedge SCLK) pos <= (RST | ~GSR_sig) ? 1'b0 : D;
always @(negedge SCLK) neg <= (RST | ~GSR_sig) ? 1'b0 : D;
always @(posedge SCLK) begin q0 <= pos; q1 <= neg; end
assign Q0 = q0;
assign Q1 = q1;
endmodule
"""


def test_vendor_models_replace_latscopes(tmp_path, monkeypatch):
    monkeypatch.delenv(lo.VENDOR_MODELS_ENV, raising=False)
    text, source = lo.ecp5_models()
    assert text == lo.ECP5_MODELS and "documentation" in source
    path = tmp_path / "ecp5u.v"
    path.write_text(LATTICE_STYLE_IDDRX1F)
    monkeypatch.setenv(lo.VENDOR_MODELS_ENV, str(path))
    text, source = lo.ecp5_models()
    assert text.count("module IDDRX1F") == 1 and "module ODDRX1F" in text   # ours replaced
    assert text.startswith("`define mixed_hdl") and "module gsr_pur_assign" in text
    assert source == f"vendor models from {path} (IDDRX1F), latscope's for the other cells"


@pytest.mark.parametrize("content, message", [
    (None, "cannot read it"),
    ("module FOO(); endmodule\n", "defines neither IDDRX1F nor ODDRX1F"),
])
def test_vendor_models_errors(tmp_path, monkeypatch, content, message):
    path = tmp_path / "models.v"
    if content is not None:
        path.write_text(content)
    monkeypatch.setenv(lo.VENDOR_MODELS_ENV, str(path))
    with pytest.raises(LatscopeError, match=message):
        lo.ecp5_models()


@pytest.mark.slow
def test_lane_order_with_lattice_style_models(tmp_path, monkeypatch):
    """The probe runs with a Lattice-style library file in place of latscope's IDDRX1F and gets
    the same input timing (the file's behaviour is the same; what is tested is that such files,
    with their GSR plumbing, build and run)."""
    _need_simulator()
    path = tmp_path / "ecp5u.v"
    path.write_text(LATTICE_STYLE_IDDRX1F)
    monkeypatch.setenv(lo.VENDOR_MODELS_ENV, str(path))
    report = lo.establish("ecp5", cycles=100, setups=(1250,))
    assert report.source.startswith("vendor models from")
    assert report.input.instant_delay == (2, 1) and report.input.earlier_lane == 0
    assert report.loopback_ticks == 9


@pytest.mark.parametrize("order", [(1, 0, 2, 3), (3, 2, 1, 0), (0, 2, 1, 3)])
def test_four_lane_loopback_detects_any_misordering(order):
    """4 lanes (ECP5 2:1 gearing): a pattern of 5 high / 6 low ticks puts edges on every lane;
    in order it is IN_ORDER, with the samples of each cycle rearranged it is SWAPPED (the best
    rearrangement undoes it exactly)."""
    t, r = lo.loopback_edges(5, 6, periods=40, offset=3, lanes=4)
    res = lo.check_loopback(t, r, 5, 6, lanes=4)
    assert res.order is lo.LaneOrder.IN_ORDER and res.match_in_order == 1.0
    assert len(res.edges_per_lane) == 4 and min(res.edges_per_lane) > 0
    t, r = lo.loopback_edges(5, 6, periods=40, offset=3, lanes=4, order=order)
    res = lo.check_loopback(t, r, 5, 6, lanes=4)
    assert res.order is lo.LaneOrder.SWAPPED and res.match_swapped == 1.0


def test_four_lane_loopback_with_multiples_of_four_is_inconclusive():
    t, r = lo.loopback_edges(8, 4, periods=40, lanes=4)
    res = lo.check_loopback(t, r, 8, 4, lanes=4)
    assert res.order is lo.LaneOrder.INCONCLUSIVE and "too few lanes" in res.reason
