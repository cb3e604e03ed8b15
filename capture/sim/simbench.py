"""The simulated bench: a model of the device under test driving the real gateware in simulation.

A *profile* (``capture/sim/profiles/*.toml``, one file per MAC configuration of the 2018 paper, one
table per frame size) gives every stage's latency distribution. :func:`simulate` draws, for each
packet, the MII activity (``RX_DV`` for the request, ``TX_EN`` for the echoed reply, with preamble,
SFD, frame, FCS and inter-frame gap timing on the 40 ns MII clock grid) and the DUT's marker pulses
(on the CPU clock grid), turns the edges into instrument ticks and merges them into a
:class:`Stimulus` for the gateware. It keeps the ground truth: every edge's exact time, the ticks at
which the instrument must report it, and every packet's true stage latencies.

An *engine* then plays the stimulus through the instrument and produces the instrument's bytes;
:mod:`latscope.capture.sim.ptyserve` serves them on a pseudo-terminal, so
``latscope capture --port`` runs exactly the hardware code path. Engines: ``verilator`` (the real
gateware, compiled by :mod:`latscope.gateware.verilator`, idle time skipped by the core's
fast-forward: about 2,000 echo packets, 3·10^4 events, per second and capture), ``amaranth`` (the
real gateware in the Amaranth simulator: slow, only for tiny runs), ``model`` (the gateware's Python
reference models, :mod:`latscope.gateware.model_capture` + :mod:`latscope.gateware.model_stream`,
two to three times faster than Verilator). Everything simulated is labelled so in the capture's
metadata.

Model choices, and where every number comes from, are in ``docs/simulated-bench.md``.

The bench is split by concern: :mod:`~latscope.capture.sim.sim_profile` (profiles),
:mod:`~latscope.capture.sim.sim_dut` (the DUT model and the ground truth),
:mod:`~latscope.capture.sim.sim_stream` (runs of any length, block by block),
:mod:`~latscope.capture.sim.sim_engines` (the engines) and :mod:`~latscope.capture.sim.sim_port`
(``latscope capture --sim``). This module is their public face: import from here.
"""

from latscope.capture.sim.sim_dut import (  # noqa: F401 - re-exported
    X1_TIMING,
    InstrumentTiming,
    SimRun,
    Stimulus,
    Traffic,
    compare_to_truth,
    simulate,
    stimulus_of_edges,
)
from latscope.capture.sim.sim_engines import (  # noqa: F401 - re-exported
    CHUNK_CHANGES,
    COMMAND_CYCLES,
    CORE_BUILD,
    CORE_PARAMS,
    ENGINES,
    AmaranthEngine,
    ModelEngine,
    VerilatorEngine,
    harness_stimulus,
    open_engine,
)
from latscope.capture.sim.sim_port import (  # noqa: F401 - re-exported
    DEFAULT_PACKETS,
    LINKS,
    SimulatedPort,
    SimulatedSource,
    open_simulated_port,
)
from latscope.capture.sim.sim_profile import (  # noqa: F401 - re-exported
    BYTE_NS,
    CHANNEL_ROLES,
    FCS_BYTES,
    IFG_NS,
    MARKER_MEANINGS,
    MARKERS,
    MII_CLOCK_NS,
    PREAMBLE_SFD_BYTES,
    PROFILE_DIR,
    RX_DV,
    RX_STAGES,
    TX_EN,
    TX_STAGES,
    Profile,
    ProfileError,
    StageSpec,
    TailSpec,
    list_profiles,
    load_profile,
)
from latscope.capture.sim.sim_stream import SimStream, TruthWriter  # noqa: F401 - re-exported

__all__ = [
    "ProfileError", "StageSpec", "TailSpec", "Profile", "Traffic", "InstrumentTiming",
    "Stimulus", "SimRun", "list_profiles", "load_profile", "simulate", "compare_to_truth",
    "stimulus_of_edges",
    "CHANNEL_ROLES", "MII_CLOCK_NS", "PREAMBLE_SFD_BYTES", "FCS_BYTES", "IFG_NS",
    "ENGINES", "open_engine", "harness_stimulus", "open_simulated_port", "SimulatedSource",
    "SimStream", "TruthWriter",
]
