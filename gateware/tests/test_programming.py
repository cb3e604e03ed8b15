"""Programming: openFPGALoader board names, the ECPIX-5 revision from the FTDI's USB IDs, the
instrument's serial port (USB IDs from FTDI's data sheets: FT2232H 0403:6010, FT4232H 0403:6011;
openFPGALoader board names from its board list: ecpix5, ecpix5_r03, icebreaker)."""

import stat

import pytest

from latscope import LatscopeError
from latscope.cli import main
from latscope.commands import gateware as gateware_cli
from latscope.gateware import programming as prog
from latscope.gateware.boards import BOARDS
from latscope.gateware.programming import UsbSerial

EARLY = [UsbSerial("/dev/ttyUSB0", 0x0403, 0x6010, 0), UsbSerial("/dev/ttyUSB1", 0x0403, 0x6010, 1)]
R03 = [UsbSerial(f"/dev/ttyUSB{k}", 0x0403, 0x6011, k) for k in range(4)]
OTHER = [UsbSerial("/dev/ttyACM0", 0x2E8A, 0x000A, 0)]


def test_revision_from_usb_ids():
    assert prog.detect_ecpix5_revision(EARLY + OTHER) == "early"
    assert prog.detect_ecpix5_revision(R03) == "r03"
    with pytest.raises(LatscopeError, match=r"No LambdaConcept ECPIX-5 found: no FTDI FT2232H "
                                            r"\(0403:6010, early\) or FTDI FT4232H \(0403:6011, "
                                            r"r03\) is attached"):
        prog.detect_ecpix5_revision(OTHER)
    with pytest.raises(LatscopeError, match="revision is ambiguous; give --revision early|r03"):
        prog.detect_ecpix5_revision(EARLY + R03)


def test_board_names_and_uart_port():
    assert prog.openfpgaloader_board("ecpix5", "early") == "ecpix5"
    assert prog.openfpgaloader_board("ecpix5", "r03") == "ecpix5_r03"
    assert prog.openfpgaloader_board("icebreaker") == "icebreaker"
    assert prog.uart_port("ecpix5", EARLY, "early") == "/dev/ttyUSB1"
    assert prog.uart_port("ecpix5", R03, "r03") == "/dev/ttyUSB3"
    assert prog.uart_port("icebreaker", EARLY) == "/dev/ttyUSB1"
    assert prog.uart_port("ecpix5", OTHER, "early") is None


def test_interface_from_pyserial_location():
    assert prog.usb_interface("1-1.2:1.3") == 3
    assert prog.usb_interface("3-2:1.1") == 1
    assert prog.usb_interface(None) is None and prog.usb_interface("usb") is None


def test_program_detects_revision_in_dry_run(tmp_path, capsys, monkeypatch):
    bitstream = tmp_path / "x.bit"
    bitstream.write_bytes(b"\0")
    monkeypatch.setattr(prog, "list_usb_serial", lambda: R03)
    monkeypatch.setenv("OPENFPGALOADER", "sh")          # any tool found in PATH
    assert main(["gateware", "program", "--board", "ecpix5", "--bitstream", str(bitstream),
                 "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert f"-b ecpix5_r03 -m {bitstream}" in err
    assert "the instrument's serial port is /dev/ttyUSB3" in err
    monkeypatch.setattr(prog, "list_usb_serial", lambda: OTHER)
    assert main(["gateware", "program", "--board", "ecpix5", "--bitstream", str(bitstream),
                 "--revision", "early", "--dry-run"]) == 0
    assert "-b ecpix5 -m" in capsys.readouterr().err


#: Every build of every board, with each revision of its platform: (build, revision, the
#: openFPGALoader board name, the FTDI ports attached, the instrument's serial port).
BUILDS = [(name, rev, loader, ports, uart)
          for name in sorted(BOARDS)
          for rev, loader, ports, uart in (
              [("early", "ecpix5", EARLY, "/dev/ttyUSB1"), ("r03", "ecpix5_r03", R03,
                                                             "/dev/ttyUSB3")]
              if BOARDS[name].platform_path.startswith("amaranth_boards.ecpix5:")
              else [(None, "icebreaker", EARLY, "/dev/ttyUSB1")])]


def test_every_build_is_covered():
    """The table above names every board in BOARDS and each revision its platform has."""
    assert {b for b, *_ in BUILDS} == set(BOARDS)
    for name, board in BOARDS.items():
        assert {r for b, r, *_ in BUILDS if b == name} == (set(prog.board_revisions(board))
                                                            or {None})


@pytest.fixture
def fake_loader(tmp_path, monkeypatch):
    """An executable standing in for openFPGALoader (it fails if it is ever run), and a guard
    that the command is not started."""
    tool = tmp_path / "openFPGALoader"
    tool.write_text("#!/bin/sh\nexit 99\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("OPENFPGALOADER", str(tool))
    monkeypatch.setenv("ICEPROG", str(tmp_path / "no-iceprog"))

    def refuse(*args, **kwargs):
        raise AssertionError(f"a dry run started {args!r}")
    monkeypatch.setattr(gateware_cli.subprocess, "run", refuse)
    bitstream = tmp_path / "x.bit"
    bitstream.write_bytes(b"\0")
    return str(tool), str(bitstream)


def _program(args, capsys):
    assert main(["gateware", "program", *args, "--dry-run"]) == 0
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("name,revision,loader,ports,uart", BUILDS)
@pytest.mark.parametrize("flash", [False, True])
def test_dry_run_programs_every_build_by_its_platform(name, revision, loader, ports, uart, flash,
                                                      fake_loader, capsys, monkeypatch):
    tool, bitstream = fake_loader
    monkeypatch.setattr(prog, "list_usb_serial", lambda: ports + OTHER)
    args = ["--board", name, "--bitstream", bitstream, *(["--flash"] if flash else [])]
    expected = f"{tool} -b {loader} {'-f' if flash else '-m'} {bitstream}"
    serial = f"latscope: the instrument's serial port is {uart}"
    # the revision detected from the FTDI chip attached, and named on the command line
    assert _program(args, capsys) == [expected, serial]
    if revision is not None:
        assert _program([*args, "--revision", revision], capsys) == [expected, serial]
    assert prog.programmer_command(name, bitstream, flash=flash, revision=revision) == \
        expected.split()


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_revision_is_checked_against_the_board(name, fake_loader, capsys):
    _, bitstream = fake_loader
    args = ["gateware", "program", "--board", name, "--bitstream", bitstream, "--dry-run"]
    if prog.board_revisions(name):
        with pytest.raises(LatscopeError, match="revision must be one of early, r03, not None"):
            prog.openfpgaloader_board(name)
        with pytest.raises(LatscopeError, match="Revision of the LambdaConcept ECPIX-5 must be "
                                                "auto, early, r03, not 'r04'"):
            prog.resolve_revision(name, "r04", R03)
    else:
        assert main([*args, "--revision", "r03"]) == 2
        assert ("Revision of the 1BitSquared iCEBreaker must be auto (it has one revision), "
                "not 'r03'") in capsys.readouterr().err


def test_icebreaker_falls_back_to_iceprog(tmp_path, monkeypatch, capsys):
    """Without openFPGALoader the iCEBreaker is programmed with iceprog (-S: SRAM)."""
    iceprog = tmp_path / "iceprog"
    iceprog.write_text("#!/bin/sh\nexit 99\n")
    iceprog.chmod(iceprog.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("OPENFPGALOADER", str(tmp_path / "none"))
    monkeypatch.setenv("ICEPROG", str(iceprog))
    assert prog.programmer_command("icebreaker", "x.bin") == [str(iceprog), "-S", "x.bin"]
    assert prog.programmer_command("icebreaker", "x.bin", flash=True) == [str(iceprog), "x.bin"]
    for name in ("ecpix5", "ecpix5-x1"):
        with pytest.raises(LatscopeError, match="No programmer for LambdaConcept ECPIX-5"):
            prog.programmer_command(name, "x.bit", revision="early")
