"""The simulated bench served on a pseudo-terminal or UDP, as a capture source
(``latscope capture --sim``).

Part of :mod:`latscope.capture.sim.simbench` (import from there).
"""

import dataclasses
import sys

from latscope import LatscopeError
from latscope.capture.link.udp import UdpServer
from latscope.capture.sim.ptyserve import PtyServer
from latscope.capture.sim.sim_engines import open_engine
from latscope.capture.sim.sim_load import default_frames_config
from latscope.capture.sim.sim_stream import SimStream, TruthWriter

#: Packets simulated by ``latscope capture --sim`` when ``--packets`` is not given.
DEFAULT_PACKETS = 1_000
#: The most packets one simulated capture may hold: the simulation keeps every packet's stage
#: times in memory (a few kB per packet), so more would not fit a workstation (experiments
#: have the same bound).
MAX_PACKETS = 10_000_000
#: How the simulated instrument's bytes are served: a pseudo-terminal (the UART path) or UDP
#: datagrams on 127.0.0.1 (the ECPIX-5's Ethernet path).
LINKS = ("pty", "udp")


class SimulatedPort:
    """Handle returned by :func:`open_simulated_port`: the pty server, the run (a
    :class:`~latscope.capture.sim.sim_stream.SimStream`) and its engine.

    ``metadata`` is for the capture's metadata (``instrument.simulated`` and the engine),
    ``markers`` the profile's marker meanings, ``label``/``dut``/``scenario`` describe the run;
    :attr:`expected_events` is the number of events the instrument must report (under load
    ``None`` until the whole run has been simulated). ``truth`` writes the ground truth beside
    the output as the run is produced."""

    def __init__(self, run, engine, server, output=None, truth=None):
        self.run, self.engine, self.server, self.output = run, engine, server, output
        self.truth = truth
        self.path = server.path
        self.markers = dict(run.profile.markers)
        self.label = run.profile.name
        self.dut = f"simulated: {run.profile.title}"
        self.scenario = (f"{run.traffic.mode}, {run.n_packets} x {run.profile.size} B UDP "
                         f"frames (simulated)")
        #: The rule table for runs with a wire (capture/sim/sim_load.py), else None.
        self.frames = None
        scenario = getattr(run, "scenario", None)
        if scenario is not None:
            self.frames = default_frames_config()
            self.label = f"{run.profile.name}-{scenario.name}"
            bursts = f" in bursts of {scenario.burst}" if scenario.burst > 1 else ""
            self.scenario = (f"paced {scenario.probe_rate_pps:g}/s{bursts}, {run.n_packets} x "
                             f"{run.profile.size} B UDP requests beside {scenario.load:.0%} "
                             f"background load (IMIX), MII wire (simulated)")
        self.metadata = {"instrument": {"simulated": True, "engine": engine.name},
                         "simbench": {**run.meta, "engine": engine.metadata()}}

    @property
    def expected_events(self):
        return self.run.n_events

    def close(self):
        """Stop the simulation and finish the ground truth (of the blocks simulated: all of them
        unless the capture stopped early), with the engine and the tick offset in its metadata."""
        try:
            self.server.close()
        finally:
            if self.truth is not None:
                self.truth.close({**self.run.meta, "engine": self.engine.name,
                                  "tick_offset": self.engine.tick_offset})


def open_simulated_port(profile, *, packets=DEFAULT_PACKETS, output=None, seed=0, load=None,
                        engine="auto", link="pty", rate=None, log=None, binary=None):
    """Start the simulated bench: a DUT model with ``profile``'s latencies drives the gateware
    (or its reference models) and the instrument's bytes are served for a capture to read.

    Parameters
    ----------
    profile : str
        A shipped profile name or ``FILE.toml[:SIZE]`` (:func:`~latscope.capture.sim.simbench.
        load_profile`).
    packets : int
        Echoed packets to simulate.
    output : str or None
        The capture file: the ground truth goes beside it (``capfile.truth_path``).
    seed : int
        Random seed of the DUT model.
    load : str, float or None
        Background traffic on a simulated wire (:func:`~latscope.capture.sim.sim_load.
        load_scenario`); runs on the model engine only.
    engine : str
        ``"auto"`` or one of :data:`~latscope.capture.sim.sim_engines.ENGINES`.
    link : str
        One of :data:`LINKS`.
    rate : float or None
        Serve at most this many bytes per second (``None``: as fast as they are read).
    log : callable or None
        Called with each line the engine reports (default: print to stderr).
    binary : str or None
        The Verilator engine's simulator binary, already built for the simulated core (the
        demo builds it once for all its captures); ``None``: built or found in the cache here.

    Returns
    -------
    SimulatedPort
        Its ``path`` is the pty path to open as a serial port (``udp://127.0.0.1:PORT`` with
        ``link="udp"``); ``close()`` it after the capture.
    """
    if link not in LINKS:
        raise LatscopeError(f"Simulated link must be one of {', '.join(LINKS)}, not {link!r}")
    if load is not None:
        if engine not in ("auto", "model"):
            raise LatscopeError(f"--sim-load runs on the model engine only (the {engine} "
                                f"engine has no PHY clock domains for the sniffers yet)")
        engine = "model"
    truth = TruthWriter(output) if output else None
    try:
        run = SimStream(profile, packets, seed=seed, load=load, truth=truth)
        if log is None:
            def log(message):
                print(message, file=sys.stderr, flush=True)
        opened = open_engine(run, engine, log=log, binary=binary)
    except BaseException:
        if truth is not None:
            truth.abandon()
        raise
    try:
        if link == "udp":
            server = UdpServer(opened, rate=rate)
            server.path = server.url
        else:
            server = PtyServer(opened, rate=rate)
    except BaseException:
        opened.close()
        if truth is not None:
            truth.abandon()
        raise
    return SimulatedPort(run, opened, server, output, truth)


@dataclasses.dataclass
class SimulatedSource:
    """The simulated bench as a source for :func:`latscope.capture.record.record`: what to
    simulate, started by :meth:`open` once the capture's output is known.

    The fields are the parameters of :func:`open_simulated_port`. After :meth:`open`, ``port``
    is the running :class:`SimulatedPort`; its ``run`` is the simulation the capture recorded
    (produced block by block), whose ground truth is written beside the capture.
    """
    profile: str
    packets: int = DEFAULT_PACKETS
    seed: int = 0
    load: object = None
    engine: str = "auto"
    link: str = "pty"
    rate: float = None
    binary: str = None
    port: SimulatedPort = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        # checked when the source is described, before any file or simulation exists
        if isinstance(self.packets, bool) or not isinstance(self.packets, int) or \
                not 1 <= self.packets <= MAX_PACKETS:
            raise LatscopeError(f"Simulated packets must be an integer from 1 to "
                                f"{MAX_PACKETS:,}, not {self.packets!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or \
                not 0 <= self.seed < 2**63:
            raise LatscopeError(f"Simulation seed must be a non-negative integer below 2**63, "
                                f"not {self.seed!r}")
        if self.rate is not None and not (isinstance(self.rate, (int, float))
                                          and 0 < self.rate < float("inf")):
            raise LatscopeError(f"Simulated byte rate must be a positive number of bytes per "
                                f"second, not {self.rate!r}")

    def open(self, output=None, log=None):
        """Start the simulation (its ground truth beside ``output``); returns the port."""
        self.port = open_simulated_port(self.profile, packets=self.packets, output=output,
                                        seed=self.seed, load=self.load, engine=self.engine,
                                        link=self.link, rate=self.rate, log=log,
                                        binary=self.binary)
        return self.port
