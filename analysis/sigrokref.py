"""sigrok as a reference: write events as a sigrok session (``.sr``) and measure the same latencies
with sigrok-cli's stock ``jitter`` decoder, to check latscope packet for packet and to time both.

# Ref: libsigrokdecode 0.5.3 ``decoders/jitter/pd.py``; session format in /work/shared/FIELD.md §6.

This is a shell around :mod:`latscope.capture.files.sigrok_write` (the ``.sr`` writer) and the
external ``sigrok-cli`` program; the analysis core does not use it.
"""

import re

import numpy as np

from latscope import LatscopeError
from latscope.capture.files.sigrok import edges_of_blocks
from latscope.capture.files.sigrok_write import SrWriter

__all__ = ["write_sr", "sigrok_jitter", "have_sigrok_cli", "edges_from_samples"]


def write_sr(path, chunks, *, samplerate, probes, total_samples=None, block=1 << 22):
    """Write event chunks as a sigrok session file, one sample per tick, in bounded memory.

    Parameters
    ----------
    path : str
    chunks : iterable of (time, channel, rising)
        Events (ticks = sample indices, > 0), in time order; each channel's edges alternate,
        starting from level 0.
    samplerate : int
        Samples (ticks) per second.
    probes : dict of int -> str
        Event channel -> probe name; probe ``k`` of the file is the ``k``-th entry.
    total_samples : int, optional
        Length of the file (default: one sample past the last event).

    Returns
    -------
    int
        Samples written.
    """
    channels = list(probes)
    bit = np.zeros(256, dtype=np.uint16)
    for k, ch in enumerate(channels):
        bit[ch] = 1 << k
    state = {"pos": 0, "level": 0}
    with SrWriter(path, int(samplerate), [probes[c] for c in channels], force=True,
                  chunk_samples=1 << 24) as writer:
        dtype = writer.dtype

        def emit(limit, t, ch):
            pos = state["pos"]
            for b in range(pos, limit, block):
                e = min(b + block, limit)
                lo, hi = np.searchsorted(t, [b, e])
                toggles = np.zeros(e - b, dtype=dtype)
                np.bitwise_xor.at(toggles, t[lo:hi] - b, bit[ch[lo:hi]].astype(dtype))
                levels = np.bitwise_xor.accumulate(toggles) ^ dtype.type(state["level"])
                writer.append(levels)
                state["level"] = int(levels[-1])
            state["pos"] = max(pos, limit)

        pend_t = np.empty(0, np.int64)
        pend_c = np.empty(0, np.uint8)
        for time, channel, _rising in chunks:
            keep = np.isin(channel, channels)
            t = np.concatenate([pend_t, np.asarray(time, np.int64)[keep]])
            c = np.concatenate([pend_c, np.asarray(channel, np.uint8)[keep]])
            if not len(t):
                continue
            if t[0] < state["pos"] or (state["pos"] == 0 and t[0] <= 0):
                raise LatscopeError("events must be in time order and after sample 0")
            limit = int(t[-1])
            cut = np.searchsorted(t, limit)
            emit(limit, t[:cut], c[:cut])
            pend_t, pend_c = t[cut:], c[cut:]
        end = total_samples if total_samples is not None else \
            (int(pend_t[-1]) + 1 if len(pend_t) else state["pos"])
        emit(end, pend_t, pend_c)
        return state["pos"]


def have_sigrok_cli():
    """True when ``sigrok-cli`` is on the PATH."""
    import shutil  # here, not at the top: ``latscope analyze FILE.sr`` only needs the edges
    return shutil.which("sigrok-cli") is not None


_LINE = re.compile(r"^(\d+)-(\d+) jitter-1: (.*)$")


def sigrok_jitter(path, clk, sig, *, clk_polarity="falling", sig_polarity="rising", timeout=3600):
    """Run sigrok-cli's ``jitter`` decoder on a session file; return each pair's sample numbers.

    Parameters
    ----------
    path : str
    clk, sig : str
        Probe names of the start (``clk``) and stop (``sig``) channels.
    clk_polarity, sig_polarity : {"rising", "falling", "both"}

    Returns
    -------
    start, stop : ndarray of int64
        Sample number of each start edge and of the stop edge the decoder paired with it.
    """
    if not have_sigrok_cli():
        raise LatscopeError("sigrok-cli is not installed (Debian package sigrok-cli)")
    cmd = ["sigrok-cli", "-i", str(path), "-P",
           f"jitter:clk={clk}:sig={sig}:clk_polarity={clk_polarity}:sig_polarity={sig_polarity}",
           "-A", "jitter=jitter", "--protocol-decoder-samplenum"]
    import subprocess
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise LatscopeError(f"sigrok-cli failed ({proc.returncode}): {proc.stderr.strip()}")
    starts, stops = [], []
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if m:
            starts.append(int(m.group(1)))
            stops.append(int(m.group(2)))
    return np.array(starts, dtype=np.int64), np.array(stops, dtype=np.int64)


def edges_from_samples(blocks, bits, channels=None):
    """Edges of the probes ``bits`` in consecutive sample blocks.

    The same edges as :meth:`latscope.capture.files.sigrok.SrReader.iter_edges`, from the same code
    (:func:`latscope.capture.files.sigrok.edges_of_blocks`); the first sample sets the initial
    levels and is not an edge.

    Parameters
    ----------
    blocks : iterable of (first_sample_index, samples)
        As :meth:`SrReader.iter_samples` yields them (unsigned integer arrays).
    bits : sequence of int
        Probe bit of each output channel.
    channels : sequence of int, optional
        Channel number to report for each bit (default ``0, 1, ...``).

    Yields
    ------
    time, channel, rising : ndarray
        Sample index of the first sample at the new level, channel, edge direction; sorted by
        time, then channel.
    """
    return edges_of_blocks(blocks, bits, channels)
