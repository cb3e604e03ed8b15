"""Lane order and latency of the ECP5 2:1 gearing (``IDDRX2F``/``ODDRX2F``), by simulation.

:mod:`latscope.gateware.gearing` numbers the four samples of a capture clock ``tick = cycle * 4 +
lane`` with lane ``j`` = ``IDDRX2F.Q<j>`` and assumes ``Q0`` is the earliest. This module checks
that on the netlist Amaranth emits for :func:`probe_design` (the same ``edge_clocks``,
``GearedInput`` and ``GearedOutput`` the board uses, lowered for an ECP5 platform), simulated with
Verilator against **Lattice's own simulation models** of ``IDDRX2F``, ``ODDRX2F``, ``ECLKSYNCB``
and ``CLKDIVF`` (Diamond's ``ecp5u`` library). Those are Lattice's: latscope does not ship them;
point :data:`~latscope.gateware.lane_order.VENDOR_MODELS_ENV` at one Verilog file holding the four
modules (public copies exist; ``docs/lane-order.md`` says how it was run). Yosys has only black
boxes for these cells, so there is no fallback model: without the file, :func:`establish` raises.

Time. The edge clock's edges are *instants* ``k`` (even: rising, odd: falling), 1.25 ns apart at
400 MHz; the testbench applies the pad level of instant ``k`` a setup time before edge ``k``.
The capture clock (``CLKDIVF``) rises at instants ``r_m``; "``Q`` during capture cycle ``m``" is
what a fabric register clocked by the next rising edge (``r_{m+1}``) takes in. The analysis finds
for every lane the one delay ``d_j`` with ``Q_j(m) = pad[r_m - d_j]`` for every checked cycle; the
lanes are in time order exactly when ``d_j = d_0 - j``. Output lanes likewise: ``D_j`` presented
in cycle ``m`` is on the pad in the half-period after instant ``r_m + s_j``.

The testbench runs Lattice's start-up sequence (``STOP`` high, ``RST`` pulse, ``STOP`` low; see
:class:`~latscope.gateware.gearing.GearingStart`).
"""

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from latscope import LatscopeError
from latscope.gateware import lane_order as lo

__all__ = ["HALF_PS", "probe_design", "lowered_verilog", "vendor_models", "TESTBENCH",
           "X2Run", "simulate", "X2Timing", "analyse", "establish"]

#: Half a period of the 400 MHz edge clock, picoseconds (one tick).
HALF_PS = 1250

_PINS = [("probe_eclk", 0, "i"), ("probe_stop", 0, "i"), ("probe_rst", 0, "i"),
         ("probe_pad", 0, "i"), ("probe_sclk", 0, "o"), ("probe_out", 0, "o")] + \
        [("probe_q", j, "o") for j in range(4)] + [("probe_d", j, "i") for j in range(4)]


def _platform():
    from amaranth.build import Pins, Resource
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    platform = ULX3S_85F_Platform()
    pins = list(platform.connectors["gpio", 0].mapping.values())[:len(_PINS)]
    platform.add_resources([Resource(name, index, Pins(pin, dir=d))
                            for (name, index, d), pin in zip(_PINS, pins, strict=True)])
    return platform


def probe_design():
    """The probe: edge clock, ``STOP`` and ``RST`` from pins into :func:`gearing.edge_clocks`;
    ``GearedInput`` on ``probe_pad`` with ``Q0..Q3`` on ``probe_q_0..3`` and the capture clock on
    ``probe_sclk``; ``GearedOutput`` on ``probe_out`` fed from ``probe_d_0..3``."""
    from amaranth.hdl import Elaboratable, Module
    from amaranth.lib import io

    from latscope.gateware.gearing import (  # why: amaranth, only to build the probe
        LANES,
        GearedInput,
        GearedOutput,
        edge_clocks,
    )

    class X2Probe(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            ins = {}
            for name in ("probe_eclk", "probe_stop", "probe_rst"):
                m.submodules[name] = ins[name] = io.Buffer("i", platform.request(name, 0,
                                                                                 dir="-"))
            start = SimpleNamespace(stop=ins["probe_stop"].i, reset=ins["probe_rst"].i)
            eclk, sclk = edge_clocks(m, eclk_in=ins["probe_eclk"].i, start=start)
            pad = platform.request("probe_pad", 0, dir="-")
            m.submodules.geared_in = gin = GearedInput(pad, eclk=eclk, sclk=sclk,
                                                       reset=start.reset)
            out = platform.request("probe_out", 0, dir="-")
            m.submodules.geared_out = gout = GearedOutput(out, eclk=eclk, sclk=sclk,
                                                          reset=start.reset)
            m.submodules.sclk_out = so = io.Buffer("o", platform.request("probe_sclk", 0,
                                                                         dir="-"))
            m.d.comb += so.o.eq(sclk)
            for j in range(LANES):
                q = io.Buffer("o", platform.request("probe_q", j, dir="-"))
                d = io.Buffer("i", platform.request("probe_d", j, dir="-"))
                m.submodules[f"q{j}"], m.submodules[f"d{j}"] = q, d
                m.d.comb += [q.o.eq(gin.i[j]), gout.o[j].eq(d.i)]
            return m

    return X2Probe()


@functools.lru_cache(maxsize=None)
def lowered_verilog():
    """Verilog of the probe after Amaranth's ECP5 lowering (module ``top``)."""
    platform = _platform()
    saved = dict(os.environ)
    os.environ.update(lo.toolchain_env())
    try:
        plan = platform.prepare(probe_design(), name="top", debug_verilog=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return plan.files["top.debug.v"]


_VENDOR_CELLS = {"IDDRX2F", "ODDRX2F", "ECLKSYNCB", "CLKDIVF"}


def vendor_models():
    """``(verilog, source)``: the vendor models named by ``LATSCOPE_ECP5_CELL_MODELS`` plus
    latscope's models of the plain I/O buffers. Raises :class:`LatscopeError` when the variable is
    unset or the file lacks one of ``IDDRX2F``, ``ODDRX2F``, ``ECLKSYNCB``, ``CLKDIVF``."""
    path = os.environ.get(lo.VENDOR_MODELS_ENV)
    if not path:
        raise LatscopeError(f"The X2 gearing is checked against Lattice's simulation models only: "
                            f"set {lo.VENDOR_MODELS_ENV} to a Verilog file holding IDDRX2F, "
                            f"ODDRX2F, ECLKSYNCB and CLKDIVF (docs/lane-order.md)")
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as error:
        raise LatscopeError(f"{lo.VENDOR_MODELS_ENV}={path}: cannot read it "
                            f"({error.strerror})") from None
    names = set(re.findall(r"^\s*module\s+(\w+)", text, re.M))
    missing = sorted(_VENDOR_CELLS - names)
    if missing:
        raise LatscopeError(f"{lo.VENDOR_MODELS_ENV}={path}: lacks {', '.join(missing)}")
    ours = re.sub(r"module\s+(\w+)\b.*?endmodule",
                  lambda mo: "" if mo.group(1) in names else mo.group(0), lo.ECP5_MODELS,
                  flags=re.S)
    stub = "" if "gsr_pur_assign" in names else (
        "module gsr_pur_assign (output GSR, output PUR);\n"
        "    assign GSR = 1'b1; assign PUR = 1'b1;   // inactive (active low)\n"
        "endmodule\n")
    return ("`define mixed_hdl\n" + ours + stub + text,
            f"Lattice models from {path} ({', '.join(sorted(_VENDOR_CELLS))})")


#: The testbench. Plusargs ``+stim=<file>`` (one hex word per instant ``k``: bit 0 the pad level
#: of instant k, bits 1-4 ``D0..D3`` set just after edge k), ``+n=<instants>``,
#: ``+setup=<ps>``. Start-up: ``STOP`` and ``RST`` high, ``RST`` low at instant 8, ``STOP`` low
#: at instant 16. Prints ``I k sclk q0 q1 q2 q3`` just before edge ``k`` and ``O k out`` in the
#: middle of the half-period after edge ``k``.
TESTBENCH = r"""
`timescale 1ps/1ps
module x2_tb;
    localparam integer H = %(half)d;
    localparam integer MAXN = 16384;
    reg eclk = 1'b0, stop = 1'b1, rst = 1'b1, pad = 1'b0;
    reg [3:0] d = 4'd0;
    reg [4:0] mem [0:MAXN];
    integer n, setup, k;
    reg [1023:0] stim;
    wire eclk_w = eclk, stop_w = stop, rst_w = rst, pad_w = pad;
    wire d0_w = d[0], d1_w = d[1], d2_w = d[2], d3_w = d[3];
    wire q0_w, q1_w, q2_w, q3_w, sclk_w, out_w;
    top dut (.probe_eclk_0__io(eclk_w), .probe_stop_0__io(stop_w), .probe_rst_0__io(rst_w),
             .probe_pad_0__io(pad_w), .probe_sclk_0__io(sclk_w), .probe_out_0__io(out_w),
             .probe_q_0__io(q0_w), .probe_q_1__io(q1_w), .probe_q_2__io(q2_w),
             .probe_q_3__io(q3_w), .probe_d_0__io(d0_w), .probe_d_1__io(d1_w),
             .probe_d_2__io(d2_w), .probe_d_3__io(d3_w));
    initial begin
        if (!$value$plusargs("stim=%%s", stim)) $fatal(1, "no +stim");
        if (!$value$plusargs("n=%%d", n)) n = 256;
        if (!$value$plusargs("setup=%%d", setup)) setup = H / 4;
        for (k = 0; k <= MAXN; k = k + 1) mem[k] = 5'd0;
        $readmemh(stim, mem);
        for (k = 0; k <= n; k = k + 1) begin       // iteration k: from edge k-1 to edge k
            fork
                if (k > 0) #(H / 8) d = mem[k - 1][4:1];
                if (k > 0) #(H / 2) $display("O %%0d %%b", k - 1, out_w);
                if (k < n) #(H - setup) pad = mem[k][0];
                if (k < n) #(H - 10) $display("I %%0d %%b %%b %%b %%b %%b", k, sclk_w, q0_w,
                                              q1_w, q2_w, q3_w);
                #(H) begin
                    eclk = (k %% 2 == 0);
                    if (k == 8) rst = 1'b0;
                    if (k == 16) stop = 1'b0;
                end
            join
        end
        $finish;
    end
endmodule
"""


@functools.lru_cache(maxsize=None)
def _binary(models):
    netlist = lowered_verilog()
    bench = TESTBENCH % {"half": HALF_PS}
    stable = re.sub(r"\(\*.*?\*\)", "", netlist)
    key = hashlib.sha256("\0".join(["x2", stable, models, bench]).encode()).hexdigest()[:20]
    target = lo.cache_root() / f"ecp5x2-{key}"
    exe = target / "x2_tb"
    if exe.is_file():
        return exe
    reason = lo.simulator_available()
    if reason:
        raise LatscopeError(f"Cannot simulate the X2 probe: {reason}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        tmp = Path(tmp)
        (tmp / "probe.v").write_text(netlist)
        (tmp / "models.v").write_text(models)
        (tmp / "x2_tb.v").write_text(bench)
        cmd = lo.verilator_cmd() + [
            "--binary", "--timing", "--top-module", "x2_tb", "-Wno-fatal", "-Wno-lint",
            "-Wno-style", "-Wno-MULTIDRIVEN", "-Wno-UNOPTFLAT", "-Wno-COMBDLY", "-Wno-LATCH",
            "-Wno-TIMESCALEMOD", "-Wno-INITIALDLY", "-O1",
            "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include", "-j", "2", "--Mdir", "obj",
            "-o", "x2_tb", "models.v", "probe.v", "x2_tb.v",
        ]
        result = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if result.returncode != 0:
            raise LatscopeError("Verilator failed to build the X2 probe simulation:\n"
                                + (result.stderr or result.stdout)[-4000:])
        final = tmp / "final"
        final.mkdir()
        for name in ("x2_tb", ):
            shutil.copy2(tmp / "obj" / name, final / name)
        if target.exists():
            shutil.rmtree(target)
        os.replace(final, target)
    return exe


@dataclass(frozen=True)
class X2Run:
    """One simulation: per instant ``k`` the pad level, ``D0..D3`` set after edge ``k``, the
    capture clock and ``Q0..Q3`` just before edge ``k``, and the output pad after edge ``k``."""
    pad: np.ndarray
    d: np.ndarray
    sclk: np.ndarray
    q: np.ndarray
    out: np.ndarray


def simulate(pad, d, *, setup_ps=HALF_PS // 4):
    """Simulate the probe with Lattice's models for ``len(pad)`` instants (``d``: shape
    ``(n, 4)``); ``0 < setup_ps < HALF_PS``."""
    pad = np.asarray(pad, dtype=np.uint8)
    d = np.asarray(d, dtype=np.uint8)
    n = len(pad)
    if d.shape != (n, 4) or not 64 <= n <= 16000:
        raise ValueError("Probe stimulus must be 64 to 16000 pad levels and D lanes of shape "
                         "(n, 4)")
    if not 0 < setup_ps < HALF_PS or setup_ps in (10, HALF_PS // 2):
        raise ValueError(f"Setup time must be between 0 and {HALF_PS} ps, not {setup_ps!r}")
    exe = _binary(vendor_models()[0])
    words = pad | (d[:, 0] << 1) | (d[:, 1] << 2) | (d[:, 2] << 3) | (d[:, 3] << 4)
    with tempfile.TemporaryDirectory(prefix="lane-x2-") as tmp:
        stim = Path(tmp) / "stim.hex"
        stim.write_text("".join(f"{int(w):x}\n" for w in words))
        result = subprocess.run([str(exe), f"+stim={stim}", f"+n={n}", f"+setup={setup_ps}"],
                                capture_output=True, text=True, cwd=tmp, timeout=300)
    rows_i = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("I ")]
    rows_o = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("O ")]
    if result.returncode != 0 or len(rows_i) != n or len(rows_o) != n:
        raise LatscopeError(f"X2 probe simulation failed (exit {result.returncode}):\n"
                            + (result.stderr or result.stdout)[-2000:])

    def bits(rows):
        return np.array([[int(v) if v in ("0", "1") else 2 for v in row[1:]] for row in rows])
    ti, to = bits(rows_i), bits(rows_o)
    return X2Run(pad=pad, d=d, sclk=ti[:, 0], q=ti[:, 1:5], out=to[:, 0])


@dataclass(frozen=True)
class X2Timing:
    """Result of :func:`analyse`.

    Attributes
    ----------
    input_delay : tuple of int
        ``d_j``: ``Q_j`` during capture cycle ``m`` is the pad at instant ``r_m - d_j``.
    in_order : bool
        ``d_j = d_0 - j``: lane ``j`` is the ``j``-th sample in time (lane 0 earliest).
    lane0_edge : str
        ``"rising"`` or ``"falling"``: the edge-clock edge that takes lane 0's sample.
    output_slot : tuple of int
        ``s_j``: ``D_j`` presented in cycle ``m`` is on the pad after instant ``r_m + s_j``.
    output_in_order : bool
        ``s_j = s_0 + j``: ``D0`` is sent first.
    loopback_ticks : int
        Ticks from a self-test tick (``D_j`` of cycle ``m``: tick ``4m + j``) to the tick the
        input reports it at, when the output pad is wired to the input pad with a delay under one
        tick (each further tick of delay adds one).
    cycles_checked : int
        Capture cycles compared (after start-up).
    """
    input_delay: tuple
    in_order: bool
    lane0_edge: str
    output_slot: tuple
    output_in_order: bool
    loopback_ticks: int
    cycles_checked: int


_MAX_DELAY = 24


def _unique(observed, source, index):
    fits = [dl for dl in range(-_MAX_DELAY, _MAX_DELAY + 1)
            if all(0 <= index(m, dl) < len(source) and observed[m] == source[index(m, dl)]
                   for m in range(len(observed)))]
    if len(fits) != 1:
        raise LatscopeError(f"X2 lane timing is not explained by exactly one delay (candidates "
                            f"{fits}); the stimulus may be too short or regular")
    return fits[0]


def analyse(run, *, warmup=40):
    """:class:`X2Timing` from an :class:`X2Run`; instants before ``warmup`` are start-up."""
    if np.any(run.sclk > 1) or np.any(run.q[warmup:] > 1) or np.any(run.out[warmup:] > 1):
        raise LatscopeError("X2 probe simulation produced undefined (x/z) values after start-up")
    s = run.sclk
    # capture clock rose at edge k: low just before edge k, high just before edge k + 1
    rises = np.flatnonzero((s[:-1] == 0) & (s[1:] == 1))
    rises = rises[rises >= warmup]
    if len(rises) < 8 or np.any(np.diff(rises) != 4):
        raise LatscopeError(f"The capture clock does not rise every 4 edge-clock instants "
                            f"(rises at {rises[:8].tolist()}...)")
    rises = rises[:-1]          # the last cycle's word is read just before the next rise
    n_end = len(run.pad)
    rises = rises[rises + 4 + _MAX_DELAY < n_end]
    words = run.q[rises + 4]                         # Q during the cycle starting at each rise
    d = tuple(_unique(words[:, j], run.pad, lambda m, dl: int(rises[m]) - dl)
              for j in range(4))
    presented = run.d[rises + 3]                     # D presented during the cycle (set after
                                                     # edge r_m + 3, taken at r_m + 4)
    slots = tuple(_unique(presented[:, j], run.out, lambda m, sl: int(rises[m]) + sl)
                  for j in range(4))
    in_order = all(d[j] == d[0] - j for j in range(4))
    out_order = all(slots[j] == slots[0] + j for j in range(4))
    lane0 = "rising" if (int(rises[0]) - d[0]) % 2 == 0 else "falling"
    # D_j of cycle m (tick 4m + j) leaves in the half-period after instant r_m + s_j; a wire
    # under one tick brings it to the input sample of instant p = r_m + s_j + 1. The input
    # reports instant p as tick 4m' + l with p = r_m' - d_0 + l (r_m' = 4m' + c), i.e. tick
    # p - c + d_0 = 4m + j + s_0 + 1 + d_0 (s_j = s_0 + j when in order).
    loop = slots[0] + 1 + d[0]
    return X2Timing(input_delay=d, in_order=in_order, lane0_edge=lane0, output_slot=slots,
                    output_in_order=out_order, loopback_ticks=loop, cycles_checked=len(rises))


def establish(*, instants=2400, setups=(HALF_PS // 4, 3 * HALF_PS // 4), seed=1):
    """Simulate with random pad levels and output lanes at each setup time and return the
    :class:`X2Timing` (raises if the setup times disagree) and the model source."""
    rng = np.random.default_rng(seed)
    results = set()
    for setup in setups:
        pad = rng.integers(0, 2, instants).astype(np.uint8)
        d = rng.integers(0, 2, (instants, 4)).astype(np.uint8)
        results.add(analyse(simulate(pad, d, setup_ps=setup)))
    if len({(r.input_delay, r.output_slot) for r in results}) != 1:
        raise LatscopeError(f"X2 lane timing depends on the setup time: {results}")
    return results.pop(), vendor_models()[1]
