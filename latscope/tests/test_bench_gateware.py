"""The benches' gateware and simulated-instrument sections (latscope/bench/gateware.py,
latscope/bench/simcpu.py) in their quick form: every row there, exact where it must be."""

import pytest


@pytest.mark.slow
def test_bench_quick_rows():
    pytest.importorskip("latscope.gateware.top", reason="needs the gateware core")
    from latscope.bench import gateware as bench
    rows = {figure: (value, unit, note) for figure, value, unit, note in bench.run(quick=True)}
    assert rows["ecpix5: resolution"][:2] == ("1.250", "ns")
    assert rows["ecpix5-x1: resolution"][:2] == ("3.125", "ns")
    value, unit, note = rows["bytes per event (64-byte echo, 100 Mb/s)"]
    assert unit == "B" and 1.0 <= value <= 4.0      # tokens are 1-4 bytes; framing adds a little
    assert "0 lost" in note
    burst = rows["FIFO burst at full input rate"][0]
    # At least the FIFO's 1024 entries of 4 events each (the ECPIX-5's 4 lanes); beyond that only
    # what the encoder and framer hold and the link drains meanwhile (2,340 measured with 2 lanes
    # when this test was written: 1024 * 2 + 292).
    assert 4 * 1024 <= burst <= 5 * 1024
    assert rows["CPU per simulated packet"][:2] == ("see sim", "")


@pytest.mark.slow
def test_bench_sim_quick_rows():
    pytest.importorskip("latscope.gateware.top", reason="needs the gateware core")
    from latscope.bench import simcpu
    rows = {figure: (value, unit, note) for figure, value, unit, note in simcpu.run(quick=True)}
    for name, lanes in (("ecpix5", 4), ("ecpix5-x1", 2)):
        fast, unit, note = rows[f"{name} ({lanes} lanes): CPU per simulated packet, fast path"]
        assert unit == "CPU-ms" and fast > 0 and "all equal to the truth" in note
        slow, unit, note = rows[f"{name} ({lanes} lanes): CPU per simulated packet, stepping "
                                "every cycle"]
        # Stepping evaluates every one of ~10^4 cycles per packet, the fast path ~500 (20x to
        # 40x less CPU measured when this test was written, on a loaded machine).
        assert unit == "CPU-ms" and slow > 5 * fast and "bytes identical" in note
        previous, unit, note = rows[f"{name} ({lanes} lanes): CPU per simulated packet, the "
                                    "previous simulated instrument (two-stage encoder, two "
                                    "evaluations per cycle, no link or filter clock gates, no "
                                    "window skips)"]
        # No bound on the ratio (200 packets on a shared machine): both must be exact.
        assert unit == "CPU-ms" and previous > 0 and "all equal to the truth" in note
    # the whole command, as a user runs it: a new process, its capture equal to its truth
    whole, unit, note = rows["`latscope capture --sim gem-64 --packets 2000`, the whole "
                             "command: CPU per simulated packet"]
    assert unit == "CPU-ms" and whole > 0 and "28,000 events all equal to the truth" in note
