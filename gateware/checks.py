"""Argument checks shared by the gateware components' constructors.

A constructor validates its parameters inside ``with rejected(self):`` and with :func:`check`,
whose messages follow the house form "<What> must be <constraint>, not {value!r}":

>>> check("Lane count", 2, 1, 8)
>>> check("Lane count", 0, 1, 8)
Traceback (most recent call last):
    ...
TypeError: Lane count must be an integer in 1..8, not 0
"""

from contextlib import contextmanager

__all__ = ["check", "rejected"]


@contextmanager
def rejected(component):
    """Mark a component whose constructor rejects its arguments as used, so that Amaranth does
    not also warn that it was created but never elaborated."""
    try:
        yield
    except Exception:
        component._MustUse__used = True
        raise


def check(name, value, low, high=None):
    """Raise ``TypeError`` unless ``value`` is an integer (not a bool) in ``low..high``
    (``high=None``: no upper bound); ``name`` begins the message."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low \
            or (high is not None and value > high):
        bound = f"an integer >= {low}" if high is None else f"an integer in {low}..{high}"
        raise TypeError(f"{name} must be {bound}, not {value!r}")
