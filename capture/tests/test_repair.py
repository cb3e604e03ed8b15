"""``latscope.capture.files.repair.repair``: a damaged capture rebuilt from every intact chunk.

Reference: what the reader reads from the damaged file (events, losses with the derived
``damage`` records, heartbeats, frames, metadata, note). The repaired file must read the same,
with no damage left, and verify as intact.
"""

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.events import LossRecord
from latscope.capture.files import integrity
from latscope.capture.files.capfile import CaptureWriter, open_capture
from latscope.capture.files.repair import repair
from latscope.gateware.codec import COUNTER_DTYPE, FLAGS, FRAME_DTYPE

META = {"tick_hz": 200e6, "channels": {"0": "rx_dv", "1": "tx_en"}, "label": "repair"}


def _write(path, note=True):
    rng = np.random.default_rng(3)
    time = np.cumsum(rng.integers(1, 1000, 600)).astype(np.int64)
    channel = rng.integers(0, 2, 600).astype(np.uint8)
    rising = rng.integers(0, 2, 600).astype(bool)
    records = np.zeros(3, FRAME_DTYPE)
    records["frame_index"] = [0, 1, 2]
    records["length"] = 64
    records["flags"] = FLAGS["fcs_ok"]
    counters = np.zeros(1, COUNTER_DTYPE)
    counters["frames"] = 3
    w = CaptureWriter(path, META, chunk_events=100, fsync=False)
    for start in range(0, 600, 100):
        w.append_events(time[start:start + 100], channel[start:start + 100],
                        rising[start:start + 100])
        if start == 200:
            w.append_loss(LossRecord(int(time[start + 99]), 10, 4, "overflow"))
            w.append_heartbeats([{"time": int(time[start]), "events": start}])
            w.append_frames(records)
            w.append_frame_counters(counters)
    if note:
        w.close(reason="packet limit reached", packets=150)
    else:
        w.flush()
        w.abandon()


def _state(cap):
    """Everything a reader gets from a capture, in comparable form."""
    ev = cap.events()
    meta = {k: v for k, v in cap.metadata.items() if k not in ("repaired", "format")}
    note = {k: v for k, v in (cap.note or {}).items()
            if k not in ("metadata", "closed", "events")}
    return (ev.time.tolist(), ev.channel.tolist(), ev.rising.tolist(), cap.losses,
            cap.heartbeats.tolist(), cap.frames()[0].tolist(), cap.frame_counters().tolist(),
            meta, note, cap.finalised)


def _flip(path, kind, which=0, at=5):
    with open_capture(path) as cap:
        chunk = [c for c in cap.chunks if c.type == kind][which]
    data = bytearray(path.read_bytes())
    data[chunk.offset + at] ^= 0x04
    path.write_bytes(data)


@pytest.mark.parametrize("kind, which", [(b"META", 0), (b"EVTS", 2), (b"EVTS", 0),
                                         (b"EVTS", 5), (b"LOSS", 0), (b"HBT ", 0),
                                         (b"FRMS", 0), (b"METC", 0)])
def test_repair_keeps_everything_the_reader_reads_and_no_damage(tmp_path, kind, which):
    path = tmp_path / "c.lsc"
    _write(path)
    _flip(path, kind, which)
    with open_capture(path) as cap:
        assert cap.damage                      # the flip really damaged a chunk
        expected = _state(cap)
        damage = [r for r in cap.losses if r.cause == "damage"]
    out = tmp_path / "fixed.lsc"
    summary = repair(path, out)
    assert summary.regions == 1 and summary.finalised
    with open_capture(out) as cap:
        assert cap.problems == [] and cap.metadata_from == "META"
        assert _state(cap) == expected
        assert [r for r in cap.losses if r.cause == "damage"] == damage
        assert cap.metadata["repaired"]["from"] == "c.lsc"
        assert cap.metadata["repaired"]["metadata_from"] == summary.metadata_from
        assert cap.note["reason"] == "packet limit reached" and cap.note["packets"] == 150
        assert cap.note["events"] == cap.n_events
    report = integrity.verify(out)
    assert report["ok"] and report["state"] == "intact"


def test_a_capture_never_finalised_stays_so(tmp_path):
    path = tmp_path / "k.lsc"
    _write(path, note=False)
    data = path.read_bytes()
    path.write_bytes(data[:-7])                 # killed in the middle of a write
    with open_capture(path) as cap:
        expected = _state(cap)
        assert cap.truncated is not None
    summary = repair(path, tmp_path / "fixed.lsc")
    assert not summary.finalised and summary.truncated is not None
    with open_capture(tmp_path / "fixed.lsc") as cap:
        assert cap.problems == [] and not cap.finalised
        assert _state(cap) == expected


def test_repair_never_replaces_its_input(tmp_path):
    path = tmp_path / "c.lsc"
    _write(path)
    before = path.read_bytes()
    with pytest.raises(LatscopeError, match="is the input"):
        repair(path, path, force=True)
    assert path.read_bytes() == before
    (tmp_path / "taken.lsc").write_bytes(b"x")
    with pytest.raises(LatscopeError, match="exists; choose another name or use --force"):
        repair(path, tmp_path / "taken.lsc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.lsc", "taken.lsc"]
