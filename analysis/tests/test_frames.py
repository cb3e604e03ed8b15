"""Analysis by identity (``analysis/frames.py``) and its shells (``analyze_file``, ``latscope
analyze``/``compare``): requests and replies paired by sequence number, per class, on captures
built here with known latencies, so every expected number is written in the test."""

import json

import numpy as np
import pytest

from latscope.analysis import api
from latscope.analysis.frames import analyze_frames
from latscope.capture.files import capfile
from latscope.cli import main
from latscope.gateware.codec import FLAGS, FRAME_DTYPE

TICK_HZ = 100_000_000            # 10 ns ticks
GOOD = FLAGS["seq_valid"] | FLAGS["fcs_ok"]


def scenario():
    """Probe requests (class 1) every 10 µs, each answered after 2 µs + 10 ns * i; background
    frames (class 0) between them, also with sequence numbers, answered after 500 ns; request 3
    is dropped, the reply to request 5 is sent twice, replies 6 and 7 leave in swapped order, one
    background frame has a bad FCS. An rx.isr marker rises 700 ns + 10 ns * i after each probe's
    end, and a background frame ends between a probe and its marker (where pairing by edge
    order would take the wrong frame)."""
    rows = []         # (direction, cls, seq, start, end, flags)
    isr = []
    expect_e2e = []
    for i in range(10):
        t0 = 1000 + 1000 * i                       # ticks
        end = t0 + 70
        rows.append((0, 1, 100 + i, t0, end, GOOD))
        bg_end = end + 30                           # background request ends before the marker
        rows.append((0, 0, 900 + i, end + 5, bg_end, GOOD if i != 4 else FLAGS["seq_valid"]))
        if i != 4:
            rows.append((1, 0, 900 + i, bg_end + 50, bg_end + 120, GOOD))
        isr.append(end + 70 + i)
        if i == 3:
            continue
        reply = end + 200 + i
        if i == 6:
            reply += 1400                           # leaves after reply 7
        rows.append((1, 1, 100 + i, reply, reply + 70, GOOD))
        expect_e2e.append(reply - end)
        if i == 5:
            rows.append((1, 1, 100 + i, reply + 300, reply + 370, GOOD))
    rows.sort(key=lambda r: r[3])
    rec = np.zeros(len(rows), FRAME_DTYPE)
    index = [0, 0]
    for k, (d, cls, seq, _, _, flags) in enumerate(rows):
        rec[k]["direction"], rec[k]["cls"], rec[k]["seq"], rec[k]["flags"] = d, cls, seq, flags
        rec[k]["frame_index"] = index[d]
        # the pulses here last 250-700 ns, a few bytes at 100 Mb/s: a 4-byte length keeps each
        # record plausible for its pulse (capture.frames.place_frames checks duration vs length)
        rec[k]["length"] = 4
        index[d] += 1
    start = np.array([r[3] for r in rows], np.int64)
    end = np.array([r[4] for r in rows], np.int64)
    return rec, start, end, np.array(isr, np.int64), expect_e2e


def test_pairing_by_sequence_number():
    rec, start, end, isr, expect_e2e = scenario()
    # a 20 µs reply window: request 3 is judged dropped well before the capture ends
    fa = analyze_frames(rec, start, end, tick_hz=TICK_HZ, markers={"rx.isr": isr},
                        window_s=20e-6)
    probe, bg = fa.classes[1], fa.classes[0]
    e2e = probe.stats["node.e2e"]
    assert e2e.n == 9 and e2e.min_ns == 10 * min(expect_e2e) and \
        e2e.max_ns == 10 * max(expect_e2e)
    assert (probe.requests, probe.replied, probe.dropped, probe.duplicates, probe.reordered) == \
        (10, 9, 1, 1, 1)
    isr_stats = probe.stats["rx.isr"]
    # request 3 is never answered and its interrupt also follows a background frame's end: lost
    # before its interrupt, the interrupt would be the background frame's alone, so the edges
    # cannot tell and it is ambiguous (left out); the other nine keep theirs
    assert isr_stats.n == 9 and isr_stats.min_ns == 700 and isr_stats.max_ns == 790
    assert probe.ambiguous == {"rx.isr": 1}
    # background: the bad-FCS request is not a request; the others are answered in 500 ns
    assert (bg.requests, bg.replied, bg.dropped, bg.fcs_errors) == (9, 9, 0, 1)
    assert bg.stats["node.e2e"].min_ns == bg.stats["node.e2e"].max_ns == 500
    assert fa.unplaced == 0


def write_capture(path, *, label):
    """The scenario as a capture file: DV edges on rx_dv/tx_en, the marker on m0 (rx.isr)."""
    rec, start, end, isr, _ = scenario()
    ev = [(t, int(d), True) for t, d in zip(start, rec["direction"], strict=True)]
    ev += [(t, int(d), False) for t, d in zip(end, rec["direction"], strict=True)]
    ev += [(int(t), 3, True) for t in isr] + [(int(t) + 20, 3, False) for t in isr]
    ev.sort()
    t, ch, rising = (np.array(x) for x in zip(*ev, strict=True))
    meta = {"tick_hz": TICK_HZ, "label": label,
            "channels": {"0": "rx_dv", "1": "tx_en", "3": "m0"}, "markers": {"m0": "rx.isr"},
            "frame_classes": {"0": "bg", "1": "probe"}}
    with capfile.CaptureWriter(path, meta) as w:
        w.append_events(t, ch, rising)
        w.append_frames(rec)


def test_analyze_file_and_cli_show_classes(tmp_path, capsys):
    write_capture(tmp_path / "a.lsc", label="stack")
    a = api.analyze_file(tmp_path / "a.lsc")
    assert a.stats["node.e2e[probe]"].n == 9
    assert a.stats["node.e2e[bg]"].n == 9
    assert a.stats["rx.isr[probe]"].min_ns == 700
    # the reply window follows the data: twice the longest reply (request 6's, 1,606 ticks by
    # construction of scenario()), 32.12 µs, and the capture runs 60 µs past request 3's end,
    # so the unanswered request is dropped (a fixed 100 ms window would call it unknown)
    probe = a.to_dict()["frames"]["classes"]["1"]
    assert (probe["dropped"], probe["unknown"]) == (1, 0)
    assert a.result.frames.reply_window_s == pytest.approx(2 * 1606 / TICK_HZ, abs=1e-12)
    assert main(["analyze", str(tmp_path / "a.lsc")]) == 0
    out = capsys.readouterr().out
    assert "node.e2e[probe]" in out and "frames by class" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("probe"))
    assert row.split()[:8] == ["probe", "10", "9", "1", "0", "1", "1", "0"]
    # records without the traffic magic flag: the fallback rule, said in one line
    assert "requests and replies: every UDP frame holding a sequence number" in out
    assert "note: no frame record carries the traffic magic" in out


def test_compare_per_class(tmp_path, capsys):
    write_capture(tmp_path / "a.lsc", label="stack")
    write_capture(tmp_path / "b.lsc", label="fast")
    assert main(["compare", str(tmp_path / "a.lsc"), str(tmp_path / "b.lsc"), "--json"]) == 0
    comps = json.loads(capsys.readouterr().out)["comparisons"]
    assert {"node.e2e[probe]", "node.e2e[bg]"} <= {c["measurement"] for c in comps}
    df = api.load(tmp_path / "a.lsc").packets()
    assert np.count_nonzero(df["node.e2e[probe]_ns"].notna()) == 9


MAGIC = GOOD | FLAGS["traffic_magic"]


def background_scenario():
    """Every frame in class 0 (no rules: the power-up state, everything recorded). Probe requests
    with the traffic magic every 10 µs, each echoed (magic too) 2 µs + 10 ns * i after its end;
    between them, background UDP frames without the magic whose 4 bytes at the sequence offset
    happen to equal a probe's number: a received one with the next probe's number (a false
    request and a false duplicate) and a transmitted one with this probe's number, 300 ns after
    the probe ends (a false reply, earlier than the true one). Returns the records, their ticks
    and the true node.e2e of each probe, ticks."""
    rows = []         # (direction, cls, seq, start, end, flags)
    truth = []
    for i in range(8):
        end = 1000 + 1000 * i + 70
        rows.append((0, 0, 100 + i, end - 70, end, MAGIC))
        rows.append((1, 0, 100 + i, end + 30, end + 100, GOOD))        # background, no magic
        rows.append((0, 0, 101 + i, end + 120, end + 190, GOOD))       # background, no magic
        reply = end + 200 + i
        rows.append((1, 0, 100 + i, reply, reply + 70, MAGIC))
        truth.append(reply - end)
    rows.sort(key=lambda r: r[3])
    rec = np.zeros(len(rows), FRAME_DTYPE)
    index = [0, 0]
    for k, (d, cls, seq, _, _, flags) in enumerate(rows):
        rec[k]["direction"], rec[k]["cls"], rec[k]["seq"], rec[k]["flags"] = d, cls, seq, flags
        rec[k]["frame_index"], rec[k]["length"] = index[d], 594
        index[d] += 1
    start = np.array([r[3] for r in rows], np.int64)
    end = np.array([r[4] for r in rows], np.int64)
    return rec, start, end, truth


def test_only_frames_with_the_traffic_magic_are_paired():
    """The sniffer reports the magic (some records carry it), so background UDP frames are
    neither requests nor replies: 8 requests, 8 replies at their true times (exact, 10 ns
    ticks), no duplicates. The rule without the magic (today's for older captures) takes the
    background frames, which the test shows so it can tell the two apart."""
    rec, start, end, truth = background_scenario()
    fa = analyze_frames(rec, start, end, tick_hz=TICK_HZ, window_s=20e-6)
    assert fa.magic and fa.notes == []
    c = fa.classes[0]
    assert (c.requests, c.replied, c.dropped, c.duplicates, c.reordered) == (8, 8, 0, 0, 0)
    at, ticks = c.samples["node.e2e"]
    assert ticks.tolist() == truth
    old = analyze_frames(rec, start, end, tick_hz=TICK_HZ, window_s=20e-6, magic=False)
    assert old.classes[0].requests == 16 and old.classes[0].duplicates > 0
    assert old.classes[0].samples["node.e2e"][1].min() == 30      # the background "reply"


def test_without_any_magic_flag_every_udp_frame_pairs_and_says_so():
    """A capture whose records never carry the flag (gateware from before it): today's rule, and
    a note saying so. The scenario of :func:`scenario` has no magic flags: its counts are those
    of test_pairing_by_sequence_number."""
    rec, start, end, _, _ = scenario()
    fa = analyze_frames(rec, start, end, tick_hz=TICK_HZ, window_s=20e-6)
    assert not fa.magic and len(fa.notes) == 1 and "traffic magic" in fa.notes[0]
    assert (fa.classes[1].requests, fa.classes[0].requests) == (10, 9)
    assert fa.to_dict()["pairing"] == {"magic": False, "reply_class": "same",
                                       "reply_window_s": 20e-6, "notes": fa.notes}


def test_replies_come_from_the_request_class():
    """Requests of class 1 (hp) whose numbers an unrelated class-2 stream also uses: a class-2
    transmitted frame with the request's number leaves 100 ns after each request ends, the true
    reply (class 1) 2 µs after. Only the class-1 frame is the reply (exact); with
    ``reply_class="any"`` the class-2 frame would be taken."""
    rows, truth = [], []
    for i in range(5):
        end = 1000 * (i + 1)
        rows += [(0, 1, 7 + i, end - 70, end), (1, 2, 7 + i, end + 10, end + 80),
                 (1, 1, 7 + i, end + 200, end + 270)]
        truth.append(200)
    rec = np.zeros(len(rows), FRAME_DTYPE)
    for k, (d, cls, seq, _, _) in enumerate(rows):
        rec[k]["direction"], rec[k]["cls"], rec[k]["seq"], rec[k]["flags"] = d, cls, seq, MAGIC
    start = np.array([r[3] for r in rows], np.int64)
    end = np.array([r[4] for r in rows], np.int64)
    same = analyze_frames(rec, start, end, tick_hz=TICK_HZ, window_s=20e-6)
    assert same.classes[1].samples["node.e2e"][1].tolist() == truth
    assert same.classes[1].duplicates == 0
    anyc = analyze_frames(rec, start, end, tick_hz=TICK_HZ, window_s=20e-6, reply_class="any")
    assert anyc.classes[1].samples["node.e2e"][1].tolist() == [10] * 5
    assert "every class" in anyc.notes[0]
    with pytest.raises(ValueError, match="Reply class must be one of same, any, not 'other'"):
        analyze_frames(rec, start, end, tick_hz=TICK_HZ, reply_class="other")


def test_unclassified_transmit_direction_takes_replies_of_any_class(tmp_path, capsys):
    """A capture config with receive rules only: replies are class 0 while requests are class 1
    (hp). ``analyze_file`` reads that from the metadata and pairs across classes; the CLI says
    which rule it used."""
    rows = []
    pulse = 576           # a 64-byte frame with preamble and SFD at 100 Mb/s: 5.76 µs
    for i in range(4):
        end = 10_000 * (i + 1)
        rows += [(0, 1, 50 + i, end - pulse, end), (1, 0, 50 + i, end + 300, end + 300 + pulse)]
    rec = np.zeros(len(rows), FRAME_DTYPE)
    index = [0, 0]
    for k, (d, cls, seq, _, _) in enumerate(rows):
        rec[k]["direction"], rec[k]["cls"], rec[k]["seq"], rec[k]["flags"] = d, cls, seq, MAGIC
        rec[k]["frame_index"], rec[k]["length"] = index[d], 64
        index[d] += 1
    ev = [(s, int(d), True) for d, _, _, s, _ in rows] + [(e, int(d), False)
                                                          for d, _, _, _, e in rows]
    ev.sort()
    t, ch, rising = (np.array(x) for x in zip(*ev, strict=True))
    meta = {"tick_hz": TICK_HZ, "channels": {"0": "rx_dv", "1": "tx_en"},
            "frames": {"classes": {"0": "other", "1": "hp"}, "record": ["other", "hp"],
                       "rules": {"rx": [{"enable": 1, "cls": 1}], "tx": []}}}
    with capfile.CaptureWriter(tmp_path / "rx-rules.lsc", meta) as w:
        w.append_events(t, ch, rising)
        w.append_frames(rec)
    a = api.analyze_file(tmp_path / "rx-rules.lsc")
    e2e = a.stats["node.e2e[hp]"]
    assert e2e.n == 4 and e2e.min_ns == e2e.max_ns == 3000      # 300 ticks of 10 ns
    assert a.result.frames.reply_class == "any"
    assert main(["analyze", str(tmp_path / "rx-rules.lsc")]) == 0
    out = capsys.readouterr().out
    assert "requests and replies: latscope traffic only (UDP payload with the traffic magic), " \
        "replies of any class" in out
    assert "note: replies were taken from every class" in out
