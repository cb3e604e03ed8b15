"""``latscope capture --sim``: the simulated bench served on a pseudo-terminal or UDP.

Part of :mod:`latscope.capture.simbench` (import from there).
"""

from latscope.capture.sim_dut import simulate
from latscope.capture.sim_engines import ENGINES, open_engine
from latscope.capture.sim_profile import list_profiles

# --- `latscope capture --sim` --------------------------------------------------------------------

#: Packets simulated by ``latscope capture --sim`` when ``--packets`` is not given.
DEFAULT_PACKETS = 1_000


def add_sim_arguments(parser):
    """Add the simulated-bench options to a ``latscope capture`` parser: ``--sim PROFILE``,
    ``--sim-engine``, ``--sim-seed``, ``--sim-rate``."""
    parser.add_argument(
        "--sim", metavar="PROFILE",
        help="capture from the simulated bench instead of a port: a DUT model with PROFILE's "
             f"latencies (one of {', '.join(list_profiles())}, or FILE.toml[:SIZE]) drives the "
             "real gateware in simulation, served on a pseudo-terminal; --packets N (default "
             f"{DEFAULT_PACKETS:,}) echoed packets are simulated and all their events captured; "
             "the ground truth is written beside the capture (FILE.truth.npz)")
    parser.add_argument("--sim-engine", choices=("auto",) + ENGINES, default="auto",
                        help="simulator for --sim (default auto: Verilator, else the reference "
                             "models)")
    parser.add_argument("--sim-seed", type=int, default=0,
                        help="random seed of the DUT model for --sim (default 0)")
    parser.add_argument("--sim-link", choices=("pty", "udp"), default="pty",
                        help="serve --sim on a pseudo-terminal (the UART path, default) or as "
                             "the ECPIX-5's UDP datagrams on 127.0.0.1 (the Ethernet path)")
    parser.add_argument("--sim-load", metavar="SCENARIO", default=None,
                        help="put the measured stream beside background traffic on a real wire "
                             "(frames with FCS, nibble by nibble; FRAME/COUNTERS records from "
                             "the sniffers' reference model): a scenario of "
                             "capture/profiles/under-load.toml (bg0, bg30, bg60, bg90, "
                             "bg60-coalesce), FILE.toml:NAME, or a share of the line rate such "
                             "as 0.6; frames to/from UDP port 5000 are class hp (recorded), "
                             "other IPv4 bg (counted) unless --config has a [frames] table")
    parser.add_argument("--sim-rate", type=float, default=None, metavar="BYTES_PER_S",
                        help="serve the simulated instrument's bytes at most this fast (default: "
                             "as fast as the capture reads; 1.2e6 is the boards' 12 Mbaud link)")


class SimulatedPort:
    """Handle returned by :func:`open_simulated_port`: the pty server, the run and its engine.

    ``metadata`` is for the capture's metadata (``instrument.simulated`` and the engine),
    ``markers`` the profile's marker meanings, ``label``/``dut``/``scenario`` describe the run;
    ``expected_events`` is the number of events the instrument must report."""

    def __init__(self, run, engine, server, output=None):
        self.run, self.engine, self.server, self.output = run, engine, server, output
        self.path = server.path
        self.markers = dict(run.profile.markers)
        self.label = run.profile.name
        self.dut = f"simulated: {run.profile.title}"
        self.scenario = (f"{run.traffic.mode}, {run.n_packets} x {run.profile.size} B UDP "
                         f"frames (simulated)")
        self.expected_events = run.n_events
        #: The rule table for runs with a wire (capture/sim_load.py), else None.
        self.frames = None
        scenario = getattr(run, "scenario", None)
        if scenario is not None:
            from latscope.capture.sim_load import default_frames_config
            self.frames = default_frames_config()
            self.label = f"{run.profile.name}-{scenario.name}"
            self.scenario = (f"paced {scenario.probe_rate_pps:g}/s, {run.n_packets} x "
                             f"{run.profile.size} B UDP requests beside {scenario.load:.0%} "
                             f"background load (IMIX), MII wire (simulated)")
        self.metadata = {"instrument": {"simulated": True, "engine": engine.name},
                         "simbench": {**run.meta, "engine": engine.metadata()}}

    def close(self):
        """Stop the simulation and update the ground truth's metadata (engine, tick offset)."""
        try:
            self.server.close()
        finally:
            if self.output:
                self.run.save_truth(self.output, engine=self.engine.name,
                                    tick_offset=self.engine.tick_offset)


def open_simulated_port(args):
    """Start the simulated bench for ``latscope capture --sim PROFILE``.

    Reads ``args.sim`` (profile), ``args.packets`` (default :data:`DEFAULT_PACKETS`),
    ``args.output`` (the capture file: the ground truth goes to ``capfile.truth_path`` beside it)
    and the options of :func:`add_sim_arguments`. So that the capture holds every event of the
    simulated packets, it sets ``args.events`` to the expected event count and ``args.packets``
    to ``None`` (a packet limit would stop at the last ``RX_DV`` fall, before that packet's
    markers and echo).

    Returns
    -------
    (str, SimulatedPort)
        The pty path to open as a serial port (``udp://127.0.0.1:PORT`` with ``--sim-link udp``),
        and the handle (``close()`` it after the capture).
    """
    import sys

    from latscope import LatscopeError
    from latscope.capture.ptyserve import PtyServer
    packets = getattr(args, "packets", None) or DEFAULT_PACKETS
    seed = getattr(args, "sim_seed", 0) or 0
    load = getattr(args, "sim_load", None)
    engine_name = getattr(args, "sim_engine", "auto") or "auto"
    if load is not None:
        from latscope.capture.sim_load import simulate_load
        if engine_name not in ("auto", "model"):
            raise LatscopeError(f"--sim-load runs on the model engine only (the {engine_name} "
                                f"engine has no PHY clock domains for the sniffers yet)")
        engine_name = "model"
        run = simulate_load(args.sim, int(packets), load, seed=seed)
    else:
        run = simulate(args.sim, int(packets), seed=seed)
    output = getattr(args, "output", None) or getattr(args, "out", None)
    if output:
        run.save_truth(output)

    def log(message):
        print(message, file=sys.stderr, flush=True)
    engine = open_engine(run, engine_name, log=log)
    if getattr(args, "sim_link", "pty") == "udp":
        from latscope.capture.udp import UdpServer
        server = UdpServer(engine, rate=getattr(args, "sim_rate", None))
        server.path = server.url
    else:
        server = PtyServer(engine, rate=getattr(args, "sim_rate", None))
    if getattr(args, "events", None) is None:
        args.events = run.n_events
        args.packets = None
    return server.path, SimulatedPort(run, engine, server, output)
