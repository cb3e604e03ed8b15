"""The capture FIFO (two clocks) against a Python queue, on random write and read patterns.

Expected values: a Python deque of everything written (order and content exact); the level
bounds follow from the FIFO's definition (``w_level`` never below the true level, never above
depth; a write refused only when the level two cycles before plus the writes since reached the
depth).
"""

from collections import deque

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from latscope.gateware.fifo import CaptureFIFO


def _run(depth, w_period, r_period, w_prob, r_prob, *, seed, n_writes=600):
    dut = CaptureFIFO(width=16, depth=depth, r_domain="sync", w_domain="capture")
    m = Module()
    m.domains.capture = ClockDomain("capture")
    m.domains.sync = ClockDomain("sync")
    m.submodules.fifo = dut
    rng_w = np.random.default_rng(seed)
    rng_r = np.random.default_rng(seed + 1000)
    written, read = [], []
    held = deque()                       # entries accepted by the write side, not yet read
    stats = {"max_level": 0, "level_checks": 0, "full_seen": 0}

    async def writer(ctx):
        value, history = 1, [(0, 0), (0, 0)]
        while value <= n_writes:
            en = bool(rng_w.random() < w_prob)
            ctx.set(dut.w_en, en)
            ctx.set(dut.w_data, value)
            rdy = ctx.get(dut.w_rdy)
            level = ctx.get(dut.w_level)
            # registered and late to see reads, so never below the true level; never above depth
            assert len(held) <= level <= depth
            stats["level_checks"] += 1
            stats["max_level"] = max(stats["max_level"], len(held))
            if not rdy:
                stats["full_seen"] += 1
                # refused only when the level two cycles ago plus the writes since (its w_rdy is
                # a register, computed from registers) reached the depth
                (level2, wrote2), (_, wrote1) = history[-2:]
                assert level2 + wrote2 + wrote1 >= depth
            history.append((level, int(en and rdy)))
            await ctx.tick("capture")
            if en and rdy:
                written.append(value)
                held.append(value)
                value += 1
        ctx.set(dut.w_en, 0)

    async def reader(ctx):
        idle = 0
        while idle < 200:
            en = bool(rng_r.random() < r_prob)
            ctx.set(dut.r_en, en)
            rdy = ctx.get(dut.r_rdy)
            data = ctx.get(dut.r_data)
            await ctx.tick("sync")
            if en and rdy:
                read.append(data)
                assert held and held[0] == data
                held.popleft()
                idle = 0
            elif len(written) >= n_writes:
                idle += 1

    sim = Simulator(m)
    sim.add_clock(w_period, domain="capture")
    sim.add_clock(r_period, domain="sync", phase=r_period / 3)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run()
    return written, read, stats


@pytest.mark.parametrize("depth, w_period, r_period, w_prob, r_prob", [
    (8, 1e-8, 2e-8, 0.9, 0.9),           # writer twice as fast: fills up, w_rdy throttles
    (16, 2.1e-8, 1e-8, 0.7, 0.3),        # reader faster clock, reads rarely
    (4, 1e-8, 1.3e-8, 0.5, 1.0),         # almost always empty
])
def test_capture_fifo_keeps_order_and_content(depth, w_period, r_period, w_prob, r_prob):
    written, read, stats = _run(depth, w_period, r_period, w_prob, r_prob, seed=depth)
    assert len(written) == 600
    assert read == written                 # nothing lost, duplicated or reordered
    assert stats["max_level"] <= depth    # never more than depth entries held
    if w_prob > r_prob * r_period / w_period:   # writes outpace reads: it must have filled up
        # (the write side sees reads late, so it may stop one entry short of the depth)
        assert stats["full_seen"] > 0 and stats["max_level"] >= depth - 1


def test_capture_fifo_rejects_bad_parameters():
    with pytest.raises(ValueError, match=r"^FIFO depth must be a power of two >= 2, not 12$"):
        CaptureFIFO(width=8, depth=12)
    with pytest.raises(ValueError, match=r"^The read and write domains must differ, not both "
                                         r"'sync'$"):
        CaptureFIFO(width=8, depth=8, r_domain="sync", w_domain="sync")
