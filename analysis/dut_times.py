"""Zephyr's own packet times beside the wire's truth: how far the DUT's number is, per stage.

Zephyr's ``CONFIG_NET_PKT_RXTIME_STATS``/``TXTIME_STATS`` time every packet in software and keep
a sum (whole µs per packet, floored) and a count; the latscope firmware prints them per batch
(``latscope.capture.files.dut_console``). What each one times, and the wire stage that spans
the same packet most closely (``DUT_QUANTITIES``):

* ``rx_time``: the ``net_pkt`` allocated in the driver's receive path -> the socket's receive
  returns (``subsys/net/lib/sockets/sockets.c``; socket path only). The wire's ``rx.udp`` runs
  from the request's last bit (RX_DV falling) to the same return: the difference is what Zephyr
  cannot see (the MAC, DMA, interrupt entry and the driver up to the allocation).
* ``tx_time``: the ``net_pkt`` allocated at the send call -> the L2's send returned
  (``net_if.c``; every path, the fast track's reply included, whose packet was allocated at
  *receive*). The wire's ``tx.wire`` runs from the send call to the reply's first bit (TX_EN
  rising): Zephyr's number ends when the driver's send returns, which on the Zynq GEM is after
  TX completion, i.e. after the first bit.

Pure: numbers in, a named result out.
"""

import math
from dataclasses import asdict, dataclass

import numpy as np

from latscope import LatscopeError

__all__ = ["DUT_QUANTITIES", "DUT_FLOOR_NS", "DutBesideWire", "dut_beside_wire",
           "dut_times_beside_stats"]

#: Zephyr's quantity -> (wire stage it is compared with, what Zephyr times).
DUT_QUANTITIES = {
    "rx_time": ("rx.udp", "net_pkt allocated in the driver's receive path -> socket receive "
                          "returns (socket path only)"),
    "tx_time": ("tx.wire", "net_pkt allocated -> the L2's send returned (GEM: after TX "
                           "completion; fast track: allocated at receive)"),
}

#: Zephyr floors each packet's time to whole µs: its mean lies up to this much below the true one.
DUT_FLOOR_NS = 1000.0


@dataclass(frozen=True)
class DutBesideWire:
    """One of Zephyr's quantities beside a wire stage over the same batches.

    Attributes
    ----------
    quantity, stage : str
        Zephyr's quantity (``rx_time``/``tx_time``) and the wire stage.
    dut_n : int
        Packets Zephyr timed.
    dut_mean_ns : float
        Zephyr's mean, ns (from whole µs per packet: the true mean lies in
        ``[dut_mean_ns, dut_mean_ns + DUT_FLOOR_NS)``).
    wire_n : int
        Packets the wire stage measured.
    wire_mean_ns : float
        The wire stage's mean, ns.
    difference_ns : float
        ``dut_mean_ns - wire_mean_ns`` (negative: Zephyr sees less than the wire).
    what : str
        What Zephyr times.
    """

    quantity: str
    stage: str
    dut_n: int
    dut_mean_ns: float
    wire_n: int
    wire_mean_ns: float
    difference_ns: float
    what: str

    def to_dict(self):
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(self).items()}


def dut_beside_wire(dut_n, dut_sum_us, wire_n, wire_mean_ns, *, quantity):
    """Zephyr's mean over some batches beside a wire stage's mean.

    Parameters
    ----------
    dut_n, dut_sum_us : array_like of int
        Per batch: packets Zephyr timed and the sum of their times (µs).
    wire_n : int
        Packets in the wire stage.
    wire_mean_ns : float
        The wire stage's mean (ns).
    quantity : str
        ``"rx_time"`` or ``"tx_time"`` (``DUT_QUANTITIES``).

    Returns
    -------
    DutBesideWire

    Examples
    --------
    >>> r = dut_beside_wire([10, 20], [100, 260], 30, 15_000.0, quantity="rx_time")
    >>> r.stage, r.dut_n, r.dut_mean_ns, r.difference_ns
    ('rx.udp', 30, 12000.0, -3000.0)
    """
    if quantity not in DUT_QUANTITIES:
        raise LatscopeError(f"Zephyr time quantity must be one of {sorted(DUT_QUANTITIES)}, "
                            f"not {quantity!r}")
    n = np.asarray(dut_n, dtype=np.int64)
    s = np.asarray(dut_sum_us, dtype=np.int64)
    if n.shape != s.shape or (n < 0).any() or (s < 0).any():
        raise LatscopeError(f"Zephyr's batch counts and sums must be non-negative and of one "
                            f"length, not {n.tolist()!r} and {s.tolist()!r}")
    total = int(n.sum())
    dut_mean = float(s.sum()) * 1000.0 / total if total else math.nan
    wire_mean = float(wire_mean_ns) if wire_n else math.nan
    stage, what = DUT_QUANTITIES[quantity]
    return DutBesideWire(quantity, stage, total, dut_mean, int(wire_n), wire_mean,
                         dut_mean - wire_mean, what)


def dut_times_beside_stats(batches, stats, *, min_fraction=0.5):
    """Every one of Zephyr's quantities that has packets, beside its wire stage where the
    analysis measured it.

    Zephyr counts every packet of its kind (the control requests and replies that begin and end
    a batch too), the wire stage only the marked ones: a quantity that timed fewer than
    ``min_fraction`` of the stage's packets timed something else (e.g. ``rx_time`` in a
    net_context or fast-track batch is the control request alone) and is left out.

    Parameters
    ----------
    batches : list of dict
        The ``batches`` of a capture's ``dut_time_stats`` metadata (``rx_n``, ``rx_us``,
        ``tx_n``, ``tx_us``).
    stats : dict
        Stage name -> statistics with ``n`` and ``mean_ns``.
    min_fraction : float
        Smallest share of the stage's packet count Zephyr must have timed.

    Returns
    -------
    list of DutBesideWire

    Examples
    --------
    >>> from types import SimpleNamespace as S
    >>> rows = dut_times_beside_stats([{"rx_n": 2, "rx_us": 30, "tx_n": 0, "tx_us": 0}],
    ...                               {"rx.udp": S(n=2, mean_ns=16_500.0)})
    >>> [(r.quantity, r.difference_ns) for r in rows]
    [('rx_time', -1500.0)]
    """
    out = []
    for quantity, (stage, _) in DUT_QUANTITIES.items():
        key = quantity[:2]
        n = [int(b.get(f"{key}_n", 0)) for b in batches]
        s = [int(b.get(f"{key}_us", 0)) for b in batches]
        wire = stats.get(stage)
        if wire is None or not wire.n or sum(n) < min_fraction * wire.n or sum(n) == 0:
            continue
        out.append(dut_beside_wire(n, s, wire.n, wire.mean_ns, quantity=quantity))
    return out
