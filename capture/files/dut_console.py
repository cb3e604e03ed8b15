"""Zephyr's own packet times as the DUT firmware prints them on its console, per batch.

The firmware (``zephyr-app``, ``CONFIG_LATSCOPE_TIME_STATS_REPORT`` with
``CONFIG_NET_PKT_RXTIME_STATS``/``TXTIME_STATS``) prints one line per batch::

    latscope-netstats: t=<cycles> hz=<rate> rx_n=<packets> rx_us=<sum> tx_n=<packets> tx_us=<sum>

``t`` is the DUT's cycle counter at the report; the four numbers are the change since the
previous line: packets Zephyr timed and the sum of their per-packet times in whole µs (Zephyr
floors each packet's time to whole µs before adding it). The line is written by
``zephyr-app/lib/latscope_core/src/time_stats.c``; ``docs/zephyr-app.md`` ("Zephyr's own
timing") is the spec. :func:`parse_time_stats` reads it; :func:`time_stats_metadata` is the form
a capture's metadata carries (key ``dut_time_stats``), which ``latscope analyze`` puts beside the
wire's stages.
"""

import re
from dataclasses import dataclass

import numpy as np

from latscope import LatscopeError

__all__ = ["LINE", "TimeStatsBatches", "parse_time_stats", "time_stats_metadata"]

#: One report line (leading text such as a log prefix is allowed before it).
LINE = re.compile(r"latscope-netstats: t=(\d+) hz=(\d+) rx_n=(\d+) rx_us=(\d+) "
                  r"tx_n=(\d+) tx_us=(\d+)\s*$")


@dataclass(frozen=True)
class TimeStatsBatches:
    """Batches of Zephyr's packet time statistics, one entry per console line (arrays, int64).

    Attributes
    ----------
    t_cycles, hz : numpy.ndarray
        The DUT's cycle counter at each report and the rate the firmware believes it runs at.
    rx_n, rx_us, tx_n, tx_us : numpy.ndarray
        Packets timed in the batch and the sum of their times, µs, per direction.
    """

    t_cycles: np.ndarray
    hz: np.ndarray
    rx_n: np.ndarray
    rx_us: np.ndarray
    tx_n: np.ndarray
    tx_us: np.ndarray

    def __len__(self):
        return len(self.t_cycles)

    @property
    def t_ns(self):
        """DUT time of each report, ns, at the firmware's own cycle rate (``hz``)."""
        whole, rest = np.divmod(self.t_cycles, self.hz)     # no int64 overflow for long runs
        return whole * 1_000_000_000 + rest * 1_000_000_000 // self.hz

    def select(self, keep):
        """The batches where boolean array ``keep`` is true."""
        return TimeStatsBatches(*(a[keep] for a in (self.t_cycles, self.hz, self.rx_n,
                                                    self.rx_us, self.tx_n, self.tx_us)))


def parse_time_stats(text):
    """Every ``latscope-netstats:`` line of a console log, in order.

    >>> text = "x\\nlatscope-netstats: t=200 hz=100 rx_n=3 rx_us=36 tx_n=2 tx_us=9\\n"
    >>> b = parse_time_stats(text)
    >>> b.t_ns.tolist(), b.rx_n.tolist(), b.rx_us.tolist(), b.tx_n.tolist(), b.tx_us.tolist()
    ([2000000000], [3], [36], [2], [9])
    """
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if "latscope-netstats:" not in line:
            continue
        m = LINE.search(line)
        if m is None:
            raise LatscopeError(f"time statistics line {number} must be 'latscope-netstats: "
                                f"t=.. hz=.. rx_n=.. rx_us=.. tx_n=.. tx_us=..', not {line!r}")
        t, hz, *counts = (int(x) for x in m.groups())
        if hz <= 0:
            raise LatscopeError(f"time statistics hz must be positive, not {hz!r}")
        rows.append((t, hz, *counts))
    arr = np.array(rows, dtype=np.int64).reshape(-1, 6)
    return TimeStatsBatches(*(arr[:, k].copy() for k in range(6)))


def time_stats_metadata(batches, source, t_ns=None):
    """The capture-metadata form (key ``dut_time_stats``) of some batches; ``t_ns`` puts the
    reports on the capture's own timeline (default: :attr:`TimeStatsBatches.t_ns`).

    >>> b = parse_time_stats("latscope-netstats: t=5 hz=1000000000 rx_n=1 rx_us=7 tx_n=0 tx_us=0")
    >>> time_stats_metadata(b, "console")["batches"]
    [{'t_ns': 5, 'rx_n': 1, 'rx_us': 7, 'tx_n': 0, 'tx_us': 0}]
    """
    keys = ("t_ns", "rx_n", "rx_us", "tx_n", "tx_us")
    t_ns = batches.t_ns if t_ns is None else np.asarray(t_ns)
    return {"format": "latscope-netstats", "source": source,
            "batches": [dict(zip(keys, (int(v) for v in row), strict=True))
                        for row in zip(t_ns, batches.rx_n, batches.rx_us,
                                       batches.tx_n, batches.tx_us, strict=True)]}
