"""One time unit per table or plot, chosen for the data it shows.

>>> time_unit([12.5, 40.0]).name, time_unit([7480.0, 2950.0]).name, time_unit([2.5e6]).name
('ns', 'µs', 'ms')
>>> u = time_unit([7480.0]); u.fmt(7480.0), u.fmt(None), u.fmt(float("nan"))
('7.480', '-', '-')
"""

import dataclasses
import math

__all__ = ["TimeUnit", "time_unit", "NS", "US", "MS"]


@dataclasses.dataclass(frozen=True)
class TimeUnit:
    """A unit for values in ns: its ``name``, ns per unit and the decimals that keep 1 ns."""
    name: str
    ns: float
    decimals: int

    def fmt(self, value_ns):
        """``value_ns`` in this unit as text; ``None``/NaN/inf as ``-``."""
        if value_ns is None or not math.isfinite(value_ns):
            return "-"
        return f"{value_ns / self.ns:.{self.decimals}f}"

    def scale(self, values_ns):
        """Values (ns, array or number) in this unit."""
        return values_ns / self.ns


NS = TimeUnit("ns", 1.0, 1)
US = TimeUnit("µs", 1e3, 3)
MS = TimeUnit("ms", 1e6, 3)


def time_unit(values_ns):
    """The unit in which the median magnitude of ``values_ns`` (finite ones) is at least 1 and
    below 1000: ns, µs or ms. No finite value: µs."""
    finite = sorted(abs(float(v)) for v in values_ns
                    if v is not None and math.isfinite(float(v)) and v != 0)
    if not finite:
        return US
    typical = finite[len(finite) // 2]
    if typical < 1e3:
        return NS
    if typical < 1e6:
        return US
    return MS
