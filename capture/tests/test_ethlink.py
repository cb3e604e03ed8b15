"""The Ethernet link state the gateware reports (``capture/link/ethlink.py``): decoded from the
STATUS reply of an emulated instrument reporting each speed and duplex through the Transport
interface, the refusal of every state but 1000 Mb/s full duplex, and the decoder tied to the
``HeartbeatStatus`` table of ``docs/stream-format.md``."""

import doctest
import itertools
import pathlib
import re

import pytest

from latscope import LatscopeError
from latscope.capture.link import ethlink
from latscope.capture.link.ethlink import EthernetLink, check_ethernet_link, ethernet_link, refusal
from latscope.capture.link.session import Instrument
from latscope.capture.link.transport import EmulatedInstrument, EmulatedTransport

SPEC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "stream-format.md"
STATES = list(itertools.product((False, True), (10, 100, 1000), (False, True)))


def test_module_doctests():
    result = doctest.testmod(ethlink)
    assert result.attempted >= 4 and result.failed == 0


def test_decoder_agrees_with_the_spec_table():
    """Each ``eth_*`` field's offset and width as the spec's HeartbeatStatus table gives them."""
    text = SPEC.read_text()
    table = text[text.index("### HeartbeatStatus"):text.index("### EthSpeed")]
    rows = {m[1]: (int(m[2]), int(m[3]))
            for m in re.finditer(r"^\| (eth_\w+) +\| (\d+) +\| (\d+) ", table, re.M)}
    assert rows == {"eth_present": (3, 1), "eth_link": (4, 1), "eth_speed": (5, 2),
                    "eth_full_duplex": (7, 1)}
    speeds = text[text.index("### EthSpeed"):]
    codes = {int(m[2]): int(m[1]) for m in re.finditer(r"^\| MBPS_(\d+) +\| (\d) ", speeds, re.M)}
    assert codes == {0: 10, 1: 100, 2: 1000}
    for value in range(256):
        got = ethernet_link(value)
        bits = {k: (value >> off) & ((1 << w) - 1) for k, (off, w) in rows.items()}
        assert got.present == bool(bits["eth_present"]) and got.link == bool(bits["eth_link"])
        assert got.full_duplex == bool(bits["eth_full_duplex"])
        assert got.speed_mbps == codes.get(bits["eth_speed"])      # code 3: reserved, None


@pytest.mark.parametrize("link,speed,full", STATES)
def test_each_speed_and_duplex_over_the_transport(link, speed, full):
    emu = EmulatedInstrument([], [], [], eth_link=(link, speed, full))
    inst = Instrument(EmulatedTransport(emu), reply_timeout=0.2)
    status = inst.status()
    assert status["ethernet"] == EthernetLink(True, link, speed, full)
    assert status["armed"] is False and status["selftest"] is False
    if link and speed == 1000 and full:
        assert inst.check_ethernet_link() == status["ethernet"]
        return
    state = f"{speed} Mb/s {'full' if full else 'half'} duplex" if link else \
        "down (the PHY reports no link)"
    with pytest.raises(LatscopeError) as error:
        inst.check_ethernet_link()
    message = str(error.value)
    assert message.startswith(f"Ethernet link must be 1000 Mb/s full duplex, not {state}: ")
    assert "gigabit" in message and "\n" not in message


def test_gateware_without_ethernet_is_not_refused():
    emu = EmulatedInstrument([], [], [])
    inst = Instrument(EmulatedTransport(emu), reply_timeout=0.2)
    link = inst.check_ethernet_link()
    assert link.present is False and link.describe() == "absent" and refusal(link) is None


def test_reserved_speed_code_is_refused():
    link = ethernet_link(0b1111_1000)            # present, link, speed code 3, full duplex
    assert link.speed_mbps is None
    with pytest.raises(LatscopeError, match="not an unknown speed full duplex"):
        check_ethernet_link(link)
