"""Synthetic event streams with known per-packet latencies, for tests, notebooks and benchmarks.

Each packet is an ``RX_DV`` pulse (the received frame), marker pulses on ``m0`` (``rx.isr``) and
``m2`` (``rx.udp``) after its falling edge, then the reply: an ``m4`` pulse (``tx.send``) and a
``TX_EN`` pulse. Latencies are drawn in whole ticks from shifted gamma distributions, so the truth
is exact. Generation is chunked: any number of events in bounded memory.

>>> chunks = list(synthetic_chunks(1000, chunk_events=300, seed=1))
>>> sum(len(c[0]) for c in chunks), len(chunks)
(1000, 4)
"""

import dataclasses

import numpy as np

__all__ = ["SyntheticSpec", "EVENTS_PER_PACKET", "synthetic_packets", "synthetic_chunks",
           "synthetic_events"]

#: rx_dv, m0, m2, m4, tx_en: one rising and one falling edge each.
EVENTS_PER_PACKET = 10


@dataclasses.dataclass(frozen=True)
class SyntheticSpec:
    """Shape of the synthetic stream, in ticks (default 320 MHz ticks, 3.125 ns).

    ``isr``, ``udp``, ``send``, ``wire``: (shift, gamma shape, gamma scale) of the rx.isr, rx.udp,
    rx.udp->tx.send and tx.wire latencies. ``frame_ticks``: RX_DV/TX_EN pulse width. ``gap``:
    idle ticks between packets. ``pulse``: marker pulse width.
    """
    tick_hz: int = 320_000_000
    isr: tuple = (200, 4.0, 12.0)
    udp: tuple = (2200, 4.0, 40.0)
    send: tuple = (120, 4.0, 4.0)
    wire: tuple = (1000, 4.0, 30.0)
    frame_ticks: int = 1946
    gap: int = 6000
    pulse: int = 30


def _draw(rng, params, n):
    shift, shape, scale = params
    return shift + np.round(rng.gamma(shape, scale, n)).astype(np.int64)


def synthetic_packets(n, *, spec=SyntheticSpec(), seed=0, t0=None):
    """Events and truth of ``n`` packets starting at tick ``t0`` (default: after one idle gap).

    Returns
    -------
    time, channel, rising : ndarray
        Events sorted by time.
    truth : dict of str -> ndarray
        ``rx.isr``, ``rx.udp``, ``tx.wire`` latencies in ticks, ``start`` (rx_dv falling ticks).
    end : int
        First tick after the last packet.
    """
    t0 = spec.gap if t0 is None else t0
    rng = np.random.default_rng(seed)
    isr = _draw(rng, spec.isr, n)
    udp = np.maximum(_draw(rng, spec.udp, n), isr + spec.pulse + 2)
    send_after = _draw(rng, spec.send, n)
    wire = _draw(rng, spec.wire, n)
    rx_busy = spec.frame_ticks + udp + spec.pulse + send_after + wire + spec.frame_ticks
    period = rx_busy + spec.gap
    rx_rise = t0 + np.concatenate([[0], np.cumsum(period[:-1])])
    rx_fall = rx_rise + spec.frame_ticks
    m_isr = rx_fall + isr
    m_udp = rx_fall + udp
    send = m_udp + spec.pulse + send_after
    tx_rise = send + wire
    cols = [(rx_rise, 0, True), (rx_fall, 0, False), (m_isr, 3, True),
            (m_isr + spec.pulse, 3, False), (m_udp, 5, True), (m_udp + spec.pulse, 5, False),
            (send, 7, True), (send + spec.pulse, 7, False), (tx_rise, 1, True),
            (tx_rise + spec.frame_ticks, 1, False)]
    time = np.concatenate([c[0] for c in cols])
    channel = np.concatenate([np.full(n, c[1], np.uint8) for c in cols])
    rising = np.concatenate([np.full(n, c[2], bool) for c in cols])
    order = np.argsort(time, kind="stable")
    truth = {"rx.isr": isr, "rx.udp": udp, "tx.wire": wire, "start": rx_fall}
    end = int(rx_rise[-1] + period[-1]) if n else t0
    return time[order], channel[order], rising[order], truth, end


def synthetic_chunks(n_events, *, chunk_events=1 << 20, spec=SyntheticSpec(), seed=0):
    """Yield ``(time, channel, rising)`` chunks totalling ``n_events`` events, in bounded memory
    (one chunk of packets at a time)."""
    packets_per_chunk = max(1, chunk_events // EVENTS_PER_PACKET)
    t0, made, k = spec.gap, 0, 0
    carry = None
    while made < n_events:
        time, channel, rising, _, t0 = synthetic_packets(packets_per_chunk, spec=spec,
                                                         seed=(seed, k), t0=t0)
        k += 1
        if carry is not None:
            time, channel, rising = (np.concatenate([a, b]) for a, b in zip(carry, (time, channel,
                                                                              rising), strict=True))
        take = min(chunk_events, n_events - made)
        while len(time) >= take and made < n_events:
            yield time[:take], channel[:take], rising[:take]
            made += take
            time, channel, rising = time[take:], channel[take:], rising[take:]
            take = min(chunk_events, n_events - made)
        carry = (time, channel, rising)


def synthetic_events(n_packets, *, spec=SyntheticSpec(), seed=0):
    """All events and the truth of ``n_packets`` packets (see :func:`synthetic_packets`)."""
    time, channel, rising, truth, _ = synthetic_packets(n_packets, spec=spec, seed=seed)
    return time, channel, rising, truth
