"""Measurement definitions: defaults, parsing, errors, channel resolution."""

import pytest

from latscope import LatscopeError
from latscope.analysis.definitions import (
    Endpoint,
    default_definitions,
    load_definitions,
    parse_definitions,
    parse_endpoint,
    resolve_channel,
)


def test_defaults_cover_the_standard_markers():
    d = default_definitions()
    spans = {m.name: (str(m.start), str(m.stop), m.direction) for m in d.measurements}
    assert spans["rx.isr"] == ("rx_dv falling", "m_isr rising", "rx")
    assert spans["rx.copy"] == ("rx_dv falling", "m_copy rising", "rx")
    assert spans["rx.udp"] == ("rx_dv falling", "m_udp rising", "rx")
    assert spans["rx.fast"] == ("rx_dv falling", "m_fast rising", "rx")
    assert spans["tx.wire"] == ("m_send rising", "tx_en rising", "tx")
    assert spans["tx.xmit"] == ("m_xmit rising", "tx_en rising", "tx")
    assert {s.name: (s.start, s.stop) for s in d.stages}["rx.ipudp"] == ("rx.copy", "rx.udp")


def test_round_trip_through_dict():
    d = default_definitions()
    assert parse_definitions(d.to_dict()) == d


def test_arrow_forms_and_start_stop_keys():
    d = parse_definitions({"measurement": {
        "a": {"span": "rx_dv falling → m0 rising", "window_ns": 5},
        "b": {"start": "m4 rising", "stop": "tx_en rising"}}})
    assert d.measurements[0].stop == Endpoint("m0", True)
    assert d.measurements[0].window_ns == 5.0
    assert d.measurements[1].direction == "rx"      # name does not start with "tx"


@pytest.mark.parametrize("tables, message", [
    ({"measurement": {"a": {"span": "rx_dv falling"}}},
     "measurement 'a': span must be 'START -> STOP', not 'rx_dv falling'"),
    ({"measurement": {"a": {"span": "rx_dv down -> m0 rising"}}},
     "an edge is '<channel> rising|falling', not 'rx_dv down'"),
    ({"measurement": {"a": {"span": "rx_dv falling -> m0 rising", "direction": "up"}}},
     "measurement 'a': direction must be 'rx' or 'tx', not 'up'"),
    ({"measurement": {"a": {"span": "rx_dv falling -> m0 rising", "window_ns": 0}}},
     r"measurement 'a': window_ns must be a positive number of ns up to 3\.6e\+12 \(one "
     r"hour\), not 0"),
    ({"measurement": {"a": {"span": "rx_dv falling -> m0 rising", "association": "magic"}}},
     "measurement 'a': association must be one of next, sequence, not 'magic'"),
    ({"measurement": {"a": {"span": "rx_dv falling -> m0 rising", "colour": 1}}},
     "measurement 'a': unknown key\\(s\\) colour"),
    ({"measurement": {"a": {"span": "rx_dv falling -> m0 rising", "after": "b"}}},
     "measurement 'a': after='b' is not another defined measurement"),
    ({"measurement": {"a": {"span": "rx_dv falling -> m0 rising"},
                      "b": {"span": "m4 rising -> m1 rising", "after": "a"}}},
     "measurement 'b': after='a' needs the same start edge as 'a' \\(rx_dv falling\\), "
     "not m4 rising"),
    ({"measurement": {}}, "definitions hold no measurement"),
    ({"measurement": {"a": {"start": "rx_dv falling"}}},
     "measurement 'a' needs 'span' or both 'start' and 'stop'"),
    ({"measurements": {}}, "unknown definitions table\\(s\\): measurements"),
])
def test_errors(tables, message):
    with pytest.raises(LatscopeError, match=message):
        parse_definitions(tables)


def test_select():
    d = default_definitions().select(["rx.copy", "rx.udp"])
    assert d.names() == ["rx.copy", "rx.udp"]
    assert [s.name for s in d.stages] == ["rx.ipudp"]
    with pytest.raises(LatscopeError, match="unknown measurement\\(s\\) rx.nope; defined: "):
        default_definitions().select(["rx.nope"])


def test_load_file(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text('[measurement."x"]\nspan = "rx_dv falling -> m1 rising"\n')
    assert load_definitions(path).names() == ["x"]
    path.write_text("[measurement\n")
    with pytest.raises(LatscopeError, match="is not valid TOML"):
        load_definitions(path)
    with pytest.raises(LatscopeError, match="cannot read definitions"):
        load_definitions(tmp_path / "missing.toml")


def test_resolve_channel():
    # standard roles, meanings, aliases; a sigrok import names channels by the --map roles
    assert resolve_channel("rx_dv") == 0 and resolve_channel("m4") == 7
    assert resolve_channel("rx.udp") == 5 and resolve_channel("m_udp") == 5
    assert resolve_channel("m_xmit") is None
    assert resolve_channel("m_xmit", markers={"m3": "tx.xmit"}) == 6
    sigrok = {0: "rx_dv", 1: "m_isr"}
    assert resolve_channel("m_isr", sigrok, {}) == 1
    assert resolve_channel("rx.isr", sigrok, {}) is None
    assert parse_endpoint("m_send Rising") == Endpoint("m_send", True)
