"""The links bench's own arithmetic: wire bytes of the board's datagrams, the stretched echo's
rate, the host UDP path on 127.0.0.1 (small, fast cases; the figures come from `make bench`)."""

import numpy as np

from latscope.capture.transport import encode_frame
from latscope.gateware import linkbench
from latscope.gateware.model_stream import Entry, LinkModel


def test_wire_bytes_count_every_header():
    # three 100-byte frames: one datagram (idle close) of 300 payload bytes
    stream = b"".join(encode_frame(1, i, bytes(90)) for i in range(3))
    wire, n = linkbench.eth_wire_bytes(stream)
    # preamble 8 + Ethernet 14 + IPv4 20 + UDP 8 + payload + FCS 4 + gap 12 (hand count)
    assert (wire, n) == (8 + 14 + 20 + 8 + 300 + 4 + 12, 1)
    # a tiny frame is padded to the 60-byte minimum before the FCS
    wire, n = linkbench.eth_wire_bytes(encode_frame(2, 0, b""))
    assert (wire, n) == (8 + 60 + 4 + 12, 1)


def test_stretched_echo_has_the_asked_rate():
    ticks = np.arange(0, 100_000, 37, dtype=np.int64)
    values = np.arange(len(ticks)) & 1
    t, v = linkbench.stretched((ticks, values), 1e6, 0.001, 320e6)
    rate = (len(t) - 1) / ((t[-1] - t[0]) / 320e6)
    assert abs(rate / 1e6 - 1) < 0.01           # 1 % from rounding the stretched ticks
    assert np.all(np.diff(t) > 0) and len(v) == len(t)


def test_host_udp_path_decodes_every_event():
    model = LinkModel(channels=8, lanes=2, counter_width=48)
    entries = [Entry(0, 100 + 7 * i, edges=1 << (i % 8), levels=(i // 8 % 2) << (i % 8))
               for i in range(5000)]
    stream = model.run(entries + [Entry(1, 1 << 20)])
    events, lost, seconds, sent, received = linkbench.host_udp_rate(stream)
    assert lost == 0 and events == 5000 and received == sent and seconds > 0
