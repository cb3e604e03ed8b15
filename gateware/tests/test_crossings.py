"""Clock-domain crossings: declaration in the gateware, the check of a placed design's report."""

import copy

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal

from latscope import LatscopeError
from latscope.gateware.crossings import (
    ATTR,
    Synchronizer,
    check_crossings,
    format_crossings,
    mark,
)
from latscope.gateware.fifo import CaptureFIFO

# A design trimmed from a real nextpnr-ice40 0.11 build of the iCEBreaker (`--report
# --detailed-timing-report`; net, cell and clock names, delays and constraints as nextpnr wrote
# them) and the matching cells of the Yosys netlist it read. Bits: 10 = w_gray[0], 11 = its
# synchroniser's first stage; 20 = config bit, 21 = the capture-side copy (a LUT packed with its
# flip-flop, as nextpnr names it "..._LC"); 30/31 = a DDR input's falling-edge sample and its
# re-timing flop (two edges of one clock); 40 = a pin.
REPORT = {
    "fmax": {"capture_clk": {"achieved": 50.79, "constraint": 48.0},
             "clk": {"achieved": 28.9, "constraint": 24.0}},
    "critical_paths": [
        {"from": "posedge capture_clk", "to": "posedge clk",
         "path": [{"delay": 1.39}, {"delay": 4.143}, {"delay": 1.234}]},
        {"from": "<async>", "to": "posedge capture_clk", "path": [{"delay": 3.6}]},
    ],
    "detailed_net_timings": [
        {"net": "core.fifo.w_gray[0]", "driver": "core.fifo.w_gray_SB_DFFSR_Q_D_SB_LUT4_O_LC",
         "port": "O", "event": "posedge capture_clk",
         "endpoints": [{"cell": "core.fifo.w_ptr_sync.stage0_SB_DFF_Q_DFFLC", "port": "I0",
                        "event": "posedge clk", "delay": [4.078, 4.078]}]},
        {"net": "core.config[17]", "driver": "core.config_SB_DFFESR_Q_38_DFFLC", "port": "O",
         "event": "posedge clk",
         "endpoints": [{"cell": "core.config$13_SB_DFFESR_Q_LUT_LC", "port": "I0",
                        "event": "posedge capture_clk", "delay": [5.269, 5.269]}]},
        {"net": "ch_ddr.i1[0]", "driver": "ch_ddr.buf0", "port": "D_IN_1",
         "event": "negedge capture_clk",
         "endpoints": [{"cell": "ch_ddr.U$16_DFFLC", "port": "I0",
                        "event": "posedge capture_clk", "delay": [3.693, 3.693]}]},
        {"net": "uart.receiver.sync.rx", "driver": "uart_rx_buf.buf0", "port": "D_IN_0",
         "event": "<async>",
         "endpoints": [{"cell": "uart.receiver.sync.rx_SB_LUT4_I3_LC", "port": "I3",
                        "event": "posedge capture_clk", "delay": [3.6, 3.6]}]},
    ],
}


def _netlist(stage0_attrs=None, config_attrs=None):
    stage0_attrs = {ATTR: "gray_pointer"} if stage0_attrs is None else stage0_attrs
    config_attrs = {ATTR: "toggle_handshake"} if config_attrs is None else config_attrs
    return {"modules": {"latscope": {
        "attributes": {"top": "00000000000000000000000000000001"},
        "cells": {
            "core.fifo.w_ptr_sync.stage0_SB_DFF_Q": {
                "type": "SB_DFF", "connections": {"C": [2], "D": [10], "Q": [11]}},
            "core.config$13_SB_DFFESR_Q_LUT": {
                "type": "SB_LUT4", "connections": {"I0": [20], "O": [22]}},
            "core.config$13_SB_DFFESR_Q": {
                "type": "SB_DFFESR", "connections": {"C": [3], "D": [22], "Q": [21]}},
            "ch_ddr.U$16": {"type": "SB_DFF", "connections": {"C": [3], "D": [30], "Q": [31]}},
        },
        "netnames": {
            "core.fifo.w_gray": {"bits": [10], "attributes": {}},
            "core.fifo.w_ptr_sync.stage0": {"bits": [11], "attributes": stage0_attrs},
            "core.config": {"bits": [20], "attributes": {}},
            "core.config$13": {"bits": [21], "attributes": {}},
            "core.crossing.o_config": {"bits": [21], "attributes": config_attrs},
        },
    }}}


def _with_delay(net, delay_ns, shortest_ns=None):
    """REPORT with the first endpoint of its ``net``-th detailed net timing ``delay_ns`` long
    (nextpnr's [min, max] pair: ``shortest_ns``, default the same, and ``delay_ns``)."""
    report = copy.deepcopy(REPORT)
    report["detailed_net_timings"][net]["endpoints"][0]["delay"] = [
        delay_ns if shortest_ns is None else shortest_ns, delay_ns]
    return report


def _declared(kind, late_ns):
    """The crossing found when the Gray pointer's first stage is declared ``kind`` instead (the
    check passes), and the errors when that path is ``late_ns`` long."""
    netlist = _netlist(stage0_attrs={ATTR: kind})
    check = check_crossings(REPORT, netlist)
    assert check.ok
    (crossing,) = [c for c in check.crossings if c.kind == kind]
    return crossing, check_crossings(_with_delay(0, late_ns), netlist).errors()


def test_declared_crossings_are_listed_with_delay_and_period():
    check = check_crossings(REPORT, _netlist())
    assert check.ok and check.undeclared == []
    got = {(c.name, c.kind, c.source, c.dest, c.bits, c.delay_ns, round(c.period_ns, 3))
           for c in check.crossings}
    # Delays are nextpnr's (max of the [min, max] pair); periods 1e3 / constraint MHz.
    assert got == {
        ("core.fifo.w_ptr_sync.stage0", "gray_pointer", "capture_clk", "clk", 1, 4.078, 41.667),
        ("core.crossing.o_config", "toggle_handshake", "clk", "capture_clk", 1, 5.269, 20.833),
    }
    # The worst complete path per clock pair: clk-to-q + routing + setup = 6.767 ns.
    assert check.worst_paths == {"capture_clk -> clk": (pytest.approx(6.767), 1e3 / 24.0)}
    assert check.as_dict()["crossings"][0]["ok"] is True


def test_undeclared_crossing_fails_naming_net_and_register():
    check = check_crossings(REPORT, _netlist(stage0_attrs={}))
    assert not check.ok
    assert check.undeclared == [("capture_clk", "clk", "core.fifo.w_gray[0]",
                                 "core.fifo.w_ptr_sync.stage0")]
    assert check.errors() == [
        "undeclared crossing capture_clk -> clk: net core.fifo.w_gray[0] into "
        "core.fifo.w_ptr_sync.stage0 (use latscope.gateware.crossings.Synchronizer or mark())"]


def test_register_loaded_by_a_declared_strobe_is_declared():
    """A data register kept under another name than the marked one is recognised by its clock
    enable, the handshake's marked load strobe (bit 23)."""
    netlist = _netlist(config_attrs={})
    top = netlist["modules"]["latscope"]
    top["cells"]["core.config$13_SB_DFFESR_Q"]["connections"]["E"] = [23]
    top["netnames"]["core.crossing.load"] = {"bits": [23], "attributes": {ATTR: "toggle_handshake"}}
    check = check_crossings(REPORT, netlist)
    assert check.ok
    assert ("registers loaded by core.crossing.load", "toggle_handshake") in {
        (c.name, c.kind) for c in check.crossings}
    # ... also when one LUT combines the strobe with another condition into the enable (as Yosys
    # did for two bits of the iCEBreaker's configuration word).
    top["cells"]["core.config$13_SB_DFFESR_Q"]["connections"]["E"] = [24]
    top["cells"]["enable_lut"] = {"type": "SB_LUT4",
                                  "connections": {"I0": [23], "I1": [25], "O": [24]}}
    assert check_crossings(REPORT, netlist).ok
    del top["netnames"]["core.crossing.load"]
    assert not check_crossings(REPORT, netlist).ok


def test_slow_crossing_fails():
    check = check_crossings(_with_delay(1, 21.0, shortest_ns=3.0), _netlist())   # > 20.833 ns
    assert not check.ok
    assert check.errors() == [
        "crossing core.crossing.o_config (toggle handshake, clk -> capture_clk) delay 21.00 ns "
        "exceeds the destination (capture_clk) period 20.83 ns"]


def test_slow_worst_path_fails():
    report = copy.deepcopy(REPORT)
    report["critical_paths"][0]["path"].append({"delay": 40.0})
    check = check_crossings(report, _netlist())
    assert not check.ok and "worst path capture_clk -> clk is 46.77 ns" in check.errors()[0]


def test_ecp5_global_clock_names():
    """nextpnr-ecp5 names clocks by their global nets in both the Fmax table and the events."""
    report = copy.deepcopy(REPORT)
    report["fmax"] = {f"$glbnet${k}": v for k, v in report["fmax"].items()}
    for net in report["detailed_net_timings"]:
        for item in [net, *net["endpoints"]]:
            item["event"] = item["event"].replace("posedge ", "posedge $glbnet$")
    check = check_crossings(report, _netlist())
    assert check.ok
    assert {(c.source, c.dest, round(c.period_ns, 3)) for c in check.crossings} == {
        ("capture_clk", "clk", 41.667), ("clk", "capture_clk", 20.833)}


def test_report_without_detail_is_refused():
    with pytest.raises(LatscopeError, match="--detailed-timing-report"):
        check_crossings({"fmax": {}}, _netlist())


def test_synchronizer_declares_its_first_stage():
    m = Module()
    i, o = Signal(4), Signal(4)
    m.submodules.sync = Synchronizer(i, o, kind="gray_pointer", o_domain="sync")
    text = rtlil.convert(m, ports=[i, o])
    assert f'attribute \\{ATTR} "gray_pointer"' in text
    assert text.count(f"attribute \\{ATTR}") == 1            # first stage only


def test_mark_and_synchronizer_validate():
    with pytest.raises(ValueError, match="Crossing kind must be one of ff_synchronizer, "
                                         "fifo_data, forwarded_clock, gray_pointer, "
                                         "toggle_handshake, not 'gray'"):
        mark(Signal(), "gray")
    with pytest.raises(ValueError, match="Synchronizer stages must be an integer >= 2, not 1"):
        Synchronizer(Signal(), Signal(), kind="ff_synchronizer", stages=1)
    s = Signal()
    assert mark(s, "toggle_handshake") is s and s.attrs[ATTR] == "toggle_handshake"


def test_mark_keeps_strobes_but_not_registers():
    """A marked register gets the attribute only (Yosys 0.70 miss-synthesises a kept iCE40
    register with initial bits set: see test_build.py); a load strobe is kept by name."""
    reg = Signal(8, init=0x81)
    mark(reg, "toggle_handshake")
    assert reg.attrs == {ATTR: "toggle_handshake"}
    load = mark(Signal(), "toggle_handshake", strobe=True)
    assert load.attrs == {ATTR: "toggle_handshake", "keep": 1}
    with pytest.raises(ValueError, match=r"A crossing's load strobe must be a 1-bit signal with "
                                         r"initial value 0, not \(sig wide\)"):
        mark(Signal(2, name="wide"), "toggle_handshake", strobe=True)
    with pytest.raises(ValueError, match="initial value 0"):
        mark(Signal(init=1), "toggle_handshake", strobe=True)


def _reset_report(sink, port, delay):
    """The report with one more arc: a link-clock register into ``port`` of ``sink`` (capture)."""
    report = copy.deepcopy(REPORT)
    report["detailed_net_timings"].append(
        {"net": "ch_x2.reset", "driver": "gearing_start.reset_TRELLIS_FF_Q", "port": "Q",
         "event": "posedge clk",
         "endpoints": [{"cell": sink, "port": port, "event": "posedge capture_clk",
                        "delay": [delay, delay]}]})
    return report


def test_asynchronous_resets_are_listed_not_failed():
    """Arcs into an asynchronous reset (shapes from the ECPIX-5 build of 2026-11-24: the gearing's
    start-up reset into the I/O logic's LSR, the capture reset synchroniser's flip-flops with
    SRMODE=ASYNC) are crossings of their own kind, with no period check; a synchronous reset
    (SRMODE=LSR_OVER_CE) from another clock is undeclared."""
    netlist = _netlist()
    cells = netlist["modules"]["latscope"]["cells"]
    for name, mode in (("rst_capture.stage0", "ASYNC"), ("core.sync_reset", "LSR_OVER_CE")):
        cells[name] = {"type": "TRELLIS_FF", "parameters": {"SRMODE": mode},
                       "connections": {"CLK": [3], "DI": [50], "LSR": [51], "Q": [52]}}
    check = check_crossings(_reset_report("ch_x2.buf.buf.buf6$IOL", "LSR", 1.8), netlist)
    assert check.ok
    (io,) = [c for c in check.crossings if c.kind == "async_reset"]
    assert (io.name, io.source, io.dest, io.delay_ns) == ("ch_x2.buf.buf.buf6", "clk",
                                                           "capture_clk", 1.8)
    slow = check_crossings(_reset_report("rst_capture.stage0", "LSR", 8.19), netlist)
    assert slow.ok and [c.name for c in slow.crossings if c.kind == "async_reset"] == [
        "rst_capture.stage0"]
    sync = check_crossings(_reset_report("core.sync_reset", "LSR", 1.0), netlist)
    assert not sync.ok and [u[3] for u in sync.undeclared] == ["core.sync_reset"]


def test_gray_pointer_is_bounded_by_the_source_period():
    """A Gray pointer may step every source cycle, so its bits must arrive within one source
    period: 25 ns from the 48 MHz capture clock (20.83 ns) into the 24 MHz link clock fails,
    although it is within the destination period (41.67 ns)."""
    check = check_crossings(_with_delay(0, 25.0), _netlist())
    assert not check.ok
    assert check.errors() == [
        "crossing core.fifo.w_ptr_sync.stage0 (Gray FIFO pointer, capture_clk -> clk) delay "
        "25.00 ns exceeds the source (capture_clk) period 20.83 ns"]
    (gray,) = [c for c in check.as_dict()["crossings"] if c["kind"] == "gray_pointer"]
    assert (gray["bound"], gray["bound_ns"], gray["period_ns"]) == ("source", 20.833, 41.667)
    # the toggle handshake into the capture clock keeps the destination period as its bound
    (toggle,) = [c for c in check.crossings if c.kind == "toggle_handshake"]
    assert (toggle.bound, round(toggle.bound_ns, 3)) == ("destination", 20.833)
    assert "25.00 ns / 20.83 ns (source period) TOO SLOW" in "\n".join(
        format_crossings(check.as_dict()))


def _wide_ff_netlist(bits):
    """The synchroniser's first stage declared an FF synchronizer ``bits`` wide (bit 11 and
    ``bits - 1`` more), as a 16-bit bus through plain flip-flops shows in the netlist."""
    netlist = _netlist(stage0_attrs={ATTR: "ff_synchronizer"})
    top = netlist["modules"]["latscope"]
    top["netnames"]["core.fifo.w_ptr_sync.stage0"]["bits"] = [11, *range(100, 100 + bits - 1)]
    return netlist


def test_multi_bit_ff_synchronizer_fails():
    """An FF synchronizer more than one bit wide is refused, however fast: its bits can be
    caught half old, half new. One bit wide it passes."""
    check = check_crossings(REPORT, _wide_ff_netlist(16))
    assert not check.ok
    assert check.errors() == [
        "crossing core.fifo.w_ptr_sync.stage0 (FF synchronizer, capture_clk -> clk) is 16 bits "
        "wide: a multi-bit value must cross through a declared handshake or Gray code"]
    assert "TOO WIDE" in "\n".join(format_crossings(check.as_dict()))
    assert check_crossings(REPORT, _wide_ff_netlist(1)).ok


def test_multi_bit_ff_synchronizer_is_refused_when_declared():
    with pytest.raises(ValueError, match=r"An FF synchronizer's width must be 1 bit \(a "
                                         r"multi-bit value crosses through a handshake or Gray "
                                         r"code\), not 16"):
        Synchronizer(Signal(16), Signal(16), kind="ff_synchronizer")
    with pytest.raises(ValueError, match="width must be 1 bit"):
        mark(Signal(16), "ff_synchronizer")
    m = Module()
    i, o = Signal(16), Signal(16)
    m.submodules.sync = Synchronizer(i, o, kind="gray_pointer")
    assert 'attribute \\latscope_crossing "gray_pointer"' in rtlil.convert(m, ports=[i, o])
    assert mark(Signal(16), "toggle_handshake").attrs == {ATTR: "toggle_handshake"}


def test_fifo_data_is_declared_and_bounded_by_the_destination_period():
    """A FIFO's read register fed from its storage in the writing clock (storage in
    flip-flops) is a declared crossing bounded by the reading period; CaptureFIFO declares it."""
    data, errors = _declared("fifo_data", 42.0)
    assert (data.bound, round(data.bound_ns, 3), data.delay_ns) == ("destination", 41.667, 4.078)
    assert "exceeds the destination (clk) period 41.67 ns" in errors[0]
    q = CaptureFIFO(width=8, depth=16, r_domain="sync", w_domain="capture")
    text = rtlil.convert(q, ports=[q.w_data, q.w_en, q.w_rdy, q.r_data, q.r_en, q.r_rdy])
    assert f'attribute \\{ATTR} "fifo_data"\n  wire width 8 \\r_port__data' in text


def test_forwarded_clock_data_is_bounded_by_the_source_period():
    """A register clocked by a clock the source domain makes (the bus samplers' regenerated
    bus clocks) gets its data one source cycle before that clock rises: bounded by the source
    period (the 48 MHz capture clock's 20.83 ns here), not the destination's."""
    fwd, errors = _declared("forwarded_clock", 21.0)
    assert (fwd.bound, round(fwd.bound_ns, 3), fwd.delay_ns) == ("source", 20.833, 4.078)
    assert errors == [
        "crossing core.fifo.w_ptr_sync.stage0 (forwarded clock, capture_clk -> clk) delay "
        "21.00 ns exceeds the source (capture_clk) period 20.83 ns"]
    assert mark(Signal(6), "forwarded_clock").attrs == {ATTR: "forwarded_clock"}


def test_asynchronous_reset_has_no_bound():
    check = check_crossings(_reset_report("ch_x2.buf.buf.buf6$IOL", "LSR", 30.0), _netlist())
    (reset,) = [c for c in check.as_dict()["crossings"] if c["kind"] == "async_reset"]
    assert check.ok and (reset["bound"], reset["bound_ns"]) == (None, None)
    assert any("(no bound) ok" in line for line in format_crossings(check.as_dict()))


def test_delay_cell_controls_are_their_own_kind():
    """Arcs from the link clock into an I/O logic cell's LOADN/MOVE/DIRECTION (the shape of the
    ECPIX-5 build with input delay lines, 2026-11-27: nextpnr refers them to the capture clock)
    are delay-line controls, bounded by the source (link) period; any other I/O logic port from
    another clock is still undeclared."""
    netlist = _netlist()
    for port, ok in (("MOVE", True), ("LOADN", True), ("DIRECTION", True), ("CE", False)):
        check = check_crossings(_reset_report("ch_x2.buf.buf.buf3$IOL", port, 2.5), netlist)
        assert check.ok is ok, port
        if ok:
            (c,) = [c for c in check.crossings if c.kind == "delay_control"]
            assert (c.name, c.source, c.dest, c.delay_ns) == ("ch_x2.buf.buf.buf3", "clk",
                                                              "capture_clk", 2.5)
    with pytest.raises(ValueError, match="Crossing kind must be one of"):
        mark(Signal(), "delay_control")
