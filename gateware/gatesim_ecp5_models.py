"""latscope's own behavioural models of the ECP5 cells Yosys ships only as black boxes, for the
gate-level equivalence of :mod:`.gatesim_ecp5` (its module docstring says what each models and
why): ``DP16KD``, ``EHXPLLL``, the X2 gearing cells, ``DELAYF``, and the X1 DDR cells of
:data:`.lane_order.ECP5_MODELS`. Both the RTL and the netlist simulation use them alike."""

import re

from latscope import LatscopeError
from latscope.gateware.lane_order import ECP5_MODELS

__all__ = ["CLKI_PS", "OWN_MODELS", "GEARING_MODELS", "own_x1_ddr_models"]

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


_DELAYF_MODEL = r"""
// latscope's own behavioural model (NOT a vendor model): DELAYF, the input delay line. Z is A:
// the cell's delay (its counter times 25 ps) is analogue timing, like the routing delays this
// zero-delay comparison leaves out, and at the load value the cells hold whenever pins change in
// the session (DEL_VALUE 0) it adds nothing above the insertion delay. What synthesis can get
// wrong is the logic driving the cell, so every change of its control inputs is appended to
// delayf.txt with the instance name (%m), alike in both simulations. CFLAG is unused by the design.
module DELAYF (input A, input LOADN, input MOVE, input DIRECTION, output Z, output CFLAG);
    parameter DEL_MODE = "USER_DEFINED";
    parameter DEL_VALUE = 0;
    assign Z = A;
    assign CFLAG = 1'b0;
    integer fd = 0;
    initial fd = $fopen("delayf.txt", "a");
    always @(LOADN or MOVE or DIRECTION) if (fd != 0) begin
        $fwrite(fd, "%0d %m %b %b %b\n", $time, LOADN, MOVE, DIRECTION);
        $fflush(fd);
    end
endmodule
"""


def own_x1_ddr_models():
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
              + _dp16kd_model() + _ehxplll_model() + _GEARING_MODELS + _DELAYF_MODEL)

#: The gearing models alone, for :func:`check_gearing_models`.
GEARING_MODELS = _GEARING_MODELS
