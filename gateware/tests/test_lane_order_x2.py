"""Lane order of the ECP5 2:1 gearing (gateware/lane_order_x2.py).

The simulation against Lattice's IDDRX2F/ODDRX2F/ECLKSYNCB/CLKDIVF models runs only where those
models are installed (LATSCOPE_ECP5_CELL_MODELS, see docs/lane-order.md); the analysis itself is
tested everywhere on synthetic runs built from the timing the models gave (2026-11-23).
"""

import os

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.gateware import lane_order as lo
from latscope.gateware import lane_order_x2 as x2

# What Lattice's models gave (docs/lane-order.md): Q_j during capture cycle m is the pad at
# instant r_m - 6 + j; D_j presented in cycle m is on the pad after instant r_m + 14 + j.
MODEL_INPUT_DELAY = (6, 5, 4, 3)
MODEL_OUTPUT_SLOT = (14, 15, 16, 17)


def synthetic_run(*, n=600, phase=0, input_delay=MODEL_INPUT_DELAY,
                  output_slot=MODEL_OUTPUT_SLOT, seed=3):
    """An X2Run as the probe would record it for the given delays: the capture clock rises at
    instants 24 + phase + 4i (even: CLKDIVF switches on rising edge-clock edges), Q and the
    output pad follow the stated delays."""
    rng = np.random.default_rng(seed)
    pad = rng.integers(0, 2, n).astype(np.uint8)
    d = rng.integers(0, 2, (n, 4)).astype(np.uint8)
    sclk = np.zeros(n, int)
    q = np.zeros((n, 4), int)
    out = np.zeros(n, int)
    rises = [r for r in range(24 + phase, n, 4)]
    for r in rises:
        sclk[r + 1:r + 3] = 1                    # high just before edges r+1 and r+2
        for j in range(4):
            if 0 <= r - input_delay[j] and r + 4 < n:
                q[r + 1:r + 5, j] = pad[r - input_delay[j]]
            if r + output_slot[j] < n and r + 3 < n:
                out[r + output_slot[j]] = d[r + 3, j]
    return x2.X2Run(pad=pad, d=d, sclk=sclk, q=q, out=out)


def test_analysis_recovers_the_model_timing():
    t = x2.analyse(synthetic_run())
    assert t.input_delay == MODEL_INPUT_DELAY and t.in_order
    assert t.output_slot == MODEL_OUTPUT_SLOT and t.output_in_order
    assert t.lane0_edge == "rising"
    assert t.loopback_ticks == 14 + 1 + 6      # s_0 + 1 + d_0 (module docstring of analyse)


def test_analysis_detects_reversed_lanes():
    t = x2.analyse(synthetic_run(input_delay=(3, 4, 5, 6), output_slot=(17, 16, 15, 14)))
    assert not t.in_order and not t.output_in_order


def test_analysis_rejects_a_word_split_across_cycles():
    """A sample that no single delay explains (lane 2 from two different instants) is refused."""
    run = synthetic_run()
    q = run.q.copy()
    q[200:, 2] = 1 - q[200:, 2]
    with pytest.raises(LatscopeError, match="not explained by exactly one delay"):
        x2.analyse(x2.X2Run(pad=run.pad, d=run.d, sclk=run.sclk, q=q, out=run.out))


def test_without_vendor_models_the_check_says_what_to_install(monkeypatch):
    monkeypatch.delenv(lo.VENDOR_MODELS_ENV, raising=False)
    with pytest.raises(LatscopeError, match="set LATSCOPE_ECP5_CELL_MODELS to a Verilog file "
                                            "holding IDDRX2F, ODDRX2F, ECLKSYNCB and CLKDIVF"):
        x2.vendor_models()


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get(lo.VENDOR_MODELS_ENV),
                    reason="Lattice's ECP5 simulation models are not installed "
                           "(set LATSCOPE_ECP5_CELL_MODELS; docs/lane-order.md)")
@pytest.mark.skipif(lo.simulator_available() is not None,
                    reason=f"no simulator: {lo.simulator_available()}")
def test_lattice_models_give_lane_zero_earliest():
    """The probe (the board's edge_clocks, GearedInput, GearedOutput) lowered for ECP5 and
    simulated against Lattice's models, random data, two setup times, ~590 capture cycles
    each: exact match of every sample, lane 0 earliest, D0 sent first."""
    timing, source = x2.establish()
    assert "Lattice models" in source
    assert timing.in_order and timing.output_in_order
    assert timing.input_delay == MODEL_INPUT_DELAY
    assert timing.output_slot == MODEL_OUTPUT_SLOT
    assert timing.lane0_edge == "rising"
    assert timing.cycles_checked > 500
