"""latscope.capture.link: the link to the instrument. Every transport has the one
:class:`~latscope.capture.link.transport.Transport` interface, so the session code runs the same
over a serial port, a pseudo-terminal, the Ethernet link, a replay or the simulated bench."""

from latscope.capture.link.transport import DEFAULT_BAUD, SerialTransport
from latscope.capture.link.udp import UdpTransport

__all__ = ["open_port"]


def open_port(port, baud=DEFAULT_BAUD):
    """The transport for a ``--port`` value: ``udp://HOST[:PORT]`` opens the Ethernet link
    (:class:`latscope.capture.link.udp.UdpTransport`), anything else a serial device or pty."""
    if isinstance(port, str) and port.startswith("udp://"):
        return UdpTransport.from_url(port)
    return SerialTransport(port, baud)
