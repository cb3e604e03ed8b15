"""The instrument's Gigabit Ethernet link as its gateware reports it, and the host's refusal of a
link that cannot carry datagrams.

The gateware reads the PHY's RGMII in-band status (``gateware/eth/inband.py``) and puts it in
``HeartbeatStatus`` bits 3-7 of every heartbeat and STATUS reply (``docs/stream-format.md``):
``eth_present``, ``eth_link``, ``eth_speed`` (:class:`~latscope.gateware.protocol.EthSpeed`) and
``eth_full_duplex``. The link carries datagrams only at 1000 Mb/s full duplex, but the PHY
advertises 10/100/1000: :func:`check_ethernet_link` turns any other state into one line the user
can act on instead of a capture waiting for datagrams that never come.
"""

import dataclasses

from latscope import LatscopeError
from latscope.gateware.codec import unpack
from latscope.gateware.protocol import EthSpeed, HeartbeatStatus

__all__ = ["EthernetLink", "ethernet_link", "refusal", "check_ethernet_link", "GIGABIT_ADVICE"]

#: What to do about a link that is not 1000 Mb/s full duplex.
GIGABIT_ADVICE = ("connect the board's Ethernet port to a gigabit (1000BASE-T) full-duplex port "
                  "with a working cable; RGB LED 0 turns blue when the link is usable "
                  "(docs/ethernet.md)")


@dataclasses.dataclass(frozen=True)
class EthernetLink:
    """The Ethernet link state in a ``HeartbeatStatus`` byte.

    Attributes
    ----------
    present : bool
        The gateware has the Ethernet link (0 on UART-only builds and older gateware); the other
        fields mean nothing without it.
    link : bool
        The PHY reports a link and its receive clock runs.
    speed_mbps : int or None
        10, 100 or 1000 Mb/s; ``None`` for the reserved speed code 3.
    full_duplex : bool
    """
    present: bool
    link: bool
    speed_mbps: int | None
    full_duplex: bool

    @property
    def usable(self):
        """The link carries datagrams: up, 1000 Mb/s, full duplex."""
        return self.present and self.link and self.speed_mbps == 1000 and self.full_duplex

    def describe(self):
        """``"1000 Mb/s full duplex"``, ``"100 Mb/s half duplex"``, ``"down"`` or ``"absent"``."""
        if not self.present:
            return "absent"
        if not self.link:
            return "down"
        speed = "an unknown speed" if self.speed_mbps is None else f"{self.speed_mbps} Mb/s"
        return f"{speed} {'full' if self.full_duplex else 'half'} duplex"

    def to_dict(self):
        return dataclasses.asdict(self) | {"usable": self.usable, "state": self.describe()}


def ethernet_link(status):
    """The :class:`EthernetLink` in a ``HeartbeatStatus`` value (the STATUS reply's or a
    heartbeat's ``status`` byte), decoded with the protocol's layout.

    >>> ethernet_link(0b1101_1000).describe()
    '1000 Mb/s full duplex'
    >>> ethernet_link(0b0011_1000).describe()
    '100 Mb/s half duplex'
    >>> ethernet_link(0b0000_0001).describe()
    'absent'
    """
    fields = unpack(HeartbeatStatus, int(status))
    try:
        speed = int(EthSpeed(fields["eth_speed"]).name.removeprefix("MBPS_"))
    except ValueError:
        speed = None
    return EthernetLink(present=bool(fields["eth_present"]), link=bool(fields["eth_link"]),
                        speed_mbps=speed, full_duplex=bool(fields["eth_full_duplex"]))


def refusal(link):
    """Why ``link`` (an :class:`EthernetLink`) cannot carry datagrams, in one line, or ``None``
    when it can or when the gateware has no Ethernet link (``present`` false: nothing to check).

    >>> refusal(ethernet_link(0b0011_1000))
    'Ethernet link must be 1000 Mb/s full duplex, not 100 Mb/s half duplex'
    """
    if not link.present or link.usable:
        return None
    state = link.describe()
    if state == "down":
        state = "down (the PHY reports no link)"
    return f"Ethernet link must be 1000 Mb/s full duplex, not {state}"


def check_ethernet_link(link):
    """Raise :class:`~latscope.LatscopeError` (:func:`refusal` and what to do) unless ``link``
    carries datagrams or the gateware has no Ethernet link."""
    why = refusal(link)
    if why is not None:
        raise LatscopeError(f"{why}: {GIGABIT_ADVICE}")
