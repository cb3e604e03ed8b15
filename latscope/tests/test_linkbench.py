"""The links bench's own arithmetic: wire bytes of the board's datagrams, the stretched echo's
rate, the host UDP path on 127.0.0.1 (small, fast cases; the figures come from `make bench`)."""

import numpy as np
import pytest

from latscope.bench import linkbench
from latscope.capture.link.transport import encode_frame
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


def _packer_by_bytes(stream, chunks, max_frame):
    """The packing rule one byte at a time, as docs/ethernet.md states it: a datagram closes at
    the end of a frame once it holds ``1472 - max_frame`` bytes (the reference for the packer's
    frame-at-a-time walk)."""
    out, buf, header, left = [], bytearray(), bytearray(), None
    for chunk in chunks:
        for byte in chunk:
            buf.append(byte)
            if left is None:
                header.append(byte)
                if len(header) == 6:
                    left, header = int.from_bytes(header[4:6], "little") + 4, bytearray()
                continue
            left -= 1
            if left == 0:
                left = None
                if len(buf) >= 1472 - max_frame:
                    out.append(bytes(buf))
                    buf.clear()
    if buf and left is None and not header:
        out.append(bytes(buf))
    return out


def test_packer_walks_frames_like_the_byte_rule():
    from latscope.gateware.eth.model import DatagramPacker
    rng = np.random.default_rng(7)
    stream = b"".join(encode_frame(1 + (i % 3), i, bytes(rng.integers(0, 256, int(n), np.uint8)))
                      for i, n in enumerate(rng.integers(0, 1025, 300)))
    for max_frame in (1046, 200):
        for trial in range(4):
            cuts = np.sort(rng.integers(0, len(stream), 40 if trial else 0))
            chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
            packer = DatagramPacker(max_frame=max_frame)
            got = [d for c in chunks for d in packer.feed(c)] + packer.idle()
            assert got == _packer_by_bytes(stream, chunks, max_frame)
            assert b"".join(got) == stream


class _FourLaneCore:
    core_params = {"lanes": 4}


def test_play_refuses_a_stimulus_for_other_lanes():
    # a 2-lane stimulus on the 4-lane core leaves lanes 2-3 low: every high level would become
    # a pulse train (the links bench once ran the ECPIX-5 echo that way)
    with pytest.raises(ValueError, match="stimulus for 2 lanes on a core with 4"):
        linkbench.play(_FourLaneCore(), np.array([10]), np.array([1]), 4, 800e6, 2)


def _ecpix5_instrument():
    from latscope.bench.gateware import sim_instrument
    from latscope.gateware.boards import BOARDS
    board = BOARDS["ecpix5"]
    inst = sim_instrument(board)
    inst.build(verbose=False)
    return inst, board


@pytest.mark.slow
def test_echo_streamed_in_blocks_sends_the_same_bytes():
    # Cutting the stimulus into blocks (here of 40 packets) must not change one byte the
    # gateware sends: compared with the same echo played as one command stream.
    inst, board = _ecpix5_instrument()
    out = linkbench.echo_stream(inst, board, 300, 4, block_packets=40, keep_bytes=1 << 30)
    ticks, values, _ = linkbench.echo_base(board, 300)
    whole = linkbench.play(inst, ticks, values, 4, board.tick_hz, board.lanes)
    assert out["data"] == whole["data"] and out["bytes"] == len(whole["data"])
    # 300 packets x 14 events (el-dm-64: RX_DV, TX_EN and 5 markers, both edges)
    assert out["events"] == out["expected"] == whole["events"] == 300 * 14
    assert out["lost"] == 0 and out["mismatched"] == 0


@pytest.mark.slow
def test_line_rate_echo_over_ethernet_loses_nothing():
    # The bench's figure, shorter: 2x10^4 packets (make bench runs 10^6) at the Ethernet
    # link's modelled byte rate (one byte per 4 capture cycles); every event at its stimulus
    # tick, no frame lost (sequence numbers and event indices checked by the decoder).
    inst, board = _ecpix5_instrument()
    out = linkbench.echo_stream(inst, board, 20_000, 4)
    assert out["lost"] == 0 and out["mismatched"] == 0
    assert out["events"] == out["expected"] == 20_000 * 14
    assert out["datagrams"] > 0 and out["wire_bytes"] > out["bytes"]
