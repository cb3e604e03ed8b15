"""Programming: openFPGALoader board names, the ECPIX-5 revision from the FTDI's USB IDs, the
instrument's serial port (USB IDs from FTDI's data sheets: FT2232H 0403:6010, FT4232H 0403:6011)."""

import pytest

from latscope import LatscopeError
from latscope.cli import main
from latscope.gateware import programming as prog
from latscope.gateware.programming import UsbSerial

EARLY = [UsbSerial("/dev/ttyUSB0", 0x0403, 0x6010, 0), UsbSerial("/dev/ttyUSB1", 0x0403, 0x6010, 1)]
R03 = [UsbSerial(f"/dev/ttyUSB{k}", 0x0403, 0x6011, k) for k in range(4)]
OTHER = [UsbSerial("/dev/ttyACM0", 0x2E8A, 0x000A, 0)]


def test_revision_from_usb_ids():
    assert prog.detect_ecpix5_revision(EARLY + OTHER) == "early"
    assert prog.detect_ecpix5_revision(R03) == "r03"
    with pytest.raises(LatscopeError, match=r"No ECPIX-5 found: no FTDI FT2232H \(0403:6010"):
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
    assert prog._interface("1-1.2:1.3") == 3
    assert prog._interface("3-2:1.1") == 1
    assert prog._interface(None) is None and prog._interface("usb") is None


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
