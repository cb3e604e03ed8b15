"""The frame bench's edge check (:mod:`~latscope.bench.framebench`, ``edges=True``):
the RX_DV/TX_EN edges the capture front end timestamped against the level changes the harness
made, and the FRAME records against their frames' edges.

The harness (``framebench.cpp``, ``FRAMEBENCH_EDGES``) writes, for every change of a capture
channel's level, the time in ps from which the new level holds. :func:`stimulus_ticks` turns it
into the tick whose lane sample first sees it, by the harness's own sampling rule;
:func:`zero_tick` is the tick the front end calls 0. So every decoded edge must be exactly on
``stimulus tick - zero_tick``: no tolerance.
"""

import numpy as np

__all__ = ["STIMULUS_EDGE_DTYPE", "stimulus_ticks", "zero_tick", "compare_edges", "check_edges"]

#: One level change of a capture channel as the harness writes it (``FRAMEBENCH_EDGES``): the
#: time in ps from which the new level holds, the direction (0 rx, 1 tx) and the new level.
STIMULUS_EDGE_DTYPE = np.dtype([("ps", "<u8"), ("direction", "u1"), ("level", "u1")])


def stimulus_ticks(change_ps, period_ps, lanes):
    """The tick (lane sample, counted from capture cycle 0) that first sees each level change.

    The harness presents, at the capture clock edge at ``n * period_ps``, the levels at the lane
    sample times ``(n - 1) * period_ps + (period_ps * j + period_ps // 2) // lanes`` (lane ``j``,
    0 earliest); a change at ``change_ps`` is seen by the first sample at or after it. The front
    end compensates its pipeline delay, so it reports that sample's tick minus the tick of the
    first sample after its reset (:func:`zero_tick`). A tick is ``period_ps / lanes``: 1.25 ns
    at the ECPIX-5's 200 MHz, ``k`` times that at 200 MHz / ``k``.

    >>> stimulus_ticks(np.array([0, 1, 625, 626, 4376, 5000]), 5000, 4).tolist()  # lane 0 at 625
    [0, 0, 0, 1, 4, 4]
    """
    change_ps = np.asarray(change_ps, np.int64)
    offsets = (period_ps * np.arange(lanes, dtype=np.int64) + period_ps // 2) // lanes
    cycle = change_ps // period_ps
    # lane ``lanes`` (past the last) is lane 0 of the next cycle: the same tick number
    return cycle * lanes + np.searchsorted(offsets, change_ps - cycle * period_ps, side="left")


def zero_tick(reset_ps, period_ps, lanes):
    """The stimulus tick the front end timestamps 0: the first lane sample of the first capture
    cycle out of reset (the harness releases reset at the first capture edge at or after
    ``reset_ps``; ``capture.py``: the first entry after power-up is cycle 0). The timestamp is
    never reset after that (the bench sends no RESET_TIME).

    >>> zero_tick(400_000, 5000, 4), zero_tick(400_000, 15000, 4)
    (316, 104)
    """
    return (-(-reset_ps // period_ps) - 1) * lanes


def compare_edges(want_time, want_rising, got_time, got_rising, *, window):
    """One channel's decoded edges against its stimulus edges (ticks, on one time base).

    An edge of the same polarity on the same tick matches; among the rest, a decoded edge within
    ``window`` ticks of an unmatched stimulus edge of its polarity is that edge ``shifted`` (the
    nearest first); stimulus edges left are ``missing``, decoded ones ``extra`` (as is a second
    decoded edge on one tick). Returns ``{"missing", "extra", "shifted"}`` counts.
    """
    out = dict(missing=0, extra=0, shifted=0)
    want_time, got_time = np.asarray(want_time, np.int64), np.asarray(got_time, np.int64)
    want_rising, got_rising = np.asarray(want_rising, bool), np.asarray(got_rising, bool)
    for polarity in (False, True):
        want, want_n = np.unique(want_time[want_rising == polarity], return_counts=True)
        got, got_n = np.unique(got_time[got_rising == polarity], return_counts=True)
        out["missing"] += int(np.sum(want_n - 1))      # a stimulus never repeats a tick
        out["extra"] += int(np.sum(got_n - 1))
        left_want, left_got = want[~np.isin(want, got)], got[~np.isin(got, want)]
        used = np.zeros(len(left_got), bool)
        shifted = 0
        for t in left_want:                            # only the edges that did not match
            i = int(np.searchsorted(left_got, t))
            near = [c for c in (i - 1, i) if 0 <= c < len(left_got) and not used[c]
                    and abs(int(left_got[c]) - int(t)) <= window]
            if near:
                used[min(near, key=lambda c: abs(int(left_got[c]) - int(t)))] = True
                shifted += 1
        out["shifted"] += shifted
        out["missing"] += len(left_want) - shifted
        out["extra"] += len(left_got) - shifted
    return out


def check_edges(stimulus, period_ps, lanes, time, channel, rising, records, channel_of,
                reset_ps):
    """Every decoded edge of the DV channels and every FRAME record's edges against the stimulus.

    Parameters
    ----------
    stimulus : STIMULUS_EDGE_DTYPE array
        The level changes the harness made (``FRAMEBENCH_EDGES``).
    period_ps, lanes : int
        The capture clock's period in the run and the lanes per capture cycle.
    time, channel, rising : arrays
        The decoded events (ticks since the timestamp reset).
    records : FRAME_DTYPE array (``direction`` and ``frame_index`` are used)
    channel_of : dict
        ``{direction: capture channel}``.
    reset_ps : int
        When the harness released reset (:func:`zero_tick`).

    Returns
    -------
    dict
        ``offset`` (decoded minus stimulus tick: ``-zero_tick``), ``first_offset`` (the same
        seen on the run's first decoded edge, for diagnosis), ``missing``, ``extra``,
        ``shifted`` (summed over the channels, :func:`compare_edges`), ``other_channels``
        (edges on channels nobody drove), ``records_off`` (FRAME records whose start or end, by
        ``capture.frames.frame_edge_times``, is not their frame's stimulus edge) and
        ``mismatches``, the sum of the last five.
    """
    from latscope.capture.files.frames import frame_edge_times
    time, channel = np.asarray(time, np.int64), np.asarray(channel)
    rising = np.asarray(rising, bool)
    want = {}
    for d in channel_of:
        mine = stimulus[stimulus["direction"] == d]
        want[d] = (stimulus_ticks(mine["ps"].astype(np.int64), period_ps, lanes),
                   mine["level"] == 1)
    offset = -zero_tick(reset_ps, period_ps, lanes)
    out = dict(offset=offset, first_offset=None, missing=0, extra=0, shifted=0,
               other_channels=0, records_off=0)
    firsts = [int(w[0][0]) for w in want.values() if len(w[0])]
    ours = np.isin(channel, list(channel_of.values()))
    out["other_channels"] = int(np.count_nonzero(~ours))
    if firsts and np.any(ours):
        out["first_offset"] = int(time[ours][0]) - min(firsts)
    for d, ch in channel_of.items():
        want_t, want_r = want[d]
        on = channel == ch
        gaps = np.diff(np.sort(want_t))
        window = max(1, int(gaps.min()) // 2) if len(gaps) else 1
        counts = compare_edges(want_t + offset, want_r, time[on], rising[on], window=window)
        for key, value in counts.items():
            out[key] += value
    if len(records):
        start, end = frame_edge_times(records, time, channel, rising, channel_of)
        expect_start = np.full(len(records), -2, np.int64)
        expect_end = np.full(len(records), -2, np.int64)
        for d in channel_of:
            mine = np.flatnonzero(records["direction"] == d)
            want_t, want_r = want[d]
            rises, falls = want_t[want_r] + offset, want_t[~want_r] + offset
            k = records["frame_index"][mine].astype(np.int64)
            ok = (k < len(rises)) & (k < len(falls))
            expect_start[mine[ok]] = rises[k[ok]]
            expect_end[mine[ok]] = falls[k[ok]]
        out["records_off"] = int(np.count_nonzero((start != expect_start)
                                                  | (end != expect_end)))
    out["mismatches"] = sum(out[k] for k in ("missing", "extra", "shifted", "other_channels",
                                            "records_off"))
    return out
