"""The two-clock links bench: sample words from a stimulus (fast), and the ECPIX-5's two-clock core
in Verilator at its capture and link clocks (slow: compiles the core once, ~2 minutes)."""

import shutil

import numpy as np
import pytest

from latscope.bench import linkbench, linkclocks
from latscope.gateware.boards import BOARDS


def _levels_by_tick(cycles, words, *, lanes, channels, start_cycle, n_ticks):
    """Per tick, the channel levels the harness presents (reference for ``sample_words``)."""
    out = np.zeros(n_ticks, np.int64)
    word, pos = 0, 0
    for cycle in range(start_cycle, start_cycle + n_ticks // lanes):
        while pos < len(cycles) and cycles[pos] <= cycle:
            word = int(words[pos])
            pos += 1
        for lane in range(lanes):
            out[(cycle - start_cycle) * lanes + lane] = (word >> (lane * channels)) & 0xFF
    return out


def test_sample_words_hold_every_level_from_its_tick():
    rng = np.random.default_rng(3)
    ticks = np.cumsum(rng.integers(1, 9, 400))
    values = rng.integers(0, 256, 400)
    cycles, words = linkclocks.sample_words(ticks, values, lanes=4, channels=8, start_cycle=100)
    assert np.all(np.diff(cycles) > 0)
    n = (int(ticks[-1]) // 4 + 3) * 4
    got = _levels_by_tick(cycles, words, lanes=4, channels=8, start_cycle=100, n_ticks=n)
    # the level at tick t is the value of the last change at or before t (0 before the first)
    want = np.concatenate([[0], values])[np.searchsorted(ticks, np.arange(n), side="right")]
    assert np.array_equal(got, want)


def test_link_throttles_are_the_boards_byte_times():
    # 12 Mbaud 8N1 from the 48 MHz link clock: 10 bits of 4 cycles for each byte; Ethernet a
    # transfer (a word on the two-byte path) every cycle
    assert linkclocks.link_throttles(BOARDS["ecpix5"]) == {"UART": (40, True),
                                                           "Ethernet": (1, False)}
    assert linkclocks.link_throttles(BOARDS["icebreaker"]) == {"UART": (20, True)}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler for Verilator")
def test_two_clock_core_is_exact_below_its_rate_and_reports_loss_above():
    # The worst-case stimulus (the next of 8 channels toggles every period) at 2 M events/s is
    # carried whole over the Ethernet link model, every event on its stimulus tick; at 60 M
    # events/s its two-byte tokens need 120 MB/s, over the 96 MB/s the two-byte path sends at
    # the 48 MHz link clock: 24,000 events, so the deficit (~5,000) is more than the FIFO and
    # the framer's buffers hold (~2,100); the FIFO overflows and the stream says how many
    # events were lost (no event is silently missing).
    board = BOARDS["ecpix5"]
    binary = linkclocks.build(board, verbose=False)
    for rate, lossless, n in ((2e6, True, 4000), (60e6, False, 24_000)):
        ticks, values = linkbench.periodic(rate, n / rate, board.tick_hz)
        out = linkclocks.play(binary, board, ticks, values, throttle=(1, False))
        if lossless:
            assert out["lost"] == 0 and out["mismatched"] == 0
            assert out["events"] == out["expected"] == len(ticks)
        else:
            assert out["lost"] > 0
            assert out["events"] + out["lost"] == out["expected"]
