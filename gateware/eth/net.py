"""The instrument's own addresses as a gateware signal: the SET_NET layout and its reset value.

The command handler (:class:`~latscope.gateware.control.Control`) holds these registers and the
Ethernet link (:class:`~.link.EthLink`) uses them; both import them from here.
"""

from amaranth.lib import data

from .model import DEFAULT_NET

__all__ = ["NetLayout", "net_init"]

#: The instrument's own addresses (SET_NET); ``port`` is the UDP port it listens and sends on.
NetLayout = data.StructLayout({"mac": 48, "ip": 32, "port": 16})


def net_init(net=DEFAULT_NET):
    """Initial value of a :data:`NetLayout` signal for a :class:`~.model.NetConfig`."""
    return {"mac": net.mac, "ip": net.ip, "port": net.port}
