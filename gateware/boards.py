"""The boards latscope runs on: pin maps, clocks and the top-level wrapper around the core.

Every board-specific fact lives in one :class:`Board` entry of :data:`BOARDS`: which connector pins
carry which channel role (:data:`CHANNEL_ROLES`, one table for all boards), the clock plan (PLL
parameters, capture and link frequencies, the UART divisor) and whether the capture and link domains
are separate (an asynchronous FIFO between them) or one clock. :class:`BoardTop` turns an entry into
an elaboratable design: PLL and reset, DDR input buffers for the channels, a DDR output for the
self-test pin, the UART and :class:`latscope.gateware.top.LatscopeCore`.

``docs/boards.md`` documents the same tables for people wiring a board; ``gateware/tests/
test_boards.py`` checks the two agree.
"""

from dataclasses import dataclass, field

from amaranth.build import Attrs, Pins, Resource
from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    DomainRenamer,
    Elaboratable,
    Instance,
    Module,
    Mux,
    ResetSignal,
    Signal,
)
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer

from latscope import LatscopeError
from latscope.gateware.bus_sampler import TIMINGS, BusSampler
from latscope.gateware.crossings import mark
from latscope.gateware.delay import DelayControl
from latscope.gateware.eth.board import add_ethernet
from latscope.gateware.eth.model import DEFAULT_NET
from latscope.gateware.eth.simtop import max_frame_for
from latscope.gateware.gearing import GearedInput, GearedOutput, GearingStart, edge_clocks
from latscope.gateware.linkword import WordToBytes, link_bytes_of
from latscope.gateware.pll import EhxplllPlan, ehxplll
from latscope.gateware.protocol import EthSpeed
from latscope.gateware.top import LatscopeCore
from latscope.gateware.uart import UART

__all__ = ["CHANNEL_ROLES", "ECP5_LISTEN_ATTRS", "ICE40_LISTEN_ATTRS", "Board", "BOARDS",
           "get_board", "make_platform", "BoardTop"]


#: Channel roles, in channel order (channel ``k`` is ``CHANNEL_ROLES[k]``). ``rx_dv``/``tx_en`` are
#: the MII receive-data-valid and transmit-enable of the PHY under test, ``crs_dv`` is RMII's
#: carrier-sense/data-valid (used instead of ``rx_dv`` on RMII PHYs), ``m0``..``m4`` are marker
#: GPIOs of the device under test (``zephyr-app``).
CHANNEL_ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")


@dataclass(frozen=True)
class Board:
    """One supported board: its platform, pin map and clock plan.

    Parameters
    ----------
    name : str
        Name used on the command line (``--board NAME``).
    title : str
        Human-readable board name.
    family : str
        FPGA family, ``"ecp5"`` or ``"ice40"``.
    platform_path : str
        ``module:Class`` of the amaranth-boards platform.
    input_hz : float
        Board oscillator frequency, Hz.
    capture_hz : float
        Capture clock frequency, Hz. With DDR input a tick is ``1 / (2 * capture_hz)``.
    sync_hz : float
        Link ("sync") clock frequency, Hz; equal to ``capture_hz`` when ``async_fifo`` is false.
        On iCE40 with ``async_fifo`` it must be ``capture_hz`` divided by an integer >= 2 (a
        counter flop on a global buffer makes it).
    uart_divisor : int
        Link clock cycles per UART bit sent; the baud rate is ``sync_hz / uart_divisor``.
    uart_rx_domain : str
        Clock domain of the UART receiver: ``"sync"``, or ``"capture"`` where the link clock is
        too slow to sample the line (the receiver needs at least 4 cycles per bit).
    async_fifo : bool
        True if capture and link run on separate clocks joined by an asynchronous FIFO.
    channel_pins : tuple of (str, int)
        Per channel (in :data:`CHANNEL_ROLES` order): connector name and number, then pin.
    selftest_pin : tuple
        Connector name, number and pin of the self-test DDR output.
    io_attrs : dict
        I/O attributes of the pins the instrument only listens on: the channels and the frame
        sniffers' bus (standard; no pull, see :data:`ECP5_LISTEN_ATTRS`).
    selftest_attrs : dict or None
        I/O attributes of the self-test output (default: ``io_attrs``).
    pll : dict
        PLL primitive parameters (family-specific).
    fifo_depth : int
        Capture FIFO entries.
    nextpnr_seed : int or None
        Placement seed of the shipped build (``None``: nextpnr's default). Part of the shipped
        configuration when the timing margin depends on placement.
    core_overrides : dict
        Extra :class:`~latscope.gateware.top.LatscopeCore` parameters for this board.
    lanes : int
        Samples per capture clock: 2 with DDR input (``IDDRX1F``/``SB_IO``), 4 with ECP5 2:1
        gearing (``IDDRX2F``).
    gearing : str
        ECP5 input gearing: ``"x1"`` (``amaranth.lib.io.DDRBuffer``, ``IDDRX1F``) or ``"x2"``
        (:mod:`latscope.gateware.gearing`: ``IDDRX2F`` with ``ECLKSYNCB`` and ``CLKDIVF``; the
        capture clock is the edge clock halved).
    eclk_pll : dict
        With ``gearing="x2"``: parameters of a second EHXPLLL making the edge clock (CLKOP).
    frame_pins : dict
        Frame-aware capture (``BoardTop(..., sniffer="mii"|"rmii")``): per interface, the pins of
        the DUT's MII/RMII bus by role (``rx_clk``, ``rx_dv``, ``rx_er``, ``rxd``, ``tx_clk``,
        ``tx_en``, ``txd``; RMII: ``ref_clk``, ``crs_dv``, ``rxd``, ``tx_en``, ``txd``) as
        ``(connector, number, "pins")``. Empty: the board captures edges only.
    ethernet : bool
        The board streams over its RGMII Ethernet PHY too (:mod:`latscope.gateware.eth.board`).
    """
    name: str
    title: str
    family: str
    platform_path: str
    input_hz: float
    capture_hz: float
    sync_hz: float
    uart_divisor: int
    async_fifo: bool
    channel_pins: tuple
    selftest_pin: tuple
    io_attrs: dict = field(default_factory=dict)
    selftest_attrs: dict = None
    pll: dict = field(default_factory=dict)
    fifo_depth: int = 1024
    lanes: int = 2
    nextpnr_seed: int = None
    uart_rx_domain: str = "sync"
    core_overrides: dict = field(default_factory=dict)
    gearing: str = "x1"
    eclk_pll: dict = field(default_factory=dict)

    @property
    def eclk_hz(self):
        """Edge clock frequency with ``gearing="x2"`` (twice the capture clock), else ``None``."""
        return 2 * self.capture_hz if self.gearing == "x2" else None
    frame_pins: dict = field(default_factory=dict)
    ethernet: bool = False

    @property
    def tick_hz(self):
        """Timestamp ticks per second: ``capture_hz * lanes``."""
        return self.capture_hz * self.lanes

    @property
    def resolution_ns(self):
        """Length of one timestamp tick, ns."""
        return 1e9 / self.tick_hz

    @property
    def baud(self):
        """UART bit rate, bit/s."""
        return self.sync_hz / self.uart_divisor

    @property
    def uart_rx_divisor(self):
        """Receiver clock cycles per UART bit (in ``uart_rx_domain``)."""
        hz = self.capture_hz if self.uart_rx_domain == "capture" else self.sync_hz
        return round(hz / self.baud)

    def platform_class(self):
        """Import and return the amaranth-boards platform class."""
        import importlib
        module, _, cls = self.platform_path.partition(":")
        return getattr(importlib.import_module(module), cls)

    def core_params(self, **overrides):
        """Keyword arguments of :class:`~latscope.gateware.top.LatscopeCore` for this board."""
        params = dict(channels=len(CHANNEL_ROLES), lanes=self.lanes,
                      capture_hz=int(self.capture_hz), board=self.name,
                      channel_names=CHANNEL_ROLES, fifo_depth=self.fifo_depth,
                      async_fifo=self.async_fifo)
        params.update(self.core_overrides)
        params.update(overrides)
        return params


# Pins the instrument only listens on (the channels and the frame sniffers' MII/RMII pins) have
# no pull. A tap must not change the levels the DUT sees: many PHYs latch their configuration
# straps (PHY address, mode) from exactly these pins while their reset is released (LAN8720A:
# RXD0/RXD1/CRS_DV = MODE0-2, RXER = PHYAD0; DP83848: RX_DV = MII_MODE), through internal strap
# resistors that a weak FPGA pull can outvote; MCUs sample boot pins the same way, and a marker
# GPIO can be one. An unconnected channel therefore floats: disable its edges (the capture
# config's ``[edges]``) or tie it to a PMOD ground pin. ``gateware/tests/test_pins.py`` reads
# every listen-only pin's pull back from the generated constraints.

#: I/O attributes of the ECP5's listen-only pins. ``PULLMODE=NONE`` is stated: an LVCMOS33 input
#: without a PULLMODE pulls down (the ECP5's default).
ECP5_LISTEN_ATTRS = {"IO_TYPE": "LVCMOS33", "PULLMODE": "NONE"}
#: I/O attributes of the iCE40's listen-only pins: no ``PULLUP`` (``SB_IO``'s pull-up is off
#: unless enabled; the iCE40 has no pull-down).
ICE40_LISTEN_ATTRS = {"IO_STANDARD": "SB_LVCMOS"}


def _pmod(number, *pins):
    return tuple(("pmod", number, pin) for pin in pins)


#: The supported boards, by name.
# Frame-aware capture on the ECPIX-5: the DUT's MII/RMII bus on PMOD2 (receive) and PMOD3
# (transmit). RX_DV/CRS_DV and TX_EN go to these pins as well as to their capture channels.
_ECPIX5_FRAME_PINS = {
    "mii": {"rx_clk": ("pmod", 2, "1"), "rx_dv": ("pmod", 2, "2"),
            "rx_er": ("pmod", 2, "3"), "rxd": ("pmod", 2, "4 7 8 9"),
            "tx_clk": ("pmod", 3, "1"), "tx_en": ("pmod", 3, "2"),
            "txd": ("pmod", 3, "4 7 8 9")},
    "rmii": {"ref_clk": ("pmod", 2, "1"), "crs_dv": ("pmod", 2, "2"),
             "rxd": ("pmod", 2, "4 7"), "tx_en": ("pmod", 3, "2"),
             "txd": ("pmod", 3, "4 7")},
}

BOARDS = {
    # The default ECPIX-5 build: 2:1 input gearing, 4 samples per 200 MHz capture clock (1.25 ns).
    "ecpix5": Board(
        name="ecpix5", title="LambdaConcept ECPIX-5 (LFE5UM5G-85F-8BG554)", family="ecp5",
        platform_path="amaranth_boards.ecpix5:ECPIX585Platform",
        input_hz=100e6, capture_hz=200e6, sync_hz=48e6, uart_divisor=4, async_fifo=True,
        lanes=4, gearing="x2",
        channel_pins=_pmod(0, 1, 2, 3, 4, 7, 8, 9, 10),
        selftest_pin=("pmod", 1, 1),
        io_attrs=ECP5_LISTEN_ATTRS,
        selftest_attrs={"IO_TYPE": "LVCMOS33", "PULLMODE": "NONE", "SLEWRATE": "FAST"},
        # Link clock: the PLL of the x1 build (CLKOS 48 MHz; its CLKOP only closes the loop).
        pll=dict(CLKI_DIV=5, CLKFB_DIV=8, CLKOP_DIV=3, CLKOS_DIV=10),
        # Edge clock: 100 MHz / CLKI_DIV 1 = 100 MHz PFD; CLKOP feedback x4 -> 400 MHz;
        # VCO = 400 MHz * CLKOP_DIV 2 = 800 MHz. No VCO in 400..800 MHz divides to both 400 and
        # 48 MHz, hence two PLLs. CLKDIVF halves 400 MHz to the 200 MHz capture clock.
        eclk_pll=dict(CLKI_DIV=1, CLKFB_DIV=4, CLKOP_DIV=2),
        frame_pins=_ECPIX5_FRAME_PINS,
        ethernet=True,
        # One unit formed per 48 MHz link cycle and two stream bytes per link cycle from the
        # encoder to the Ethernet streamer: what the Ethernet link needs (docs/ethernet.md).
        # Input delay lines (a DELAYF before each IDDRX2F, set by SET_DELAY) for sub-tick
        # channel alignment (docs/selftest.md).
        core_overrides=dict(pipelined_encoder=True, link_bytes=2, input_delay=True),
    ),
    # The 3.125 ns build: IDDRX1F (amaranth DDRBuffer), 2 samples per 160 MHz capture clock.
    "ecpix5-x1": Board(
        name="ecpix5-x1", title="LambdaConcept ECPIX-5 (LFE5UM5G-85F-8BG554), x1 gearing",
        family="ecp5", platform_path="amaranth_boards.ecpix5:ECPIX585Platform",
        input_hz=100e6, capture_hz=160e6, sync_hz=48e6, uart_divisor=4, async_fifo=True,
        # PMOD0 (J?) top row 1-4, bottom row 7-10: T25 U25 U24 V24 / T26 U26 V26 W26
        channel_pins=_pmod(0, 1, 2, 3, 4, 7, 8, 9, 10),
        selftest_pin=("pmod", 1, 1),     # PMOD1 pin 1 (U23)
        io_attrs=ECP5_LISTEN_ATTRS,
        selftest_attrs={"IO_TYPE": "LVCMOS33", "PULLMODE": "NONE", "SLEWRATE": "FAST"},
        # EHXPLLL: 100 MHz / CLKI_DIV 5 = 20 MHz PFD; CLKOP feedback x8 -> 160 MHz;
        # VCO = 160 MHz * CLKOP_DIV 3 = 480 MHz (400..800 allowed); CLKOS = 480 / 10 = 48 MHz.
        pll=dict(CLKI_DIV=5, CLKFB_DIV=8, CLKOP_DIV=3, CLKOS_DIV=10),
        frame_pins=_ECPIX5_FRAME_PINS,
        ethernet=True,
        # One unit formed per 48 MHz link cycle and two stream bytes per link cycle from the
        # encoder to the Ethernet streamer: what the Ethernet link needs (docs/ethernet.md).
        core_overrides=dict(pipelined_encoder=True, link_bytes=2),
    ),
    "icebreaker": Board(
        name="icebreaker", title="1BitSquared iCEBreaker (iCE40UP5K-SG48)", family="ice40",
        platform_path="amaranth_boards.icebreaker:ICEBreakerPlatform",
        input_hz=12e6, capture_hz=48e6, sync_hz=24e6, uart_divisor=2, async_fifo=True,
        uart_rx_domain="capture",
        # PMOD1A: pins 4 2 47 45 / 3 48 46 44
        channel_pins=_pmod(0, 1, 2, 3, 4, 7, 8, 9, 10),
        selftest_pin=("pmod", 1, 1),     # PMOD1B pin 1 (43)
        io_attrs=ICE40_LISTEN_ATTRS,
        # (No slew-rate control on iCE40 outputs.)
        selftest_attrs={"IO_STANDARD": "SB_LVCMOS"},
        # SB_PLL40_PAD, SIMPLE feedback: 12 MHz * (DIVF+1) / (DIVR+1) = 768 MHz VCO, / 2**DIVQ = 48
        # (values from `icepll -i 12 -o 48`). The link logic reaches only ~25 MHz on the UP5K, so
        # it runs on its own 24 MHz clock (48 MHz halved by a flop onto an SB_GB) behind the
        # asynchronous FIFO. The UART sends at 12 Mbaud from it (divisor 2) and receives in the
        # 48 MHz capture domain (divisor 4), the FT2232H's highest rate both ways.
        pll=dict(DIVR=0, DIVF=63, DIVQ=4, FILTER_RANGE=1),
        fifo_depth=512,
        # Area: the UP5K's 5,280 cells are nearly full; 48-bit time and counts (34 days of ticks
        # before the time wraps) instead of 64 free the room the 48 MHz timing needs.
        core_overrides=dict(counter_width=24, max_glitch=3, time_width=48),
        # The UP5K's margin depends on placement (docs/boards.md, build results): seed 2 is
        # shipped; `latscope bench` rebuilds seeds 1-3.
        nextpnr_seed=2,
    ),
}


def get_board(name):
    """Return the :class:`Board` called ``name``; raise :class:`LatscopeError` for unknown names."""
    try:
        return BOARDS[name]
    except KeyError:
        raise LatscopeError(f"Unknown board {name!r}; known boards: "
                            f"{', '.join(sorted(BOARDS))}") from None


def make_platform(board, *, sniffer=None):
    """An amaranth-boards platform instance for ``board`` with latscope's pins added as resources
    ``latscope_ch`` (all channels, channel order) and ``latscope_selftest``, and with ``sniffer``
    (``"mii"``/``"rmii"``) one ``latscope_phy_<role>`` resource per bus pin."""
    if isinstance(board, str):
        board = get_board(board)
    platform = board.platform_class()()
    if sniffer is not None:
        for role, (c, n, pins) in frame_pins(board, sniffer).items():
            # the bus clocks are data here, sampled with the bus (BoardTop._frame_pins); the
            # clocks regenerated from them are constrained where they are made
            platform.add_resources([Resource(f"latscope_phy_{role}", 0,
                                             Pins(pins, dir="i", conn=(c, n)),
                                             Attrs(**board.io_attrs))])
    conn = {(c, n) for c, n, _ in board.channel_pins}
    if len(conn) != 1:
        raise ValueError("All channel pins must be on one connector")
    (conn,) = conn
    pins = " ".join(str(pin) for _, _, pin in board.channel_pins)
    st_conn, st_num, st_pin = board.selftest_pin
    platform.add_resources([
        Resource("latscope_ch", 0, Pins(pins, dir="i", conn=conn), Attrs(**board.io_attrs)),
        Resource("latscope_selftest", 0, Pins(str(st_pin), dir="o", conn=(st_conn, st_num)),
                 Attrs(**(board.selftest_attrs or board.io_attrs))),
    ])
    if board.family == "ecp5":
        # The reset button pulls the (active-low) pin down; a pull-up holds it released.
        rst = platform.resources["rst", 0]
        platform.resources["rst", 0] = Resource("rst", 0, *rst.ios,
                                                Attrs(**rst.attrs, PULLMODE="UP"))
    else:
        platform.add_resources(platform.break_off_pmod)   # status LEDs 1-2 on the snap-off
    return platform


def frame_pins(board, sniffer):
    """The MII/RMII pins of ``board`` for ``sniffer``; LatscopeError if it has none."""
    if sniffer not in ("mii", "rmii"):
        raise LatscopeError(f"Frame capture interface must be 'mii' or 'rmii', not {sniffer!r}")
    if sniffer not in board.frame_pins:
        raise LatscopeError(f"Board {board.name!r} has no {sniffer.upper()} frame capture "
                            f"(edges only; see docs/boards.md)")
    return board.frame_pins[sniffer]


def board_pin_table(board):
    """Rows ``(channel, role, connector, pin, fpga_pin)`` for ``board``, the self-test output last
    (channel ``None``). FPGA pin names come from the amaranth-boards connector definition."""
    if isinstance(board, str):
        board = get_board(board)
    platform = board.platform_class()()
    rows = []
    for ch, ((c, n, pin), role) in enumerate(zip(board.channel_pins, CHANNEL_ROLES, strict=True)):
        rows.append((ch, role, f"{c}{n}", pin, platform.connectors[c, n].mapping[str(pin)]))
    c, n, pin = board.selftest_pin
    rows.append((None, "selftest", f"{c}{n}", pin, platform.connectors[c, n].mapping[str(pin)]))
    return rows


def eth_link_leds(status):
    """``(usable, unusable)`` for the Ethernet PHY's :class:`~latscope.gateware.eth.inband.
    EthLinkStatus`: a link the Ethernet link carries datagrams on (1000 Mb/s full duplex), and a
    link it does not (any other speed or duplex: the PHY advertises them all). Neither without a
    link."""
    usable = status.link & (status.speed == EthSpeed.MBPS_1000) & status.full_duplex
    return usable, status.link & ~usable


class BoardTop(Elaboratable):
    """The complete instrument on a board: clocks, pins, UART and the core.

    Parameters
    ----------
    board : Board or str
        The board.
    core : wiring.Component, optional
        The instrument core, with the signature of :class:`~latscope.gateware.top.LatscopeCore`
        (``samples``, ``selftest_out``, ``tx``, ``rx``). By default a ``LatscopeCore`` built with
        :meth:`Board.core_params` and ``core_overrides``.
    **core_overrides
        Extra keyword arguments for the default core (e.g. ``source_hash``).
    """

    def __init__(self, board, *, core=None, **core_overrides):
        try:
            self._setup(board, core, core_overrides)
        except Exception:
            self._MustUse__silence = True    # a design that failed to construct is not "unused"
            raise

    def _setup(self, board, core, core_overrides):
        if isinstance(board, str):
            board = get_board(board)
        if not isinstance(board, Board):
            raise TypeError(f"Board must be a Board or a board name, not {board!r}")
        if core is not None and core_overrides:
            raise TypeError("Core overrides cannot be given together with a core")
        self.board = board
        self.sniffer = core_overrides.get("sniffer") if core is None else getattr(
            getattr(core, "frames", None), "interface", None)
        if self.sniffer is not None:
            frame_pins(board, self.sniffer)
        no_delay_cells = LatscopeError(f"Input delay lines need an ECP5 build with x2 gearing "
                                       f"(DELAYF before IDDRX2F), not board {board.name!r}")
        if core is None:
            if core_overrides.get("input_delay") and board.gearing != "x2":
                raise no_delay_cells         # before a core is made that would go unused
            if board.ethernet:
                core_overrides.setdefault("net", DEFAULT_NET)
            core = LatscopeCore(**board.core_params(**core_overrides))
        if "delay_taps" in core.signature.members and board.gearing != "x2":
            raise no_delay_cells
        expected = board.lanes * len(CHANNEL_ROLES)
        if len(core.samples) != expected:
            raise ValueError(f"Core samples must be {expected} bits wide for board "
                             f"{board.name!r}, not {len(core.samples)}")
        self.core = core

    def _clocks_ecp5_x2(self, m, platform):
        """Two PLLs (link clock; edge clock), ECLKSYNCB + CLKDIVF, the start-up sequence."""
        board = self.board
        clk_port = platform.request(platform.default_clk, dir="-")
        m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_port)
        rst_port = platform.request(platform.default_rst, dir="-")
        m.submodules.rst_buf = rst_buf = io.Buffer("i", rst_port)
        loop, clk_sync, eclk_raw = Signal(), Signal(), Signal()
        locked_sync, locked_eclk = Signal(), Signal()
        m.submodules.pll = ehxplll(EhxplllPlan(board.input_hz, board.pll), clki=clk_buf.i,
                                   clkop=loop, clkos=clk_sync, locked=locked_sync)
        m.submodules.eclk_pll = ehxplll(EhxplllPlan(board.input_hz, board.eclk_pll),
                                        clki=clk_buf.i, clkop=eclk_raw, locked=locked_eclk)
        m.domains.capture = ClockDomain("capture")
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(clk_sync)
        self._locked = locked_sync & locked_eclk                # the PLL lock LED
        arst = ~locked_sync | ~locked_eclk | rst_buf.i
        m.submodules.rst_sync = ResetSynchronizer(arst, domain="sync")
        self._clk_in, self._arst = clk_buf.i, arst            # for the Ethernet link's PLL
        m.submodules.gearing_start = start = GearingStart()
        eclk, sclk = edge_clocks(m, eclk_in=eclk_raw, start=start)
        # (no explicit constraint: nextpnr derives 400 MHz through ECLKSYNCB and 200 MHz through
        # CLKDIVF from the PLL's FREQUENCY_PIN_CLKOP)
        m.d.comb += ClockSignal("capture").eq(sclk)
        m.submodules.rst_capture = ResetSynchronizer(arst | ~start.ready, domain="capture")
        return eclk, sclk, start.reset

    def _clocks_ecp5(self, m, platform):
        clk_port = platform.request(platform.default_clk, dir="-")
        m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_port)
        rst_port = platform.request(platform.default_rst, dir="-")
        m.submodules.rst_buf = rst_buf = io.Buffer("i", rst_port)
        clk_capture, clk_sync, locked = Signal(), Signal(), Signal()
        m.submodules.pll = ehxplll(EhxplllPlan(self.board.input_hz, self.board.pll),
                                   clki=clk_buf.i, clkop=clk_capture, clkos=clk_sync,
                                   locked=locked)
        self._locked = locked
        m.domains.capture = ClockDomain("capture")
        m.domains.sync = ClockDomain("sync")
        m.d.comb += [ClockSignal("capture").eq(clk_capture), ClockSignal("sync").eq(clk_sync)]
        arst = ~locked | rst_buf.i
        m.submodules.rst_capture = ResetSynchronizer(arst, domain="capture")
        m.submodules.rst_sync = ResetSynchronizer(arst, domain="sync")
        self._clk_in, self._arst = clk_buf.i, arst            # for the Ethernet link's PLL

    def _clocks_ice40(self, m, platform):
        clk_port = platform.request(platform.default_clk, dir="-")
        clk_capture, locked = Signal(), Signal()
        p = self.board.pll
        m.submodules.pll = Instance(
            "SB_PLL40_PAD",
            p_FEEDBACK_PATH="SIMPLE", p_DIVR=p["DIVR"], p_DIVF=p["DIVF"], p_DIVQ=p["DIVQ"],
            p_FILTER_RANGE=p["FILTER_RANGE"],
            i_PACKAGEPIN=clk_port.io, i_RESETB=Const(1), i_BYPASS=Const(0),
            o_PLLOUTGLOBAL=clk_capture, o_LOCK=locked,
        )
        self._locked = locked
        m.domains.capture = ClockDomain("capture")
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("capture").eq(clk_capture)
        if self.board.async_fifo:
            # Link clock = capture clock / ``div`` from a counter flop (no reset, so it
            # runs while the domains are held in reset), put onto a global buffer. The two domains
            # are treated as unrelated: they meet only in the asynchronous FIFO and the
            # configuration crossing.
            div = round(self.board.capture_hz / self.board.sync_hz)
            if div < 2 or div * self.board.sync_hz != self.board.capture_hz:
                raise ValueError(f"iCE40 link clock must be the capture clock divided by an "
                                 f"integer >= 2, not {self.board.sync_hz} Hz")
            count = Signal(range(div), reset_less=True)
            half = Signal(reset_less=True)
            m.d.capture += [count.eq(Mux(count == div - 1, 0, count + 1)),
                            half.eq(count < div // 2)]
            clk_sync = Signal()
            m.submodules.sync_gb = Instance("SB_GB", i_USER_SIGNAL_TO_GLOBAL_BUFFER=half,
                                            o_GLOBAL_BUFFER_OUTPUT=clk_sync)
            platform.add_clock_constraint(clk_sync, self.board.sync_hz)
            m.d.comb += ClockSignal("sync").eq(clk_sync)
            m.submodules.rst_capture = ResetSynchronizer(~locked, domain="capture")
        else:
            # One clock: the capture and link domains share it (synchronous FIFO).
            m.d.comb += [ClockSignal("sync").eq(clk_capture),
                         ResetSignal("capture").eq(ResetSignal("sync"))]
        m.submodules.rst_sync = ResetSynchronizer(~locked, domain="sync")

    def elaborate(self, platform):
        board = self.board
        m = Module()
        if board.gearing == "x2":
            eclk, sclk, gear_reset = self._clocks_ecp5_x2(m, platform)
        elif board.family == "ecp5":
            self._clocks_ecp5(m, platform)
        else:
            self._clocks_ice40(m, platform)

        m.submodules.core = core = self.core

        if board.gearing == "x2":
            # Channels through IDDRX2F: lane j is Q<j>, Q0 the earliest (docs/lane-order.md).
            ch_port = platform.request("latscope_ch", 0, dir="-")
            delay = None
            if "delay_taps" in core.signature.members:
                # a DELAYF per channel pin, set by SET_DELAY (gateware/delay.py)
                m.submodules.ch_delay = delay = DelayControl(channels=len(CHANNEL_ROLES))
                m.d.comb += delay.taps.eq(core.delay_taps)
            m.submodules.ch_x2 = ch_x2 = GearedInput(ch_port, eclk=eclk, sclk=sclk,
                                                     reset=gear_reset, delay=delay)
            m.d.comb += core.samples.eq(ch_x2.i)
            st_port = platform.request("latscope_selftest", 0, dir="-")
            m.submodules.st_x2 = st_x2 = GearedOutput(st_port, eclk=eclk, sclk=sclk,
                                                      reset=gear_reset)
            m.d.comb += st_x2.o.eq(core.selftest_out)
            self._uart(m, platform, core)
            if self.sniffer is not None:
                self._frame_pins(m, platform)
            return m

        # Channels: DDR input, lane 0 is the sample taken at the rising edge (earlier in time).
        ch_port = platform.request("latscope_ch", 0, dir="-")
        m.submodules.ch_ddr = ch_ddr = io.DDRBuffer("i", ch_port, i_domain="capture")
        m.d.comb += core.samples.eq(ch_ddr.i.as_value())   # i[0] (lane 0) is the low half

        st_port = platform.request("latscope_selftest", 0, dir="-")
        m.submodules.st_ddr = st_ddr = io.DDRBuffer("o", st_port, o_domain="capture")
        m.d.comb += [st_ddr.o[0].eq(core.selftest_out[0]), st_ddr.o[1].eq(core.selftest_out[1])]
        self._uart(m, platform, core)
        if self.sniffer is not None:
            self._frame_pins(m, platform)
        return m

    def _uart(self, m, platform, core):
        board = self.board
        # UART on the board's USB-serial bridge (link domain "sync"). The TX pin is registered in
        # the I/O cell; the receiver synchronises its input itself.
        uart_port = platform.request("uart", 0, dir={"tx": "-", "rx": "-"})
        m.submodules.uart_tx_buf = tx_buf = io.FFBuffer("o", uart_port.tx, o_domain="sync")
        m.submodules.uart_rx_buf = rx_buf = io.Buffer("i", uart_port.rx)
        m.submodules.uart = uart = UART(divisor=board.uart_divisor,
                                        rx_divisor=board.uart_rx_divisor,
                                        rx_domain=board.uart_rx_domain)
        m.d.comb += [tx_buf.o.eq(uart.tx), uart.rx.eq(rx_buf.i)]
        tx_src, rx_dst = core.tx, core.rx
        if board.ethernet and "net" in core.signature.members:   # a core with SET_NET
            tx_src, rx_dst = add_ethernet(m, platform, board, core, clk_in=self._clk_in,
                                          arst=self._arst, max_frame=max_frame_for(core))
        elif link_bytes_of(core.tx.signature) == 2:       # a two-byte core on the UART alone
            m.submodules.uart_bytes = split = WordToBytes()
            wiring.connect(m, core.tx, split.i)
            tx_src = split.o
        wiring.connect(m, tx_src, uart.tx_data)
        wiring.connect(m, uart.rx_data, rx_dst)
        self._status_leds(m, platform, ~uart.tx)

    def _frame_pins(self, m, platform):
        """The DUT's MII/RMII bus, sampled where the interface guarantees it valid
        (:mod:`latscope.gateware.bus_sampler`): every bus pin, the bus clocks too, through a DDR
        input register on the capture clock; per bus clock a :class:`BusSampler` picks each
        value inside its window and regenerates the clock of domains ``phy_rx``/``phy_tx`` (one
        for both on RMII, whose one ``REF_CLK`` times both directions). The sniffers' input
        registers in those domains are the crossing (``forwarded_clock``). The samplers are
        kept in :attr:`frame_samplers` by bus name (their plans: docs/boards.md)."""
        mii = self.sniffer == "mii"
        buses = [("mii_rx", "rx_clk", {"phy_rx": (("dv", "rx_dv"), ("er", "rx_er"),
                                                  ("data", "rxd"))}),
                 ("mii_tx", "tx_clk", {"phy_tx": (("dv", "tx_en"), ("data", "txd"))})] if mii \
            else [("rmii", "ref_clk", {"phy_rx": (("dv", "crs_dv"), ("data", "rxd")),
                                       "phy_tx": (("dv", "tx_en"), ("data", "txd"))})]
        hz = 25e6 if mii else 50e6

        def sampled(role):
            port = platform.request(f"latscope_phy_{role}", 0, dir="-")
            m.submodules[f"phy_{role}_ddr"] = buf = io.DDRBuffer("i", port, i_domain="capture")
            return buf.i

        # the samplers need no reset (their state is refilled within a bus period), so the
        # capture domain's reset does not have to reach the pins at both edges of the chip
        m.domains.capture_bus = ClockDomain("capture_bus", reset_less=True)
        m.d.comb += ClockSignal("capture_bus").eq(ClockSignal("capture"))
        self.frame_samplers = {}
        for bus, clock_role, domains in buses:
            clk = sampled(clock_role)
            fields = [(domain, name, sampled(role)) for domain, pins in domains.items()
                      for name, role in pins]
            width = sum(len(pin[0]) for _, _, pin in fields)
            sampler = BusSampler(TIMINGS[bus], width=width, capture_hz=self.board.capture_hz,
                                 lanes=2)
            self.frame_samplers[bus] = sampler
            m.submodules[f"{bus}_sampler"] = DomainRenamer({"sync": "capture_bus"})(sampler)
            # lane 0 (the sample at the capture clock's rising edge) is the earlier
            m.d.comb += [sampler.clk.eq(Cat(clk[0], clk[1])),
                         sampler.data.eq(Cat(*(pin[lane] for lane in range(2)
                                               for _, _, pin in fields)))]
            # constrained on the sampler's own register, whose name synthesis keeps (a
            # top-level alias of it is merged away, and nextpnr then ignores the constraint)
            platform.add_clock_constraint(sampler.out_clk, hz)
            offset = 0
            for domain in domains:
                m.domains += ClockDomain(domain)
                m.d.comb += ClockSignal(domain).eq(sampler.out_clk)
                m.submodules[f"rst_{domain}"] = ResetSynchronizer(ResetSignal("sync"),
                                                                  domain=domain)
                core_pins = getattr(self.core, domain)
                for field_domain, name, pin in fields:
                    if field_domain != domain:
                        continue
                    bits = len(pin[0])
                    reg = mark(Signal(bits, name=f"{domain}_{name}"), "forwarded_clock")
                    # kept by name: synthesis otherwise names these flip-flops after the
                    # core's port and drops the declared name (its initial value is 0, which
                    # mark()'s caution about kept registers does not concern)
                    reg.attrs["keep"] = 1
                    m.d[domain] += reg.eq(sampler.out_data[offset:offset + bits])
                    m.d.comb += getattr(core_pins, name).eq(reg)
                    offset += bits

    def _status_leds(self, m, platform, link_active):
        """PLL lock, armed, link activity (lit while the UART sends a 0 bit) and FIFO overflow,
        straight from their signals (no logic: the iCE40 is nearly full). ECPIX-5: green of RGB
        LED 0 and 1, blue of 2, red of 3, and with the Ethernet link the PHY's link state on
        LED 0's blue and red (:func:`eth_link_leds`). iCEBreaker: green and red LED on the board
        (armed, overflow), snap-off LEDs 1 and 2 (lock, link)."""
        control = getattr(self.core, "control", None)
        front = getattr(self.core, "front", None)
        armed = control.config.armed if control is not None else Const(0)
        overflow = front.overflow_active if front is not None else Const(0)
        if self.board.family == "ecp5" and front is not None:
            # Two flip-flops between the front end's overflow flag and its LED pin, so that
            # the placer is not pulled to put the front end's timing-critical logic next to a
            # far pin (the direct tap cost the 200 MHz capture domain its margin).
            led_ff = [Signal(name=f"overflow_led{n}") for n in range(2)]
            m.d.capture += [led_ff[0].eq(overflow), led_ff[1].eq(led_ff[0])]
            overflow = led_ff[1]
        if self.board.family == "ecp5":
            rgb = {"r": "-", "g": "-", "b": "-"}
            leds = [platform.request("rgb_led", n, dir=rgb) for n in range(4)]
            ports = [getattr(led, colour) for led, colour in zip(leds, "ggbr", strict=True)]
            if "eth_status" in self.core.signature.members:
                for colour, value in zip("br", eth_link_leds(self.core.eth_status), strict=True):
                    m.submodules[f"eth_led_{colour}"] = led = io.Buffer("o", getattr(leds[0],
                                                                                     colour))
                    m.d.comb += led.o.eq(value)
        else:
            ports = [platform.request(name, n, dir="-")
                     for name, n in (("led_g", 1), ("led_g", 0), ("led_g", 2), ("led_r", 0))]
        for n, (port, value) in enumerate(zip(ports, (self._locked, armed, link_active, overflow),
                                              strict=True)):
            m.submodules[f"status_led{n}"] = led = io.Buffer("o", port)
            m.d.comb += led.o.eq(value)
