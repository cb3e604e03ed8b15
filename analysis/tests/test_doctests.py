"""Run the examples in every analysis module's docstrings."""

import doctest
import importlib

import pytest

MODULES = ["definitions", "pairing", "hdr", "stats", "engine", "compare", "report.tables", "synth",
           "grouping", "units", "report.figures", "report.labels", "report.paper",
           "frames", "api", "store", "gate", "history", "ambiguity", "marker_identity"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(f"latscope.analysis.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
