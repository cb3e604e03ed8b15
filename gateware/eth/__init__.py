"""The instrument's own Gigabit Ethernet link: RGMII pins, MAC, UDP/IPv4 streamer, ARP responder.

``model.py`` is the Python reference (frame layouts, checksums, the datagram packing rule);
``mac.py`` the gateware (transmit and receive MAC, streamer, parser) in the 125 MHz ``eth``
domain; ``net.py`` the instrument's addresses as a signal (SET_NET); ``rgmii.py`` the DDR pin
adapters; ``link.py`` the component that joins it all to the
instrument core's byte streams. ``docs/ethernet.md`` specifies the link.
"""
