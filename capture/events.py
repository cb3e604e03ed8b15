"""What every layer hands on: events, loss records, replies, frame records and the decoder's result.

The stream decoder (:mod:`latscope.capture.link.stream`) produces these, the capture session passes
them to the file writer (:mod:`latscope.capture.files.capfile`), whose reader returns them to the
analysis. Record arrays keep the dtypes derived from the wire layouts in
:mod:`latscope.gateware.codec`: heartbeats are :data:`~latscope.gateware.codec.HEARTBEAT_DTYPE`
rows, FRAME records :data:`~latscope.gateware.codec.FRAME_DTYPE` rows and COUNTERS records
:data:`~latscope.gateware.codec.COUNTER_DTYPE` rows.

>>> result = DecodeResult(losses=[LossRecord(first_time=40, span=16, lost=3, cause="overflow")],
...                       overflow_lost_events=3)
>>> both = DecodeResult.concat([result, result])
>>> both.counters["overflow_lost_events"], both.losses[1].lost, len(both.frames)
(6, 3, 0)
"""

import dataclasses
from typing import NamedTuple

import numpy as np

__all__ = ["Events", "LossRecord", "Reply", "FrameRecords", "COUNTERS",
           "DecodeResult"]


class Events(NamedTuple):
    """A chunk of events in time order.

    Attributes
    ----------
    time : numpy.ndarray of int64
        Ticks since the instrument's timestamp reset (one tick is ``1 / tick_hz`` seconds).
    channel : numpy.ndarray of uint8
        Channel of each event, 0..7.
    rising : numpy.ndarray of bool
        True for a rising edge, False for a falling one.
    """
    time: np.ndarray
    channel: np.ndarray
    rising: np.ndarray


class LossRecord(NamedTuple):
    """Events known to be missing.

    Attributes
    ----------
    first_time : int
        Ticks: the earliest time a lost event can have.
    span : int
        Ticks: the lost events lie in ``[first_time, first_time + span]``.
    lost : int
        Number of events lost, exact (for ``"damage"``, what the skipped bytes claimed, or 0).
    cause : str
        ``"overflow"`` (gateware FIFO full), ``"link"`` (frames lost between board and host) or
        ``"damage"`` (a damaged region of a capture file, skipped by its reader).
    """
    first_time: int
    span: int
    lost: int
    cause: str


class Reply(NamedTuple):
    """A REPLY frame.

    Attributes
    ----------
    command_seq : int
        ``seq`` of the COMMAND frame it answers.
    opcode : int
        The command's :class:`~latscope.gateware.protocol.Opcode`.
    status : int
        A :class:`~latscope.gateware.protocol.Status`.
    data : bytes
        The reply data.
    """
    command_seq: int
    opcode: int
    status: int
    data: bytes


class FrameRecords(NamedTuple):
    """FRAME records of frame-aware capture with the frame bytes each one kept.

    Attributes
    ----------
    records : numpy.ndarray
        One row per record (:data:`~latscope.gateware.codec.FRAME_DTYPE`; a capture file's reader
        returns ``capture.frames.HOST_FRAME_DTYPE``, with ``frame_index`` unwrapped to 64 bits).
    headers : numpy.ndarray of uint8, shape (n, HEADER_MAX)
        Row ``i`` holds record ``i``'s first ``header_len`` frame bytes, zero after them.
    """
    records: np.ndarray
    headers: np.ndarray


def _no_records(name):
    """An empty array of the record column ``name`` of :class:`DecodeResult`."""
    from latscope.gateware import codec  # why: amaranth (layouts); file readers never need it
    if name == "heartbeats":
        return np.empty(0, codec.HEARTBEAT_DTYPE)
    if name == "frame_counters":
        return codec.empty_counters()
    return codec.empty_frames()[name == "frame_headers"]


#: Names of the counters kept by the stream decoder and reported in :class:`DecodeResult`.
COUNTERS = ("frames_ok", "frames_bad", "frames_missing", "frames_unknown", "truncated",
            "bytes_skipped", "link_lost_events", "overflow_lost_events", "resets")


@dataclasses.dataclass
class DecodeResult:
    """What one call of the stream decoder (``StreamDecoder.feed`` or ``finish``) produced.

    Attributes
    ----------
    time, channel, rising : numpy.ndarray
        The events in stream order, as in :class:`Events`. Time restarts at 0 after a RESET_TIME
        (see ``resets``).
    losses : list of LossRecord
        Events known to be missing (causes ``"overflow"`` and ``"link"``).
    heartbeats : numpy.ndarray
        HEARTBEAT payloads, :data:`~latscope.gateware.codec.HEARTBEAT_DTYPE` rows.
    replies : list of Reply
        REPLY frames.
    frames, frame_headers : numpy.ndarray
        FRAME records (:data:`~latscope.gateware.codec.FRAME_DTYPE`) and their kept frame bytes,
        one ``HEADER_MAX`` row each (as :class:`FrameRecords`).
    frame_counters : numpy.ndarray
        COUNTERS records, :data:`~latscope.gateware.codec.COUNTER_DTYPE` rows.
    frames_ok, frames_bad, frames_missing, frames_unknown, truncated, bytes_skipped, \
link_lost_events, overflow_lost_events, resets : int
        The counters named in :data:`COUNTERS`, for this call only (``StreamDecoder.counters``
        holds the running totals): frames accepted, rejected (CRC, version, protocol error),
        missing by sequence number, of unknown type, cut short at the end; bytes outside
        frames; events lost on the link and in the gateware; timestamp resets seen.
    """
    time: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    channel: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.uint8))
    rising: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, bool))
    losses: list = dataclasses.field(default_factory=list)
    heartbeats: np.ndarray = dataclasses.field(default_factory=lambda: _no_records("heartbeats"))
    replies: list = dataclasses.field(default_factory=list)
    frames: np.ndarray = dataclasses.field(default_factory=lambda: _no_records("frames"))
    frame_headers: np.ndarray = dataclasses.field(
        default_factory=lambda: _no_records("frame_headers"))
    frame_counters: np.ndarray = dataclasses.field(
        default_factory=lambda: _no_records("frame_counters"))
    frames_ok: int = 0
    frames_bad: int = 0
    frames_missing: int = 0
    frames_unknown: int = 0
    truncated: int = 0
    bytes_skipped: int = 0
    link_lost_events: int = 0
    overflow_lost_events: int = 0
    resets: int = 0

    @property
    def counters(self):
        """The counters as a dict."""
        return {name: getattr(self, name) for name in COUNTERS}

    @classmethod
    def concat(cls, results):
        """One result holding everything in ``results``, in order (counters summed)."""
        results = list(results)
        out = cls()
        if not results:
            return out
        out.time = np.concatenate([r.time for r in results])
        out.channel = np.concatenate([r.channel for r in results])
        out.rising = np.concatenate([r.rising for r in results])
        out.heartbeats = np.concatenate([r.heartbeats for r in results])
        out.frames = np.concatenate([r.frames for r in results])
        out.frame_headers = np.concatenate([r.frame_headers for r in results])
        out.frame_counters = np.concatenate([r.frame_counters for r in results])
        for r in results:
            out.losses += r.losses
            out.replies += r.replies
            for name in COUNTERS:
                setattr(out, name, getattr(out, name) + getattr(r, name))
        return out
