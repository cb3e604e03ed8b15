"""``gateware/checks.py``: the constructor checks every gateware component shares."""

import doctest

import pytest
from amaranth.hdl import Fragment, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from latscope.gateware import checks
from latscope.gateware.checks import check, rejected


def test_module_doctests():
    result = doctest.testmod(checks)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("value", "high", "message"), [
    (0, 8, "Lane count must be an integer in 1..8, not 0"),
    (9, 8, "Lane count must be an integer in 1..8, not 9"),
    (True, 8, "Lane count must be an integer in 1..8, not True"),
    (2.0, None, "Lane count must be an integer >= 1, not 2.0"),
])
def test_check_rejects_with_the_house_message(value, high, message):
    with pytest.raises(TypeError) as error:
        check("Lane count", value, 1, high)
    assert str(error.value) == message


def test_check_accepts_the_bounds():
    for value in (1, 8):
        check("Lane count", value, 1, 8)
    check("FIFO depth", 1 << 40, 1)


def test_rejected_passes_the_error_on():
    class Part(wiring.Component):
        def __init__(self, lanes):
            super().__init__({"o": Out(1)})
            with rejected(self):
                check("Lane count", lanes, 1, 8)

        def elaborate(self, platform):
            return Module()

    with pytest.raises(TypeError, match="^Lane count must be an integer in 1..8, not 0$"):
        Part(0)
    assert isinstance(Fragment.get(Part(8), None), Fragment)   # elaborated, so used
