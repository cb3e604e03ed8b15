"""VCD export (``latscope.capture.files.vcd``), read back by independent readers: pyvcd's tokenizer
(``vcd.reader``, installed with Amaranth) and, when installed, sigrok-cli's VCD input.

Expected values are computed here from the events written (times times the tick period, exact
Fractions); comparisons are exact.
"""

import io
import os
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest
from vcd.reader import TokenKind, tokenize

from latscope.capture.files.capfile import CaptureWriter, open_capture
from latscope.capture.files.interop import make_window
from latscope.capture.files.vcd import (
    change_lines,
    choose_timescale,
    export_vcd,
    vcd_identifier,
)

needs_sigrok = pytest.mark.skipif(shutil.which("sigrok-cli") is None,
                                  reason="sigrok-cli is not installed (apt-get install sigrok-cli)")

ROLES = {"0": "rx_dv", "1": "tx_en", "2": "m_isr", "3": "m.rx"}


def random_capture(path, tick_hz, *, n=400, seed=1, channels=4, first=100):
    """Alternating edges per channel (rising first) at strictly increasing random times."""
    rng = np.random.default_rng(seed)
    time = first + np.cumsum(rng.integers(1, 50, size=n))
    channel = rng.integers(0, channels, size=n).astype(np.uint8)
    rising = np.zeros(n, bool)
    level = [0] * channels
    for i, c in enumerate(channel.tolist()):
        level[c] ^= 1
        rising[i] = bool(level[c])
    with CaptureWriter(path, {"tick_hz": tick_hz, "channels": dict(list(ROLES.items())[:channels])},
                       fsync=False) as writer:
        writer.append_events(time, channel, rising)
    return time, channel, rising


def read_vcd(path):
    """Parse with pyvcd: returns (timescale Fraction seconds, {ref: id}, [(time, id, value)])."""
    ids, changes, time, scale = {}, [], None, None
    with open(path, "rb") as handle:
        for token in tokenize(handle):
            if token.kind is TokenKind.TIMESCALE:
                ts = token.timescale
                scale = Fraction(ts.magnitude.value) * Fraction(10) ** {
                    "s": 0, "ms": -3, "us": -6, "ns": -9, "ps": -12, "fs": -15}[ts.unit.value]
            elif token.kind is TokenKind.VAR:
                ids[token.var.reference] = token.var.id_code
            elif token.kind is TokenKind.CHANGE_TIME:
                time = token.time_change
            elif token.kind is TokenKind.CHANGE_SCALAR:
                changes.append((time, token.scalar_change.id_code, token.scalar_change.value))
    return scale, ids, changes


def test_choose_timescale():
    # periods: 5 ns, 3.125 ns, 20 ns, 1 s, 5.2083 ns (not a whole number of fs)
    assert choose_timescale(200_000_000) == ("1ns", Fraction(5), True)
    assert choose_timescale(320_000_000) == ("1ps", Fraction(3125), True)
    assert choose_timescale(50_000_000) == ("10ns", Fraction(2), True)
    assert choose_timescale(1) == ("1s", Fraction(1), True)
    text, per_tick, exact = choose_timescale(192_000_000)
    assert (text, exact) == ("1fs", False)
    assert per_tick == Fraction(10**15, 192_000_000)


def test_identifiers_are_unique_and_printable():
    codes = [vcd_identifier(i) for i in range(10_000)]
    assert len(set(codes)) == 10_000
    assert codes[:3] == ["!", '"', "#"] and codes[94] == "!!"
    assert all(33 <= ord(c) <= 126 for code in codes for c in code)


@pytest.mark.parametrize("tick_hz", [200_000_000, 320_000_000])
def test_vcd_read_by_pyvcd_has_exact_edges(tmp_path, tick_hz):
    time, channel, rising = random_capture(tmp_path / "c.lsc", tick_hz)
    with open_capture(tmp_path / "c.lsc") as capture:
        summary = export_vcd(make_window(capture), tmp_path / "c.vcd")
    assert summary.events == len(time) and summary.hidden_edges == 0
    scale, ids, changes = read_vcd(tmp_path / "c.vcd")
    period = Fraction(1, tick_hz)
    # "m.rx" is not a VCD identifier; it is written as "m_rx"
    assert sorted(ids) == ["m_isr", "m_rx", "rx_dv", "tx_en"]
    code_to_channel = {ids[name]: int(k) for k, name in
                       {"0": "rx_dv", "1": "tx_en", "2": "m_isr", "3": "m_rx"}.items()}
    start = int(time[0]) - 1
    initial = changes[:4]
    assert all(t * scale == start * period for t, _, _ in initial)
    assert {code_to_channel[c]: v for _, c, v in initial} == {0: "0", 1: "0", 2: "0", 3: "0"}
    got = [(Fraction(t) * scale, code_to_channel[c], v == "1") for t, c, v in changes[4:]]
    expected = [(t * period, c, r) for t, c, r in
                zip(time.tolist(), channel.tolist(), rising.tolist(), strict=True)]
    assert got == expected


def test_vcd_rounds_to_femtoseconds_and_ticks_are_recoverable(tmp_path):
    tick_hz = 192_000_000
    time, channel, rising = random_capture(tmp_path / "c.lsc", tick_hz, first=10**9)
    with open_capture(tmp_path / "c.lsc") as capture:
        export_vcd(make_window(capture), tmp_path / "c.vcd")
    scale, ids, changes = read_vcd(tmp_path / "c.vcd")
    assert scale == Fraction(1, 10**15)
    fs = [t for t, _, _ in changes[4:]]
    exact = [Fraction(t * 10**15, tick_hz) for t in time.tolist()]
    assert all(abs(f - e) <= Fraction(1, 2) for f, e in zip(fs, exact, strict=True))
    assert [round(Fraction(f * tick_hz, 10**15)) for f in fs] == time.tolist()


def test_vcd_window_initial_levels_and_unchanging_edges(tmp_path):
    path = tmp_path / "c.lsc"
    with CaptureWriter(path, {"tick_hz": 1_000_000_000, "channels": {"0": "a", "1": "b"}},
                       fsync=False) as writer:
        # a: rises at 10, falls at 20, rises at 30; b: rising edges only (level view loses one)
        writer.append_events([10, 12, 20, 25, 30], [0, 1, 0, 1, 0], [1, 1, 0, 1, 1])
    with open_capture(path) as capture:
        window = make_window(capture, 15, 40)
        assert window.initial == [1, 1]          # after a's rise at 10 and b's rise at 12
        summary = export_vcd(window, tmp_path / "w.vcd")
    scale, ids, changes = read_vcd(tmp_path / "w.vcd")
    assert scale == Fraction(1, 10**9)
    assert [(t, c) for t, c, _ in changes[:2]] == [(15, ids["a"]), (15, ids["b"])]
    assert changes[2:] == [(20, ids["a"], "0"), (30, ids["a"], "1")]
    assert summary.hidden_edges == 1             # b rising at 25 while already high
    assert "1 edge(s) do not change their channel's level" in summary.warnings[0]
    text = (tmp_path / "w.vcd").read_text()
    assert text.rstrip().endswith("#40")         # the window end is marked


@needs_sigrok
def test_vcd_read_by_sigrok_cli(tmp_path):
    """sigrok-cli's VCD input (skip=0 keeps time zero; FIELD.md §6) samples at 1/timescale: with
    a 1 GHz tick it gives one sample per tick, so edges are at sample index = tick."""
    time, channel, rising = random_capture(tmp_path / "c.lsc", 1_000_000_000, n=60, first=5)
    with open_capture(tmp_path / "c.lsc") as capture:
        export_vcd(make_window(capture), tmp_path / "c.vcd")
    raw = subprocess.run(["sigrok-cli", "-I", "vcd:skip=0", "-i", str(tmp_path / "c.vcd"),
                          "-O", "binary"], check=True, capture_output=True).stdout
    # sigrok-cli 0.7.2's VCD input prints a "META samplerate: ..." line on standard output
    # before the data; drop it
    prefix = b"META samplerate: 1000000000\n"
    assert raw.startswith(prefix)
    samples = np.frombuffer(raw[len(prefix):], np.uint8).astype(np.int16)
    for k in range(4):
        level = (samples >> k) & 1
        where = np.flatnonzero(np.diff(level)) + 1
        mine = time[channel == k]
        assert where.tolist() == mine.tolist(), k
        assert (level[where] == 1).tolist() == rising[channel == k].tolist(), k


def test_refuses_to_overwrite(tmp_path):
    random_capture(tmp_path / "c.lsc", 1000, n=4)
    (tmp_path / "c.vcd").write_text("keep")
    with open_capture(tmp_path / "c.lsc") as capture:
        with pytest.raises(Exception, match="exists; choose another name or use --force"):
            export_vcd(make_window(capture), tmp_path / "c.vcd")
    assert os.path.getsize(tmp_path / "c.vcd") == 4


def test_change_lines_read_back_by_pyvcd():
    """Changes written as VCD lines come back from pyvcd's tokenizer as the same (time, id,
    value) triples, several changes at one time under one timestamp."""
    changes = [(0, "!", 1), (40, "!", 0), (40, '"', 1), (41, "!", 1), (100, '"', 0)]
    head = ["$timescale 1ps $end", "$scope module t $end", "$var wire 1 ! a $end",
            '$var wire 1 " b $end', "$upscope $end", "$enddefinitions $end"]
    lines = change_lines(changes)
    assert lines.count("#40") == 1
    got, time = [], None
    for token in tokenize(io.BytesIO("\n".join(head + lines + [""]).encode())):
        if token.kind is TokenKind.CHANGE_TIME:
            time = token.time_change
        elif token.kind is TokenKind.CHANGE_SCALAR:
            got.append((time, token.scalar_change.id_code, int(token.scalar_change.value)))
    assert got == changes
