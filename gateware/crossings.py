"""Clock-domain crossings: declared in the gateware, checked on every bitstream build.

nextpnr does not constrain paths between unrelated clocks (no false-path or max-delay constraint;
LPF ``BLOCK ASYNCPATHS`` is ignored), so nothing stops a build from routing a crossing slowly, and
nothing notices a new path between domains that no synchroniser protects. This module closes both.

Declaring. Every register that *receives* a signal from another clock domain carries the
attribute :data:`ATTR` naming the kind of crossing it belongs to (:data:`KINDS`):

``gray_pointer``
    The first synchroniser stage of an asynchronous FIFO's Gray-coded pointer (one bit changes per
    step, so a sample taken mid-change is the old or the new pointer). That holds only while the
    bits' delays differ by less than one *source* clock period (the pointer may step every source
    cycle): each bit's delay is checked against the source period, which bounds their skew.
``toggle_handshake``
    The first stage of a request/acknowledge toggle, and data registers loaded only after the
    toggle has passed two synchroniser stages (the source holds the data stable meanwhile). The
    only declared way for a multi-bit value other than a FIFO to cross.
``ff_synchronizer``
    The first stage of a plain two-flop synchroniser of a one-bit level (status bits). A wider
    value through flip-flops can be seen as a mix of old and new bits: refused when declared,
    and failed by the check when the netlist shows one.
``fifo_data``
    The register that reads an asynchronous FIFO's storage in the reading domain. An entry is
    written in the cycle its Gray write pointer is launched, and read only once that pointer has
    passed the reader's two synchroniser stages, at least one reading-clock period after it
    reached the first: a path from the written storage to this register (storage in flip-flops)
    must be shorter than the *destination* period. Storage in block RAM or LUT RAM is written and
    read inside the RAM, in its own two clocks, and shows no path here.
``forwarded_clock``
    A register clocked by a clock that the source domain makes from one of its own flip-flops,
    which rises one source cycle after the source last changed the register's data and before
    it changes them again (:class:`~latscope.gateware.bus_sampler.BusSampler`'s regenerated bus
    clocks: the sniffers' input registers). The data must arrive within that one source cycle:
    each bit's delay is checked against the *source* period (the clock's own insertion delay
    only adds to the setup time).
``async_reset``
    Not declared but recognised in the netlist: an asynchronous set/reset input (a reset
    synchroniser's flip-flops, the ECP5 I/O gearing's reset held by its start-up sequence). It is
    listed with its delay; it has no period to meet (its release is timed by the synchroniser or
    the sequence). A synchronous reset from another clock is an undeclared crossing.
``delay_control``
    Not declared but recognised in the netlist: the ``LOADN``/``MOVE``/``DIRECTION`` inputs of an
    ECP5 I/O logic cell holding an input delay cell (``DELAYF``, :mod:`latscope.gateware.delay`),
    driven from the link clock. nextpnr refers them to the I/O logic's capture clock, but they
    drive the delay cell's counter, which ``MOVE``'s falling edge steps; the controller holds each
    value for a whole link cycle, so each delay is checked against the *source* period.

:class:`Synchronizer` is :class:`amaranth.lib.cdc.FFSynchronizer` with the attribute on its first
stage; :func:`mark` puts it on a data register, or on the strobe that loads data registers (a
register that Yosys keeps under another name than the marked one is found through its enable).
A new clock domain (an Ethernet PHY's receive clock, say) is covered by the same check without
any change here: its crossings must use these.

Checking. :func:`check_crossings` reads nextpnr's detailed timing report (``--report`` with
``--detailed-timing-report``) and the synthesised netlist that nextpnr placed (Yosys JSON). Each
routed connection whose driver and sink are clocked by different clocks is a crossing arc; its
sink register is looked up in the netlist and must carry :data:`ATTR`, or the build fails naming
it. Each declared crossing is listed with its worst delay as nextpnr computed it to the
destination register, and the build fails when that delay, or the worst complete path nextpnr
reports between the two clocks, exceeds its bound (:data:`BOUNDS`: the source period for a Gray
pointer or a forwarded clock's data, the destination period for the others; the worst path the
destination period), or when
an FF synchronizer is more than one bit wide. Paths from unclocked
sources (pins, ``<async>``) are not crossings between domains; the two edges of one clock (DDR
I/O) are one domain.
"""

import re
from dataclasses import dataclass

from amaranth.hdl import Elaboratable, Module, Signal, Value

from latscope import LatscopeError

from .checks import rejected

__all__ = ["ATTR", "KINDS", "BOUNDS", "Synchronizer", "mark", "Crossing", "CrossingCheck",
           "check_crossings", "format_crossings"]

#: Name of the attribute on a crossing's destination register (kept by Yosys in the netlist).
ATTR = "latscope_crossing"

#: Kinds of crossing, with the words the build summary uses.
KINDS = {
    "gray_pointer": "Gray FIFO pointer",
    "toggle_handshake": "toggle handshake",
    "ff_synchronizer": "FF synchronizer",
    "fifo_data": "FIFO data",
    "forwarded_clock": "forwarded clock",
    "async_reset": "asynchronous reset",
    "delay_control": "delay-line control",
}

#: Which clock's period bounds a crossing's delay, per kind (the module docstring says why);
#: None: no bound (an asynchronous reset's release is timed by its synchroniser).
BOUNDS = {
    "gray_pointer": "source",
    "toggle_handshake": "destination",
    "ff_synchronizer": "destination",
    "fifo_data": "destination",
    "forwarded_clock": "source",
    "async_reset": None,
    "delay_control": "source",
}

#: iCE40 flip-flops whose set/reset input is asynchronous (the ``SR``/``SS`` ones are synchronous).
_ICE40_ASYNC_FF = {f"SB_DFF{n}{e}{rs}" for n in ("", "N") for e in ("", "E") for rs in "RS"}


def _check_kind(kind, width=1):
    # "async_reset" and "delay_control" are recognised in the netlist (an asynchronous set/reset
    # input; an ECP5 input delay cell's control input), not declared
    declarable = sorted(k for k in KINDS if k not in ("async_reset", "delay_control"))
    if kind not in declarable:
        raise ValueError(f"Crossing kind must be one of {', '.join(declarable)}, not {kind!r}")
    if kind == "ff_synchronizer" and width != 1:
        raise ValueError(f"An FF synchronizer's width must be 1 bit (a multi-bit value crosses "
                         f"through a handshake or Gray code), not {width}")
    return kind


def mark(value, kind, *, strobe=False):
    """Declare the register driving ``value`` (a signal or a view of one) as the destination of
    a crossing of ``kind``, or, with ``strobe=True``, ``value`` as the load strobe (clock enable)
    of such registers; returns ``value``.

    A strobe is kept by name (``keep``): it is a single combinational wire that synthesis would
    otherwise merge into a LUT, and the check finds data registers through it. A register is
    never given ``keep``: Yosys 0.70's ``synth_ice40`` miss-synthesises a kept register whose
    initial value has bits set (the iCE40 flip-flop powers up at 0, so those bits are inverted
    around the flip-flop, and ``abc9`` then drives the kept wire from both the inverter and a
    constant ``x``: "Driver-driver conflict ... Resolved using constant"). The configuration
    word's edge enables (initially all set) became constants that way, so the iCEBreaker sent
    no events after ARM; ``build_bitstream`` now fails on any such conflict.
    """
    signal = Value.cast(value)
    _check_kind(kind, len(signal))
    if not isinstance(signal, Signal):
        raise TypeError(f"Only a signal can be marked as a crossing destination, not {value!r}")
    signal.attrs[ATTR] = kind
    if strobe:
        if len(signal) != 1 or signal.init != 0:
            raise ValueError(f"A crossing's load strobe must be a 1-bit signal with initial "
                             f"value 0, not {value!r}")
        signal.attrs["keep"] = 1
    return value


class Synchronizer(Elaboratable):
    """A two-flop (by default) synchroniser whose first stage is a declared crossing.

    Same behaviour as :class:`amaranth.lib.cdc.FFSynchronizer` (``o`` follows ``i`` after
    ``stages`` cycles of ``o_domain``).

    Parameters
    ----------
    i, o : Value
        Input (any domain) and output (``o_domain``).
    kind : str
        One of :data:`KINDS`.
    o_domain : str
        Destination clock domain.
    init : int
        Initial value of every stage.
    stages : int
        Number of flip-flops, >= 2.
    """

    def __init__(self, i, o, *, kind, o_domain="sync", init=0, stages=2):
        with rejected(self):
            self.kind = _check_kind(kind, len(Value.cast(i)))
            if not isinstance(stages, int) or stages < 2:
                raise ValueError(f"Synchronizer stages must be an integer >= 2, not {stages!r}")
        self.i, self.o = i, o
        self.o_domain, self.init, self.stages = o_domain, init, stages

    def elaborate(self, platform):
        m = Module()
        shape = Value.cast(self.i).shape()
        flops = [Signal(shape, name=f"stage{n}", init=self.init,
                        attrs={ATTR: self.kind} if n == 0 else None)
                 for n in range(self.stages)]
        for src, dst in zip((self.i, *flops[:-1]), flops, strict=True):
            m.d[self.o_domain] += dst.eq(src)
        m.d.comb += self.o.eq(flops[-1])
        return m


@dataclass
class Crossing:
    """One declared crossing in a build: its destination register, kind, domains and delay."""
    name: str             # destination register (netlist name, bus index dropped)
    kind: str             # key of KINDS
    source: str           # source clock (nextpnr's name)
    dest: str             # destination clock
    bits: int             # arcs (bits) of the crossing found in the report
    delay_ns: float       # worst delay nextpnr computed to the destination register
    period_ns: float      # destination clock period
    source_period_ns: float = float("inf")   # source clock period
    width: int = 1        # bits of the declared register in the netlist

    @property
    def bound(self):
        """Which period bounds the delay (:data:`BOUNDS`): "source", "destination" or None."""
        return BOUNDS[self.kind]

    @property
    def bound_ns(self):
        """The longest delay allowed, ns (infinite without a bound)."""
        return {"source": self.source_period_ns, "destination": self.period_ns,
                None: float("inf")}[self.bound]

    @property
    def multibit_ff(self):
        """An FF synchronizer wider than one bit (a bus that can be seen half old, half new)."""
        return self.kind == "ff_synchronizer" and self.width > 1

    @property
    def ok(self):
        # An asynchronous reset has no setup relation to the destination clock: it asserts at
        # once, and its release is what a reset synchroniser (or the I/O gearing's start-up
        # sequence) times.
        return self.delay_ns <= self.bound_ns and not self.multibit_ff


@dataclass
class CrossingCheck:
    """What :func:`check_crossings` found: declared crossings, undeclared arcs, and per clock pair
    the worst complete path nextpnr reported."""
    crossings: list
    undeclared: list      # (source clock, dest clock, net, sink register) per undeclared arc
    worst_paths: dict     # "src -> dst": (delay_ns, period_ns)

    @property
    def ok(self):
        return (not self.undeclared and all(c.ok for c in self.crossings)
                and all(d <= p for d, p in self.worst_paths.values()))

    def errors(self):
        """One line per failure."""
        lines = []
        for src, dst, net, sink in self.undeclared:
            lines.append(f"undeclared crossing {src} -> {dst}: net {net} into {sink} (use "
                         f"latscope.gateware.crossings.Synchronizer or mark())")
        for c in self.crossings:
            if c.multibit_ff:
                lines.append(f"crossing {c.name} ({KINDS[c.kind]}, {c.source} -> {c.dest}) is "
                             f"{c.width} bits wide: a multi-bit value must cross through a "
                             f"declared handshake or Gray code")
            if c.delay_ns > c.bound_ns:
                clock = c.source if c.bound == "source" else c.dest
                lines.append(f"crossing {c.name} ({KINDS[c.kind]}, {c.source} -> {c.dest}) "
                             f"delay {c.delay_ns:.2f} ns exceeds the {c.bound} ({clock}) period "
                             f"{c.bound_ns:.2f} ns")
        for pair, (delay, period) in sorted(self.worst_paths.items()):
            if delay > period:
                lines.append(f"worst path {pair} is {delay:.2f} ns, longer than the destination "
                             f"period {period:.2f} ns")
        return lines

    def as_dict(self):
        """JSON-ready form (the build summary's ``crossings`` key)."""
        return {
            "ok": self.ok,
            "crossings": [{"name": c.name, "kind": c.kind, "source": c.source, "dest": c.dest,
                           "bits": c.bits, "width": c.width, "delay_ns": round(c.delay_ns, 3),
                           "period_ns": round(c.period_ns, 3),
                           "source_period_ns": _finite(c.source_period_ns),
                           "bound": c.bound, "bound_ns": _finite(c.bound_ns), "ok": c.ok}
                          for c in self.crossings],
            "undeclared": [{"source": s, "dest": d, "net": n, "sink": k}
                           for s, d, n, k in self.undeclared],
            "worst_paths": {k: {"delay_ns": round(d, 3), "period_ns": round(p, 3)}
                            for k, (d, p) in sorted(self.worst_paths.items())},
        }


def _finite(ns):
    """``ns`` rounded to ps, None when infinite (no bound, or a clock without a constraint)."""
    return None if ns == float("inf") else round(ns, 3)


_EVENT_RE = re.compile(r"^(posedge|negedge) (.+)$")


def _clock(event):
    """The clock of a nextpnr timing event (``posedge clk`` -> ``clk``), None for ``<async>``."""
    found = _EVENT_RE.match(event or "")
    return _strip_clock_net(found.group(2)) if found else None


def _strip_clock_net(name):
    """nextpnr-ecp5 names a clock by its global net (``$glbnet$capture_clk``)."""
    return name[len("$glbnet$"):] if name.startswith("$glbnet$") else name


class _Netlist:
    """Lookups in a Yosys JSON netlist: cell by name, the register a cell drives, attributes of
    every name of a bit."""

    def __init__(self, netlist):
        modules = netlist.get("modules", {})
        tops = [m for m in modules.values() if str(m.get("attributes", {}).get("top", "0"))
                .strip("0") != ""]
        if len(tops) != 1:
            raise LatscopeError("The synthesised netlist has no single top module")
        top = tops[0]
        self.cells = top.get("cells", {})
        self.names = {}          # bit -> [(name, attrs)]
        self.widths = {}         # name -> bits
        for name, net in top.get("netnames", {}).items():
            self.widths[name] = len(net.get("bits", []))
            for bit in net.get("bits", []):
                self.names.setdefault(bit, []).append((name, net.get("attributes", {})))
        self.d_to_ff = {}        # data-input bit -> flip-flop cell
        self.lut_inputs = {}     # output bit of a LUT -> its input bits
        for cname, cell in self.cells.items():
            conns = cell.get("connections", {})
            if "LUT" in cell.get("type", ""):
                ins = [b for port in ("I0", "I1", "I2", "I3", "A", "B", "C", "D")
                       for b in conns.get(port, [])]
                for port in ("O", "Z"):
                    for bit in conns.get(port, []):
                        self.lut_inputs[bit] = ins
            if "Q" in conns:
                for port in ("D", "DI"):
                    for bit in conns.get(port, []):
                        self.d_to_ff.setdefault(bit, cname)

    def _cell(self, name):
        for suffix in ("", "_DFFLC", "_LC", "$CARRY"):
            if suffix and not name.endswith(suffix):
                continue
            base = name[:len(name) - len(suffix)] if suffix else name
            if base in self.cells:
                return base, self.cells[base]
        return None, None

    def async_reset(self, sink_cell, port):
        """The netlist name of the nextpnr cell ``sink_cell`` when ``port`` is its asynchronous
        set/reset input (an ECP5 flip-flop with ``SRMODE=ASYNC``, an ECP5 I/O logic cell's reset,
        an iCE40 ``SB_DFF*R``/``*S``), else None."""
        if sink_cell.endswith("$IOL"):
            # ECP5 I/O logic (the DDR/gearing registers): its LSR is the cells' asynchronous RST
            return sink_cell[:-len("$IOL")] if port == "LSR" else None
        name, cell = self._cell(sink_cell)
        if cell is None:
            return None
        kind = cell.get("type", "")
        if kind == "TRELLIS_FF" and port == "LSR":
            return name if cell.get("parameters", {}).get("SRMODE") == "ASYNC" else None
        if kind in _ICE40_ASYNC_FF and port in ("R", "S", "SR"):
            return name
        if "Q" not in cell.get("connections", {}) and port in ("SR", "R", "S"):
            # an iCE40 logic cell packed by nextpnr: its flip-flop's own type decides
            outs = cell["connections"].get("O", [])
            ff = next((self.d_to_ff[b] for b in outs if b in self.d_to_ff), None)
            if ff is not None and self.cells[ff].get("type") in _ICE40_ASYNC_FF:
                return ff
        return None

    @staticmethod
    def delay_control(sink_cell, port):
        """The netlist name of the channel buffer whose ECP5 I/O logic ``sink_cell`` holds a
        ``DELAYF`` when ``port`` is one of its control inputs (``LOADN``, ``MOVE``,
        ``DIRECTION``), else None. nextpnr refers every I/O-logic port to the cell's clock, but
        these drive the delay cell's own counter, which ``MOVE`` steps (Lattice's model of the
        cell; ``gateware/delay.py``): no register of the destination clock receives them."""
        if sink_cell.endswith("$IOL") and port in ("LOADN", "MOVE", "DIRECTION"):
            return sink_cell[:-len("$IOL")]
        return None

    def register(self, sink_cell):
        """``(name, kind, width)`` of the register that the nextpnr cell ``sink_cell`` holds
        (kind None when undeclared; width: bits of the declared net), or ``(None, None, 1)`` when
        it cannot be found."""
        name, cell = self._cell(sink_cell)
        if cell is None:
            return None, None, 1
        conns = cell.get("connections", {})
        if "Q" not in conns:           # a LUT packed with its flip-flop: follow its output
            outs = conns.get("O", []) or conns.get("F", [])
            ff = next((self.d_to_ff[b] for b in outs if b in self.d_to_ff), None)
            if ff is None:
                return None, None, 1
            conns = self.cells[ff]["connections"]
        kind, best, width = None, None, 1
        for bit in conns["Q"]:
            for alias, attrs in self.names.get(bit, []):
                if ATTR in attrs:
                    kind, best, width = attrs[ATTR], alias, self.widths[alias]
                elif best is None and not alias.startswith("$"):
                    best = alias
        if kind is None:
            # A data register loaded by a declared handshake strobe (its clock enable): Yosys
            # may have kept the register itself under another name than the marked one.
            # The enable may be the strobe itself or one LUT that combines it with others.
            for port in ("E", "CE"):
                for bit in conns.get(port, []):
                    for b in [bit, *self.lut_inputs.get(bit, [])]:
                        for alias, attrs in self.names.get(b, []):
                            if ATTR in attrs:
                                kind, best = attrs[ATTR], f"registers loaded by {alias}"
        return best or name, kind, width


def check_crossings(report, netlist):
    """Find and check every clock-domain crossing of a placed and routed design.

    Parameters
    ----------
    report : dict
        nextpnr's ``--report`` JSON written with ``--detailed-timing-report``.
    netlist : dict
        The Yosys JSON netlist nextpnr read.

    Returns
    -------
    CrossingCheck

    Raises
    ------
    LatscopeError
        The report has no detailed net timings.
    """
    if "detailed_net_timings" not in report:
        raise LatscopeError("The nextpnr report has no detailed net timings (run nextpnr with "
                            "--detailed-timing-report)")
    periods = {}
    for net, info in (report.get("fmax") or {}).items():
        periods[_strip_clock_net(net)] = 1e3 / float(info["constraint"])
    nl = _Netlist(netlist)
    found = {}
    undeclared = []
    for net in report["detailed_net_timings"]:
        src = _clock(net.get("event"))
        if src is None:
            continue
        for end in net.get("endpoints", []):
            dst = _clock(end.get("event"))
            if dst is None or dst == src:
                continue
            delay = end.get("delay")
            delay = max(delay) if isinstance(delay, list) else float(delay)
            reset = nl.async_reset(end["cell"], end.get("port", ""))
            control = nl.delay_control(end["cell"], end.get("port", ""))
            if reset is not None:
                name, kind, width = reset, "async_reset", 1
            elif control is not None:
                name, kind, width = control, "delay_control", 1
            else:
                name, kind, width = nl.register(end["cell"])
            if kind is None:
                undeclared.append((src, dst, net["net"], name or end["cell"]))
                continue
            key = (re.sub(r"\[\d+\]$", "", name), kind, src, dst)
            bits, worst, wide = found.get(key, (0, 0.0, 1))
            found[key] = (bits + 1, max(worst, delay), max(wide, width))
    crossings = []
    for (name, kind, src, dst), (bits, delay, width) in sorted(found.items()):
        crossings.append(Crossing(name=name, kind=kind, source=src, dest=dst, bits=bits,
                                  delay_ns=delay, period_ns=periods.get(dst, float("inf")),
                                  source_period_ns=periods.get(src, float("inf")),
                                  width=width))
    worst = {}
    for path in report.get("critical_paths", []):
        src, dst = _clock(path.get("from")), _clock(path.get("to"))
        if src is None or dst is None or src == dst:
            continue
        delay = sum(float(step.get("delay", 0)) for step in path.get("path", []))
        worst[f"{src} -> {dst}"] = (delay, periods.get(dst, float("inf")))
    return CrossingCheck(crossings=crossings, undeclared=undeclared, worst_paths=worst)


def _domain(entry, end):
    role = entry.get(f"{end}_domain")
    return entry[end] if role in (None, "other") else role


def format_crossings(check):
    """Lines for the build summary (from :meth:`CrossingCheck.as_dict`): one per crossing, the
    worst path per clock pair, and any undeclared arc."""
    lines = []
    for c in check["crossings"]:
        # summaries written before the bounds existed compare with the destination period
        bound, bound_ns = c.get("bound", "destination"), c.get("bound_ns", c["period_ns"])
        limit = f"/ {bound_ns:.2f} ns ({bound} period)" if bound_ns is not None else "(no bound)"
        width = c.get("width", 1)
        verdict = "ok" if c["ok"] else ("TOO WIDE" if c["kind"] == "ff_synchronizer"
                                        and width > 1 else "TOO SLOW")
        lines.append(f"crossing    {_domain(c, 'source')}->{_domain(c, 'dest')} "
                     f"{KINDS[c['kind']]:<17} {c['delay_ns']:5.2f} ns {limit} "
                     f"{verdict}  {c['name']} ({c['bits']} bit"
                     f"{'s' if c['bits'] != 1 else ''})")
    for pair, p in check["worst_paths"].items():
        lines.append(f"crossing    worst path {pair}: {p['delay_ns']:.2f} ns "
                     f"(destination period {p['period_ns']:.2f} ns)")
    for u in check["undeclared"]:
        lines.append(f"crossing    UNDECLARED {u['source']}->{u['dest']} net {u['net']} into "
                     f"{u['sink']}")
    return lines
