"""The board's two-clock core in Verilator, for the links bench: what the link carries as the
board runs.

A board's :class:`~latscope.gateware.top.LatscopeCore` (its own parameters: asynchronous capture
FIFO, lanes, FIFO depth) is exported to Verilog and compiled with the harness
``latscope/bench/linkclocks.cpp``, which clocks the ``capture`` domain at the board's capture
clock and the ``sync`` domain (encoder, framer, command handler) at its link clock, each edge
of each domain evaluated (the shared harness, :mod:`latscope.bench.twoclock`). The link is
modelled by the rate its transmitter accepts the framer's bytes: the UART one byte per
``sync_hz / (baud / 10)`` link cycles, the Ethernet streamer's FIFO one transfer per link cycle,
a word of two bytes on the ECPIX-5's two-byte link path (the streamer's side of its FIFO runs at
125 MHz, a byte per cycle, and puts ~117 MB/s on the wire, more than the 96 MB/s the words
bring).

:func:`play` arms the core, plays a stimulus (channel levels at ticks), decodes the output with
the host decoder and checks every event against the stimulus.

Example
-------
>>> from latscope.gateware.boards import BOARDS                       # doctest: +SKIP
>>> binary = build(BOARDS["ecpix5"])                                  # doctest: +SKIP
>>> ticks, values = periodic_stimulus(100, 1000, channels=range(8))   # doctest: +SKIP
>>> play(binary, BOARDS["ecpix5"], ticks, values, throttle=1)["lost"]  # doctest: +SKIP
0
"""

import struct
import time
from inspect import signature
from pathlib import Path

import numpy as np

from latscope import LatscopeError
from latscope.bench import twoclock
from latscope.bench.gateware import arm_commands
from latscope.capture.link.stream import DecodeResult, StreamDecoder
from latscope.gateware.protocol import Status
from latscope.gateware.top import LatscopeCore

__all__ = ["build", "play", "link_throttles", "sample_words", "HARNESS_SOURCE"]

HARNESS_SOURCE = Path(__file__).with_name("linkclocks.cpp")
#: Every domain is held in reset until then.
RESET_PS = 200_000
#: The stimulus starts after this many capture cycles: the arming commands are answered by then.
START_CYCLES = 20_000


def link_throttles(board):
    """``{link: (link cycles, per_byte)}`` of the board's links: the UART's byte time (8N1: ten
    bit times of ``uart_divisor`` link cycles) for each byte, and the Ethernet streamer's FIFO
    one transfer (a byte, or a word on the two-byte path) per link cycle."""
    links = {"UART": (10 * board.uart_divisor, True)}
    if board.ethernet:
        links["Ethernet"] = (1, False)
    return links


def _core(board):
    params = board.core_params()
    if not params.get("async_fifo"):
        raise LatscopeError(f"Board {board.name!r} must have two clocks (async_fifo) for the "
                            f"two-clock links bench, not one")
    return params, LatscopeCore(**params)


def _wrapper(ports):
    return twoclock.wrapper(ports, clocks=("capture_clk",), bench="two-clock links")


def build(board, *, verbose=True):
    """Export ``board``'s two-clock core, compile it with the harness (cached like the simulated
    instrument, :func:`latscope.gateware.verilator.cache_dir`) and return the binary's path."""
    params, core = _core(board)
    return twoclock.build(core, params, HARNESS_SOURCE, name=f"linkclocks-{board.name}",
                          make_wrapper=_wrapper, verbose=verbose,
                          what=f"the two-clock links bench ({board.name} core)")


def sample_words(ticks, values, *, lanes, channels, start_cycle):
    """The harness's sample words for channel levels ``values`` from ``ticks`` on (strictly
    increasing, ``lanes`` ticks per capture cycle, tick 0 in capture cycle ``start_cycle``):
    ``(cycles, words)``, each word held from its cycle on, lane ``l`` of channel ``ch`` at bit
    ``l * channels + ch``."""
    ticks = np.asarray(ticks, np.int64)
    values = np.asarray(values, np.int64)
    if len(ticks) and (ticks[0] < 0 or np.any(np.diff(ticks) <= 0)):
        raise ValueError("Ticks must be non-negative and strictly increasing")
    all_ticks = np.concatenate([[-1], ticks])
    all_values = np.concatenate([[0], values])
    cycles = np.unique(ticks // lanes)
    words = np.zeros(len(cycles), np.int64)
    for lane in range(lanes):
        idx = np.searchsorted(all_ticks, cycles * lanes + lane, side="right") - 1
        words |= all_values[idx] << (lane * channels)
    steady = all_values[np.searchsorted(all_ticks, cycles * lanes + lanes - 1, side="right") - 1]
    steady_word = np.zeros_like(steady)
    for lane in range(lanes):
        steady_word |= steady << (lane * channels)
    # each changing cycle, then its last level held in every lane from the next cycle on
    out_cycles = np.empty(2 * len(cycles), np.int64)
    out_words = np.empty(2 * len(cycles), np.int64)
    out_cycles[0::2], out_cycles[1::2] = cycles, cycles + 1
    out_words[0::2], out_words[1::2] = words, steady_word
    keep = np.ones(len(out_cycles), bool)
    keep[1:-1:2] = cycles[1:] != cycles[:-1] + 1      # the next change overrides the hold
    return out_cycles[keep] + start_cycle, out_words[keep]


def _run(binary, setup):
    decoder = StreamDecoder()
    parts, chunks = [], []

    def take(data):
        chunks.append(data)
        parts.append(decoder.feed(data))

    stats, _ = twoclock.run_harness(binary, setup, take, tag="linkclocks",
                                    what="two-clock links")
    parts.append(decoder.finish())
    return b"".join(chunks), DecodeResult.concat(parts), stats


def play(binary, board, ticks, values, *, throttle, channels=8, tail_s=None):
    """Arm ``board``'s two-clock core (``binary`` from :func:`build`), play channel ``values`` from
    ``ticks`` on, let the link drain and check every event against the stimulus. ``throttle``:
    the link's ``(link cycles, per_byte)`` as :func:`link_throttles` gives them.

    Returns a dict: events (decoded), expected (level changes in the stimulus), lost (events the
    stream reports lost: FIFO overflow or link loss), mismatched (events not at their stimulus
    tick plus one constant pipeline offset, on their channel, with their direction; every
    expected event when the counts differ), bytes, data (the bytes), span_s (the stimulus,
    simulated), wall_s and the harness statistics.
    """
    ticks = np.asarray(ticks, np.int64)
    levels = np.asarray(values, np.int64)
    cycles, words = sample_words(ticks, levels, lanes=board.lanes, channels=channels,
                                 start_cycle=START_CYCLES)
    capture_ps = round(1e12 / board.capture_hz)
    sync_ps = round(1e12 / board.sync_hz)
    host = arm_commands(channels)
    span_s = (int(ticks[-1]) - int(ticks[0])) / board.tick_hz
    if tail_s is None:
        # what the FIFO (a few bytes per entry) and the framer's two buffers may still hold at
        # the link's byte rate, then a heartbeat period: the last partly filled EVENTS frame
        # is closed by the next heartbeat (framer.py)
        shift = board.core_params().get(
            "heartbeat_shift", signature(LatscopeCore).parameters["heartbeat_shift"].default)
        tail_s = ((board.fifo_depth * 4 + 2 * 1024) * throttle[0] / board.sync_hz
                  + 1.5 * (1 << shift) / board.capture_hz)
    parts = [struct.pack("<IIIIIIIQ", 0x4B4C534C, 2, capture_ps, sync_ps, throttle[0],
                         int(throttle[1]), RESET_PS, round(tail_s * 1e12)),
             struct.pack("<H", len(host)), host, struct.pack("<Q", len(cycles))]
    rec = np.empty(len(cycles), np.dtype([("cycle", "<u8"), ("word", "<u4")]))
    rec["cycle"], rec["word"] = cycles, words
    parts.append(rec.tobytes())
    started = time.monotonic()
    data, result, stats = _run(binary, b"".join(parts))
    bad = [r for r in result.replies if r.status != Status.OK]
    if bad or len(result.replies) < 2:
        raise LatscopeError(f"The links bench's set-up commands were not all accepted: {bad}")
    changes = np.bitwise_xor(levels, np.concatenate([[0], levels[:-1]]))
    per_change = np.unpackbits(changes.astype(np.uint8)[:, None], axis=1, bitorder="little")
    expected = int(per_change.sum())
    rows, bits = np.nonzero(per_change[:, :channels])
    mismatched = expected
    got_t, got_c, got_r = result.time, result.channel, result.rising
    if len(got_t) == expected and expected:
        want_t = ticks[rows]
        offset = int(got_t[0]) - int(want_t[0])
        mismatched = int(np.count_nonzero(
            (got_t.astype(np.int64) - want_t != offset) | (got_c != bits)
            | (got_r != ((levels[rows] >> bits) & 1).astype(bool))))
    return {"events": len(got_t), "expected": expected,
            "lost": int(result.overflow_lost_events + result.link_lost_events),
            "mismatched": mismatched, "bytes": len(data), "data": data, "span_s": span_s,
            "wall_s": time.monotonic() - started, "stats": stats}
