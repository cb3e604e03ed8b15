"""Gate-level equivalence (slow): the iCEBreaker's synthesised netlist and its decoded bitstream
send the same UART bytes at the same times as the RTL, through a whole session; and the pieces
(stimulus, UART decoding, the comparison's message) on their own."""

import shutil

import pytest

from latscope.capture.link.stream import StreamDecoder
from latscope.gateware import gatesim
from latscope.gateware.codec import parse_identify
from latscope.gateware.protocol import Opcode, Status


def _line(data, bit_ps, start=1000, gap=0):
    """TX transitions of ``data`` sent 8N1 from ``start``."""
    out, t = [], start
    level = 1
    for byte in data:
        for bit in [0] + [(byte >> k) & 1 for k in range(8)] + [1]:
            if bit != level:
                out.append((t, bit))
                level = bit
            t += bit_ps
        t += gap
    return out


def test_uart_frames_decode_back_to_back_bytes():
    data = bytes([0x00, 0xFF, 0x55, 0xA5, 0x01, 0x80])
    frames = gatesim.uart_frames(_line(data, 83_336), 83_336)
    assert bytes(f.value for f in frames) == data
    assert [f.start_ps for f in frames] == [1000 + 10 * 83_336 * k for k in range(6)]
    assert all(f.framing_ok for f in frames)


def test_compare_names_the_first_differing_byte():
    a = gatesim.uart_frames(_line(b"\x01\x02\x03", 100), 100)
    b = gatesim.uart_frames(_line(b"\x01\x07\x03", 100), 100)
    assert gatesim.compare_uart(a, a) == 3
    with pytest.raises(AssertionError, match=r"^netlist differs from rtl at byte 1: rtl sent "
                                             r"0x02 at 2000 ps, netlist sent 0x07 at 2000 ps$"):
        gatesim.compare_uart(a, b)
    late = gatesim.uart_frames(_line(b"\x01\x02\x03", 100, gap=1), 100)
    with pytest.raises(AssertionError, match="at byte 1: rtl sent 0x02 at 2000 ps, netlist "
                                             "sent 0x02 at 2001 ps"):
        gatesim.compare_uart(a, late)
    with pytest.raises(AssertionError, match="first unmatched byte 2"):
        gatesim.compare_uart(a, a[:2])


def test_session_stimulus_covers_the_cases():
    stim, counts = gatesim.session_stimulus("icebreaker")
    timing = gatesim.board_timing("icebreaker")
    times = [t for t, _, _ in stim]
    assert times == sorted(set(times))
    half = timing.capture_half_ps
    # Pin changes fall a quarter period after a clock edge (edges are at multiples of `half`),
    # never on one, so zero-delay simulations all sample them alike.
    changes = [(t, p) for (t, p, _), (_, q, _) in zip(stim[1:], stim[:-1], strict=True) if p != q]
    assert changes and all(t % half == half // 2 for t, _ in changes)
    assert counts["commands"] == 11
    assert counts["same_cycle"] > 50 and counts["opposite_lane"] > 20
    assert counts["edge_changes"] > 2000          # random edges plus the overflow burst
    assert all(any(p >> c & 1 for _, p, _ in stim) for c in range(8))


def test_undriven_enable_of_a_decoded_bitstream_is_named():
    text = ("module chip (input a);\nwire n5;\nwire n7;\nassign n7 = 1'b1;\nreg n9;\n"
            "always @(posedge n8) if (n5) n9 <= a;\nalways @(posedge n8) if (n7) n9 <= a;\n")
    assert gatesim.undriven_enables(text) == ["n5"]


def _sim(build_dir, tmp_path, kind, stim, end_ps):
    work = tmp_path / kind
    design, top, _ = gatesim.ice40_sources(build_dir, work, kind)
    lib = gatesim.ice40_cell_library(work)
    (work / "tb.v").write_text(gatesim.testbench(gatesim.port_connections(kind),
                                                 dut_module=top))
    timing = gatesim.board_timing("icebreaker")
    sim = gatesim.GateSim(work, [lib, design, work / "tb.v"],
                          defines={"LATSCOPE_PLL_HALF_PS": timing.capture_half_ps})
    sim.build()
    return gatesim.uart_frames(sim.run(stim, end_ps), timing.tx_bit_ps)


@pytest.fixture(scope="module")
def icebreaker_rtl(tmp_path_factory):
    from latscope.gateware.build import build_bitstream
    tmp = tmp_path_factory.mktemp("gatesim")
    build_bitstream("icebreaker", tmp / "build", log=lambda line: None)
    stim, counts = gatesim.session_stimulus("icebreaker")
    frames = _sim(tmp / "build", tmp, "rtl", stim, counts["end_ps"])
    return tmp, stim, counts, frames


@pytest.mark.slow
def test_rtl_session_is_a_real_session(icebreaker_rtl):
    """The reference run did what the session says: every command answered (the unknown opcode
    refused), IDENTIFY names the board, events arrived and the burst overflowed the FIFO."""
    _, _, counts, frames = icebreaker_rtl
    assert all(f.framing_ok for f in frames)
    decoder = StreamDecoder(lanes=2)
    result = decoder.feed(bytes(f.value for f in frames))
    replies = {r.command_seq: r for r in result.replies}
    assert sorted(replies) == list(range(counts["commands"]))
    assert parse_identify(replies[0].data)["board"] == "icebreaker"
    assert replies[6].status == Status.UNKNOWN_OPCODE
    assert all(r.status == Status.OK for s, r in replies.items() if s != 6)
    assert replies[8].opcode == Opcode.ARM
    assert decoder.counters["frames_bad"] == 0
    assert len(result.time) > 1000
    assert any(loss.cause == "overflow" and loss.lost > 0 for loss in result.losses)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["netlist", "bitstream"])
def test_icebreaker_equals_rtl(icebreaker_rtl, kind):
    if kind == "bitstream" and shutil.which("icebox_vlog") is None:
        pytest.skip("icebox_vlog not found: install Debian's fpga-icestorm to simulate the "
                    "iCEBreaker bitstream (the netlist test still runs)")
    tmp, stim, counts, reference = icebreaker_rtl
    try:
        frames = _sim(tmp / "build", tmp, kind, stim, counts["end_ps"])
    except gatesim.UndecodedBitstream as error:
        pytest.skip(str(error))
    assert gatesim.compare_uart(reference, frames, names=("rtl", kind)) == len(reference)
