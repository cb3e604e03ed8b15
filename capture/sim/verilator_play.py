"""A simulated run played through the real gateware in one go: the instrument armed with every
edge enabled, the run's stimulus fed as the Verilator engine feeds it
(:func:`~latscope.capture.sim.sim_engines.harness_stimulus`), the output drained. For checks that
need the instrument's bytes of a whole run rather than a live port
(:class:`~latscope.capture.sim.sim_engines.VerilatorEngine`).
"""

import importlib.util
import shutil

from latscope.capture.sim.sim_engines import COMMAND_CYCLES, CORE_BUILD, harness_stimulus
from latscope.capture.sim.sim_profile import CHANNEL_ROLES
from latscope.gateware.codec import encode_command
from latscope.gateware.protocol import Opcode
from latscope.gateware.verilator import Commands, VerilatorInstrument

__all__ = ["verilator_available", "play"]


def verilator_available():
    """Whether a run can be played: the gateware's top (Amaranth) imports and a C++ compiler is
    installed for Verilator. Cheap enough for a test's collection."""
    return (importlib.util.find_spec("amaranth") is not None
            and (shutil.which("g++") or shutil.which("c++")) is not None)


def play(run, *, fast=True, link_gate=True, one_eval=True, input_logic_once=True,
         window_skip=True):
    """The instrument's bytes for ``run`` (a :class:`~latscope.capture.sim.sim_dut.SimRun` or a
    load run) and the harness's statistics (``VerilatorInstrument.last_stats``). ``fast``: idle
    stretches skipped by the core's fast-forward; ``link_gate``, ``one_eval``,
    ``input_logic_once``, ``window_skip``: how the harness evaluates the model
    (:meth:`~latscope.gateware.verilator.Commands.eval_mode`). None of them may change a byte."""
    timing = run.timing
    inst = VerilatorInstrument(capture_hz=int(timing.capture_hz), lanes=timing.lanes,
                               channel_names=CHANNEL_ROLES, **CORE_BUILD)
    cmds = Commands().fast_forward(fast).eval_mode(link_gate=link_gate, one_eval=one_eval,
                                                   input_logic_once=input_logic_once,
                                                   window_skip=window_skip)
    cmds.rx(encode_command(1, Opcode.SET_EDGES, b"\xff\xff\xff\xff")
            + encode_command(2, Opcode.ARM, b"\x01")).run(COMMAND_CYCLES)
    for part in harness_stimulus(run, timing.lanes, chunk=64):
        cmds.raw(part)
    cmds.drain()
    data = inst.run_commands(cmds)
    return data, inst.last_stats
