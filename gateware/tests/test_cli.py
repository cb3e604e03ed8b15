"""``latscope gateware`` command line (latscope/commands/gateware.py): the build's ``--frames`` and
``--header-bytes`` options reach the core and the summary without running a build (the bitstream
builds themselves are in test_build.py)."""

import json

import pytest
from amaranth.hdl import Fragment

from latscope import LatscopeError
from latscope.cli import main
from latscope.gateware import build
from latscope.gateware.boards import BoardTop, get_board
from latscope.gateware.build import frame_build_options
from latscope.gateware.protocol import FrameRecord
from latscope.gateware.top import LatscopeCore


@pytest.mark.parametrize(("args", "text"), [
    (["--header-bytes", "32"], "--header-bytes needs --frames"),
    (["--frames", "mii", "--header-bytes", "65"], "--header-bytes must be 0 to 64, not 65"),
    (["--frames", "rmii", "--header-bytes", "-1"], "--header-bytes must be 0 to 64, not -1"),
])
def test_header_bytes_refused_before_synthesis(tmp_path, capsys, monkeypatch, args, text):
    def no_build(*a, **k):
        raise AssertionError("build_bitstream must not run")
    monkeypatch.setattr(build, "build_bitstream", no_build)
    code = main(["gateware", "build", "--board", "ecpix5", "--out", str(tmp_path / "b"), *args])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and text in err, err


def test_header_bytes_reach_build_and_summary(tmp_path, capsys, monkeypatch):
    """--frames mii --header-bytes 32: build_bitstream gets the core overrides, the core built
    from them keeps 32 bytes per FRAME record, and the summary (and its text) records them."""
    seen = {}

    def fake_build(board, out_dir=None, **kwargs):
        seen.update(kwargs, board=board)
        overrides = {k: v for k, v in kwargs.items() if k in ("sniffer", "frame_options")}
        return {"board": board, "timing_met": True,
                "frame_capture": build.frame_capture_summary(overrides)}
    monkeypatch.setattr(build, "build_bitstream", fake_build)
    assert main(["gateware", "build", "--board", "ecpix5", "--frames", "mii", "--header-bytes",
                 "32", "--out", str(tmp_path / "b"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["frame_capture"] == {"interface": "mii", "header_bytes": 32}
    assert seen["sniffer"] == "mii" and seen["frame_options"] == {"header_bytes": 32}
    top = BoardTop("ecpix5", sniffer="mii", frame_options={"header_bytes": 32})
    frames = top.core.frames
    assert frames.header_bytes == 32
    assert frames.rx_sniffer.header_bytes == frames.tx_sniffer.header_bytes == 32
    assert frames.classifier.header_bytes == 32
    Fragment.get(top.core, None)          # the core elaborates with them
    top._MustUse__silence = True          # the board top itself needs a platform (pins, PLLs)
    line = [x for x in build.format_summary({**_summary_stub(), **summary}).splitlines()
            if x.startswith("frames")]
    assert line == ["frames      MII sniffers, 32 header bytes kept per FRAME record"]
    # a FRAME record then carries 30 + 32 bytes on the link (docs/stream-format.md section 8)
    from amaranth.lib import data
    assert data.Layout.cast(FrameRecord).size // 8 + 32 == 62


def test_frame_build_options():
    assert frame_build_options(None, None) == {}
    assert frame_build_options("rmii", None) == {"sniffer": "rmii",
                                                "frame_options": {"header_bytes": 0}}
    with pytest.raises(LatscopeError, match="needs --frames"):
        frame_build_options(None, 0)


def _summary_stub():
    return {"title": "t", "capture_clock_mhz": 200, "lanes": 4, "resolution_ns": 1.25,
            "link_clock_mhz": 48, "uart_baud": 12_000_000, "clocks": [], "timing_met": True,
            "resources": {}, "bitstream": "x.bit", "build_seconds": 0}


def test_build_module_doctests():
    import doctest
    result = doctest.testmod(build)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("board", "args", "passed"), [
    ("ecpix5", [], "board default"), ("ecpix5", ["--no-input-delay"], False),
    ("ecpix5", ["--input-delay"], True), ("ecpix5-x1", ["--no-input-delay"], False)])
def test_input_delay_option_reaches_the_build(tmp_path, capsys, monkeypatch, board, args, passed):
    """Without the option the board's default stands; --input-delay/--no-input-delay override it."""
    seen = {}

    def fake_build(board, out_dir=None, **kwargs):
        seen["input_delay"] = kwargs.get("input_delay", "board default")
        return {"board": board, "timing_met": True}
    monkeypatch.setattr(build, "build_bitstream", fake_build)
    assert main(["gateware", "build", "--board", board, "--out", str(tmp_path / "b"), "--json",
                 *args]) == 0
    capsys.readouterr()
    assert seen == {"input_delay": passed}


def test_input_delay_is_the_ecpix5_default():
    """The shipped ecpix5 (x2) core has SET_DELAY's registers, so BoardTop puts a DELAYF before
    each IDDRX2F (test_boards.py); input_delay=False leaves them out; the other boards have none."""
    assert get_board("ecpix5").core_params()["input_delay"] is True
    assert get_board("ecpix5").core_params(input_delay=False)["input_delay"] is False
    for name in ("ecpix5-x1", "icebreaker"):
        assert not get_board(name).core_params().get("input_delay")
    core = LatscopeCore(**get_board("ecpix5").core_params())
    assert "delay_taps" in core.signature.members
    Fragment.get(core, None)             # elaborates with them


@pytest.mark.parametrize("board", ["icebreaker", "ecpix5-x1"])
def test_input_delay_refused_on_boards_without_delay_cells(tmp_path, capsys, monkeypatch, board):
    def no_synthesis(*a, **k):
        raise AssertionError("synthesis must not run")
    monkeypatch.setattr(build, "YowaspEnv", no_synthesis)
    code = main(["gateware", "build", "--board", board, "--out", str(tmp_path / "b"),
                 "--input-delay"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"Input delay lines need an ECP5 build with x2 gearing (DELAYF before IDDRX2F), " \
           f"not board '{board}'" in err
