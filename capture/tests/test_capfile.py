"""Capture file format: round trip, zero-copy reads, damage at every byte, version rule."""

import json
import struct
import zlib

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.bench.capture import measure_read_memory
from latscope.capture.events import LossRecord
from latscope.capture.files import capfile, integrity
from latscope.capture.files.capfile import HBT_DTYPE as HEARTBEAT_DTYPE
from latscope.capture.files.capfile import (
    CaptureFileError,
    CaptureWriter,
    open_capture,
    truth_path,
)

META = {"tick_hz": 200e6, "channels": {"0": "rx_dv", "1": "tx_en", "2": "m_isr"},
        "markers": {"m0": "rx.isr"}, "label": "test"}


def _events(n, seed=0):
    rng = np.random.default_rng(seed)
    time = np.cumsum(rng.integers(0, 1000, n)).astype(np.int64)
    return time, rng.integers(0, 8, n).astype(np.uint8), rng.integers(0, 2, n).astype(bool)


def _write(path, n=1000, chunk_events=256, note=True):
    time, channel, rising = _events(n)
    w = CaptureWriter(path, META, chunk_events=chunk_events, fsync=False)
    for start in range(0, n, 100):
        w.append_events(time[start:start + 100], channel[start:start + 100],
                        rising[start:start + 100])
    w.append_loss(LossRecord(time[-1], 50, 7, "overflow"))
    w.append_heartbeats([{"time": 1, "events": 2, "lost": 0, "fifo_high_water": 3,
                          "status": 1, "epoch": 0}])
    if note:
        w.close("limit reached", packets=5)
    else:
        w.abandon()
    return time, channel, rising


def test_round_trip(tmp_path):
    path = tmp_path / "a.lsc"
    time, channel, rising = _write(path)
    with open_capture(path) as cap:
        assert cap.problems == []
        assert cap.complete
        assert cap.version == (capfile.FORMAT_MAJOR, capfile.FORMAT_MINOR)
        assert cap.tick_hz == 200e6
        assert cap.channel_names == {0: "rx_dv", 1: "tx_en", 2: "m_isr"}
        assert cap.markers == {"m0": "rx.isr"}
        assert cap.metadata["label"] == "test"
        assert cap.metadata["software"]["latscope"]
        assert cap.n_events == 1000
        ev = cap.events()
        assert ev.time.dtype == np.int64 and ev.channel.dtype == np.uint8
        assert ev.rising.dtype == bool
        assert np.array_equal(ev.time, time) and np.array_equal(ev.channel, channel)
        assert np.array_equal(ev.rising, rising)
        chunks = list(cap.iter_chunks())
        assert [len(c.time) for c in chunks] == [300, 300, 300, 100]  # 256-event threshold
        assert cap.losses == [LossRecord(int(time[-1]), 50, 7, "overflow")]
        assert cap.lost == {"overflow": 7, "link": 0}
        assert cap.heartbeats["fifo_high_water"].tolist() == [3]
        assert cap.note["reason"] == "limit reached"
        assert cap.note["events"] == 1000 and cap.note["lost_overflow"] == 7
        assert cap.note["packets"] == 5
        # duration from the first to the last event, exact in ticks
        assert cap.duration == (time[-1] - time[0]) / 200e6


def test_single_chunk_is_zero_copy_and_aligned(tmp_path):
    path = tmp_path / "z.lsc"
    time, channel, rising = _events(5000)
    with CaptureWriter(path, META, fsync=False) as w:
        w.append_events(time, channel, rising)
    with open_capture(path) as cap:
        ev = cap.events()
        assert not ev.time.flags.owndata and not ev.time.flags.writeable
        assert ev.time.ctypes.data % 8 == 0
        assert np.array_equal(ev.time, time)
        del ev


def test_time_column_aligned_whatever_metadata_length(tmp_path):
    for pad in range(9):
        path = tmp_path / f"p{pad}.lsc"
        with CaptureWriter(path, dict(META, label="x" * pad), fsync=False) as w:
            w.append_events([1, 2, 3], [0, 1, 2], [1, 1, 0])
            w.flush()
            w.append_events([4], [0], [0])
        with open_capture(path) as cap:
            for chunk in cap.iter_chunks():
                assert chunk.time.ctypes.data % 8 == 0
            assert cap.events().time.tolist() == [1, 2, 3, 4]


def test_truncation_at_every_byte_keeps_every_complete_chunk(tmp_path):
    path = tmp_path / "t.lsc"
    time, channel, rising = _events(40)
    with CaptureWriter(path, META, fsync=False) as w:         # 4 EVTS chunks, LOSS, HBT, NOTE
        for start in range(0, 40, 10):
            w.append_events(time[start:start + 10], channel[start:start + 10],
                            rising[start:start + 10])
            w.flush()
        w.append_loss(LossRecord(int(time[-1]), 5, 3, "link"))
        w.append_heartbeats([{"time": 1, "events": 40}])
    data = path.read_bytes()
    with open_capture(path) as cap:
        full = cap.chunks
    ends = [c.offset + c.length + capfile.CRC_SIZE for c in full]
    cut = tmp_path / "cut.lsc"
    for size in range(len(data)):
        cut.write_bytes(data[:size])
        if size < ends[0]:          # no complete META: not openable, clear error
            with pytest.raises(CaptureFileError):
                open_capture(cut).close()
            continue
        with open_capture(cut) as cap:
            complete = sum(1 for e in ends if e <= size)
            assert len(cap.chunks) == complete
            expected = sum(int(np.frombuffer(data, "<u4", 1, c.offset)[0])
                           for c in full[:complete] if c.type == b"EVTS")
            assert cap.n_events == expected
            assert (cap.problems == []) == (size in ends)
            if cap.problems:
                assert "truncated" in cap.problems[0]
            assert cap.complete == (size == len(data))


def _evts_ranges(chunks, data):
    """(chunk index, first event, count) of every EVTS chunk, in file order."""
    out, first = [], 0
    for index, chunk in enumerate(chunks):
        if chunk.type == b"EVTS":
            count = int(np.frombuffer(data, "<u4", 1, chunk.offset)[0])
            out.append((index, first, count))
            first += count
    return out


def test_bit_flip_skips_only_the_damaged_chunk(tmp_path):
    # Reference: the events as written. A bit flipped in any chunk but the last (NOTE, nothing
    # follows it to resynchronise on) loses exactly that chunk: every other chunk is read, the
    # gap is a "damage" loss record, verify says "damaged, finalised". A damaged META loses no
    # event: its copy METC (format 1.2) gives the metadata.
    path = tmp_path / "f.lsc"
    time, channel, rising = _write(path, n=400, chunk_events=100)
    data = bytearray(path.read_bytes())
    with open_capture(path) as cap:
        chunks = cap.chunks
    ranges = {index: (first, count) for index, first, count in _evts_ranges(chunks, data)}
    rng = np.random.default_rng(1)
    for index, chunk in enumerate(chunks):
        damaged = bytearray(data)
        pos = chunk.offset + int(rng.integers(0, chunk.length))
        damaged[pos] ^= 1 << int(rng.integers(0, 8))
        bad = tmp_path / "bad.lsc"
        bad.write_bytes(damaged)
        start = chunk.offset - capfile.CHUNK_HEADER_SIZE
        with open_capture(bad) as cap:
            assert cap.metadata_from == ("METC" if index == 0 else "META")
            assert cap.metadata["label"] == META["label"]
            assert [c for c in cap.chunks] == chunks[:index] + chunks[index + 1:]
            reason = f"bad CRC in {chunk.type!r} chunk at offset {start}"
            if index == len(chunks) - 1:
                assert cap.problems == [reason] and cap.truncated == reason
                assert cap.damage == [] and not cap.finalised
                continue
            end = chunk.offset + chunk.length + capfile.CRC_SIZE
            assert cap.problems == [f"{reason}; {end - start} bytes skipped, reading resumed "
                                    f"at offset {end}"]
            assert cap.truncated is None and cap.finalised and not cap.complete
            keep = np.ones(len(time), bool)
            if index in ranges:
                first, count = ranges[index]
                keep[first:first + count] = False
                gap = [r for r in cap.losses if r.cause == "damage"]
                # from the last event before the gap to the first after it (either side may
                # be missing at the ends of the capture)
                before = int(time[first - 1]) if first else None
                after = int(time[first + count]) if first + count < len(time) else None
                begin = before if before is not None else after
                stop = after if after is not None else before
                assert gap == [LossRecord(begin, stop - begin, count, "damage")]
            ev = cap.events()
            assert ev.time.tolist() == time[keep].tolist()
            assert ev.channel.tolist() == channel[keep].tolist()
        report = integrity.verify(bad)
        assert report["state"] == "damaged, finalised" and report["ok"] is False


def test_garbage_over_several_chunks_resyncs(tmp_path):
    # random bytes over the end of one EVTS chunk and the start of the next two: reading resumes
    # at the first valid chunk after them, and the region is one damage record
    path = tmp_path / "g.lsc"
    time, _, _ = _write(path, n=1000, chunk_events=100)
    data = bytearray(path.read_bytes())
    with open_capture(path) as cap:
        chunks = cap.chunks
    ranges = _evts_ranges(chunks, data)
    (i1, _, _), (i2, _, _), (i3, f3, c3), (i4, f4, _) = ranges[2:6]
    lo = chunks[i1].offset + 50
    hi = chunks[i3].offset + 10
    data[lo:hi] = np.random.default_rng(5).integers(0, 256, hi - lo, dtype=np.uint8).tobytes()
    bad = tmp_path / "bad.lsc"
    bad.write_bytes(data)
    with open_capture(bad) as cap:
        assert len(cap.damage) == 1
        d = cap.damage[0]
        assert d.offset == chunks[i1].offset - capfile.CHUNK_HEADER_SIZE
        assert d.end == chunks[i4].offset - capfile.CHUNK_HEADER_SIZE
        assert cap.events().time[-len(time[f4:]):].tolist() == time[f4:].tolist()
        summary = integrity.damage_summary(cap)
        assert summary["damaged"] and summary["finalised"] and summary["regions"] == 1
        assert "1 damaged region(s)" in summary["text"]


def test_not_a_capture_and_newer_major(tmp_path):
    path = tmp_path / "x.lsc"
    path.write_bytes(b"hello world, this is not a capture")
    with pytest.raises(CaptureFileError, match="bad magic"):
        open_capture(path)
    path.write_bytes(b"")
    with pytest.raises(CaptureFileError, match="empty"):
        open_capture(path)
    _write(path := tmp_path / "y.lsc", n=10)
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 8, capfile.FORMAT_MAJOR + 1)
    path.write_bytes(data)
    with pytest.raises(CaptureFileError,
                       match=rf"capture format 2\.{capfile.FORMAT_MINOR} is newer"):
        open_capture(path)
    assert issubclass(CaptureFileError, LatscopeError)


def test_unknown_chunk_is_skipped_newer_minor(tmp_path):
    path = tmp_path / "u.lsc"
    _write(path, n=10, note=False)
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 10, capfile.FORMAT_MINOR + 3)
    payload = b"future"
    header = struct.pack("<4sQ", b"FUTR", len(payload))
    data += header + payload + struct.pack("<I", zlib.crc32(header + payload))
    path.write_bytes(data)
    with open_capture(path) as cap:
        assert cap.problems == [] and cap.n_events == 10
        assert [c.type for c in cap.unknown_chunks] == [b"FUTR"]
        assert cap.note is None and not cap.complete


def test_writer_validation(tmp_path):
    with pytest.raises(ValueError, match="Metadata must hold tick_hz, a positive number, not None"):
        CaptureWriter(tmp_path / "a.lsc", {})
    with pytest.raises(TypeError, match="Metadata must be a dict, not 3"):
        CaptureWriter(tmp_path / "a.lsc", 3)
    with pytest.raises(ValueError, match="Chunk size must be a positive integer, not 0"):
        CaptureWriter(tmp_path / "a.lsc", META, chunk_events=0)
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        CaptureWriter(tmp_path / "a.lsc", dict(META, bad=object()))
    w = CaptureWriter(tmp_path / "b.lsc", META, fsync=False)
    with pytest.raises(ValueError, match="Event times must be non-decreasing"):
        w.append_events([3, 2], [0, 0], [0, 0])
    w.append_events([5], [0], [1])
    with pytest.raises(ValueError, match="Event times must be non-decreasing"):
        w.append_events([4], [0], [1])
    with pytest.raises(ValueError, match="must be 1-D and of equal length"):
        w.append_events([6, 7], [0], [1])
    with pytest.raises(ValueError,
                       match="Loss cause must be 'overflow', 'link' or 'damage', not 'x'"):
        w.append_loss(LossRecord(0, 0, 1, "x"))
    w.close()
    with pytest.raises(ValueError, match="Capture file is closed"):
        w.append_events([9], [0], [1])
    with pytest.raises(LatscopeError, match="exists; choose another name"):
        CaptureWriter(tmp_path / "b.lsc", META)


def test_loss_record_duck_typing_and_meta_json(tmp_path):
    class Other:
        first_time, span, lost, cause = 10, 5, 2, "link"
    path = tmp_path / "d.lsc"
    with CaptureWriter(path, META, fsync=False) as w:
        w.append_loss(Other())
    with open_capture(path) as cap:
        assert cap.losses == [(10, 5, 2, "link")]
        assert cap.events().time.size == 0 and cap.duration == 0.0
    raw = path.read_bytes()
    (length,) = struct.unpack_from("<Q", raw, capfile.HEADER_SIZE + 4)
    meta = json.loads(raw[capfile.HEADER_SIZE + 12:capfile.HEADER_SIZE + 12 + length])
    assert meta["tick_hz"] == 200e6
    assert meta["format"] == f"latscope-capture {capfile.FORMAT_MAJOR}.{capfile.FORMAT_MINOR}"


def test_heartbeat_structured_array(tmp_path):
    path = tmp_path / "h.lsc"
    hb = np.zeros(3, [("time", "<i8"), ("events", "<u8"), ("epoch", "u1")])
    hb["time"] = [1, 2, 3]
    hb["events"] = [4, 5, 6]
    with CaptureWriter(path, META, fsync=False) as w:
        w.append_heartbeats(hb)
    with open_capture(path) as cap:
        assert cap.heartbeats.dtype == HEARTBEAT_DTYPE
        assert cap.heartbeats["events"].tolist() == [4, 5, 6]


def test_heartbeat_chunk_record_is_the_wire_record_widened():
    """docs/capture-format.md, ``HBT ``: the fields of ``protocol.Heartbeat`` as received, at the
    wire record's offsets (``gateware.codec.HEARTBEAT_DTYPE``), ``time`` signed, 4 reserved bytes,
    32 in all (``capture/tests/test_events.py`` stores a decoded heartbeat and reads it back)."""
    from latscope.gateware.codec import HEARTBEAT_DTYPE as WIRE
    assert HEARTBEAT_DTYPE.names == (*WIRE.names, "reserved")
    for name in WIRE.names:
        (ours, at), (wire, wire_at) = HEARTBEAT_DTYPE.fields[name], WIRE.fields[name]
        assert at == wire_at and ours.itemsize == wire.itemsize
        assert ours == (np.dtype("<i8") if name == "time" else wire)
    assert HEARTBEAT_DTYPE.fields["reserved"][1:] == (WIRE.itemsize,)
    assert HEARTBEAT_DTYPE.itemsize == 32 == WIRE.itemsize + 4


def test_truth_side_file(tmp_path):
    path = tmp_path / "s.lsc"
    with CaptureWriter(path, META, fsync=False) as w:
        w.attach_truth("edges", {"time": np.arange(5), "channel": np.ones(5, np.uint8)})
        w.attach_truth("packets", {"id": np.array([7, 8])})
    assert truth_path(path) == str(path) + ".truth.npz"
    with open_capture(path) as cap:
        truth = cap.truth()
        assert sorted(truth) == ["edges", "packets"]
        assert truth["edges"]["time"].tolist() == [0, 1, 2, 3, 4]
        assert truth["packets"]["id"].tolist() == [7, 8]
    with CaptureWriter(tmp_path / "t.lsc", META, fsync=False) as w:
        with pytest.raises(ValueError, match="Truth name must be a non-empty string"):
            w.attach_truth("a/b", {})


def test_flush_interval_writes_chunk(tmp_path):
    path = tmp_path / "i.lsc"
    w = CaptureWriter(path, META, chunk_events=10**6, flush_interval=0.0, fsync=False)
    w.append_events([1, 2], [0, 0], [1, 0])      # interval 0: written at once
    with open_capture(path) as cap:
        assert cap.n_events == 2 and cap.note is None
    w.close()


def test_reading_a_large_file_takes_bounded_memory(tmp_path):
    path = tmp_path / "big.lsc"
    size = capfile.write_synthetic(path, 2_000_000, chunk_events=1 << 18)
    assert size > 20_000_000                       # 10 bytes per event plus chunk overhead
    result = measure_read_memory(path)
    assert result["events"] == 2_000_000
    # Bound: one chunk's worth of temporaries (2.6 MB at 10 B/event), far below the 20 MB file.
    assert result["heap_peak_bytes"] < 5_000_000, result


def test_frame_chunks_round_trip_and_match_the_spec(tmp_path):
    """FRMS/FCNT chunks: records and kept bytes come back exactly; the FRMS field table in
    docs/capture-format.md matches gateware.codec.FRAME_DTYPE; a truncated FRMS chunk is a
    problem, and the events before it stay readable."""
    import re
    from pathlib import Path

    from latscope.gateware.codec import COUNTER_DTYPE, FRAME_DTYPE, HEADER_MAX
    rng = np.random.default_rng(4)
    records = np.zeros(50, FRAME_DTYPE)
    records["frame_index"] = np.arange(50)
    records["seq"] = rng.integers(0, 2**32, 50)
    records["length"] = rng.integers(64, 1518, 50)
    records["header_len"] = rng.integers(0, 20, 50)
    headers = rng.integers(0, 256, (50, HEADER_MAX)).astype(np.uint8)
    headers[np.arange(HEADER_MAX)[None, :] >= records["header_len"][:, None]] = 0
    counters = np.zeros(3, COUNTER_DTYPE)
    counters["frames"] = [1, 2, 3]
    counters["octets"] = [2**40, 5, 6]
    path = tmp_path / "f.lsc"
    w = capfile.CaptureWriter(path, {"tick_hz": 1e8})
    w.append_events(np.arange(10, dtype=np.int64), np.zeros(10, np.uint8), np.ones(10, bool))
    w.append_frames(records[:20], headers[:20])
    w.append_frames(records[20:], headers[20:])
    w.append_frame_counters(counters)
    w.close()
    with capfile.open_capture(path) as cap:
        got, kept = cap.frames()
        assert cap.n_frames == 50 and not cap.problems
        assert np.array_equal(got, records) and np.array_equal(kept, headers)
        assert np.array_equal(cap.frame_counters(), counters)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "capture-format.md").read_text()
    section = doc.split("### `FRMS`")[1].split("### ")[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| (u\d+) \|", section, re.M)
    assert [(int(o), n, t) for o, n, t in rows] == [
        (FRAME_DTYPE.fields[n][1], n, f"u{FRAME_DTYPE.fields[n][0].itemsize * 8}")
        for n in FRAME_DTYPE.names]
    data = bytearray(path.read_bytes())
    start = data.index(b"FRMS")
    cut = tmp_path / "cut.lsc"
    cut.write_bytes(bytes(data[:start + 40]))
    with capfile.open_capture(cut) as cap:
        assert cap.n_events == 10 and cap.n_frames == 0 and cap.problems


def _chunk_of(path, kind):
    with open_capture(path) as cap:
        return next(c for c in cap.chunks if c.type == kind)


def test_one_flipped_bit_in_the_metadata_loses_no_event(tmp_path):
    # Reference: the events and metadata as written. Every byte of the META payload, one bit
    # each: the file opens from the copy (METC), every event reads, verify says which copy.
    path = tmp_path / "m.lsc"
    time, channel, rising = _write(path, n=300, chunk_events=100)
    data = path.read_bytes()
    meta = _chunk_of(path, b"META")
    with open_capture(path) as cap:
        assert cap.metadata_from == "META"
        written = dict(cap.metadata)
    bad = tmp_path / "bad.lsc"
    for pos in range(meta.offset, meta.offset + meta.length):
        damaged = bytearray(data)
        damaged[pos] ^= 1 << (pos % 8)
        bad.write_bytes(damaged)
        with open_capture(bad) as cap:
            assert cap.metadata_from == "METC" and cap.metadata == written
            ev = cap.events()
            assert ev.time.tolist() == time.tolist()
            assert ev.channel.tolist() == channel.tolist()
            assert ev.rising.tolist() == rising.tolist()
    report = integrity.verify(bad)
    assert report["metadata_from"] == "METC" and report["events"] == len(time)
    assert "the metadata was read from its copy in the METC chunk" in " ".join(
        report["warnings"])


def test_meta_and_its_copy_damaged_the_note_holds_a_third(tmp_path):
    path = tmp_path / "m.lsc"
    time, _, _ = _write(path, n=300, chunk_events=100)
    data = bytearray(path.read_bytes())
    for kind in (b"META", b"METC"):
        chunk = _chunk_of(path, kind)
        data[chunk.offset + 3] ^= 0x10
    bad = tmp_path / "bad.lsc"
    bad.write_bytes(data)
    with open_capture(bad) as cap:
        assert cap.metadata_from == "NOTE" and cap.metadata["label"] == META["label"]
        assert cap.tick_hz == META["tick_hz"] and cap.n_events == len(time)
        assert cap.channel_names == {0: "rx_dv", 1: "tx_en", 2: "m_isr"}


def test_a_killed_capture_with_a_damaged_meta_reads_from_its_copy(tmp_path):
    path = tmp_path / "k.lsc"
    time, _, _ = _write(path, n=300, chunk_events=100, note=False)
    data = bytearray(path.read_bytes())
    data[_chunk_of(path, b"META").offset] ^= 1
    path.write_bytes(data)
    with open_capture(path) as cap:
        assert cap.metadata_from == "METC" and not cap.finalised
        assert cap.events().time.tolist() == time.tolist()
    data[_chunk_of(path, b"METC").offset] ^= 1          # no copy left: refused, one line
    path.write_bytes(data)
    with pytest.raises(CaptureFileError, match="no readable META chunk"):
        open_capture(path)


def test_a_format_1_0_file_without_the_copy_still_reads():
    import os
    fixture = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "bench",
                           "gem-64.lsc")
    if not os.path.exists(fixture):
        pytest.skip(f"{fixture} absent")
    with open_capture(fixture) as cap:
        assert cap.version[1] < 2 and cap.metadata_from == "META" and cap.n_events > 0
        assert b"METC" not in [c.type for c in cap.chunks]
