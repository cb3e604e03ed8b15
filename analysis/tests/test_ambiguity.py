"""Ambiguous pairings in the engine, its JSON and `analyze`'s table (issue 20, item 2).

The events are built by hand; every expected latency is worked out in the comments."""

import json

import numpy as np

from latscope.analysis.ambiguity import ambiguity_lines
from latscope.analysis.definitions import default_definitions
from latscope.analysis.engine import analyze_events
from latscope.capture.files import capfile
from latscope.cli import main

TICK_HZ = 100_000_000          # 10 ns ticks


def events():
    """rx_dv (channel 0) pulses ending at the given ticks; m0 (channel 3, rx.isr) rising edges.

    Requests end at 0 and 10 (the second queued behind the first), markers at 500 and 700:
    in order, 500 and 690 ticks. Requests end at 10,000 and 10,020 with one marker at 10,500:
    one of the two lost its marker, which is undecidable: 2 ambiguous. A lone request ends at
    200,000, more than rx.isr's 1 ms window (100,000 ticks) after them (closer, its marker could
    be the lost one), its marker at 200,300: 300 ticks."""
    ends = [0, 10, 10_000, 10_020, 200_000]
    marks = [500, 700, 10_500, 200_300]
    ev = [(e - 5, 0, True) for e in ends] + [(e, 0, False) for e in ends]
    ev += [(m, 3, True) for m in marks] + [(m + 3, 3, False) for m in marks]
    ev.sort()
    t, ch, rising = (np.array(x) for x in zip(*ev, strict=True))
    return t.astype(np.int64), ch.astype(np.uint8), rising.astype(bool)


def test_engine_pairs_in_order_and_counts_ambiguous():
    r = analyze_events(*events(), tick_hz=TICK_HZ,
                       definitions=default_definitions().select(["rx.isr"]))
    s = r.stats["rx.isr"]
    # 500, 690 and 300 ticks of 10 ns; the two ambiguous requests are left out
    assert (s.n, s.min_ns, s.max_ns) == (3, 3000.0, 6900.0)
    assert s.counts["ambiguous"] == 2 and s.counts["undecided"] == 1
    assert r.ambiguous == {"rx.isr": 2}
    assert r.to_dict()["ambiguous"] == {"rx.isr": 2}
    assert ambiguity_lines(r) == ["rx.isr: 2 of 5 packets ambiguous (their marker could be "
                                  "another packet's: left out of the statistics)"]


def test_analyze_prints_and_reports_ambiguity(tmp_path, capsys):
    t, ch, rising = events()
    meta = {"tick_hz": TICK_HZ, "channels": {"0": "rx_dv", "1": "tx_en", "3": "m0"},
            "markers": {"m0": "rx.isr"}}
    with capfile.CaptureWriter(tmp_path / "q.lsc", meta) as w:
        w.append_events(t, ch, rising)
    assert main(["analyze", str(tmp_path / "q.lsc"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ambiguous"] == {"rx.isr": 2}
    assert main(["analyze", str(tmp_path / "q.lsc")]) == 0
    assert "rx.isr: 2 of 5 packets ambiguous" in capsys.readouterr().out
