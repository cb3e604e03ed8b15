"""CPU per simulated packet (``latscope bench --only sim``): the simulated bench's Verilator
engine playing ``gem-64`` echo packets through the real gateware, as the engine feeds it.

For the 4-lane (``ecpix5``, 200 MHz, 1.25 ns) and 2-lane (``ecpix5-x1``, 160 MHz, 3.125 ns)
timings, in the same run: the fast path as shipped; the simulated instrument as it was before
the harness's evaluation changed (the two-stage encoder, two evaluations per cycle, no link or
filter clock gates, no window skips: :meth:`~latscope.gateware.verilator.Commands.eval_mode`);
and stepping every cycle. CPU is this process's and its waited-for children's (the harness),
building the commands included and the one-time compilation excluded. Then the whole command
as a user runs it, ``latscope capture --sim gem-64`` in a new process, start-up included,
against issue 22's own figures for it. Except in ``--quick``, each timed run but the stepping
one is made two (the whole command: three) times, in turn, and the lowest CPU kept: on a shared
machine other jobs only add to a process's CPU time.
"""

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from latscope.bench.gateware import arm_commands, decode

SECTION = "simulated instrument: CPU per simulated packet"

#: CPU-ms per simulated packet that issue 22 states (`latscope capture --sim gem-64`, 4 lanes:
#: 15.2 CPU-s for 2*10**4 packets, the whole command).
ISSUE22_CPU_MS_PER_PACKET = 0.78
#: The whole command's CPU-s at the two sizes issue 22 measured (packets: CPU-s).
ISSUE22_CPU_S = {20_000: 15.2, 80_000: 64.6}


def _cpu_s():
    """CPU seconds of this process and of its waited-for children (the harness) so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def sim_cpu_per_packet(board, packets, *, fast, profile="gem-64", link_gate=True,
                       one_eval=True, input_logic_once=True, **core_overrides):
    """CPU per packet of the simulated bench's Verilator engine: ``packets`` echo packets of
    ``profile`` played through the real gateware (the engine's core, ``CORE_BUILD``, at the
    board's clock and lanes) as the engine feeds them (``simbench.harness_stimulus``), with the
    core's fast-forward (``fast``) or stepping every cycle; ``link_gate``, ``one_eval`` and
    ``input_logic_once`` choose the harness's evaluation
    (:meth:`~latscope.gateware.verilator.Commands.eval_mode`);
    ``core_overrides`` change the core's parameters.

    Returns a dict: ``cpu_s`` (harness and this process, building the commands included),
    ``per_packet_ms``, ``data`` (the bytes), ``stats`` (the harness's), ``events`` and ``check``
    (:func:`~latscope.capture.sim.simbench.compare_to_truth` of the decoded stream). The fast
    run ends with a drain (the last partly filled frame is sent at the next heartbeat, whose
    idle wait is skipped); the stepping run ends ``COMMAND_CYCLES`` after the stimulus instead,
    as stepping to the heartbeat would cost more than its packets, so its bytes are a prefix of
    the fast run's.
    """
    from latscope.capture.sim import simbench
    from latscope.gateware.verilator import Commands, VerilatorInstrument
    timing = simbench.InstrumentTiming(capture_hz=board.capture_hz, lanes=board.lanes)
    inst = VerilatorInstrument(capture_hz=int(board.capture_hz), lanes=board.lanes,
                               channel_names=simbench.CHANNEL_ROLES,
                               **dict(simbench.CORE_BUILD, **core_overrides))
    inst.build(verbose=False)
    before = _cpu_s()
    run = simbench.simulate(profile, packets, seed=1, timing=timing)
    cmds = (Commands().fast_forward(fast)
            .eval_mode(link_gate=link_gate, one_eval=one_eval, input_logic_once=input_logic_once)
            .rx(arm_commands()).run(simbench.COMMAND_CYCLES))
    for part in simbench.harness_stimulus(run, board.lanes):
        cmds.raw(part)
    if fast:
        cmds.drain()
    else:
        cmds.run(simbench.COMMAND_CYCLES)
    data = inst.run_commands(cmds)
    cpu_s = _cpu_s() - before
    result = decode(data)
    check = simbench.compare_to_truth(result.time, result.channel, result.rising, run.truth)
    span = -(-int(run.stimulus.ticks[-1]) // board.lanes)
    return {"cpu_s": cpu_s, "per_packet_ms": 1e3 * cpu_s / packets, "data": data,
            "stats": inst.last_stats, "events": int(run.n_events), "check": check,
            "span_cycles": span}


def sim_cpu_rows(quick):
    """Rows: CPU per simulated packet for the 4-lane (``ecpix5``) and 2-lane (``ecpix5-x1``)
    builds, in the same run: the fast path; the simulated instrument as it was before
    (``previous``: the two-stage encoder, two evaluations per cycle, no clock gates, no window
    skips); and stepping every cycle. The fast path is checked against the simulation's ground
    truth, the stepping run against the fast run's bytes."""
    from latscope.capture.sim import simbench
    from latscope.gateware.boards import BOARDS
    channels = simbench.CORE_PARAMS["channels"]
    rows = []
    fast_n, slow_n = (200, 4) if quick else (4000, 20)
    previous = ISSUE22_CPU_MS_PER_PACKET
    # Warm up: the first simulation imports and caches what every later one reuses, which would
    # otherwise be billed to the first row alone.
    sim_cpu_per_packet(BOARDS["ecpix5"], 20, fast=True)
    for name in ("ecpix5", "ecpix5-x1"):
        board = BOARDS[name]
        # The fast path and the previous instrument twice each, in turn, the lower CPU of each
        # kept (other jobs only add to it); every run compared with the truth.
        fast_runs, plain_runs = [], []
        for _ in range(1 if quick else 2):
            fast_runs.append(sim_cpu_per_packet(board, fast_n, fast=True))
            plain_runs.append(sim_cpu_per_packet(board, fast_n, fast=True, link_gate=False,
                                                 one_eval=False, input_logic_once=False,
                                                 pipelined_encoder=False, clock_gates=False))
        fast = min(fast_runs, key=lambda run: run["cpu_s"])
        plain = min(plain_runs, key=lambda run: run["cpu_s"])
        slow = sim_cpu_per_packet(board, slow_n, fast=False)
        exact = all(compare(run) for run in fast_runs)
        # The stepping run is shorter: its bytes must be where the fast run's begin.
        same = fast["data"].startswith(slow["data"]) and len(slow["data"]) > 0
        stats = fast["stats"]
        evaluated = stats["evaluated"] / fast_n
        gated = stats.get("link_gated", 0) / max(stats["evaluated"], 1)
        still = stats.get("gates_still", 0) / max(stats["evaluated"] * channels, 1)
        windows = stats.get("window_skips", 0) / fast_n
        rows.append((f"{name} ({board.lanes} lanes): CPU per simulated packet, fast path",
                     round(fast["per_packet_ms"], 3), "CPU-ms",
                     f"gem-64 echo, {fast_n:,} packets (the lower CPU of {len(fast_runs)} "
                     f"run{'s' if len(fast_runs) > 1 else ''}), {fast['events']:,} events "
                     f"{'all equal to the truth' if exact else 'NOT equal to the truth'}; "
                     f"{evaluated:.0f} of its {fast['span_cycles'] / fast_n:,.0f} cycles "
                     f"evaluated per packet (the final drain included), the link clock left "
                     f"still in {gated:.0%} of them and the channels' filter clocks in "
                     f"{still:.0%} of channel-cycles; {windows:.1f} edges per packet carried "
                     f"through the glitch filter's window by a window skip"))
        pcheck = all(compare(run) for run in plain_runs)
        rows.append((f"{name} ({board.lanes} lanes): CPU per simulated packet, the previous "
                     "simulated instrument (two-stage encoder, two evaluations per cycle, no link "
                     "or filter clock gates, no window skips)",
                     round(plain["per_packet_ms"], 3), "CPU-ms",
                     f"same run, {fast_n:,} packets, "
                     f"{'all equal to the truth' if pcheck else 'NOT equal to the truth'}; "
                     f"{plain['stats']['evaluated'] / fast_n:.0f} cycles evaluated per packet; "
                     f"the fast path: {plain['per_packet_ms'] / fast['per_packet_ms']:.2f}x "
                     f"less CPU"))
        rows.append((f"{name} ({board.lanes} lanes): CPU per simulated packet, stepping every "
                     "cycle", round(slow["per_packet_ms"], 3), "CPU-ms",
                     f"baseline, {slow_n} packets; fast path "
                     f"{slow['per_packet_ms'] / fast['per_packet_ms']:.1f}x less CPU; bytes "
                     f"{'identical' if same else 'DIFFERENT'} to the fast path's"))
    rows.append(("CPU per simulated packet, issue 22's figure", previous, "CPU-ms",
                 "`latscope capture --sim gem-64 --packets 20000` (4 lanes, fast path, the whole "
                 "command with its host side, as the issue states it: 15.2 CPU-s); the issue "
                 "asks for 5x less"))
    command_cpu(20)               # warm-up: builds the harness if it is not cached yet
    commands = {}
    sizes = (2000,) if quick else (20_000, 80_000, 100_000)
    # Each size three times (in turn), the lowest CPU kept: other jobs on the machine only add
    # to a process's CPU time (shared caches and memory bandwidth), by up to a third here (the
    # same 2*10**4-packet command took 2.72 and 3.63 CPU-s in one bench run).
    runs = {packets: [] for packets in sizes}
    for _ in range(1 if quick else 3):
        for packets in sizes:
            runs[packets].append(command_cpu(packets))
    for packets in sizes:
        cmd = commands[packets] = min(runs[packets], key=lambda run: run["cpu_s"])
        others = ", ".join(f"{run['cpu_s']:.2f}" for run in runs[packets] if run is not cmd)
        exact = all(compare(run) for run in runs[packets])      # every run, not only the kept
        # against the issue's figure at the same size where it gave one
        then = (1e3 * ISSUE22_CPU_S[packets] / packets if packets in ISSUE22_CPU_S
                else previous)
        rows.append((f"`latscope capture --sim gem-64 --packets {packets}`, the whole command: "
                     "CPU per simulated packet", round(cmd["per_packet_ms"], 3), "CPU-ms",
                     f"a new process as a user runs it, start-up and host side included "
                     f"({cmd['cpu_s']:.2f} CPU-s, {cmd['wall_s']:.2f} s wall"
                     f"{f'; the other runs {others} CPU-s' if others else ''}); "
                     f"{cmd['events']:,} events "
                     f"{'all equal to the truth' if exact else 'NOT equal to the truth'}; "
                     f"{then / cmd['per_packet_ms']:.2f}x less than issue 22's {then:.3g}"))
    if len(commands) > 1:
        # Per packet beyond the fixed start-up (imports, the first block): the difference of two
        # sizes, as from the issue's two figures.
        (n1, c1), (n2, c2) = min(commands.items()), max(commands.items())
        marginal = 1e3 * (c2["cpu_s"] - c1["cpu_s"]) / (n2 - n1)
        (i1, s1), (i2, s2) = sorted(ISSUE22_CPU_S.items())
        then = 1e3 * (s2 - s1) / (i2 - i1)
        rows.append(("the whole command: CPU per packet beyond its start-up", round(marginal, 3),
                     "CPU-ms", f"({c2['cpu_s']:.2f} - {c1['cpu_s']:.2f}) CPU-s / ({n2:,} - "
                     f"{n1:,}) packets, this run; issue 22's two figures give {then:.3f} "
                     f"({s2} - {s1} CPU-s / {i2 - i1:,}): {then / marginal:.2f}x less"))
    return rows


def command_cpu(packets, profile="gem-64"):
    """CPU of ``latscope capture --sim PROFILE --packets N`` run as a user runs it: a new
    process (``python -m latscope``), start-up, the simulation, the harness and the capture
    included (the harness is the command's child, so its CPU reaches this process's children
    when the command ends). The capture is then compared with its ground truth, exactly.
    Returns ``cpu_s``, ``wall_s``, ``per_packet_ms``, ``events`` (the truth's) and ``check``
    (for :func:`compare`)."""
    from latscope.capture.files import capfile
    from latscope.capture.sim import simbench
    with tempfile.TemporaryDirectory(prefix="latscope-bench-") as tmp:
        path = Path(tmp) / "bench.lsc"
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "latscope", "capture", "--sim", profile,
                        "--packets", str(packets), "-o", str(path)],
                       check=True, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (kids.ru_utime + kids.ru_stime)
        with capfile.open_capture(path) as cap:
            events = cap.events()
            truth = cap.truth()["simbench"]
            check = simbench.compare_to_truth(events.time, events.channel, events.rising, truth,
                                              tolerance_ticks=0)
    return {"cpu_s": cpu, "wall_s": wall, "per_packet_ms": 1e3 * cpu / packets,
            "events": len(truth["time"]), "check": check}


def compare(result):
    """Whether a :func:`sim_cpu_per_packet` result decoded to exactly the simulation's truth."""
    check = result["check"]
    return (check["ok"] and check["max_error"] == 0 and check["decoded"] == result["events"]
            and check["missing"] == 0 and check["extra"] == 0)


def run(quick):
    """Rows ``(figure, value, unit, note)`` for the section."""
    return sim_cpu_rows(quick)
