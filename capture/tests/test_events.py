"""``capture/events.py``: the one vocabulary the decoder, the session, the file and the analysis
share."""

import doctest

import numpy as np

from latscope.capture import events
from latscope.capture.events import COUNTERS, DecodeResult, Events, FrameRecords, LossRecord
from latscope.capture.files import capfile
from latscope.capture.link import stream
from latscope.gateware.codec import COUNTER_DTYPE, FRAME_DTYPE, HEADER_MAX, HEARTBEAT_DTYPE
from latscope.gateware.model_stream import Entry, LinkModel
from latscope.gateware.protocol import EntryKind


def test_module_doctests():
    result = doctest.testmod(events)
    assert result.attempted > 0 and result.failed == 0


def test_an_empty_result_has_typed_empty_columns():
    r = DecodeResult()
    assert (r.time.dtype, r.channel.dtype, r.rising.dtype) == (np.int64, np.uint8, bool)
    assert r.heartbeats.dtype == HEARTBEAT_DTYPE and r.frames.dtype == FRAME_DTYPE
    assert r.frame_headers.shape == (0, HEADER_MAX) and r.frame_counters.dtype == COUNTER_DTYPE
    assert r.losses == [] and r.replies == []
    assert r.counters == dict.fromkeys(COUNTERS, 0)
    assert len(DecodeResult.concat([]).time) == 0


def test_decoder_and_file_hand_on_the_same_loss_record(tmp_path):
    """One LossRecord class: the decoder's losses go into a capture file and come back equal and
    of the same type."""
    model = LinkModel(channels=8, lanes=2, counter_width=16)
    data = model.run([Entry(EntryKind.EVENTS, 10, 0b1, 0b1),
                      Entry(EntryKind.OVERFLOW, 20, count=7, span=3),
                      Entry(EntryKind.TICK, 30)])
    result = stream.StreamDecoder().feed(data)
    # OVERFLOW at cycle 20 of 2 lanes: first_time 40 ticks, span (3 + 1) cycles = 8 ticks
    assert result.losses == [LossRecord(40, 8, 7, "overflow")]
    assert all(type(r) is LossRecord for r in result.losses)
    path = tmp_path / "c.lsc"
    with capfile.CaptureWriter(path, {"tick_hz": 1e6}, fsync=False) as writer:
        writer.append_events(result.time, result.channel, result.rising)
        writer.append_losses(result.losses)
        writer.append_heartbeats(result.heartbeats)
    with capfile.open_capture(path) as cap:
        assert cap.losses == result.losses and all(type(r) is LossRecord for r in cap.losses)
        assert isinstance(cap.events(), Events)
        assert isinstance(cap.frames(), FrameRecords)
        assert cap.heartbeats["events"].tolist() == result.heartbeats["events"].tolist() == [1]
