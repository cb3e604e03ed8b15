"""The ECP5 EHXPLLL helper: divider sets checked against the sysCLOCK rules and against prjtrellis'
``ecppll``, and the instance it makes."""

import pytest
from amaranth.hdl import Signal

from latscope.gateware.boards import BOARDS
from latscope.gateware.eth.board import ETH_PLL
from latscope.gateware.pll import EhxplllPlan, ehxplll

# Reference outputs of prjtrellis' ecppll (libtrellis/tools/ecppll.cpp at commit 73bd411, built
# outside the repo with g++ and boost program_options, run 2026-11-24):
#   ecppll -i 100 -o 125 --clkout1 125 --phase1 90 -f eth.v
#     -> CLKI_DIV 4, CLKFB_DIV 5, CLKOP_DIV 5, VCO 625; clkout1 div 5, 125 MHz, 90 degrees;
#        eth.v: CLKOP_CPHASE 2, CLKOS_CPHASE 3, CLKOS_FPHASE 2
#   ecppll -i 100 -o 200  -> CLKI_DIV 1, CLKFB_DIV 2, CLKOP_DIV 3, 200 MHz, VCO 600
#   ecppll -i 100 -o 400  -> CLKI_DIV 1, CLKFB_DIV 4, CLKOP_DIV 1, 400 MHz, VCO 400
#   ecppll -i 100 -o 160 --clkout1 48 -> CLKI_DIV 5, CLKFB_DIV 8, CLKOP_DIV 4, VCO 640;
#        clkout1 div 13, 49.2308 MHz (ecppll prefers a VCO near 600 MHz and so misses 48 MHz:
#        latscope's CLKOP_DIV 3, VCO 480 MHz, gives 48 MHz exactly)
ECPPLL_REFERENCE = [
    # (dividers, CLKOP MHz, VCO MHz, CLKOS MHz or None)
    (dict(CLKI_DIV=4, CLKFB_DIV=5, CLKOP_DIV=5, CLKOS_DIV=5), 125, 625, 125),
    (dict(CLKI_DIV=1, CLKFB_DIV=2, CLKOP_DIV=3), 200, 600, None),
    (dict(CLKI_DIV=1, CLKFB_DIV=4, CLKOP_DIV=1), 400, 400, None),
    (dict(CLKI_DIV=5, CLKFB_DIV=8, CLKOP_DIV=4, CLKOS_DIV=13), 160, 640, 640 / 13),
]


@pytest.mark.parametrize("params,clkop_mhz,vco_mhz,clkos_mhz", ECPPLL_REFERENCE)
def test_frequencies_agree_with_ecppll(params, clkop_mhz, vco_mhz, clkos_mhz):
    plan = EhxplllPlan(100e6, params)
    # exact: every value is a small integer ratio (ecppll prints floats; 49.2308 = 640 / 13)
    assert plan.clkop_hz == clkop_mhz * 1e6
    assert plan.vco_hz == vco_mhz * 1e6
    assert plan.clkos_hz == (None if clkos_mhz is None else pytest.approx(clkos_mhz * 1e6,
                                                                          rel=1e-12))


def test_ethernet_pll_is_ecppll_choice_and_phase():
    # ecppll picks the same dividers for 100 -> 125 MHz as ETH_PLL.
    plan = EhxplllPlan(100e6, ETH_PLL)
    assert {k: ETH_PLL[k] for k in ("CLKI_DIV", "CLKFB_DIV", "CLKOP_DIV", "CLKOS_DIV")} == \
        ECPPLL_REFERENCE[0][0]
    # 90 degrees of 125 MHz = 2 ns. ecppll puts CLKOP at CPHASE 2 (its 180-degree habit) and
    # CLKOS at 3 + FPHASE 2: CLKOS - CLKOP = 1.25 VCO periods. ETH_PLL keeps CLKOP at zero phase
    # (CPHASE = DIV - 1 = 4) and CLKOS at 5 + 2/8: the same 1.25 periods of 1.6 ns.
    ecppll_steps = (3 - 2) + 2 / 8
    assert ecppll_steps / plan.vco_hz == pytest.approx(2e-9, abs=1e-18)
    assert plan.clkos_delay_s == pytest.approx(2e-9, abs=1e-18)


def test_shipped_plans():
    # Hand arithmetic of docs/boards.md: 100 / 5 * 8 = 160, * 3 = 480, / 10 = 48;
    # 100 / 1 * 4 = 400, * 2 = 800 (edge clock).
    x1 = EhxplllPlan(100e6, BOARDS["ecpix5-x1"].pll)
    assert (x1.pfd_hz, x1.clkop_hz, x1.vco_hz, x1.clkos_hz) == (20e6, 160e6, 480e6, 48e6)
    assert x1.clkos_delay_s == 0
    ecpix5 = BOARDS["ecpix5"]
    assert EhxplllPlan(ecpix5.input_hz, ecpix5.pll).clkos_hz == ecpix5.sync_hz
    eclk = EhxplllPlan(ecpix5.input_hz, ecpix5.eclk_pll)
    assert (eclk.pfd_hz, eclk.clkop_hz, eclk.vco_hz, eclk.clkos_hz) == \
        (100e6, ecpix5.eclk_hz, 800e6, None)


@pytest.mark.parametrize("params,message", [
    # 100 MHz / 64 = 1.5625 MHz: below the 3.125 MHz PFD minimum
    (dict(CLKI_DIV=64, CLKFB_DIV=80, CLKOP_DIV=4),
     r"EHXPLLL PFD frequency 1\.5625 MHz is outside 3\.125\.\.400 MHz"),
    # 100 * 4 * 3 = 1200 MHz VCO
    (dict(CLKI_DIV=1, CLKFB_DIV=4, CLKOP_DIV=3),
     r"EHXPLLL VCO frequency 1200 MHz is outside 400\.\.800 MHz"),
    # 100 * 8 = 800 MHz CLKOP (VCO 800 is legal, the output is not)
    (dict(CLKI_DIV=1, CLKFB_DIV=8, CLKOP_DIV=1),
     r"EHXPLLL CLKOP frequency 800 MHz is outside 3\.125\.\.400 MHz"),
    (dict(CLKI_DIV=5, CLKFB_DIV=81, CLKOP_DIV=3),
     r"EHXPLLL CLKFB_DIV must be an integer in 1\.\.80, not 81"),
    (dict(CLKI_DIV=5, CLKFB_DIV=8, CLKOP_DIV=3, CLKOS_DIV=0),
     r"EHXPLLL CLKOS_DIV must be an integer in 1\.\.128, not 0"),
    (dict(CLKI_DIV=5, CLKFB_DIV=8), r"EHXPLLL parameter CLKOP_DIV is missing"),
    (dict(CLKI_DIV=5, CLKFB_DIV=8, CLKOP_DIV=3, CLKOS_FPHASE=1),
     r"EHXPLLL CLKOS phase given without CLKOS_DIV"),
    (dict(CLKI_DIV=5, CLKFB_DIV=8, CLKOP_DIV=3, CLKOS_DIV=10, CLKOS_FPHASE=8),
     r"EHXPLLL CLKOS_FPHASE must be in 0\.\.7, not 8"),
    (dict(CLKI_DIV=5, CLKFB_DIV=8, CLKOP_DIV=3, CLKOS2_DIV=3),
     r"Unknown EHXPLLL parameters \['CLKOS2_DIV'\]"),
])
def test_rejects_out_of_range(params, message):
    with pytest.raises(ValueError, match=message):
        EhxplllPlan(100e6, params)


def test_instance_parameters():
    clki, clkop, clkos, locked = Signal(), Signal(), Signal(), Signal()
    inst = ehxplll(EhxplllPlan(100e6, ETH_PLL), clki=clki, clkop=clkop, clkos=clkos,
                   locked=locked)
    assert inst.type == "EHXPLLL"
    # nextpnr derives the output constraints from these attributes: computed, not typed
    assert dict(inst.attrs) == {"FREQUENCY_PIN_CLKI": "100", "FREQUENCY_PIN_CLKOP": "125",
                                "FREQUENCY_PIN_CLKOS": "125", "ICP_CURRENT": "12",
                                "LPF_RESISTOR": "8", "MFG_ENABLE_FILTEROPAMP": "1",
                                "MFG_GMCREF_SEL": "2"}
    p = inst.parameters
    assert (p["CLKI_DIV"], p["CLKFB_DIV"], p["CLKOP_DIV"], p["CLKOP_CPHASE"]) == (4, 5, 5, 4)
    assert (p["CLKOS_DIV"], p["CLKOS_CPHASE"], p["CLKOS_FPHASE"]) == (5, 5, 2)
    assert p["FEEDBK_PATH"] == "CLKOP"
    assert inst.ports["CLKFB"][0] is clkop and inst.ports["CLKOP"] == (clkop, "o")
    assert inst.ports["CLKOS"] == (clkos, "o") and inst.ports["LOCK"] == (locked, "o")
    # without CLKOS: no CLKOS parameters, attribute or port
    eclk = ehxplll(EhxplllPlan(100e6, BOARDS["ecpix5"].eclk_pll), clki=clki, clkop=clkop,
                   locked=locked)
    assert "CLKOS" not in eclk.ports and "CLKOS_DIV" not in eclk.parameters
    assert eclk.attrs["FREQUENCY_PIN_CLKOP"] == "400" and "FREQUENCY_PIN_CLKOS" not in eclk.attrs
    with pytest.raises(ValueError, match="CLKOS must be connected exactly when the plan has "
                                         "CLKOS_DIV"):
        ehxplll(EhxplllPlan(100e6, ETH_PLL), clki=clki, clkop=clkop, locked=locked)
