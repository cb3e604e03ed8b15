"""Integrity of capture files: :func:`verify` (``latscope verify``) and :func:`damage_summary`
(the facts ``analyze``, ``compare`` and ``report`` warn with). Reading, resynchronising after
damage and the loss records of damaged regions live in :mod:`latscope.capture.files.capfile`; this
module judges what the reader found."""

import numpy as np

from latscope.capture.files.capfile import open_capture

__all__ = ["verify", "damage_summary"]


def damage_summary(capture):
    """The integrity facts of an open :class:`Capture`, for warnings next to figures.

    Returns
    -------
    dict
        ``damaged`` (regions were skipped or the tail is unreadable), ``finalised`` (the writer
        wrote its ``NOTE``), ``truncated`` (the tail is unreadable), ``regions`` (skipped
        regions), ``skipped_bytes``, ``problems`` (list of str) and ``text``: one sentence for a
        user, empty when the file is intact and finalised.
    """
    regions = len(capture.damage)
    skipped = sum(d.end - d.offset for d in capture.damage)
    damaged = bool(capture.problems)
    finalised = capture.note is not None
    parts = []
    if regions:
        parts.append(f"{regions} damaged region(s), {skipped:,} bytes skipped (their events "
                     f"are lost; reading resumed after each)")
    if capture.truncated:
        parts.append(f"truncated: {capture.truncated}")
    other = [p for p in capture.problems[regions:] if p != capture.truncated]
    parts += other
    if not finalised:
        parts.append("not finalised (the capture was killed or crashed: it may end early)")
    return {"damaged": damaged, "finalised": finalised, "truncated": capture.truncated is not None,
            "regions": regions, "skipped_bytes": skipped, "problems": list(capture.problems),
            "text": "; ".join(parts)}


def verify(path):
    """Check a capture file: every chunk's CRC, truncation, event columns, monotonic time,
    finalisation; list the losses (gap report).

    Returns
    -------
    dict
        ``ok`` (bool: undamaged; an unfinished file whose chunks are all intact is ``ok`` with a
        warning), ``state`` (``"intact"``, ``"intact, not finalised"``, ``"damaged, finalised"``
        or ``"damaged, not finalised"``), ``damage`` and ``warnings`` (lists of str),
        ``damaged_regions`` (skipped regions: offsets, bytes, reason), ``truncated`` (why the
        tail is unreadable, or ``None``), ``chunks``, ``events``, ``recoverable_events`` (events
        readable), ``bytes_after_last_good_chunk``, ``losses`` (list of dicts with times in ticks
        and seconds; damaged regions are losses with cause ``"damage"``), ``lost`` (totals by
        cause), ``finalised``, ``note`` and ``metadata_from`` (which copy of the metadata was
        read: ``"META"``, or ``"METC"`` / ``"NOTE"`` when ``META`` is damaged).
    """
    with open_capture(path) as cap:
        damage = list(cap.problems)
        warnings = []
        previous = None
        for index, chunk in enumerate(cap.iter_chunks()):
            t = chunk.time
            if len(t):
                backwards = np.flatnonzero(t[1:] < t[:-1])
                if len(backwards):
                    damage.append(f"time goes backwards inside EVTS chunk {index} at event "
                                  f"{int(backwards[0]) + 1}")
                if previous is not None and t[0] < previous:
                    damage.append(f"time goes backwards between EVTS chunks {index - 1} and "
                                  f"{index}")
                previous = int(t[-1])
                if int(chunk.channel.max()) >= 8:
                    damage.append(f"channel number above 7 in EVTS chunk {index}")
                if int(chunk.rising.view(np.uint8).max()) > 1:
                    damage.append(f"edge flag not 0/1 in EVTS chunk {index}")
        if cap.metadata_from != "META":
            warnings.append(f"the META chunk is damaged; the metadata was read from its copy in "
                            f"the {cap.metadata_from} chunk")
        if cap.note is None:
            warnings.append("not finalised: no NOTE chunk (the capture was killed or crashed); "
                            "every complete chunk is readable")
        elif cap.note.get("events") not in (None, cap.n_events) and not cap.damage:
            damage.append(f"NOTE counts {cap.note['events']} events, the file holds "
                          f"{cap.n_events}")
        elif cap.note.get("events") not in (None, cap.n_events):
            warnings.append(f"NOTE counts {cap.note['events']} events, {cap.n_events} are "
                            f"readable: {cap.note['events'] - cap.n_events} were in the damaged "
                            f"region(s)")
        records, _ = cap.frames()
        if len(records):
            if int(records["direction"].max()) > 1 or \
                    np.any(records["header_len"] > records["length"]):
                damage.append("frame records with a direction above 1 or more kept bytes than "
                              "the frame has")
            for d in (0, 1):
                index = records["frame_index"][records["direction"] == d].astype(np.int64)
                if np.any(np.diff(index) <= 0):
                    warnings.append(f"{'RX' if d == 0 else 'TX'} frame indices go backwards "
                                    f"(a timestamp reset, or records out of order)")
            from latscope.capture.files.frames import (  # why: amaranth, frame captures only
                capture_placement,
            )
            note = capture_placement(cap).summary()
            if note:
                warnings.append(note)
        lost = cap.lost
        if sum(lost.values()):
            causes = ", ".join(f"{cause} {n}" for cause, n in lost.items())
            warnings.append(f"{sum(lost.values())} events lost during the capture "
                            f"({causes}), see losses")
        tick = 1.0 / cap.tick_hz
        state = ("damaged" if damage else "intact") + \
            (", finalised" if damage and cap.note is not None else "") + \
            (", not finalised" if cap.note is None else "")
        return {
            "path": cap.path,
            "ok": not damage,
            "state": state,
            "damage": damage,
            "warnings": warnings,
            "damaged_regions": [{"offset": d.offset, "end": d.end, "bytes": d.end - d.offset,
                                 "reason": d.reason, "claimed_events": d.claimed_events}
                                for d in cap.damage],
            "truncated": cap.truncated,
            "format": f"{cap.version[0]}.{cap.version[1]}",
            "chunks": len(cap.chunks),
            "events": cap.n_events,
            "recoverable_events": cap.n_events,
            "frames": cap.n_frames,
            "frame_counters": len(cap.frame_counters()),
            "bytes_after_last_good_chunk": cap.size - cap.end,
            "finalised": cap.note is not None,
            "note": cap.note,
            "metadata_from": cap.metadata_from,
            "lost": lost,
            "losses": [{"cause": r.cause, "lost": r.lost, "first_time": r.first_time,
                        "span": r.span, "first_s": r.first_time * tick, "span_s": r.span * tick}
                       for r in cap.losses],
        }
