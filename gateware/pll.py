"""The ECP5 sysCLOCK PLL (``EHXPLLL``): one place that checks a divider set and makes the instance.

# Ref: Lattice FPGA-DS-02012 (ECP5/ECP5-5G family data sheet), "sysCLOCK PLL Timing": f_PFD
# 3.125..400 MHz, f_VCO 400..800 MHz, f_OUT 3.125..400 MHz; Lattice FPGA-TN-02200 (ECP5 sysCLOCK
# PLL/DCS/DCC usage guide): CLKI_DIV 1..128, CLKFB_DIV 1..80, CLKOP/CLKOS_DIV 1..128, a phase step
# of CPHASE (one VCO period) and FPHASE (1/8 VCO period). prjtrellis' ``ecppll`` (libtrellis/tools/
# ecppll.cpp) computes with the same relations: f_PFD = f_in / CLKI_DIV, f_VCO = f_PFD * CLKFB_DIV *
# CLKOP_DIV (feedback from CLKOP), f_out = f_VCO / DIV.

Every ECP5 clock of latscope comes from :func:`ehxplll`: the capture and link clocks of
``ecpix5-x1`` (:class:`~latscope.gateware.boards.BoardTop`), the link and edge clocks of
``ecpix5`` and the Ethernet clocks (:mod:`latscope.gateware.eth.board`). They differ only in the
dividers and in whether CLKOS is used and how late it is; the ``FREQUENCY_PIN_*`` attributes
nextpnr derives its clock constraints from are computed here from the dividers, never typed.
"""

from dataclasses import dataclass

from amaranth.hdl import Const, Instance

__all__ = ["PFD_HZ", "VCO_HZ", "OUTPUT_HZ", "EhxplllPlan", "ehxplll"]

#: Phase-frequency detector, VCO and output frequency ranges, Hz (FPGA-DS-02012).
PFD_HZ = (3.125e6, 400e6)
VCO_HZ = (400e6, 800e6)
OUTPUT_HZ = (3.125e6, 400e6)
#: Divider ranges (FPGA-TN-02200; the same loops as ecppll's search).
_DIVIDER_RANGES = {"CLKI_DIV": (1, 128), "CLKFB_DIV": (1, 80), "CLKOP_DIV": (1, 128),
                   "CLKOS_DIV": (1, 128)}


@dataclass(frozen=True)
class EhxplllPlan:
    """One EHXPLLL divider set with CLKOP feedback, checked against the sysCLOCK rules.

    Parameters
    ----------
    input_hz : float
        Reference clock at CLKI, Hz.
    params : dict
        ``CLKI_DIV``, ``CLKFB_DIV``, ``CLKOP_DIV`` and, when CLKOS is used, ``CLKOS_DIV`` with
        optional ``CLKOS_CPHASE`` (default ``CLKOS_DIV - 1``, the zero-phase setting) and
        ``CLKOS_FPHASE`` (default 0). CLKOP always runs at zero phase (``CPHASE = DIV - 1``).

    Raises
    ------
    ValueError
        A divider outside its range, or a PFD, VCO or output frequency outside the device's.
    """
    input_hz: float
    params: dict

    def __post_init__(self):
        p = self.params
        unknown = set(p) - set(_DIVIDER_RANGES) - {"CLKOS_CPHASE", "CLKOS_FPHASE"}
        if unknown:
            raise ValueError(f"Unknown EHXPLLL parameters {sorted(unknown)}")
        for name, (lo, hi) in _DIVIDER_RANGES.items():
            if name not in p:
                if name == "CLKOS_DIV":
                    continue
                raise ValueError(f"EHXPLLL parameter {name} is missing")
            if not isinstance(p[name], int) or not lo <= p[name] <= hi:
                raise ValueError(f"EHXPLLL {name} must be an integer in {lo}..{hi}, "
                                 f"not {p[name]!r}")
        if "CLKOS_DIV" not in p and ({"CLKOS_CPHASE", "CLKOS_FPHASE"} & set(p)):
            raise ValueError("EHXPLLL CLKOS phase given without CLKOS_DIV")
        if not 0 <= self.clkos_fphase <= 7:
            raise ValueError(f"EHXPLLL CLKOS_FPHASE must be in 0..7, not {self.clkos_fphase!r}")
        if self.clkos_hz is not None and not 0 <= self.clkos_cphase <= 127:
            raise ValueError(f"EHXPLLL CLKOS_CPHASE must be in 0..127, not {self.clkos_cphase!r}")
        checks = [("PFD", self.pfd_hz, PFD_HZ), ("VCO", self.vco_hz, VCO_HZ),
                  ("CLKOP", self.clkop_hz, OUTPUT_HZ)]
        if self.clkos_hz is not None:
            checks.append(("CLKOS", self.clkos_hz, OUTPUT_HZ))
        for what, hz, (lo, hi) in checks:
            if not lo <= hz <= hi:
                raise ValueError(f"EHXPLLL {what} frequency {hz / 1e6:g} MHz is outside "
                                 f"{lo / 1e6:g}..{hi / 1e6:g} MHz")

    @property
    def pfd_hz(self):
        """Phase-frequency detector input, ``input_hz / CLKI_DIV``."""
        return self.input_hz / self.params["CLKI_DIV"]

    @property
    def clkop_hz(self):
        """CLKOP: with CLKOP feedback the loop holds it at ``f_PFD * CLKFB_DIV``."""
        return self.pfd_hz * self.params["CLKFB_DIV"]

    @property
    def vco_hz(self):
        """VCO, ``CLKOP * CLKOP_DIV``."""
        return self.clkop_hz * self.params["CLKOP_DIV"]

    @property
    def clkos_hz(self):
        """CLKOS, ``VCO / CLKOS_DIV``; ``None`` when CLKOS is unused."""
        div = self.params.get("CLKOS_DIV")
        return None if div is None else self.vco_hz / div

    @property
    def clkos_cphase(self):
        return self.params.get("CLKOS_CPHASE", self.params.get("CLKOS_DIV", 1) - 1)

    @property
    def clkos_fphase(self):
        return self.params.get("CLKOS_FPHASE", 0)

    @property
    def clkos_delay_s(self):
        """How much later CLKOS is than CLKOP, s: the CPHASE steps beyond the zero-phase setting
        (``DIV - 1``) plus FPHASE eighths, each of one VCO period. ``None`` without CLKOS."""
        if self.clkos_hz is None:
            return None
        steps = self.clkos_cphase - (self.params["CLKOS_DIV"] - 1) + self.clkos_fphase / 8
        return steps / self.vco_hz


def _mhz(hz):
    return f"{hz / 1e6:g}"


def ehxplll(plan, *, clki, clkop, locked, clkos=None):
    """An ``EHXPLLL`` instance for ``plan`` (:class:`EhxplllPlan`), fed back from CLKOP.

    ``clki``: the reference clock signal; ``clkop``, ``locked`` (and ``clkos`` if the plan has
    ``CLKOS_DIV``): the signals it drives. The ``FREQUENCY_PIN_*`` attributes, from which nextpnr
    derives the output clock constraints, are the plan's frequencies.
    """
    if (clkos is None) != (plan.clkos_hz is None):
        raise ValueError("CLKOS must be connected exactly when the plan has CLKOS_DIV")
    p = plan.params
    # (keyword order as in the instances this replaced, so the RTLIL is unchanged for them)
    clkos_attrs = {} if clkos is None else dict(a_FREQUENCY_PIN_CLKOS=_mhz(plan.clkos_hz))
    clkos_params = {} if clkos is None else dict(
        p_CLKOS_ENABLE="ENABLED", p_CLKOS_DIV=p["CLKOS_DIV"], p_CLKOS_CPHASE=plan.clkos_cphase,
        p_CLKOS_FPHASE=plan.clkos_fphase)
    clkos_out = {} if clkos is None else dict(o_CLKOS=clkos)
    return Instance(
        "EHXPLLL",
        a_FREQUENCY_PIN_CLKI=_mhz(plan.input_hz),
        a_FREQUENCY_PIN_CLKOP=_mhz(plan.clkop_hz),
        **clkos_attrs,
        # loop filter settings as Lattice's tools and ecppll write them for every divider set
        a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
        a_MFG_GMCREF_SEL="2",
        p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
        p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
        p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
        p_CLKI_DIV=p["CLKI_DIV"], p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=p["CLKFB_DIV"],
        p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["CLKOP_DIV"],
        p_CLKOP_CPHASE=p["CLKOP_DIV"] - 1, p_CLKOP_FPHASE=0,
        **clkos_params,
        i_RST=Const(0), i_STDBY=Const(0), i_CLKI=clki, i_CLKFB=clkop,
        i_PHASESEL0=Const(0), i_PHASESEL1=Const(0), i_PHASEDIR=Const(1),
        i_PHASESTEP=Const(1), i_PHASELOADREG=Const(1), i_PLLWAKESYNC=Const(0),
        i_ENCLKOP=Const(0),
        o_CLKOP=clkop, **clkos_out, o_LOCK=locked,
    )
