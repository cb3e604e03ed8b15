"""The metadata facts the analysis reads (capture/files/metadata.py) and the one reader that parses
them (capture/files/open.py): their docstring examples, and each origin and refusal."""

import doctest

import pytest

from latscope import LatscopeError
from latscope.capture.files import metadata
from latscope.capture.files import open as open_module


@pytest.mark.parametrize("module", [metadata, open_module], ids=["metadata", "open"])
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("meta, origin", [
    ({}, "measured"),
    ({"instrument": {"simulated": True}}, "simulated"),
    ({"simbench": {"profile": "gem-64"}}, "simulated"),
    ({"source": "sigrok"}, "imported"),
    ({"replay": {"source_file": "x.vcd"}, "instrument": {"simulated": True}}, "replayed"),
])
def test_origin(meta, origin):
    assert metadata.origin(meta) == origin


def test_offsets_padded_and_refused():
    assert metadata.channel_offsets({}) is None
    assert metadata.channel_offsets({"channel_offsets_ticks": [1]}, 3).tolist() == [1, 0, 0]
    with pytest.raises(LatscopeError, match="must be a list of whole ticks per channel, "
                                            "not {'rx_dv': 1}"):
        metadata.channel_offsets({"channel_offsets_ticks": {"rx_dv": 1}})
